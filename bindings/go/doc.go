// Package mcpgw lets a Go agent use MCP servers that run inside a sandbox (a Docker container,
// a Kubernetes pod, an E2B or Daytona sandbox, a namespace jail) through mcpgw-gateway, without
// a port published from the sandbox.
//
// The gateway runs inside the sandbox, on its loopback, and owns the MCP sessions. This
// package, on the host, reaches it through the one channel every sandbox offers: running a
// shell command in it. Each request becomes a `sh -c` command that an Exec function runs in
// the sandbox (LocalExec, DockerExec, KubectlExec, or one for any other backend), and what the
// command prints is decoded into Go values: MCPSpec, Tool, ToolChunk.
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
// cancels the tool call upstream and answers with ErrTimeout. A context without a deadline
// gets the client's timeout (WithTimeout, 60 s by default).
//
// Cancelling a context abandons the call at once. The call runs its commands from Go (the
// library's sans-IO form: no C call blocks or calls back into Go), so it simply stops waiting
// for the running command and frees its state; the command's context is cancelled too, which
// makes LocalExec kill it and, with it, the request to the gateway, which in turn cancels the
// tool call upstream. The error matches context.Canceled.
//
// # Errors
//
// Every failure is an *Error with the kind of failure (Code), a message, and the gateway's
// HTTP status and detail when it answered. Test the kind with errors.Is: ErrNotFound,
// ErrConflict, ErrTimeout, ErrUnauthorized, ErrGatewayDown, ErrUpstream, ErrExecFailed, ... A
// tool that reports an error is not a failure: its ToolChunk has State StateError. No error
// carries the gateway's token: it stays in a 0600 file inside the sandbox, and every request
// reads it from there.
//
// # Concurrency
//
// A Client, and every Scope of it, is safe for concurrent use by any number of goroutines; the
// calls are independent, and the Exec function is then called concurrently. No lock is held
// and no C call is running while a command runs. ToolChunk and the other results are plain values owned by the caller.
// Close releases the client (finalizers are only a backstop) and is idempotent; calls still
// running finish normally.
//
// # Building
//
// The package is cgo over libmcpgw, the project's Rust library, with the header from
// include/mcpgw.h. By default it links the static library of the checkout's release build,
// target/release/libmcpgw.a (build it with `make -C bindings/go lib` or
// `cargo build --release -p mcpgw`), so programs need no libmcpgw.so at run time. With
// `-tags mcpgw_shared` it links target/release/libmcpgw.so instead, found at run time through
// an rpath to that directory.
package mcpgw
