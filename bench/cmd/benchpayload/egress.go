//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// egressClient is an HTTPS client that goes through the proxy the
// environment names (HTTPS_PROXY), if any, and otherwise straight to
// 127.0.0.1 for every name (the benchmark's server stands in for them),
// or to $BENCH_EGRESS_SERVER (the link-limited rows' server, in a network
// namespace the bench made). One connection per request: the measure is
// the connection.
func egressClient() *http.Client {
	c, _ := egressClientDials()
	return c
}

// egressClientDials is egressClient with the total time its dials took
// (socket and connect: under confine, the supervisor's part).
func egressClientDials() (*http.Client, *atomic.Int64) {
	var d net.Dialer
	var dialNs atomic.Int64
	server := os.Getenv("BENCH_EGRESS_SERVER")
	if server == "" {
		server = "127.0.0.1"
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyFromEnvironment,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, port, err := net.SplitHostPort(addr); err == nil && !strings.HasPrefix(host, "127.") {
				addr = net.JoinHostPort(server, port)
			}
			t0 := time.Now()
			c, err := d.DialContext(ctx, network, addr)
			dialNs.Add(time.Since(t0).Nanoseconds())
			return c, err
		},
	}}, &dialNs
}

// download GETs url once and reads the body; it reports the bytes and
// the time from the request to the last byte.
func download(want int64, url string) (any, error) {
	c := egressClient()
	t0 := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil {
		return nil, err
	}
	if n != want {
		return nil, fmt.Errorf("read %d bytes, want %d", n, want)
	}
	// Its own CPU (TLS and the socket reads), to put beside the server's
	// and the proxy's.
	return map[string]any{"bytes": n, "ns": d.Nanoseconds(), "cpu_ms": rusageCPU(unix.RUSAGE_SELF)}, nil
}

// conns makes n requests on fresh connections, par at a time, and
// reports the mean time per request of one worker.
func conns(n, par int, url string) (any, error) {
	c, dialNs := egressClientDials()
	var wg sync.WaitGroup
	errs := make(chan error, par)
	per := n / par
	if per < 1 {
		per = 1
	}
	t0 := time.Now()
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				resp, err := c.Get(url)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return map[string]any{"requests": per * par, "ns_per_request": float64(d.Nanoseconds()) / float64(per),
		"dial_ns_per_request": float64(dialNs.Load()) / float64(per*par)}, nil
}
