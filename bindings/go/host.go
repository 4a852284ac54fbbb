package mcpgw

// #include <stdlib.h>
// #include <mcpgw.h>
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// host is the I/O loop around one mcpgw_host, libmcpgw's sans-IO host driver, which decides
// everything: session or one-shot, fallbacks, reopening, every timer, the backends' failures.
// This loop only reports what happened (an exit, channel bytes, the time) and does what the
// driver asks next (start a process, write bytes, kill, hand a result to its caller). Every C
// call is made under mu, the driver's one lock; nothing blocks while it is held but the start of
// a process. The processes' goroutines and the timer hold the host, never the Client, so that a
// forgotten Client is still finalized.
type host struct {
	backend Backend

	mu       sync.Mutex
	ptr      *C.mcpgw_host // nil once freed
	ops      map[uint64]*pending
	procs    map[uint64]proc
	channels map[uint64]proc // the procs of OPEN actions, awaited when a session closes
	conns    map[uint64]*Connection
	timer    *time.Timer
	closing  bool                     // Close was called: freed once nothing is under way
	failures map[string][]userFailure // by the reason reported: see noteFailure
	// Audit records not yet handed to the WithAudit function (nil wake: no function), and the
	// signal that there are some.
	audits    [][]byte
	auditWake chan struct{}
}

func newHost(config []byte, backend Backend, audit func(json.RawMessage)) (*host, error) {
	text := C.CString(string(config))
	defer C.free(unsafe.Pointer(text))
	var ptr *C.mcpgw_host
	var cerr *C.mcpgw_error
	if rc := Code(C.mcpgw_host_new(text, &ptr, &cerr)); rc != CodeOK {
		defer C.mcpgw_error_free(cerr)
		return nil, errorFromC("new_client", rc, cerr)
	}
	h := &host{
		backend:  backend,
		ptr:      ptr,
		ops:      map[uint64]*pending{},
		procs:    map[uint64]proc{},
		channels: map[uint64]proc{},
		conns:    map[uint64]*Connection{},
		failures: map[string][]userFailure{},
	}
	if audit != nil {
		// One goroutine calls the function, record by record in order, outside the driver's
		// lock (so it may use the client).
		h.auditWake = make(chan struct{}, 1)
		go func() {
			for range h.auditWake {
				h.mu.Lock()
				records := h.audits
				h.audits = nil
				h.mu.Unlock()
				for _, r := range records {
					audit(r)
				}
			}
		}()
	}
	h.timer = time.AfterFunc(time.Hour, func() {
		h.report(func(p *C.mcpgw_host) { C.mcpgw_host_on_timeout(p) })
	})
	h.timer.Stop()
	return h, nil
}

// report makes one report to the driver, then does what it asks.
func (h *host) report(f func(*C.mcpgw_host)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr != nil {
		f(h.ptr)
		h.drainLocked()
	}
}

func (h *host) onData(id uint64, b []byte) {
	h.report(func(p *C.mcpgw_host) { C.mcpgw_host_on_data(p, C.uint64_t(id), bytesPtr(b), C.size_t(len(b))) })
}

func (h *host) onStderr(id uint64, b []byte) {
	h.report(func(p *C.mcpgw_host) { C.mcpgw_host_on_stderr(p, C.uint64_t(id), bytesPtr(b), C.size_t(len(b))) })
}

func (h *host) onEOF(id uint64) {
	h.report(func(p *C.mcpgw_host) { C.mcpgw_host_on_eof(p, C.uint64_t(id)) })
}

func (h *host) onExit(id uint64, code int, stdout, stderr []byte) {
	h.report(func(p *C.mcpgw_host) {
		h.forgetLocked(id)
		C.mcpgw_host_on_exit(p, C.uint64_t(id), C.int32_t(code), bytesPtr(stdout), C.size_t(len(stdout)),
			bytesPtr(stderr), C.size_t(len(stderr)))
	})
}

func (h *host) onExecFailed(id uint64, reason string) {
	h.report(func(p *C.mcpgw_host) {
		h.forgetLocked(id)
		h.execFailedLocked(id, reason)
	})
}

func (h *host) execFailedLocked(id uint64, reason string) {
	r := C.CString(strings.ReplaceAll(reason, "\x00", ""))
	defer C.free(unsafe.Pointer(r))
	C.mcpgw_host_on_exec_failed(h.ptr, C.uint64_t(id), r)
}

func (h *host) forgetLocked(id uint64) {
	delete(h.procs, id)
	delete(h.channels, id)
}

// noteFailure keeps what a user's function did instead of running a command (its error, or the
// value it panicked with) for the caller of the operation it failed, and returns the reason to
// report. The DONE whose message quotes the reason carries it back: the error as the cause of
// the *Error, the panic to be raised again.
func (h *host) noteFailure(f userFailure) string {
	reason := f.value.(error).Error()
	if f.panicked {
		reason = fmt.Sprintf("the exec function panicked: %v", f.value)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.failures) >= maxFailures {
		clear(h.failures) // reasons no DONE quoted: their operations ended otherwise
	}
	h.failures[reason] = append(h.failures[reason], f)
	return reason
}

// maxFailures bounds the user failures kept for their DONE.
const maxFailures = 64

// userFailure is an error or a panic of a user's function.
type userFailure struct {
	panicked bool
	value    any // the error, or the panic value (never nil: panic(nil) recovers a *runtime.PanicNilError)
}

// takeFailureLocked is the user failure message quotes, if any.
func (h *host) takeFailureLocked(message string) *userFailure {
	for reason, fs := range h.failures {
		if strings.Contains(message, reason) {
			f := fs[0]
			if len(fs) == 1 {
				delete(h.failures, reason)
			} else {
				h.failures[reason] = fs[1:]
			}
			return &f
		}
	}
	return nil
}

// drainLocked does every action the driver has, then sets the timer it wants.
func (h *host) drainLocked() {
	for {
		a := C.mcpgw_host_next_action(h.ptr)
		if a == nil {
			break
		}
		h.actLocked(a)
		C.mcpgw_action_free(a)
	}
	if ms := int64(C.mcpgw_host_timeout_ms(h.ptr)); ms < 0 {
		h.timer.Stop()
	} else {
		h.timer.Reset(time.Duration(ms) * time.Millisecond)
	}
	h.freeIfIdleLocked()
}

func (h *host) actLocked(a *C.mcpgw_action) {
	id := uint64(C.mcpgw_action_id(a))
	procID := uint64(C.mcpgw_action_proc(a))
	p := h.procs[procID]
	switch C.mcpgw_action_get_kind(a) {
	case C.MCPGW_ACTION_KIND_RUN:
		h.startLocked(procID, a, false)
	case C.MCPGW_ACTION_KIND_OPEN:
		h.startLocked(procID, a, true)
	case C.MCPGW_ACTION_KIND_WRITE:
		if p != nil {
			p.write(actionBytes(a))
		}
	case C.MCPGW_ACTION_KIND_CLOSE_INPUT:
		if p != nil {
			p.closeInput()
		}
	case C.MCPGW_ACTION_KIND_KILL:
		if p != nil {
			p.kill()
			if _, user := p.(*execRun); user {
				// A user's function may ignore its context: the driver expects nothing more of it.
				h.forgetLocked(procID)
			}
		}
	case C.MCPGW_ACTION_KIND_PROGRESS:
		if op := h.ops[id]; op != nil {
			op.post(actionBytes(a), false, 0, nil)
		}
	case C.MCPGW_ACTION_KIND_DONE:
		if op := h.ops[id]; op != nil {
			delete(h.ops, id)
			code := Code(C.mcpgw_action_result(a))
			var failure *userFailure
			if code != CodeOK {
				failure = h.takeFailureLocked(actionText(a))
			}
			op.post(actionBytes(a), true, code, failure)
		}
	case C.MCPGW_ACTION_KIND_CONNECTION_OPENED:
		if k := h.conns[id]; k != nil {
			k.opened()
		}
	case C.MCPGW_ACTION_KIND_CONNECTION_MESSAGE:
		if k := h.conns[id]; k != nil {
			k.message(actionBytes(a))
		}
	case C.MCPGW_ACTION_KIND_CONNECTION_CLOSED:
		if k := h.conns[id]; k != nil {
			delete(h.conns, id)
			k.closed(actionText(a), int(C.mcpgw_action_status(a)), Code(C.mcpgw_action_result(a)))
		}
	case C.MCPGW_ACTION_KIND_NOTICE:
		slog.Debug("mcpgw: " + actionText(a))
	case C.MCPGW_ACTION_KIND_AUDIT:
		if h.auditWake != nil {
			h.audits = append(h.audits, actionBytes(a))
			select {
			case h.auditWake <- struct{}{}:
			default:
			}
		}
	}
}

// startLocked starts the process of a RUN or OPEN action.
func (h *host) startLocked(id uint64, a *C.mcpgw_action, channel bool) {
	if shell := C.mcpgw_action_shell(a); shell != nil {
		command := C.GoString(shell)
		switch {
		case channel && h.backend.open == nil:
			h.execFailedLocked(id, "the exec backend was given no open function: sessions need one")
		case channel:
			p := startOpen(h, h, id, h.backend.open, command)
			h.procs[id], h.channels[id] = p, p
		default:
			var stdin []byte
			if C.mcpgw_action_stdin_kind(a) == C.MCPGW_STDIN_KIND_BYTES {
				stdin = actionBytes(a)
			}
			limit := time.Duration(C.mcpgw_action_timeout_ms(a)) * time.Millisecond
			h.procs[id] = startRun(h, h, id, h.backend.run, command, stdin, limit)
		}
		return
	}
	argv := make([]string, int(C.mcpgw_action_argc(a)))
	for i := range argv {
		argv[i] = C.GoString(C.mcpgw_action_argv(a, C.size_t(i)))
	}
	var cwd string
	if d := C.mcpgw_action_cwd(a); d != nil {
		cwd = C.GoString(d)
	}
	mode, stdin := stdinPipe, []byte(nil)
	if !channel {
		switch C.mcpgw_action_stdin_kind(a) {
		case C.MCPGW_STDIN_KIND_BYTES:
			mode, stdin = stdinBytes, actionBytes(a)
		case C.MCPGW_STDIN_KIND_HOLD:
			mode = stdinHold
		default:
			mode = stdinNull
		}
	}
	p, err := spawn(h, id, argv, cwd, mode, stdin, channel)
	if err != nil {
		h.execFailedLocked(id, err.Error())
		return
	}
	h.procs[id] = p
	if channel {
		h.channels[id] = p
	}
}

// freeIfIdleLocked frees the driver of a closed client once nothing is under way.
func (h *host) freeIfIdleLocked() {
	if h.closing && h.ptr != nil && len(h.ops) == 0 && len(h.procs) == 0 && len(h.conns) == 0 {
		h.timer.Stop()
		C.mcpgw_host_free(h.ptr)
		if h.auditWake != nil {
			close(h.auditWake)
		}
		h.ptr = nil
	}
}

// submit hands the driver an operation as JSON; internal says that a closing client may still
// submit it (its own close_session).
func (h *host) submit(name string, op []byte, internal bool) (uint64, *pending, error) {
	text := C.CString(string(op))
	defer C.free(unsafe.Pointer(text))
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr == nil || h.closing && !internal {
		return 0, nil, closedError(name)
	}
	var id C.uint64_t
	var cerr *C.mcpgw_error
	if rc := Code(C.mcpgw_host_submit(h.ptr, text, &id, &cerr)); rc != CodeOK {
		defer C.mcpgw_error_free(cerr)
		return 0, nil, errorFromC(name, rc, cerr)
	}
	p := &pending{signal: make(chan struct{}, 1)}
	h.ops[uint64(id)] = p
	h.drainLocked()
	return uint64(id), p, nil
}

// cancel cancels operation id: its DONE (CANCELLED) follows at once.
func (h *host) cancel(id uint64) {
	h.report(func(p *C.mcpgw_host) { C.mcpgw_host_cancel(p, C.uint64_t(id)) })
}

// runningChannels are the session channels' processes that have not exited yet.
func (h *host) runningChannels() []proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ps []proc
	for _, p := range h.channels {
		ps = append(ps, p)
	}
	return ps
}

// state is what the driver knows, as JSON (mcpgw_host_state_json); nil once freed.
func (h *host) state() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr == nil {
		return nil
	}
	s := C.mcpgw_host_state_json(h.ptr)
	defer C.mcpgw_string_free(s)
	return []byte(C.GoString(s))
}

// pending is the mailbox of one operation's caller: the loop posts, never blocking.
type pending struct {
	signal chan struct{}

	mu      sync.Mutex
	chunks  [][]byte
	done    bool
	code    Code
	result  []byte
	failure *userFailure
}

func (p *pending) post(b []byte, done bool, code Code, failure *userFailure) {
	p.mu.Lock()
	if done {
		p.done, p.code, p.result, p.failure = true, code, b, failure
	} else {
		p.chunks = append(p.chunks, b)
	}
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

func (p *pending) take() (chunks [][]byte, done bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	chunks, p.chunks = p.chunks, nil
	return chunks, p.done
}

// outcome is the result of a finished operation, or its error; a panic of the user's function
// that failed it goes on here, in the caller. fromCtx says that the context's deadline was the
// operation's.
func (p *pending) outcome(name string, fromCtx bool) ([]byte, error) {
	if p.failure != nil && p.failure.panicked {
		panic(p.failure.value)
	}
	if p.code == CodeOK {
		return p.result, nil
	}
	e := errorFromJSON(name, p.code, p.result)
	switch {
	case p.failure != nil:
		e.Err = p.failure.value.(error)
	case e.Code == CodeDeadline && fromCtx:
		e.Err = context.DeadlineExceeded
	}
	return nil, e
}

func actionBytes(a *C.mcpgw_action) []byte {
	var n C.size_t
	b := C.mcpgw_action_bytes(a, &n)
	if b == nil {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(b), C.int(n))
}

func actionText(a *C.mcpgw_action) string {
	if t := C.mcpgw_action_text(a); t != nil {
		return C.GoString(t)
	}
	return ""
}

// bytesPtr points C at b's bytes for the duration of a call (the library copies them).
func bytesPtr(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0]))
}
