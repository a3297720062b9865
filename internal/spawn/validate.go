//go:build linux

package spawn

import (
	"fmt"
)

// numSlots is how many values ops can pass to each other; numArgs how many
// arguments a call takes.
const (
	numSlots = len(Program{}.slots)
	numArgs  = len(Op{}.args)
)

// Validate checks every op of p before anything runs: a slot or argument
// index out of range, or a skip past the end of its list, is an error
// here, so the child never has to guess (it would otherwise alias another
// slot, or skip into another list).
func (p *Program) Validate() error {
	for _, l := range []struct {
		name string
		ops  []Op
	}{{"init", p.Init}, {"command", p.Cmd}, {"janitor", p.Janitor}} {
		for i, o := range l.ops {
			if err := o.check(len(l.ops) - i - 1); err != nil {
				return fmt.Errorf("spawn: %s op %d (step %d): %w", l.name, i, o.step, err)
			}
		}
	}
	if p.JanitorDone && SlotJanitorDone >= numSlots {
		return fmt.Errorf("spawn: SlotJanitorDone %d out of range", SlotJanitorDone)
	}
	return nil
}

// check validates one op followed by rest more ops in its list.
func (o Op) check(rest int) error {
	slot := func(what string, s int8) error {
		if s < -1 || int(s) >= numSlots {
			return fmt.Errorf("%s slot %d out of range [0, %d)", what, s, numSlots)
		}
		return nil
	}
	for _, c := range []struct {
		what string
		s    int8
	}{{"from", o.fromSlot}, {"to", o.toSlot}, {"want", o.wantSlot}} {
		if err := slot(c.what, c.s); err != nil {
			return err
		}
	}
	if o.fromSlot >= 0 && (o.slotArg < 0 || int(o.slotArg) >= numArgs) {
		return fmt.Errorf("argument index %d out of range [0, %d)", o.slotArg, numArgs)
	}
	if o.skip > 0 && (int(o.skip) > rest || o.skipErrno == 0) {
		return fmt.Errorf("skips %d ops on %v with %d left", o.skip, o.skipErrno, rest)
	}
	return nil
}
