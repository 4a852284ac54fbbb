package mcpgw_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// Real containers made by tests/docker/sandbox.sh (with DOCKER=podman for podman): a
// busybox-only image with the static gateway and test server, no network, entered only with
// `docker exec` / `podman exec`. The tests say SKIPPED (and why) when no daemon answers.

const (
	containerGateway    = "/usr/local/bin/mcpgw-gateway"
	containerTestServer = "/usr/local/bin/mcpgw-testserver"
)

// engine is a container CLI and what its containers need.
type engine struct {
	cli      string
	backend  func(string, ...mcpgw.ContainerOptions) mcpgw.Backend
	imageEnv string   // names an image built already (the Makefile's)
	start    []string // sandbox.sh start's options after IMAGE NAME

	once  sync.Once
	image string
	skip  string
	mu    sync.Mutex
	names []string
}

var (
	dockerEngine = &engine{cli: "docker", backend: mcpgw.Docker, imageEnv: "MCPGW_TEST_IMAGE"}
	// Debian's podman 4.3 has no catatonit for --init, and runs containers only with explicit
	// limits (else "error setting rlimit type 7").
	podmanEngine = &engine{cli: "podman", backend: mcpgw.Podman, imageEnv: "MCPGW_TEST_PODMAN_IMAGE",
		start: []string{"--no-init", "--", "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=20000:20000"}}
)

func sandboxScript() string { return filepath.Join(repoRoot, "tests", "docker", "sandbox.sh") }

func (e *engine) script(args ...string) *exec.Cmd {
	cmd := exec.Command("sh", append([]string{sandboxScript()}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER="+e.cli)
	return cmd
}

// testImage is the test image, built unless it exists; the test is skipped when there is no
// daemon.
func (e *engine) testImage(t *testing.T) string {
	t.Helper()
	e.once.Do(func() {
		if out, err := e.script("check").Output(); err != nil {
			e.skip = strings.TrimSpace(string(out))
			if e.skip == "" {
				e.skip = err.Error()
			}
			return
		}
		if e.image = os.Getenv(e.imageEnv); e.image != "" {
			return
		}
		out, err := e.script("image").Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%s", strings.TrimSpace(string(ee.Stderr)))
			}
			e.skip = "the test image cannot be built (make static, then tests/docker/sandbox.sh image): " + err.Error()
			return
		}
		e.image = strings.TrimSpace(string(out))
	})
	if e.skip != "" {
		t.Skipf("SKIPPED: %s: %s", e.cli, e.skip)
	}
	return e.image
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// container starts a container for the test, with the host directory it returns mounted at
// /marks (for the test server's cancel markers), and removes it when the test ends.
func (e *engine) container(t *testing.T) (name, marks string) {
	t.Helper()
	image := e.testImage(t)
	marks = t.TempDir()
	name = fmt.Sprintf("mcpgw-go-%d-%s", os.Getpid(), unsafeName.ReplaceAllString(t.Name(), "-"))
	args := append([]string{"start", image, name}, e.start...)
	if len(e.start) == 0 {
		args = append(args, "--")
	}
	args = append(args, "-v", marks+":/marks")
	if out, err := e.script(args...).CombinedOutput(); err != nil {
		t.Fatalf("starting a %s container: %s (%v)", e.cli, out, err)
	}
	e.mu.Lock()
	e.names = append(e.names, name)
	e.mu.Unlock()
	t.Cleanup(func() { _ = e.script("stop", name).Run() })
	return name, marks
}

// stopContainers removes every container this process started (after the tests).
func stopContainers() {
	for _, e := range []*engine{dockerEngine, podmanEngine} {
		e.mu.Lock()
		if len(e.names) > 0 {
			_ = e.script(append([]string{"stop"}, e.names...)...).Run()
		}
		e.mu.Unlock()
	}
}

// client is a client of a gateway it launched in container, with the test server registered
// as "ts".
func (e *engine) client(t *testing.T, container string, opts ...mcpgw.Option) (*mcpgw.Client, *mcpgw.GatewayInfo) {
	t.Helper()
	ctx := context.Background()
	opts = append([]mcpgw.Option{mcpgw.WithGatewayPath(containerGateway), mcpgw.WithTimeout(60 * time.Second)}, opts...)
	c, err := mcpgw.NewClient(e.backend(container), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	info, err := c.StartGateway(ctx)
	if err != nil {
		t.Fatalf("StartGateway in %s: %v", container, err)
	}
	if err := c.AddMCP(ctx, mcpgw.StdioSpec("ts", containerTestServer, "stdio")); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}
	return c, info
}

// ps is the process list of the container (busybox ps).
func (e *engine) ps(t *testing.T, container string) string {
	t.Helper()
	out, err := exec.Command(e.cli, "exec", container, "ps", "-o", "pid,stat,args").CombinedOutput()
	if err != nil {
		t.Fatalf("%s exec ps: %s (%v)", e.cli, out, err)
	}
	return string(out)
}

// killDuringSessionCalls kills the container under three calls in flight over its session: they
// fail with ErrSessionLost, naming why (the driver's own verdict that the container was killed
// or removed, or, when its reopening of the channel ran first, the backend's words that the
// container is not running), and later operations with ErrExecFailed carrying the backend's
// failure (the container is stopped, or gone).
func (e *engine) killDuringSessionCalls(t *testing.T) {
	ctx := context.Background()
	container, _ := e.container(t)
	c, _ := e.client(t, container)
	if _, err := c.OpenSession(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 3
	var running sync.WaitGroup
	running.Add(n)
	results := make(chan error, n)
	for range n {
		go func() {
			var once sync.Once
			_, err := c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 60, "steps": 600},
				mcpgw.WithProgress(func(mcpgw.ToolChunk) { once.Do(running.Done) }))
			results <- err
		}()
	}
	running.Wait()
	kill := time.Now()
	if out, err := exec.Command(e.cli, "kill", container).CombinedOutput(); err != nil {
		t.Fatalf("%s kill: %s (%v)", e.cli, out, err)
	}
	for range n {
		err := <-results
		named := err != nil && (strings.Contains(err.Error(), "killed or removed") ||
			strings.Contains(err.Error(), "is not running"))
		if !errors.Is(err, mcpgw.ErrSessionLost) || !named {
			t.Errorf("a call in flight: %v", err)
		}
		t.Logf("a call in flight failed %v after %s kill began: %v", time.Since(kill).Round(time.Millisecond), e.cli, err)
	}
	_, err := c.ListMCPs(ctx)
	var be *mcpgw.BackendError
	if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) || be.Target != container ||
		be.State != mcpgw.BackendNotRunning && be.State != mcpgw.BackendGone {
		t.Errorf("an operation after the kill: %v", err)
	}
	t.Logf("an operation after the kill: %v", err)
	if c.Session() != nil {
		t.Error("the session of a killed container is open")
	}
}

// backendFailures runs the failures every container engine has, as subtests.
func (e *engine) backendFailures(t *testing.T) {
	t.Run("no such container", func(t *testing.T) {
		t.Parallel()
		e.missingContainer(t)
	})
	t.Run("stopped container", func(t *testing.T) {
		t.Parallel()
		e.stoppedContainer(t)
	})
}

// missingContainer: one-shot and session both fail with ErrExecFailed and a BackendError of
// state gone, before anything runs in a sandbox.
func (e *engine) missingContainer(t *testing.T) {
	ctx := context.Background()
	e.testImage(t)
	name := "mcpgw-go-no-such-container"
	c, err := mcpgw.NewClient(e.backend(name), mcpgw.WithGatewayPath(containerGateway))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for what, op := range map[string]func() error{
		"StartGateway": func() error { _, err := c.StartGateway(ctx); return err },
		"OpenSession":  func() error { _, err := c.OpenSession(ctx); return err },
	} {
		err := op()
		var be *mcpgw.BackendError
		if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) || be.State != mcpgw.BackendGone ||
			be.Target != name || strings.Contains(err.Error(), "gateway binary") {
			t.Errorf("%s in a container that does not exist: %v", what, err)
		}
		t.Logf("%s: %v", what, err)
	}
}

// stoppedContainer: ErrExecFailed with a BackendError of state not_running.
func (e *engine) stoppedContainer(t *testing.T) {
	container, _ := e.container(t)
	c, _ := e.client(t, container)
	if out, err := exec.Command(e.cli, "stop", "-t", "1", container).CombinedOutput(); err != nil {
		t.Fatalf("%s stop: %s (%v)", e.cli, out, err)
	}
	_, err := c.ListMCPs(context.Background())
	var be *mcpgw.BackendError
	if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) || be.State != mcpgw.BackendNotRunning {
		t.Errorf("ListMCPs in a stopped container: %v", err)
	}
	t.Logf("ListMCPs in a stopped container: %v", err)
}
