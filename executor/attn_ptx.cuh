/* attn_ptx.cuh: the few sm_80+ instructions the attention tile (attn_tile.cuh) issues through
 * inline PTX, one thin function each, so that the tile's code names an instruction and the CPU
 * emulation of the kernels (tests/emu) can put its own model of that instruction in this
 * header's place (tests/emu/attn_ptx.cuh, found first by the emulated build). Semantics and
 * register layouts are those of the PTX ISA (NVIDIA, "Parallel Thread Execution ISA", sections
 * "Warp-level matrix multiply-accumulate instructions: mma.m16n8k16", "ldmatrix" and
 * "cp.async"); in short:
 *
 * mma_16816(d, a, b, c): d = a b + c for a 16 x 16 bf16 A (row), a 16 x 8 bf16 B (col), fp32
 *   C and D, over the warp. With g = lane / 4 and t = lane % 4, a lane holds
 *   a[0] = A(g, 2t..2t+1), a[1] = A(g+8, 2t..2t+1), a[2] = A(g, 2t+8..2t+9),
 *   a[3] = A(g+8, 2t+8..2t+9); b[0] = B(2t..2t+1, g), b[1] = B(2t+8..2t+9, g);
 *   c[0..1] = C(g, 2t..2t+1), c[2..3] = C(g+8, 2t..2t+1) (bf16 pairs: lower column or row in the
 *   low 16 bits).
 * ldsm_x4(r, p): ldmatrix.sync.aligned.m8n8.x4.shared.b16, over the warp: lanes 8i..8i+7 give
 *   the addresses of rows 0..7 of 8 x 8 matrix i (16 bytes each, 16-byte aligned, in shared
 *   memory); every lane gets r[i] = M_i(g, 2t..2t+1). ldsm_x4_t (.trans) gives
 *   r[i] = (M_i(2t, g), M_i(2t+1, g)).
 * cp_async16(dst, src, n): cp.async.cg.shared.global of 16 bytes, of which the first n (16 or
 *   0) are read from src and the rest zero-filled; it lands in shared memory some time before
 *   the issuing thread's cp_async_wait that covers its group. cp_async_commit() closes the
 *   thread's current group; cp_async_wait<N>() waits until at most N of the thread's groups
 *   are pending. Other threads see the data only after a barrier that follows their writers'
 *   waits. */
#ifndef BP_ATTN_PTX_CUH
#define BP_ATTN_PTX_CUH

#include <stdint.h>

namespace attn_ptx {

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
					  const uint32_t (&b)[2], const float (&c)[4])
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
		     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
		       "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void *p)
{
	const unsigned s = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(s));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void *p)
{
	const unsigned s = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(s));
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src, int n)
{
	const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
		     "r"(n)
		     : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

} /* namespace attn_ptx */

#endif
