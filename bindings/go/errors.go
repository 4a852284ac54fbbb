package mcpgw

// #include <stdlib.h>
// #include <mcpgw.h>
import "C"

import (
	"context"
	"errors"
	"unsafe"
)

//go:generate go run ./internal/generate -header ../../include/mcpgw.h -rest ../../src/wire/rest.rs -out .

// Code is a libmcpgw result code (mcpgw_result, a uint32): the kind of a failure. The constants
// (CodeNotFound, ...) and the matching Err values are generated from include/mcpgw.h, the one
// list of codes. Errors of this package carry one; test them with errors.Is and the Err values
// rather than by code.
type Code uint32

// String is the library's static text for the code, e.g. "the gateway is not running".
func (c Code) String() string {
	return C.GoString(C.mcpgw_result_message(C.uint32_t(c)))
}

// Name is the code's name after MCPGW_RESULT_, e.g. "NOT_FOUND", as every binding of libmcpgw
// spells it; "" for a value that is not a code this package knows.
func (c Code) Name() string { return codeNames[c] }

// libraryCodes is every code the linked library has (mcpgw_result_codes), for the test that
// compares it with the generated list.
func libraryCodes() map[Code]string {
	var p *C.uint32_t
	var n C.size_t
	C.mcpgw_result_codes(&p, &n)
	codes := map[Code]string{}
	for _, v := range unsafe.Slice(p, int(n)) {
		codes[Code(v)] = C.GoString(C.mcpgw_result_name(v))
	}
	return codes
}

// ErrClosed is the cause of the error a closed Client returns; such errors also match
// ErrInvalidState.
var ErrClosed = errors.New("mcpgw: client closed")

// Error is a failed call: what kind of failure (Code), a message a person can act on, and the
// gateway's HTTP status and detail when it answered. It never contains the gateway token: the
// host side never holds it.
//
// errors.Is matches it with the Err value of its Code, and with its cause (Err): the exec
// function's error for ErrExecFailed, context.Canceled for a cancelled call (ErrCancelled),
// context.DeadlineExceeded when the context's deadline ended the call (ErrDeadline), ErrClosed.
type Error struct {
	// Op is the operation that failed, e.g. "call_tool".
	Op string
	// Code is the kind of failure.
	Code Code
	// Message says what went wrong, starting with the operation's name.
	Message string
	// HTTPStatus is the gateway's HTTP status, or 0 when the gateway did not answer.
	HTTPStatus int
	// Detail is the gateway's detail (or plain-text body), or "" when there is none.
	Detail string
	// Err is the underlying cause, if any.
	Err error
}

// Error returns the message, prefixed with "mcpgw: ".
func (e *Error) Error() string { return "mcpgw: " + e.Message }

// Is reports whether target is the Err value of the error's Code, so that
// errors.Is(err, mcpgw.ErrNotFound) works.
func (e *Error) Is(target error) bool {
	kind, ok := kinds[e.Code]
	return ok && target == kind
}

// Unwrap returns the cause (Err).
func (e *Error) Unwrap() error { return e.Err }

// errorFromC copies a library error; e may be NULL (then only the code is known).
func errorFromC(op string, code Code, e *C.mcpgw_error) *Error {
	err := &Error{Op: op, Code: code, Message: op + ": " + code.String()}
	if e == nil {
		return err
	}
	err.Code = Code(C.mcpgw_error_code(e))
	if m := C.mcpgw_error_message(e); m != nil {
		err.Message = C.GoString(m)
	}
	err.HTTPStatus = int(C.mcpgw_error_http_status(e))
	if d := C.mcpgw_error_detail(e); d != nil {
		err.Detail = C.GoString(d)
	}
	return err
}

// contextError is the error of a call that ended because its context did.
func contextError(op string, ctxErr error) *Error {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		return &Error{Op: op, Code: CodeDeadline, Message: op + ": the context's deadline passed", Err: ctxErr}
	}
	return &Error{Op: op, Code: CodeCancelled, Message: op + ": " + ctxErr.Error(), Err: ctxErr}
}

// invalidArgument is an argument this package refuses before the library sees it.
func invalidArgument(op, message string, cause error) *Error {
	return &Error{Op: op, Code: CodeInvalidArgument, Message: op + ": " + message, Err: cause}
}

// closedError is the error of a call on a closed client.
func closedError(op string) *Error {
	return &Error{Op: op, Code: CodeInvalidState, Message: op + ": the client is closed", Err: ErrClosed}
}
