package mcpgw

// #include <mcpgw.h>
import "C"

import (
	"context"
	"errors"
)

// Code is a libmcpgw result code (the C enum mcpgw_result): the kind of a failure. Errors of
// this package carry one; test them with errors.Is and the Err* values rather than by code.
type Code uint32

// The result codes of libmcpgw, with the values of include/mcpgw.h.
const (
	CodeOK              Code = C.MCPGW_RESULT_OK                  // success
	CodeNullParameter   Code = C.MCPGW_RESULT_NULL_PARAMETER      // a required pointer was NULL: a bug in this package
	CodePanic           Code = C.MCPGW_RESULT_PANIC               // the library panicked: a bug in libmcpgw
	CodeInvalidArgument Code = C.MCPGW_RESULT_INVALID_ARGUMENT    // an unusable value, or HTTP 400, 413, 422
	CodeInvalidState    Code = C.MCPGW_RESULT_INVALID_STATE       // the call does not fit the state of the client or operation
	CodeHostIO          Code = C.MCPGW_RESULT_HOST_IO             // a file on the host could not be read
	CodeExecFailed      Code = C.MCPGW_RESULT_EXEC_FAILED         // the exec function could not run a command
	CodeCommandFailed   Code = C.MCPGW_RESULT_COMMAND_FAILED      // a command failed in the sandbox outside the HTTP exchange
	CodeGatewayDown     Code = C.MCPGW_RESULT_GATEWAY_NOT_RUNNING // no gateway (or another one) answers on the port
	CodeStartFailed     Code = C.MCPGW_RESULT_START_FAILED        // the gateway could not be launched
	CodeUnauthorized    Code = C.MCPGW_RESULT_UNAUTHORIZED        // HTTP 401, or an unreadable token file
	CodeNotFound        Code = C.MCPGW_RESULT_NOT_FOUND           // HTTP 404: unknown MCP or tool
	CodeConflict        Code = C.MCPGW_RESULT_CONFLICT            // HTTP 409: the MCP exists in the scope
	CodeUpstream        Code = C.MCPGW_RESULT_UPSTREAM_ERROR      // HTTP 500, 502, 503: the upstream MCP server failed
	CodeDeadline        Code = C.MCPGW_RESULT_DEADLINE            // a deadline passed (HTTP 504 among others)
	CodeProtocol        Code = C.MCPGW_RESULT_PROTOCOL_ERROR      // an answer that breaks the gateway protocol
)

// String is the library's static text for the code, e.g. "the gateway is not running".
func (c Code) String() string {
	return C.GoString(C.mcpgw_result_message(C.uint32_t(c)))
}

// The kinds of failure. Every error a Client returns is an *Error, which errors.Is matches with
// the value of its kind (the error of a closed client with ErrClosed too; that of a cancelled
// context with none of them: test it with context.Canceled).
var (
	// ErrInvalidArgument: a value given to the client is unusable (a bad name, arguments that
	// are not a JSON object, a NUL byte), or the gateway refused the request as invalid (HTTP
	// 400, 413, 422).
	ErrInvalidArgument = errors.New("mcpgw: invalid argument")
	// ErrInvalidState: the call does not fit the client's state, e.g. StartGateway on a client
	// that already launched one.
	ErrInvalidState = errors.New("mcpgw: invalid state")
	// ErrClosed: the client was closed. Such errors also match ErrInvalidState.
	ErrClosed = errors.New("mcpgw: client closed")
	// ErrHostIO: a file on the host could not be read (EnsureGatewayBinary).
	ErrHostIO = errors.New("mcpgw: host I/O error")
	// ErrExecFailed: the exec function could not run a command in the sandbox; the *Error's
	// Err is what the exec function returned.
	ErrExecFailed = errors.New("mcpgw: exec failed")
	// ErrCommandFailed: a command ran in the sandbox but failed outside the HTTP exchange (a
	// missing program, a full disk, a failed upload check, a gateway that had to be killed).
	ErrCommandFailed = errors.New("mcpgw: command failed in the sandbox")
	// ErrGatewayDown: no gateway answers on the port, or a different one than this client
	// launched.
	ErrGatewayDown = errors.New("mcpgw: gateway not running")
	// ErrStartFailed: the gateway could not be launched; the message carries its reason and
	// the tail of its log.
	ErrStartFailed = errors.New("mcpgw: gateway start failed")
	// ErrUnauthorized: the gateway refused the token (HTTP 401), or the token file could not be
	// read.
	ErrUnauthorized = errors.New("mcpgw: unauthorized")
	// ErrNotFound: unknown MCP or tool in this scope (HTTP 404).
	ErrNotFound = errors.New("mcpgw: not found")
	// ErrConflict: an MCP of that name already exists in this scope (HTTP 409).
	ErrConflict = errors.New("mcpgw: conflict")
	// ErrUpstream: the upstream MCP server failed to connect or to answer (HTTP 500, 502, 503).
	ErrUpstream = errors.New("mcpgw: upstream error")
	// ErrTimeout: a deadline passed: the context's, the tool call's at the gateway (HTTP 504)
	// or a command's in the sandbox. When the context's deadline was the cause, the error
	// also matches context.DeadlineExceeded.
	ErrTimeout = errors.New("mcpgw: timeout")
	// ErrProtocol: what came back is not what the gateway protocol promises.
	ErrProtocol = errors.New("mcpgw: protocol error")
	// ErrInternal: a bug in libmcpgw or in this package (a library panic, a NULL pointer).
	ErrInternal = errors.New("mcpgw: internal error")
)

// kinds maps each result code to the error value errors.Is matches it with.
var kinds = map[Code]error{
	CodeNullParameter:   ErrInternal,
	CodePanic:           ErrInternal,
	CodeInvalidArgument: ErrInvalidArgument,
	CodeInvalidState:    ErrInvalidState,
	CodeHostIO:          ErrHostIO,
	CodeExecFailed:      ErrExecFailed,
	CodeCommandFailed:   ErrCommandFailed,
	CodeGatewayDown:     ErrGatewayDown,
	CodeStartFailed:     ErrStartFailed,
	CodeUnauthorized:    ErrUnauthorized,
	CodeNotFound:        ErrNotFound,
	CodeConflict:        ErrConflict,
	CodeUpstream:        ErrUpstream,
	CodeDeadline:        ErrTimeout,
	CodeProtocol:        ErrProtocol,
}

// Error is a failed call: what kind of failure (Code), a message a person can act on, and the
// gateway's HTTP status and detail when it answered. It never contains the gateway token: the
// host side never holds it.
type Error struct {
	// Op is the operation that failed, e.g. "call_tool".
	Op string
	// Code is the kind of failure; 0 for a call abandoned because its context was cancelled.
	Code Code
	// Message says what went wrong, starting with the operation's name.
	Message string
	// HTTPStatus is the gateway's HTTP status, or 0 when the gateway did not answer.
	HTTPStatus int
	// Detail is the gateway's detail (or plain-text body), or "" when there is none.
	Detail string
	// Err is the underlying cause, if any: the exec function's error, the context's error,
	// ErrClosed.
	Err error
}

// Error returns the message, prefixed with "mcpgw: ".
func (e *Error) Error() string { return "mcpgw: " + e.Message }

// Is reports whether target is the Err* value of the error's Code, so that
// errors.Is(err, mcpgw.ErrNotFound) works.
func (e *Error) Is(target error) bool {
	kind, ok := kinds[e.Code]
	return ok && target == kind
}

// Unwrap returns the cause (Err), so that errors.Is(err, context.Canceled) and the exec
// function's own errors can be tested too.
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

// contextError is the error of a call abandoned because its context ended.
func contextError(op string, ctxErr error) *Error {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		return &Error{Op: op, Code: CodeDeadline, Message: op + ": the context's deadline passed", Err: ctxErr}
	}
	return &Error{Op: op, Message: op + ": " + ctxErr.Error(), Err: ctxErr}
}

// invalidArgument is an argument this package refuses before the library sees it.
func invalidArgument(op, message string, cause error) *Error {
	return &Error{Op: op, Code: CodeInvalidArgument, Message: op + ": " + message, Err: cause}
}
