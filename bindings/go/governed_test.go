package mcpgw_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// TestGoverned: the host's rules through the binding, end to end in a local sandbox: a policy's
// refusals, one audit record per call to the WithAudit function, and a secret that reaches the
// server but never comes back and is in no command the sandbox ran.
func TestGoverned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	value := "go-secret-" + strconv.FormatInt(time.Now().UnixNano(), 16)
	var mu sync.Mutex
	var records []map[string]any
	sb := startSandbox(t,
		mcpgw.WithPolicy(map[string]any{"servers": map[string]any{
			"ts": map[string]any{"tools": map[string]any{"deny": []string{"crash"}}}}}),
		mcpgw.WithSecretFunc(func(name string) (string, error) {
			if name != "MCPGW_GO_KEY" {
				return "", errors.New("not one of this test's")
			}
			return value, nil
		}),
		mcpgw.WithAudit(func(r json.RawMessage) {
			var m map[string]any
			if err := json.Unmarshal(r, &m); err != nil {
				t.Errorf("an audit record that is not JSON: %s", r)
			}
			mu.Lock()
			records = append(records, m)
			mu.Unlock()
		}),
	)
	c := sb.client
	if _, err := c.OpenSession(ctx); err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	spec := testServerSpec("ts")
	spec.MCPConfig.SecretEnv = map[string]string{"MCPGW_TEST_KEY": "MCPGW_OTHER_KEY"}
	if err := c.AddMCP(ctx, spec); !errors.Is(err, mcpgw.ErrInvalidArgument) || !strings.Contains(err.Error(), `secret "MCPGW_OTHER_KEY": not one of this test's`) {
		t.Errorf("a secret the function does not know: %v", err)
	}
	spec.MCPConfig.SecretEnv = map[string]string{"MCPGW_TEST_KEY": "MCPGW_GO_KEY"}
	if err := c.AddMCP(ctx, spec); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}
	// The server got the value (its info tool prints MCPGW_TEST_* variables); the answer names
	// the secret instead.
	chunk, err := c.CallTool(ctx, "ts", "info", map[string]any{})
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	shown, _ := json.Marshal(chunk)
	if strings.Contains(string(shown), value) || !strings.Contains(string(shown), "[secret:MCPGW_GO_KEY]") {
		t.Errorf("info: %s", shown)
	}
	listed, err := c.ListMCPs(ctx)
	if err != nil || len(listed) != 1 {
		t.Fatalf("ListMCPs: %v %v", listed, err)
	}
	if got := listed[0].MCPConfig.SecretEnv["MCPGW_TEST_KEY"]; got != "MCPGW_GO_KEY" || listed[0].MCPConfig.Env["MCPGW_TEST_KEY"] != "" {
		t.Errorf("listed: %+v", listed[0].MCPConfig)
	}
	_, err = c.CallTool(ctx, "ts", "crash", nil)
	if !errors.Is(err, mcpgw.ErrPolicyDenied) || !strings.Contains(err.Error(), `servers."ts".tools.deny: "crash"`) {
		t.Errorf("a tool the policy denies: %v", err)
	}
	tools, err := c.ListTools(ctx, "ts")
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	for _, tool := range tools {
		if tool.Name == "crash" {
			t.Errorf("a denied tool is listed")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(records)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	var got []string
	for _, r := range records {
		got = append(got, r["name"].(string)+" "+r["outcome"].(string))
	}
	mu.Unlock()
	if strings.Join(got, ", ") != "info ok, crash denied" {
		t.Errorf("audit records: %v", got)
	}
	for _, line := range append(sb.rec.lines(false), sb.rec.lines(true)...) {
		if strings.Contains(line, value) {
			t.Errorf("a command the sandbox ran carries the secret")
		}
	}
	if _, err := mcpgw.NewClient(mcpgw.Local(""), mcpgw.WithSecrets(map[string]string{"K": "short"})); !errors.Is(err, mcpgw.ErrInvalidArgument) || !strings.Contains(err.Error(), "shorter than 8 bytes") {
		t.Errorf("a short secret: %v", err)
	}
	if _, err := mcpgw.NewClient(mcpgw.Local(""), mcpgw.WithAudit(nil)); !errors.Is(err, mcpgw.ErrInvalidArgument) {
		t.Errorf("a nil audit function: %v", err)
	}
}
