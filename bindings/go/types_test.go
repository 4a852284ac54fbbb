package mcpgw_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// gatewayHTTP sends a request straight to the sandbox's gateway (which listens on this
// machine's loopback here) and returns the body as the gateway wrote it: the JSON the Go types
// must round-trip, independent of libmcpgw and of this package.
func gatewayHTTP(t *testing.T, sb *sandbox, method, path, body string, header ...string) []byte {
	t.Helper()
	token, err := os.ReadFile(sb.info.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://127.0.0.1:"+strconv.Itoa(sb.info.Port)+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s (%v)", method, path, resp.StatusCode, out, err)
	}
	return out
}

// roundTrip decodes raw into a new T, encodes it again and checks that the result is the same
// JSON value; it returns the decoded value.
func roundTrip[T any](t *testing.T, what string, raw []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: decoding %s: %v", what, raw, err)
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: encoding: %v", what, err)
	}
	sameJSON(t, what, raw, again)
	return v
}

// sameJSON fails the test unless a and b are the same JSON value.
func sameJSON(t *testing.T, what string, a, b []byte) {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !reflect.DeepEqual(va, vb) {
		t.Errorf("%s does not round-trip:\n gateway: %s\n Go:      %s", what, a, b)
	}
}

// The Go types decode what a real gateway sends and encode it back to the same JSON values:
// tool lists, registered specs with their status (stdio and HTTP, with null members and a
// member this version does not know), health, every kind of block of a tool result, and
// progress chunks. What the binding's own calls return encodes to the same JSON too.
func TestWireTypesRoundTripGatewayJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t)
	c := sb.client
	spec := testServerSpec("ts")
	spec.Extra = map[string]json.RawMessage{"owner": json.RawMessage(`{"team":"a","tags":[1,null]}`)}
	if err := c.AddMCP(ctx, spec); err != nil {
		t.Fatal(err)
	}
	web := mcpgw.HTTPSpec("web", startHTTPTestServer(t))
	web.IsStateful = new(bool)
	web.MCPConfig.Timeout = nil // registered with null
	web.EnableTools = []string{}
	web.DisableTools = []string{"crash"}
	web.MCPConfig.Headers = map[string]string{"X-Static": "1"}
	if err := c.AddMCP(ctx, web); err != nil {
		t.Fatal(err)
	}
	scope := "?agent_id=&session_id="

	rawTools := gatewayHTTP(t, sb, "GET", "/mcps/ts/tools"+scope, "")
	roundTrip[[]mcpgw.Tool](t, "list_tools", rawTools)
	tools, err := c.ListTools(ctx, "ts")
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := json.Marshal(tools)
	sameJSON(t, "ListTools", rawTools, mine)

	rawSpecs := gatewayHTTP(t, sb, "GET", "/mcps"+scope, "")
	specs := roundTrip[[]mcpgw.MCPSpec](t, "list_mcps", rawSpecs)
	byName := map[string]mcpgw.MCPSpec{}
	for _, s := range specs {
		byName[s.Name] = s
	}
	if ts, web := byName["ts"], byName["web"]; len(specs) != 2 || ts.Status == nil || ts.Status.PID == nil ||
		string(ts.Extra["owner"]) == "" || web.MCPConfig.Timeout != nil || web.EnableTools == nil ||
		web.MCPConfig.Type != mcpgw.ConfigHTTP || web.Status == nil || web.Status.State != mcpgw.MCPStateStateless {
		t.Errorf("list_mcps decoded as %+v", specs)
	}
	listed, err := c.ListMCPs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mine, _ = json.Marshal(listed)
	sameJSON(t, "ListMCPs", rawSpecs, mine)
	// A listed spec registers again as it is, unknown member included.
	again := byName["ts"]
	again.Name = "ts2"
	if err := c.AddMCP(ctx, again); err != nil {
		t.Fatalf("AddMCP of a listed spec: %v", err)
	}

	roundTrip[mcpgw.Health](t, "health", gatewayHTTP(t, sb, "GET", "/health", ""))

	for _, call := range []struct{ tool, args string }{
		{"media", `{}`},
		{"add", `{"a":1,"b":2}`},
		{"fail", `{"message":"no"}`},
		{"echo", `{"text":""}`},
	} {
		raw := gatewayHTTP(t, sb, "POST", "/mcps/ts/tools/"+call.tool+scope, `{"arguments":`+call.args+`}`)
		var answer struct{ Chunk json.RawMessage }
		if err := json.Unmarshal(raw, &answer); err != nil {
			t.Fatal(err)
		}
		chunk := roundTrip[mcpgw.ToolChunk](t, call.tool+" result", answer.Chunk)
		if call.tool == "media" && (len(chunk.Content) != 5 || chunk.Content[4].Name == nil) {
			t.Errorf("media chunk = %+v", chunk)
		}
		var args map[string]any
		_ = json.Unmarshal([]byte(call.args), &args)
		mineChunk, err := c.CallTool(ctx, "ts", call.tool, args)
		if err != nil {
			t.Fatal(err)
		}
		// Ids and timestamps differ between two calls; the shape must not.
		mine, _ := json.Marshal(mineChunk)
		sameJSON(t, call.tool+" through the binding", normalise(answer.Chunk), normalise(mine))
	}

	// A streamed call: progress chunks, then the result.
	raw := gatewayHTTP(t, sb, "POST", "/mcps/ts/tools/slow"+scope, `{"arguments":{"seconds":0.2,"steps":3}}`,
		"Accept", "application/x-ndjson")
	lines := 0
	progress := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		lines++
		chunk := roundTrip[mcpgw.ToolChunk](t, "streamed chunk", sc.Bytes())
		if p := chunk.Progress(); p != nil {
			progress++
			if chunk.IsLast || p.Progress <= 0 || p.Total == nil || *p.Total != 3 {
				t.Errorf("progress chunk %s gives %+v", sc.Bytes(), p)
			}
		}
	}
	if progress != 3 || lines != 4 {
		t.Errorf("the stream had %d lines, %d with progress:\n%s", lines, progress, raw)
	}
}

// normalise blanks what differs between two calls of the same tool (ids, timestamps).
func normalise(chunk []byte) []byte {
	var v any
	_ = json.Unmarshal(chunk, &v)
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "id" || k == "created_at" {
					x[k] = "-"
				} else {
					walk(e)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	out, _ := json.Marshal(v)
	return out
}

// Values built in Go (not decoded) encode to what the gateway takes.
func TestSpecEncoding(t *testing.T) {
	t.Parallel()
	got, _ := json.Marshal(mcpgw.StdioSpec("fs", "npx", "-y", "server"))
	sameJSON(t, "StdioSpec", []byte(`{"name":"fs","mcp_config":{"type":"stdio_mcp","command":"npx","args":["-y","server"],
		"env":null,"cwd":null},"enable_tools":null,"disable_tools":null,"execution_timeout":null,"stream_progress":false}`), got)
	got, _ = json.Marshal(mcpgw.HTTPSpec("h", "http://x/mcp"))
	sameJSON(t, "HTTPSpec", []byte(`{"name":"h","mcp_config":{"type":"http_mcp","url":"http://x/mcp","headers":null,"timeout":30},
		"enable_tools":null,"disable_tools":null,"execution_timeout":null,"stream_progress":false}`), got)
	// Secrets are written {"secret": NAME} beside the text values, and read back apart.
	spec := mcpgw.HTTPSpec("h", "http://x/mcp")
	spec.MCPConfig.Headers = map[string]string{"X-Plain": "p"}
	spec.MCPConfig.SecretHeaders = map[string]string{"Authorization": "GITHUB_TOKEN"}
	got, _ = json.Marshal(spec)
	sameJSON(t, "secret headers", []byte(`{"name":"h","mcp_config":{"type":"http_mcp","url":"http://x/mcp",
		"headers":{"X-Plain":"p","Authorization":{"secret":"GITHUB_TOKEN"}},"timeout":30},
		"enable_tools":null,"disable_tools":null,"execution_timeout":null,"stream_progress":false}`), got)
	var back mcpgw.MCPSpec
	if err := json.Unmarshal(got, &back); err != nil || back.MCPConfig.Headers["X-Plain"] != "p" ||
		back.MCPConfig.SecretHeaders["Authorization"] != "GITHUB_TOKEN" || len(back.MCPConfig.Extra) != 0 {
		t.Errorf("read back: %+v %v", back.MCPConfig, err)
	}
	if err := json.Unmarshal([]byte(`{"name":"s","mcp_config":{"type":"stdio_mcp","command":"x","env":{"A":1}}}`), &back); err == nil ||
		!strings.Contains(err.Error(), "mcp_config.env: A: a value must be a string or") {
		t.Errorf("a number in env: %v", err)
	}
	if len(mcpgw.MCPStates()) != 8 || mcpgw.MCPStates()[1] != mcpgw.MCPStateConnected {
		t.Errorf("MCPStates = %v", mcpgw.MCPStates())
	}
}
