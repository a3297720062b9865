//go:build unix

package eventlog

import (
	"fmt"
	"slices"

	"github.com/confine-sandbox/confine/spec"
)

// FindApprovalRequest returns the newest connection record whose
// approval request is id, with its run. It returns an error wrapping
// ErrNotFound when there is none.
func FindApprovalRequest(path, id string) (Event, spec.Connection, error) {
	if id == "" {
		return Event{}, spec.Connection{}, fmt.Errorf("find approval request: empty id: %w", ErrNotFound)
	}
	var ev Event
	var conn spec.Connection
	ok := false
	err := walk(path, func(evs []Event) bool {
		for _, e := range slices.Backward(evs) {
			for _, c := range e.Connections {
				if c.ApprovalRequest == id {
					ev, conn, ok = e, c, true
					return true
				}
			}
		}
		return false
	})
	if err != nil {
		return Event{}, spec.Connection{}, fmt.Errorf("find approval request %q: %w", id, err)
	}
	if !ok {
		return Event{}, spec.Connection{}, fmt.Errorf("find approval request %q in %s: %w", id, path, ErrNotFound)
	}
	return ev, conn, nil
}
