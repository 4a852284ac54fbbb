//go:build mcpgw_intree

package main

import (
	"context"
	"fmt"
	"os"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
	"github.com/mcpgw/mcpgw/bindings/go/mcpsdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bindingTransport opens a session into container with the binding's Docker backend (which
// launches the gateway from the container's PATH), registers the stdio server command there as
// MCP "ev", and returns the SDK transport to it; stop ends the gateway (and so the server) and
// the client.
func bindingTransport(ctx context.Context, container string, command []string) (mcp.Transport, func(), error) {
	client, err := mcpgw.NewClient(mcpgw.Docker(container), mcpgw.WithTimeout(limit))
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		if err := client.StopGateway(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "everything: StopGateway:", err)
		}
		client.Close()
	}
	if _, err := client.OpenSession(ctx); err != nil {
		client.Close()
		return nil, nil, err
	}
	if err := client.AddMCP(ctx, mcpgw.StdioSpec("ev", command[0], command[1:]...)); err != nil {
		stop()
		return nil, nil, err
	}
	return mcpsdk.NewTransport(client, "ev"), stop, nil
}
