//go:build linux

package host

import (
	"os"
	"strings"
)

// appArmorUserNS is Ubuntu's switch (23.10+): unprivileged processes
// without an AppArmor profile granting "userns" may create a user
// namespace, but it holds no capabilities, so every mount in it fails.
const appArmorUserNS = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"

// UserNSRestriction names what restricts user namespaces for this process
// beyond the clone itself, or "": a namespace set-up that fails after a
// successful clone is then explained by it rather than reported bare.
func UserNSRestriction() string {
	return userNSRestriction(appArmorUserNS, os.Geteuid())
}

func userNSRestriction(path string, euid int) string {
	if euid == 0 {
		// CAP_SYS_ADMIN in the initial namespace is exempt.
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return ""
	}
	return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1): the clone succeeds but the namespace holds no capabilities"
}

// ExplainNamespaceFailure adds what restricts user namespaces here, when
// something does, to a namespace set-up failure.
func ExplainNamespaceFailure(msg string) string {
	if r := UserNSRestriction(); r != "" {
		return msg + "; " + r
	}
	return msg
}
