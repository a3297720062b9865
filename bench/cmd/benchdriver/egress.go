//go:build linux

package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// egressHandler answers GET /?n=N with N bytes.
func egressHandler() http.Handler {
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		for n > 0 {
			k := min(n, len(chunk))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
}

// egressRun is one payload run of an egress measure: its JSON figures,
// and the CPU (ms) this process (the server) and the confine CLI (the
// launcher with its proxy; the command is not its child) spent on it.
type egressRun struct {
	m                    map[string]float64
	serverCPU, launchCPU float64
}

// egressRunner returns a function that runs the payload bare or under
// confine with profile prof; wrap, when set, is a command line that runs
// it (nsenter into a network namespace).
func (b *bench) egressRunner(prof, ca string, wrap []string, env ...string) func(x box, argv ...string) (egressRun, error) {
	o := opts{env: append([]string{"SSL_CERT_FILE=" + ca}, env...), confine: []string{"--json", "--profile", prof}}
	return func(x box, argv ...string) (egressRun, error) {
		c := b.command(x, o, append([]string{b.payload}, argv...)...)
		if len(wrap) > 0 {
			c.Path, c.Args = wrap[0], append(append([]string(nil), wrap...), c.Args...)
		}
		var so, se bytes.Buffer
		c.Stdout, c.Stderr = &so, &se
		cpu0 := selfCPU()
		if err := c.Run(); err != nil {
			return egressRun{}, fmt.Errorf("egress %s %v: %v: %s", x, argv, err, lastLines(se.String(), 3))
		}
		r := egressRun{serverCPU: selfCPU() - cpu0}
		out := so.Bytes()
		if x == confine {
			r.launchCPU = float64((c.ProcessState.UserTime() + c.ProcessState.SystemTime()).Microseconds()) / 1e3
			var res struct {
				ExitCode int `json:"exit_code"`
				Stdout   struct {
					Head string `json:"head"`
				} `json:"stdout"`
			}
			if err := json.Unmarshal(out, &res); err != nil || res.ExitCode != 0 {
				return egressRun{}, fmt.Errorf("egress confine %v: exit %d, %v: %s", argv, res.ExitCode, err, lastLines(so.String(), 3))
			}
			out = []byte(res.Stdout.Head)
		}
		if err := json.Unmarshal(out, &r.m); err != nil {
			return egressRun{}, fmt.Errorf("egress %s %v: %v: %q", x, argv, err, out)
		}
		return r, nil
	}
}

// selfCPU is this process's CPU time in ms: the benchmark's HTTPS server
// runs here.
func selfCPU() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// egressProfile writes a profile that allows bench.test:port, pinned to
// addr (a special address the profile names).
func (b *bench) egressProfile(name string, port int, addr string) (string, error) {
	prof := filepath.Join(b.tmp, name+".toml")
	return prof, os.WriteFile(prof, []byte(fmt.Sprintf(`name = %q
network = "allowlist"
[allowlist]
hosts = ["bench.test:%d"]
special_addresses = ["%s/32"]
[allowlist.resolve]
"bench.test" = [%q]
`, name, port, addr, addr)), 0o644)
}

// egress measures network = "allowlist" (issue 11): the payload fetches
// over HTTPS from a server on loopback, bare straight to it and confined
// through the egress proxy (the supervisor's connect, the CONNECT, the
// ClientHello check, the relay). Both do the same TLS, so the ratio is
// the proxy's cost. bwrap has no proxy: its column is n/a. Then the same
// download over a rate-limited link between two network namespaces
// (egressLink).
func (b *bench) egress() error {
	size := b.knobInt("EGRESS_BYTES", 1<<30)
	reps := b.knobInt("EGRESS_REPS", 3)
	nconn := b.knobInt("EGRESS_CONNS", 256)
	cert, _, caPEM, err := testutil.TLSCertificate("bench.test")
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: egressHandler(), TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ca := filepath.Join(b.wd, "egress-ca.pem")
	if err := os.WriteFile(ca, caPEM, 0o644); err != nil {
		return err
	}
	prof, err := b.egressProfile("egress-bench", port, "127.0.0.1")
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://bench.test:%d/", port)
	payload := b.egressRunner(prof, ca, nil)
	tput, conn1, conn64 := map[box][]float64{}, map[box][]float64{}, map[box][]float64{}
	// The dial's part of a connection (socket and connect: under
	// confine, the supervisor's two notifications), ms.
	dial1, dial64 := map[box][]float64{}, map[box][]float64{}
	// CPU ms per GiB of each party of the download.
	srvCPU, cliCPU, proxyCPU := map[box][]float64{}, map[box][]float64{}, []float64{}
	gib := float64(size) / (1 << 30)
	for i := 0; i < reps; i++ {
		for _, k := range rand.Perm(2) {
			x := []box{bare, confine}[k]
			r, err := payload(x, "download", strconv.Itoa(size), url+"?n="+strconv.Itoa(size))
			if err != nil {
				return err
			}
			tput[x] = append(tput[x], gib/(r.m["ns"]/1e9))
			srvCPU[x] = append(srvCPU[x], r.serverCPU/gib)
			cliCPU[x] = append(cliCPU[x], r.m["cpu_ms"]/gib)
			if x == confine {
				proxyCPU = append(proxyCPU, r.launchCPU/gib)
			}
			if r, err = payload(x, "conns", strconv.Itoa(nconn), "1", url+"?n=2"); err != nil {
				return err
			}
			conn1[x] = append(conn1[x], r.m["ns_per_request"]/1e6)
			dial1[x] = append(dial1[x], r.m["dial_ns_per_request"]/1e6)
			if r, err = payload(x, "conns", strconv.Itoa(max(nconn, 64)*4), "64", url+"?n=2"); err != nil {
				return err
			}
			// The batch's wall time over its connections: the cost of a
			// connection when 64 share the machine (a single request's
			// latency there is mostly queueing for the CPUs).
			conn64[x] = append(conn64[x], r.m["ns_per_request"]/1e6/64)
			dial64[x] = append(dial64[x], r.m["dial_ns_per_request"]/1e6)
		}
	}
	r := newRow("egress_download", fmt.Sprintf("egress: HTTPS download of %.3g GiB over loopback, through the proxy vs direct", gib), "GiB/s", 2)
	r.hide[bwrap] = true
	r.Text[bwrap] = "n/a (no proxy)"
	b.fill(r, tput)
	r.Target = "≥ 0.9x"
	r.Met = verdict(r.Ratio[confine] >= 0.9)
	flagNoise(r, 0.9, true)
	bareCPU := median(srvCPU[bare]) + median(cliCPU[bare])
	confCPU := median(srvCPU[confine]) + median(cliCPU[confine]) + median(proxyCPU)
	r.Notes = fmt.Sprintf("%d runs; one connection; timed by the payload from the request to the last byte; both sides do the same TLS; "+
		"CPU ms per GiB (medians): direct: server %.0f + client %.0f = %.0f; through the proxy: server %.0f + client %.0f + launcher with the proxy (its launch included) %.0f = %.0f "+
		"(%.2fx the CPU: on loopback every byte crosses the TCP stack twice, and with 2 cores busy the rate follows the CPU)",
		reps, median(srvCPU[bare]), median(cliCPU[bare]), bareCPU,
		median(srvCPU[confine]), median(cliCPU[confine]), median(proxyCPU), confCPU, confCPU/bareCPU)
	r.Extra = addExtra(r.Extra, "cpu_ms_per_gib", map[string]any{
		"bare_server": srvCPU[bare], "bare_client": cliCPU[bare],
		"confine_server": srvCPU[confine], "confine_client": cliCPU[confine], "confine_launcher": proxyCPU})
	b.add(r)
	for _, c := range []struct {
		id   string
		par  int
		vals map[box][]float64
		dial map[box][]float64
	}{{"egress_conn_1", 1, conn1, dial1}, {"egress_conn_64", 64, conn64, dial64}} {
		name := "egress: time per HTTPS request on a fresh connection, one at a time"
		if c.par > 1 {
			name = fmt.Sprintf("egress: wall time per HTTPS request on a fresh connection, %d at a time (batch wall / requests)", c.par)
		}
		r := newRow(c.id, name, "ms", 3)
		r.hide[bwrap] = true
		r.Text[bwrap] = "n/a (no proxy)"
		b.fill(r, c.vals)
		d := r.Values[confine] - r.Values[bare]
		r.Target = "≤ +1 ms per connection"
		r.Met = verdict(d <= 1)
		r.Notes = fmt.Sprintf("%d runs; each request a new TCP connection and TLS handshake (2-byte body); confine − bare = %+.3f ms; "+
			"the dial alone (socket and connect; under confine the supervisor's two notifications, to the proxy), mean per connection: bare %.3f ms, confine %.3f ms",
			reps, d, median(c.dial[bare]), median(c.dial[confine]))
		r.Extra = addExtra(r.Extra, "confine_minus_bare_ms", d)
		b.add(r)
	}
	return b.egressLink(cert, ca, reps)
}

// egressLink is the download over a link of a given rate: the server in
// one network namespace, the client (bare, or confine's launcher with
// its proxy) in another, joined by a veth pair shaped by tbf on both
// ends. Loopback on 2 cores is CPU-bound, where a relay doubles the
// network stack's work; a real link is usually the bottleneck instead.
// Root only; only the namespaces and addresses made here are used, and
// they are deleted by name afterwards.
func (b *bench) egressLink(cert tls.Certificate, ca string, reps int) error {
	rates := b.knob("EGRESS_LINK_RATES", "1gbit,200mbit")
	secs := b.knobInt("EGRESS_LINK_SECS", 3)
	var list []string
	for _, s := range bytes.Split([]byte(rates), []byte(",")) {
		if s := string(bytes.TrimSpace(s)); s != "" {
			list = append(list, s)
		}
	}
	skip := func(why string) error {
		fmt.Fprintf(os.Stderr, "bench: egress link rows skipped: %s\n", why)
		for _, rate := range list {
			r := newRow("egress_link_"+rate, "egress: HTTPS download over a "+rate+" link between two network namespaces, through the proxy vs direct", "MiB/s", 1)
			r.Met = "n/a"
			r.Notes = "skipped: " + why
			b.add(r)
		}
		return nil
	}
	if os.Geteuid() != 0 {
		return skip("needs root (network namespaces, a veth pair and tbf)")
	}
	for _, t := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(t); err != nil {
			return skip(t + " is not installed")
		}
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return skip("nsenter is not installed")
	}
	l, err := newLink(os.Getpid())
	if err != nil {
		return skip(err.Error())
	}
	defer l.close()
	if err := l.shape(list[0]); err != nil {
		return skip(err.Error())
	}
	ln, err := l.listen()
	if err != nil {
		return skip(err.Error())
	}
	srv := &http.Server{Handler: egressHandler(), TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	prof, err := b.egressProfile("egress-link", port, linkServer)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://bench.test:%d/", port)
	payload := b.egressRunner(prof, ca, []string{nsenter, "--net=/run/netns/" + l.cli, "--"}, "BENCH_EGRESS_SERVER="+linkServer)
	for _, rate := range list {
		if err := l.shape(rate); err != nil {
			return err
		}
		bits, err := rateBits(rate)
		if err != nil {
			return err
		}
		size := max(int(bits/8*float64(secs))>>20<<20, 1<<20)
		tput := map[box][]float64{}
		for i := 0; i < reps; i++ {
			for _, k := range rand.Perm(2) {
				x := []box{bare, confine}[k]
				r, err := payload(x, "download", strconv.Itoa(size), url+"?n="+strconv.Itoa(size))
				if err != nil {
					return err
				}
				tput[x] = append(tput[x], float64(size)/(1<<20)/(r.m["ns"]/1e9))
			}
		}
		r := newRow("egress_link_"+rate, fmt.Sprintf("egress: HTTPS download of %d MiB over a %s link between two network namespaces, through the proxy vs direct", size>>20, rate), "MiB/s", 1)
		r.hide[bwrap] = true
		r.Text[bwrap] = "n/a (no proxy)"
		b.fill(r, tput)
		r.Target = "≥ 0.9x"
		r.Met = verdict(r.Ratio[confine] >= 0.9)
		flagNoise(r, 0.9, true)
		r.Notes = fmt.Sprintf("%d runs; veth pair between two network namespaces the bench made, tbf at %s (%.1f MiB/s) on both ends; "+
			"the client (bare, or confine's launcher and proxy) in one, the server in the other", reps, rate, bits/8/(1<<20))
		b.add(r)
	}
	return nil
}
