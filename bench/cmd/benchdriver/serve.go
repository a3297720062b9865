//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	confinelib "github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/serve"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// ---- serve: the warm launcher (confine serve) ----

// launcher is one way to launch /bin/true confined (or not), as a function
// that runs it once.
type launcher struct {
	id, name string
	run      func() error
}

// serveBench launches /bin/true through every path side by side, in
// shuffled rounds: bare fork+exec, bwrap, the CLI (`confine run`), the CLI
// through the server (`confine run --server`), the server's protocol from
// this process (what a client that is not a fresh Go process pays: the
// Python client, an agent), and the library in this process
// (Launcher.RunCommand); then runs/s of each at 8 and at 32 at a time.
func (b *bench) serveBench() error {
	runs := b.knobInt("SERVE_RUNS", 100)
	jobs := b.knobInt("SERVE_JOBS", 128)
	reps := b.knobInt("SERVE_REPS", 3)

	srv, err := b.startServer("srv")
	if err != nil {
		return err
	}
	defer srv.stop()
	sock := srv.sock
	w, err := b.warmLaunchers(sock)
	if err != nil {
		return err
	}
	ls := []launcher{
		{"bare", "bare fork+exec", func() error { return b.command(bare, opts{}, "/bin/true").Run() }},
		{"cli", "`confine run`", func() error { return b.command(confine, opts{}, "/bin/true").Run() }},
		{"cli_server", "`confine run --server`", func() error {
			return b.command(confine, opts{confine: []string{"--server=" + sock}}, "/bin/true").Run()
		}},
		{"server", "the server's protocol from a warm client", w.server},
		{"library", "`Launcher.RunCommand` in this process", w.library},
	}
	if b.bwrapOK {
		ls = append(ls, launcher{"bwrap", "bwrap", func() error { return b.command(bwrap, opts{}, "/bin/true").Run() }})
	}
	for _, l := range ls {
		if err := l.run(); err != nil {
			return fmt.Errorf("%s: %v", l.name, err)
		}
	}

	// Launch latency, one at a time.
	times := map[string][]float64{}
	for i := -5; i < runs; i++ {
		for _, k := range rand.Perm(len(ls)) {
			t0 := time.Now()
			if err := ls[k].run(); err != nil {
				return fmt.Errorf("launch %s: %v", ls[k].name, err)
			}
			if i >= 0 {
				times[ls[k].id] = append(times[ls[k].id], ms(time.Since(t0)))
			}
		}
	}
	bareMs := median(times["bare"])
	for _, l := range ls {
		if l.id == "bare" || l.id == "bwrap" {
			continue
		}
		r := newRow("serve_launch_"+l.id, fmt.Sprintf("launch `/bin/true` through %s (wall, interleaved)", l.name), "ms", 2)
		b.fill(r, map[box][]float64{bare: times["bare"], confine: times[l.id], bwrap: times["bwrap"]})
		d := r.Values[confine] - bareMs
		r.Notes = fmt.Sprintf("%d rounds with every path in shuffled order; overhead %.2f ms = %.2fx bare", runs, d, d/bareMs)
		if b.bwrapOK {
			r.Notes += fmt.Sprintf("; bwrap's overhead %.2f ms", r.Values[bwrap]-bareMs)
		}
		switch l.id {
		case "server", "cli_server":
			r.Target = "overhead ≤ 2 × bare fork+exec"
			r.Met = verdict(d <= 2*bareMs)
		case "library":
			r.Target = "overhead ≤ 1 ms"
			r.Met = verdict(d <= 1)
		}
		r.Extra = map[string]any{"overhead_ms": d}
		b.add(r)
	}

	// Throughput at 8 and 32 at a time.
	for _, par := range []int{8, 32} {
		rate := map[string][]float64{}
		fails := map[string]int{}
		firstErr := map[string][]string{}
		for rep := 0; rep < reps; rep++ {
			for _, k := range rand.Perm(len(ls)) {
				l := ls[k]
				t0 := time.Now()
				n, errs := runPool(context.Background(), par, jobs, l.run)
				fails[l.id] += n
				for _, e := range errs {
					if len(firstErr[l.id]) < keepErrs {
						firstErr[l.id] = append(firstErr[l.id], e.Error())
					}
				}
				rate[l.id] = append(rate[l.id], float64(jobs)/time.Since(t0).Seconds())
			}
		}
		for _, l := range ls {
			if l.id == "bare" || l.id == "bwrap" {
				continue
			}
			r := newRow(fmt.Sprintf("serve_conc%d_%s", par, l.id), fmt.Sprintf("runs/s of `/bin/true` through %s, %d at a time", l.name, par), "runs/s", 1)
			b.fill(r, map[box][]float64{bare: rate["bare"], confine: rate[l.id], bwrap: rate["bwrap"]})
			r.Notes = fmt.Sprintf("%d runs per round, %d rounds; failures: %d", jobs, reps, fails[l.id])
			if len(firstErr[l.id]) > 0 {
				r.Notes += "; first failures: " + strings.Join(firstErr[l.id], " / ")
			}
			if b.bwrapOK {
				r.Target = "≥ bwrap's runs/s, 0 failures"
				r.Met = verdict(r.Values[confine] >= r.Values[bwrap] && fails[l.id] == 0)
			}
			r.Extra = map[string]any{"failures": fails[l.id]}
			b.add(r)
		}
	}
	return nil
}

// serveFlags are SERVE_FLAGS (e.g. "--max-runs 32"): the server's default
// cap is twice the CPUs, and a request over it waits.
func (b *bench) serveFlags() []string { return strings.Fields(b.knob("SERVE_FLAGS", "")) }

// server is a `confine serve` this bench started.
type server struct {
	sock string
	cmd  *exec.Cmd
}

// startServer starts `confine serve` (with SERVE_FLAGS) on a socket in a
// new directory name under the scratch dir, and returns once it serves.
func (b *bench) startServer(name string) (*server, error) {
	dir := filepath.Join(b.tmp, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, serve.SocketName)
	srv := exec.Command(b.confineBin, append([]string{"serve", "--socket", sock}, b.serveFlags()...)...)
	srv.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + b.home}
	errR, err := srv.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	s := &server{sock: sock, cmd: srv}
	sc := bufio.NewScanner(errR)
	if !sc.Scan() || !strings.Contains(sc.Text(), "serving uid") {
		s.stop()
		return nil, fmt.Errorf("confine serve did not start: %s", sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return s, nil
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
}

// warm are the launches of /bin/true from this process, which stays warm
// between runs: the server's protocol (what the Python client or an agent
// pays) and the library.
type warm struct{ server, library func() error }

func (b *bench) warmLaunchers(sock string) (warm, error) {
	eng, err := policy.NewEngine()
	if err != nil {
		return warm{}, err
	}
	cp, err := eng.Mint("default", "bench", 0)
	if err != nil {
		return warm{}, err
	}
	lib := &confinelib.Launcher{EventLog: filepath.Join(b.tmp, "lib-events.jsonl")}
	libSpec := spec.CommandSpec{Program: "/bin/true", Worktree: b.wd, Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, Profile: "default"}
	check := func(res spec.CommandResult, err error) error {
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d", res.ExitCode)
		}
		return err
	}
	return warm{
		server: func() error {
			c, err := serve.Dial(sock)
			if err != nil {
				return err
			}
			req := &serve.Request{Spec: libSpec, Profile: "default", EventLog: filepath.Join(b.tmp, "events.jsonl"),
				CallerEnv: map[string]string{"PATH": "/usr/bin:/bin", "HOME": b.home}}
			resp, err := serve.Do(context.Background(), c, req, nil)
			if err != nil {
				return err
			}
			if resp.Error != nil {
				return fmt.Errorf("%s: %s", resp.Error.Kind, resp.Error.Message)
			}
			return check(*resp.Result, nil)
		},
		library: func() error { return check(lib.RunCommand(context.Background(), cp, libSpec)) },
	}, nil
}
