//go:build linux

package seccomp

import (
	"fmt"
	"strings"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Argument rules as data. A call whose outcome depends on its arguments is
// a list of argRules tried in order, the first whose conditions all hold
// deciding, and a return for when none does. The filter's code (compile)
// and its description (docs, hence Denied, `confine check` and
// docs/seccomp.md) are both generated from that one list, so they cannot
// say different things.

// named is a constant with the name the documentation prints for it.
type named struct {
	v    uint32
	name string
}

// arg is the 32-bit word of a system call's arguments a condition reads:
// the low word of argument i (the kernel truncates the int arguments
// these rules test, so the high word is noise the caller controls),
// ANDed with mask when mask.v is not 0.
type arg struct {
	i    int
	name string // the argument's name in the man page
	mask named
}

// argOp is how a condition compares its word.
type argOp int

const (
	opIn     argOp = iota // the word is one of vals
	opNotIn               // the word is none of vals
	opAnySet              // the word has a bit of vals[0] set
	opNotNil              // a pointer: the whole 64-bit argument is not 0
)

// cond is one test on one argument.
type cond struct {
	arg  arg
	op   argOp
	vals []named
}

// argRule returns ret when every condition holds. note, if any, is
// appended to the rule's description.
type argRule struct {
	when []cond
	ret  uint32
	note string
}

// is, isNot, anySet and notNil build conditions.
func is(a arg, vals ...named) cond    { return cond{arg: a, op: opIn, vals: vals} }
func isNot(a arg, vals ...named) cond { return cond{arg: a, op: opNotIn, vals: vals} }
func anySet(a arg, bits named) cond   { return cond{arg: a, op: opAnySet, vals: []named{bits}} }
func notNil(a arg) cond               { return cond{arg: a, op: opNotNil} }

// when is an argRule: ret if every condition in cs holds.
func when(ret uint32, cs ...cond) argRule { return argRule{when: cs, ret: ret} }

// noting is r with note appended to its description.
func (r argRule) noting(note string) argRule { r.note = note; return r }

// num names a number by its decimal (or, for large ones, hex) spelling.
func num(v uint32) named {
	if v >= 0x10000 {
		return named{v, fmt.Sprintf("%#x", v)}
	}
	return named{v, fmt.Sprint(v)}
}

// word identifies what the accumulator holds: an argument's low word,
// masked or not. loadedNr is the dispatch's nr; loadedNone is anything else.
type word struct {
	i    int
	mask uint32
}

var (
	loadedNr   = word{i: -1}
	loadedNone = word{i: -2}
)

func (a arg) word() word { return word{a.i, a.mask.v} }

// load puts a's word into the accumulator unless it is there already.
func (a arg) load(asm *assembler, have *word) {
	if *have == a.word() {
		return
	}
	asm.loadWord(argLow(a.i))
	if a.mask.v != 0 {
		asm.insn(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: a.mask.v})
	}
	*have = a.word()
}

// compile emits c: on to pass when it holds (next: fall through), to fail
// when not.
func (c cond) compile(asm *assembler, have *word, pass, fail label) {
	if c.op == opNotNil {
		// NULL only when both words are 0.
		asm.loadWord(argLow(c.arg.i))
		asm.jumpIf(bpf.JumpEqual, 0, next, pass)
		asm.loadWord(argLow(c.arg.i) + 4)
		asm.jumpIf(bpf.JumpEqual, 0, fail, pass)
		*have = loadedNone
		return
	}
	c.arg.load(asm, have)
	switch c.op {
	case opAnySet:
		asm.jumpIf(bpf.JumpBitsSet, c.vals[0].v, pass, fail)
	case opNotIn:
		for k, v := range c.vals {
			if k < len(c.vals)-1 {
				asm.jumpIf(bpf.JumpEqual, v.v, fail, next)
			} else {
				asm.jumpIf(bpf.JumpEqual, v.v, fail, pass)
			}
		}
	case opIn:
		hit := pass
		if hit == next && len(c.vals) > 1 {
			hit = asm.newLabel()
		}
		for k, v := range c.vals {
			if k < len(c.vals)-1 {
				asm.jumpIf(bpf.JumpEqual, v.v, hit, next)
			} else {
				asm.jumpIf(bpf.JumpEqual, v.v, hit, fail)
			}
		}
		if hit != pass {
			asm.mark(hit)
		}
	}
}

// compileRules emits rules and then otherwise; the accumulator holds nr
// on entry. Every path ends in a return.
func compileRules(asm *assembler, rules []argRule, otherwise uint32) {
	have := loadedNr
	for _, r := range rules {
		fail := asm.newLabel()
		for k, c := range r.when {
			pass := next
			if k == len(r.when)-1 {
				pass = asm.ret(r.ret)
			}
			c.compile(asm, &have, pass, fail)
		}
		if len(r.when) == 0 {
			asm.jump(asm.ret(r.ret))
		}
		asm.mark(fail)
		// Every condition jumps here with its own word loaded.
		have = rulesWord(r)
	}
	asm.jump(asm.ret(otherwise))
}

// rulesWord is what the accumulator holds where r's conditions fail: the
// word they all read, or loadedNone.
func rulesWord(r argRule) word {
	if len(r.when) == 0 {
		return loadedNone
	}
	w := r.when[0].arg.word()
	for _, c := range r.when {
		if c.op == opNotNil || c.arg.word() != w {
			return loadedNone
		}
	}
	return w
}

// describe returns the documentation lines of rules and otherwise.
func describe(rules []argRule, otherwise uint32) []Rule {
	var out []Rule
	for _, r := range rules {
		parts := make([]string, len(r.when))
		for k, c := range r.when {
			parts[k] = c.String()
		}
		s := strings.Join(parts, " && ")
		if r.note != "" {
			s += " (" + r.note + ")"
		}
		out = append(out, ruleFor(s, r.ret))
	}
	switch {
	case len(rules) == 0:
		out = append(out, ruleFor("", otherwise))
	case otherwise != unix.SECCOMP_RET_ALLOW:
		out = append(out, ruleFor("otherwise", otherwise))
	}
	return out
}

// ruleFor is the documentation line of the filter return ret under when.
func ruleFor(when string, ret uint32) Rule {
	if ret == unix.SECCOMP_RET_USER_NOTIF {
		return Rule{When: when, Notify: true}
	}
	return Rule{When: when, Errno: unix.Errno(ret & unix.SECCOMP_RET_DATA)}
}

// String is c in the C-like notation of Rule.When.
func (c cond) String() string {
	name := c.arg.name
	if c.arg.mask.v != 0 {
		name = "(" + name + " & " + c.arg.mask.name + ")"
	}
	vals := make([]string, len(c.vals))
	for k, v := range c.vals {
		vals[k] = v.name
	}
	switch c.op {
	case opAnySet:
		return name + " & " + vals[0]
	case opNotNil:
		return name + " != NULL"
	case opNotIn:
		if len(vals) == 1 {
			return name + " != " + vals[0]
		}
		return name + " not " + orList(vals)
	}
	if len(vals) == 1 {
		return name + " == " + vals[0]
	}
	return name + " is " + orList(vals)
}

// orList is "a, b or c".
func orList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
