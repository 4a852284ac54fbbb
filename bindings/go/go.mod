module github.com/mcpgw/mcpgw/bindings/go

go 1.23
