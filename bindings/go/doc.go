// Package mcpgw lets a Go agent use MCP servers that run inside a sandbox (a Docker container,
// a Kubernetes pod, an E2B or Daytona sandbox, a namespace jail) through mcpgw-gateway, without
// a port published from the sandbox.
//
// The gateway runs inside the sandbox, on its loopback, and owns the MCP sessions. This
// package, on the host, reaches it through the one channel every sandbox offers: running a
// shell command in it. Each request becomes a `sh -c` command that an Exec runs in the sandbox
// (LocalExec, DockerExec, KubectlExec, or ExecFunc / StdinExecFunc for any other backend), and
// what the command prints is decoded into Go values: MCPSpec, Tool, ToolChunk.
//
//	client, err := mcpgw.NewClient(mcpgw.DockerExec("agent-sandbox"))
//	...
//	defer client.Close()
//	if _, err := client.StartGateway(ctx); err != nil { ... }
//	defer client.StopGateway(ctx)
//	err = client.AddMCP(ctx, mcpgw.StdioSpec("fs", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/work"))
//	chunk, err := client.CallTool(ctx, "fs", "read_text_file", map[string]any{"path": "/work/README.md"})
//	fmt.Println(chunk.Text())
//
// # Sessions
//
// One command per call costs what the backend charges for an exec (about 100 ms for docker
// exec). Client.OpenSession opens one long-lived exec instead (`docker exec -i`, `kubectl exec
// -i`, a local pipe: DockerSession, KubectlSession, LocalSession, or an Opener of your own) that
// carries every REST call from then on, many at once, with live progress (WithProgress) and
// real cancellation. A lost session fails the calls it carried with ErrSessionLost and is
// opened again by the next call.
//
// # Scopes
//
// The gateway keeps the MCPs of each (agent id, session id) pair apart. A Client's MCP methods
// act in its default scope (WithScope, "" and "" unless set); Client.Scope gives a view on any
// other scope of the same gateway.
//
// # Deadlines and cancellation
//
// Every call takes a context. Its deadline, shortened by a tenth (at most a second) so that
// the answer can travel back in time, becomes the call's deadline at the gateway, which then
// cancels the tool call upstream and answers with ErrDeadline. A context without a deadline
// gets the client's timeout (WithTimeout, 60 s by default).
//
// Cancelling a context abandons the call at once (ErrCancelled, which also matches
// context.Canceled). Over a session a cancel frame tells the gateway, which cancels the tool
// call upstream. One-shot, the call's command is killed (LocalExec kills its process group),
// and the gateway cancels the call when its caller goes away.
//
// # Errors
//
// Every failure is an *Error with the kind of failure (Code), a message, and the gateway's
// HTTP status and detail when it answered. Test the kind with errors.Is: ErrNotFound,
// ErrConflict, ErrDeadline, ErrUnauthorized, ErrGatewayNotRunning, ErrUpstreamError,
// ErrExecFailed, ErrSessionLost, ErrCancelled, ... (generated from libmcpgw's one list of
// result codes). A tool that reports an error is not a failure: its ToolChunk has State
// StateError. No error carries the gateway's token: it stays in a 0600 file inside the sandbox,
// and every request reads it from there.
//
// # Concurrency
//
// A Client, and every Scope of it, is safe for concurrent use by any number of goroutines; the
// Exec is then called concurrently. No lock is held and no C call is running while a command
// runs. ToolChunk and the other results are plain values owned by the caller. Close releases
// the client (finalizers are only a backstop) and is idempotent.
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
