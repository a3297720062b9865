// Package escape is confine's escape suite: it holds no library code, only
// tests.
//
// Every vector runs twice per user (root, and uid 65534 when the tests run
// as root; the rows bounded by RLIMIT_NPROC, which counts a uid's tasks
// host-wide, run as a uid no other process has instead, vcase.ownUID)
// against a fixture the test creates: first the probe program
// (escape/probe) unconfined, the control, which must really escape (and the
// harness checks the effect: the listener got the byte, the file changed,
// the process was signalled); then the same attempt under `confine run`,
// which must not escape, with the harness checking that the effect did not
// happen. A vector whose control does not escape on this host is skipped
// with the reason, never passed. functional_test.go checks the other side:
// real work (shells, compilers, interpreters, sockets inside the work
// directory) still runs in the default profile.
package escape
