//go:build linux

// Command confine-mcp is confine with its MCP server (`confine mcp`,
// docs/mcp.md) linked in: the same commands as confine. The confine binary
// leaves the MCP SDK out, so that no run pays for its start-up
// (docs/performance-launch.md), and its `confine mcp` executes this
// program, found beside it or in PATH. Linux only, as `confine mcp` is.
package main

import (
	"os"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/cli"
	"github.com/confine-sandbox/confine/internal/mcpserver"
)

func main() {
	confine.Init()
	mcpserver.Register()
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
