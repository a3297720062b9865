//go:build !linux

package confine

// Init must be called first thing in main by every program that calls
// RunCommand. Outside Linux no run re-executes the program, so it returns
// at once; it exists so that one main works everywhere.
func Init() {}
