package mcpgw

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// The processes of the Exec backend: libmcpgw hands over `sh -c` text, and the user's RunFunc or
// OpenFunc runs it in the sandbox, each call in a goroutine of its own.

// failureNoter keeps a user function's error or panic for the caller of the operation it failed,
// and returns the reason to report.
type failureNoter interface {
	noteFailure(f userFailure) string
}

// execRun is a command run through a RunFunc.
type execRun struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	killed bool
}

func (p *execRun) write([]byte)           {}
func (p *execRun) closeInput()            {}
func (p *execRun) ended() <-chan struct{} { return p.done }

func (p *execRun) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.cancel()
}

// startRun runs command through run within timeout.
func startRun(ev events, fn failureNoter, id uint64, run RunFunc, command string, stdin []byte, timeout time.Duration) *execRun {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	p := &execRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cancel()
		var res ExecResult
		var err error
		panicked, value := catch(func() { res, err = run(ctx, command, stdin) })
		p.mu.Lock()
		killed := p.killed
		p.mu.Unlock()
		switch {
		case panicked && killed:
			// Nobody waits for this command any more: the panic goes on here.
			panic(value)
		case killed:
			// The driver expects nothing more of it.
		case panicked:
			ev.onExecFailed(id, fn.noteFailure(userFailure{panicked: true, value: value}))
		case err != nil:
			ev.onExecFailed(id, fn.noteFailure(userFailure{value: err}))
		default:
			ev.onExit(id, res.ExitCode, res.Stdout, res.Stderr)
		}
	}()
	return p
}

// catch runs f and says whether it panicked, with what.
func catch(f func()) (panicked bool, value any) {
	panicked = true
	defer func() {
		if panicked {
			value = recover()
		}
	}()
	f()
	return false, nil
}

// execChannel is a session channel opened through an OpenFunc.
type execChannel struct {
	cancel context.CancelFunc
	input  *stdinQueue
	done   chan struct{}

	mu     sync.Mutex
	ch     *Channel
	killed bool
}

func (p *execChannel) write(b []byte)         { p.input.push(b) }
func (p *execChannel) closeInput()            { p.input.close() }
func (p *execChannel) ended() <-chan struct{} { return p.done }

func (p *execChannel) kill() {
	p.mu.Lock()
	ch := p.ch
	p.killed = true
	p.mu.Unlock()
	p.cancel()
	switch {
	case ch == nil:
	case ch.Kill != nil:
		// The user's function, not under the driver's lock.
		go catch(func() { _ = ch.Kill() })
	default:
		p.input.close()
	}
}

// startOpen opens a channel running command through open.
func startOpen(ev events, fn failureNoter, id uint64, open OpenFunc, command string) *execChannel {
	ctx, cancel := context.WithCancel(context.Background())
	p := &execChannel{cancel: cancel, input: &stdinQueue{}, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cancel()
		var ch *Channel
		var err error
		if panicked, value := catch(func() { ch, err = open(ctx, command) }); panicked {
			ev.onExecFailed(id, fn.noteFailure(userFailure{panicked: true, value: value}))
			return
		}
		switch {
		case err != nil:
			ev.onExecFailed(id, fn.noteFailure(userFailure{value: err}))
			return
		case ch == nil || ch.Stdin == nil || ch.Stdout == nil:
			ev.onExecFailed(id, "the open function returned a channel without Stdin or Stdout")
			return
		}
		p.mu.Lock()
		p.ch = ch
		killed := p.killed
		p.mu.Unlock()
		p.input.attach(ch.Stdin)
		if killed {
			p.kill()
		}
		var stderr sync.WaitGroup
		if ch.Stderr != nil {
			stderr.Add(1)
			go func() {
				defer stderr.Done()
				readAll(ch.Stderr, func(b []byte) { ev.onStderr(id, b) })
			}()
		}
		readAll(ch.Stdout, func(b []byte) { ev.onData(id, b) })
		ev.onEOF(id)
		code := 0
		if ch.Wait != nil {
			var werr error
			if panicked, value := catch(func() { code, werr = ch.Wait() }); panicked {
				werr = fmt.Errorf("%v", value)
			}
			if werr != nil {
				ev.onExecFailed(id, "waiting for the channel failed: "+werr.Error())
				return
			}
		}
		waited := make(chan struct{})
		go func() { stderr.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(pipeDrain):
		}
		ev.onExit(id, code, nil, nil)
	}()
	return p
}

// readAll hands r's bytes to fn (which copies what it keeps) until r ends, fails or panics.
func readAll(r io.Reader, fn func([]byte)) {
	buf := make([]byte, 32<<10)
	_, _ = catch(func() {
		for {
			n, err := r.Read(buf)
			if n > 0 {
				fn(buf[:n])
			}
			if err != nil {
				return
			}
		}
	})
}
