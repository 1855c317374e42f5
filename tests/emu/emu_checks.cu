/* emu_checks.cu: the CUDA emulator's own test (tests/emu/README.md; label emu), built like
 * the kernels through emu_prep.
 *
 * First, that it computes what CUDA defines: a shared-memory block reduction under every
 * schedule, shuffles of each kind, atomics, wmma products in all four operand layouts and
 * both store layouts with an ldm wider than the tile (small integers, so every order of
 * summation gives the exact result), bf16 rounding, device memory that reads as NaN until
 * written; and the sm_80 instructions of attn_ptx.cuh (the emulated one, tests/emu): the
 * m16n8k16 product against a direct computation from the PTX register layouts on random
 * bf16 values, the elements ldmatrix and ldmatrix.trans deliver, a row read before its
 * writer lane wrote it (no __syncwarp) coming out stale, and cp.async's groups in each
 * EMU_CPASYNC mode (zero fill, wait_group N leaving the newest N pending, uncommitted copies
 * not waited for, copies landing at thread exit, EMU_DROP of a wait). Then that each check the
 * README claims fires: every such case runs in a child
 * process that must end with the emulator's message (or the sanitizers'), or must get the
 * error code the CUDA call would return. The reduction with its barrier removed must give a
 * wrong sum. Cases for AddressSanitizer and UBSan run in the sanitizer build only (EMU_SANITIZE)
 * and say so elsewhere. With EMU_PREP (emu_prep's path), also that emu_prep refuses a static
 * __shared__ variable.
 * usage: emu_checks [EMU_PREP]. Exit status: 0 all passed, 1 a failure. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <type_traits>
#include <vector>

#include "attn_ptx.cuh" /* the emulated one, beside this file's prepared copy */

using namespace nvcuda;

namespace {

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> frag_b;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			printf("emu_checks: %s:%d: %s does not hold\n", __FILE__, __LINE__,  \
			       #cond);                                                      \
			return 1;                                                           \
		}                                                                           \
	} while (0)

const cudaMemcpyKind H2D = cudaMemcpyHostToDevice, D2H = cudaMemcpyDeviceToHost;

/* ---- kernels ---- */

__global__ void reduce_kernel(const float *in, float *out)
{
	extern __shared__ float part[];
	const unsigned t = threadIdx.x;
	part[t] = in[blockIdx.x * blockDim.x + t];
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s)
			part[t] += part[t + s];
		__syncthreads();
	}
	if (t == 0)
		out[blockIdx.x] = part[0];
}

__global__ void shuffle_kernel(int *out)
{
	const int lane = (int)(threadIdx.x & 31);
	const int v = 3 * lane + 1;
	float f = (float)v;
	for (int w = 16; w > 0; w >>= 1)
		f += __shfl_xor_sync(0xffffffffu, f, w);
	int *o = out + threadIdx.x * 5;
	o[0] = __shfl_xor_sync(0xffffffffu, v, 5);
	o[1] = __shfl_sync(0xffffffffu, v, 7);
	o[2] = __shfl_up_sync(0xffffffffu, v, 3);
	o[3] = __shfl_down_sync(0xffffffffu, v, 2);
	o[4] = (int)f;
}

__global__ void atomic_kernel(unsigned *count, float *sum)
{
	atomicAdd(count, 1u);
	atomicAdd(sum, 0.5f);
}

template <class LA, class LB>
__global__ void mma_kernel(const __nv_bfloat16 *a, const __nv_bfloat16 *b, const float *c, float *d,
			   unsigned ld, int store_col)
{
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, LA> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LB> fb;
	frag_c fc;
	wmma::load_matrix_sync(fa, a, ld);
	wmma::load_matrix_sync(fb, b, ld);
	wmma::load_matrix_sync(fc, c, ld, wmma::mem_row_major);
	wmma::mma_sync(fc, fa, fb, fc);
	wmma::store_matrix_sync(d, fc, ld, store_col ? wmma::mem_col_major : wmma::mem_row_major);
}

__global__ void copy_kernel(const float *in, float *out)
{
	out[threadIdx.x] = in[threadIdx.x];
}

__global__ void early_return_kernel(float *p)
{
	if (threadIdx.x >= 32)
		return;
	__syncthreads();
	p[threadIdx.x] = 1.f;
}

__global__ void two_barriers_kernel(float *p)
{
	if (threadIdx.x < 32)
		__syncthreads();
	else
		__syncthreads();
	p[threadIdx.x] = 1.f;
}

__global__ void split_warp_kernel(float *p)
{
	if ((threadIdx.x & 31) < 16)
		__syncwarp();
	else
		__syncwarp();
	p[threadIdx.x] = 1.f;
}

__global__ void shuffle_returned_kernel(float *p)
{
	if ((threadIdx.x & 31) >= 16)
		return;
	p[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.f, 16);
}

__global__ void deadlock_kernel(float *p)
{
	if (threadIdx.x == 0)
		__syncwarp();
	__syncthreads();
	p[threadIdx.x] = 1.f;
}

__global__ void partial_mask_kernel(float *p)
{
	if ((threadIdx.x & 31) < 16)
		__syncwarp(0x0000ffffu);
	p[threadIdx.x] = 1.f;
}

__global__ void wmma_load_kernel(const __nv_bfloat16 *a, unsigned offset, unsigned ldm)
{
	frag_a f;
	wmma::load_matrix_sync(f, a + offset, ldm);
}

__global__ void wmma_lanes_kernel(const __nv_bfloat16 *a, float *d, int lane_dependent, int load_a)
{
	frag_a fa;
	frag_b fb;
	frag_c fc;
	if (load_a)
		wmma::load_matrix_sync(fa, a + (lane_dependent ? (threadIdx.x & 1) * 256 : 0), 16);
	wmma::load_matrix_sync(fb, a, 16);
	wmma::fill_fragment(fc, 0.f);
	wmma::mma_sync(fc, fa, fb, fc);
	wmma::store_matrix_sync(d, fc, 16, wmma::mem_row_major);
}

__global__ void big_shared_kernel(float *p)
{
	extern __shared__ float big[];
	big[threadIdx.x] = 2.f;
	__syncthreads();
	p[threadIdx.x] = big[threadIdx.x];
}

__global__ void global_overflow_kernel(float *p, int n)
{
	if (threadIdx.x == 0)
		p[n] = 1.f;
}

__global__ void shared_overflow_kernel(float *p)
{
	extern __shared__ float small[];
	small[threadIdx.x] = 1.f; /* launched with 32 threads and 31 floats */
	__syncthreads();
	p[threadIdx.x] = small[0];
}

__global__ void misaligned_kernel(const float *p, float *q)
{
	const uint4 v = *reinterpret_cast<const uint4 *>(p + 1);
	q[threadIdx.x] = (float)v.x;
}

/* Two bf16 (their bits) as one register, a in the low half. */
__device__ uint32_t pair(const __nv_bfloat16 &a, const __nv_bfloat16 &b)
{
	return (uint32_t)a.bits | (uint32_t)b.bits << 16;
}

/* Per warp w: D = A B + C, then E = A B2 + D in the same registers (d is c, and the second
 * product uses the other tile set). A is 16 x 16 row-major at a + 256 w; B and B2 are 16 x 8
 * (k, n) row-major at b + 256 w and b + 256 w + 128; C, D, E are 16 x 8 row-major at
 * c + 128 w, d + 256 w, d + 256 w + 128. The registers are built by the layouts of
 * attn_ptx.cuh (PTX ISA, mma.m16n8k16), g = lane / 4, t = lane % 4. */
__global__ void mma16816_kernel(const __nv_bfloat16 *a, const __nv_bfloat16 *b, const float *c,
				float *d)
{
	const unsigned w = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
	const __nv_bfloat16 *A = a + 256 * w, *B = b + 256 * w, *B2 = B + 128;
	const float *C = c + 128 * w;
	float *D = d + 256 * w, *E = D + 128;
	const uint32_t ra[4] = {pair(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
				pair(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
				pair(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
				pair(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
	const uint32_t rb[2] = {pair(B[2 * t * 8 + g], B[(2 * t + 1) * 8 + g]),
				pair(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g])};
	const uint32_t rb2[2] = {pair(B2[2 * t * 8 + g], B2[(2 * t + 1) * 8 + g]),
				 pair(B2[(2 * t + 8) * 8 + g], B2[(2 * t + 9) * 8 + g])};
	const float rc[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t],
			     C[(g + 8) * 8 + 2 * t + 1]};
	float acc[4];
	attn_ptx::mma_16816(acc, ra, rb, rc);
	D[g * 8 + 2 * t] = acc[0];
	D[g * 8 + 2 * t + 1] = acc[1];
	D[(g + 8) * 8 + 2 * t] = acc[2];
	D[(g + 8) * 8 + 2 * t + 1] = acc[3];
	attn_ptx::mma_16816(acc, ra, rb2, acc);
	E[g * 8 + 2 * t] = acc[0];
	E[g * 8 + 2 * t + 1] = acc[1];
	E[(g + 8) * 8 + 2 * t] = acc[2];
	E[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

/* Row slot of the row lane l addresses: a permutation, so that the lanes' rows are not
 * simply in order. */
__device__ __host__ unsigned ldsm_slot(unsigned l)
{
	return (5 * l + 3) % 32;
}

/* Shared memory: per warp 32 rows of 40 bf16 (80 bytes, 16-byte aligned), element e of row
 * slot s of warp w holding (32 w + s) 8 + e + 1. Lane l writes the row lane l + 1 (mod 32)
 * addresses, then (after a __syncwarp if sync) every lane loads with its own row's address by
 * ldsm_x4 and ldsm_x4_t: out[8 tid + i] = r[i], out[8 tid + 4 + i] the transposed r[i]. */
__global__ void ldsm_kernel(uint32_t *out, int sync)
{
	extern __shared__ __align__(16) uint16_t rows[];
	const unsigned w = threadIdx.x / 32, lane = threadIdx.x & 31;
	uint16_t *mine = rows + w * 32 * 40;
	const unsigned ws = ldsm_slot((lane + 1) % 32);
	for (unsigned e = 0; e < 8; e++)
		mine[ws * 40 + e] = (uint16_t)((32 * w + ws) * 8 + e + 1);
	if (sync)
		__syncwarp();
	uint32_t r[4], rt[4];
	attn_ptx::ldsm_x4(r, mine + ldsm_slot(lane) * 40);
	attn_ptx::ldsm_x4_t(rt, mine + ldsm_slot(lane) * 40);
	for (int i = 0; i < 4; i++) {
		out[8 * threadIdx.x + i] = r[i];
		out[8 * threadIdx.x + 4 + i] = rt[i];
	}
}

/* Thread t's four 16-byte rows, in groups: 0 (row 0), 1 (row 1, zero fill: its source is
 * past the end of src and must not be read), 2 (row 2), then row 3 uncommitted. Snapshots of
 * the four rows, read by the thread itself, go to out (4 x 4 uint4 per thread): 0 right after
 * row 0's copy was issued, 1 after wait_group 1, 2 after wait_group 0 (not covering row 3),
 * 3 after a commit, an empty commit and wait_group 1 (covering row 3). */
__global__ void cp_async_kernel(const uint4 *src, uint4 *out)
{
	extern __shared__ uint4 cps[];
	const unsigned t = threadIdx.x, gt = blockIdx.x * blockDim.x + t;
	uint4 *row = cps + 4 * t;
	const uint4 *s = src + 4 * gt;
	uint4 *o = out + 16 * gt;
	attn_ptx::cp_async16(row, s, 16);
	for (int r = 0; r < 4; r++)
		o[r] = row[r];
	attn_ptx::cp_async_commit();
	attn_ptx::cp_async16(row + 1, src + 4 * blockDim.x * gridDim.x, 0);
	attn_ptx::cp_async_commit();
	attn_ptx::cp_async16(row + 2, s + 2, 16);
	attn_ptx::cp_async_commit();
	attn_ptx::cp_async16(row + 3, s + 3, 16);
	attn_ptx::cp_async_wait<1>();
	for (int r = 0; r < 4; r++)
		o[4 + r] = row[r];
	attn_ptx::cp_async_wait<0>();
	for (int r = 0; r < 4; r++)
		o[8 + r] = row[r];
	attn_ptx::cp_async_commit();
	attn_ptx::cp_async_commit();
	attn_ptx::cp_async_wait<1>();
	for (int r = 0; r < 4; r++)
		o[12 + r] = row[r];
}

/* Thread 0 copies two rows (the second never committed) and returns without waiting; the
 * others, which under EMU_SCHEDULE=first run after it has returned, read them: the copies
 * landed when it returned. (No barrier: on the GPU this would be a race; here it shows what
 * happens to copies in flight at a thread's end.) */
__global__ void cp_exit_kernel(const uint4 *src, uint4 *out)
{
	extern __shared__ uint4 cpe[];
	if (threadIdx.x == 0) {
		attn_ptx::cp_async16(cpe, src, 16);
		attn_ptx::cp_async_commit();
		attn_ptx::cp_async16(cpe + 1, src + 1, 16);
		return;
	}
	out[2 * threadIdx.x] = cpe[0];
	out[2 * threadIdx.x + 1] = cpe[1];
}

/* how: 0 a misaligned ldsm_x4 address, 1 lane 31's row past the shared memory's end (launched
 * with 32 rows' bytes: 512), 2 a global address. */
__global__ void ldsm_fault_kernel(const uint16_t *global, int how)
{
	extern __shared__ __align__(16) uint16_t lrows[];
	const unsigned lane = threadIdx.x & 31;
	const uint16_t *p = how == 0 ? lrows + 8 * lane + 4 : how == 1 ? lrows + 8 * (lane + 1)
								      : global + 8 * lane;
	uint32_t r[4];
	attn_ptx::ldsm_x4(r, p);
}

/* how: 0 a global destination, 1 a source size of 8, 2 a misaligned source. */
__global__ void cp_fault_kernel(uint4 *global, int how)
{
	extern __shared__ uint4 crows[];
	if (how == 0)
		attn_ptx::cp_async16(global + 1, global, 16);
	else if (how == 1)
		attn_ptx::cp_async16(crows, global, 8);
	else
		attn_ptx::cp_async16(crows, (const char *)global + 8, 16);
}

/* Lanes 16..31 return before an mma_16816. */
__global__ void mma16816_returned_kernel(float *p)
{
	if ((threadIdx.x & 31) >= 16)
		return;
	const uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
	const float c[4] = {0, 0, 0, 0};
	float d[4];
	attn_ptx::mma_16816(d, a, b, c);
	p[threadIdx.x] = d[0];
}

/* cp_async16 reading one past the end of its source (the sanitizer build's case). */
__global__ void cp_overflow_kernel(const uint4 *src, int n)
{
	extern __shared__ uint4 corows[];
	attn_ptx::cp_async16(corows, src + n, 16);
	attn_ptx::cp_async_commit();
	attn_ptx::cp_async_wait<0>();
}

/* ---- cases: each returns 0 when it holds ---- */

/* Device memory of n floats; dies with the error (the cases below run in children). */
float *dev_floats(size_t n)
{
	void *p = nullptr;
	if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) {
		printf("emu_checks: cudaMalloc failed\n");
		exit(1);
	}
	return static_cast<float *>(p);
}

int reduce_case()
{
	const int nb = 3, nt = 128;
	std::vector<float> h(nb * nt), out(nb);
	for (int i = 0; i < nb * nt; i++)
		h[i] = (float)(i % 17);
	float *in = dev_floats(h.size()), *o = dev_floats(nb);
	CHECK(cudaMemcpy(in, h.data(), h.size() * 4, H2D) == cudaSuccess);
	reduce_kernel<<<nb, nt, nt * sizeof(float)>>>(in, o);
	CHECK(cudaGetLastError() == cudaSuccess);
	CHECK(cudaMemcpy(out.data(), o, nb * 4, D2H) == cudaSuccess);
	for (int b = 0; b < nb; b++) {
		float want = 0;
		for (int t = 0; t < nt; t++)
			want += h[b * nt + t];
		CHECK(out[b] == want);
	}
	cudaFree(in);
	cudaFree(o);
	return 0;
}

/* The same with its first barrier removed: the sum must come out wrong. */
int reduce_wrong_case()
{
	return reduce_case() == 0;
}

int shuffle_case()
{
	int *d = nullptr;
	CHECK(cudaMalloc(&d, 64 * 5 * sizeof(int)) == cudaSuccess);
	shuffle_kernel<<<1, 64>>>(d);
	CHECK(cudaGetLastError() == cudaSuccess);
	std::vector<int> h(64 * 5);
	CHECK(cudaMemcpy(h.data(), d, h.size() * 4, D2H) == cudaSuccess);
	for (int t = 0; t < 64; t++) {
		const int l = t & 31, v = 3 * l + 1;
		const int *o = &h[t * 5];
		CHECK(o[0] == 3 * (l ^ 5) + 1);
		CHECK(o[1] == 3 * 7 + 1);
		CHECK(o[2] == (l >= 3 ? v - 9 : v));
		CHECK(o[3] == (l + 2 < 32 ? v + 6 : v));
		CHECK(o[4] == 3 * 496 + 32);
	}
	cudaFree(d);
	return 0;
}

int atomic_case()
{
	unsigned *c = nullptr;
	float *s = dev_floats(1);
	CHECK(cudaMalloc(&c, sizeof(unsigned)) == cudaSuccess);
	CHECK(cudaMemset(c, 0, sizeof(unsigned)) == cudaSuccess);
	CHECK(cudaMemset(s, 0, sizeof(float)) == cudaSuccess);
	atomic_kernel<<<4, 256>>>(c, s);
	unsigned hc = 0;
	float hs = 0;
	CHECK(cudaMemcpy(&hc, c, sizeof hc, D2H) == cudaSuccess);
	CHECK(cudaMemcpy(&hs, s, sizeof hs, D2H) == cudaSuccess);
	CHECK(hc == 1024 && hs == 512.f);
	cudaFree(c);
	cudaFree(s);
	return 0;
}

/* D = A B + C for one layout combination, every value checked, the padding untouched. */
template <class LA, class LB> int mma_layout(int store_col)
{
	const unsigned ld = 24; /* wider than the tile: the padding must stay NaN */
	const bool acol = std::is_same<LA, wmma::col_major>::value;
	const bool bcol = std::is_same<LB, wmma::col_major>::value;
	std::vector<__nv_bfloat16> ha(16 * ld), hb(16 * ld);
	std::vector<float> hc(16 * ld), hd(16 * ld);
	float A[16][16], B[16][16];
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 16; c++) {
			A[r][c] = (float)((r * 7 + c * 3) % 9 - 4);
			B[r][c] = (float)((r * 5 + c * 11) % 7 - 3);
			ha[acol ? c * ld + r : r * ld + c] = __float2bfloat16_rn(A[r][c]);
			hb[bcol ? c * ld + r : r * ld + c] = __float2bfloat16_rn(B[r][c]);
			hc[r * ld + c] = (float)(r - c);
		}
	void *a = nullptr, *b = nullptr;
	float *c = dev_floats(hc.size()), *d = dev_floats(hd.size());
	CHECK(cudaMalloc(&a, ha.size() * 2) == cudaSuccess);
	CHECK(cudaMalloc(&b, hb.size() * 2) == cudaSuccess);
	CHECK(cudaMemcpy(a, ha.data(), ha.size() * 2, H2D) == cudaSuccess);
	CHECK(cudaMemcpy(b, hb.data(), hb.size() * 2, H2D) == cudaSuccess);
	CHECK(cudaMemcpy(c, hc.data(), hc.size() * 4, H2D) == cudaSuccess);
	mma_kernel<LA, LB><<<1, 32>>>((const __nv_bfloat16 *)a, (const __nv_bfloat16 *)b, c, d, ld,
				     store_col);
	CHECK(cudaGetLastError() == cudaSuccess);
	CHECK(cudaMemcpy(hd.data(), d, hd.size() * 4, D2H) == cudaSuccess);
	for (int r = 0; r < 16; r++)
		for (int n = 0; n < 16; n++) {
			float want = hc[r * ld + n];
			for (int k = 0; k < 16; k++)
				want += A[r][k] * B[k][n];
			CHECK(hd[store_col ? n * ld + r : r * ld + n] == want);
		}
	for (int r = 0; r < 16; r++)
		for (unsigned n = 16; n < ld; n++)
			CHECK(isnan(hd[r * ld + n]));
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	cudaFree(d);
	return 0;
}

int mma_case()
{
	typedef wmma::row_major R;
	typedef wmma::col_major C;
	int bad = 0;
	for (int sc = 0; sc < 2; sc++)
		bad += mma_layout<R, R>(sc) + mma_layout<R, C>(sc) + mma_layout<C, R>(sc) +
		       mma_layout<C, C>(sc);
	return bad;
}

uint16_t bits(float f)
{
	return __float2bfloat16_rn(f).bits;
}

int bf16_case()
{
	CHECK(bits(1.0f) == 0x3f80);
	CHECK(bits(1.0f + 1.0f / 256) == 0x3f80);     /* tie, to even (down) */
	CHECK(bits(1.0f + 3.0f / 256) == 0x3f82);     /* tie, to even (up) */
	CHECK(bits(1.0f + 1.0f / 256 + 1.0f / 65536) == 0x3f81);
	CHECK(bits(-2.5f) == 0xc020);
	CHECK(bits(INFINITY) == 0x7f80 && bits(-INFINITY) == 0xff80);
	CHECK(bits(3.4e38f) == 0x7f80);               /* rounds past the largest bf16 */
	CHECK(bits(NAN) == 0x7fff);
	CHECK(bits(1e-40f) == 0x0001);                /* subnormals kept */
	__nv_bfloat16 h;
	h.bits = 0x4049;
	CHECK(__bfloat162float(h) == 3.140625f);
	return 0;
}

int fresh_memory_case()
{
	float *in = dev_floats(32), *out = dev_floats(32);
	std::vector<float> h(32, 0.f);
	copy_kernel<<<1, 32>>>(in, out);
	CHECK(cudaMemcpy(h.data(), out, 32 * 4, D2H) == cudaSuccess);
	for (float x : h)
		CHECK(isnan(x));
	return 0;
}

/* A deterministic stream of 64-bit values (xorshift), seeded. */
struct rng {
	uint64_t s;
	uint64_t next()
	{
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		return s;
	}
	/* A float in [-4, 4) with 20 random bits. */
	float uniform() { return (float)(next() >> 44) / (float)(1u << 17) - 4.f; }
};

/* mma_16816 on random bf16 inputs in two warps (each its own operands) against the product
 * written out from the PTX layouts: every result bit for bit (a bf16 product is exact in fp32,
 * so only the order of the sum matters: k ascending, from C, as on every emulated product). */
int mma16816_case()
{
	rng r{0x5eed1234abcdull};
	std::vector<__nv_bfloat16> ha(512), hb(512);
	std::vector<float> hc(256), hd(512);
	for (auto &x : ha)
		x = __float2bfloat16_rn(r.uniform());
	for (auto &x : hb)
		x = __float2bfloat16_rn(r.uniform());
	for (auto &x : hc)
		x = r.uniform() * 8.f;
	void *a = nullptr, *b = nullptr;
	float *c = dev_floats(256), *d = dev_floats(512);
	CHECK(cudaMalloc(&a, 1024) == cudaSuccess && cudaMalloc(&b, 1024) == cudaSuccess);
	CHECK(cudaMemcpy(a, ha.data(), 1024, H2D) == cudaSuccess);
	CHECK(cudaMemcpy(b, hb.data(), 1024, H2D) == cudaSuccess);
	CHECK(cudaMemcpy(c, hc.data(), 1024, H2D) == cudaSuccess);
	mma16816_kernel<<<1, 64>>>((const __nv_bfloat16 *)a, (const __nv_bfloat16 *)b, c, d);
	CHECK(cudaGetLastError() == cudaSuccess);
	CHECK(cudaMemcpy(hd.data(), d, 2048, D2H) == cudaSuccess);
	for (int w = 0; w < 2; w++)
		for (int i = 0; i < 16; i++)
			for (int j = 0; j < 8; j++) {
				float acc = hc[128 * w + 8 * i + j];
				for (int k = 0; k < 16; k++)
					acc += __bfloat162float(ha[256 * w + 16 * i + k]) *
					       __bfloat162float(hb[256 * w + 8 * k + j]);
				CHECK(hd[256 * w + 8 * i + j] == acc);
				for (int k = 0; k < 16; k++)
					acc += __bfloat162float(ha[256 * w + 16 * i + k]) *
					       __bfloat162float(hb[256 * w + 128 + 8 * k + j]);
				CHECK(hd[256 * w + 128 + 8 * i + j] == acc);
			}
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	cudaFree(d);
	return 0;
}

/* ldsm_kernel on two warps; counts the register halves that differ from the documented
 * element: *stale those that hold the 0xffff fill, *wrong the others. */
int ldsm_run(int sync, int *stale, int *wrong)
{
	const int nt = 64;
	uint32_t *d = nullptr;
	CHECK(cudaMalloc(&d, nt * 8 * 4) == cudaSuccess);
	ldsm_kernel<<<1, nt, 2 * 32 * 40 * 2>>>(d, sync);
	CHECK(cudaGetLastError() == cudaSuccess);
	std::vector<uint32_t> h(nt * 8);
	CHECK(cudaMemcpy(h.data(), d, h.size() * 4, D2H) == cudaSuccess);
	*stale = *wrong = 0;
	for (int tid = 0; tid < nt; tid++) {
		const unsigned w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
		/* M_i(j, c): element c of the row lane 8i + j addressed. */
		auto m = [w](unsigned i, unsigned j, unsigned c) {
			return (uint16_t)((32 * w + ldsm_slot(8 * i + j)) * 8 + c + 1);
		};
		for (unsigned i = 0; i < 4; i++) {
			const uint16_t want[4] = {m(i, g, 2 * t), m(i, g, 2 * t + 1),
						  m(i, 2 * t, g), m(i, 2 * t + 1, g)};
			const uint32_t got[2] = {h[8 * tid + i], h[8 * tid + 4 + i]};
			for (int k = 0; k < 4; k++) {
				const uint16_t x = (uint16_t)(got[k / 2] >> (16 * (k % 2)));
				if (x != want[k])
					++*(x == 0xffff ? stale : wrong);
			}
		}
	}
	cudaFree(d);
	return 0;
}

/* With the __syncwarp, every element as documented. */
int ldsm_case()
{
	int stale, wrong;
	CHECK(ldsm_run(1, &stale, &wrong) == 0);
	CHECK(stale == 0 && wrong == 0);
	return 0;
}

/* Without it, the first load's rows that lanes reach before their writers: under first, lane
 * 0 reads its row before lane 31 wrote it; under last, every lane but 0 reads its row before
 * the lane below wrote it. Each such row's 8 elements are the fill in 8 halves of the plain
 * load (2 halves in each of 4 lanes), in both warps; nothing else is wrong (the second load
 * comes after every lane's write). */
int ldsm_stale_case(int rows)
{
	int stale, wrong;
	CHECK(ldsm_run(0, &stale, &wrong) == 0);
	CHECK(stale == 2 * 8 * rows && wrong == 0);
	return 0;
}
int ldsm_stale_first_case() { return ldsm_stale_case(1); }
int ldsm_stale_last_case() { return ldsm_stale_case(31); }

/* A row as cp_async_run sees it: D its data, Z zeros, F the 0xff fill, ? none of them. */
char row_kind(const uint4 &x, const uint4 &data)
{
	const uint4 z = {0, 0, 0, 0}, f = {~0u, ~0u, ~0u, ~0u};
	return !memcmp(&x, &data, 16) ? 'D' : !memcmp(&x, &z, 16) ? 'Z'
					      : !memcmp(&x, &f, 16) ? 'F' : '?';
}

/* cp_async_kernel on `blocks` blocks of 32 threads; *late_blocks and *early_blocks count the
 * blocks whose snapshots are those of the late (early) mode, drop_wait the wait (1, 2) that
 * EMU_DROP removes in the late blocks (0: none). */
int cp_async_run(int blocks, int drop_wait, int *late_blocks, int *early_blocks)
{
	const int nt = 32, n = blocks * nt;
	std::vector<uint4> hs(4 * n), ho(16 * n);
	for (int i = 0; i < 4 * n; i++)
		hs[i] = uint4{(unsigned)(4 * i + 1), (unsigned)(4 * i + 2), (unsigned)(4 * i + 3),
			      (unsigned)(4 * i + 4)};
	uint4 *src = nullptr, *out = nullptr;
	CHECK(cudaMalloc(&src, hs.size() * 16) == cudaSuccess);
	CHECK(cudaMalloc(&out, ho.size() * 16) == cudaSuccess);
	CHECK(cudaMemcpy(src, hs.data(), hs.size() * 16, H2D) == cudaSuccess);
	cp_async_kernel<<<blocks, nt, nt * 4 * 16>>>(src, out);
	CHECK(cudaGetLastError() == cudaSuccess);
	CHECK(cudaMemcpy(ho.data(), out, ho.size() * 16, D2H) == cudaSuccess);
	/* per snapshot, rows 0..3 (row_kind) */
	const char *late[3][4] = {{"FFFF", "DZFF", "DZDF", "DZDD"},  /* every wait */
				  {"FFFF", "FFFF", "DZDF", "DZDD"},  /* wait 1 dropped */
				  {"FFFF", "DZFF", "DZFF", "DZDD"}}; /* wait 2 dropped */
	const char *early[4] = {"DFFF", "DZDD", "DZDD", "DZDD"};
	*late_blocks = *early_blocks = 0;
	for (int bk = 0; bk < blocks; bk++) {
		bool is_late = true, is_early = true;
		for (int t = bk * nt; t < (bk + 1) * nt; t++)
			for (int sn = 0; sn < 4; sn++)
				for (int r = 0; r < 4; r++) {
					const char got = row_kind(ho[16 * t + 4 * sn + r],
								  hs[4 * t + r]);
					is_late &= got == late[drop_wait][sn][r];
					is_early &= got == early[sn][r];
				}
		*late_blocks += is_late;
		*early_blocks += is_early;
	}
	cudaFree(src);
	cudaFree(out);
	return 0;
}

/* EMU_CPASYNC=late (wait: which EMU_DROP removes, as the case's environment sets it). */
int cp_late_case(int wait)
{
	int nl, ne;
	CHECK(cp_async_run(3, wait, &nl, &ne) == 0);
	CHECK(nl == 3 && ne == 0);
	return 0;
}
int cp_late_all_case() { return cp_late_case(0); }
int cp_late_drop1_case() { return cp_late_case(1); }
int cp_late_drop2_case() { return cp_late_case(2); }

int cp_early_case()
{
	int nl, ne;
	CHECK(cp_async_run(3, 0, &nl, &ne) == 0);
	CHECK(nl == 0 && ne == 3);
	return 0;
}

/* The default, mixed: blocks of both kinds in one launch. */
int cp_mixed_case()
{
	int nl, ne;
	CHECK(cp_async_run(4, 0, &nl, &ne) == 0);
	CHECK(nl + ne == 4 && nl > 0 && ne > 0);
	return 0;
}

int cp_exit_case()
{
	const int nt = 64;
	std::vector<uint4> hs(2), ho(2 * nt);
	hs[0] = uint4{1, 2, 3, 4};
	hs[1] = uint4{5, 6, 7, 8};
	uint4 *src = nullptr, *out = nullptr;
	CHECK(cudaMalloc(&src, 32) == cudaSuccess);
	CHECK(cudaMalloc(&out, ho.size() * 16) == cudaSuccess);
	CHECK(cudaMemcpy(src, hs.data(), 32, H2D) == cudaSuccess);
	cp_exit_kernel<<<1, nt, 32>>>(src, out);
	CHECK(cudaGetLastError() == cudaSuccess);
	CHECK(cudaMemcpy(ho.data(), out, ho.size() * 16, D2H) == cudaSuccess);
	for (int t = 1; t < nt; t++)
		CHECK(!memcmp(&ho[2 * t], &hs[0], 16) && !memcmp(&ho[2 * t + 1], &hs[1], 16));
	return 0;
}

int ldsm_fault_case(int how)
{
	void *g = nullptr;
	CHECK(cudaMalloc(&g, 1024) == cudaSuccess);
	ldsm_fault_kernel<<<1, 32, 512>>>((const uint16_t *)g, how);
	return 0;
}
int ldsm_misaligned_case() { return ldsm_fault_case(0); }
int ldsm_outside_case() { return ldsm_fault_case(1); }
int ldsm_global_case() { return ldsm_fault_case(2); }

int cp_fault_case(int how)
{
	uint4 *g = nullptr;
	CHECK(cudaMalloc(&g, 1024) == cudaSuccess);
	cp_fault_kernel<<<1, 32, 512>>>(g, how);
	return 0;
}
int cp_global_dst_case() { return cp_fault_case(0); }
int cp_size_case() { return cp_fault_case(1); }
int cp_misaligned_src_case() { return cp_fault_case(2); }

int cp_overflow_case()
{
	uint4 *g = nullptr;
	CHECK(cudaMalloc(&g, 4 * 16) == cudaSuccess);
	cp_overflow_kernel<<<1, 32, 16>>>(g, 4);
	return 0;
}

/* Launches a fault case on 64 threads (or 32); returns only if the emulator let it pass. */
template <class K> int launch_fault(K kernel, unsigned threads)
{
	float *p = dev_floats(64);
	kernel<<<1, threads>>>(p);
	return 0;
}

int early_return_case() { return launch_fault(early_return_kernel, 64); }
int two_barriers_case() { return launch_fault(two_barriers_kernel, 64); }
int split_warp_case() { return launch_fault(split_warp_kernel, 32); }
int shuffle_returned_case() { return launch_fault(shuffle_returned_kernel, 32); }
int deadlock_case() { return launch_fault(deadlock_kernel, 32); }
int partial_mask_case() { return launch_fault(partial_mask_kernel, 32); }
int mma16816_returned_case() { return launch_fault(mma16816_returned_kernel, 32); }

int wmma_misaligned_case()
{
	void *a = nullptr;
	CHECK(cudaMalloc(&a, 4096) == cudaSuccess);
	wmma_load_kernel<<<1, 32>>>((const __nv_bfloat16 *)a, 8, 16);
	return 0;
}

int wmma_ldm_case()
{
	void *a = nullptr;
	CHECK(cudaMalloc(&a, 4096) == cudaSuccess);
	wmma_load_kernel<<<1, 32>>>((const __nv_bfloat16 *)a, 0, 12);
	return 0;
}

int wmma_lanes_case(int lane_dependent, int load_a)
{
	void *a = nullptr;
	float *d = dev_floats(256);
	CHECK(cudaMalloc(&a, 1024) == cudaSuccess);
	CHECK(cudaMemset(a, 0, 1024) == cudaSuccess);
	wmma_lanes_kernel<<<1, 32>>>((const __nv_bfloat16 *)a, d, lane_dependent, load_a);
	return 0;
}
int wmma_lane_pointer_case() { return wmma_lanes_case(1, 1); }
int wmma_unset_case() { return wmma_lanes_case(0, 0); }

int launch_limits_case()
{
	float *p = dev_floats(64);
	std::vector<float> h(64, 0.f);
	/* 64 KiB of dynamic shared memory: refused until the kernel is allowed it. */
	CHECK(cudaMemset(p, 0, 64 * 4) == cudaSuccess);
	big_shared_kernel<<<1, 64, 65536>>>(p);
	CHECK(cudaGetLastError() == cudaErrorInvalidValue);
	CHECK(cudaMemcpy(h.data(), p, 64 * 4, D2H) == cudaSuccess && h[0] == 0.f);
	const cudaFuncAttribute max_shared = cudaFuncAttributeMaxDynamicSharedMemorySize;
	CHECK(cudaFuncSetAttribute(big_shared_kernel, max_shared, 65536) == cudaSuccess);
	big_shared_kernel<<<1, 64, 65536>>>(p);
	CHECK(cudaGetLastError() == cudaSuccess);
	CHECK(cudaMemcpy(h.data(), p, 64 * 4, D2H) == cudaSuccess && h[0] == 2.f);
	CHECK(cudaFuncSetAttribute(big_shared_kernel, max_shared, 228 * 1024) ==
	      cudaErrorInvalidValue);
	copy_kernel<<<1, 2048>>>(p, p);
	CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
	copy_kernel<<<dim3(1, 70000), 32>>>(p, p);
	CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
	cudaStream_t st;
	CHECK(cudaStreamCreate(&st) == cudaSuccess && cudaStreamDestroy(st) == cudaSuccess);
	copy_kernel<<<1, 32, 0, st>>>(p, p); /* a destroyed stream */
	CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
	return 0;
}

int memcpy_case()
{
	float *d = dev_floats(25);
	std::vector<float> h(32, 1.f);
	const cudaError_t bad = cudaErrorInvalidValue;
	CHECK(cudaMemcpy(d, h.data(), 25 * 4, H2D) == cudaSuccess);
	CHECK(cudaMemcpy(d, h.data(), 25 * 4 + 1, H2D) == bad);     /* one byte past */
	CHECK(cudaMemcpy(d + 1, h.data(), 25 * 4, H2D) == bad);     /* from an offset */
	CHECK(cudaMemcpy(h.data(), d, 4, H2D) == bad);              /* the wrong way */
	CHECK(cudaMemcpy(h.data(), h.data() + 1, 4, D2H) == bad);   /* host as device */
	CHECK(cudaMemset(d, 0, 25 * 4 + 4) == bad);
	CHECK(cudaFree(d) == cudaSuccess);
	CHECK(cudaFree(d) == cudaErrorInvalidDevicePointer);
	return 0;
}

int global_overflow_case()
{
	float *p = dev_floats(25);
	global_overflow_kernel<<<1, 32>>>(p, 25);
	return 0;
}

int shared_overflow_case()
{
	float *p = dev_floats(32);
	shared_overflow_kernel<<<1, 32, 31 * sizeof(float)>>>(p);
	return 0;
}

int misaligned_case()
{
	float *p = dev_floats(64);
	CHECK(cudaMemset(p, 0, 64 * 4) == cudaSuccess);
	misaligned_kernel<<<1, 32>>>(p, p + 32);
	return 0;
}

/* ---- the harness ---- */

enum expect { PASSES, DIES };

struct test_case {
	const char *name;
	int (*fn)();
	expect want;
	const char *needle;   /* DIES: text the output must hold */
	const char *schedule; /* EMU_SCHEDULE for the child, or null */
	const char *drop;     /* EMU_DROP for the child, or null */
	bool sanitizer;       /* needs the ASan + UBSan build */
	const char *cpasync = nullptr; /* EMU_CPASYNC for the child, or null */
	const char *site = nullptr;    /* DIES: a second text, the call and its file */
};

/* Runs fn in a child with the environment given; returns its wait status and output. */
int in_child(const test_case &c, std::string *out)
{
	int fd[2];
	if (pipe(fd) != 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	const pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(fd[1], 1);
		dup2(fd[1], 2);
		close(fd[0]);
		close(fd[1]);
		if (c.schedule)
			setenv("EMU_SCHEDULE", c.schedule, 1);
		if (c.drop)
			setenv("EMU_DROP", c.drop, 1);
		if (c.cpasync)
			setenv("EMU_CPASYNC", c.cpasync, 1);
		const int rc = c.fn();
		fflush(stdout);
		fflush(stderr);
		_exit(rc);
	}
	close(fd[1]);
	char buf[4096];
	ssize_t n;
	while ((n = read(fd[0], buf, sizeof buf)) > 0)
		out->append(buf, (size_t)n);
	close(fd[0]);
	int status = 0;
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

/* emu_prep must refuse a static __shared__ array, naming the line. */
int prep_case(const char *prep)
{
	char dir[] = "/tmp/emu_checks.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	const std::string in = std::string(dir) + "/bad.cu", out = std::string(dir) + "/bad.cc",
			  log = std::string(dir) + "/log";
	FILE *f = fopen(in.c_str(), "w");
	if (!f)
		return 1;
	fputs("__global__ void k(float *p)\n{\n\t__shared__ float tile[64];\n"
	      "\tp[0] = tile[0];\n}\n", f);
	fclose(f);
	const std::string cmd = std::string("'") + prep + "' " + in + " " + out + " 2>" + log;
	const int st = system(cmd.c_str());
	std::string text;
	if ((f = fopen(log.c_str(), "r"))) {
		char b[512];
		while (fgets(b, sizeof b, f))
			text += b;
		fclose(f);
	}
	remove(in.c_str());
	remove(out.c_str());
	remove(log.c_str());
	rmdir(dir);
	const char *want = "bad.cu:3: error: a static __shared__ variable";
	const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 1 && text.find(want) != std::string::npos;
	printf("emu_checks: emu_prep refuses static __shared__: %s", ok ? "ok\n" : "FAIL: ");
	if (!ok)
		printf("status %d, '%s'\n", st, text.c_str());
	return ok ? 0 : 1;
}

} /* namespace */

int main(int argc, char **argv)
{
	if (argc > 2) {
		fprintf(stderr, "usage: emu_checks [EMU_PREP]\n");
		return 2;
	}
#ifdef EMU_SANITIZE
	const bool sanitized = true;
#else
	const bool sanitized = false;
#endif
	/* name, function, expectation, text the output must hold, EMU_SCHEDULE, EMU_DROP,
	 * whether it needs the sanitizer build[, EMU_CPASYNC[, a second text]] */
	const test_case cases[] = {
		{"reduce (round)", reduce_case, PASSES, nullptr, "round", nullptr, false},
		{"reduce (warp)", reduce_case, PASSES, nullptr, "warp", nullptr, false},
		{"reduce (first)", reduce_case, PASSES, nullptr, "first", nullptr, false},
		{"reduce (round-rev)", reduce_case, PASSES, nullptr, "round-rev", nullptr, false},
		{"reduce (warp-rev)", reduce_case, PASSES, nullptr, "warp-rev", nullptr, false},
		{"reduce (last)", reduce_case, PASSES, nullptr, "last", nullptr, false},
		{"reduce (random)", reduce_case, PASSES, nullptr, "random", nullptr, false},
		{"reduce, first barrier removed, wrong", reduce_wrong_case, PASSES, nullptr,
		 "round", "reduce_kernel:syncthreads:1", false},
		{"shuffles", shuffle_case, PASSES, nullptr, "first", nullptr, false},
		{"atomics", atomic_case, PASSES, nullptr, nullptr, nullptr, false},
		{"wmma layouts", mma_case, PASSES, nullptr, nullptr, nullptr, false},
		{"bf16 rounding", bf16_case, PASSES, nullptr, nullptr, nullptr, false},
		{"fresh device memory is NaN", fresh_memory_case, PASSES, nullptr, nullptr, nullptr,
		 false},
		{"launch limits", launch_limits_case, PASSES, nullptr, nullptr, nullptr, false},
		{"cudaMemcpy and cudaMemset ranges", memcpy_case, PASSES, nullptr, nullptr, nullptr,
		 false},
		{"barrier after an early return", early_return_case, DIES,
		 "reached by 32 of 64 threads", nullptr, nullptr, false},
		{"two barriers", two_barriers_case, DIES, "at different __syncthreads", nullptr,
		 nullptr, false},
		{"split warp", split_warp_case, DIES, "diverged", nullptr, nullptr, false},
		{"shuffle from a returned lane", shuffle_returned_case, DIES, "which returned",
		 nullptr, nullptr, false},
		{"deadlock", deadlock_case, DIES, "deadlock", nullptr, nullptr, false},
		{"partial mask", partial_mask_case, DIES, "only whole-warp masks", nullptr, nullptr,
		 false},
		{"wmma misaligned", wmma_misaligned_case, DIES, "not 32-byte aligned", nullptr,
		 nullptr, false},
		{"wmma ldm", wmma_ldm_case, DIES, "not a multiple of 16 bytes", nullptr, nullptr,
		 false},
		{"wmma lane-dependent pointer", wmma_lane_pointer_case, DIES, "different addresses",
		 nullptr, nullptr, false},
		{"wmma fragment never loaded", wmma_unset_case, DIES, "never loaded", nullptr,
		 nullptr, false},
		{"global memory overflow", global_overflow_case, DIES, "heap-buffer-overflow",
		 nullptr, nullptr, true},
		{"shared memory overflow", shared_overflow_case, DIES, "heap-buffer-overflow",
		 nullptr, nullptr, true},
		{"misaligned 16-byte load", misaligned_case, DIES, "misaligned address", nullptr,
		 nullptr, true},
		/* attn_ptx.cuh */
		{"mma_16816 (round)", mma16816_case, PASSES, nullptr, "round", nullptr, false},
		{"mma_16816 (warp-rev)", mma16816_case, PASSES, nullptr, "warp-rev", nullptr,
		 false},
		{"ldsm_x4, ldsm_x4_t (first)", ldsm_case, PASSES, nullptr, "first", nullptr, false},
		{"ldsm_x4, ldsm_x4_t (last)", ldsm_case, PASSES, nullptr, "last", nullptr, false},
		{"ldsm_x4, ldsm_x4_t (random)", ldsm_case, PASSES, nullptr, "random", nullptr,
		 false},
		{"ldsm_x4 without __syncwarp reads stale (first)", ldsm_stale_first_case, PASSES,
		 nullptr, "first", nullptr, false},
		{"ldsm_x4 without __syncwarp reads stale (last)", ldsm_stale_last_case, PASSES,
		 nullptr, "last", nullptr, false},
		{"cp.async late", cp_late_all_case, PASSES, nullptr, nullptr, nullptr, false,
		 "late"},
		{"cp.async late, first wait removed", cp_late_drop1_case, PASSES, nullptr, nullptr,
		 "cp_async_kernel:cpwait:1", false, "late"},
		{"cp.async late, second wait removed", cp_late_drop2_case, PASSES, nullptr,
		 "warp", "cp_async_kernel:cpwait:2", false, "late"},
		{"cp.async early", cp_early_case, PASSES, nullptr, nullptr, nullptr, false,
		 "early"},
		{"cp.async mixed", cp_mixed_case, PASSES, nullptr, nullptr, nullptr, false},
		{"cp.async lands at thread exit", cp_exit_case, PASSES, nullptr, "first", nullptr,
		 false, "late"},
		{"ldsm_x4 misaligned", ldsm_misaligned_case, DIES, "is not 16-byte aligned",
		 nullptr, nullptr, false, nullptr, "ldsm_x4 at emu_checks.cu:"},
		{"ldsm_x4 past shared memory", ldsm_outside_case, DIES,
		 "not inside the block's 512 bytes of dynamic shared memory", nullptr, nullptr,
		 false, nullptr, "ldsm_x4 at emu_checks.cu:"},
		{"ldsm_x4 from global memory", ldsm_global_case, DIES,
		 "not inside the block's 512 bytes", nullptr, nullptr, false, nullptr,
		 "ldsm_x4 at emu_checks.cu:"},
		{"cp_async16 into global memory", cp_global_dst_case, DIES,
		 "destination 0x", nullptr, nullptr, false, nullptr,
		 "cp_async16 at emu_checks.cu:"},
		{"cp_async16 source size 8", cp_size_case, DIES, "source size 8", nullptr, nullptr,
		 false, nullptr, "cp_async16 at emu_checks.cu:"},
		{"cp_async16 misaligned source", cp_misaligned_src_case, DIES,
		 "is not 16-byte aligned", nullptr, nullptr, false, nullptr,
		 "cp_async16 at emu_checks.cu:"},
		{"mma_16816 after lanes returned", mma16816_returned_case, DIES,
		 "after 16 lanes returned", nullptr, nullptr, false, nullptr,
		 "mma_16816 at emu_checks.cu:"},
		{"cp_async16 source overflow", cp_overflow_case, DIES, "heap-buffer-overflow",
		 nullptr, nullptr, true, nullptr, "emu_checks.cu:"},
	};
	int bad = 0;
	for (const test_case &c : cases) {
		if (c.sanitizer && !sanitized) {
			printf("emu_checks: %s: skipped (needs the ASan + UBSan build)\n", c.name);
			continue;
		}
		std::string out;
		const int st = in_child(c, &out);
		bool ok;
		if (c.want == PASSES)
			ok = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
		else /* the emulator aborts; a sanitizer aborts or exits non-zero */
			ok = st >= 0 && ((WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT) ||
					 (WIFEXITED(st) && WEXITSTATUS(st) != 0)) &&
			     out.find(c.needle) != std::string::npos &&
			     (!c.site || out.find(c.site) != std::string::npos);
		printf("emu_checks: %s: %s\n", c.name, ok ? "ok" : "FAIL");
		if (!ok) {
			printf("    status %d, output:\n%s\n", st, out.c_str());
			bad++;
		}
	}
	if (argc == 2)
		bad += prep_case(argv[1]);
	printf("emu_checks: %s\n", bad ? "FAILED" : "all passed");
	if (fflush(stdout) != 0 || ferror(stdout))
		return 1;
	return bad ? 1 : 0;
}
