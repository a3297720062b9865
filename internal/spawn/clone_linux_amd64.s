//go:build !race

#include "textflag.h"

#define SYS_clone 56
#define SYS_exit_group 231

// func cloneVM(flags, stack uintptr, p *Program, command bool, ptid uintptr) (r1, errno uintptr)
//
// clone(2) whose child starts on stack (sharing the caller's memory when
// flags hold CLONE_VM) and calls initEntry(p), or commandEntry(p) when
// command is set; neither returns. The child must not touch g, the Go
// stack or the heap allocator: the functions it runs are nosplit and
// write no pointers. ptid is clone's parent_tid (where CLONE_PIDFD puts
// the child's pidfd), 0 for none.
TEXT ·cloneVM(SB),NOSPLIT|NOFRAME,$0-56
	MOVQ	flags+0(FP), DI
	MOVQ	stack+8(FP), SI
	MOVQ	p+16(FP), R12
	MOVBQZX	command+24(FP), R13
	MOVQ	ptid+32(FP), DX
	XORQ	R10, R10
	XORQ	R8, R8
	MOVQ	$SYS_clone, AX
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	NEGQ	AX
	MOVQ	$0, r1+40(FP)
	MOVQ	AX, errno+48(FP)
	RET
ok:
	MOVQ	AX, r1+40(FP)
	MOVQ	$0, errno+48(FP)
	RET

child:
	// On the new stack (the kernel loaded SI into SP): one argument slot
	// for the ABI0 call, 16-byte aligned.
	ANDQ	$~15, SP
	SUBQ	$16, SP
	MOVQ	R12, 0(SP)
	// Indirect calls: init clones the command through this same
	// function, a cycle the linker's nosplit check would refuse.
	LEAQ	·initEntry(SB), AX
	CMPQ	R13, $0
	JEQ	call
	LEAQ	·commandEntry(SB), AX
call:
	CALL	AX
	MOVL	$111, DI
	MOVL	$SYS_exit_group, AX
	SYSCALL
	INT	$3
