//go:build linux

package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ---- faults: page faults per launch of /bin/true ----

// faultCand is one way to launch /bin/true whose page faults are counted.
type faultCand struct {
	id, name string
	// cmd, for a launch in a new process, builds its command; run, for a
	// launch from this process, runs it once.
	cmd func() *exec.Cmd
	run func() error
	// server: the launch goes through the bench's `confine serve`, whose
	// share is counted too.
	server bool
	// perf: counted again under `perf stat` (a command only).
	perf bool
}

// faultCands are the launches the faults benchmark counts: bare, an empty
// Go program, the CLI, the server, the library, and the other backends.
func (b *bench) faultCands(srv *server, w warm) (cands []faultCand, alts []alt, skipped []string) {
	trueCmd := func(x box, extra ...string) func() *exec.Cmd {
		return func() *exec.Cmd { return b.command(x, opts{confine: extra}, "/bin/true") }
	}
	cands = []faultCand{
		{id: "bare", name: "bare /bin/true", cmd: trueCmd(bare), perf: true},
		{id: "emptygo", name: "an empty static Go program", cmd: func() *exec.Cmd { return b.command(bare, opts{}, b.emptygo) }, perf: true},
		{id: "version", name: "`confine version`", cmd: func() *exec.Cmd {
			c := b.command(confine, opts{}, "x")
			c.Args = []string{b.confineBin, "version"}
			return c
		}, perf: true},
		{id: "cli", name: "`confine run`", cmd: trueCmd(confine), perf: true},
		{id: "cli_server", name: "`confine run --server`", cmd: trueCmd(confine, "--server="+srv.sock), server: true},
		{id: "server", name: "the server's protocol from a warm client", run: w.server, server: true},
		{id: "library", name: "`Launcher.RunCommand` in this process", run: w.library},
	}
	alts, skipped = b.altBackends()
	for _, a := range alts {
		cands = append(cands, faultCand{id: "cli_" + a.flag, name: "`confine run --backend " + a.flag + "`",
			cmd: trueCmd(confine, "--backend", a.flag), perf: true})
	}
	if b.bwrapOK {
		cands = append(cands,
			faultCand{id: "bwrap", name: "bwrap", cmd: trueCmd(bwrap), perf: true},
			faultCand{id: "bwrap_min", name: "`bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all /bin/true`", cmd: func() *exec.Cmd {
				return exec.Command(b.bwrapBin, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "/bin/true")
			}, perf: true})
	}
	return cands, alts, skipped
}

// faultsOf runs c once and counts the page faults of its whole tree, and
// of the server (pid srvPid) for a candidate that uses it; keep are the
// children that stay. A server that had not settled counts in unsettled.
func faultsOf(c faultCand, srvPid int, keep map[int]bool, unsettled *int) (total, srvPart float64, err error) {
	var s0 procFaults
	if c.server {
		if s0, err = readProcFaults(srvPid); err != nil {
			return 0, 0, err
		}
	}
	self0, kids0 := rusageFaults(unix.RUSAGE_SELF), rusageFaults(unix.RUSAGE_CHILDREN)
	if c.cmd != nil {
		err = c.cmd().Run()
	} else {
		err = c.run()
	}
	if err != nil {
		return 0, 0, err
	}
	if err := reapOrphans(keep); err != nil {
		return 0, 0, err
	}
	total = rusageFaults(unix.RUSAGE_CHILDREN) - kids0
	if c.cmd == nil {
		total += rusageFaults(unix.RUSAGE_SELF) - self0
	}
	if c.server {
		if !settle(srvPid) {
			(*unsettled)++
		}
		s1, err := readProcFaults(srvPid)
		if err != nil {
			return 0, 0, err
		}
		srvPart = s1.sub(s0)
		total += srvPart
	}
	return total, srvPart, nil
}

// faults counts the page faults (minor + major) of one launch of
// /bin/true, the whole process tree's, for bare, the CLI on each backend,
// the CLI through `confine serve`, a warm client of the server, the
// library in this process, and bwrap, in shuffled rounds.
//
// A command's tree is counted from getrusage(RUSAGE_CHILDREN) around it:
// this process is made a child subreaper for the measure, so a process the
// launch leaves behind (confine's detached init, bwrap's sandboxed tree,
// which its outer process does not reap) is reparented here, reaped, and
// counted with the rest. A launch from this process adds RUSAGE_SELF's
// delta (the Go runtime's faults while it ran, GC included). The server's
// share is the delta of its own and its reaped children's faults in
// /proc/PID/stat, read once it has no child left. Where perf works, the
// commands are counted again with `perf stat -e page-faults` (from exec
// on, inherited by the whole tree) as a cross-check.
func (b *bench) faults() error {
	runs := b.knobInt("FAULT_RUNS", 30)
	srv, err := b.startServer("srv-faults")
	if err != nil {
		return err
	}
	defer srv.stop()
	w, err := b.warmLaunchers(srv.sock)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

	cands, alts, skipped := b.faultCands(srv, w)
	// The server is the one child this process keeps.
	keep := map[int]bool{srv.cmd.Process.Pid: true}
	perfBin, perfWhy := b.perfWorks(keep)
	counts := map[string][]float64{}
	serverShare, callerShare := map[string][]float64{}, map[string][]float64{}
	perfCounts := map[string][]float64{}
	var unsettled int
	for i := -2; i < runs; i++ {
		for _, k := range rand.Perm(len(cands)) {
			c := cands[k]
			n, sp, err := faultsOf(c, srv.cmd.Process.Pid, keep, &unsettled)
			if err != nil {
				return fmt.Errorf("%s: %v", c.name, err)
			}
			var p float64
			if perfBin != "" && c.perf {
				if p, err = b.perfFaults(perfBin, c.cmd(), keep); err != nil {
					return fmt.Errorf("perf stat %s: %v", c.name, err)
				}
			}
			if i < 0 {
				continue // warm-up: caches, the server's and the library's first runs
			}
			counts[c.id] = append(counts[c.id], n)
			if c.server {
				serverShare[c.id] = append(serverShare[c.id], sp)
				callerShare[c.id] = append(callerShare[c.id], n-sp)
			}
			if perfBin != "" && c.perf {
				perfCounts[c.id] = append(perfCounts[c.id], p)
			}
		}
	}

	med := func(id string) float64 { return median(counts[id]) }
	also := fmt.Sprintf("an empty static Go program %.0f, `confine version` %.0f", med("emptygo"), med("version"))
	if b.bwrapOK {
		also += fmt.Sprintf(", the issue's minimal bwrap line %.0f", med("bwrap_min"))
	}
	how := "minor+major faults of the whole tree (RUSAGE_CHILDREN with this process as subreaper, so detached and orphaned processes count)"
	r := newRow("faults_cli", fmt.Sprintf("page faults per launch of `/bin/true`: `confine run` (backend %s)", b.backend), "faults", 0)
	b.fill(r, map[box][]float64{bare: counts["bare"], confine: counts["cli"], bwrap: counts["bwrap"]})
	r.Target = "confine ≤ 300 (issue 16)"
	r.Met = verdict(r.Values[confine] <= 300)
	r.Notes = fmt.Sprintf("%s; %d shuffled rounds; medians of the same rounds: %s", how, runs, also)
	if len(skipped) > 0 {
		r.Notes += "; " + strings.Join(skipped, "; ")
	}
	b.add(r)
	for _, a := range alts {
		ar := newRow("faults_cli_"+a.flag, fmt.Sprintf("page faults per launch of `/bin/true`: `confine run --backend %s` (%s)", a.flag, a.backend), "faults", 0)
		b.fill(ar, map[box][]float64{bare: counts["bare"], confine: counts["cli_"+a.flag], bwrap: counts["bwrap"]})
		ar.Target = "confine ≤ 300 (issue 16)"
		ar.Met = verdict(ar.Values[confine] <= 300)
		ar.Notes = "the same rounds"
		b.add(ar)
	}
	for _, c := range []struct{ id, what string }{
		{"cli_server", "the CLI through `confine serve` (`run --server`): the client's tree plus the server's share"},
		{"server", "the server's protocol from a warm client (this process): its share plus the server's"},
		{"library", "`Launcher.RunCommand` in this warm process (its own faults, GC included, and its children's)"},
	} {
		sr := newRow("faults_"+c.id, "page faults per launch of `/bin/true`: "+c.what, "faults", 0)
		b.fill(sr, map[box][]float64{bare: counts["bare"], confine: counts[c.id], bwrap: counts["bwrap"]})
		sr.Notes = "the same rounds"
		if sh, ok := serverShare[c.id]; ok {
			sr.Notes += fmt.Sprintf("; medians of the server's share %.0f and of the caller's %.0f", median(sh), median(callerShare[c.id]))
			if unsettled > 0 {
				sr.Notes += fmt.Sprintf("; %d runs read the server while it still had a child (its share may fall on the next run)", unsettled)
			}
		}
		b.add(sr)
	}
	if perfBin == "" {
		b.caveats = append(b.caveats, "faults: no perf cross-check: "+perfWhy)
		return nil
	}
	pr := newRow("faults_perf", fmt.Sprintf("page faults per launch of `/bin/true` under `perf stat -e page-faults` (cross-check; `confine run`, backend %s)", b.backend), "faults", 0)
	b.fill(pr, map[box][]float64{bare: perfCounts["bare"], confine: perfCounts["cli"], bwrap: perfCounts["bwrap"]})
	var parts []string
	for _, c := range cands {
		if ps, ok := perfCounts[c.id]; ok && c.id != "bare" && c.id != "cli" && c.id != "bwrap" {
			parts = append(parts, fmt.Sprintf("%s %.0f", c.name, median(ps)))
		}
	}
	pr.Notes = "counted from exec on, inherited by every process of the tree; also " + strings.Join(parts, ", ")
	b.add(pr)
	return nil
}

// rusageFaults is getrusage(who)'s minor plus major faults.
func rusageFaults(who int) float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return float64(ru.Minflt + ru.Majflt)
}

// childPids lists this process's children, of every thread.
func childPids() ([]int, error) {
	tasks, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // the thread is gone
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// reapOrphans waits for every child of this process but keep's: what a
// launch left behind and the subreaper inherited, and what those leave in
// turn, so that RUSAGE_CHILDREN holds all of it.
func reapOrphans(keep map[int]bool) error {
	for {
		pids, err := childPids()
		if err != nil {
			return err
		}
		n := 0
		for _, pid := range pids {
			if keep[pid] {
				continue
			}
			n++
			var ws unix.WaitStatus
			for {
				_, err := unix.Wait4(pid, &ws, 0, nil)
				if err == unix.EINTR {
					continue
				}
				if err != nil && err != unix.ECHILD {
					return fmt.Errorf("wait4 %d: %v", pid, err)
				}
				break
			}
		}
		if n == 0 {
			return nil
		}
	}
}

// procFaults are a process's faults and its reaped children's, from
// /proc/PID/stat.
type procFaults struct{ min, cmin, maj, cmaj float64 }

func (a procFaults) sub(b procFaults) float64 {
	return a.min - b.min + a.cmin - b.cmin + a.maj - b.maj + a.cmaj - b.cmaj
}

func readProcFaults(pid int) (procFaults, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procFaults{}, err
	}
	return parseStatFaults(string(data))
}

// parseStatFaults reads minflt, cminflt, majflt and cmajflt (fields 10 to
// 13) from a /proc/PID/stat line; the command name, field 2, may hold
// spaces and parentheses, so the fields are counted after its last ')'.
func parseStatFaults(line string) (procFaults, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return procFaults{}, errors.New("stat: no command name")
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3
	if len(f) < 11 {
		return procFaults{}, fmt.Errorf("stat: %d fields after the name", len(f))
	}
	var v [4]float64
	for k := range v {
		n, err := strconv.ParseUint(f[7+k], 10, 64)
		if err != nil {
			return procFaults{}, fmt.Errorf("stat field %d: %v", 10+k, err)
		}
		v[k] = float64(n)
	}
	return procFaults{min: v[0], cmin: v[1], maj: v[2], cmaj: v[3]}, nil
}

// settle waits, up to a few seconds, until pid has no child: the server
// has reaped what the run left (its init cleans up after the answer).
// It says whether it got there.
func settle(pid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
		busy := false
		for _, t := range tasks {
			if data, err := os.ReadFile(t); err == nil && len(strings.TrimSpace(string(data))) > 0 {
				busy = true
				break
			}
		}
		if !busy {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// perfWorks returns perf's path when `perf stat -e page-faults` counts
// here, or why not.
func (b *bench) perfWorks(keep map[int]bool) (string, string) {
	p, err := exec.LookPath("perf")
	if err != nil {
		return "", "perf not installed"
	}
	if _, err := b.perfFaults(p, exec.Command("/bin/true"), keep); err != nil {
		return "", fmt.Sprintf("perf stat -e page-faults fails here (%v)", err)
	}
	return p, ""
}

// perfFaults runs c under `perf stat -e page-faults` and returns the count;
// then it reaps what c left behind (all children but keep's).
func (b *bench) perfFaults(perf string, c *exec.Cmd, keep map[int]bool) (float64, error) {
	out := filepath.Join(b.tmp, "perf-stat.csv")
	p := exec.Command(perf, append([]string{"stat", "-x,", "-e", "page-faults", "-o", out, "--"}, c.Args...)...)
	p.Env, p.Dir, p.Stdin, p.Stdout, p.Stderr = c.Env, c.Dir, c.Stdin, c.Stdout, c.Stderr
	if err := p.Run(); err != nil {
		return 0, err
	}
	if err := reapOrphans(keep); err != nil {
		return 0, err
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return 0, err
	}
	return parsePerfFaults(string(data))
}

// parsePerfFaults reads the count of `perf stat -x,` output's page-faults
// line.
func parsePerfFaults(s string) (float64, error) {
	for _, l := range strings.Split(s, "\n") {
		f := strings.Split(l, ",")
		if len(f) >= 3 && strings.HasPrefix(f[2], "page-faults") {
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("perf counted %q", f[0])
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("no page-faults line in %q", s)
}
