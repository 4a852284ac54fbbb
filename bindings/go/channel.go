package mcpgw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Opener opens a session channel: it starts command with `sh -c` inside the sandbox, with its
// standard input and output piped to the host, and returns them as one io.ReadWriteCloser:
// Read reads the command's stdout, Write writes to its stdin. The command runs until its stdin
// is closed; Close must close it, make a Read in progress return, and may wait (briefly) for the
// command to exit. When Close returns an error after the channel ended by itself, its text (an
// exit status, what the backend printed) goes into the message of the calls that were lost.
//
// ctx bounds the opening only: the channel lives until Close. LocalSession, DockerSession and
// KubectlSession are ready-made; for other backends any long-lived command with stdin works (an
// E2B background command with send_stdin, a Daytona session, an SSH channel).
type Opener func(ctx context.Context, command string) (io.ReadWriteCloser, error)

// LocalSession opens session channels on this machine: `sh -c command` in dir ("" for the
// current directory), in a process group of its own.
func LocalSession(dir string) Opener {
	return func(_ context.Context, command string) (io.ReadWriteCloser, error) {
		return startChannel(dir, "", localArgv(command), nil)
	}
}

// DockerSession opens session channels in a running container: `docker exec -i [dockerFlags]
// container sh -c command`. When the channel ends because docker could not reach the container
// (see DockerExec), Close says so.
func DockerSession(container string, dockerFlags ...string) Opener {
	return func(_ context.Context, command string) (io.ReadWriteCloser, error) {
		return startChannel("", container, dockerArgv(container, dockerFlags, true, command), func(res ExecResult) string {
			return dockerFailure(context.Background(), container, res, true)
		})
	}
}

// KubectlSession opens session channels in a pod: `kubectl exec -i [kubectlFlags] pod -- sh
// -c command`.
func KubectlSession(pod string, kubectlFlags ...string) Opener {
	return func(_ context.Context, command string) (io.ReadWriteCloser, error) {
		return startChannel("", pod, kubectlArgv(pod, kubectlFlags, true, command), func(res ExecResult) string {
			return kubectlFailure(res)
		})
	}
}

// closeGrace is how long Close waits for the channel's process to exit after closing its stdin
// before it kills the process group.
const closeGrace = 5 * time.Second

// stderrKeep is how much of the channel's stderr is kept for messages.
const stderrKeep = 4096

// procChannel is a channel to a local process (sh, docker, kubectl).
type procChannel struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	stderr tailBuffer
	// backendFailure says why an exit is the backend's failure rather than the command's.
	backendFailure func(ExecResult) string
	// target is the container or pod, for messages.
	target string

	exited  chan struct{} // closed once the process was waited for
	waitErr error

	closeOnce sync.Once
	closeErr  error
}

func startChannel(dir, target string, argv []string, backendFailure func(ExecResult) string) (*procChannel, error) {
	c := &procChannel{backendFailure: backendFailure, target: target, exited: make(chan struct{})}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Dir = dir
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.cmd.Stderr = &c.stderr
	c.cmd.WaitDelay = 2 * time.Second
	stdin, err := c.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Not StdoutPipe: Wait would close its read end, possibly before the last frames are read.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.cmd.Stdout = w
	if err := c.cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	w.Close()
	c.stdin, c.stdout = stdin, r
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *procChannel) Read(p []byte) (int, error) {
	n, err := c.stdout.Read(p)
	if errors.Is(err, os.ErrClosed) {
		err = io.EOF
	}
	return n, err
}

func (c *procChannel) Write(p []byte) (int, error) { return c.stdin.Write(p) }

// Close closes the command's stdin, waits up to closeGrace for it to exit, then kills its
// process group. It returns an error describing how the process ended when that was a failure.
func (c *procChannel) Close() error {
	c.closeOnce.Do(func() {
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(closeGrace):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
		// A Read still blocked (something in the sandbox holds the pipe) returns now.
		c.stdout.Close()
		c.closeErr = c.exitError()
	})
	return c.closeErr
}

// exitError describes how the process ended, or nil when it exited 0.
func (c *procChannel) exitError() error {
	var exitErr *exec.ExitError
	if c.waitErr == nil || !errors.As(c.waitErr, &exitErr) {
		return c.waitErr
	}
	res := ExecResult{ExitCode: exitCode(exitErr), Stderr: c.stderr.bytes()}
	if c.backendFailure != nil {
		if why := c.backendFailure(res); why != "" {
			return &BackendError{Backend: c.cmd.Args[0], Target: c.target, ExitCode: res.ExitCode, Reason: why}
		}
	}
	if tail := strings.TrimSpace(string(res.Stderr)); tail != "" {
		return fmt.Errorf("%s exited %d: %s", c.cmd.Args[0], res.ExitCode, tail)
	}
	return fmt.Errorf("%s exited %d", c.cmd.Args[0], res.ExitCode)
}

// tailBuffer keeps the first and the last bytes written to it, at most stderrKeep in all.
type tailBuffer struct {
	mu   sync.Mutex
	head []byte
	tail []byte
	cut  bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := stderrKeep/2 - len(b.head); room > 0 {
		take := min(room, len(p))
		b.head = append(b.head, p[:take]...)
		p = p[take:]
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > stderrKeep/2 {
		b.tail = append(b.tail[:0:0], b.tail[len(b.tail)-stderrKeep/2:]...)
		b.cut = true
	}
	return n, nil
}

func (b *tailBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := append([]byte(nil), b.head...)
	if b.cut {
		out = append(out, "\n...\n"...)
	}
	return append(out, b.tail...)
}
