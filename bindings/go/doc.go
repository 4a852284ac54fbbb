// Package mcpgw lets a Go agent use MCP servers that run inside a sandbox (a Docker or podman
// container, a Kubernetes pod, an E2B or Daytona sandbox, a namespace jail) through mcpgw-gateway,
// without a port published from the sandbox.
//
// The gateway runs inside the sandbox, on its loopback, and owns the MCP sessions. This package,
// on the host, reaches it through the one channel every sandbox offers: running a command in it.
// A Backend says how (Local, Docker, Podman, Kubectl, Argv for any argv prefix, Exec for the
// functions of a sandbox SDK); what the commands print is decoded into Go values: MCPSpec, Tool,
// ToolChunk.
//
//	client, err := mcpgw.NewClient(mcpgw.Docker("agent-sandbox"))
//	...
//	defer client.Close()
//	if _, err := client.StartGateway(ctx); err != nil { ... }
//	defer client.StopGateway(ctx)
//	err = client.AddMCP(ctx, mcpgw.StdioSpec("fs", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/work"))
//	chunk, err := client.CallTool(ctx, "fs", "read_text_file", map[string]any{"path": "/work/README.md"})
//	fmt.Println(chunk.Text())
//
// # The host driver
//
// libmcpgw's host driver decides everything a host decides (session or one-shot, the fallback of
// a request the channel refused or never sent, reopening a lost channel, every timer, the
// backends' failures and the cancel wrapper); a Client is a thin loop that starts the processes
// it asks for, moves their bytes and keeps its timer. No thread waits for a process or a pipe:
// one Go process holds many sessions with a fixed number of threads.
//
// # Sessions
//
// One command per operation costs what the backend charges for an exec (about 100 ms for docker
// exec). Client.OpenSession opens one long-lived exec instead (`docker exec -i`, `kubectl exec
// -i`, a local pipe, or the Exec backend's open function) that carries every REST operation from
// then on, many at once, with live progress (WithProgress, Client.CallToolStream) and real
// cancellation. A lost channel is opened again; the tool calls it carried are resumed on the new
// one when the gateway keeps them, and fail with ErrSessionLost otherwise.
//
// # Virtual MCP connections and the official SDK
//
// Client.Connect opens a virtual MCP connection over the session: raw JSON-RPC both ways, the
// gateway acting as the MCP server of the connection. The module
// github.com/mcpgw/mcpgw/bindings/go/mcpsdk makes one an mcp.Transport of the official Go MCP
// SDK (github.com/modelcontextprotocol/go-sdk), so an SDK client uses a sandboxed server as it
// would a local one; it is a module of its own, so this one does not depend on the SDK.
//
// # Options
//
// Options of NewClient set libmcpgw's host configuration (WithGatewayPath, WithPort,
// WithReopen, ...). WithScope and WithTimeout are options of both a client (its defaults) and
// one operation; WithProgress is an option of a tool call. The gateway keeps the MCPs of each
// scope, an (agent id, session id) pair, apart.
//
// # Deadlines and cancellation
//
// Every operation takes a context. Its deadline, shortened by a tenth (at most a second) so that
// the answer can travel back in time, becomes the operation's time limit and the call's deadline
// at the gateway, which then cancels the tool call upstream and answers with ErrDeadline. A
// context without a deadline gets WithTimeout (60 s by default). Cancelling a context ends the
// operation at once (ErrCancelled, which also matches context.Canceled): over a session a cancel
// frame tells the gateway; one-shot, the command is killed, in the sandbox too.
//
// # Errors
//
// Every failure is an *Error with the kind of failure (Code), a message, the gateway's HTTP
// status and detail when it answered, and a *BackendError when the sandbox backend failed (the
// container is gone, not running, the daemon unreachable). Test the kind with errors.Is:
// ErrNotFound, ErrConflict, ErrDeadline, ErrUnauthorized, ErrGatewayNotRunning, ErrUpstreamError,
// ErrExecFailed, ErrSessionLost, ErrCancelled, ... (generated from libmcpgw's one list of result
// codes). A tool that reports an error is not a failure: its ToolChunk has State StateError. No
// error carries the gateway's token: it stays in a 0600 file inside the sandbox, and every request
// reads it from there.
//
// # Concurrency
//
// A Client is safe for concurrent use by any number of goroutines. ToolChunk and the other
// results are plain values owned by the caller. Close releases the client (a finalizer is only a
// backstop) and is idempotent.
//
// # Building
//
// The package is cgo over libmcpgw, the project's Rust library. On linux/amd64 a released
// version of the module carries the library prebuilt (prebuilt/: libmcpgw.a and mcpgw.h),
// which the default build links statically: `go get` and a C compiler are all a build needs,
// and the program needs no libmcpgw.so. The build tags link another libmcpgw instead:
// mcpgw_pkgconfig an installed one found with pkg-config (`make install PREFIX=...` at the
// repository root; set PKG_CONFIG_PATH to PREFIX/lib/pkgconfig), mcpgw_static the installed
// libmcpgw.a, mcpgw_intree the static library of a checkout of the repository (its own
// tests). The README says how to link statically or dynamically.
//
// The gateway binary for the sandbox comes with the module too: the package gateway embeds it
// (gateway.Path gives a file to hand to EnsureGatewayBinary).
package mcpgw
