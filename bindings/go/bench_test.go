package mcpgw_test

import (
	"context"
	"testing"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// One echo call through a local sandbox (`sh -c`), one-shot and over a session:
//
//	go test -tags mcpgw_intree -run '^$' -bench Echo
func BenchmarkEchoOneShot(b *testing.B) { benchmarkEcho(b, false) }

func BenchmarkEchoSession(b *testing.B) { benchmarkEcho(b, true) }

func benchmarkEcho(b *testing.B, session bool) {
	ctx := context.Background()
	c, dir := newClient(b, nil)
	if _, err := c.StartGateway(ctx); err != nil {
		b.Fatal(err)
	}
	defer c.StopGateway(ctx)
	if err := c.AddMCP(ctx, testServerSpec("ts")); err != nil {
		b.Fatal(err)
	}
	if session {
		requireAttach(b)
		if _, err := c.OpenSession(ctx, mcpgw.LocalSession(dir)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": "bench"}); err != nil {
			b.Fatal(err)
		}
	}
}
