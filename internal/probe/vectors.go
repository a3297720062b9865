//go:build linux

package probe

import "sort"

// Vectors returns the names of every vector the probe attempts, sorted.
func Vectors() []string {
	names := make([]string, 0, len(vectors))
	for n := range vectors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
