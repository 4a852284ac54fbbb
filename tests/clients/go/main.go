// Command everything runs every feature of @modelcontextprotocol/server-everything through the
// official Go SDK's client (github.com/modelcontextprotocol/go-sdk/mcp) and prints the results
// as one JSON object on stdout, so that two runs (straight to the server, and through
// `mcpgw mcp`) can be compared.
//
//	everything stdio COMMAND [ARG...]
//	everything http URL [TOKEN_FILE]
//	everything binding docker CONTAINER COMMAND [ARG...]
//
// The binding mode runs the server COMMAND inside a running Docker container through the Go
// binding of mcpgw: it opens a session with the binding's Docker backend (which launches the
// gateway from the container's PATH), registers the server and connects the client over
// mcpsdk's transport, a virtual MCP connection of the session; at the end it stops the gateway.
// It needs a build with -tags mcpgw_intree (which links this checkout's libmcpgw).
//
// The SDK's own handlers answer the server's sampling, elicitation and roots requests.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const limit = 30 * time.Second

// script is tests/clients/everything.json.
type script struct {
	ConditionalTools []string             `json:"conditional_tools"`
	Calls            [][3]json.RawMessage `json:"calls"`
	Reads            []string             `json:"reads"`
	Prompts          [][3]json.RawMessage `json:"prompts"`
	Complete         json.RawMessage      `json:"complete"`
	Subscribe        string               `json:"subscribe"`
	Answers          struct {
		Sampling    json.RawMessage `json:"sampling"`
		Elicitation json.RawMessage `json:"elicitation"`
		Roots       struct {
			Roots []*mcp.Root `json:"roots"`
		} `json:"roots"`
	} `json:"answers"`
}

func loadScript() (*script, error) {
	_, here, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "everything.json"))
	if err != nil {
		return nil, err
	}
	var s script
	return &s, json.Unmarshal(data, &s)
}

// notes keeps notifications in order and wakes whoever waits for one.
type notes struct {
	mu   sync.Mutex
	seen []note
	wake chan struct{}
}

type note struct {
	kind   string
	params any
}

func newNotes() *notes { return &notes{wake: make(chan struct{})} }

func (n *notes) add(kind string, params any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen = append(n.seen, note{kind, params})
	close(n.wake)
	n.wake = make(chan struct{})
}

func (n *notes) count(kind string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, s := range n.seen {
		if s.kind == kind {
			c++
		}
	}
	return c
}

// wait returns the first note pred accepts, waiting for it up to limit. pred runs without the
// lock held: it may ask n (count) itself.
func (n *notes) wait(what string, pred func(note) bool) (any, error) {
	deadline := time.After(limit)
	for {
		n.mu.Lock()
		seen := append([]note(nil), n.seen...)
		wake := n.wake
		n.mu.Unlock()
		for _, s := range seen {
			if pred(s) {
				return s.params, nil
			}
		}
		select {
		case <-wake:
		case <-deadline:
			return nil, fmt.Errorf("no %s within %v", what, limit)
		}
	}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// entry decodes a script entry [label, name, arguments] of calls or prompts.
func entry[A any](e [3]json.RawMessage) (label, name string, arguments A) {
	_ = json.Unmarshal(e[0], &label)
	_ = json.Unmarshal(e[1], &name)
	_ = json.Unmarshal(e[2], &arguments)
	return label, name, arguments
}

// outcome is a request's result, or the error the SDK returned.
func outcome(result any, err error) map[string]any {
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	return map[string]any{"result": result}
}

func run(args []string) (map[string]any, error) {
	s, err := loadScript()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	n := newNotes()
	var askedMu sync.Mutex
	var asked []string
	ask := func(what string) {
		askedMu.Lock()
		asked = append(asked, what)
		askedMu.Unlock()
	}
	progress := make(chan *mcp.ProgressNotificationParams, 64)
	cancelling := make(chan struct{}, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgw-test-go", Version: "1.0.0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			text := ""
			if t, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
				text = t.Text
			}
			ask("sampling/createMessage: " + text)
			var r mcp.CreateMessageResult
			return &r, json.Unmarshal(s.Answers.Sampling, &r)
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			ask("elicitation/create: " + req.Params.Message)
			var r mcp.ElicitResult
			return &r, json.Unmarshal(s.Answers.Elicitation, &r)
		},
		Capabilities: &mcp.ClientCapabilities{
			RootsV2:     &mcp.RootCapabilities{ListChanged: true},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { n.add("tools", nil) },
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			n.add("log", r.Params)
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			n.add("updated", r.Params)
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if r.Params.ProgressToken == "progress-2" {
				cancelling <- struct{}{}
			} else {
				progress <- r.Params
			}
		},
	})
	client.AddRoots(s.Answers.Roots.Roots...)
	// The SDK answers roots/list itself from AddRoots; the log of requests notes it through
	// a receiving middleware.
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "roots/list" {
				ask("roots/list")
			}
			return next(ctx, method, req)
		}
	})

	var transport mcp.Transport
	switch args[0] {
	case "binding":
		t, stop, err := bindingTransport(ctx, args[2], args[3:])
		if err != nil {
			return nil, err
		}
		defer stop()
		transport = t
	case "stdio":
		cmd := exec.Command(args[1], args[2:]...)
		cmd.Stderr = os.Stderr
		transport = &mcp.CommandTransport{Command: cmd}
	default:
		hc := &http.Client{}
		if len(args) > 2 {
			token, err := os.ReadFile(args[2])
			if err != nil {
				return nil, err
			}
			hc.Transport = bearer{strings.TrimSpace(string(token)), http.DefaultTransport}
		}
		transport = &mcp.StreamableClientTransport{Endpoint: args[1], HTTPClient: hc}
	}
	// The SDK's default asks server/discover first (2026-07-28). The gateway answers it for a
	// server of an earlier revision too, which would take this client to 2026-07-28, where a
	// server of 2025 cannot sample, elicit or list roots through it; straight to that server the
	// probe fails and the SDK falls back. Both runs speak the server's own revision.
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	out := map[string]any{}
	init := cs.InitializeResult()
	out["server"] = map[string]any{
		"protocol": init.ProtocolVersion, "version": init.ServerInfo,
		"capabilities": init.Capabilities, "instructions": init.Instructions,
	}
	for {
		before := n.count("tools")
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			return nil, err
		}
		names := map[string]bool{}
		for _, t := range tools.Tools {
			names[t.Name] = true
		}
		all := true
		for _, t := range s.ConditionalTools {
			all = all && names[t]
		}
		if all {
			out["tools"] = tools
			break
		}
		if _, err := n.wait("tools/list_changed", func(note) bool { return n.count("tools") > before }); err != nil {
			return nil, err
		}
	}
	if out["prompts"], err = cs.ListPrompts(ctx, nil); err != nil {
		return nil, err
	}
	resources, err := cs.ListResources(ctx, nil)
	if err != nil {
		return nil, err
	}
	out["resources"] = resources
	if out["templates"], err = cs.ListResourceTemplates(ctx, nil); err != nil {
		return nil, err
	}
	for _, c := range s.Calls {
		label, name, arguments := entry[map[string]any](c)
		out["call "+label] = outcome(cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: arguments}))
	}
	for _, uri := range append([]string{resources.Resources[0].URI}, s.Reads...) {
		out["read "+uri] = outcome(cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}))
	}
	for _, p := range s.Prompts {
		label, name, arguments := entry[map[string]string](p)
		out[label] = outcome(cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: arguments}))
	}
	var complete mcp.CompleteParams
	if err := json.Unmarshal(s.Complete, &complete); err != nil {
		return nil, err
	}
	out["complete"] = outcome(cs.Complete(ctx, &complete))
	out["ping"] = outcome(nil, cs.Ping(ctx, nil))

	out["setLevel"] = outcome(nil, cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}))
	uri := s.Subscribe
	out["subscribe"] = outcome(nil, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}))
	if out["log of subscribe"], err = n.wait("a log message", func(x note) bool {
		p, ok := x.params.(*mcp.LoggingMessageParams)
		return x.kind == "log" && ok && strings.Contains(fmt.Sprint(p.Data), uri)
	}); err != nil {
		return nil, err
	}
	toggle := &mcp.CallToolParams{Name: "toggle-subscriber-updates", Arguments: map[string]any{}}
	out["toggle updates"] = outcome(cs.CallTool(ctx, toggle))
	if out["updated"], err = n.wait("resources/updated", func(x note) bool {
		p, ok := x.params.(*mcp.ResourceUpdatedNotificationParams)
		return x.kind == "updated" && ok && p.URI == uri
	}); err != nil {
		return nil, err
	}
	out["toggle updates off"] = outcome(cs.CallTool(ctx, toggle))
	out["unsubscribe"] = outcome(nil, cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}))

	long := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 3}}
	long.SetProgressToken("progress-1")
	out["long"] = outcome(cs.CallTool(ctx, long))
	// The last step's progress comes back to back with the answer: whether the SDK's handler
	// sees it before the answer returns depends on the transport's timing, so only the steps
	// before it are compared (each of them came before the answer).
	var seen []*mcp.ProgressNotificationParams
	for len(seen) < 2 {
		seen = append(seen, <-progress)
	}
	out["progress"] = seen

	// Cancel: a long call whose context ends once it reported progress; the session goes on.
	cctx, cancel := context.WithCancel(ctx)
	longer := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 30, "steps": 30}}
	longer.SetProgressToken("progress-2")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, longer)
		done <- err
	}()
	select {
	case <-cancelling:
	case <-time.After(limit):
		cancel()
		return nil, errors.New("no progress of the long call")
	}
	cancel()
	err = <-done
	out["cancelled"] = map[string]any{"context canceled": errors.Is(err, context.Canceled)}
	out["after cancel"] = outcome(cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "still here"}}))
	// The server asks for roots on its own once initialized, concurrently with the first calls.
	askedMu.Lock()
	sort.Strings(asked)
	out["asked"] = asked
	askedMu.Unlock()
	return out, nil
}

func main() {
	args := os.Args[1:]
	binding := len(args) > 0 && args[0] == "binding"
	if len(args) < 2 || (args[0] != "stdio" && args[0] != "http" && !binding) || (args[0] == "http" && len(args) > 3) ||
		(binding && (len(args) < 4 || args[1] != "docker")) {
		fmt.Fprintln(os.Stderr, "usage: everything stdio COMMAND [ARG...] | http URL [TOKEN_FILE] | "+
			"binding docker CONTAINER COMMAND [ARG...]")
		os.Exit(2)
	}
	out, err := run(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "everything:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "everything:", err)
		os.Exit(1)
	}
}
