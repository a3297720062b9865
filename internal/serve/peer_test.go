//go:build linux

package serve

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestReadStatus(t *testing.T) {
	cases := []struct {
		name, text string
		want       procStatus
		err        bool
	}{
		{"plain", "Name:\tsh\nNoNewPrivs:\t0\nSeccomp:\t0\nSeccomp_filters:\t0\n", procStatus{}, false},
		{"confined", "NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t2\n", procStatus{noNewPrivs: true, filters: 2}, false},
		{"no filter count", "NoNewPrivs:\t1\nSeccomp:\t2\n", procStatus{}, true},
		{"bad count", "NoNewPrivs:\t1\nSeccomp_filters:\tx\n", procStatus{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readStatus([]byte(c.text))
			if (err != nil) != c.err {
				t.Fatalf("err = %v, want error %v", err, c.err)
			}
			if err == nil && got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	cases := []struct {
		name     string
		st, own  procStatus
		confined bool
	}{
		{"unconfined peer, plain server", procStatus{}, procStatus{}, false},
		{"confined peer, plain server", procStatus{true, 1}, procStatus{}, true},
		{"docker: peer as confined as the server", procStatus{true, 1}, procStatus{true, 1}, false},
		{"docker: run inside the server's container", procStatus{true, 2}, procStatus{true, 1}, true},
		{"filters without no_new_privs (privileged)", procStatus{false, 3}, procStatus{}, false},
		{"no_new_privs alone (systemd unit)", procStatus{true, 0}, procStatus{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := judge(c.st, c.own) != ""; got != c.confined {
				t.Errorf("judge(%+v, %+v) confined = %v, want %v", c.st, c.own, got, c.confined)
			}
		})
	}
}

// TestPeerRulesOnPlainProcess: a process outside any run passes every
// rule, and the rules read a real /proc (a rule that cannot read fails).
func TestPeerRulesOnPlainProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	own, err := ownStatus()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range peerRules {
		why, err := r.check(cmd.Process.Pid, own)
		if err != nil || why != "" {
			t.Errorf("%s: why %q, err %v; want neither", r.name, why, err)
		}
		if _, err := r.check(1<<30, own); err == nil || !strings.Contains(err.Error(), "no such file") && !os.IsNotExist(err) {
			t.Errorf("%s on a missing pid: err %v, want not-exist", r.name, err)
		}
	}
}
