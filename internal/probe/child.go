//go:build linux

package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// selfPath finds the probe's own executable for re-execution. /proc/self/exe
// may be unreadable inside the sandbox, so os.Args[0] is the fallback.
func selfPath() (string, error) {
	if p, err := os.Executable(); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	a0 := os.Args[0]
	if strings.Contains(a0, "/") {
		p, err := filepath.Abs(a0)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	return exec.LookPath(a0)
}

// devNull opens /dev/null for a child's standard descriptors, or returns nil
// (the descriptor is then closed in the child) when /dev/null is not there.
func devNull() *os.File {
	f, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	return f
}

// runIsolated runs vector name in a re-executed child ("__child name
// args...") and relays its report; the child's death becomes "blocked".
// When the probe cannot re-execute itself the attempt is made in-process.
func runIsolated(name string, args []string, fn func([]string) result) int {
	exe, err := selfPath()
	if err != nil {
		return report(name, fn(args))
	}
	var stdout, stderr bytes.Buffer
	cmd := selfCommand(exe, append([]string{hiddenChild, name}, args...)...)
	if null := devNull(); null != nil {
		defer null.Close()
		cmd.Stdin = null
	} else {
		cmd.Stdin = bytes.NewReader(nil)
	}
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// Should a descendant keep the output pipes open, do not wait for it.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return report(name, fn(args))
	}
	waitErr := cmd.Wait()

	if r, ok := parseReport(stdout.Bytes()); ok {
		return report(name, r)
	}
	tail := lastLine(stderr.String())
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if r, ok := gateMissing(name, stderr.String(), ws); ok {
		return report(name, r)
	}
	switch {
	case ws.Signaled():
		d := "killed by " + unix.SignalName(ws.Signal())
		if tail != "" {
			d += "; last progress: " + tail
		}
		return report(name, blockedf("%s", d))
	case strings.Contains(stderr.String(), "SIGSYS"):
		return report(name, blockedf("crashed: SIGSYS: bad system call (seccomp trap)"))
	case strings.Contains(stderr.String(), "failed to create new OS thread"):
		return report(name, blockedf("crashed: runtime could not create a thread (task limit); %s", tail))
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return report(name, blocked("wait", waitErr))
	}
	return report(name, blockedf("child exited %d without a report: %s", ws.ExitStatus(), tail))
}

// parseReport finds the probe JSON line in a child's stdout.
func parseReport(out []byte) (result, bool) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		var rep struct {
			Outcome string `json:"outcome"`
			Detail  string `json:"detail"`
		}
		if json.Unmarshal(line, &rep) == nil && rep.Outcome != "" {
			return result{rep.Outcome, rep.Detail}, true
		}
	}
	return result{}, false
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 300 {
		l = l[:300]
	}
	return l
}

// progress writes a progress line to stderr; an isolating parent quotes the
// last one if the child dies.
func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
}
