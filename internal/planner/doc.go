// Package planner is the plan stage: it turns a spec, its profile and
// the host's facts into the run's immutable plans.
//
// CheckRun is the validation every OS's launch calls, so that Linux and
// macOS refuse the same inputs with the same words: the spec's network
// against its profile's, the rules for a run's writable and read-only
// roots (system directories, credential files, confine's own control
// paths), the persistence guard's protected paths, and the command's
// environment and program as the run will find them. On Linux, Validate
// resolves a spec's roots, calls CheckRun and adds what only Linux
// enforces (Inputs); Build turns Inputs, a backend and the resources the
// launch made (Resources) into that backend's plan (Planned). macOS's
// Seatbelt launch (seatbelt.Launch, internal/seatbelt) canonicalises the
// roots its own way and calls CheckRun. The package imports nothing of
// the root package or of internal/linuxrun, which call it.
package planner
