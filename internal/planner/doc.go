// Package planner is the plan stage: it turns a spec, its profile and
// the host's facts into the run's immutable plans. Validate checks the
// spec against the profile and the host and resolves what every backend
// shares (Inputs); Build turns Inputs, a backend and the resources the
// launch made (Resources) into that backend's plan (Planned). The checks
// every OS's launch shares live here once: the rules for a run's writable
// and read-only roots (system directories, credential files, confine's
// own control paths), the persistence guard's protected paths, and the
// command's environment and program as the run will find them; macOS's
// Seatbelt launch in the root package calls them too, so both refuse the
// same inputs with the same words. The package imports nothing of the
// root package.
package planner
