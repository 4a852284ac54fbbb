package mcpsdk_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
	"github.com/mcpgw/mcpgw/bindings/go/mcpsdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The official SDK's client on an MCP server inside the sandbox (here a temp dir on this
// machine, the project's test server registered as "ts"). The lines between the README marks
// are the README's example.
func Example() {
	ctx := context.Background()
	sandbox, err := os.MkdirTemp("", "mcpsdk-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(sandbox)
	client, err := mcpgw.NewClient(mcpgw.Local(sandbox), mcpgw.WithGatewayPath(gatewayBin),
		mcpgw.WithStateDir(filepath.Join(sandbox, "state")))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	if _, err := client.OpenSession(ctx); err != nil { // it launches the gateway
		log.Fatal(err)
	}
	defer client.StopGateway(ctx)
	if err := client.AddMCP(ctx, mcpgw.StdioSpec("ts", testServerBin, "stdio")); err != nil {
		log.Fatal(err)
	}

	// README begin
	sdk := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, nil)
	session, err := sdk.Connect(ctx, mcpsdk.NewTransport(client, "ts"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close() // the virtual connection; the client's session stays open
	args := map[string]any{"text": "hello"}
	result, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(result.Content[0].(*mcp.TextContent).Text)
	// README end
	// Output: hello
}

// The README's example is Example's code between its marks.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## The official Go MCP SDK\n")
	_, block, ok2 := strings.Cut(section, "```go\n")
	block, _, ok3 := strings.Cut(block, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no section \"The official Go MCP SDK\" with a go block")
	}
	source, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(source), "\t// README begin\n")
	code, _, _ = strings.Cut(code, "\t// README end\n")
	code = strings.ReplaceAll("\n"+code, "\n\t", "\n")[1:]
	if code == "" || code != block {
		t.Errorf("the README's example:\n%s\nis not Example's code:\n%s", block, code)
	}
}
