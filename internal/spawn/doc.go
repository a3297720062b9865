//go:build linux

// Package spawn starts a confined process without a second Go runtime: the
// launcher prepares every system call the child will make as plain data
// (a Program), forks with a raw clone, and the child runs that list with
// nothing but raw system calls before it execs the command.
//
// Why: a re-exec of a Go binary costs a runtime start (milliseconds) per
// stage; a prepared list costs a fork. Between fork and exec the child may
// not allocate, grow its stack or take locks, so the interpreter is a few
// nosplit functions over memory the parent built.
//
// With namespaces, the forked child is the init of a new PID namespace: it
// runs the namespace set-up ops, forks the command (which runs the
// confinement ops and execs), then stays as a minimal init that reaps,
// forwards termination signals to every process of the namespace and,
// once the command is over, kills what outlived it, counts it and reports
// the command's status on a pipe. When the launcher dies first (init's
// parent-death signal is LauncherGone), init kills everything in the
// namespace and runs a janitor that removes what the launcher would have.
//
// Without namespaces (Program.Subreaper) the init is a child subreaper in
// the launcher's PID namespace: it only reaps (kill(-1) would reach every
// process of the uid), reports Pending when processes outlived the command
// so that the launcher kills them, and if the launcher dies it execs the
// gone-janitor (the host binary as the reaper), which kills the tree.
package spawn
