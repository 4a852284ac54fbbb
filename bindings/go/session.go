package mcpgw

// #include <stdlib.h>
// #include <mcpgw.h>
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unsafe"
)

// A session is one long-lived exec in the sandbox (`mcpgw-gateway attach`, opened by an Opener)
// that carries every REST operation of the client, many at once, with live progress and real
// cancellation. libmcpgw's session is sans-IO (mcpgw_session_*): this file moves the bytes. A
// reader goroutine feeds what the channel prints to the session and hands its events to the
// calls waiting for them; a writer goroutine writes what the session has to send, in order. No
// C call blocks and no Go callback crosses into C.

// sessionGrace is how long a call over a session waits for its answer beyond its own time limit
// (the gateway's deadline for a tool call) before it gives up and cancels it.
const sessionGrace = 5 * time.Second

// eofReasonWait bounds how long a lost channel's Close may take to say why it ended (its exit
// status) before the calls it carried are failed without that detail.
const eofReasonWait = 500 * time.Millisecond

// How a call over a session ended.
const (
	endNone = iota
	endFinished
	endUnsent
)

// waiter is the mailbox of one call in flight: the progress chunks (as JSON) and the end the
// reader posts, never blocking the reader.
type waiter struct {
	mu       sync.Mutex
	progress [][]byte
	end      int
	signal   chan struct{}
}

func newWaiter() *waiter { return &waiter{signal: make(chan struct{}, 1)} }

func (w *waiter) post(chunk []byte, end int) {
	w.mu.Lock()
	if chunk != nil {
		w.progress = append(w.progress, chunk)
	}
	if end != endNone {
		w.end = end
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *waiter) take() ([][]byte, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.progress
	w.progress = nil
	return p, w.end
}

// session drives one mcpgw_session over one channel.
type session struct {
	rwc io.ReadWriteCloser

	// mu guards ptr (the C session, used by one goroutine at a time, nil once freed), waiters,
	// lost and info.
	mu       sync.Mutex
	ptr      *C.mcpgw_session
	waiters  map[uint64]*waiter
	lost     bool
	lostText string
	info     *SessionInfo

	opened     chan struct{} // closed at the hello, or when the channel is lost before it
	openedOnce sync.Once
	kick       chan struct{} // wakes the writer
	readerDone chan struct{}

	closeOnce sync.Once
	closeDone chan struct{}
	closeErr  error // what the channel's Close said: how it ended
}

// startSession opens a C session of client ptr and its channel with open. The caller holds
// the client's lock (read side).
func startSession(ctx context.Context, name string, ptr *C.mcpgw_client, open Opener) (*session, error) {
	var sp *C.mcpgw_session
	var cerr *C.mcpgw_error
	if rc := Code(C.mcpgw_session_open(ptr, &sp, &cerr)); rc != CodeOK {
		defer C.mcpgw_error_free(cerr)
		return nil, errorFromC(name, rc, cerr)
	}
	command := C.GoString(C.mcpgw_session_command(sp))
	rwc, err := open(ctx, command)
	if err != nil {
		C.mcpgw_session_free(sp)
		return nil, &Error{Op: name, Code: CodeExecFailed, Message: name + ": cannot open the session channel: " + err.Error(), Err: err}
	}
	s := &session{
		rwc:        rwc,
		ptr:        sp,
		waiters:    map[uint64]*waiter{},
		opened:     make(chan struct{}),
		kick:       make(chan struct{}, 1),
		readerDone: make(chan struct{}),
		closeDone:  make(chan struct{}),
	}
	go s.read()
	go s.write()
	return s, nil
}

// waitOpened waits for the hello (or the loss of the channel before it) until ctx ends.
func (s *session) waitOpened(ctx context.Context, name string) (*SessionInfo, error) {
	select {
	case <-s.opened:
	case <-ctx.Done():
		return nil, contextError(name, ctx.Err())
	}
	s.mu.Lock()
	info, text := s.info, s.lostText
	s.mu.Unlock()
	if info != nil {
		return info, nil
	}
	e := &Error{Op: name, Code: CodeSessionLost, Message: name + ": " + text}
	s.close()
	var backend *BackendError
	if errors.As(s.closeErr, &backend) {
		// The backend could not reach the sandbox: not the session's fault.
		e.Code, e.Err = CodeExecFailed, backend
	}
	return nil, e
}

func (s *session) isLost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost || s.ptr == nil
}

func (s *session) kickWriter() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// closeChannel closes the channel once; later calls wait for the first one.
func (s *session) closeChannel() {
	s.closeOnce.Do(func() {
		s.closeErr = s.rwc.Close()
		close(s.closeDone)
	})
	<-s.closeDone
}

// read feeds what the channel prints to the session until it ends, then frees the session.
func (s *session) read() {
	defer close(s.readerDone)
	buf := make([]byte, 64<<10)
	for {
		n, err := s.rwc.Read(buf)
		var reason string
		if err != nil {
			reason = s.endReason(err)
		}
		s.mu.Lock()
		if s.ptr != nil {
			if n > 0 {
				C.mcpgw_session_feed(s.ptr, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(n))
			}
			if err != nil {
				r := C.CString(reason)
				C.mcpgw_session_feed_eof(s.ptr, r)
				C.free(unsafe.Pointer(r))
			}
			s.dispatchLocked()
		}
		s.mu.Unlock()
		s.kickWriter()
		if err != nil {
			break
		}
	}
	s.mu.Lock()
	C.mcpgw_session_free(s.ptr)
	s.ptr = nil
	s.mu.Unlock()
	go s.closeChannel() // when it ended by itself
}

// endReason says why the channel's output ended: how its process ended, when Close says so soon.
func (s *session) endReason(err error) string {
	go s.closeChannel()
	select {
	case <-s.closeDone:
	case <-time.After(eofReasonWait):
		return ""
	}
	switch {
	case s.closeErr != nil:
		return s.closeErr.Error()
	case errors.Is(err, io.EOF):
		return ""
	default:
		return "reading it failed: " + err.Error()
	}
}

// write writes what the session has to send, in order, until the reader is done.
func (s *session) write() {
	for {
		select {
		case <-s.kick:
		case <-s.readerDone:
			return
		}
		for {
			s.mu.Lock()
			if s.ptr == nil || s.lost {
				s.mu.Unlock()
				break
			}
			var p *C.uint8_t
			var n C.size_t
			if Code(C.mcpgw_session_output(s.ptr, &p, &n)) != CodeOK || n == 0 {
				s.mu.Unlock()
				break
			}
			data := C.GoBytes(unsafe.Pointer(p), C.int(n))
			C.mcpgw_session_consume(s.ptr, n)
			s.mu.Unlock()
			if _, err := s.rwc.Write(data); err != nil {
				s.mu.Lock()
				if s.ptr != nil {
					r := C.CString("writing to it failed: " + err.Error())
					C.mcpgw_session_feed_eof(s.ptr, r)
					C.free(unsafe.Pointer(r))
					s.dispatchLocked()
				}
				s.mu.Unlock()
				go s.closeChannel() // makes the reader's Read return
				break
			}
		}
	}
}

// dispatchLocked hands the session's events to the calls waiting for them.
func (s *session) dispatchLocked() {
	for {
		var ev *C.mcpgw_session_event
		if Code(C.mcpgw_session_next_event(s.ptr, &ev)) != CodeOK {
			return
		}
		id := uint64(C.mcpgw_session_event_id(ev))
		switch C.mcpgw_session_event_get_kind(ev) {
		case C.MCPGW_SESSION_EVENT_KIND_OPENED:
			var info SessionInfo
			if json.Unmarshal([]byte(C.GoString(C.mcpgw_session_event_text(ev))), &info) == nil {
				s.info = &info
			}
			s.openedOnce.Do(func() { close(s.opened) })
		case C.MCPGW_SESSION_EVENT_KIND_PROGRESS:
			if w := s.waiters[id]; w != nil {
				var js *C.char
				if Code(C.mcpgw_tool_chunk_to_json(C.mcpgw_session_event_chunk(ev), &js)) == CodeOK {
					w.post([]byte(C.GoString(js)), endNone)
					C.mcpgw_string_free(js)
				}
			}
		case C.MCPGW_SESSION_EVENT_KIND_FINISHED:
			if w := s.waiters[id]; w != nil {
				delete(s.waiters, id)
				w.post(nil, endFinished)
			}
		case C.MCPGW_SESSION_EVENT_KIND_UNSENT:
			if w := s.waiters[id]; w != nil {
				delete(s.waiters, id)
				w.post(nil, endUnsent)
			}
		case C.MCPGW_SESSION_EVENT_KIND_LOST:
			s.lost = true
			s.lostText = C.GoString(C.mcpgw_session_event_text(ev))
			s.openedOnce.Do(func() { close(s.opened) })
			// Lost for a reason of its own (a frame it could not take, another gateway): the
			// channel's process must end too.
			go s.closeChannel()
		}
		// NOTICE events (frames for calls no longer in flight, lines that are not frames) concern
		// no call and are dropped.
		C.mcpgw_session_event_free(ev)
	}
}

// run carries op over the session and waits for its end; progress (nil: the call does not
// stream) receives each progress chunk in order, on this goroutine. sent is false when the
// session did not take op or gave it back unsent: then op goes one-shot (a refused op may have
// failed: a body over the session's frame limit). When ctx ends first, a cancel frame makes the
// gateway cancel the call upstream.
func (s *session) run(ctx context.Context, name string, op *C.mcpgw_op, progress func(ToolChunk), limit time.Duration) (sent bool, err error) {
	s.mu.Lock()
	if s.ptr == nil || s.lost {
		s.mu.Unlock()
		return false, nil
	}
	var id C.uint64_t
	if Code(C.mcpgw_session_submit(s.ptr, op, C.bool(progress != nil), &id)) != CodeOK {
		s.mu.Unlock()
		return false, nil
	}
	w := newWaiter()
	s.waiters[uint64(id)] = w
	s.mu.Unlock()
	s.kickWriter()

	inFlight := true
	// Also when progress panics: the call is cancelled, then the panic goes on.
	defer func() {
		if inFlight {
			s.cancel(uint64(id))
		}
	}()
	timer := time.NewTimer(limit + sessionGrace)
	defer timer.Stop()
	for {
		select {
		case <-w.signal:
			chunks, end := w.take()
			for _, js := range chunks {
				var chunk ToolChunk
				if progress != nil && json.Unmarshal(js, &chunk) == nil {
					progress(chunk)
				}
			}
			switch end {
			case endFinished:
				inFlight = false
				return true, nil
			case endUnsent:
				inFlight = false
				return false, nil
			}
		case <-ctx.Done():
			return true, contextError(name, ctx.Err())
		case <-timer.C:
			return true, &Error{Op: name, Code: CodeDeadline, Message: fmt.Sprintf(
				"%s: no answer came over the session within %v; the call was cancelled", name, limit+sessionGrace)}
		}
	}
}

// cancel abandons call id: the gateway cancels it upstream.
func (s *session) cancel(id uint64) {
	s.mu.Lock()
	delete(s.waiters, id)
	if s.ptr != nil {
		C.mcpgw_session_cancel(s.ptr, C.uint64_t(id))
	}
	s.mu.Unlock()
	s.kickWriter()
}

// close ends the session: calls in flight fail with ErrSessionLost, the channel's stdin is
// closed (attach cancels what it carried and exits) and its process waited for.
func (s *session) close() {
	s.mu.Lock()
	if s.ptr != nil && !s.lost {
		C.mcpgw_session_close(s.ptr)
		s.dispatchLocked()
	}
	s.mu.Unlock()
	s.closeChannel()
	select {
	case <-s.readerDone:
	case <-time.After(closeGrace):
		// A channel whose Close does not end its Read: the reader frees the session when it ends.
	}
}
