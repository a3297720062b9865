// Package planner is the plan stage's checks and decisions that do not
// depend on the backend: the rules for a run's writable and read-only
// roots (system directories, credential files, confine's own control
// paths), the persistence guard's protected paths, and the command's
// environment and program as the run will find them. Every OS's launch
// calls these (Linux's validate and macOS's Seatbelt launch in the root
// package), so both refuse the same inputs with the same words; the
// package imports nothing of the root package.
package planner
