// Package protocol is the one request protocol of mq: every client (mqsub,
// mqstat, mqdel, placeholders, the driver) speaks it to the CLS over a Unix
// socket or an SSH channel. Frames are single-line JSON objects; requests
// carry an id, so a client may pipeline many and read replies in any order.
// docs/reference/protocol.md describes it for people.
package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Version is the protocol version spoken by this build. A hello naming
// another version is refused.
const Version = 1

// MaxFrame is the largest frame either side accepts. A peer that sends a
// longer line gets an error and is disconnected: the stream cannot be
// resynchronised safely.
const MaxFrame = 4 << 20

// ErrFrameTooLarge is returned for a line longer than MaxFrame.
var ErrFrameTooLarge = fmt.Errorf("frame exceeds %d bytes", MaxFrame)

// Request is one frame from client to server.
type Request struct {
	ID   uint64          `json:"id"`
	Op   string          `json:"op"`
	Body json.RawMessage `json:"body,omitempty"`
}

// Response is one frame from server to client. A streamed reply sends
// several frames with More set and then a final one without it.
type Response struct {
	ID   uint64          `json:"id"`
	More bool            `json:"more,omitempty"`
	Body json.RawMessage `json:"body,omitempty"`
	Err  *Error          `json:"err,omitempty"`
}

// Reader reads frames, refusing lines over MaxFrame.
type Reader struct {
	r   *bufio.Reader
	buf []byte
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// ReadLine returns the next frame's bytes (without the newline). The slice is
// valid until the next call. Blank lines are skipped.
func (fr *Reader) ReadLine() ([]byte, error) {
	for {
		fr.buf = fr.buf[:0]
		for {
			chunk, err := fr.r.ReadSlice('\n')
			if len(fr.buf)+len(chunk) > MaxFrame+1 {
				return nil, ErrFrameTooLarge
			}
			fr.buf = append(fr.buf, chunk...)
			if err == nil {
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err == io.EOF && len(fr.buf) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line := bytes.TrimRight(fr.buf, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		return line, nil
	}
}

// ReadRequest reads and decodes one request. A line that is not a valid
// request yields a *Error with CodeBadRequest (the connection can go on);
// I/O errors and oversized frames are returned as they are.
func (fr *Reader) ReadRequest() (*Request, error) {
	line, err := fr.ReadLine()
	if err != nil {
		return nil, err
	}
	return ParseRequest(line)
}

// ParseRequest decodes one request line.
func ParseRequest(line []byte) (*Request, error) {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, Errorf(CodeBadRequest, "malformed request: %v", trimJSONError(err))
	}
	if req.Op == "" {
		return &req, Errorf(CodeBadRequest, "request %d has no op", req.ID)
	}
	return &req, nil
}

// ReadResponse reads and decodes one response.
func (fr *Reader) ReadResponse() (*Response, error) {
	line, err := fr.ReadLine()
	if err != nil {
		return nil, err
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("malformed response from server: %w", err)
	}
	return &resp, nil
}

// AppendRequest appends the frame of Request{ID: id, Op: op, Body: body},
// as AppendFrame would, without re-validating body: it must be compact JSON
// from json.Marshal. A request body can be megabytes (bulk.add), and
// encoding/json would scan it all again to compact a json.RawMessage.
func AppendRequest(dst []byte, id uint64, op string, body []byte) ([]byte, error) {
	qop, err := json.Marshal(op)
	if err != nil {
		return dst, err
	}
	if n := len(`{"id":,"op":,"body":}`) + 20 + len(qop) + len(body); n > MaxFrame {
		return dst, fmt.Errorf("%w (%s request of %d bytes)", ErrFrameTooLarge, op, n)
	}
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendUint(dst, id, 10)
	dst = append(dst, `,"op":`...)
	dst = append(dst, qop...)
	if len(body) > 0 {
		dst = append(dst, `,"body":`...)
		dst = append(dst, body...)
	}
	return append(dst, '}', '\n'), nil
}

// AppendResponse appends resp as one line, as AppendFrame would, without
// compacting its Body again: Body must be json.Marshal's output, as every
// reply of the server's is. A listing of a million jobs spent a sixth of
// the CLS's CPU having encoding/json rescan its bodies. A Body with a
// newline in it (no such output has one) goes through AppendFrame.
func AppendResponse(dst []byte, resp *Response) ([]byte, error) {
	if len(resp.Body) == 0 || bytes.IndexByte(resp.Body, '\n') >= 0 {
		return AppendFrame(dst, resp)
	}
	start := len(dst)
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendUint(dst, resp.ID, 10)
	if resp.More {
		dst = append(dst, `,"more":true`...)
	}
	dst = append(dst, `,"body":`...)
	dst = append(dst, resp.Body...)
	if resp.Err != nil {
		e, err := json.Marshal(resp.Err)
		if err != nil {
			return dst[:start], err
		}
		dst = append(append(dst, `,"err":`...), e...)
	}
	if n := len(dst) + 1 - start; n > MaxFrame {
		return dst[:start], fmt.Errorf("%w (%d bytes)", ErrFrameTooLarge, n)
	}
	return append(dst, '}', '\n'), nil
}

// AppendFrame appends v as one JSON line to dst. A line longer than
// MaxFrame is refused (ErrFrameTooLarge, dst unchanged): the peer would
// drop the connection on it.
func AppendFrame(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	if len(b) > MaxFrame {
		return dst, fmt.Errorf("%w (%d bytes)", ErrFrameTooLarge, len(b))
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}

// embeddedNames drops the names of embedded structs from a field's path,
// which encoding/json puts there but the JSON does not have.
var embeddedNames = strings.NewReplacer("JobSpec.", "", "Resources.", "", "fileResources.", "")

func trimJSONError(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s", embeddedNames.Replace(te.Field), te.Type)
		}
		return fmt.Sprintf("expected %s", te.Type)
	}
	return err.Error()
}
