package cli

// parentWaiter polls: macOS has no pidfd.
func parentWaiter(ppid int) (parentWatch, error) {
	return newPollWaiter(ppid, "macOS has no pidfd"), nil
}
