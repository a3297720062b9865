//go:build linux

package probe

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// netifs prints the names of the network interfaces of the probe's network
// namespace, space-separated, on one line: SIOCGIFNAME by index on an
// AF_UNIX socket, the one kind of socket a confined command may make
// (netlink, which if_nameindex(3) uses, is refused). Indexes are scanned
// until 256 in a row are unused.
func netifs() int {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "socket: %v\n", err)
		return 1
	}
	defer unix.Close(fd)
	var names []string
	for i, misses := 1, 0; misses < 256; i++ {
		ifr, err := unix.NewIfreq("")
		if err != nil {
			return 1
		}
		ifr.SetUint32(uint32(i))
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFNAME, ifr); err != nil {
			misses++
			continue
		}
		misses = 0
		names = append(names, ifr.Name())
	}
	fmt.Println(strings.Join(names, " "))
	return 0
}
