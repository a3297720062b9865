package confine

// Warm is what a long-lived launcher keeps between the runs it starts
// (confine serve keeps one for its lifetime): the work a run would
// otherwise pay for first that does not depend on the run, done ahead.
// Today that is the runs' own private directories, made before the runs
// that take them (see Launcher.Warm), and, in a root process on Linux,
// the namespaced runs' network namespaces. Nothing of one run reaches
// another through it: every run still gets a directory and a network
// namespace no other run had. The zero value is not usable; make one with NewWarm, share it
// between Launchers, and Close it when done. It is safe for concurrent
// use.
type Warm struct{ s warmState }

// NewWarm returns an empty Warm.
func NewWarm() *Warm { return &Warm{} }

// Close removes what w made ahead and was not used. Runs that use w
// afterwards pay as runs without it do.
func (w *Warm) Close() {
	if w != nil {
		w.s.close()
	}
}
