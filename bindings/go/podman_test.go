package mcpgw_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// The podman backend end to end: one-shot and over a session (`podman exec -i`), progress, and
// a close that leaves no attach behind.
func TestPodmanOneShotAndSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	container, _ := podmanEngine.container(t)
	c, info := podmanEngine.client(t, container)
	if chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": "one-shot"}); err != nil || chunk.Text() != "one-shot" {
		t.Fatalf("a one-shot call: %v, %v", chunk, err)
	}
	hello, err := c.OpenSession(ctx)
	if err != nil || hello.PID != info.PID {
		t.Fatalf("OpenSession: %+v, %v", hello, err)
	}
	t.Logf("64 concurrent calls over one podman session took %v", concurrentCalls(ctx, t, c, 64))
	progress := 0
	chunk, err := c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 0.3, "steps": 3},
		mcpgw.WithProgress(func(mcpgw.ToolChunk) { progress++ }))
	if err != nil || progress != 3 || !strings.HasPrefix(chunk.Text(), "done") {
		t.Errorf("progress over podman: %d chunks, %v, %v", progress, chunk, err)
	}
	if err := c.CloseSession(ctx); err != nil {
		t.Fatal(err)
	}
	if ps := podmanEngine.ps(t, container); strings.Contains(ps, "attach") && !strings.Contains(ps, " Z ") {
		t.Errorf("an attach process is left in the container:\n%s", ps)
	}
	if err := c.StopGateway(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(ctx); !errors.Is(err, mcpgw.ErrGatewayNotRunning) {
		t.Errorf("Health after StopGateway: %v", err)
	}
}

func TestPodmanKillDuringSessionCalls(t *testing.T) {
	t.Parallel()
	podmanEngine.killDuringSessionCalls(t)
}

func TestPodmanBackendFailures(t *testing.T) {
	t.Parallel()
	podmanEngine.backendFailures(t)
}
