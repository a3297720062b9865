//go:build linux

package probe

import (
	"strings"
	"syscall"
)

// gateMarker is the progress line an isolated child writes right before
// its first system call through a foreign ABI's entry (INT $0x80). Seeing it
// as the child's last progress, with a SIGSEGV crash after it, tells that
// the entry itself faulted.
const gateMarker = "entering the i386 system call gate (INT $0x80)"

// gateVectors are the isolated vectors whose entry into the kernel can be
// missing on a host that otherwise has the feature: a kernel built with
// IA32 emulation but booted with ia32_emulation=0 (or built with
// IA32_EMULATION_DEFAULT_DISABLED) turns INT $0x80 into a general
// protection fault, delivered as SIGSEGV, before seccomp ever sees a call.
var gateVectors = map[string]bool{"socketcall32": true}

// gateMissing reads the death of an isolated child: when vector's entry
// faulted (SIGSEGV right after gateMarker) the host lacks the vector and
// the answer is n/a with the reason. A seccomp filter kills or traps with
// SIGSYS, never SIGSEGV, so this cannot hide a sandbox's block; and n/a in
// a confined run counts as blocked anyway (see the package comment).
func gateMissing(vector, stderr string, ws syscall.WaitStatus) (result, bool) {
	if !gateVectors[vector] || !strings.Contains(stderr, gateMarker) {
		return result{}, false
	}
	var how string
	switch {
	case ws.Signaled() && ws.Signal() == syscall.SIGSEGV:
		how = "the child was killed by SIGSEGV"
	case ws.Exited() && strings.Contains(stderr, "signal SIGSEGV"):
		// The Go runtime turns the fault into a crash: exit 2 and a
		// "[signal SIGSEGV: segmentation violation ...]" line.
		how = "the child crashed with SIGSEGV"
	default:
		return result{}, false
	}
	return na("INT $0x80 faulted (%s) before reaching any system call: this host has no i386 system call gate (IA32 emulation off, e.g. booted with ia32_emulation=0)", how), true
}
