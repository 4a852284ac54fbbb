package mcpsdk_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// The official Go SDK's client of tests/clients/go runs its script of every feature of
// server-everything (tools, resources with a subscription, prompts, completion, logging,
// progress, cancel, and sampling, elicitation and roots answered by the SDK's handlers) against
// the server inside a Docker container, through this package's transport over the binding's
// Docker session; every answer is compared with the same client's run straight to a
// server-everything on this machine, as host/tests/clients.rs compares the endpoint's runs.
func TestEverythingInDockerThroughTheTransport(t *testing.T) {
	t.Parallel()
	sandboxSh := filepath.Join(repoRoot, "tests", "docker", "sandbox.sh")
	if out, err := exec.Command("sh", sandboxSh, "check").Output(); err != nil {
		t.Skipf("SKIPPED: docker: %s", strings.TrimSpace(string(out)+" "+err.Error()))
	}
	// The node test image (its gateway from `make static`, which make -C bindings/go test-sdk
	// runs), named by the Makefile or built here.
	image := os.Getenv("MCPGW_TEST_NODE_IMAGE")
	if image == "" {
		image = strings.TrimSpace(run(t, exec.Command("sh", sandboxSh, "image", "--node")))
	}
	everything := filepath.Join(t.TempDir(), "everything")
	build := exec.Command("go", "build", "-tags", "mcpgw_intree", "-o", everything, ".")
	build.Dir = filepath.Join(repoRoot, "tests", "clients", "go")
	run(t, build)

	name := fmt.Sprintf("mcpgw-go-sdk-%d", os.Getpid())
	container := strings.TrimSpace(run(t, exec.Command("sh", sandboxSh, "start", image, name)))
	t.Cleanup(func() { _ = exec.Command("sh", sandboxSh, "stop", container).Run() })

	direct := make(chan map[string]any, 1)
	go func() { direct <- runScript(t, everything, "stdio", "node", everythingJS, "stdio") }()
	got := runScript(t, everything, "binding", "docker", container,
		"node", "/opt/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio")
	assertSameAnswers(t, got, <-direct)

	// The client stopped the gateway it launched: nothing runs in the container but its init
	// and its sleep.
	var left []string
	for _, line := range strings.Split(run(t, exec.Command("docker", "exec", container, "ps", "-o", "pid,args")), "\n")[1:] {
		_, args, _ := strings.Cut(strings.TrimSpace(line), " ")
		args = strings.TrimSpace(args)
		if args != "" && !strings.HasPrefix(args, "/sbin/docker-init") && !strings.HasPrefix(args, "sleep ") &&
			!strings.HasPrefix(args, "ps ") {
			left = append(left, line)
		}
	}
	if len(left) > 0 {
		t.Errorf("left running in the container: %q", left)
	}
}

// run runs cmd, failing the test with its stderr when it fails; its stdout.
func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, stderr.String())
	}
	return string(out)
}

// runScript runs the client with args; the JSON object it printed.
func runScript(t *testing.T, client string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command(client, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("the Go SDK client %v: %v", args, err)
		return nil
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Errorf("the Go SDK client %v printed no JSON object (%v): %s", args, err, out)
	}
	return v
}

// assertSameAnswers fails the test, naming each step that differs, unless two runs of the
// script got the same answers but for ids and times (testkit's assert_same_answers).
func assertSameAnswers(t *testing.T, got, want map[string]any) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatal("a run printed nothing to compare")
	}
	if differ := differences(got, want); len(differ) > 0 {
		t.Errorf("the go client's answers differ from a direct connection's:\n%s", strings.Join(differ, "\n"))
	}
}

// differences are the steps whose normalized answers differ between two runs, sorted.
func differences(got, want map[string]any) []string {
	var differ []string
	for step, w := range want {
		g, ok := got[step]
		switch {
		case !ok:
			differ = append(differ, step+": missing")
		case !reflect.DeepEqual(normalized(g), normalized(w)):
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			differ = append(differ, fmt.Sprintf("%s:\n  got  %s\n  want %s", step, gj, wj))
		}
	}
	for step := range got {
		if _, ok := want[step]; !ok {
			differ = append(differ, step+": not in the direct run")
		}
	}
	sort.Strings(differ)
	return differ
}

// The comparison ignores ids, times and clock times in text and blobs, and nothing else.
func TestDifferences(t *testing.T) {
	t.Parallel()
	blob := func(text string) string { return base64.StdEncoding.EncodeToString([]byte(text)) }
	want := map[string]any{
		"call": map[string]any{"id": 1.0, "jsonrpc": "2.0", "result": map[string]any{
			"text": "at 9:05:58 PM, then 21:05:58.123", "createdAt": "2026-01-01", "blob": blob("at 10:00:00"),
			"n": 1.0, "list": []any{"a", 2.0}}},
		"same": "x",
	}
	got := map[string]any{
		"call": map[string]any{"id": 7.0, "result": map[string]any{
			"text": "at 11:15:00 AM, then 01:00:00.9", "CreatedAt": "2027-02-02", "blob": blob("at 3:59:59"),
			"n": 1.0, "list": []any{"a", 2.0}}},
		"same": "x",
	}
	// createdAt and CreatedAt are different members.
	if d := differences(got, want); len(d) != 1 || !strings.HasPrefix(d[0], "call:") {
		t.Errorf("differences: %q", d)
	}
	got["call"].(map[string]any)["result"].(map[string]any)["createdAt"] = "2027-02-02"
	delete(got["call"].(map[string]any)["result"].(map[string]any), "CreatedAt")
	if d := differences(got, want); len(d) != 0 {
		t.Errorf("runs that differ in ids and times only: %q", d)
	}
	for _, change := range []func(r map[string]any){
		func(r map[string]any) { r["n"] = 2.0 },
		func(r map[string]any) { r["text"] = "at 9:05:58 PM, then 21:05" },
		func(r map[string]any) { r["blob"] = blob("at 10:00:01 x") },
		func(r map[string]any) { r["list"] = []any{2.0, "a"} },
		func(r map[string]any) { r["extra"] = nil },
	} {
		changed := map[string]any{}
		for k, v := range got["call"].(map[string]any)["result"].(map[string]any) {
			changed[k] = v
		}
		change(changed)
		if d := differences(map[string]any{"call": map[string]any{"result": changed}, "same": "x"}, want); len(d) != 1 {
			t.Errorf("a change of %v: %q", changed, d)
		}
	}
	if d := differences(map[string]any{"call": want["call"]}, want); len(d) != 1 || d[0] != "same: missing" {
		t.Errorf("a missing step: %q", d)
	}
	if d := differences(map[string]any{"call": want["call"], "same": "x", "new": 1.0}, want); len(d) != 1 ||
		d[0] != "new: not in the direct run" {
		t.Errorf("an extra step: %q", d)
	}
	for in, out := range map[string]string{
		"9:05:58":             "<time>",
		"x 21:05:58.123 PM y": "x <time> y",
		"123:45:67":           "123:45:67",
		"1:2:3":               "1:2:3",
		"12:34:567":           "12:34:567",
		"été 1:00:00":         "été <time>",
	} {
		if got := maskTimes(in); got != out {
			t.Errorf("maskTimes(%q) = %q, want %q", in, got, out)
		}
	}
}

// timeKeys are the members whose values are times (compared case-insensitively).
var timeKeys = []string{"timestamp", "time", "createdAt", "lastUpdatedAt", "date"}

// normalized is a JSON value without what differs between two runs of the same script (the
// rules of testkit's mcp::normalized): members "id" and "jsonrpc" dropped, the values of time
// members and clock times in strings as "<time>", a base64 "blob" as its decoded text with its
// clock times masked.
func normalized(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if k == "id" || k == "jsonrpc" {
				continue
			}
			out[k] = normalizedMember(k, x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalized(x)
		}
		return out
	case string:
		return maskTimes(v)
	}
	return v
}

func normalizedMember(k string, v any) any {
	for _, tk := range timeKeys {
		if strings.EqualFold(k, tk) {
			return "<time>"
		}
	}
	if b, ok := v.(string); ok && k == "blob" {
		// A blob's bytes may hold a time too. Padded, canonical, no line breaks: as the Rust
		// STANDARD engine decodes.
		if strings.ContainsAny(b, "\r\n") {
			return b
		}
		bytes, err := base64.StdEncoding.Strict().DecodeString(b)
		if err != nil {
			return b
		}
		return "<base64 of " + maskTimes(lossy(bytes)) + ">"
	}
	return normalized(v)
}

// lossy is bytes as UTF-8 text, each invalid byte as U+FFFD.
func lossy(b []byte) string {
	var s strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		s.WriteRune(r)
		b = b[n:]
	}
	return s.String()
}

// maskTimes is text with clock times (9:05:58, 21:05:58.123, with " AM"/" PM") as "<time>".
func maskTimes(text string) string {
	b := []byte(text)
	digits := func(at int) int {
		n := 0
		for at+n < len(b) && b[at+n] >= '0' && b[at+n] <= '9' {
			n++
		}
		return n
	}
	at := func(i int) byte {
		if i < len(b) {
			return b[i]
		}
		return 0
	}
	var out strings.Builder
	for i := 0; i < len(b); {
		h := digits(i)
		isTime := h >= 1 && h <= 2 && (i == 0 || b[i-1] < '0' || b[i-1] > '9') &&
			at(i+h) == ':' && digits(i+h+1) == 2 && at(i+h+3) == ':' && digits(i+h+4) == 2
		if !isTime {
			_, n := utf8.DecodeRuneInString(text[i:])
			out.WriteString(text[i : i+n])
			i += n
			continue
		}
		end := i + h + 6
		if at(end) == '.' {
			end += 1 + digits(end+1)
		}
		for _, suffix := range []string{" AM", " PM"} {
			if strings.HasPrefix(text[end:], suffix) {
				end += len(suffix)
			}
		}
		out.WriteString("<time>")
		i = end
	}
	return out.String()
}
