package mcpgw

// #include <stdlib.h>
// #include <mcpgw.h>
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"unsafe"
)

// Connection is a virtual MCP connection to one registered MCP server, carried by the session
// channel: raw JSON-RPC both ways, the gateway acting as the MCP server of the connection. Make
// one with Client.Connect. It is safe for concurrent use.
type Connection struct {
	h   *host
	id  uint64
	mcp string

	signal chan struct{}
	mu     sync.Mutex
	open   bool
	queue  []json.RawMessage
	ended  bool
	err    error // why it ended; io.EOF when the host closed it
}

// Connect opens a virtual MCP connection to the MCP server mcp of the scope (WithScope) over the
// session channel, and waits until the gateway has opened it. It needs an open session
// (ErrInvalidState otherwise). A refused open is an *Error: ErrNotFound for an MCP the scope does
// not have, ErrProtocolError with the gateway's reason otherwise.
func (c *Client) Connect(ctx context.Context, mcp string, opts ...CallOption) (*Connection, error) {
	const name = "connect"
	cfg := c.settings(opts)
	if cfg.err != nil {
		return nil, invalidArgument(name, cfg.err.Error(), cfg.err)
	}
	texts := []string{mcp, cfg.agentID, cfg.sessionID}
	for _, t := range texts {
		if strings.IndexByte(t, 0) >= 0 {
			return nil, invalidArgument(name, "a name contains a NUL byte", nil)
		}
	}
	cs := make([]*C.char, len(texts))
	for i, t := range texts {
		cs[i] = C.CString(t)
		defer C.free(unsafe.Pointer(cs[i]))
	}
	k := &Connection{h: c.h, mcp: mcp, signal: make(chan struct{}, 1)}
	h := c.h
	h.mu.Lock()
	if h.ptr == nil || h.closing {
		h.mu.Unlock()
		return nil, closedError(name)
	}
	var id C.uint64_t
	var cerr *C.mcpgw_error
	if rc := Code(C.mcpgw_host_open_connection(h.ptr, cs[0], cs[1], cs[2], &id, &cerr)); rc != CodeOK {
		defer C.mcpgw_error_free(cerr)
		h.mu.Unlock()
		return nil, errorFromC(name, rc, cerr)
	}
	k.id = uint64(id)
	h.conns[k.id] = k
	h.drainLocked()
	h.mu.Unlock()
	for {
		k.mu.Lock()
		open, ended, err := k.open, k.ended, k.err
		k.mu.Unlock()
		switch {
		case open:
			return k, nil
		case ended:
			return nil, err
		}
		select {
		case <-k.signal:
		case <-ctx.Done():
			k.Close()
			return nil, contextError(name, ctx.Err())
		}
	}
}

// Send sends one JSON-RPC message: a json.RawMessage, []byte or string is sent as it is (it must
// be one JSON object), anything else as encoding/json encodes it. On a connection that has ended
// it fails with ErrInvalidState, whose cause is why it ended (io.EOF after Close).
func (k *Connection) Send(msg any) error {
	const name = "send"
	var text []byte
	switch m := msg.(type) {
	case json.RawMessage:
		text = m
	case []byte:
		text = m
	case string:
		text = []byte(m)
	default:
		var err error
		if text, err = json.Marshal(msg); err != nil {
			return invalidArgument(name, "the message cannot be encoded as JSON: "+err.Error(), err)
		}
	}
	if !json.Valid(text) {
		return invalidArgument(name, "the message is not JSON", nil)
	}
	k.mu.Lock()
	ended, why := k.ended, k.err
	k.mu.Unlock()
	if ended {
		return endedError(name, why)
	}
	h := k.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr == nil {
		return closedError(name)
	}
	var cerr *C.mcpgw_error
	if rc := Code(C.mcpgw_host_send(h.ptr, C.uint64_t(k.id), bytesPtr(text), C.size_t(len(text)), &cerr)); rc != CodeOK {
		defer C.mcpgw_error_free(cerr)
		return errorFromC(name, rc, cerr)
	}
	h.drainLocked()
	return nil
}

// Recv returns the next message from the MCP server, waiting for one until ctx ends. Once the
// connection has ended it returns why: io.EOF when Close ended it, else an *Error
// (ErrSessionLost, with the reason, when the gateway or the channel ended it).
func (k *Connection) Recv(ctx context.Context) (json.RawMessage, error) {
	for {
		k.mu.Lock()
		if len(k.queue) > 0 {
			m := k.queue[0]
			k.queue = k.queue[1:]
			k.mu.Unlock()
			return m, nil
		}
		ended, err := k.ended, k.err
		k.mu.Unlock()
		if ended {
			return nil, err
		}
		select {
		case <-k.signal:
		case <-ctx.Done():
			return nil, contextError("recv", ctx.Err())
		}
	}
}

// Close ends the connection; Recv then returns io.EOF. It is idempotent and returns nil.
func (k *Connection) Close() error {
	k.h.report(func(p *C.mcpgw_host) { C.mcpgw_host_close_connection(p, C.uint64_t(k.id)) })
	return nil
}

func (k *Connection) post(f func()) {
	k.mu.Lock()
	f()
	k.mu.Unlock()
	select {
	case k.signal <- struct{}{}:
	default:
	}
}

func (k *Connection) opened() { k.post(func() { k.open = true }) }

func (k *Connection) message(b []byte) {
	k.post(func() { k.queue = append(k.queue, b) })
}

// closed ends the connection: reason "" when the host closed it; status is the HTTP status of a
// refused open, code the kind the library gave the end (CodeNotFound for no such MCP,
// CodeUpstreamError when the gateway ended it, CodeSessionLost when the channel was lost).
func (k *Connection) closed(reason string, status int, code Code) {
	k.post(func() {
		if code == CodeOK {
			code = CodeUpstreamError
		}
		op := "connection"
		if !k.open {
			op = "connect"
		}
		k.ended = true
		if reason == "" {
			k.err = io.EOF
		} else {
			k.err = &Error{Op: op, Code: code, Message: op + ": " + reason, HTTPStatus: status}
		}
	})
}

// endedError is the error of an operation on a connection that ended because of why.
func endedError(op string, why error) *Error {
	message := op + ": the connection is closed"
	var e *Error
	switch {
	case errors.As(why, &e):
		message = op + ": the connection has ended: " + e.Message
	case why != io.EOF:
		message = op + ": the connection has ended: " + why.Error()
	}
	return &Error{Op: op, Code: CodeInvalidState, Message: message, Err: why}
}
