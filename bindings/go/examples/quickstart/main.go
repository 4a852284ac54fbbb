// Command quickstart runs the whole mcpgw cycle against a "sandbox" that is a temp dir on this
// machine, driven with `sh -c`: it launches the gateway, registers the project's MCP test
// server over stdio, lists its tools, calls a few (text, structured, media, a tool error, one
// past its deadline), shows a typed error, opens a session and streams a call's progress over
// it, removes the server and stops the gateway. It exits non-zero when anything unexpected
// happens.
//
//	go run ./examples/quickstart [-gateway PATH] [-server PATH]
//
// By default it uses the debug builds in the repository's target/ directory
// (`cargo build -p mcpgw-gateway -p mcpgw-testserver`).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

func main() {
	log.SetFlags(0)
	gateway := flag.String("gateway", findBuilt("mcpgw-gateway"), "the mcpgw-gateway binary")
	server := flag.String("server", findBuilt("mcpgw-testserver"), "the MCP server to register (mcpgw-testserver)")
	flag.Parse()
	if *gateway == "" || *server == "" {
		log.Fatal("cannot find target/debug/mcpgw-gateway and mcpgw-testserver above this directory: " +
			"build them with `cargo build -p mcpgw-gateway -p mcpgw-testserver`, or pass -gateway and -server")
	}
	if err := run(*gateway, *server); err != nil {
		log.Fatal(err)
	}
}

func run(gateway, server string) error {
	ctx := context.Background()
	fmt.Println("libmcpgw", mcpgw.Version())

	sandbox, err := os.MkdirTemp("", "mcpgw-quickstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(sandbox)
	client, err := mcpgw.NewClient(mcpgw.Local(sandbox),
		mcpgw.WithGatewayPath(gateway),
		mcpgw.WithStateDir(filepath.Join(sandbox, "state")),
		mcpgw.WithScope("quickstart", "session-1"))
	if err != nil {
		return err
	}
	defer client.Close()

	info, err := client.StartGateway(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("gateway started: pid %d, port %d, token in %s\n", info.PID, info.Port, info.TokenFile)
	stopped := false
	defer func() {
		if !stopped {
			_ = client.StopGateway(ctx)
		}
	}()

	if err := client.AddMCP(ctx, mcpgw.StdioSpec("test", server, "stdio")); err != nil {
		return err
	}
	tools, err := client.ListTools(ctx, "test")
	if err != nil {
		return err
	}
	fmt.Printf("%d tools:", len(tools))
	for _, t := range tools {
		fmt.Print(" ", t.Name)
	}
	fmt.Println()

	chunk, err := client.CallTool(ctx, "test", "echo", map[string]string{"text": "hello from Go: it's $(not) `run`"})
	if err != nil {
		return err
	}
	fmt.Printf("echo: %s (state %s)\n", chunk.Text(), chunk.State)

	chunk, err = client.CallTool(ctx, "test", "add", map[string]float64{"a": 2, "b": 3})
	if err != nil {
		return err
	}
	fmt.Printf("add: structured content %s\n", chunk.StructuredContent())

	chunk, err = client.CallTool(ctx, "test", "media", nil)
	if err != nil {
		return err
	}
	for _, b := range chunk.Content {
		switch {
		case b.Type == mcpgw.BlockText:
			fmt.Printf("media: text block, %d bytes\n", len(b.Text))
		case b.Source.Type == mcpgw.SourceBase64:
			fmt.Printf("media: %s, %d bytes decoded\n", b.Source.MediaType, len(b.Source.Data))
		default:
			fmt.Printf("media: link to %s (%s)\n", b.Source.URL, b.Source.MediaType)
		}
	}

	chunk, err = client.CallTool(ctx, "test", "fail", map[string]string{"message": "no such file"})
	if err != nil {
		return err
	}
	fmt.Printf("fail: state %s, %q\n", chunk.State, chunk.Text())

	deadline, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = client.CallTool(deadline, "test", "slow", map[string]int{"seconds": 30})
	var e *mcpgw.Error
	if !errors.Is(err, mcpgw.ErrDeadline) || !errors.As(err, &e) {
		return fmt.Errorf("a slow call with a 1 s deadline: want a timeout, got %v", err)
	}
	fmt.Printf("slow, 1 s deadline: HTTP %d, %s\n", e.HTTPStatus, e.Detail)

	_, err = client.CallTool(ctx, "nope", "echo", nil)
	if !errors.Is(err, mcpgw.ErrNotFound) || !errors.As(err, &e) {
		return fmt.Errorf("a call to an unknown MCP: want not found, got %v", err)
	}
	fmt.Printf("expected failure: %v (HTTP %d)\n", err, e.HTTPStatus)

	specs, err := client.ListMCPs(ctx)
	if err != nil {
		return err
	}
	status, _ := json.Marshal(specs[0].Status)
	fmt.Printf("MCP %s: %s\n", specs[0].Name, status)

	// From here on every call goes over one long-lived exec (here a local pipe; `docker exec -i`
	// with the Docker backend), with live progress and real cancellation.
	hello, err := client.OpenSession(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("session open: gateway %s, frames of at most %d bytes\n", hello.Version, hello.MaxFrameBytes)
	chunk, err = client.CallTool(ctx, "test", "slow", map[string]any{"seconds": 0.6, "steps": 3},
		mcpgw.WithProgress(func(c mcpgw.ToolChunk) {
			if p := c.Progress(); p != nil && p.Total != nil {
				fmt.Printf("slow: progress %v of %v\n", p.Progress, *p.Total)
			}
		}))
	if err != nil {
		return err
	}
	fmt.Printf("slow: %s\n", chunk.Text())
	for chunk, err := range client.CallToolStream(ctx, "test", "slow", map[string]any{"seconds": 0.3, "steps": 2}) {
		if err != nil {
			return err
		}
		fmt.Printf("slow, streamed: last %v, %q\n", chunk.IsLast, chunk.Text())
	}
	if err := client.RemoveMCP(ctx, "test"); err != nil {
		return err
	}
	// Closes the session, then stops the gateway: nothing is left running in the sandbox.
	if err := client.CloseSession(ctx); err != nil {
		return err
	}
	if err := client.StopGateway(ctx); err != nil {
		return err
	}
	stopped = true
	fmt.Println("gateway stopped")
	return nil
}

// findBuilt looks for target/debug/name in this directory and those above it.
func findBuilt(name string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, "target", "debug", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
