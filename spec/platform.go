package spec

import "errors"

// ErrUnsupportedOS is returned, wrapped with ErrUnavailable, on an
// operating system where confine has no backend (Windows today): nothing
// is run, never unconfined.
var ErrUnsupportedOS = errors.New("no sandbox backend on this operating system")
