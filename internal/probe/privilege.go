package probe

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// vPrivilege looks for privilege the process could still use or gain: any
// capability in its effective, permitted, inheritable, ambient or bounding
// set, or no no_new_privs (a set-user-ID program would then raise it). It
// escapes when any is present: the unconfined control always has the full
// bounding set and no no_new_privs.
func vPrivilege([]string) result {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return blocked("read /proc/self/status", err)
	}
	var held []string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb":
			if strings.Trim(v, "0") != "" {
				held = append(held, k+"="+v)
			}
		case "NoNewPrivs":
			if v != "1" {
				held = append(held, "NoNewPrivs="+v)
			}
		}
	}
	// Cross-check the status file with the kernel's own answer.
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err == nil && nnp != 1 {
		held = append(held, fmt.Sprintf("PR_GET_NO_NEW_PRIVS=%d", nnp))
	}
	if len(held) > 0 {
		return escaped("privilege held: %s", strings.Join(held, " "))
	}
	return blockedf("no capability in any set, no_new_privs set")
}
