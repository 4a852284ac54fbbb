package mcpgw_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

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
	container, marks := dockerEngine.container(t)
	c, info := dockerEngine.client(t, container)

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
	hello, err := c.OpenSession(ctx)
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

	t.Run("64 concurrent calls", func(t *testing.T) {
		took := concurrentCalls(ctx, t, c, 64)
		t.Logf("64 concurrent calls over one docker session took %v", took.Round(time.Millisecond))
	})

	t.Run("progress", func(t *testing.T) {
		var got []float64
		for chunk, err := range c.CallToolStream(ctx, "ts", "slow", map[string]any{"seconds": 1, "steps": 5}) {
			if err != nil {
				t.Fatal(err)
			}
			if p := chunk.Progress(); p != nil {
				got = append(got, p.Progress)
			} else if !chunk.IsLast {
				t.Errorf("a chunk that is neither progress nor the last: %+v", chunk)
			}
		}
		if fmt.Sprint(got) != "[1 2 3 4 5]" {
			t.Errorf("progress through docker: %v", got)
		}
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
		t.Logf("through docker, the server wrote its cancel marker %v after the cancel", time.Since(cancelledAt).Round(time.Microsecond))
	})

	if ps := dockerEngine.ps(t, container); !strings.Contains(ps, "attach") {
		t.Errorf("no attach process in the container while the session is open:\n%s", ps)
	}
	if err := c.CloseSession(ctx); err != nil {
		t.Fatal(err)
	}
	if ps := dockerEngine.ps(t, container); strings.Contains(ps, "attach") {
		t.Errorf("an attach process is left in the container:\n%s", ps)
	}
	if err := c.StopGateway(ctx); err != nil {
		t.Fatal(err)
	}
	if ps := dockerEngine.ps(t, container); strings.Contains(ps, "mcpgw") {
		t.Errorf("processes left in the container:\n%s", ps)
	}
}

// A one-shot call cancelled on the host ends in the container too: the cancel wrapper kills
// the command there, and the gateway cancels the call upstream.
func TestDockerOneShotCancel(t *testing.T) {
	t.Parallel()
	container, marks := dockerEngine.container(t)
	c, _ := dockerEngine.client(t, container)
	ctx, cancel := context.WithCancel(context.Background())
	// Cancelled once the gateway has counted the call, i.e. it is in flight upstream.
	go func() {
		defer cancel()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			specs, err := c.ListMCPs(context.Background())
			if err == nil && specs[0].Status != nil && specs[0].Status.Calls > 0 {
				return
			}
		}
	}()
	_, err := c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 30, "cancel_marker": "/marks/cancelled"})
	if !errors.Is(err, mcpgw.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled one-shot call: %v", err)
	}
	waitFile(t, filepath.Join(marks, "cancelled"), "cancelled")
	waitFor(t, "the request's command to end in the container", func() bool {
		return !strings.Contains(dockerEngine.ps(t, container), "/tools/slow")
	})
}

func TestDockerKillDuringSessionCalls(t *testing.T) {
	t.Parallel()
	dockerEngine.killDuringSessionCalls(t)
}

// Docker's own failures are ErrExecFailed with a BackendError, not a command that failed.
func TestDockerBackendFailures(t *testing.T) {
	t.Parallel()
	dockerEngine.backendFailures(t)
	t.Run("killed during a one-shot call", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		container, _ := dockerEngine.container(t)
		c, _ := dockerEngine.client(t, container)
		errc := make(chan error, 1)
		go func() {
			_, err := c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 60})
			errc <- err
		}()
		waitFor(t, "the call to reach the gateway", func() bool {
			specs, err := c.ListMCPs(ctx)
			return err == nil && specs[0].Status != nil && specs[0].Status.Calls > 0
		})
		if out, err := exec.Command("docker", "kill", container).CombinedOutput(); err != nil {
			t.Fatalf("docker kill: %s (%v)", out, err)
		}
		err := <-errc
		var be *mcpgw.BackendError
		if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) || be.ExitCode != 137 || be.State != mcpgw.BackendGone {
			t.Errorf("one-shot call in a killed container: %v", err)
		}
	})
}

// A Docker CLI without a daemon: ErrExecFailed, state unreachable. Not parallel: it changes
// DOCKER_HOST.
func TestDockerDaemonUnreachable(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("SKIPPED: needs the docker CLI")
	}
	t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock")
	c, err := mcpgw.NewClient(mcpgw.Docker("any"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.StartGateway(context.Background())
	var be *mcpgw.BackendError
	if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) || be.State != mcpgw.BackendUnreachable ||
		!strings.Contains(be.Reason, "Cannot connect to the Docker daemon") {
		t.Errorf("StartGateway without a daemon: %v", err)
	}
}

// EnsureGatewayBinary uploads the static gateway into a container in one docker exec -i (and
// one to check first), and the gateway then runs from there. The docker CLI is given as a
// program that counts its runs.
func TestDockerEnsureGatewayBinary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	static := envOr("MCPGW_TEST_STATIC_GATEWAY", filepath.Join(repoRoot, "target", "x86_64-unknown-linux-gnu", "release", "mcpgw-gateway"))
	container, _ := dockerEngine.container(t)
	st, err := os.Stat(static)
	if err != nil {
		t.Skipf("SKIPPED: no static gateway (make static): %v", err)
	}
	dir := t.TempDir()
	counted := filepath.Join(dir, "docker")
	log := filepath.Join(dir, "runs")
	if err := os.WriteFile(counted, []byte("#!/bin/sh\necho run >> '"+log+"'\nexec docker \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runs := func() int { text, _ := os.ReadFile(log); return strings.Count(string(text), "run\n") }
	c, err := mcpgw.NewClient(mcpgw.Docker(container, mcpgw.ContainerOptions{Program: counted}),
		mcpgw.WithGatewayPath("/opt/mcpgw/mcpgw-gateway"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out, err := exec.Command("docker", "exec", container, "mkdir", "-p", "/opt/mcpgw").CombinedOutput(); err != nil {
		t.Fatalf("%s (%v)", out, err)
	}
	began := time.Now()
	status, err := c.EnsureGatewayBinary(ctx, static)
	if err != nil || !status.Uploaded {
		t.Fatalf("EnsureGatewayBinary: %+v, %v", status, err)
	}
	t.Logf("EnsureGatewayBinary uploaded %.1f MiB into the container in %v, %d docker execs",
		float64(st.Size())/(1<<20), time.Since(began).Round(time.Millisecond), runs())
	if n := runs(); n > 2 {
		t.Errorf("the upload took %d commands", n)
	}
	if _, err := c.StartGateway(ctx); err != nil {
		t.Fatalf("StartGateway from the uploaded binary: %v", err)
	}
	if _, err := c.Health(ctx); err != nil {
		t.Error(err)
	}
	if err := c.StopGateway(ctx); err != nil {
		t.Error(err)
	}
}

// A call over a session whose `docker exec -i` is killed on the host (the container lives on)
// is resumed on the channel opened again: the caller sees it finish, with each progress chunk
// once. It needs a gateway that keeps the outcome of calls (the hello's retention_ms).
func TestDockerCallResumesAfterChannelKilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	container, _ := dockerEngine.container(t)
	c, _ := dockerEngine.client(t, container)
	hello, err := c.OpenSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hello.RetentionMS == 0 {
		t.Skip("SKIPPED: this gateway keeps no call outcomes (retention_ms 0 in its hello): calls end with their channel")
	}
	var seen []float64
	killed := false
	chunk, err := c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 2, "steps": 10},
		mcpgw.WithProgress(func(ch mcpgw.ToolChunk) {
			seen = append(seen, ch.Progress().Progress)
			if len(seen) == 2 && !killed {
				killed = true
				killDockerClient(t, container)
			}
		}))
	if err != nil || !strings.HasPrefix(chunk.Text(), "done") {
		t.Fatalf("the resumed call: %v, %v", chunk, err)
	}
	if fmt.Sprint(seen) != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Errorf("progress of the resumed call: %v", seen)
	}
}

// killDockerClient kills the host's `docker exec -i` of container's session channel.
func killDockerClient(t *testing.T, container string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if err == nil && len(args) > 3 && filepath.Base(args[0]) == "docker" && args[1] == "exec" &&
			strings.Contains(string(cmdline), container) && strings.Contains(string(cmdline), " attach ") {
			pid, _ := strconv.Atoi(e.Name())
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		}
	}
	t.Errorf("no docker exec of %s's session channel", container)
}
