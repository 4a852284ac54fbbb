// Package mcpsdk carries the official Go MCP SDK (github.com/modelcontextprotocol/go-sdk/mcp)
// over mcpgw: Transport is an mcp.Transport whose connection is a virtual MCP connection of an
// mcpgw.Client (Client.Connect), so an mcp.Client talks to an MCP server that runs inside a
// sandbox as it would to a local one.
//
//	client, err := mcpgw.NewClient(mcpgw.Docker("agent-sandbox"))
//	...
//	if _, err := client.OpenSession(ctx); err != nil { ... }
//	err = client.AddMCP(ctx, mcpgw.StdioSpec("fs", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/work"))
//	sdk := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, nil)
//	session, err := sdk.Connect(ctx, mcpsdk.NewTransport(client, "fs"), nil)
//	...
//	defer session.Close()
//	tools, err := session.ListTools(ctx, nil)
//
// The gateway is the MCP server of the connection and relays every message both ways, so the
// SDK's own handlers (sampling, elicitation, roots, notifications) answer and hear the sandboxed
// server. Closing the SDK's session closes the connection, not the client's session channel.
//
// It is a module of its own so that the binding itself does not depend on the SDK.
package mcpsdk

import (
	"context"
	"errors"
	"fmt"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport is an mcp.Transport to the MCP server registered under one name in a scope of an
// mcpgw.Client's gateway, over the client's session channel. Each Connect opens one virtual
// MCP connection.
type Transport struct {
	client *mcpgw.Client
	mcp    string
	opts   []mcpgw.CallOption
}

// NewTransport is a transport to the MCP server mcp of client's gateway; opts may give the
// scope (mcpgw.WithScope). The client needs an open session (Client.OpenSession) when the SDK
// connects.
func NewTransport(client *mcpgw.Client, mcp string, opts ...mcpgw.CallOption) *Transport {
	return &Transport{client: client, mcp: mcp, opts: opts}
}

// Connect opens the virtual MCP connection and waits until the gateway has opened it. Its
// failures are the binding's *mcpgw.Error: mcpgw.ErrNotFound for an MCP the scope does not
// have, mcpgw.ErrInvalidState without a session or on a closed client (then also
// mcpgw.ErrClosed), mcpgw.ErrInvalidArgument for an invalid name.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	if t == nil || t.client == nil {
		return nil, errors.New("mcpsdk: the transport has no client: make it with NewTransport")
	}
	k, err := t.client.Connect(ctx, t.mcp, t.opts...)
	if err != nil {
		return nil, err
	}
	return &connection{k: k}, nil
}

// connection is an mcp.Connection over an *mcpgw.Connection.
type connection struct {
	k *mcpgw.Connection
}

// Read returns the server's next message. After Close it returns io.EOF; when the gateway or
// the channel ended the connection, the binding's error (mcpgw.ErrSessionLost, with the
// reason), which the SDK hands to the calls in flight and returns from ClientSession.Wait.
func (c *connection) Read(ctx context.Context) (jsonrpc.Message, error) {
	raw, err := c.k.Recv(ctx)
	if err != nil {
		return nil, err
	}
	msg, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		return nil, fmt.Errorf("mcpsdk: the server sent a message that is not JSON-RPC: %w", err)
	}
	return msg, nil
}

// Write sends one message. On a connection that has ended it fails with an error that matches
// both mcp.ErrConnectionClosed and the binding's *mcpgw.Error (mcpgw.ErrInvalidState).
func (c *connection) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcpsdk: cannot encode the message: %w", err)
	}
	if err := c.k.Send(data); err != nil {
		if errors.Is(err, mcpgw.ErrInvalidState) {
			return fmt.Errorf("%w: %w", mcp.ErrConnectionClosed, err)
		}
		return err
	}
	return nil
}

// Close closes the virtual connection (not the client's session); a Read waiting returns
// io.EOF. It is idempotent.
func (c *connection) Close() error { return c.k.Close() }

// SessionID is empty: a virtual connection has no transport session of its own.
func (c *connection) SessionID() string { return "" }

var _ mcp.Transport = (*Transport)(nil)
