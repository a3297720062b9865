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
	c := exec.Command(py, script, "--confine", b.confineBin, "--server", srv.sock, "--workdir", b.wd,
		"--rounds", strconv.Itoa(rounds), "--jobs", strconv.Itoa(jobs), "--reps", strconv.Itoa(reps))
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
	for _, p := range []struct{ id, what string }{
		{"cli", "the CLI (`Client(binary)`)"},
		{"server", "`confine serve` (`Client(binary, server=SOCKET)`)"},
	} {
		r := newRow("py_launch_"+p.id, "Python: launch `/bin/true` through "+p.what+"; bare: `subprocess.run` of it", "ms", 2)
		b.fill(r, map[box][]float64{bare: res.Latency["bare"], confine: res.Latency[p.id]})
		r.Text[bwrap] = ""
		d := r.Values[confine] - bareMs
		r.Notes = fmt.Sprintf("python %s, %d interleaved rounds of bare, CLI and server from one process; overhead %.2f ms = %.2fx bare; failures %d",
			res.Python, res.Rounds, d, d/bareMs, res.Failures[p.id])
		if p.id == "server" {
			r.Target = "overhead ≤ 2 × bare fork+exec"
			r.Met = verdict(d <= 2*bareMs && res.Failures[p.id] == 0)
			r.Notes += fmt.Sprintf("; through the CLI the overhead is %.2f ms", median(res.Latency["cli"])-bareMs)
		}
		r.Extra = map[string]any{"overhead_ms": d, "failures": res.Failures[p.id]}
		b.add(r)
	}
	for _, par := range []string{"8", "32"} {
		for _, p := range []string{"cli", "server"} {
			r := newRow(fmt.Sprintf("py_conc%s_%s", par, p), fmt.Sprintf("Python: runs/s of `/bin/true`, %s at a time, `run_async` through the %s; bare: asyncio subprocesses", par, map[string]string{"cli": "CLI", "server": "server"}[p]), "runs/s", 1)
			b.fill(r, map[box][]float64{bare: res.Rate[par]["bare"], confine: res.Rate[par][p]})
			r.Text[bwrap] = ""
			r.Notes = fmt.Sprintf("%d runs per round, %d rounds, shuffled", res.Jobs, res.Reps)
			b.add(r)
		}
	}
	if n := res.Failures["bare"] + res.Failures["cli"] + res.Failures["server"]; n > 0 {
		b.caveats = append(b.caveats, fmt.Sprintf("pyserve: %d runs failed (bare %d, CLI %d, server %d)", n, res.Failures["bare"], res.Failures["cli"], res.Failures["server"]))
	}
	return nil
}
