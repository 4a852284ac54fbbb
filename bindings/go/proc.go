package mcpgw

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// The processes libmcpgw asks for (RUN and OPEN actions) run here, each in a process group of its
// own. No thread waits for any of them: their pipes and their pidfd (Linux 5.4 or later) are in
// Go's network poller, so a host holding a thousand sessions needs no more threads than one
// holding one. (Without pidfd support, one goroutine per process blocks in wait4.)

// pipeDrain bounds how long the output pipes of a process that exited may stay open (something
// it started in the background holds them) before they are closed and the exit is reported; as
// exec.Cmd.WaitDelay does.
const pipeDrain = 2 * time.Second

// proc is a process the driver started: a command, a question, or the session channel.
type proc interface {
	// write queues bytes for its stdin.
	write(b []byte)
	// closeInput closes its stdin once what is queued is written.
	closeInput()
	// kill ends it and everything it started.
	kill()
	// ended is closed once its exit was reported.
	ended() <-chan struct{}
}

// events is where a process reports what happened; each call is one report to the driver.
type events interface {
	onData(id uint64, b []byte)
	onStderr(id uint64, b []byte)
	onEOF(id uint64)
	onExit(id uint64, code int, stdout, stderr []byte)
	onExecFailed(id uint64, reason string)
}

// stdinMode is what a process's standard input is.
type stdinMode int

const (
	stdinNull  stdinMode = iota // /dev/null
	stdinBytes                  // the bytes given, then its end
	stdinHold                   // a pipe held open, written nothing, until the process exits
	stdinPipe                   // a channel's: written by WRITE actions, closed by CLOSE_INPUT
)

// osProc is a process this package spawned.
type osProc struct {
	pid   int
	input *stdinQueue // nil for /dev/null
	done  chan struct{}

	mu     sync.Mutex
	reaped bool // once its status is collected its pid may be reused: no more signals
}

func (p *osProc) write(b []byte) {
	if p.input != nil {
		p.input.push(b)
	}
}

func (p *osProc) closeInput() {
	if p.input != nil {
		p.input.close()
	}
}

func (p *osProc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
}

func (p *osProc) ended() <-chan struct{} { return p.done }

// spawn starts argv in cwd ("" for this process's) with its stdin as mode says; channel says
// that its output is reported as it comes (a session channel) rather than with its exit.
func spawn(ev events, id uint64, argv []string, cwd string, mode stdinMode, stdin []byte, channel bool) (*osProc, error) {
	if len(argv) == 0 {
		return nil, errors.New("the program is empty")
	}
	path := argv[0]
	if !strings.ContainsRune(path, '/') {
		found, err := exec.LookPath(path)
		if err != nil {
			return nil, fmt.Errorf("cannot run %s: %w", path, err)
		}
		path = found
	}
	var fds []int // every descriptor made here; the child's are closed once it runs
	closeAll := func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}
	pipe := func() (r, w int, err error) {
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
			return 0, 0, err
		}
		fds = append(fds, p[0], p[1])
		return p[0], p[1], nil
	}
	var childIn, ourIn int
	var err error
	if mode == stdinNull {
		childIn, err = syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err == nil {
			fds = append(fds, childIn)
		}
	} else {
		childIn, ourIn, err = pipe()
	}
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err = errors.Join(err, err2, err3); err != nil {
		closeAll()
		return nil, fmt.Errorf("cannot make pipes for %s: %w", argv[0], err)
	}
	pidfd := -1
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir:   cwd,
		Env:   os.Environ(),
		Files: []uintptr{uintptr(childIn), uintptr(outW), uintptr(errW)},
		// A group of its own, killed whole: `sh -c` forks curl, which must not outlive it.
		Sys: &syscall.SysProcAttr{Setpgid: true, PidFD: &pidfd},
	})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	for _, fd := range []int{childIn, outW, errW} {
		syscall.Close(fd)
	}
	p := &osProc{pid: pid, done: make(chan struct{})}
	stdout, stderr := pollable(outR, "stdout"), pollable(errR, "stderr")
	var hold *os.File
	switch mode {
	case stdinBytes, stdinPipe:
		p.input = &stdinQueue{w: pollable(ourIn, "stdin")}
		if mode == stdinBytes {
			p.input.push(stdin)
			p.input.close()
		}
	case stdinHold:
		hold = pollable(ourIn, "stdin")
	}
	var outBuf, errBuf bytes.Buffer
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() {
		defer pumps.Done()
		if channel {
			pump(stdout, func(b []byte) { ev.onData(id, b) })
			ev.onEOF(id)
		} else {
			pump(stdout, func(b []byte) { outBuf.Write(b) })
		}
	}()
	go func() {
		defer pumps.Done()
		if channel {
			pump(stderr, func(b []byte) { ev.onStderr(id, b) })
		} else {
			pump(stderr, func(b []byte) { errBuf.Write(b) })
		}
	}()
	go func() {
		code := p.wait(pidfd)
		if hold != nil {
			hold.Close()
		}
		drained := make(chan struct{})
		go func() { pumps.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(pipeDrain):
			stdout.Close()
			stderr.Close()
			<-drained
		}
		stdout.Close()
		stderr.Close()
		ev.onExit(id, code, outBuf.Bytes(), errBuf.Bytes())
		close(p.done)
	}()
	return p, nil
}

// pollable wraps our end of a pipe for Go's poller.
func pollable(fd int, name string) *os.File {
	_ = syscall.SetNonblock(fd, true)
	return os.NewFile(uintptr(fd), name)
}

// readBuffers are lent to one read at a time: a process waiting for output holds none.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pump hands f's bytes to fn (which copies what it keeps) until f ends or is closed.
func pump(f *os.File, fn func([]byte)) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	for {
		end := false
		err := rc.Read(func(fd uintptr) bool {
			bp := readBuffers.Get().(*[]byte)
			defer readBuffers.Put(bp)
			n, err := syscall.Read(int(fd), *bp)
			for err == syscall.EINTR {
				n, err = syscall.Read(int(fd), *bp)
			}
			switch {
			case err == syscall.EAGAIN:
				return false // nothing yet: wait in the poller
			case err != nil || n <= 0:
				end = true
			default:
				fn((*bp)[:n])
			}
			return true
		})
		if err != nil || end {
			return
		}
	}
}

// wait waits for the process's exit and returns its status (128+N for signal N).
func (p *osProc) wait(pidfd int) int {
	if pidfd < 0 {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(p.pid, &ws, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
	f := pollable(pidfd, "pidfd")
	defer f.Close()
	code := -1
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Read(func(fd uintptr) bool {
			// Seen first without reaping: while it is a zombie its process group is safe to kill.
			exited, c, errno := waitid(fd, syscall.WNOWAIT)
			if errno == syscall.EAGAIN || errno == 0 && !exited {
				return false
			}
			p.mu.Lock()
			p.reaped = true
			_, _, _ = waitid(fd, 0)
			p.mu.Unlock()
			code = c
			return true
		})
	}
	if err != nil {
		code = -1
	}
	return code
}

// The layout of siginfo_t for SIGCHLD on 64-bit Linux: si_code at 8, si_pid at 16, si_status
// at 24.
const (
	pPidfd        = 3
	siginfoSize   = 128
	siginfoCode   = 8
	siginfoPid    = 16
	siginfoStatus = 24
	cldExited     = 1
)

// waitid asks pidfd fd whether its process exited (flags: WNOWAIT to leave it a zombie).
func waitid(fd uintptr, flags int) (exited bool, code int, errno syscall.Errno) {
	var info [siginfoSize]byte
	for {
		_, _, errno = syscall.Syscall6(syscall.SYS_WAITID, pPidfd, fd, uintptr(unsafe.Pointer(&info[0])),
			uintptr(syscall.WEXITED|syscall.WNOHANG|flags), 0, 0)
		if errno != syscall.EINTR {
			break
		}
	}
	if errno != 0 || *(*int32)(unsafe.Pointer(&info[siginfoPid])) == 0 {
		return false, 0, errno
	}
	status := int(*(*int32)(unsafe.Pointer(&info[siginfoStatus])))
	if *(*int32)(unsafe.Pointer(&info[siginfoCode])) == cldExited {
		return true, status, 0
	}
	return true, 128 + status, 0
}

// stdinQueue writes what is pushed, in order, from one goroutine at a time, and closes the writer
// once asked to and everything is written. A write that fails (the process is gone) drops the
// rest: its exit is reported as usual.
type stdinQueue struct {
	w io.WriteCloser

	mu      sync.Mutex
	queue   [][]byte
	closing bool // asked to close
	closed  bool
	running bool
	broken  bool
}

func (q *stdinQueue) push(b []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, b)
	q.startLocked()
}

func (q *stdinQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closing = true
	q.startLocked()
}

// attach gives a queue made before its process started its writer.
func (q *stdinQueue) attach(w io.WriteCloser) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.w = w
	if len(q.queue) > 0 || q.closing {
		q.startLocked()
	}
}

func (q *stdinQueue) startLocked() {
	if !q.running && q.w != nil {
		q.running = true
		go q.run()
	}
}

func (q *stdinQueue) run() {
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			closeNow := q.closing && !q.closed
			if !closeNow {
				q.running = false
				q.mu.Unlock()
				return
			}
			q.closed, q.broken = true, true // nothing is written after the close
			q.mu.Unlock()
			q.w.Close()
			continue
		}
		b := q.queue[0]
		q.queue[0] = nil
		q.queue = q.queue[1:]
		broken := q.broken
		q.mu.Unlock()
		if !broken {
			if _, err := q.w.Write(b); err != nil {
				q.mu.Lock()
				q.broken = true
				q.mu.Unlock()
			}
		}
	}
}
