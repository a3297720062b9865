//go:build linux

package probe

import (
	"context"
	"os"
	"time"

	"github.com/confine-sandbox/confine/internal/serve"
	"github.com/confine-sandbox/confine/spec"
)

// vServeRun speaks the warm server's protocol directly (no `confine run
// --server`, whose own checks a raw client skips) and asks the server at
// SOCKET for a run of its own choosing: a shell that creates TARGET in
// WORKTREE, a directory outside the probe's own sandbox. Escaped when the
// server ran it and TARGET exists.
func vServeRun(args []string) result {
	sock, worktree, target := args[0], args[1], args[2]
	c, err := serve.Dial(sock)
	if err != nil {
		return blocked("dial "+sock, err)
	}
	req := &serve.Request{
		Spec: spec.CommandSpec{Program: "/bin/sh", Args: []string{"-c", `: > "$1"`, "sh", target}, Worktree: worktree,
			Env: []string{"PATH=/usr/bin:/bin"}},
		Profile: "default",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	resp, err := serve.Do(ctx, c, req, nil)
	switch {
	case err != nil:
		return blocked("request", err)
	case resp.Error != nil:
		return blockedf("the server refused: %s: %s", resp.Error.Kind, resp.Error.Message)
	case resp.Result == nil || resp.Result.ExitCode != 0:
		return blockedf("the server's run failed: %+v", resp.Result)
	}
	if _, err := os.Lstat(target); err != nil {
		return blocked("the server's run left no "+target, err)
	}
	return escaped("the server at %s ran a command of the probe's choosing, which created %s", sock, target)
}
