/* fiber.cpp: the CUDA emulator's fibers (tests/emu/README.md): every CUDA thread of a block
 * runs on its own stack and gives the CPU back only at a synchronisation point, so the
 * scheduler (sched.cpp) decides the order in which threads run between barriers.
 *
 * On x86-64 the switch is the handful of instructions below: it saves what the System V ABI
 * says a call preserves (rbx, rbp, r12-r15, the SSE and x87 control words) and swaps stack
 * pointers. glibc's swapcontext also saves the signal mask, a system call on every switch
 * (0.4 us a round trip here): with it the dense kernel test took four times as long. It is
 * what other architectures get (EMU_UCONTEXT forces it on x86-64 too).
 *
 * Under AddressSanitizer every switch is announced (__sanitizer_start/finish_switch_fiber),
 * so its stack checks follow the fiber, and the top of a reused stack is unpoisoned. Stacks come
 * from mmap with a PROT_NONE page below: an overflow faults instead of corrupting memory. */
#include "emu_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifndef EMU_ASAN
#define EMU_ASAN 0
#endif
#if EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
#define EMU_SWITCH_ASM 1
#else
#define EMU_SWITCH_ASM 0
#include <ucontext.h>
#endif

namespace cuemu {

/* Kernels keep little on the stack (fragments are 8 values per lane); 256 KiB leaves room
 * for sanitizer redzones and libc calls inside a kernel (printf). Only touched pages cost. */
static const size_t STACK_BYTES = 256 * 1024;
#if EMU_ASAN
static const size_t TOP_BYTES = 16 * 1024;
#endif

#if EMU_SWITCH_ASM
/* emu_switch(save, load): pushes the callee-saved registers and the control words on the
 * current stack, stores the stack pointer in *save, loads load as the stack pointer and pops
 * the same frame from it. A new fiber's stack is laid out as that frame (fiber_start). */
extern "C" void emu_switch(void **save, void *load);
asm(".text\n"
    ".globl emu_switch\n"
    ".type emu_switch, @function\n"
    ".p2align 4\n"
    "emu_switch:\n"
    "	pushq %rbp\n"
    "	pushq %rbx\n"
    "	pushq %r12\n"
    "	pushq %r13\n"
    "	pushq %r14\n"
    "	pushq %r15\n"
    "	subq $8, %rsp\n"
    "	stmxcsr (%rsp)\n"
    "	fnstcw 4(%rsp)\n"
    "	movq %rsp, (%rdi)\n"
    "	movq %rsi, %rsp\n"
    "	ldmxcsr (%rsp)\n"
    "	fldcw 4(%rsp)\n"
    "	addq $8, %rsp\n"
    "	popq %r15\n"
    "	popq %r14\n"
    "	popq %r13\n"
    "	popq %r12\n"
    "	popq %rbx\n"
    "	popq %rbp\n"
    "	ret\n"
    ".size emu_switch, .-emu_switch\n");
static void *sched_sp;
#else
static ucontext_t sched_ctx;
#endif

/* The entry of the fiber being started (read by the trampoline, which takes no arguments). */
static void (*pending_entry)();

#if EMU_ASAN
static void *sched_fake;
static const void *sched_bottom;
static size_t sched_size;
#endif

extern "C" void emu_fiber_trampoline()
{
	pending_entry();
	/* entry() ends with fiber_finish and never returns. */
	abort();
}

fiber::~fiber()
{
	if (stack)
		munmap(stack - (size_t)sysconf(_SC_PAGESIZE), size + (size_t)sysconf(_SC_PAGESIZE));
#if !EMU_SWITCH_ASM
	free(sp);
#endif
}

void fiber_start(fiber *f, void (*entry)())
{
	if (!f->stack) {
		const size_t page = (size_t)sysconf(_SC_PAGESIZE);
		void *m = mmap(nullptr, STACK_BYTES + page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0) {
			fprintf(stderr, "emu: error: cannot map a %zu-byte fiber stack\n",
				STACK_BYTES);
			abort();
		}
		f->stack = (char *)m + page;
		f->size = STACK_BYTES;
	}
#if EMU_ASAN
	/* The previous block's fiber ended without returning from its first frames (the
	 * trampoline and the scheduler's thread entry): whatever redzones they poisoned are
	 * cleared. They sit at the top; the whole stack would cost 32 KiB of shadow per thread
	 * per block. */
	ASAN_UNPOISON_MEMORY_REGION(f->stack + f->size - TOP_BYTES, TOP_BYTES);
#endif
	f->asan_fake = nullptr;
#if EMU_SWITCH_ASM
	/* From the top: a zero return address for the trampoline (it never returns; the slot
	 * makes rsp % 16 == 8 at its entry, as after a call), the trampoline as emu_switch's
	 * return address, six zero registers (rbp 0 ends backtraces), the control words. */
	uint64_t *top = (uint64_t *)(((uintptr_t)(f->stack + f->size)) & ~(uintptr_t)15);
	uint64_t *sp = top - 9;
	uint32_t words[2];
	asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(words[0]), "=m"(words[1]));
	memcpy(&sp[0], words, 8);
	for (int i = 1; i <= 6; i++)
		sp[i] = 0;
	sp[7] = (uint64_t)(uintptr_t)&emu_fiber_trampoline;
	sp[8] = 0;
	f->sp = sp;
#else
	ucontext_t *uc = (ucontext_t *)f->sp;
	if (!uc) {
		uc = (ucontext_t *)calloc(1, sizeof *uc);
		if (!uc)
			abort();
		f->sp = uc;
	}
	getcontext(uc);
	uc->uc_stack.ss_sp = f->stack;
	uc->uc_stack.ss_size = f->size;
	uc->uc_link = nullptr;
	makecontext(uc, emu_fiber_trampoline, 0);
#endif
	pending_entry = entry;
}

void fiber_resume(fiber *f)
{
#if EMU_ASAN
	__sanitizer_start_switch_fiber(&sched_fake, f->stack, f->size);
#endif
#if EMU_SWITCH_ASM
	emu_switch(&sched_sp, f->sp);
#else
	swapcontext(&sched_ctx, (ucontext_t *)f->sp);
#endif
#if EMU_ASAN
	__sanitizer_finish_switch_fiber(sched_fake, nullptr, nullptr);
#endif
}

void fiber_begin()
{
#if EMU_ASAN
	__sanitizer_finish_switch_fiber(nullptr, &sched_bottom, &sched_size);
#endif
}

void fiber_yield(fiber *f)
{
#if EMU_ASAN
	__sanitizer_start_switch_fiber(&f->asan_fake, sched_bottom, sched_size);
#endif
#if EMU_SWITCH_ASM
	emu_switch(&f->sp, sched_sp);
#else
	swapcontext((ucontext_t *)f->sp, &sched_ctx);
#endif
#if EMU_ASAN
	__sanitizer_finish_switch_fiber(f->asan_fake, nullptr, nullptr);
#endif
}

void fiber_finish(fiber *f)
{
#if EMU_ASAN
	/* A null fake-stack slot tells ASan this stack is done with. */
	__sanitizer_start_switch_fiber(nullptr, sched_bottom, sched_size);
#endif
#if EMU_SWITCH_ASM
	/* Where the finished stack pointer goes: never read, static so that this frame keeps
	 * nothing ASan would poison. */
	static void *dead;
	(void)f;
	emu_switch(&dead, sched_sp);
#else
	setcontext(&sched_ctx);
	(void)f;
#endif
	abort();
}

} /* namespace cuemu */
