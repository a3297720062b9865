//go:build linux

// Package probe attempts exactly one sandbox-escape vector and reports what
// happened. The escape suite (escape/probe, a thin wrapper) and `confine
// selftest` (the confine binary re-executed as `confine __probe`) run it
// twice on the same host: unconfined (the control, where the attack is
// expected to work) and inside the sandbox (where it must not). The probe
// knows nothing about the sandbox.
//
// Usage:
//
//	probe VECTOR [ARGS...]
//	confine __probe VECTOR [ARGS...]
//
// It prints exactly one JSON line on stdout,
//
//	{"vector":"...","outcome":"escaped"|"blocked"|"n/a"|"error","detail":"..."}
//
// and exits with
//
//	0  escaped: the attack's effect really happened
//	1  blocked: the attack failed; detail names the errno (e.g. "connect: EPERM")
//	2  n/a: the host itself lacks the feature (a hint only, see below)
//	3  usage error ("error" outcome)
//
// n/a is a hint derived from errors that normally mean "this kernel/host does
// not have the feature" (EAFNOSUPPORT for AF_VSOCK, ENOSYS for x32, ...). A
// sandbox can produce the same errors, so applicability must be decided from
// the control run alone: a vector whose control did not escape is not
// applicable, and any non-escaped sandboxed run of an applicable vector counts
// as blocked, whatever exit code it carries.
//
// Death by seccomp. Some vectors (socketcall32, x32-syscall) are expected to
// get the process killed by the sandbox's seccomp filter (SECCOMP_RET_KILL_*
// gives SIGSYS; SECCOMP_RET_TRAP makes the Go runtime die with "SIGSYS: bad
// system call"). The probe therefore runs those attempts, and the bomb
// vectors (which may be OOM-killed or starve the runtime of threads), in a
// re-executed copy of itself (hidden subcommand "__child VECTOR ARGS...") and
// maps the child's death to outcome "blocked" with detail "killed by SIGSYS"
// (or "killed by SIGKILL", or "crashed: SIGSYS: bad system call"). If the
// probe cannot re-execute itself at all (its own path is unresolvable or
// process creation is refused), it falls back to making the attempt
// in-process; then the probe itself may die, and the harness must treat a
// probe killed by SIGSYS (or exiting without a JSON line) as blocked.
//
// Every vector but fork-bomb, memory-bomb and sleep-forever has 60 seconds
// (50 in an isolated child) to report; a hung attempt (a connect whose
// packets are dropped, a wait that never returns) is reported as blocked
// with detail "timed out after 1m0s".
//
// Network safety: only loopback (127.0.0.1, ::1) and unix sockets are ever
// used, and every target (port, socket path, pid, file) comes from ARGS.
package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Exit codes of the contract.
const (
	exitEscaped = 0
	exitBlocked = 1
	exitNA      = 2
	exitUsage   = 3
)

// Outcome strings of the contract.
const (
	outEscaped = "escaped"
	outBlocked = "blocked"
	outNA      = "n/a"
	outUsage   = "error"
)

// result is what a vector reports.
type result struct {
	outcome string
	detail  string
}

func escaped(format string, a ...any) result {
	return result{outEscaped, fmt.Sprintf(format, a...)}
}

func blockedf(format string, a ...any) result {
	return result{outBlocked, fmt.Sprintf(format, a...)}
}

// blocked reports a failed step: "op: EPERM (operation not permitted)".
func blocked(op string, err error) result {
	return result{outBlocked, op + ": " + errString(err)}
}

func na(format string, a ...any) result {
	return result{outNA, fmt.Sprintf(format, a...)}
}

func usage(format string, a ...any) result {
	return result{outUsage, fmt.Sprintf(format, a...)}
}

// errString renders err with its errno name first when there is one.
func errString(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		name := unix.ErrnoName(en)
		if name == "" {
			name = "errno " + strconv.Itoa(int(en))
		}
		return name + " (" + en.Error() + ")"
	}
	return err.Error()
}

// vector describes one subcommand.
type vector struct {
	args    string // usage of the arguments, for messages
	minArgs int
	maxArgs int // -1: unbounded
	run     func(args []string) result
}

// isolated vectors run their attempt in a re-executed child so that the
// death of the attempting process (SIGSYS, OOM kill, thread starvation) can
// still be reported as "blocked".
var isolated = map[string]bool{
	"socketcall32": true,
	"x32-syscall":  true,
	"fork-bomb":    true,
	"memory-bomb":  true,
	// The OOM kill of the attempting process is the expected outcome.
	"memory-bomb-tree":   true,
	"memory-bomb-shared": true,
	"memory-bomb-memfd":  true,
}

// vectors is the table of subcommands. It is filled in init because the
// isolated vectors re-enter it through run.
var vectors map[string]vector

func init() {
	vectors = map[string]vector{
		// network
		"tcp-connect":    {"PORT", 1, 1, vTCPConnect},
		"tcp6-connect":   {"PORT", 1, 1, vTCP6Connect},
		"udp-send":       {"PORT", 1, 1, vUDPSend},
		"tcp-listen":     {"", 0, 0, vTCPListen},
		"mptcp-connect":  {"PORT", 1, 1, vMPTCPConnect},
		"netlink":        {"", 0, 0, vNetlink},
		"vsock":          {"", 0, 0, vVsock},
		"packet":         {"", 0, 0, vPacket},
		"iouring-socket": {"PORT", 1, 1, vIOUringSocket},
		"iouring-openat": {"PATH", 1, 1, vIOUringOpenat},
		"socketcall32":   {"PORT", 1, 1, vSocketcall32},
		"x32-syscall":    {"[PORT]", 0, 1, vX32Syscall},
		"abstract-unix":  {"NAME", 1, 1, vAbstractUnix},
		"unix-connect":   {"PATH", 1, 1, vUnixConnect},
		"unix-dgram":     {"PATH", 1, 1, vUnixDgram},
		"inherited-fd":   {"FD", 1, 1, vInheritedFD},
		"netns-fd":       {"", 0, 0, vNetnsFD},
		"serve-run":      {"SOCKET WORKTREE TARGET", 3, 3, vServeRun},

		// processes
		"kill":             {"PID", 1, 1, vKill},
		"ptrace":           {"PID", 1, 1, vPtrace},
		"process-vm-readv": {"PID ADDRHEX", 2, 2, vProcessVMReadv},
		"proc-read":        {"PATH [ADDRHEX]", 1, 2, vProcRead},

		// files
		"read-file":      {"PATH", 1, 1, vReadFile},
		"write-file":     {"PATH", 1, 1, vWriteFile},
		"append-file":    {"PATH", 1, 1, vAppendFile},
		"truncate-file":  {"PATH", 1, 1, vTruncateFile},
		"chmod":          {"PATH MODE-OCTAL", 2, 2, vChmod},
		"chown":          {"PATH UID GID", 3, 3, vChown},
		"utimes":         {"PATH", 1, 1, vUtimes},
		"setxattr":       {"PATH", 1, 1, vSetxattr},
		"removexattr":    {"PATH NAME", 2, 2, vRemovexattr},
		"fchmod-ro":      {"PATH", 1, 1, vFchmodRO},
		"rename-out":     {"SRC DST", 2, 2, vRenameOut},
		"link-out":       {"SRC DST", 2, 2, vLinkOut},
		"symlink-write":  {"LINK-INSIDE TARGET-OUTSIDE", 2, 2, vSymlinkWrite},
		"mknod":          {"PATH", 1, 1, vMknod},
		"mknod-fifo":     {"PATH", 1, 1, vMknodFifo},
		"shm-write":      {"NAME", 1, 1, vShmWrite},
		"tmp-write":      {"PATH", 1, 1, vWriteFile},
		"open-by-handle": {"PATH [MOUNTDIR]", 1, 2, vOpenByHandle},
		"block-device":   {"PATH", 1, 1, vBlockDevice},

		// set-ID files, truncation, rename and link (setid.go)
		"open-creat-mode":    {"PATH MODE-OCTAL", 2, 2, vOpenCreatMode},
		"open-tmpfile-mode":  {"DIR NAME MODE-OCTAL", 3, 3, vOpenTmpfileMode},
		"mknod-mode":         {"PATH MODE-OCTAL", 2, 2, vMknodMode},
		"openat2-creat-mode": {"PATH MODE-OCTAL", 2, 2, vOpenat2CreatMode},
		"open-trunc":         {"PATH rdonly|accmode3", 2, 2, vOpenTrunc},
		"openat2-trunc":      {"PATH", 1, 1, vOpenat2Trunc},
		"linkat-follow":      {"SRC DST", 2, 2, vLinkatFollow},
		"rename-exchange":    {"A B", 2, 2, vRenameExchange},

		// ttys
		"tiocsti":    {"TTYPATH", 1, 1, vTIOCSTI},
		"tiocsti-hi": {"TTYPATH", 1, 1, vTIOCSTIHi},
		"tioclinux":  {"TTYPATH", 1, 1, vTIOCLINUX},

		// kernel attack surface
		"userns":         {"", 0, 0, vUserns},
		"clone-newuser":  {"", 0, 0, vCloneNewuser},
		"clone3-newuser": {"", 0, 0, vClone3Newuser},
		"mount":          {"DIR", 1, 1, vMount},
		"keyctl":         {"", 0, 0, vKeyctl},
		"bpf":            {"", 0, 0, vBPF},
		"perf":           {"", 0, 0, vPerf},
		"userfaultfd":    {"", 0, 0, vUserfaultfd},

		// resources and leftovers
		"setsid-daemon":      {"MARKER-PATH", 1, 1, vSetsidDaemon},
		"privilege":          {"", 0, 0, vPrivilege},
		"fork-bomb":          {"[MAX]", 0, 1, vForkBomb},
		"fork-race":          {"MAX [WORKERS]", 1, 2, vForkRace},
		"memory-bomb":        {"MIB", 1, 1, vMemoryBomb},
		"memory-bomb-tree":   {"N MIB [hold]", 2, 3, vMemoryBombTree},
		"memory-bomb-shared": {"MIB [hold]", 1, 2, vMemoryBombShared},
		"memory-bomb-memfd":  {"MIB [hold]", 1, 2, vMemoryBombMemfd},
		"reserve":            {"GIB COMMIT-MIB", 2, 2, vReserve},
		"env-dump":           {"[CANARY...]", 0, -1, vEnvDump},
		"sleep-forever":      {"", 0, 0, vSleepForever},
	}
	addProcTargetVectors(vectors)
	addEgressVectors(vectors)
	addNestGitVectors(vectors)
}

// vectorTimeout bounds every vector but the long-running ones: an attempt
// that hangs (a connect whose packets a sandbox drops, a wait that never
// returns) is reported as blocked.
const vectorTimeout = 60 * time.Second

var longRunning = map[string]bool{
	"fork-bomb":     true,
	"memory-bomb":   true,
	"sleep-forever": true,
}

// startWatchdog reports "blocked: timed out" and exits if the vector has not
// reported within d.
func startWatchdog(name string, d time.Duration) {
	time.AfterFunc(d, func() {
		os.Exit(report(name, blockedf("timed out after %s", d)))
	})
}

// Hidden subcommands used when the probe re-executes itself. They are not in
// the vector table, so they are neither listed nor tested as vectors.
const (
	hiddenChild       = "__child"        // __child VECTOR ARGS...: run VECTOR in-process
	hiddenDaemonMid   = "__daemon-mid"   // __daemon-mid MARKER: start the grandchild, exit
	hiddenDaemonSleep = "__daemon-sleep" // __daemon-sleep MARKER: write pid, sleep 300s
	hiddenUsernsCheck = "__userns-check" // reports whether it runs in a fresh user ns
	hiddenNetifs      = "__netifs"       // prints the network interfaces it can see
)

// reentry is the argv, after the executable's path, that re-enters the
// probe when it re-executes itself: empty for the stand-alone probe,
// ["__probe"] inside confine. Set once by MainAs before anything runs.
var reentry []string

// Main runs the stand-alone probe with args (without the program name) and
// returns its exit status; it prints the JSON report on stdout.
func Main(args []string) int { return MainAs(nil, args) }

// MainAs is Main for a probe carried inside another program: sub is the
// argv that re-enters the probe after that program's executable (confine
// passes ["__probe"]), used by the probe's re-executions of itself.
func MainAs(sub, args []string) int {
	reentry = append([]string(nil), sub...)
	return run(args)
}

// selfArgv is the argv that re-executes the probe at exe with args.
func selfArgv(exe string, args ...string) []string {
	argv := append([]string{exe}, reentry...)
	return append(argv, args...)
}

// selfCommand is an exec.Cmd that re-executes the probe at exe with args.
func selfCommand(exe string, args ...string) *exec.Cmd {
	cmd := exec.Command(exe)
	cmd.Args = selfArgv(exe, args...)
	return cmd
}

// run executes the command line args (without the program name) and returns
// the exit code. It prints the JSON report.
func run(args []string) int {
	if len(args) == 0 {
		return report("", usage("usage: probe VECTOR [ARGS...]; vectors: %s", vectorNames()))
	}
	name, rest := args[0], args[1:]
	child := false
	switch name {
	case hiddenChild:
		if len(rest) == 0 {
			return report(name, usage("usage: probe %s VECTOR [ARGS...]", hiddenChild))
		}
		child = true
		name, rest = rest[0], rest[1:]
	case hiddenDaemonMid:
		return daemonMid(rest)
	case hiddenDaemonSleep:
		return daemonSleep(rest)
	case hiddenUsernsCheck:
		return usernsCheck()
	case hiddenNetifs:
		return netifs()
	case hiddenHold:
		return hold(rest)
	}
	v, ok := vectors[name]
	if !ok {
		return report(name, usage("unknown vector %q; vectors: %s", name, vectorNames()))
	}
	if len(rest) < v.minArgs || (v.maxArgs >= 0 && len(rest) > v.maxArgs) {
		return report(name, usage("usage: probe %s %s", name, v.args))
	}
	if !longRunning[name] {
		d := vectorTimeout
		if child { // report before the isolating parent gives up
			d -= 10 * time.Second
		}
		startWatchdog(name, d)
	}
	if isolated[name] && !child {
		return runIsolated(name, rest, v.run)
	}
	return report(name, v.run(rest))
}

func vectorNames() string {
	names := make([]string, 0, len(vectors))
	for n := range vectors {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

var (
	reportMu sync.Mutex
	reported bool
)

// report prints the JSON line and returns the exit code for r. Only the
// first report is printed; a later caller (the vector racing its watchdog)
// blocks until the first one exits the process.
func report(name string, r result) int {
	reportMu.Lock()
	if reported {
		reportMu.Unlock()
		select {}
	}
	reported = true
	defer reportMu.Unlock()
	line, err := json.Marshal(struct {
		Vector  string `json:"vector"`
		Outcome string `json:"outcome"`
		Detail  string `json:"detail"`
	}{name, r.outcome, r.detail})
	if err != nil { // cannot happen with string fields
		line = []byte(`{"vector":"","outcome":"error","detail":"json"}`)
	}
	os.Stdout.Write(append(line, '\n'))
	switch r.outcome {
	case outEscaped:
		return exitEscaped
	case outBlocked:
		return exitBlocked
	case outNA:
		return exitNA
	default:
		return exitUsage
	}
}

// Argument parsing helpers. Each returns a usage result on failure.

func parsePort(s string) (int, *result) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		r := usage("bad port %q", s)
		return 0, &r
	}
	return p, nil
}

func parsePid(s string) (int, *result) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 {
		r := usage("bad pid %q", s)
		return 0, &r
	}
	return p, nil
}

func parseHex(s string) (uint64, *result) {
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), 16, 64)
	if err != nil {
		r := usage("bad hex address %q", s)
		return 0, &r
	}
	return v, nil
}

func parseUint(s, what string, bits int) (uint64, *result) {
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		r := usage("bad %s %q", what, s)
		return 0, &r
	}
	return v, nil
}
