//go:build linux

package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// A small label-based assembler on top of x/net/bpf. Classic BPF only jumps
// forward, and a conditional jump reaches at most 255 instructions, which a
// decision tree over ~80 syscalls can exceed. Jumps name labels here; when a
// conditional target is too far, assemble routes that branch through an
// unconditional "ja" (32-bit offset) placed right after the jump.

type label int

// next means "the instruction after this one" as a jump target.
const next label = -1

type itemKind int

const (
	kindInsn  itemKind = iota // a non-jump instruction
	kindCond                  // a conditional jump to labels jt/jf
	kindJump                  // an unconditional jump to label to
	kindLabel                 // defines label to at this point; no code
)

type item struct {
	kind itemKind
	insn bpf.Instruction
	cond bpf.JumpTest
	val  uint32
	jt   label
	jf   label
	to   label
	// farT/farF: the branch goes through a trampoline "ja" after the jump.
	farT bool
	farF bool
}

func (it *item) size() int {
	switch it.kind {
	case kindLabel:
		return 0
	case kindCond:
		n := 1
		if it.farT {
			n++
		}
		if it.farF {
			n++
		}
		return n
	}
	return 1
}

type assembler struct {
	items  []item
	labels int
	// rets maps a return value to the label of its shared "ret" instruction;
	// retOrder keeps emission deterministic.
	rets     map[uint32]label
	retOrder []uint32
}

func newAssembler() *assembler {
	return &assembler{rets: map[uint32]label{}}
}

func (a *assembler) newLabel() label {
	a.labels++
	return label(a.labels - 1)
}

func (a *assembler) mark(l label) {
	a.items = append(a.items, item{kind: kindLabel, to: l})
}

func (a *assembler) insn(i bpf.Instruction) {
	a.items = append(a.items, item{kind: kindInsn, insn: i})
}

// loadWord loads the 32-bit word at offset off of struct seccomp_data.
func (a *assembler) loadWord(off uint32) {
	a.insn(bpf.LoadAbsolute{Off: off, Size: 4})
}

func (a *assembler) jumpIf(cond bpf.JumpTest, val uint32, jt, jf label) {
	a.items = append(a.items, item{kind: kindCond, cond: cond, val: val, jt: jt, jf: jf})
}

func (a *assembler) jump(to label) {
	a.items = append(a.items, item{kind: kindJump, to: to})
}

// ret returns the label of the shared instruction "ret v", emitted once at
// the end of the program.
func (a *assembler) ret(v uint32) label {
	if l, ok := a.rets[v]; ok {
		return l
	}
	l := a.newLabel()
	a.rets[v] = l
	a.retOrder = append(a.retOrder, v)
	return l
}

// program resolves labels and returns the instructions.
func (a *assembler) program() ([]bpf.Instruction, error) {
	items := append([]item(nil), a.items...)
	for _, v := range a.retOrder {
		items = append(items,
			item{kind: kindLabel, to: a.rets[v]},
			item{kind: kindInsn, insn: bpf.RetConstant{Val: v}})
	}

	pos := make([]int, len(items))
	at := make([]int, a.labels)
	// Relax until every short branch fits; a branch only ever turns far,
	// so this terminates.
	for {
		for i := range at {
			at[i] = -1
		}
		p := 0
		for i := range items {
			pos[i] = p
			if items[i].kind == kindLabel {
				at[items[i].to] = p
			}
			p += items[i].size()
		}
		changed := false
		for i := range items {
			it := &items[i]
			if it.kind != kindCond {
				continue
			}
			if !it.farT {
				d, err := distance(it.jt, pos[i], it.size(), at)
				if err != nil {
					return nil, err
				}
				if d > 255 {
					it.farT, changed = true, true
				}
			}
			if !it.farF {
				d, err := distance(it.jf, pos[i], it.size(), at)
				if err != nil {
					return nil, err
				}
				if d > 255 {
					it.farF, changed = true, true
				}
			}
		}
		if !changed {
			break
		}
	}

	var out []bpf.Instruction
	for i := range items {
		it := &items[i]
		switch it.kind {
		case kindLabel:
		case kindInsn:
			out = append(out, it.insn)
		case kindJump:
			d, err := distance(it.to, pos[i], 1, at)
			if err != nil {
				return nil, err
			}
			out = append(out, bpf.Jump{Skip: uint32(d)})
		case kindCond:
			// Trampolines sit right after the jump: first the true
			// branch's, then the false branch's.
			var jt, jf int
			slot := 0
			if it.farT {
				jt = slot
				slot++
			} else {
				jt, _ = distance(it.jt, pos[i], it.size(), at)
			}
			if it.farF {
				jf = slot
			} else {
				jf, _ = distance(it.jf, pos[i], it.size(), at)
			}
			out = append(out, bpf.JumpIf{Cond: it.cond, Val: it.val, SkipTrue: uint8(jt), SkipFalse: uint8(jf)})
			tramp := pos[i] + 1
			if it.farT {
				d, err := distance(it.jt, tramp, 1, at)
				if err != nil {
					return nil, err
				}
				out = append(out, bpf.Jump{Skip: uint32(d)})
				tramp++
			}
			if it.farF {
				d, err := distance(it.jf, tramp, 1, at)
				if err != nil {
					return nil, err
				}
				out = append(out, bpf.Jump{Skip: uint32(d)})
			}
		}
	}
	return out, nil
}

// distance is the skip count from the instruction at pos to label l, where
// the jump item occupies size slots (next means the slot after the item).
func distance(l label, pos, size int, at []int) (int, error) {
	if l == next {
		return size - 1, nil
	}
	if l < 0 || int(l) >= len(at) || at[l] < 0 {
		return 0, fmt.Errorf("seccomp: jump to undefined label %d", l)
	}
	d := at[l] - (pos + 1)
	if d < 0 {
		return 0, fmt.Errorf("seccomp: backward jump to label %d", l)
	}
	return d, nil
}
