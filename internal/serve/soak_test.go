//go:build linux

package serve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// The soak runs a server in a process of its own and hostile clients in
// others, all at once:
//   - idle: connections that never send a request, re-dialled 5 s after
//     the server drops them;
//   - deaf: clients that never read, half with a live stdout pipe they
//     leave unread ("chatty"), half never reading a 4 MiB answer ("big");
//   - large: clients sending whole requests of almost MaxRequest bytes,
//     from several processes.
//
// Meanwhile this process, an ordinary client, runs /bin/true through the
// server one run after another, as it did on the idle server before the
// attack and does again after it (the idle figure is both together, so
// that a machine whose load drifts during the soak shows in both).
// Every one of its runs must succeed, the server must stay up and under
// soakMemoryBound; the latencies are reported (and written to
// $CONFINE_SOAK_REPORT), never asserted. $CONFINE_SOAK=full runs the
// figures of docs/server.md (30,000 idle connections); without it the
// same mix runs smaller. $CONFINE_SOAK_MIX (default "idle,deaf,large")
// picks the attackers.

// soakRole is the environment variable that makes the test binary a
// soak process ("server", "idle", "deaf", "large").
const soakRole = "CONFINE_SOAK_ROLE"

// soakMemoryBound is the peak RSS the server must stay under (docs/server.md).
const soakMemoryBound = 384 << 20

type soakScale struct {
	name                   string
	idle, idleProcs        int
	deaf, large, largeSize int
	largeProcs             int
	// runs under attack; idleRuns on the idle server, half before the
	// attack and half after; gap between two runs, so that the runs
	// under attack span the floods' waves (idle clients come back 5 s
	// after each drop) and their request timeout (30 s).
	runs, idleRuns int
	gap            time.Duration
}

var soakScales = map[string]soakScale{
	"":     {name: "small", idle: 2000, idleProcs: 4, deaf: 10, large: 40, largeSize: 1 << 20, largeProcs: 4, runs: 100, idleRuns: 100},
	"full": {name: "full", idle: 30000, idleProcs: 20, deaf: 10, large: 40, largeSize: MaxRequest - 64, largeProcs: 8, runs: 1000, idleRuns: 1000, gap: 25 * time.Millisecond},
}

func TestSoak(t *testing.T) {
	if role := os.Getenv(soakRole); role != "" {
		soakChild(role)
		return
	}
	sc, ok := soakScales[os.Getenv("CONFINE_SOAK")]
	if !ok {
		t.Fatalf("CONFINE_SOAK=%q: want unset or full", os.Getenv("CONFINE_SOAK"))
	}
	t.Logf("soak scale %s (CONFINE_SOAK=full for the figures of docs/server.md): %d idle connections in %d processes, %d deaf clients, %d clients of %d-byte requests in %d processes, %d runs under attack, %d idle, %v apart",
		sc.name, sc.idle, sc.idleProcs, sc.deaf, sc.large, sc.largeSize, sc.largeProcs, sc.runs, sc.idleRuns, sc.gap)
	socket := filepath.Join(privDir(t), SocketName)
	child := func(role string, extra ...string) (*exec.Cmd, *bufio.Reader) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSoak$")
		cmd.Env = append(os.Environ(), soakRole+"="+role, "CONFINE_SOAK_SOCKET="+socket)
		cmd.Env = append(cmd.Env, extra...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		r := bufio.NewReader(out)
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "ready") {
			t.Fatalf("%s process: %q, %v", role, line, err)
		}
		go func() { _, _ = io.Copy(io.Discard, r) }()
		return cmd, r
	}
	server, _ := child("server")
	// A twin server no attacker knows of: under attack, the client's
	// runs alternate between the two, so that the twin's figures show
	// what the machine's load (other jobs, the attackers' own processes)
	// costs a run at the same moments, apart from the attacked server.
	twinSocket := filepath.Join(privDir(t), SocketName)
	child("server", "CONFINE_SOAK_SOCKET="+twinSocket)
	pid := server.Process.Pid

	idleBefore, idleDials := soakRuns(t, socket, sc.idleRuns/2, sc.gap)
	idleRSS := procFigure(pid, "VmRSS")
	idleFDs := procFDs(pid)

	mix := os.Getenv("CONFINE_SOAK_MIX")
	if mix == "" {
		mix = "idle,deaf,large"
	}
	kinds := strings.Split(mix, ",")
	var attackers []*exec.Cmd
	for i := range sc.idleProcs {
		if !slices.Contains(kinds, "idle") {
			break
		}
		n := sc.idle / sc.idleProcs
		if i < sc.idle%sc.idleProcs {
			n++
		}
		c, _ := child("idle", "CONFINE_SOAK_N="+strconv.Itoa(n))
		attackers = append(attackers, c)
	}
	if slices.Contains(kinds, "deaf") {
		c, _ := child("deaf", "CONFINE_SOAK_N="+strconv.Itoa(sc.deaf))
		attackers = append(attackers, c)
	}
	// Large requests come from several processes, so that pacing per
	// process is not the whole defence.
	for i := range sc.largeProcs {
		if !slices.Contains(kinds, "large") {
			break
		}
		n := sc.large / sc.largeProcs
		if i < sc.large%sc.largeProcs {
			n++
		}
		c, _ := child("large", "CONFINE_SOAK_N="+strconv.Itoa(n), "CONFINE_SOAK_SIZE="+strconv.Itoa(sc.largeSize))
		attackers = append(attackers, c)
	}
	// Let the floods reach the caps.
	time.Sleep(3 * time.Second)

	// The server's descriptors, once a second: listing thousands in
	// /proc costs this process (the ordinary client) CPU.
	var maxFDs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if n := int64(procFDs(pid)); n > maxFDs.Load() {
				maxFDs.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	cpu0, t0 := procCPU(pid), time.Now()
	loaded, loadedDials, twin := soakRunsTwin(t, socket, twinSocket, sc.runs, sc.gap)
	cpu, wall := procCPU(pid)-cpu0, time.Since(t0)
	close(stop)
	wg.Wait()
	hwm := procFigure(pid, "VmHWM")

	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the server process is gone: %v", err)
	}
	if _, err := os.Stat(socket); err != nil {
		t.Fatalf("the server's socket: %v", err)
	}
	for _, a := range attackers {
		_ = a.Process.Kill()
		_ = a.Wait()
	}
	// The attackers' connections close with them: the server drops
	// them, and is idle again.
	for end := time.Now().Add(30 * time.Second); procFDs(pid) > idleFDs+16 && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
	}
	idleAfter, idleDials2 := soakRuns(t, socket, sc.idleRuns-sc.idleRuns/2, sc.gap)
	idle := slices.Sorted(slices.Values(append(slices.Clone(idleBefore), idleAfter...)))
	idleDials = slices.Sorted(slices.Values(append(idleDials, idleDials2...)))
	if hwm > soakMemoryBound {
		t.Errorf("server peak RSS %d MiB, over the documented bound of %d MiB", hwm>>20, soakMemoryBound>>20)
	}
	report := fmt.Sprintf("soak (%s, attackers %s): %d idle connections (%d processes), %d deaf clients, %d clients sending %d-byte requests (%d processes); ordinary client, sequential runs of /bin/true %v apart, %d under attack and %d on the idle server (half before the attack, half after):\n"+
		"  idle server:   p50 %v  p99 %v  max %v  (connect p99 %v; before the attack p50 %v p99 %v, after it p50 %v p99 %v)\n"+
		"  under attack:  p50 %v  p99 %v  max %v  (connect p99 %v, max %v)\n"+
		"  p99 ratio %.2fx (target <= 2x)\n"+
		"  twin idle server, its runs alternating with those under attack: p50 %v  p99 %v  max %v; p99 ratio of the attacked server to it %.2fx\n"+
		"  server: RSS idle %d MiB, peak %d MiB (bound %d MiB), at most %d descriptors open, CPU under attack %.0f%% of one core; still serving at the end\n",
		sc.name, mix, sc.idle, sc.idleProcs, sc.deaf, sc.large, sc.largeSize, sc.largeProcs, sc.gap, sc.runs, sc.idleRuns,
		pct(idle, 50), pct(idle, 99), idle[len(idle)-1], pct(idleDials, 99), pct(idleBefore, 50), pct(idleBefore, 99), pct(idleAfter, 50), pct(idleAfter, 99),
		pct(loaded, 50), pct(loaded, 99), loaded[len(loaded)-1], pct(loadedDials, 99), loadedDials[len(loadedDials)-1],
		float64(pct(loaded, 99))/float64(pct(idle, 99)),
		pct(twin, 50), pct(twin, 99), twin[len(twin)-1], float64(pct(loaded, 99))/float64(pct(twin, 99)),
		idleRSS>>20, hwm>>20, soakMemoryBound>>20, maxFDs.Load(), 100*cpu.Seconds()/wall.Seconds())
	t.Log(report)
	if p := os.Getenv("CONFINE_SOAK_REPORT"); p != "" {
		if err := os.WriteFile(p, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// soakRunsTwin runs n runs through the server at socket, and between
// each two, one through the server at twin; the latencies, sorted.
func soakRunsTwin(t *testing.T, socket, twin string, n int, gap time.Duration) (ds, dials, twins []time.Duration) {
	t.Helper()
	for range n {
		d, dial := soakRuns(t, socket, 1, gap)
		ds, dials = append(ds, d...), append(dials, dial...)
		d, _ = soakRuns(t, twin, 1, gap)
		twins = append(twins, d...)
	}
	slices.Sort(ds)
	slices.Sort(dials)
	slices.Sort(twins)
	return ds, dials, twins
}

// soakRuns runs /bin/true through the server n times, one after another
// with gap between them, and returns the latencies, sorted. Every run
// must succeed.
func soakRuns(t *testing.T, socket string, n int, gap time.Duration) (ds, dials []time.Duration) {
	t.Helper()
	for i := range n {
		time.Sleep(gap)
		start := time.Now()
		c, err := Dial(socket)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		dials = append(dials, time.Since(start))
		r, err := Do(context.Background(), c, &Request{Spec: spec.CommandSpec{Program: "true"}}, nil)
		if err != nil || r.Error != nil || r.Result == nil || r.Result.ExitCode != 0 {
			t.Fatalf("run %d: %+v, %v", i, r, err)
		}
		d := time.Since(start)
		if d > time.Second {
			// A stall: when, and how much of it was the connect.
			t.Logf("slow run at %s: %v, of which connect %v", start.Format("15:04:05.000"), d, dials[len(dials)-1])
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	slices.Sort(dials)
	return ds, dials
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)].Round(10 * time.Microsecond)
}

// procFDs is how many descriptors process pid holds (0 when unreadable).
func procFDs(pid int) int {
	es, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(es)
}

// procFigure is a /proc/PID/status figure in bytes (0 when unreadable).
func procFigure(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procCPU is the CPU time (user and system) process pid used so far (0
// when unreadable).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which ends in the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	// USER_HZ is 100 on every Linux port Go supports.
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// soakChild is one soak process; it never returns (the test kills it).
func soakChild(role string) {
	socket := os.Getenv("CONFINE_SOAK_SOCKET")
	n, _ := strconv.Atoi(os.Getenv("CONFINE_SOAK_N"))
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	switch role {
	case "server":
		soakServer(socket)
	case "idle":
		soakClients(n, func(int) {
			c, err := net.Dial("unix", socket)
			if err != nil {
				// The backlog is full (EAGAIN): try again.
				time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
				return
			}
			// Held until the server drops it (its cap, its request
			// timeout); then back, 5 s later.
			_, _ = io.Copy(io.Discard, c)
			c.Close()
			time.Sleep(5 * time.Second)
		})
	case "deaf":
		soakClients(n, func(i int) {
			c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				return
			}
			defer c.Close()
			if i%2 == 0 {
				pr, pw, err := os.Pipe()
				if err != nil {
					return
				}
				defer pr.Close()
				_, _, _ = c.WriteMsgUnix(frame(`{"version":1,"spec":{"Program":"chatty"},"files":["stdout"]}`), syscallRights(pw), nil)
				pw.Close()
			} else {
				_, _ = c.Write(frame(`{"version":1,"spec":{"Program":"big"}}`))
			}
			time.Sleep(15 * time.Second)
		})
	case "large":
		size, _ := strconv.Atoi(os.Getenv("CONFINE_SOAK_SIZE"))
		body := `{"version":1,"spec":{"Program":"true"}}`
		req := frame(body + strings.Repeat(" ", size-len(body)))
		soakClients(n, func(int) {
			c, err := net.Dial("unix", socket)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				return
			}
			_, _ = c.Write(req)
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		})
	}
	os.Exit(2)
}

func syscallRights(f *os.File) []byte {
	return syscall.UnixRights(int(f.Fd()))
}

// soakClients runs n loops of one client each, after saying ready.
func soakClients(n int, client func(i int)) {
	fmt.Println("ready")
	for i := range n {
		go func() {
			for {
				client(i)
			}
		}()
	}
	select {}
}

// soakServer serves the soak's handler with the server's defaults.
func soakServer(socket string) {
	h := func(ctx context.Context, req *Request, files Files) Response {
		switch req.Spec.Program {
		case "chatty":
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for files.Out != nil {
				if _, err := files.Out.Write(chunk); err != nil {
					break
				}
			}
			<-ctx.Done()
			return Response{Result: &spec.CommandResult{RunID: "r", Cancelled: true}}
		case "big":
			out := bytes.Repeat([]byte("y"), 4<<20)
			return Response{Result: &spec.CommandResult{RunID: "r", Stdout: spec.Stream{Head: out, Total: int64(len(out))}}}
		}
		err := exec.CommandContext(ctx, "/bin/true").Run()
		code := 0
		if err != nil {
			code = 1
		}
		return Response{Result: &spec.CommandResult{RunID: "r", ExitCode: code}}
	}
	SetProcessMemoryLimit()
	s := &Server{Socket: socket, Handler: h, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ln, err := s.Listen()
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fmt.Println("ready")
	if err := s.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// BenchmarkStartWithHeldConns starts /bin/true with os/exec (a fork of
// this process, as the soak's handler does) while the process holds n
// connected unix sockets, as a server under attack holds its clients'
// connections: the fork copies the descriptor table and the exec closes
// it again. docs/server.md has the figures.
func BenchmarkStartWithHeldConns(b *testing.B) {
	for _, n := range []int{0, 1024, 2064} {
		b.Run(fmt.Sprintf("held=%d", n), func(b *testing.B) {
			var rl syscall.Rlimit
			if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < uint64(n+64) {
				b.Skipf("RLIMIT_NOFILE %d is under %d descriptors (%v)", rl.Cur, n+64, err)
			}
			for range n / 2 {
				fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { syscall.Close(fds[0]); syscall.Close(fds[1]) })
			}
			for b.Loop() {
				if err := exec.Command("/bin/true").Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
