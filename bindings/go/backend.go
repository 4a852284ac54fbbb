package mcpgw

import (
	"context"
	"fmt"
	"io"
)

// Backend is how commands and the session channel reach the sandbox: this machine (Local),
// `docker exec` (Docker), `podman exec` (Podman), `kubectl exec` (Kubectl), any argv prefix that
// runs a command inside the sandbox (Argv: `ssh host`, `nsenter ...`), or functions of your own
// (Exec: an E2B or Daytona SDK). libmcpgw knows each backend: the argv of a command and of a
// channel, how to tell the backend's failure (the container is gone, the daemon unreachable) from
// the command's exit status, and how a command cancelled on the host ends inside the sandbox too.
// The Client only starts what it is told to start.
type Backend struct {
	spec map[string]any
	run  RunFunc
	open OpenFunc
	err  error
}

// ContainerOptions are the optional settings of Docker and Podman.
type ContainerOptions struct {
	// ExecOptions go between "exec" and the container, e.g. "--user", "agent".
	ExecOptions []string
	// Options are the CLI's own, before "exec", e.g. "--host", "ssh://box".
	Options []string
	// Program is the CLI; "docker" or "podman" when empty.
	Program string
}

// PodOptions are the optional settings of Kubectl.
type PodOptions struct {
	// Namespace is the pod's namespace.
	Namespace string
	// Container is the container in the pod.
	Container string
	// Options are kubectl's own, e.g. "--context", "prod".
	Options []string
	// Program is the CLI; "kubectl" when empty.
	Program string
}

// Local runs commands on this machine with `sh -c`, in cwd ("" for the current directory): the
// machine is the sandbox (tests, development, a gateway on the agent's own machine).
func Local(cwd string) Backend {
	spec := map[string]any{"kind": "local"}
	if cwd != "" {
		spec["cwd"] = cwd
	}
	return Backend{spec: spec}
}

// Docker runs commands in a running container with `docker exec`. Give at most one
// ContainerOptions.
func Docker(container string, opts ...ContainerOptions) Backend {
	return containerBackend("docker", container, opts)
}

// Podman runs commands in a running container with `podman exec`. Give at most one
// ContainerOptions.
func Podman(container string, opts ...ContainerOptions) Backend {
	return containerBackend("podman", container, opts)
}

func containerBackend(kind, container string, opts []ContainerOptions) Backend {
	spec := map[string]any{"kind": kind, "container": container}
	if len(opts) > 1 {
		return Backend{spec: spec, err: fmt.Errorf("%s takes at most one ContainerOptions, not %d", kind, len(opts))}
	}
	for _, o := range opts {
		setList(spec, "exec_options", o.ExecOptions)
		setList(spec, "options", o.Options)
		setText(spec, "program", o.Program)
	}
	return Backend{spec: spec}
}

// Kubectl runs commands in a running pod with `kubectl exec` (pod is "name" or "pod/name"). Give
// at most one PodOptions.
func Kubectl(pod string, opts ...PodOptions) Backend {
	spec := map[string]any{"kind": "kubectl", "pod": pod}
	if len(opts) > 1 {
		return Backend{spec: spec, err: fmt.Errorf("kubectl takes at most one PodOptions, not %d", len(opts))}
	}
	for _, o := range opts {
		setText(spec, "namespace", o.Namespace)
		setText(spec, "container", o.Container)
		setList(spec, "options", o.Options)
		setText(spec, "program", o.Program)
	}
	return Backend{spec: spec}
}

// Argv runs commands with prefix followed by `sh -c COMMAND`: prefix is any argv that runs its
// remaining arguments inside the sandbox ("nsenter", "-t", "PID", "-m", "-n", "-p", or "bwrap",
// ...). joinsArguments says that the program joins its arguments into one line for a remote shell,
// as ssh does ("ssh", "box"): the words are then quoted once more.
func Argv(prefix []string, joinsArguments bool) Backend {
	return Backend{spec: map[string]any{"kind": "argv", "prefix": append([]string{}, prefix...), "joins_arguments": joinsArguments}}
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

// RunFunc runs command with `sh -c` inside the sandbox, with stdin on its standard input (nil:
// none; only a backend made with passesStdin gets any), and returns its exit status and output.
// It returns an error only when the command could not be run at all (the operation then fails
// with ErrExecFailed, quoting the error). ctx ends at the command's time limit, and when the
// operation is cancelled: the function should then stop the command. It is called from its own
// goroutine, concurrently with others; a panic in it fails the operation and is raised again in
// the operation's caller.
type RunFunc func(ctx context.Context, command string, stdin []byte) (ExecResult, error)

// OpenFunc starts command with `sh -c` inside the sandbox as a long-lived process with its
// standard input and output piped to the host (the session channel). ctx ends when the Client
// gives the channel up before it opened.
type OpenFunc func(ctx context.Context, command string) (*Channel, error)

// Channel is a long-lived command an OpenFunc started.
type Channel struct {
	// Stdin is the command's standard input; closing it ends the command.
	Stdin io.WriteCloser
	// Stdout is its standard output; it ends (io.EOF) when the command ends.
	Stdout io.Reader
	// Stderr is its standard error, or nil when the backend gives none.
	Stderr io.Reader
	// Wait, when not nil, waits for the command's end and returns its exit status; without it
	// the command counts as exited 0 once Stdout ended.
	Wait func() (int, error)
	// Kill, when not nil, ends the command at once; without it Stdin is closed.
	Kill func() error
}

// Exec runs commands through functions of your own: run for each command, open (nil: no
// sessions) for the session channel. passesStdin says that run passes stdin to the command:
// then the gateway binary (EnsureGatewayBinary) and request bodies too large for one command
// travel on stdin in one command, instead of in base64 pieces of about 120 KiB, one command
// each. The functions say nothing of the backend's failures: libmcpgw cannot tell them from the
// command's, so run should return an error when the sandbox is gone.
func Exec(run RunFunc, open OpenFunc, passesStdin bool) Backend {
	b := Backend{spec: map[string]any{"kind": "exec", "passes_stdin": passesStdin}, run: run, open: open}
	if run == nil {
		b.err = fmt.Errorf("the exec backend needs a run function")
	}
	return b
}

func setList(spec map[string]any, key string, v []string) {
	if len(v) > 0 {
		spec[key] = append([]string{}, v...)
	}
}

func setText(spec map[string]any, key, v string) {
	if v != "" {
		spec[key] = v
	}
}
