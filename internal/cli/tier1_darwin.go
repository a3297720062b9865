//go:build darwin

package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// addTier1 adds nothing on macOS: the Tier 1 commands' confined paths rest
// on Linux's openat2 (RESOLVE_BENEATH), which macOS does not have.
func addTier1(*cobra.Command, io.Writer, io.Writer) {}
