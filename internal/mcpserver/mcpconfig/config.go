//go:build linux

// Package mcpconfig is what the operator of `confine mcp` fixes at server
// start. It is apart from package mcpserver so that the confine binary,
// which every run starts, links neither the MCP SDK nor its dependencies
// (their package initialisation and size cost every start; see
// docs/performance-launch.md): cmd/confine-mcp serves MCP.
package mcpconfig

import (
	"github.com/confine-sandbox/confine/hostop"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Config is what the operator fixes at server start.
type Config struct {
	// Host performs the Tier 1 tools on the root (required). Its EventLog
	// is the log every tool call is recorded in.
	Host *hostop.Host
	// RunCap authorises run_command under RunProfile; nil leaves the
	// tool out.
	RunCap     *policy.Cap
	RunProfile policy.Profile
	// Backend is the run backend ("" or "auto": the library's choice).
	Backend string
	// ReadOnly and ReadWrite are the operator's extra roots of every run.
	ReadOnly, ReadWrite []string
	// ControlPaths are this server's own files no run may reach (its
	// socket, bearer token and key; docs/control-plane.md).
	ControlPaths []string
	// Env is every run's environment, built by the operator's side.
	Env []string
	// AgentEnv names the variables a call may set (on top of Env); their
	// values still pass the profile's sanitiser.
	AgentEnv []string
	// Limits bound every run; Limits.WallTime is also the longest
	// timeout a call may ask for.
	Limits spec.Limits
	// ApproveHint is the command line a human runs to grant a refused
	// connection, with REQUEST_ID standing for the request.
	ApproveHint string
	// Version is reported to clients.
	Version string
}
