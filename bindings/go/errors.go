package mcpgw

// #include <mcpgw.h>
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// Error is a failed operation: what kind of failure (Code), a message a person can act on, the
// gateway's HTTP status and detail when it answered, and the sandbox backend's failure when the
// backend (not the command) failed. It never contains the gateway token: the host side never
// holds it.
//
// errors.Is matches it with the Err value of its Code and with its causes; errors.As finds its
// *BackendError. The causes are: the backend failure, the exec function's error, context.Canceled
// for a call its context cancelled (ErrCancelled), context.DeadlineExceeded when the context's
// deadline ended it (ErrDeadline), ErrClosed.
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
	// Backend is the sandbox backend's failure (the container is gone, the daemon unreachable,
	// ...) of an ErrExecFailed error, or nil.
	Backend *BackendError
	// Err is another cause, if any.
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

// Unwrap returns the causes: the backend failure and Err, those that are set.
func (e *Error) Unwrap() []error {
	var causes []error
	if e.Backend != nil {
		causes = append(causes, e.Backend)
	}
	if e.Err != nil {
		causes = append(causes, e.Err)
	}
	return causes
}

// BackendFailureState is what kind of failure of the sandbox backend a BackendError is.
type BackendFailureState string

// The kinds of backend failure.
const (
	// BackendGone: the container or pod does not exist, or it was killed or removed during the
	// command.
	BackendGone BackendFailureState = "gone"
	// BackendNotRunning: it exists but is not running (stopped, paused).
	BackendNotRunning BackendFailureState = "not_running"
	// BackendUnreachable: the daemon or API server cannot be reached.
	BackendUnreachable BackendFailureState = "unreachable"
	// BackendCannotRun: the backend could not start the command (no sh in the image, a refused
	// option).
	BackendCannotRun BackendFailureState = "cannot_run"
)

// BackendError is a failure of the sandbox backend rather than of the command it ran: libmcpgw
// tells them apart (Docker's "No such container", podman's exit 125, kubectl's "Unable to connect
// to the server", a silent exit 137 of a container that no longer runs, ...). An ErrExecFailed
// *Error carries it; find it with errors.As.
type BackendError struct {
	// Backend is "docker", "podman", "kubectl", or the program of an argv prefix.
	Backend string `json:"backend"`
	// Target is the container or pod.
	Target string `json:"target"`
	// ExitCode is the backend client's exit status.
	ExitCode int `json:"exit_code"`
	// State is what kind of failure it is.
	State BackendFailureState `json:"state"`
	// Reason is what the backend said, or what was found out.
	Reason string `json:"reason"`
}

// Error says which backend failed for which target, and why.
func (e *BackendError) Error() string {
	return fmt.Sprintf("%s exec in %s failed (exit %d, %s): %s", e.Backend, e.Target, e.ExitCode, e.State, e.Reason)
}

// errorFromJSON is the error of a DONE action: the library's JSON
// {"code","name","message","http_status","detail","backend"}.
func errorFromJSON(op string, code Code, text []byte) *Error {
	var j struct {
		Message    string        `json:"message"`
		HTTPStatus int           `json:"http_status"`
		Detail     *string       `json:"detail"`
		Backend    *BackendError `json:"backend"`
	}
	if err := json.Unmarshal(text, &j); err != nil {
		j.Message = code.String()
	}
	e := &Error{Op: op, Code: code, Message: withOp(op, j.Message), HTTPStatus: j.HTTPStatus, Backend: j.Backend}
	if j.Detail != nil {
		e.Detail = *j.Detail
	}
	return e
}

// errorFromC copies a library error object; e may be NULL (then only the code is known).
func errorFromC(op string, code Code, e *C.mcpgw_error) *Error {
	err := &Error{Op: op, Code: code, Message: withOp(op, code.String())}
	if e == nil {
		return err
	}
	err.Code = Code(C.mcpgw_error_code(e))
	if m := C.mcpgw_error_message(e); m != nil {
		err.Message = withOp(op, C.GoString(m))
	}
	return err
}

// withOp starts message with the operation's name, unless it already does.
func withOp(op, message string) string {
	if op == "" || strings.HasPrefix(message, op+": ") {
		return message
	}
	return op + ": " + message
}

// contextError is the error of an operation that ended because its context did.
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

// closedError is the error of an operation on a closed client.
func closedError(op string) *Error {
	return &Error{Op: op, Code: CodeInvalidState, Message: op + ": the client is closed", Err: ErrClosed}
}
