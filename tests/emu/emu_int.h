/* emu_int.h: what the parts of the CUDA emulator (tests/emu, README.md there) share and the
 * kernels never see: the fibers that carry CUDA threads (fiber.cpp), the scheduler's entry
 * for launches and its error report (sched.cpp), and the device-memory table the runtime API
 * keeps (runtime.cpp). Everything runs on one OS thread: no locking anywhere. */
#ifndef BP_EMU_INT_H
#define BP_EMU_INT_H

#include <stddef.h>

#include "cuda_runtime.h"

namespace cuemu {

/* One CUDA thread's execution context: its own stack, switched to and from the scheduler's
 * (the launching thread's) stack. */
struct fiber {
	void *sp = nullptr;          /* saved stack pointer (x86-64) or ucontext (others) */
	char *stack = nullptr;       /* lowest usable byte; a PROT_NONE guard page lies below */
	size_t size = 0;
	void *asan_fake = nullptr;   /* AddressSanitizer's fake stack while switched out */
	fiber() = default;
	fiber(const fiber &) = delete;
	fiber &operator=(const fiber &) = delete;
	~fiber();
};

/* Prepares f to start at entry() on its next fiber_resume; the stack is allocated once per
 * fiber object and reused for the next block. entry must end with fiber_finish. */
void fiber_start(fiber *f, void (*entry)());
/* Scheduler side: runs f until it yields or finishes. */
void fiber_resume(fiber *f);
/* Fiber side: back to the scheduler; returns when resumed. */
void fiber_yield(fiber *f);
/* Fiber side, last call of entry(): back to the scheduler for good. */
[[noreturn]] void fiber_finish(fiber *f);
/* Fiber side, first call of entry(): completes the switch that started it. */
void fiber_begin();

/* The last error a launch or an API call left (cudaGetLastError's), set by sched.cpp for
 * refused launches. */
cudaError_t set_error(cudaError_t e);
/* The dynamic shared memory limit set by cudaFuncSetAttribute for a kernel (0: none). */
size_t shared_limit(const void *kernel);

/* Whether s is the default stream (null) or one cudaStreamCreate made and nobody destroyed. */
bool stream_valid(cudaStream_t s);

} /* namespace cuemu */

#endif
