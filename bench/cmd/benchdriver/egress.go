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
	"path/filepath"
	"strconv"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// egress measures network = "allowlist" (issue 11): the payload fetches
// over HTTPS from a server on loopback, bare straight to it and confined
// through the egress proxy (the supervisor's connect, the CONNECT, the
// ClientHello check, the splice). Both do the same TLS, so the ratio is
// the proxy's cost. bwrap has no proxy: its column is n/a.
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
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		for n > 0 {
			k := min(n, len(chunk))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ca := filepath.Join(b.wd, "egress-ca.pem")
	if err := os.WriteFile(ca, caPEM, 0o644); err != nil {
		return err
	}
	prof := filepath.Join(b.tmp, "egress-bench.toml")
	if err := os.WriteFile(prof, []byte(fmt.Sprintf(`name = "egress-bench"
network = "allowlist"
[allowlist]
hosts = ["bench.test:%d"]
special_addresses = ["127.0.0.1/32"]
[allowlist.resolve]
"bench.test" = ["127.0.0.1"]
`, port)), 0o644); err != nil {
		return err
	}
	url := fmt.Sprintf("https://bench.test:%d/", port)
	o := opts{env: []string{"SSL_CERT_FILE=" + ca}, confine: []string{"--json", "--profile", prof}}
	payload := func(x box, argv ...string) (map[string]float64, error) {
		c := b.command(x, o, append([]string{b.payload}, argv...)...)
		var so, se bytes.Buffer
		c.Stdout, c.Stderr = &so, &se
		if err := c.Run(); err != nil {
			return nil, fmt.Errorf("egress %s %v: %v: %s", x, argv, err, lastLines(se.String(), 3))
		}
		out := so.Bytes()
		if x == confine {
			var res struct {
				ExitCode int `json:"exit_code"`
				Stdout   struct {
					Head string `json:"head"`
				} `json:"stdout"`
			}
			if err := json.Unmarshal(out, &res); err != nil || res.ExitCode != 0 {
				return nil, fmt.Errorf("egress confine %v: exit %d, %v: %s", argv, res.ExitCode, err, lastLines(so.String(), 3))
			}
			out = []byte(res.Stdout.Head)
		}
		var m map[string]float64
		if err := json.Unmarshal(out, &m); err != nil {
			return nil, fmt.Errorf("egress %s %v: %v: %q", x, argv, err, out)
		}
		return m, nil
	}
	tput, conn1, conn64 := map[box][]float64{}, map[box][]float64{}, map[box][]float64{}
	for i := 0; i < reps; i++ {
		for _, k := range rand.Perm(2) {
			x := []box{bare, confine}[k]
			m, err := payload(x, "download", strconv.Itoa(size), url+"?n="+strconv.Itoa(size))
			if err != nil {
				return err
			}
			tput[x] = append(tput[x], float64(size)/(1<<30)/(m["ns"]/1e9))
			if m, err = payload(x, "conns", strconv.Itoa(nconn), "1", url+"?n=2"); err != nil {
				return err
			}
			conn1[x] = append(conn1[x], m["ns_per_request"]/1e6)
			if m, err = payload(x, "conns", strconv.Itoa(max(nconn, 64)*4), "64", url+"?n=2"); err != nil {
				return err
			}
			// The batch's wall time over its connections: the cost of a
			// connection when 64 share the machine (a single request's
			// latency there is mostly queueing for the CPUs).
			conn64[x] = append(conn64[x], m["ns_per_request"]/1e6/64)
		}
	}
	r := newRow("egress_download", fmt.Sprintf("egress: HTTPS download of %.3g GiB over loopback, through the proxy vs direct", float64(size)/(1<<30)), "GiB/s", 2)
	r.hide[bwrap] = true
	r.Text[bwrap] = "n/a (no proxy)"
	b.fill(r, tput)
	r.Target = "≥ 0.9x"
	r.Met = verdict(r.Ratio[confine] >= 0.9)
	flagNoise(r, 0.9, true)
	r.Notes = fmt.Sprintf("%d runs; one connection; timed by the payload from the request to the last byte; both sides do the same TLS", reps)
	b.add(r)
	for _, c := range []struct {
		id   string
		par  int
		vals map[box][]float64
	}{{"egress_conn_1", 1, conn1}, {"egress_conn_64", 64, conn64}} {
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
		r.Notes = fmt.Sprintf("%d runs; each request a new TCP connection and TLS handshake (2-byte body); confine − bare = %+.3f ms", reps, d)
		r.Extra = addExtra(r.Extra, "confine_minus_bare_ms", d)
		b.add(r)
	}
	return nil
}
