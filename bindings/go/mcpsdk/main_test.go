package mcpsdk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// What the tests run: the gateway (in a temp-dir "sandbox" on this machine), the project's MCP
// test server, and @modelcontextprotocol/server-everything with this machine's node.
var (
	repoRoot      string
	gatewayBin    string
	testServerBin string
	everythingJS  string
	// testkit's comparison of two runs of an SDK client's script.
	sameAnswersBin string
)

func TestMain(m *testing.M) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	repoRoot = root
	gatewayBin = filepath.Join(root, "target", "debug", "mcpgw-gateway")
	testServerBin = filepath.Join(root, "target", "debug", "mcpgw-testserver")
	sameAnswersBin = filepath.Join(root, "target", "debug", "mcpgw-same-answers")
	everythingJS = filepath.Join(root, "tests", "servers", "node_modules", "@modelcontextprotocol",
		"server-everything", "dist", "index.js")
	for _, p := range []string{gatewayBin, testServerBin, sameAnswersBin, everythingJS} {
		if _, err := os.Stat(p); err != nil {
			fmt.Fprintf(os.Stderr, "%s is missing: run `make -C bindings/go test` (it builds the gateway, "+
				"the test server and testkit's binaries; `make deps` installs tests/servers)\n", p)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// sandbox is a gateway in a temp dir on this machine, over an open session, with the test
// server registered as "ts" and server-everything as "ev".
type sandbox struct {
	dir     string
	client  *mcpgw.Client
	info    *mcpgw.SessionInfo
	stopped bool // the test stopped the gateway itself
}

// openSandbox opens one; on cleanup it stops the gateway and checks that nothing it started
// runs any more.
func openSandbox(t *testing.T) *sandbox {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	client, err := mcpgw.NewClient(mcpgw.Local(dir), mcpgw.WithGatewayPath(gatewayBin),
		mcpgw.WithStateDir(filepath.Join(dir, "state")), mcpgw.WithTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	info, err := client.OpenSession(ctx)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	sb := &sandbox{dir: dir, client: client, info: info}
	t.Cleanup(func() {
		if err := client.StopGateway(ctx); err != nil && !sb.stopped {
			t.Errorf("StopGateway: %v", err)
		}
		client.Close()
		sb.waitNothingLeft(t)
	})
	for _, spec := range []mcpgw.MCPSpec{
		mcpgw.StdioSpec("ts", testServerBin, "stdio"),
		mcpgw.StdioSpec("ev", "node", everythingJS, "stdio"),
	} {
		if err := client.AddMCP(ctx, spec); err != nil {
			t.Fatalf("AddMCP %s: %v", spec.Name, err)
		}
	}
	return sb
}

// processes are the live processes whose command line names the sandbox's directory or one
// of the servers it runs: what the gateway and its channels started.
func (sb *sandbox) processes() []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil || zombie(stat) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		line := strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")
		if strings.Contains(line, sb.dir) || sb.info != nil && strconv.Itoa(sb.info.PID) == e.Name() {
			found = append(found, e.Name()+" "+line)
		}
	}
	return found
}

// zombie says whether a /proc/PID/stat is of a process that has exited.
func zombie(stat []byte) bool {
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) == 0 || fields[0] == "Z" || fields[0] == "X"
}

// waitNothingLeft fails the test unless the sandbox's processes are all gone within seconds.
func (sb *sandbox) waitNothingLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for left := sb.processes(); len(left) > 0; left = sb.processes() {
		if time.Now().After(deadline) {
			t.Errorf("left running: %q", left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
