package mcpgw_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// The whole cycle, with a "sandbox" that is a temp dir on this machine: launch the gateway,
// register an MCP server (the project's test server, over stdio), list its tools, call one,
// stop. gatewayBin and testServerBin are the paths of mcpgw-gateway and mcpgw-testserver.
func Example() {
	ctx := context.Background()
	sandbox, err := os.MkdirTemp("", "mcpgw-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(sandbox)

	client, err := mcpgw.NewClient(mcpgw.Local(sandbox),
		mcpgw.WithGatewayPath(gatewayBin),
		mcpgw.WithStateDir(filepath.Join(sandbox, "state")))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	if _, err := client.StartGateway(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.StopGateway(ctx)

	if err := client.AddMCP(ctx, mcpgw.StdioSpec("files", testServerBin, "stdio")); err != nil {
		log.Fatal(err)
	}
	tools, err := client.ListTools(ctx, "files")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first tool:", tools[0].Name)

	chunk, err := client.CallTool(ctx, "files", "echo", map[string]string{"text": "hello"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(chunk.State, chunk.Text())
	// Output:
	// first tool: echo
	// running hello
}

// launch starts a gateway with the test server registered as "ts", for the examples below;
// stop ends both and removes the sandbox.
func launch() (client *mcpgw.Client, stop func()) {
	ctx := context.Background()
	sandbox, err := os.MkdirTemp("", "mcpgw-example-")
	if err != nil {
		log.Fatal(err)
	}
	client, err = mcpgw.NewClient(mcpgw.Local(sandbox), mcpgw.WithGatewayPath(gatewayBin),
		mcpgw.WithStateDir(filepath.Join(sandbox, "state")))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.StartGateway(ctx); err != nil {
		log.Fatal(err)
	}
	if err := client.AddMCP(ctx, mcpgw.StdioSpec("ts", testServerBin, "stdio")); err != nil {
		log.Fatal(err)
	}
	return client, func() {
		client.StopGateway(ctx)
		client.Close()
		os.RemoveAll(sandbox)
	}
}

// A tool with structured output: its structuredContent is in the chunk's metadata.
func ExampleClient_CallTool() {
	client, stop := launch()
	defer stop()

	chunk, err := client.CallTool(context.Background(), "ts", "add", map[string]float64{"a": 2, "b": 3})
	if err != nil {
		log.Fatal(err)
	}
	var result struct{ Sum, Product float64 }
	if err := json.Unmarshal(chunk.StructuredContent(), &result); err != nil {
		log.Fatal(err)
	}
	fmt.Println(result.Sum, result.Product)
	// Output: 5 6
}

// Data blocks hold their bytes decoded.
func ExampleBlock() {
	client, stop := launch()
	defer stop()

	chunk, err := client.CallTool(context.Background(), "ts", "media", nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range chunk.Content {
		switch {
		case b.Type == mcpgw.BlockText:
			fmt.Println("text") // here an embedded text resource, as JSON
		case b.Source.Type == mcpgw.SourceBase64:
			fmt.Printf("%s, %d bytes\n", b.Source.MediaType, len(b.Source.Data))
		case b.Source.Type == mcpgw.SourceURL:
			fmt.Printf("%s at %s\n", b.Source.MediaType, b.Source.URL)
		}
	}
	// Output:
	// image/png, 70 bytes
	// audio/wav, 60 bytes
	// text
	// application/octet-stream, 256 bytes
	// text/plain at test://resource/link
}

// Failures are *Error values, matched with errors.Is.
func ExampleError() {
	client, stop := launch()
	defer stop()

	_, err := client.CallTool(context.Background(), "no-such-mcp", "echo", nil)
	var e *mcpgw.Error
	if errors.Is(err, mcpgw.ErrNotFound) && errors.As(err, &e) {
		fmt.Println("not found, HTTP", e.HTTPStatus)
	}
	// Output: not found, HTTP 404
}

// A context's deadline is the call's deadline at the gateway, which cancels the call upstream.
func ExampleClient_CallTool_deadline() {
	client, stop := launch()
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := client.CallTool(ctx, "ts", "slow", map[string]int{"seconds": 30})
	fmt.Println(errors.Is(err, mcpgw.ErrDeadline), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

// Each agent session gets its own MCPs: the scope of an operation.
func ExampleWithScope() {
	client, stop := launch()
	defer stop()
	ctx := context.Background()

	session := mcpgw.WithScope("agent-7", "session-42")
	if err := client.AddMCP(ctx, mcpgw.StdioSpec("ts", testServerBin, "stdio"), session); err != nil {
		log.Fatal(err)
	}
	mine, _ := client.ListMCPs(ctx, session)
	fmt.Println(len(mine), mine[0].Status.State)
	// Output: 1 connected
}

// A gateway in a Docker container; the binary is installed into it first.
func ExampleDocker() {
	ctx := context.Background()
	client, err := mcpgw.NewClient(mcpgw.Docker("agent-sandbox", mcpgw.ContainerOptions{ExecOptions: []string{"--user", "agent"}}),
		mcpgw.WithGatewayPath("/usr/local/bin/mcpgw-gateway"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	if _, err := client.EnsureGatewayBinary(ctx, "target/release/mcpgw-gateway"); err != nil {
		log.Fatal(err)
	}
	if _, err := client.StartGateway(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.StopGateway(ctx)
	// ... AddMCP, CallTool
}

// A gateway in a Kubernetes pod.
func ExampleKubectl() {
	client, err := mcpgw.NewClient(mcpgw.Kubectl("sandbox-0", mcpgw.PodOptions{Namespace: "agents", Container: "workspace"}))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// ... StartGateway, AddMCP, CallTool
}

// Any sandbox SDK: its commands.run as the run function (here a stand-in that runs sh on this
// machine), its background commands with stdin as the open function (nil: one-shot only).
func ExampleExec() {
	run := func(ctx context.Context, command string, stdin []byte) (mcpgw.ExecResult, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		out, err := cmd.Output()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return mcpgw.ExecResult{ExitCode: exit.ExitCode(), Stdout: out, Stderr: exit.Stderr}, nil
		}
		return mcpgw.ExecResult{Stdout: out}, err // err: the sandbox could not run it
	}
	client, err := mcpgw.NewClient(mcpgw.Exec(run, nil, false))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// ... StartGateway, AddMCP, CallTool
}

// A session: one long-lived exec carries every call, with live progress. Here the channel is a
// local pipe; the Docker and Kubectl backends open `docker exec -i` and `kubectl exec -i`.
func ExampleClient_OpenSession() {
	ctx := context.Background()
	sandbox, err := os.MkdirTemp("", "mcpgw-example-")
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

	// The client knows no gateway yet: opening the session launches one, in the same exec.
	info, err := client.OpenSession(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer client.StopGateway(ctx)
	defer client.CloseSession(ctx)
	fmt.Println("launched:", info.Launched)

	if err := client.AddMCP(ctx, mcpgw.StdioSpec("ts", testServerBin, "stdio")); err != nil {
		log.Fatal(err)
	}
	chunk, err := client.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 0.3, "steps": 3},
		mcpgw.WithProgress(func(c mcpgw.ToolChunk) {
			p := c.Progress()
			fmt.Printf("progress %v of %v\n", p.Progress, *p.Total)
		}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(chunk.Text())
	// Output:
	// launched: true
	// progress 1 of 3
	// progress 2 of 3
	// progress 3 of 3
	// done after 3 steps
}

// Progress as an iterator: the progress chunks, then the result (over a session).
func ExampleClient_CallToolStream() {
	client, stop := launch()
	defer stop()
	ctx := context.Background()
	if _, err := client.OpenSession(ctx); err != nil {
		log.Fatal(err)
	}
	for chunk, err := range client.CallToolStream(ctx, "ts", "slow", map[string]any{"seconds": 0.2, "steps": 2}) {
		if err != nil {
			log.Fatal(err)
		}
		if p := chunk.Progress(); p != nil {
			fmt.Println("progress", p.Progress)
		} else {
			fmt.Println(chunk.Text())
		}
	}
	// Output:
	// progress 1
	// progress 2
	// done after 2 steps
}
