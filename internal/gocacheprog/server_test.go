//go:build linux

package gocacheprog

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// client speaks go's side of the protocol to a Server over a pipe.
type client struct {
	t   *testing.T
	w   io.Writer
	dec *json.Decoder
	id  int64
}

func newClient(t *testing.T, s *Server) *client {
	a, b := net.Pipe()
	go func() { _ = s.Serve(b, b); b.Close() }()
	t.Cleanup(func() { a.Close() })
	c := &client{t: t, w: a, dec: json.NewDecoder(bufio.NewReader(a))}
	var hello response
	if err := c.dec.Decode(&hello); err != nil || len(hello.KnownCommands) != 3 {
		t.Fatalf("hello: %+v, %v", hello, err)
	}
	return c
}

func (c *client) do(req request, body []byte) response {
	c.t.Helper()
	c.id++
	req.ID = c.id
	if body != nil {
		req.BodySize = int64(len(body))
	}
	line, _ := json.Marshal(req)
	msg := string(line) + "\n\n" // as go writes it
	if len(body) > 0 {
		msg += `"` + base64.StdEncoding.EncodeToString(body) + "\"\n"
	}
	go func() { _, _ = io.WriteString(c.w, msg) }()
	var res response
	if err := c.dec.Decode(&res); err != nil || res.ID != c.id {
		c.t.Fatalf("%s: %+v, %v", req.Command, res, err)
	}
	return res
}

func id(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

// tree lists everything under root with its content.
func tree(t *testing.T, root string) string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		line := strings.TrimPrefix(p, root) + " " + info.Mode().String()
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// callerEntry writes an entry in go's own cache layout into dir.
func callerEntry(t *testing.T, dir string, action []byte, body string) []byte {
	t.Helper()
	out := id(body)
	for name, content := range map[string]string{
		entryName(out, "-d"):    body,
		entryName(action, "-a"): fmt.Sprintf("v1 %x %x %20d %20d\n", action, out, len(body), 1),
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestServer(t *testing.T) {
	own, caller := t.TempDir(), t.TempDir()
	inCaller := id("in the caller's cache")
	callerOut := callerEntry(t, caller, inCaller, "compiled by the caller")
	before := tree(t, caller)
	s, err := Start(filepath.Join(t.TempDir(), SocketName), own, caller, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newClient(t, s)

	cases := []struct {
		name   string
		req    request
		body   []byte
		miss   bool
		err    string
		output []byte
		want   string // the DiskPath's content
	}{
		{name: "miss", req: request{Command: "get", ActionID: id("nowhere")}, miss: true},
		{name: "read through", req: request{Command: "get", ActionID: inCaller}, output: callerOut, want: "compiled by the caller"},
		{name: "put", req: request{Command: "put", ActionID: id("a1"), OutputID: id("built in the run")}, body: []byte("built in the run"),
			output: id("built in the run"), want: "built in the run"},
		{name: "get what was put", req: request{Command: "get", ActionID: id("a1")}, output: id("built in the run"), want: "built in the run"},
		{name: "put empty", req: request{Command: "put", ActionID: id("a2"), OutputID: id("")}, body: []byte{}, output: id(""), want: ""},
		{name: "put a body that is not its output id", req: request{Command: "put", ActionID: id("a3"), OutputID: id("other")}, body: []byte("lie"),
			err: "does not match"},
		{name: "the stream goes on after a refused put", req: request{Command: "get", ActionID: id("a3")}, miss: true},
		{name: "bad id", req: request{Command: "get", ActionID: []byte("short")}, err: "bad action id"},
		{name: "unknown", req: request{Command: "delete"}, err: "unknown command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := c.do(tc.req, tc.body)
			switch {
			case tc.err != "":
				if !strings.Contains(res.Err, tc.err) {
					t.Fatalf("err %q, want %q", res.Err, tc.err)
				}
				return
			case res.Err != "":
				t.Fatal(res.Err)
			case res.Miss != tc.miss:
				t.Fatalf("miss %v", res.Miss)
			case tc.miss:
				return
			}
			if string(res.OutputID) != string(tc.output) || res.Size != int64(len(tc.want)) || !strings.HasPrefix(res.DiskPath, own+"/") {
				t.Fatalf("response %+v", res)
			}
			if b, err := os.ReadFile(res.DiskPath); err != nil || string(b) != tc.want {
				t.Fatalf("DiskPath holds %q, %v", b, err)
			}
		})
	}
	if s.FromCaller() != 1 {
		t.Errorf("%d gets answered from the caller's cache, want 1", s.FromCaller())
	}
	if tree(t, caller) != before {
		t.Errorf("the caller's cache changed")
	}
	if res := c.do(request{Command: "close"}, nil); res.Err != "" {
		t.Fatal(res.Err)
	}

	// A put over the run's file-size limit ends the stream (the body is
	// not read), and nothing of it is written.
	c = newClient(t, s)
	big := make([]byte, 1<<20+1)
	line, _ := json.Marshal(request{ID: 1, Command: "put", ActionID: id("big"), OutputID: id(string(big)), BodySize: int64(len(big))})
	go func() {
		_, _ = io.WriteString(c.w, string(line)+"\n\n\""+base64.StdEncoding.EncodeToString(big)+"\"\n")
	}()
	var res response
	if err := c.dec.Decode(&res); err == nil {
		t.Errorf("a put over the limit was answered: %+v", res)
	}
	if _, err := os.Lstat(filepath.Join(own, entryName(id(string(big)), "-d"))); err == nil {
		t.Errorf("a put over the limit was written")
	}
}

// A run that replaces a subdirectory of its cache by a symlink into the
// caller's cache, or a file there by a symlink, does not turn the
// server's writes into writes there.
func TestServerPlantedSymlinks(t *testing.T) {
	own, caller := t.TempDir(), t.TempDir()
	body := "planted put"
	out := id(body)
	sub := entryName(out, "-d")[:2]
	if err := os.Mkdir(filepath.Join(caller, sub), 0o755); err != nil {
		t.Fatal(err)
	}
	before := tree(t, caller)
	// The output's subdirectory leads into the caller's cache.
	if err := os.Symlink(filepath.Join(caller, sub), filepath.Join(own, sub)); err != nil {
		t.Fatal(err)
	}
	s, err := Start(filepath.Join(t.TempDir(), SocketName), own, caller, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newClient(t, s)
	res := c.do(request{Command: "put", ActionID: id("x"), OutputID: out}, []byte(body))
	if res.Err == "" {
		t.Errorf("a put through a symlinked subdirectory succeeded: %+v", res)
	}
	// A file of the action's subdirectory is a symlink into the caller's.
	if err := os.Remove(filepath.Join(own, sub)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(own, sub), 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(caller, sub, "target")
	if err := os.Symlink(target, filepath.Join(own, entryName(out, "-d"))); err != nil {
		t.Fatal(err)
	}
	res = c.do(request{Command: "put", ActionID: id("x"), OutputID: out}, []byte(body))
	if res.Err != "" {
		t.Fatalf("put beside a planted symlink: %s", res.Err)
	}
	if st, err := os.Lstat(res.DiskPath); err != nil || !st.Mode().IsRegular() {
		t.Errorf("the put's file: %v, %v (want the symlink replaced by a file)", st, err)
	}
	if tree(t, caller) != before {
		t.Errorf("the caller's cache changed:\n%s", tree(t, caller))
	}
	// Control: a plain write through the same path lands there.
	if err := os.Symlink(target, filepath.Join(own, sub, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, sub, "link"), []byte(body), 0o644); err != nil || tree(t, caller) == before {
		t.Fatalf("control: a write through the symlink did not reach the caller's cache: %v", err)
	}
}
