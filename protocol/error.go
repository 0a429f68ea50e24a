package protocol

import (
	"errors"
	"fmt"
)

// Error codes. Clients map them to exit codes: all are "the request failed"
// (exit 1) to a command-line user.
const (
	CodeBadRequest  = "bad_request"   // malformed or invalid request
	CodeNotFound    = "not_found"     // unknown job, queue or target
	CodeBadState    = "bad_state"     // the job is not in a state that allows this
	CodeForbidden   = "forbidden"     // the connection's role may not do this
	CodeUnsupported = "unsupported"   // unknown op or protocol version
	CodeInternal    = "internal"      // the server failed; see its log
	CodeShutdown    = "shutting_down" // the server is stopping
	CodeBusy        = "busy"          // too many such requests in progress on the connection
	CodeTooLarge    = "too_large"     // the thing asked for is larger than the op serves
)

// Error is an error reply. Msg is one line naming the problem.
type Error struct {
	Code string `json:"code"`
	Msg  string `json:"msg"`
}

func (e *Error) Error() string { return e.Msg }

// Errorf makes an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// AsError returns err as a protocol error, wrapping unknown errors as internal.
func AsError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Code: CodeInternal, Msg: err.Error()}
}

// IsCode reports whether err is a protocol error with the given code.
func IsCode(err error, code string) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Code == code
}
