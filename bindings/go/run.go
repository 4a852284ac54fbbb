package mcpgw

// #include <stdlib.h>
// #include <string.h>
// #include <mcpgw.h>
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"
	"unsafe"
)

// Every call drives one libmcpgw operation in its sans-IO form (mcpgw_client_prepare_*, then
// mcpgw_op_command, mcpgw_op_command_stdin and mcpgw_op_complete, or a session: session.go): the
// library says which command to run, the Exec runs it here in Go, and its output goes back,
// until the operation has a result. No C call ever blocks or calls back into Go, so a cancelled
// context can stop waiting at once and free the operation, and no Go state has to cross into C.

// Short names for the C types every operation passes around.
type (
	cClient  = C.mcpgw_client
	cOptions = C.mcpgw_call_options
	cOp      = C.mcpgw_op
)

// prepareFunc starts one operation on the C client.
type prepareFunc func(*cClient, *cOptions, **cOp) C.mcpgw_result

// run performs an operation that only goes one-shot (launch, stop, install), in scope s, and
// decodes its JSON result into result (nil to ignore it).
func (c *Client) run(ctx context.Context, name string, s *Scope, result any, prepare prepareFunc) error {
	return c.perform(ctx, name, s, result, false, nil, prepare)
}

// runREST performs a REST operation: over the client's session when it has one, else one-shot.
// progress (nil: none) receives the progress chunks of a tool call, which then streams.
func (c *Client) runREST(ctx context.Context, name string, s *Scope, result any, progress func(ToolChunk), prepare prepareFunc) error {
	return c.perform(ctx, name, s, result, true, progress, prepare)
}

func (c *Client) perform(ctx context.Context, name string, s *Scope, result any, rest bool, progress func(ToolChunk), prepare prepareFunc) error {
	if err := ctx.Err(); err != nil {
		return contextError(name, err)
	}
	timeoutMS, fromCtx, ok := callTimeout(ctx)
	if !ok {
		return contextError(name, context.DeadlineExceeded)
	}
	op, err := c.prepare(name, s, timeoutMS, prepare)
	if err != nil {
		return err
	}
	// The operation keeps what it needs of the client: it outlives a concurrent Close.
	defer func() { C.mcpgw_op_free(op) }()

	sent := false
	var sess *session
	if rest {
		sess = c.session(ctx)
	}
	if sess != nil {
		limit := time.Duration(timeoutMS) * time.Millisecond
		if timeoutMS == 0 {
			limit = c.timeout
		}
		if sent, err = sess.run(ctx, name, op, progress, limit); err != nil {
			return err
		}
		if !sent && bool(C.mcpgw_op_is_finished(op)) {
			// Refused by the session and failed there (a body over its frame limit): the same
			// operation, prepared again, goes one-shot.
			C.mcpgw_op_free(op)
			if op, err = c.prepare(name, s, timeoutMS, prepare); err != nil {
				return err
			}
		}
	}
	var execErr error
	if !sent {
		if execErr, err = c.drive(ctx, name, op); err != nil {
			return err
		}
	}
	if rc := Code(C.mcpgw_op_result(op)); rc != CodeOK {
		e := errorFromC(name, rc, C.mcpgw_op_error(op))
		switch {
		case e.Code == CodeExecFailed:
			e.Err = execErr
		case e.Code == CodeDeadline && fromCtx:
			// The context's deadline was the gateway's deadline.
			e.Err = context.DeadlineExceeded
		}
		return e
	}
	if result == nil {
		return nil
	}
	var js *C.char
	if rc := Code(C.mcpgw_op_result_json(op, &js)); rc != CodeOK {
		return errorFromC(name, rc, nil)
	}
	defer C.mcpgw_string_free(js)
	// Decoded straight from the library's buffer: encoding/json copies what it keeps.
	if err := json.Unmarshal(unsafe.Slice((*byte)(unsafe.Pointer(js)), C.strlen(js)), result); err != nil {
		return &Error{Op: name, Code: CodeProtocolError, Message: name + ": cannot decode the result: " + err.Error(), Err: err}
	}
	return nil
}

// prepare starts an operation in scope s with a time limit of timeoutMS (0: the client's),
// unless the client is closed.
func (c *Client) prepare(name string, s *Scope, timeoutMS uint32, prepare prepareFunc) (*C.mcpgw_op, error) {
	agent, err := cString(name, "the agent id", s.agentID)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(agent))
	session, err := cString(name, "the session id", s.sessionID)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(session))
	var opts *C.mcpgw_call_options
	if rc := Code(C.mcpgw_call_options_new(&opts)); rc != CodeOK {
		return nil, errorFromC(name, rc, nil)
	}
	defer C.mcpgw_call_options_free(opts)
	for _, rc := range []C.mcpgw_result{
		C.mcpgw_call_options_set_agent_id(opts, agent),
		C.mcpgw_call_options_set_session_id(opts, session),
		C.mcpgw_call_options_set_timeout_ms(opts, C.uint32_t(timeoutMS)),
	} {
		if err := check(name, rc); err != nil {
			return nil, err
		}
	}

	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ptr == nil {
		return nil, closedError(name)
	}
	var op *C.mcpgw_op
	rc := Code(prepare(c.ptr, opts, &op))
	runtime.KeepAlive(c)
	if rc != CodeOK {
		return nil, errorFromC(name, rc, nil)
	}
	return op, nil
}

// callTimeout is the time limit the library gets for a call from ctx: its deadline less a
// tenth of the time left (at most a second), so that a deadline reported by the gateway (504)
// can travel back while the context still waits for it. 0 (the client's timeout) when ctx has
// no deadline; ok is false when the deadline has passed.
func callTimeout(ctx context.Context) (ms uint32, fromCtx, ok bool) {
	deadline, has := ctx.Deadline()
	if !has {
		return 0, false, true
	}
	left := time.Until(deadline)
	if left <= 0 {
		return 0, true, false
	}
	left -= min(left/10, time.Second)
	return uint32(max(1, min(left.Milliseconds(), math.MaxUint32))), true, true
}

// drive runs the operation's commands until it has finished. It returns the exec function's
// error when that ended the operation, and a non-nil *Error when the call was abandoned (the
// context ended, a command overran its limit). A panic in the exec function fails the
// operation and is raised again here.
func (c *Client) drive(ctx context.Context, name string, op *C.mcpgw_op) (execErr error, _ error) {
	for {
		var cmd *C.char
		var limitMS C.uint32_t
		if Code(C.mcpgw_op_command(op, &cmd, &limitMS)) != CodeOK {
			return execErr, nil // finished: the result is in op
		}
		if err := ctx.Err(); err != nil {
			return nil, contextError(name, err)
		}
		// Copied: the library's text and bytes live only until the operation moves on, and an
		// abandoned exec goroutine may still read them after the operation is freed.
		command := C.GoString(cmd)
		var stdin []byte
		var buf *C.uint8_t
		var n C.size_t
		if Code(C.mcpgw_op_command_stdin(op, &buf, &n)) == CodeOK && buf != nil {
			stdin = C.GoBytes(unsafe.Pointer(buf), C.int(n))
		}
		out, err := c.execute(ctx, name, command, stdin, time.Duration(limitMS)*time.Millisecond)
		if err != nil {
			return nil, err
		}
		switch {
		case out.panicked:
			failExec(op, "the exec function panicked")
			panic(out.panicValue)
		case out.err != nil:
			failExec(op, out.err.Error())
			execErr = out.err
		default:
			rc := Code(C.mcpgw_op_complete(op, C.int32_t(clampInt32(out.res.ExitCode)),
				bytesPtr(out.res.Stdout), C.size_t(len(out.res.Stdout)),
				bytesPtr(out.res.Stderr), C.size_t(len(out.res.Stderr))))
			if rc != CodeOK {
				return nil, errorFromC(name, rc, nil)
			}
		}
	}
}

// execOutcome is what one call of the exec function gave.
type execOutcome struct {
	res        ExecResult
	err        error
	panicked   bool
	panicValue any
}

// execute runs one command through the exec function in a goroutine of its own, and waits for
// it, for the end of ctx, or for the command's time limit, whichever comes first. When it stops
// waiting, the goroutine is left to finish on its own (its result is dropped; a panic in it is
// raised there, since nobody is left to receive it).
func (c *Client) execute(ctx context.Context, name, command string, stdin []byte, limit time.Duration) (execOutcome, error) {
	var cmdCtx context.Context
	var cancel context.CancelFunc
	if limit > 0 {
		cmdCtx, cancel = context.WithTimeout(ctx, limit)
	} else {
		cmdCtx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	done := make(chan execOutcome)
	abandoned := make(chan struct{})
	go func() {
		var o execOutcome
		defer func() {
			if v := recover(); v != nil {
				o = execOutcome{panicked: true, panicValue: v}
			}
			select {
			case done <- o:
			case <-abandoned:
				if o.panicked {
					panic(o.panicValue)
				}
			}
		}()
		o.res, o.err = c.exec.Exec(cmdCtx, command, stdin)
	}()
	select {
	case o := <-done:
		// An exec function that stopped because its context ended reports that, not a failure
		// of the sandbox.
		if o.err == nil || o.panicked || cmdCtx.Err() == nil {
			return o, nil
		}
	case <-cmdCtx.Done():
		close(abandoned)
	}
	if err := ctx.Err(); err != nil {
		return execOutcome{}, contextError(name, err)
	}
	return execOutcome{}, &Error{Op: name, Code: CodeDeadline, Message: fmt.Sprintf(
		"%s: a command in the sandbox did not finish within its time limit of %v", name, limit)}
}

// failExec tells the operation that its command could not be run.
func failExec(op *C.mcpgw_op, reason string) {
	r := C.CString(strings.ReplaceAll(reason, "\x00", ""))
	defer C.free(unsafe.Pointer(r))
	C.mcpgw_op_fail_exec(op, r)
}

// bytesPtr points C at b's bytes for the duration of a call (the library copies them).
func bytesPtr(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0]))
}

func clampInt32(n int) int {
	return max(math.MinInt32, min(n, math.MaxInt32))
}
