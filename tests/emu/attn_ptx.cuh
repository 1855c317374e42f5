/* attn_ptx.cuh, emulated (tests/emu/README.md): executor/attn_ptx.cuh's functions, same
 * namespace and signatures, on the emulator's models of the instructions (sched.cpp, through
 * include/emu_ptx.h) instead of inline PTX. The emulated build copies this file next to the
 * prepared attn_tile.cuh, whose #include "attn_ptx.cuh" finds it there before executor/ (a
 * quoted include looks in the including file's folder first); the include guard is the real
 * header's, so that one can never be read after this one.
 *
 * The models are strict where the GPU leaves room: mma_16816 and the ldsm loads are warp
 * collectives of all 32 lanes; an ldsm lane reads its row when it arrives, so a row another
 * lane has not yet written reads stale (a missing __syncwarp); a cp.async lands at issue or
 * only at the wait that covers it (EMU_CPASYNC), so a missing wait or barrier reads the 0xff
 * fill. emu_prep marks every call with its site, and numbers the waits of each function for
 * EMU_DROP=FUNC:cpwait:N. */
#ifndef BP_ATTN_PTX_CUH
#define BP_ATTN_PTX_CUH

#include <cuda_runtime.h>
#include <emu_ptx.h>
#include <stdint.h>

namespace attn_ptx {

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
					  const uint32_t (&b)[2], const float (&c)[4])
{
	cuemu::ptx_mma16816(d, a, b, c);
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void *p)
{
	cuemu::ptx_ldsm(r, p, false);
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void *p)
{
	cuemu::ptx_ldsm(r, p, true);
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src, int n)
{
	cuemu::ptx_cp_async(dst, src, n);
}

__device__ __forceinline__ void cp_async_commit()
{
	cuemu::ptx_cp_commit();
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
	static_assert(N >= 0, "cp.async.wait_group takes a count of groups");
	cuemu::ptx_cp_wait(N);
}

} /* namespace attn_ptx */

#endif
