package plan

// Landlock is the Landlock layer's configuration, and its only one: what
// the confined command may touch. internal/landlock prepares the ruleset
// from exactly this section of the plan (landlock.Prepare). Every path
// must be absolute. Paths are resolved (symlinks followed) when the
// ruleset is prepared; Landlock rules attach to the resolved inode.
type Landlock struct {
	// ReadExec are directories or files the command may read and execute
	// (and list, for directories).
	ReadExec []string `json:"read_exec"`
	// ReadWrite are directories or files with every handled right
	// (create, remove, rename/link within them (REFER), truncate, ioctl)
	// except creating device nodes.
	ReadWrite []string `json:"read_write"`
	// Devices are character device nodes granted read, write and ioctl
	// one by one; a directory (such as /dev) is refused.
	Devices []string `json:"devices"`
	// Optional lists paths of ReadExec, ReadWrite or Devices that are
	// skipped when they do not exist; any other path must exist.
	Optional []string `json:"optional,omitempty"`
	// DenyTCP handles TCP bind and connect with no rule, so both are
	// denied for every port. Needs ABI >= 4.
	DenyTCP bool `json:"deny_tcp"`
	// Scope forbids connecting to abstract unix sockets and signalling
	// processes outside the sandbox. Needs ABI >= 6.
	Scope bool `json:"scope"`
}
