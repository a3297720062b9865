//go:build linux

package gocacheprog

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
)

// Relay is the GOCACHEPROG go starts inside the sandbox: it connects to
// the server's socket beside its own name (os.Args[0], the Arg0 symlink)
// and copies go's requests to it and its responses back. It returns the
// exit status.
func Relay() int {
	sock := filepath.Join(filepath.Dir(os.Args[0]), SocketName)
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "confine: GOCACHEPROG relay: %v\n", err)
		return 1
	}
	go func() {
		_, _ = io.Copy(c, os.Stdin)
		_ = c.CloseWrite()
	}()
	if _, err := io.Copy(os.Stdout, c); err != nil {
		fmt.Fprintf(os.Stderr, "confine: GOCACHEPROG relay: %v\n", err)
		return 1
	}
	return 0
}
