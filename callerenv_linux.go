package confine

// What only Linux runs read of the caller's environment: where the
// private directory lives.

// tempDir is os.TempDir with $TMPDIR read through e.
func (e envLookup) tempDir() string {
	if d := e.get("TMPDIR"); d != "" {
		return d
	}
	return "/tmp"
}
