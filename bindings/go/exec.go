package mcpgw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Exec runs command with `sh -c` inside the sandbox and reports its exit status and output.
// Argv-style backends run []string{"sh", "-c", command}.
//
// It returns a nil error whenever the command ran, whatever its exit status, and a non-nil
// error only when it could not be run at all (the sandbox is gone, the backend refused); the
// call then fails with ErrExecFailed, wrapping that error.
//
// ctx carries the command's time limit and the caller's cancellation: when ctx is done the
// function should stop the command and return ctx.Err(). The Client stops waiting for it at
// that moment in any case, so a function that ignores ctx delays nothing but its own
// goroutine. It is called from many goroutines at once when the Client is, and may itself use
// the Client.
//
// A command carries no secret: requests read the gateway's token from its token file inside
// the sandbox, so the text may be logged.
type Exec func(ctx context.Context, command string) (ExecResult, error)

// ExecResult is what a command did in the sandbox.
type ExecResult struct {
	// ExitCode is the command's exit status (128+n when a signal n ended it).
	ExitCode int
	// Stdout is everything the command wrote to its standard output.
	Stdout []byte
	// Stderr is everything the command wrote to its standard error.
	Stderr []byte
}

// LocalExec runs commands on this machine with `sh -c`, in dir ("" for the current
// directory). It serves as the sandbox when there is none (tests, development, a gateway on
// the agent's own machine). When ctx is done it kills the command's whole process group, so
// no curl it started outlives the call.
func LocalExec(dir string) Exec {
	return func(ctx context.Context, command string) (ExecResult, error) {
		return runArgv(ctx, dir, localArgv(command))
	}
}

// DockerExec runs commands in a running container with `docker exec`. dockerFlags go
// between "exec" and the container, e.g. "--user", "agent" or "--workdir", "/work". The
// container needs sh, and curl or the gateway binary. Cancelling ctx stops the docker
// client; the command inside the container then ends at its own time limit.
func DockerExec(container string, dockerFlags ...string) Exec {
	return func(ctx context.Context, command string) (ExecResult, error) {
		res, err := runArgv(ctx, "", dockerArgv(container, dockerFlags, command))
		// docker exits 125 itself when the exec cannot start (no such container, not
		// running): the command never ran.
		if err == nil && res.ExitCode == 125 {
			return res, fmt.Errorf("docker exec in %s failed (exit 125): %s", container,
				strings.TrimSpace(string(res.Stderr)))
		}
		return res, err
	}
}

// KubectlExec runs commands in a pod with `kubectl exec`. kubectlFlags go between "exec"
// and the pod, e.g. "--namespace", "agents", "--container", "workspace", "--context", "prod".
// kubectl passes the command's exit status through; the pod's image needs sh, and curl or
// the gateway binary. Cancelling ctx stops the kubectl client; the command inside the pod
// then ends at its own time limit.
func KubectlExec(pod string, kubectlFlags ...string) Exec {
	return func(ctx context.Context, command string) (ExecResult, error) {
		return runArgv(ctx, "", kubectlArgv(pod, kubectlFlags, command))
	}
}

func localArgv(command string) []string {
	return []string{"sh", "-c", command}
}

func dockerArgv(container string, flags []string, command string) []string {
	argv := append([]string{"docker", "exec"}, flags...)
	return append(argv, container, "sh", "-c", command)
}

func kubectlArgv(pod string, flags []string, command string) []string {
	argv := append([]string{"kubectl", "exec"}, flags...)
	// "--" ends kubectl's own flags: nothing in the command is read as one.
	return append(argv, pod, "--", "sh", "-c", command)
}

// runArgv runs argv in its own process group with stdin from /dev/null and both outputs
// captured. A non-nil error means it did not run, or ctx ended it (then the error is
// ctx.Err()).
func runArgv(ctx context.Context, dir string, argv []string) (ExecResult, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A group of its own, killed whole: `sh -c` forks curl, which must not outlive the call.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Something that left the group (setsid) while holding the pipes must not hang Wait.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return ExecResult{}, ctx.Err()
	}
	res := ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exitErr *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		res.ExitCode = 0
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	default:
		return ExecResult{}, fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	return res, nil
}
