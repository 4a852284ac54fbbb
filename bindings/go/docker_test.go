package mcpgw_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// Tests against real Docker containers made by tests/docker/sandbox.sh: a busybox-only image
// with the static gateway and test server, no network, entered only with docker exec. They say
// SKIPPED (and why) when no Docker daemon answers.

const (
	containerGateway    = "/usr/local/bin/mcpgw-gateway"
	containerTestServer = "/usr/local/bin/mcpgw-testserver"
)

var docker struct {
	once       sync.Once
	image      string
	skip       string
	mu         sync.Mutex
	containers []string
}

func sandboxScript() string { return filepath.Join(repoRoot, "tests", "docker", "sandbox.sh") }

// dockerImage is the test image, built unless it exists ($MCPGW_TEST_IMAGE names one built
// already, as the Makefile does); the test is skipped when there is no daemon.
func dockerImage(t *testing.T) string {
	t.Helper()
	docker.once.Do(func() {
		if out, err := exec.Command("sh", sandboxScript(), "check").Output(); err != nil {
			docker.skip = strings.TrimSpace(string(out))
			if docker.skip == "" {
				docker.skip = err.Error()
			}
			return
		}
		if docker.image = os.Getenv("MCPGW_TEST_IMAGE"); docker.image != "" {
			return
		}
		out, err := exec.Command("sh", sandboxScript(), "image").Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%s", strings.TrimSpace(string(ee.Stderr)))
			}
			docker.skip = "the test image cannot be built (run `make docker-image` at the repository root): " + err.Error()
			return
		}
		docker.image = strings.TrimSpace(string(out))
	})
	if docker.skip != "" {
		t.Skip("SKIPPED: " + docker.skip)
	}
	return docker.image
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// dockerSandbox starts a container for the test, with the host directory it returns mounted at
// /marks (for the test server's cancel markers), and removes it when the test ends.
func dockerSandbox(t *testing.T) (container, marks string) {
	t.Helper()
	image := dockerImage(t)
	marks = t.TempDir()
	name := fmt.Sprintf("mcpgw-go-%d-%s", os.Getpid(), unsafeName.ReplaceAllString(t.Name(), "-"))
	out, err := exec.Command("sh", sandboxScript(), "start", image, name, "--", "-v", marks+":/marks").CombinedOutput()
	if err != nil {
		t.Fatalf("starting a container: %s (%v)", out, err)
	}
	docker.mu.Lock()
	docker.containers = append(docker.containers, name)
	docker.mu.Unlock()
	t.Cleanup(func() { _ = exec.Command("sh", sandboxScript(), "stop", name).Run() })
	return name, marks
}

// stopDockerSandboxes removes every container this process started (after the tests).
func stopDockerSandboxes() {
	docker.mu.Lock()
	defer docker.mu.Unlock()
	if len(docker.containers) > 0 {
		_ = exec.Command("sh", append([]string{sandboxScript(), "stop"}, docker.containers...)...).Run()
	}
}

// dockerClient is a client of a gateway it launched in container, with the test server
// registered as "ts".
func dockerClient(t *testing.T, container string) (*mcpgw.Client, *mcpgw.GatewayInfo) {
	t.Helper()
	ctx := context.Background()
	c, err := mcpgw.NewClient(mcpgw.DockerExec(container), mcpgw.WithGatewayPath(containerGateway),
		mcpgw.WithTimeout(60*time.Second))
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

// requireContainerAttach skips a session test when the container's gateway has no `attach`.
func requireContainerAttach(t *testing.T, container string) {
	t.Helper()
	out, _ := exec.Command("docker", "exec", container, containerGateway, "--help").CombinedOutput()
	if !strings.Contains(string(out), "mcpgw-gateway attach") {
		t.Skipf("SKIPPED: the test image's gateway has no attach subcommand (the session channel's gateway side)")
	}
}

// containerPS is the process list of the container (busybox ps).
func containerPS(t *testing.T, container string) string {
	t.Helper()
	out, err := exec.Command("docker", "exec", container, "ps", "-o", "pid,args").CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec ps: %s (%v)", out, err)
	}
	return string(out)
}

func p50(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// The same calls one-shot (one docker exec each) and over a session (one docker exec -i for
// all), with their p50; then 64 calls at once, progress and cancellation over the session, and
// a close that leaves no process behind.
func TestDockerOneShotAndSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	container, marks := dockerSandbox(t)
	requireContainerAttach(t, container)
	c, info := dockerClient(t, container)

	echo := func(i int) (time.Duration, error) {
		want := fmt.Sprintf("call %d", i)
		began := time.Now()
		chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": want})
		took := time.Since(began)
		if err == nil && chunk.Text() != want {
			err = fmt.Errorf("echo %d answered %q", i, chunk.Text())
		}
		return took, err
	}
	var oneShot, session []time.Duration
	for i := range 15 {
		d, err := echo(i)
		if err != nil {
			t.Fatal(err)
		}
		oneShot = append(oneShot, d)
	}

	hello, err := c.OpenSession(ctx, mcpgw.DockerSession(container))
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	if hello.Launched || hello.PID != info.PID {
		t.Errorf("session info %+v, gateway %+v", hello, info)
	}
	for i := range 50 {
		d, err := echo(i)
		if err != nil {
			t.Fatal(err)
		}
		session = append(session, d)
	}
	t.Logf("echo through docker: p50 one-shot %v (%d calls), p50 over a session %v (%d calls)",
		p50(oneShot).Round(time.Microsecond), len(oneShot), p50(session).Round(time.Microsecond), len(session))
	if p50(session) >= p50(oneShot) {
		t.Errorf("a session call (p50 %v) is not faster than a one-shot call (p50 %v)", p50(session), p50(oneShot))
	}

	t.Run("64 concurrent calls", func(t *testing.T) {
		took := concurrentCalls(ctx, t, c, 64)
		t.Logf("64 concurrent calls over one docker session took %v", took.Round(time.Millisecond))
	})

	t.Run("progress", func(t *testing.T) {
		var at []time.Duration
		began := time.Now()
		_, err := c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 1, "steps": 5},
			mcpgw.WithProgress(func(ch mcpgw.ToolChunk) {
				if p := ch.Progress(); p == nil || p.Progress != float64(len(at)+1) {
					t.Errorf("progress %d: %+v", len(at), p)
				}
				at = append(at, time.Since(began))
			}))
		ended := time.Since(began)
		if err != nil || len(at) != 5 || ended-at[0] < 600*time.Millisecond {
			t.Errorf("progress at %v, result at %v, %v", at, ended, err)
		}
		t.Logf("progress through docker arrived at %v; the result at %v", at, ended.Round(time.Millisecond))
	})

	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var cancelledAt time.Time
		_, err := c.CallTool(cctx, "ts", "slow", map[string]any{"seconds": 30, "steps": 300, "cancel_marker": "/marks/cancelled"},
			mcpgw.WithProgress(func(mcpgw.ToolChunk) {
				if cancelledAt.IsZero() {
					cancelledAt = time.Now()
					cancel()
				}
			}))
		if !errors.Is(err, mcpgw.ErrCancelled) {
			t.Fatalf("cancelled call: %v", err)
		}
		waitFile(t, filepath.Join(marks, "cancelled"), "cancelled")
		took := time.Since(cancelledAt)
		t.Logf("through docker, the server wrote its cancel marker %v after the cancel", took.Round(time.Microsecond))
		if took > 500*time.Millisecond {
			t.Errorf("the cancel marker came %v after the cancel", took)
		}
	})

	if ps := containerPS(t, container); !strings.Contains(ps, "attach") {
		t.Errorf("no attach process in the container while the session is open:\n%s", ps)
	}
	if err := c.CloseSession(); err != nil {
		t.Fatal(err)
	}
	if ps := containerPS(t, container); strings.Contains(ps, "attach") {
		t.Errorf("an attach process is left in the container:\n%s", ps)
	}
	if err := c.StopGateway(ctx); err != nil {
		t.Fatal(err)
	}
	if ps := containerPS(t, container); strings.Contains(ps, "mcpgw") {
		t.Errorf("processes left in the container:\n%s", ps)
	}
}

// `docker kill` of the container fails the calls in flight over its session with
// ErrSessionLost within a second; later calls fail with ErrExecFailed: the sandbox is gone.
func TestDockerKillDuringSessionCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	container, _ := dockerSandbox(t)
	requireContainerAttach(t, container)
	c, _ := dockerClient(t, container)
	if _, err := c.OpenSession(ctx, mcpgw.DockerSession(container)); err != nil {
		t.Fatal(err)
	}
	const n = 3
	var running sync.WaitGroup
	running.Add(n)
	type outcome struct {
		err error
		at  time.Time
	}
	results := make(chan outcome, n)
	for range n {
		go func() {
			var once sync.Once
			_, err := c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 60, "steps": 600},
				mcpgw.WithProgress(func(mcpgw.ToolChunk) { once.Do(running.Done) }))
			results <- outcome{err, time.Now()}
		}()
	}
	running.Wait()
	kill := time.Now()
	if out, err := exec.Command("docker", "kill", container).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %s (%v)", out, err)
	}
	killed := time.Now()
	t.Logf("docker kill took %v", killed.Sub(kill).Round(time.Microsecond))
	for range n {
		select {
		case o := <-results:
			if !errors.Is(o.err, mcpgw.ErrSessionLost) {
				t.Errorf("call in flight: %v", o.err)
			}
			t.Logf("a call in flight failed %v after docker kill began (%v after it returned): %v",
				o.at.Sub(kill).Round(time.Microsecond), o.at.Sub(killed).Round(time.Microsecond), o.err)
		case <-time.After(time.Second):
			t.Fatal("a call in flight did not fail within a second of docker kill")
		}
	}
	_, err := c.ListMCPs(ctx)
	var be *mcpgw.BackendError
	if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) {
		t.Errorf("call after the kill: %v", err)
	}
	t.Logf("the call after the kill: %v", err)
}

// Docker's own failures are ErrExecFailed (the sandbox is gone), not a command that failed.
func TestDockerExecFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dockerImage(t)

	t.Run("no such container", func(t *testing.T) {
		t.Parallel()
		c, err := mcpgw.NewClient(mcpgw.DockerExec("mcpgw-go-no-such-container"), mcpgw.WithGatewayPath(containerGateway))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.StartGateway(ctx)
		var be *mcpgw.BackendError
		if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) || be.ExitCode != 1 ||
			!strings.Contains(be.Reason, "No such container") {
			t.Errorf("StartGateway: %v", err)
		}
		// Opening a session in it fails the same way, before any attach could answer.
		if _, err := c.OpenSession(ctx, mcpgw.DockerSession("mcpgw-go-no-such-container")); !errors.Is(err, mcpgw.ErrExecFailed) {
			t.Errorf("OpenSession: %v", err)
		}
	})

	t.Run("stopped container", func(t *testing.T) {
		t.Parallel()
		container, _ := dockerSandbox(t)
		c, _ := dockerClient(t, container)
		if out, err := exec.Command("docker", "stop", "-t", "1", container).CombinedOutput(); err != nil {
			t.Fatalf("docker stop: %s (%v)", out, err)
		}
		_, err := c.ListMCPs(ctx)
		var be *mcpgw.BackendError
		if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) || !strings.Contains(be.Reason, "is not running") {
			t.Errorf("ListMCPs in a stopped container: %v", err)
		}
	})

	t.Run("killed during a one-shot call", func(t *testing.T) {
		t.Parallel()
		container, _ := dockerSandbox(t)
		c, _ := dockerClient(t, container)
		errc := make(chan error, 1)
		go func() {
			_, err := c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 60})
			errc <- err
		}()
		// In flight once the gateway has counted it.
		waitFor(t, "the call to reach the gateway", func() bool {
			specs, err := c.ListMCPs(ctx)
			return err == nil && specs[0].Status != nil && specs[0].Status.Calls > 0
		})
		if out, err := exec.Command("docker", "kill", container).CombinedOutput(); err != nil {
			t.Fatalf("docker kill: %s (%v)", out, err)
		}
		err := <-errc
		var be *mcpgw.BackendError
		if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) || be.ExitCode != 137 {
			t.Errorf("one-shot call in a killed container: %v", err)
		}
	})
}

// A Docker CLI without a daemon: ErrExecFailed. Not parallel: it changes DOCKER_HOST.
func TestDockerDaemonUnreachable(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("SKIPPED: needs the docker CLI")
	}
	t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock")
	c, err := mcpgw.NewClient(mcpgw.DockerExec("any"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.StartGateway(context.Background())
	var be *mcpgw.BackendError
	if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) || !strings.Contains(be.Reason, "Cannot connect to the Docker daemon") {
		t.Errorf("StartGateway without a daemon: %v", err)
	}
}

// EnsureGatewayBinary uploads the static gateway into a container in one docker exec -i, and
// the gateway then runs from there.
func TestDockerEnsureGatewayBinary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	static := envOr("MCPGW_TEST_STATIC_GATEWAY", filepath.Join(repoRoot, "target", "x86_64-unknown-linux-gnu", "release", "mcpgw-gateway"))
	container, _ := dockerSandbox(t)
	if _, err := os.Stat(static); err != nil {
		t.Skipf("SKIPPED: no static gateway (make static): %v", err)
	}
	run := mcpgw.DockerExec(container)
	var commands atomic.Int32
	counting := mcpgw.StdinExecFunc(func(ctx context.Context, command string, stdin []byte) (mcpgw.ExecResult, error) {
		commands.Add(1)
		return run(ctx, command, stdin)
	})
	c, err := mcpgw.NewClient(counting, mcpgw.WithGatewayPath("/opt/mcpgw/mcpgw-gateway"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := exec.Command("docker", "exec", container, "mkdir", "-p", "/opt/mcpgw").CombinedOutput(); err != nil {
		t.Fatal(err)
	}
	size := int64(0)
	if st, err := os.Stat(static); err == nil {
		size = st.Size()
	}
	began := time.Now()
	st, err := c.EnsureGatewayBinary(ctx, static)
	took := time.Since(began)
	if err != nil || !st.Uploaded {
		t.Fatalf("EnsureGatewayBinary: %+v, %v", st, err)
	}
	t.Logf("EnsureGatewayBinary uploaded %.1f MiB into the container in %v, %d docker execs",
		float64(size)/(1<<20), took.Round(time.Millisecond), commands.Load())
	if n := commands.Load(); n > 2 {
		t.Errorf("the upload took %d commands", n)
	}
	info, err := c.StartGateway(ctx)
	if err != nil {
		t.Fatalf("StartGateway from the uploaded binary: %v", err)
	}
	if _, err := c.Health(ctx); err != nil {
		t.Error(err)
	}
	if err := c.StopGateway(ctx); err != nil {
		t.Error(err)
	}
	_ = info
}
