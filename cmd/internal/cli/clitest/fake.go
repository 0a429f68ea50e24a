// Package clitest serves canned replies to the mq commands, so their
// output can be tested against anything a CLS might send.
package clitest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"

	"github.com/mq-hpc/mq/protocol"
)

// Reply is the canned answer to one op: Body (marshalled) or Err, after
// Stream frames if any.
type Reply struct {
	Stream []any
	Body   any
	Err    *protocol.Error
	// Bodies, if set, answer the requests of the op on one connection in
	// turn (the last one repeats), instead of Body: pages of a listing.
	Bodies []any
	// Seen, if set, is given the request's body before the reply is sent.
	Seen func(body json.RawMessage)
	// Hold, if set, sends the Stream frames and then nothing more: the
	// request stays open (a follow of a job that runs on).
	Hold bool
	// Together, if set, holds the op's replies until that many of its
	// requests are unanswered, then sends them in order: a client that
	// waits for each reply before its next request waits for ever (a
	// test of pipelining).
	Together int
}

// Dial returns a dial function whose connections are served from replies
// by op (hello is answered by itself; an op not listed gets unsupported).
func Dial(replies map[string]Reply) func(context.Context) (io.ReadWriteCloser, error) {
	return func(context.Context) (io.ReadWriteCloser, error) {
		cl, sc := net.Pipe()
		go serve(sc, replies)
		return cl, nil
	}
}

func serve(c net.Conn, replies map[string]Reply) {
	defer c.Close()
	r := protocol.NewReader(c)
	asked := map[string]int{}
	held := map[string][]protocol.Response{}
	for {
		line, err := r.ReadLine()
		if err != nil {
			return
		}
		req, err := protocol.ParseRequest(line)
		if err != nil {
			return
		}
		write := func(resp protocol.Response) bool {
			b, err := protocol.AppendFrame(nil, &resp)
			if err != nil {
				return false
			}
			_, err = c.Write(b)
			return err == nil
		}
		body := func(v any) json.RawMessage {
			b, _ := json.Marshal(v)
			return b
		}
		if req.Op == protocol.OpHello.Name {
			hr := protocol.HelloReply{Proto: protocol.Version, Role: protocol.RoleUser}
			if rep, ok := replies[req.Op]; ok && rep.Body != nil {
				hr = rep.Body.(protocol.HelloReply) // another server's hello
			}
			write(protocol.Response{ID: req.ID, Body: body(hr)})
			continue
		}
		rep, ok := replies[req.Op]
		if !ok {
			write(protocol.Response{ID: req.ID, Err: protocol.Errorf(protocol.CodeUnsupported, "no canned reply for %s", req.Op)})
			continue
		}
		if rep.Seen != nil {
			rep.Seen(req.Body)
		}
		for _, f := range rep.Stream {
			write(protocol.Response{ID: req.ID, More: true, Body: body(f)})
		}
		if rep.Hold {
			continue
		}
		if rep.Err != nil {
			write(protocol.Response{ID: req.ID, Err: rep.Err})
			continue
		}
		b := rep.Body
		if len(rep.Bodies) > 0 {
			b = rep.Bodies[min(asked[req.Op], len(rep.Bodies)-1)]
		}
		asked[req.Op]++
		if rep.Together > 0 {
			if held[req.Op] = append(held[req.Op], protocol.Response{ID: req.ID, Body: body(b)}); len(held[req.Op]) == rep.Together {
				for _, resp := range held[req.Op] {
					write(resp)
				}
				held[req.Op] = nil
			}
			continue
		}
		write(protocol.Response{ID: req.ID, Body: body(b)})
	}
}

// Hostile is text with everything that must not reach a terminal raw:
// an OSC window-title sequence, CSI, a newline forging a row, a tab, a
// carriage return, C1 controls, a bidi override and a byte that is not
// UTF-8.
const Hostile = "evil\x1b]0;pwned\x07\x1b[2J\n42 default forged Q\tx\ry\u0085\u009b\u202e\xe9"

// Raw reports the first raw control byte or sequence of Hostile found in
// out ("" if none). Newlines and tabs the command writes itself are
// expected, so those are checked through the forged text around them.
func Raw(out string) string {
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u0085", "\u009b", "\u202e", "\xe9", "\n42 default forged", "Q\tx"} {
		if strings.Contains(out, bad) {
			return bad
		}
	}
	return ""
}
