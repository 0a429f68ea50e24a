package login

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// SFTP returns the connection's SFTP session, opening it on first use;
// it is shared, safe for concurrent use, and closed with the connection.
// Data staging (package stage) moves files through it.
func (s *SSH) SFTP() (*sftp.Client, error) { return s.sftpClient(context.Background()) }

// sftpClient is SFTP's session. An opening still unanswered once ctx
// (an upload's) has ended and it is taken for stuck (SSH.stuck) is
// given up as a stalled session is (EndSFTP): alone while the
// connection answers a keepalive, else with the connection.
func (s *SSH) sftpClient(ctx context.Context) (*sftp.Client, error) {
	s.sftpMu.Lock()
	defer s.sftpMu.Unlock()
	if s.sftp != nil {
		select {
		case <-s.sftpEnd:
			// Lost (its connection cut, or ended by EndSFTP): a new
			// session is opened, on a new connection if this one is
			// gone too.
			s.sftp.end()
			s.sftp = nil
		default:
			return s.sftp.c, nil
		}
	}
	// An sftp-server that never answers its first packet (stuck on a
	// home whose network filesystem hangs, sshd still answering
	// keepalives) held the opening, and sftpMu, for ever: past the
	// handshake's Timeout the connection is closed, which ends the wait,
	// and the site dials anew.
	unanswered := time.AfterFunc(s.cfg.Timeout, func() { s.client.Close() })
	defer unanswered.Stop()
	var o opening
	returned := make(chan struct{})
	defer close(returned)
	defer context.AfterFunc(ctx, func() {
		if !s.stuck(ctx, returned) {
			return
		}
		if o.pending() && s.probe(s.cfg.Keepalive) != nil && o.pending() {
			s.client.Close()
			return
		}
		o.giveUp()
	})()
	// Concurrent writes (reads are concurrent by default) keep up to 64
	// requests in flight per file, as OpenSSH's sftp does: staging needs
	// it for throughput, and Put verifies what it wrote anyway.
	p, err := openSFTP(s.client, &o, sftp.UseConcurrentWrites(true))
	if err == nil && !o.opened() {
		p.end()
		err = errSFTPEnded
	}
	if err != nil {
		if o.wasCut() {
			// Its sftp-server, hung, holds a session of sshd's as one
			// EndSFTP ended does.
			err = fmt.Errorf("sftp: no answer from the SFTP server before the upload's end: %w", ctx.Err())
			if s.ended >= maxEndedSFTP {
				s.client.Close()
				return nil, &ConnError{err}
			}
			s.ended++
			return nil, err
		}
		if !unanswered.Stop() {
			err = fmt.Errorf("no answer from the SFTP server within %s: %w", s.cfg.Timeout, err)
		}
		return nil, &ConnError{fmt.Errorf("sftp: %w", err)}
	}
	// An OpenSSH sftp-server that announces limits@openssh.com (8.7 and
	// later) takes reads and writes of up to 255 KiB: requests of
	// bigPacket carry a big file in a quarter as many round trips and
	// packets as the 32 KiB every server must take. Others keep 32 KiB.
	if _, ok := p.c.HasExtension("limits@openssh.com"); ok {
		if big, err := openSFTP(s.client, &o, sftp.UseConcurrentWrites(true), sftp.MaxPacketUnchecked(bigPacket)); err == nil {
			if o.opened() {
				p.end()
				p = big
			} else {
				big.end()
			}
		}
	}
	s.sftp, s.sftpEnd = p, make(chan struct{})
	go func(c *sftp.Client, end chan struct{}) {
		c.Wait()
		close(end)
	}(p.c, s.sftpEnd)
	return p.c, nil
}

// opening is an SFTP session being opened, for a deadline to give up.
type opening struct {
	mu   sync.Mutex
	p    *sftpSession // waiting for its server's first answer
	over bool         // given up: an opening to come is cut at once
	cut  bool         // an opening was cut
}

// begin notes p as waiting for its server, or cuts it if given up.
func (o *opening) begin(p *sftpSession) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.over {
		o.cut = true
		p.cutPipes()
		return
	}
	o.p = p
}

// opened notes that the opening's server answered: false if it was cut
// first.
func (o *opening) opened() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.p = nil
	return !o.over
}

func (o *opening) pending() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.p != nil
}

// giveUp cuts the opening waiting, and any to come.
func (o *opening) giveUp() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.over = true
	if o.p != nil {
		o.cut = true
		o.p.cutPipes()
		o.p = nil
	}
}

func (o *opening) wasCut() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cut
}

// bigPacket is the SFTP request size used with servers that take it.
const bigPacket = 128 << 10

// maxEndedSFTP is how many SFTP sessions a connection ends alone
// (EndSFTP) before a stall cuts it instead: sshd keeps a session whose
// sftp-server hangs, child and all, until the child exits, and counts it
// against MaxSessions (10 by default), which the site's commands need.
const maxEndedSFTP = 3

// EndSFTP ends the SFTP session c at once, for a transfer or a call
// through it that stalled (stage.Cutter), or an upload past its deadline
// (Put): every request waiting on it
// returns, and the next use of SFTP opens a new session. An sftp-server
// hung on its filesystem leaves sshd answering, and the connection also
// carries the tunnel placeholders reach the CLS through and the site's
// commands: it is kept if it answers a keepalive within the keepalive
// interval and has ended fewer than maxEndedSFTP sessions alone. Else
// it is cut (Cut), as a peer gone silent is. It reports whether it cut
// the connection. A session ended already (c no longer the
// connection's) is left.
func (s *SSH) EndSFTP(c *sftp.Client) (conn bool) {
	if err := s.probe(s.cfg.Keepalive); err != nil {
		s.Cut()
		return true
	}
	s.sftpMu.Lock()
	p := s.sftp
	if p == nil || p.c != c {
		s.sftpMu.Unlock()
		return false
	}
	if s.ended >= maxEndedSFTP {
		s.sftpMu.Unlock()
		s.Cut()
		return true
	}
	s.ended++
	s.sftp = nil
	s.sftpMu.Unlock()
	p.end()
	return false
}

// errSFTPEnded is what the requests of an SFTP session ended under them
// fail with (the SFTP client reports it as a lost connection).
var errSFTPEnded = errors.New("the SFTP session was ended")

// sftpSession is an SFTP client over a session channel of its own, with
// a pipe and a goroutine between the client and each direction of the
// channel, so that end fails every request of the client at once,
// whatever the channel does. Closing the channel alone would not: x/crypto/ssh
// unblocks a write waiting for window space, and a read, only when the
// peer closes the channel too (or the connection ends), and sshd answers
// a channel's close only once the data it holds for the channel's
// process is written to it (OpenSSH's chan_rcvd_oclose: output "wait
// drain"), which an sftp-server that stopped reading never takes.
type sftpSession struct {
	c        *sftp.Client
	toServer *io.PipeReader // what c writes, for the channel
	toClient *io.PipeWriter // what the channel says, for c
	close    func() error   // sends the channel's close
	once     sync.Once
}

// openSFTP opens a session channel on conn and starts an SFTP client
// on its sftp subsystem; o, if not nil, may give up its wait for the
// server.
func openSFTP(conn *ssh.Client, o *opening, opts ...sftp.ClientOption) (*sftpSession, error) {
	sess, err := conn.NewSession()
	if err != nil {
		return nil, err
	}
	stdin, err := sess.StdinPipe()
	var stdout, stderr io.Reader
	if err == nil {
		stdout, err = sess.StdoutPipe()
	}
	if err == nil {
		stderr, err = sess.StderrPipe()
	}
	if err == nil {
		err = sess.RequestSubsystem("sftp")
	}
	if err != nil {
		sess.Close()
		return nil, err
	}
	// What the server says on stderr is read, and dropped (as
	// sftp.NewClient does): left unread, it would hold the channel's
	// window.
	go io.Copy(io.Discard, stderr)
	return newSFTPSession(stdin, stdout, sess.Close, o, opts...)
}

// newSFTPSession starts an SFTP client writing to stdin and reading
// stdout, a channel's, through pipes (sftpSession); closeChan closes the
// channel. o, if not nil, may cut the session while the client waits
// for the server's first answer.
func newSFTPSession(stdin io.WriteCloser, stdout io.Reader, closeChan func() error, o *opening, opts ...sftp.ClientOption) (*sftpSession, error) {
	cr, sw := io.Pipe() // the client reads what the server says
	sr, cw := io.Pipe() // the server is sent what the client writes
	p := &sftpSession{toServer: sr, toClient: sw, close: closeChan}
	go pumpToServer(stdin, sr)
	go pumpToClient(sw, stdout)
	if o != nil {
		o.begin(p)
	}
	c, err := sftp.NewClientPipe(cr, cw, opts...)
	if err != nil {
		p.cutPipes()
		return nil, err
	}
	p.c = c
	return p, nil
}

// pumpToServer writes what the client writes to the channel, and the
// channel's EOF once the client closes. A write waiting for window space
// the peer does not give holds this goroutine alone, until the channel
// or the connection ends; the client's writes fail once the session is
// ended.
func pumpToServer(stdin io.WriteCloser, from *io.PipeReader) {
	buf := make([]byte, 256<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if _, werr := stdin.Write(buf[:n]); werr != nil {
				from.CloseWithError(werr)
				return
			}
		}
		if err != nil {
			stdin.Close()
			return
		}
	}
}

// pumpToClient hands the client what the channel says, and its end.
func pumpToClient(to *io.PipeWriter, stdout io.Reader) {
	buf := make([]byte, 256<<10)
	for {
		n, err := stdout.Read(buf)
		if n > 0 {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return // ended
			}
		}
		if err != nil {
			to.CloseWithError(err)
			return
		}
	}
}

func (p *sftpSession) cutPipes() {
	p.once.Do(func() {
		p.toServer.CloseWithError(errSFTPEnded)
		p.toClient.CloseWithError(errSFTPEnded)
		// Not waited for: a peer that stopped reading the connection
		// holds it until the connection's end.
		go p.close()
	})
}

// end ends the session at once: every request of its client waiting
// returns, and the channel's close is sent.
func (p *sftpSession) end() {
	p.cutPipes()
	p.c.Close() // returns at once: its reads fail
}
