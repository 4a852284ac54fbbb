#!/bin/sh
# A minimal MCP server in POSIX sh, for sandboxes that hold nothing but busybox: one tool, `echo`,
# over stdio. It reads the JSON-RPC lines the gateway sends (compact JSON, one per line) and
# answers with printf; the text to echo may not contain a double quote or a backslash.
while IFS= read -r line; do
    id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
    case "$line" in
    *'"method":"initialize"'*)
        printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"sh-echo","version":"1"}}}\n' "$id" ;;
    *'"method":"tools/list"'*)
        printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","description":"Echoes its text","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}}\n' "$id" ;;
    *'"method":"tools/call"'*)
        text=$(printf '%s' "$line" | sed -n 's/.*"text":"\([^"\\]*\)".*/\1/p')
        printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}\n' "$id" "$text" ;;
    *'"method":"ping"'*)
        printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
    *'"id":'*)
        printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}\n' "$id" ;;
    esac
done
