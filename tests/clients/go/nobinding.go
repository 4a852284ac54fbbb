//go:build !mcpgw_intree

package main

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bindingTransport needs the binding, which this build does not link.
func bindingTransport(context.Context, string, []string) (mcp.Transport, func(), error) {
	return nil, nil, errors.New("the binding mode needs a build with -tags mcpgw_intree, which links this checkout's libmcpgw")
}
