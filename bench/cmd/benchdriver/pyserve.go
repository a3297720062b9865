//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// ---- pyserve: the Python client through `confine serve` ----

// pyServeOut is what bench/python_serve.py prints.
type pyServeOut struct {
	Skip     string                          `json:"skip"`
	Latency  map[string][]float64            `json:"latency_ms"`
	Rate     map[string]map[string][]float64 `json:"rate"`
	Failures map[string]int                  `json:"failures"`
	Rounds   int                             `json:"rounds"`
	Jobs     int                             `json:"jobs"`
	Reps     int                             `json:"reps"`
	Python   string                          `json:"python"`
}

// pyServe runs bench/python_serve.py against a `confine serve` of its own:
// the Python client's launch latency and runs/s at 8 and 32 through the
// server, against the same client through the CLI and a bare subprocess
// of /bin/true from the same Python process, interleaved. Where python3
// or the client is missing, its rows say so and why.
func (b *bench) pyServe() error {
	rounds := b.knobInt("PY_ROUNDS", 30)
	jobs := b.knobInt("PY_JOBS", 64)
	reps := b.knobInt("PY_REPS", 2)
	skip := func(why string) error {
		fmt.Fprintln(os.Stderr, "bench: pyserve skipped:", why)
		r := newRow("py_server", "the Python client through `confine serve`", "", 0)
		r.Met = "skipped"
		r.Notes = "skipped: " + why
		b.add(r)
		return nil
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return skip("python3 not found on PATH")
	}
	script := filepath.Join(b.repo, "bench", "python_serve.py")
	srv, err := b.startServer("srv-py")
	if err != nil {
		return err
	}
	defer srv.stop()
	args := []string{script, "--confine", b.confineBin, "--server", srv.sock, "--workdir", b.wd,
		"--rounds", strconv.Itoa(rounds), "--jobs", strconv.Itoa(jobs), "--reps", strconv.Itoa(reps)}
	if b.bwrapBin != "" {
		args = append(args, "--bwrap", b.bwrapBin)
	}
	c := exec.Command(py, args...)
	// The CLI's environment, as the other rows run it (its event log into
	// the scratch dir), so that both client paths record alike.
	c.Env = b.command(confine, opts{}, "x").Env
	c.Dir = b.wd
	out, err := runOut(c)
	if err != nil {
		return err
	}
	var res pyServeOut
	if err := json.Unmarshal(out, &res); err != nil {
		return fmt.Errorf("python_serve.py printed %q: %v", out, err)
	}
	if res.Skip != "" {
		return skip(res.Skip)
	}
	bareMs := median(res.Latency["bare"])
	bwrapMs, haveBwrap := 0.0, len(res.Latency["bwrap"]) > 0
	if haveBwrap {
		bwrapMs = median(res.Latency["bwrap"])
	}
	for _, p := range []struct{ id, what string }{
		{"cli", "the CLI (`Client(binary)`)"},
		{"server", "`confine serve` (`Client(binary, server=SOCKET)`), default backend"},
		{"server_core", "`confine serve`, `backend=\"core\"` (landlock+seccomp)"},
	} {
		r := newRow("py_launch_"+p.id, "Python: launch `/bin/true` through "+p.what+"; bare: `subprocess.run` of it; bwrap: `subprocess.run` of `bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all /bin/true`", "ms", 2)
		b.fill(r, map[box][]float64{bare: res.Latency["bare"], confine: res.Latency[p.id], bwrap: res.Latency["bwrap"]})
		if !haveBwrap {
			r.Text[bwrap] = "n/a"
		}
		d := r.Values[confine] - bareMs
		r.Notes = fmt.Sprintf("python %s, %d interleaved rounds of bare, bwrap, CLI and server from one process; overhead %.2f ms = %.2fx bare; failures %d",
			res.Python, res.Rounds, d, d/bareMs, res.Failures[p.id])
		switch p.id {
		case "server":
			// Issue 23: through the server from Python, the default
			// backend at most bubblewrap's standalone time.
			r.Target = "≤ bwrap standalone (issue 23)"
			r.Met = "n/a (no bwrap)"
			if haveBwrap {
				r.Met = verdict(r.Values[confine] <= bwrapMs && res.Failures[p.id] == 0)
			}
			r.Notes += fmt.Sprintf("; through the CLI the overhead is %.2f ms", median(res.Latency["cli"])-bareMs)
		case "server_core":
			r.Target = "≤ 3 ms (issue 23)"
			r.Met = verdict(r.Values[confine] <= 3 && res.Failures[p.id] == 0)
		}
		r.Extra = map[string]any{"overhead_ms": d, "failures": res.Failures[p.id]}
		b.add(r)
	}
	for _, par := range []string{"8", "32"} {
		for _, p := range []string{"cli", "server", "server_core"} {
			r := newRow(fmt.Sprintf("py_conc%s_%s", par, p), fmt.Sprintf("Python: runs/s of `/bin/true`, %s at a time, `run_async` through the %s; bare and bwrap: asyncio subprocesses", par, map[string]string{"cli": "CLI", "server": "server", "server_core": "server, backend core"}[p]), "runs/s", 1)
			b.fill(r, map[box][]float64{bare: res.Rate[par]["bare"], confine: res.Rate[par][p], bwrap: res.Rate[par]["bwrap"]})
			if !haveBwrap {
				r.Text[bwrap] = "n/a"
			} else if p != "cli" {
				r.Target = "≥ bwrap (issue 23)"
				r.Met = verdict(r.Values[confine] >= r.Values[bwrap])
			}
			r.Notes = fmt.Sprintf("%d runs per round, %d rounds, shuffled", res.Jobs, res.Reps)
			b.add(r)
		}
	}
	n := 0
	for _, k := range []string{"bare", "bwrap", "cli", "server", "server_core"} {
		n += res.Failures[k]
	}
	if n > 0 {
		b.caveats = append(b.caveats, fmt.Sprintf("pyserve: %d runs failed (bare %d, bwrap %d, CLI %d, server %d, server core %d)", n, res.Failures["bare"], res.Failures["bwrap"], res.Failures["cli"], res.Failures["server"], res.Failures["server_core"]))
	}
	return nil
}
