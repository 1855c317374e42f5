/* mma.h, emulated (tests/emu/README.md): nvcuda::wmma for the one shape the kernels use,
 * m16n16k16 with bf16 inputs and fp32 accumulators.
 *
 * Like the hardware, a fragment is spread over its warp: each lane holds 8 of the tile's 256
 * values (the lane and slot of element (r, c) are in frag_place below; CUDA leaves the
 * mapping unspecified, so no correct kernel depends on it). load_matrix_sync and
 * store_matrix_sync touch only the calling lane's 8 elements, when that lane runs: a lane
 * that reads a tile other lanes have not finished writing sees stale data, which is what a
 * missing __syncwarp does on the GPU. mma_sync is a warp collective: every lane hands in its
 * pieces, the last to arrive multiplies the whole tiles (fp32 products and sums, the inputs
 * being exact bf16 values), and each lane takes its 8 results back.
 *
 * Checks: pointers 32-byte aligned and ldm a multiple of 16 bytes (what the PTX requires); at
 * mma_sync, every lane's A and B fragments loaded from the same address and ldm (a warp-wide
 * operation given lane-dependent arguments is undefined), and no fragment used before it was
 * loaded, filled or computed (a new fragment holds NaN). */
#ifndef BP_EMU_MMA_H
#define BP_EMU_MMA_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace cuemu {

enum frag_how { FRAG_UNSET, FRAG_LOADED, FRAG_FILLED, FRAG_COMPUTED };

/* Where a lane's fragment values came from; compared across the warp at mma_sync. */
struct frag_origin {
	int how;
	const void *src;
	unsigned ldm;
	int col_major;
};

/* Element (r, c) of a 16 x 16 tile lives in lane 4 (r % 8) + (c % 8) / 2, slot
 * (c % 2) + 2 (r / 8) + 4 (c / 8): rows g and g + 8, column pairs in both 8-column halves
 * (the accumulator layout of the mma.m16n8k16 PTX instruction, twice). */
static inline void frag_place(unsigned lane, int slot, int *r, int *c)
{
	*r = (int)(lane >> 2) + 8 * ((slot >> 1) & 1);
	*c = 2 * (int)(lane & 3) + (slot & 1) + 8 * (slot >> 2);
}

/* Pointer and ldm rules of load/store_matrix_sync; faults with what names the call. */
void wmma_check(const void *p, unsigned ldm, unsigned elem_bytes, const char *what);

/* The collective product: d = a b + c over the warp (sched.cpp). */
void warp_mma(float d[8], const __nv_bfloat16 a[8], const __nv_bfloat16 b[8], const float c[8],
	      const frag_origin &ao, const frag_origin &bo, const frag_origin &co);

} /* namespace cuemu */

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/* Other shapes and types are not emulated: the primary template has no definition. */
template <class Use, int M, int N, int K, class T, class Layout = void> class fragment;

template <class Use, class Layout> class fragment<Use, 16, 16, 16, __nv_bfloat16, Layout> {
	static_assert(std::is_same<Use, matrix_a>::value || std::is_same<Use, matrix_b>::value,
		      "bf16 fragments are matrix_a or matrix_b");
	static_assert(std::is_same<Layout, row_major>::value ||
			      std::is_same<Layout, col_major>::value,
		      "a matrix_a or matrix_b fragment needs row_major or col_major");

public:
	typedef __nv_bfloat16 element_type;
	static constexpr int num_elements = 8;
	element_type x[num_elements];
	cuemu::frag_origin origin;
	fragment() : origin{cuemu::FRAG_UNSET, nullptr, 0, 0}
	{
		for (int i = 0; i < num_elements; i++)
			x[i].bits = 0x7fff;
	}
};

template <> class fragment<accumulator, 16, 16, 16, float, void> {
public:
	typedef float element_type;
	static constexpr int num_elements = 8;
	element_type x[num_elements];
	cuemu::frag_origin origin;
	fragment() : origin{cuemu::FRAG_UNSET, nullptr, 0, 0}
	{
		for (int i = 0; i < num_elements; i++)
			x[i] = NAN;
	}
};

typedef fragment<accumulator, 16, 16, 16, float, void> emu_acc;

template <class Use, class Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout> &f,
				    const __nv_bfloat16 *p, unsigned ldm)
{
	cuemu::wmma_check(p, ldm, 2, "load_matrix_sync");
	const bool col = std::is_same<Layout, col_major>::value;
	for (int s = 0; s < 8; s++) {
		int r, c;
		cuemu::frag_place(cuemu::cur_lane, s, &r, &c);
		f.x[s] = col ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
	}
	f.origin = cuemu::frag_origin{cuemu::FRAG_LOADED, p, ldm, col};
}

static inline void load_matrix_sync(emu_acc &f, const float *p, unsigned ldm, layout_t l)
{
	cuemu::wmma_check(p, ldm, 4, "load_matrix_sync");
	const bool col = l == mem_col_major;
	for (int s = 0; s < 8; s++) {
		int r, c;
		cuemu::frag_place(cuemu::cur_lane, s, &r, &c);
		f.x[s] = col ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
	}
	f.origin = cuemu::frag_origin{cuemu::FRAG_LOADED, p, ldm, col};
}

static inline void store_matrix_sync(float *p, const emu_acc &f, unsigned ldm, layout_t l)
{
	cuemu::wmma_check(p, ldm, 4, "store_matrix_sync");
	const bool col = l == mem_col_major;
	for (int s = 0; s < 8; s++) {
		int r, c;
		cuemu::frag_place(cuemu::cur_lane, s, &r, &c);
		(col ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c]) = f.x[s];
	}
}

template <class Use, class Layout>
static inline void fill_fragment(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout> &f, float v)
{
	for (int s = 0; s < 8; s++)
		f.x[s] = __float2bfloat16_rn(v);
	f.origin = cuemu::frag_origin{cuemu::FRAG_FILLED, nullptr, 0, 0};
}

static inline void fill_fragment(emu_acc &f, float v)
{
	for (int s = 0; s < 8; s++)
		f.x[s] = v;
	f.origin = cuemu::frag_origin{cuemu::FRAG_FILLED, nullptr, 0, 0};
}

template <class LA, class LB>
static inline void mma_sync(emu_acc &d, const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA> &a,
			    const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB> &b,
			    const emu_acc &c)
{
	float out[8];
	cuemu::warp_mma(out, a.x, b.x, c.x, a.origin, b.origin, c.origin);
	for (int s = 0; s < 8; s++)
		d.x[s] = out[s];
	d.origin = cuemu::frag_origin{cuemu::FRAG_COMPUTED, nullptr, 0, 0};
}

} /* namespace wmma */
} /* namespace nvcuda */

#endif
