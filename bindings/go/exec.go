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

// Exec is how commands reach the sandbox: it runs one `sh -c` command there and reports its
// exit status and output. LocalExec, DockerExec and KubectlExec are ready-made; ExecFunc and
// StdinExecFunc turn a function into an Exec for any other backend (an E2B or Daytona SDK, ...).
type Exec interface {
	// Exec runs command with `sh -c` inside the sandbox (argv-style backends run
	// []string{"sh", "-c", command}), with stdin on its standard input when stdin is not nil
	// (only when PassesStdin is true; else it is always nil), and returns its exit status and
	// output.
	//
	// It returns a nil error whenever the command ran, whatever its exit status, and a non-nil
	// error only when it could not be run at all (the sandbox is gone, the backend refused); the
	// call then fails with ErrExecFailed, wrapping that error.
	//
	// ctx carries the command's time limit and the caller's cancellation: when ctx is done the
	// function should stop the command and return ctx.Err(). The Client stops waiting for it at
	// that moment in any case. It is called from many goroutines at once when the Client is,
	// and may itself use the Client.
	//
	// A command carries no secret: requests read the gateway's token from its token file
	// inside the sandbox, so the text may be logged.
	Exec(ctx context.Context, command string, stdin []byte) (ExecResult, error)
	// PassesStdin reports whether Exec passes stdin to the command. Then the gateway binary
	// (EnsureGatewayBinary) and request bodies too large for one command travel on stdin in one
	// command, instead of in pieces of about 120 KiB, one command each.
	PassesStdin() bool
}

// ExecResult is what a command did in the sandbox.
type ExecResult struct {
	// ExitCode is the command's exit status (128+n when a signal n ended it).
	ExitCode int
	// Stdout is everything the command wrote to its standard output.
	Stdout []byte
	// Stderr is everything the command wrote to its standard error.
	Stderr []byte
}

// ExecFunc is an Exec that does not pass stdin: the function runs command and returns what it
// did, as Exec.Exec says.
type ExecFunc func(ctx context.Context, command string) (ExecResult, error)

// Exec calls f; stdin is always nil, since PassesStdin says false.
func (f ExecFunc) Exec(ctx context.Context, command string, _ []byte) (ExecResult, error) {
	return f(ctx, command)
}

// PassesStdin is false.
func (ExecFunc) PassesStdin() bool { return false }

// StdinExecFunc is an Exec that passes stdin: the function runs command with stdin (nil: none)
// on its standard input, as Exec.Exec says.
type StdinExecFunc func(ctx context.Context, command string, stdin []byte) (ExecResult, error)

// Exec calls f.
func (f StdinExecFunc) Exec(ctx context.Context, command string, stdin []byte) (ExecResult, error) {
	return f(ctx, command, stdin)
}

// PassesStdin is true.
func (StdinExecFunc) PassesStdin() bool { return true }

// LocalExec runs commands on this machine with `sh -c`, in dir ("" for the current
// directory), and passes stdin. It serves as the sandbox when there is none (tests, development,
// a gateway on the agent's own machine). When ctx is done it kills the command's whole process
// group, so no curl it started outlives the call.
func LocalExec(dir string) StdinExecFunc {
	return func(ctx context.Context, command string, stdin []byte) (ExecResult, error) {
		return runArgv(ctx, dir, localArgv(command), stdin)
	}
}

// DockerExec runs commands in a running container with `docker exec` (`docker exec -i` for a
// command with stdin), and passes stdin. dockerFlags go between "exec" and the container, e.g.
// "--user", "agent" or "--workdir", "/work". The container needs sh, and curl or the gateway
// binary. Cancelling ctx stops the docker client; the command inside the container then ends at
// its own time limit.
//
// Docker's own failures are errors (the call fails with ErrExecFailed), not exit statuses of
// the command: exit 1 with "Error response from daemon: ..." (no such container, not running,
// paused), "Cannot connect to the Docker daemon" or "unable to upgrade to tcp" (the container is
// being killed as the exec starts), 125 (docker could not run), 126 with "OCI
// runtime exec failed" (sh cannot start), and 137 with no output when the container is no
// longer running (killed during the command). Any other exit status is the command's.
func DockerExec(container string, dockerFlags ...string) StdinExecFunc {
	return func(ctx context.Context, command string, stdin []byte) (ExecResult, error) {
		res, err := runArgv(ctx, "", dockerArgv(container, dockerFlags, stdin != nil, command), stdin)
		if err != nil {
			return res, err
		}
		if why := dockerFailure(ctx, container, res, false); why != "" {
			return res, &BackendError{Backend: "docker", Target: container, ExitCode: res.ExitCode, Reason: why}
		}
		return res, nil
	}
}

// KubectlExec runs commands in a pod with `kubectl exec` (`kubectl exec -i` for a command with
// stdin), and passes stdin. kubectlFlags go between "exec" and the pod, e.g. "--namespace",
// "agents", "--container", "workspace", "--context", "prod". kubectl passes the command's exit
// status through; the pod's image needs sh, and curl or the gateway binary. Cancelling ctx
// stops the kubectl client; the command inside the pod then ends at its own time limit.
//
// kubectl's own failures are errors (the call fails with ErrExecFailed): exit 1 with stderr
// "Error from server ..." (e.g. NotFound), "error: unable to upgrade connection ...", "Unable to
// connect to the server ..." or "The connection to the server ... was refused".
func KubectlExec(pod string, kubectlFlags ...string) StdinExecFunc {
	return func(ctx context.Context, command string, stdin []byte) (ExecResult, error) {
		res, err := runArgv(ctx, "", kubectlArgv(pod, kubectlFlags, stdin != nil, command), stdin)
		if err != nil {
			return res, err
		}
		if why := kubectlFailure(res); why != "" {
			return res, &BackendError{Backend: "kubectl", Target: pod, ExitCode: res.ExitCode, Reason: why}
		}
		return res, nil
	}
}

// BackendError is a command that a ready-made Exec could not run because the sandbox backend
// failed (the container or pod is gone, the daemon or API server is unreachable): the Exec
// returns it, and the call fails with ErrExecFailed wrapping it.
type BackendError struct {
	// Backend is "docker" or "kubectl".
	Backend string
	// Target is the container or pod.
	Target string
	// ExitCode is the backend client's exit status.
	ExitCode int
	// Reason is what the backend said, or what was found out.
	Reason string
}

// Error says which backend failed for which target, and why.
func (e *BackendError) Error() string {
	return fmt.Sprintf("%s exec in %s failed (exit %d): %s", e.Backend, e.Target, e.ExitCode, e.Reason)
}

// dockerFailure says why res is a failure of docker rather than the command's own exit, or "".
// A channel's stderr is attach's log, not docker's: its exit 137 is judged by the container's
// state alone.
func dockerFailure(ctx context.Context, container string, res ExecResult, channel bool) string {
	stderr := strings.TrimSpace(string(res.Stderr))
	stdout := strings.TrimSpace(string(res.Stdout))
	switch {
	case res.ExitCode == 1 && (strings.HasPrefix(stderr, "Error response from daemon:") ||
		strings.HasPrefix(stderr, "Cannot connect to the Docker daemon") ||
		strings.HasPrefix(stderr, "unable to upgrade to tcp")):
		return "the sandbox is gone or unreachable: " + firstLine(stderr)
	case res.ExitCode == 125:
		return "docker could not run the command: " + firstLine(stderr)
	case res.ExitCode == 126 && strings.HasPrefix(stdout, "OCI runtime exec failed"):
		return "the container cannot start sh: " + firstLine(stdout)
	case res.ExitCode == 137 && (channel || stdout == "" && stderr == ""):
		// Both a command killed inside a live container and a container killed under the
		// command exit 137 silently; only the container's state tells them apart.
		if containerGone(ctx, container) {
			return "the container was killed or removed during the command"
		}
	}
	return ""
}

// containerGone asks docker whether the container has stopped or is gone. The exec of a
// container being killed can end before the daemon marks the container stopped, so a container
// still running is asked about again for a while (up to a second) before the answer is no.
func containerGone(ctx context.Context, container string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for deadline := time.Now().Add(time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := exec.CommandContext(ctx, "docker", "inspect", "--format", "{{.State.Running}}", container).Output()
		if err != nil || strings.TrimSpace(string(out)) != "true" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// kubectlFailure says why res is a failure of kubectl rather than the command's own exit, or "".
func kubectlFailure(res ExecResult) string {
	stderr := strings.TrimSpace(string(res.Stderr))
	if res.ExitCode != 1 {
		return ""
	}
	for _, prefix := range []string{"Error from server", "error: unable to upgrade connection",
		"Unable to connect to the server", "The connection to the server"} {
		if strings.HasPrefix(stderr, prefix) {
			return "the sandbox is gone or unreachable: " + firstLine(stderr)
		}
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func localArgv(command string) []string {
	return []string{"sh", "-c", command}
}

func dockerArgv(container string, flags []string, stdin bool, command string) []string {
	argv := []string{"docker", "exec"}
	if stdin {
		argv = append(argv, "-i")
	}
	argv = append(argv, flags...)
	return append(argv, container, "sh", "-c", command)
}

func kubectlArgv(pod string, flags []string, stdin bool, command string) []string {
	argv := []string{"kubectl", "exec"}
	if stdin {
		argv = append(argv, "-i")
	}
	argv = append(argv, flags...)
	// "--" ends kubectl's own flags: nothing in the command is read as one.
	return append(argv, pod, "--", "sh", "-c", command)
}

// runArgv runs argv in its own process group with stdin (nil: /dev/null) and both outputs
// captured. A non-nil error means it did not run, or ctx ended it (then the error is
// ctx.Err()).
func runArgv(ctx context.Context, dir string, argv []string, stdin []byte) (ExecResult, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
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
		res.ExitCode = exitCode(exitErr)
	default:
		return ExecResult{}, fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	return res, nil
}

// exitCode is the exit status of a process that ended, 128+n when a signal n ended it.
func exitCode(e *exec.ExitError) int {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return e.ExitCode()
}
