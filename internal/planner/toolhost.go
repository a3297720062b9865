package planner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/internal/toolhost"
)

// Recipe discovery (policy's toolchain recipes) asks the host through
// toolhost: the programs run here, in the plan stage, and never in
// package policy. Every program that plans a run imports this package, so
// the host is installed before any recipe is resolved.
func init() {
	toolhost.Install(toolhost.Source{
		Process: func() *toolhost.Host { return realHost },
		In:      hostIn,
	})
}

// discoveryTimeout bounds one discovery command.
const discoveryTimeout = 30 * time.Second

// maxDiscoveryOutput bounds what a discovery command may print.
const maxDiscoveryOutput = 1 << 20

// realHost asks the host in this process's environment.
var realHost = &toolhost.Host{
	LookPath: exec.LookPath,
	Run:      runTool,
	Getenv:   os.Getenv,
	Home: func() string {
		if h := os.Getenv("HOME"); filepath.IsAbs(h) {
			return filepath.Clean(h)
		}
		if u, err := user.Current(); err == nil {
			return u.HomeDir
		}
		return ""
	},
	PasswdHome: func() string {
		if u, err := user.Current(); err == nil {
			return u.HomeDir
		}
		return ""
	},
}

// boundedBuffer keeps the first max bytes written to it. (It has no
// ReadFrom, so io.Copy goes through Write.)
type boundedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

// runTool runs a discovery command in "/" with the caller's environment
// plus extraEnv, bounded in time and output.
func runTool(extraEnv []string, prog string, args ...string) ([]byte, error) {
	return runToolIn(os.Environ(), extraEnv, prog, args...)
}

// runToolIn is runTool with environ standing for the caller's
// environment.
func runToolIn(environ, extraEnv []string, prog string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), discoveryTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = "/"
	cmd.Env = append(slices.Clone(environ), extraEnv...)
	out := &boundedBuffer{max: maxDiscoveryOutput}
	errb := &boundedBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = out, errb
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s %s: no answer within %v", prog, strings.Join(args, " "), discoveryTimeout)
	}
	if err != nil {
		msg := strings.TrimSpace(errb.buf.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("%s %s: %s", prog, strings.Join(args, " "), toolhost.OneLine(msg))
	}
	if out.over {
		return nil, fmt.Errorf("%s %s: more than %d bytes of output", prog, strings.Join(args, " "), maxDiscoveryOutput)
	}
	return out.buf.Bytes(), nil
}

// hostIn is realHost with environ for this process's environment.
func hostIn(environ []string) *toolhost.Host {
	get := func(name string) string {
		for i := len(environ) - 1; i >= 0; i-- {
			if n, v, ok := strings.Cut(environ[i], "="); ok && n == name {
				return v
			}
		}
		return ""
	}
	return &toolhost.Host{
		LookPath: func(prog string) (string, error) { return lookPathIn(get("PATH"), prog) },
		Run: func(extraEnv []string, prog string, args ...string) ([]byte, error) {
			return runToolIn(environ, extraEnv, prog, args...)
		},
		Getenv: get,
		Home: func() string {
			if h := get("HOME"); filepath.IsAbs(h) {
				return filepath.Clean(h)
			}
			if u, err := user.Current(); err == nil {
				return u.HomeDir
			}
			return ""
		},
		PasswdHome: realHost.PasswdHome,
	}
}

// lookPathIn is exec.LookPath with path for $PATH: the first executable
// regular file named prog in an absolute entry (a relative entry would be
// this process's working directory, not the caller's).
func lookPathIn(path, prog string) (string, error) {
	if strings.Contains(prog, "/") {
		return prog, nil
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}
