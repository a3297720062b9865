#include "textflag.h"

// func int80(trap, a1, a2, a3 uint32) (r uint32)
//
// Enters the kernel through the i386 compat gate (INT $0x80) with eax=trap
// and ebx, ecx, edx = a1, a2, a3. Pointers passed this way are truncated to
// 32 bits, so they must point into memory mapped with MAP_32BIT.
TEXT ·int80(SB), NOSPLIT, $0-20
	MOVL	trap+0(FP), AX
	MOVL	a1+4(FP), BX
	MOVL	a2+8(FP), CX
	MOVL	a3+12(FP), DX
	INT	$0x80
	MOVL	AX, r+16(FP)
	RET
