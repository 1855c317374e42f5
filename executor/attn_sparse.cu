/* attn_sparse.cu: balexec's block-sparse (MoBA top-k) attention kernels (attn_sparse.h),
 * called by the CUDA backend for sparse micro-batches (backend_cuda.c), by
 * tests/gpu/test_sparse_attention.cu and by its timing table (executor/README.md
 * "Block-sparse attention kernels"): SparseBalance Sec. II-B Eq. 2 over MoBA's gate (Sec.
 * V-A), at the granularity of a 64-row query tile (a deliberate deviation from MoBA's
 * per-token selection), on the tiles
 * and the online softmax of attn.cu (FlashAttention-2, Dao 2023, Alg. 1 forward and Alg. 2
 * backward, WMMA bf16); written here, no code taken from MoBA, FlashAttention or the
 * public block-sparse kernels.
 *
 * Three steps per forward:
 *  1. block means: Kbar[block][kv head][d] = mean of K over the block (fp32);
 *  2. selection: per (query tile, query head) the gate score of each earlier block of the
 *     document, mean(tile's q rows) . Kbar (fp32), sorted by a bitonic sort in shared memory
 *     on a 64-bit key (score descending, block index ascending: ties to the lower index);
 *     the first k - 1 are sorted again by index and the own block appended: an ascending
 *     list of min(k, own + 1) blocks in the workspace (fixed capacity per list);
 *  3. forward: Alg. 1 over the listed blocks' 64-key tiles, the own block cut at the tile's
 *     causal limit.
 * Backward: Alg. 2, one block per (64-key tile, kv head); the query tiles that selected the
 * tile's block are found by a binary search in their (sorted) lists, chunk by chunk in
 * ascending (head, tile) order, so dK and dV add up in a fixed order (deterministic) without
 * per-block lists of the selecting tiles built with atomics; dQ by fp32 atomics as in
 * attn.cu.
 *
 * Invariants: rows and keys past a document's end are never read (zero-filled) nor written;
 * a query row r sees key c iff c <= r and c's block is in its tile's list; fp32 accumulation
 * everywhere; padded tile and block numbering as attn.cu (segment i owns tiles
 * cu[i] / T + i ..), so one launch covers a packed micro-batch with per-document budgets. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn_sparse.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "attn_sparse.cu needs bf16 tensor cores (sm_80 or newer)"
#endif

namespace {

using namespace nvcuda;
typedef __nv_bfloat16 bf16;

constexpr int BM = 64;              /* query rows per tile */
constexpr int BN = 64;              /* keys per tile; a block is block / 64 tiles */
constexpr int NWARP = 4;
constexpr int NTHREAD = NWARP * 32;
constexpr int PADH = 8;
constexpr int LDP = BN + PADH;
constexpr int LDS = BN + 4;
constexpr int MAX_SORT = 8192;      /* blocks per document the selection sorts (2M tokens at 256) */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> frag_at;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_bt;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

struct sel_args {
	const int32_t *cu, *k_seg;
	const bf16 *q, *k;
	float *kmean;
	int32_t *count, *blocks;
	int nseg, heads, kv_heads, block, kbud, max_k, cap, nbmax, nsort;
};

struct fwd_args {
	const int32_t *cu, *count, *blocks;
	const bf16 *q, *k, *v;
	bf16 *o;
	float *lse;
	unsigned long long *visits;
	int nseg, heads, kv_heads, block, cap;
	int64_t total;
	float scale_log2;
};

struct bwd_args {
	const int32_t *cu, *count, *blocks;
	const bf16 *q, *k, *v, *dout;
	const float *lse, *dsum;
	float *dq_ws;
	bf16 *dk, *dv;
	int nseg, heads, kv_heads, block, cap;
	int64_t total;
	float scale, scale_log2;
};

/* Shared memory, as attn.cu's (32-byte aligned regions for WMMA). */
template <int D> struct fwd_smem {
	static constexpr int LDH = D + PADH;
	static constexpr int LDF = D + 4;
	static constexpr size_t q = 0;
	static constexpr size_t k = q + (size_t)BM * LDH * 2;
	static constexpr size_t v = k + (size_t)BN * LDH * 2;
	static constexpr size_t scr = v + (size_t)BN * LDH * 2;
	static constexpr size_t p = scr + (size_t)NWARP * 16 * LDF * 4;
	static constexpr size_t bytes = p + (size_t)NWARP * 16 * LDP * 2;
};

template <int D> struct bwd_smem {
	static constexpr int LDH = D + PADH;
	static constexpr int LDO = D + 4;
	static constexpr int SCR = 16 * 2 * LDS;
	static_assert(16 * LDO <= SCR, "per-warp scratch holds a 16 x D fp32 tile");
	static constexpr size_t k = 0;
	static constexpr size_t v = k + (size_t)BN * LDH * 2;
	static constexpr size_t q = v + (size_t)BN * LDH * 2;
	static constexpr size_t dout = q + (size_t)BM * LDH * 2;
	static constexpr size_t scr = dout + (size_t)BM * LDH * 2;
	static constexpr size_t pds = scr + (size_t)NWARP * SCR * 4;
	static constexpr size_t rows = pds + (size_t)BN * LDP * 2;
	static constexpr size_t flags = rows + (size_t)2 * BM * 4;
	static constexpr size_t bytes = flags + NTHREAD;
};

static_assert(fwd_smem<128>::p % 32 == 0 && fwd_smem<64>::p % 32 == 0, "wmma alignment");
static_assert(bwd_smem<128>::bytes <= 113 * 1024, "two backward blocks per H100 SM");
static_assert(bwd_smem<128>::rows % 32 == 0 && bwd_smem<64>::rows % 32 == 0, "wmma alignment");

/* Segment and local index of padded item b (tiles of T rows or blocks of T keys): the
 * largest segment i with cu[i] / T + i <= b (attn.cu's numbering). */
__device__ __forceinline__ int find_item(const int32_t *cu, int nseg, int t, int64_t b, int *seg)
{
	int lo = 0, hi = nseg - 1;
	while (lo < hi) {
		int mid = (lo + hi + 1) >> 1;
		if ((int64_t)(cu[mid] / t) + mid <= b)
			lo = mid;
		else
			hi = mid - 1;
	}
	*seg = lo;
	return (int)(b - ((int64_t)(cu[lo] / t) + lo));
}

/* 64 rows of one head into shared memory (leading dimension D + 8); rows at or past len are
 * zero. */
template <int D>
__device__ __forceinline__ void load_rows(bf16 *dst, const bf16 *__restrict__ src, int64_t start,
					  int row0, int len, int nh, int h)
{
	constexpr int CH = D / 8;
	constexpr int LDH = D + PADH;
	for (int i = threadIdx.x; i < 64 * CH; i += NTHREAD) {
		int r = i / CH, c = i % CH;
		uint4 val = make_uint4(0, 0, 0, 0);
		if (row0 + r < len)
			val = __ldg(reinterpret_cast<const uint4 *>(
				src + ((start + row0 + r) * nh + h) * D + c * 8));
		*reinterpret_cast<uint4 *>(dst + r * LDH + c * 8) = val;
	}
}

__device__ __forceinline__ uint4 to_bf16x8(const float *x)
{
	__nv_bfloat162 h[4];
	for (int i = 0; i < 4; i++)
		h[i] = __floats2bfloat162_rn(x[2 * i], x[2 * i + 1]);
	uint4 u;
	memcpy(&u, h, sizeof u);
	return u;
}

/* Step 1: the mean of K over each block, per kv head (MoBA's mean-pooled keys). One thread
 * per dimension; grid (padded blocks, kv heads). */
template <int D> __global__ void sp_mean_kernel(sel_args a)
{
	int seg;
	const int b = find_item(a.cu, a.nseg, a.block, blockIdx.x, &seg);
	const int64_t start = a.cu[seg];
	const int len = a.cu[seg + 1] - a.cu[seg];
	const int c0 = b * a.block;
	if (c0 >= len)
		return;
	const int c1 = min(c0 + a.block, len), kvh = blockIdx.y, d = threadIdx.x;
	float s = 0.f;
	for (int c = c0; c < c1; c++)
		s += __bfloat162float(a.k[((start + c) * a.kv_heads + kvh) * D + d]);
	a.kmean[((int64_t)blockIdx.x * a.kv_heads + kvh) * D + d] = s / (float)(c1 - c0);
}

/* Sort key of a candidate block: ascending keys give descending scores, then ascending
 * block indices (the deterministic tie-break). NaN counts as -inf, -0 as +0. */
__device__ __forceinline__ unsigned long long cand_key(float s, int b)
{
	if (isnan(s))
		s = -INFINITY;
	if (s == 0.f)
		s = 0.f;
	unsigned u = __float_as_uint(s);
	u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* order-preserving as unsigned */
	return ((unsigned long long)(~u) << 32) | (unsigned)b;
}

/* Ascending bitonic sort of n (a power of two) keys in shared memory, whole block. */
__device__ void bitonic_sort(unsigned long long *x, int n)
{
	for (int k = 2; k <= n; k <<= 1)
		for (int j = k >> 1; j > 0; j >>= 1) {
			for (int i = threadIdx.x; i < n; i += blockDim.x) {
				const int l = i ^ j;
				if (l > i) {
					const unsigned long long p = x[i], r = x[l];
					if ((p > r) == ((i & k) == 0)) {
						x[i] = r;
						x[l] = p;
					}
				}
			}
			__syncthreads();
		}
}

/* Step 2: MoBA's top-k per (64-row query tile, query head) (file comment). Grid (padded
 * tiles, heads); dynamic shared memory: the sort keys (a power of two >= nbmax) and qbar. */
template <int D> __global__ void __launch_bounds__(NTHREAD) sp_select_kernel(sel_args a)
{
	extern __shared__ __align__(128) unsigned char smem[];
	const int h = blockIdx.y, kvh = h / (a.heads / a.kv_heads);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int seg;
	const int tile = find_item(a.cu, a.nseg, BM, blockIdx.x, &seg);
	const int64_t start = a.cu[seg];
	const int len = a.cu[seg + 1] - a.cu[seg];
	const int q0 = tile * BM;
	if (q0 >= len)
		return; /* spare tile */
	const int own = q0 / a.block;
	const int64_t row = (int64_t)blockIdx.x * a.heads + h;
	int32_t *list = a.blocks + row * a.cap;
	if (own >= a.nbmax) { /* a document longer than max_len: no list (the output is NaN) */
		if (threadIdx.x == 0)
			a.count[row] = 0;
		return;
	}
	int ks = a.k_seg ? a.k_seg[seg] : a.kbud;
	ks = max(1, min(ks, a.max_k));
	const int keep = min(ks - 1, own); /* top k - 1 earlier blocks (k counts the own) */
	if (threadIdx.x == 0)
		a.count[row] = keep + 1;
	if (keep == own) { /* every earlier block: no scores needed */
		for (int i = threadIdx.x; i <= own; i += NTHREAD)
			list[i] = i;
		return;
	}
	int n = 1;
	while (n < own)
		n <<= 1;
	unsigned long long *key = reinterpret_cast<unsigned long long *>(smem);
	float *qbar = reinterpret_cast<float *>(smem + (size_t)a.nsort * 8);
	/* The mean of the tile's query rows. */
	const int nrow = min(BM, len - q0);
	for (int d = threadIdx.x; d < D; d += NTHREAD) {
		float s = 0.f;
		for (int r = 0; r < nrow; r++)
			s += __bfloat162float(a.q[((start + q0 + r) * a.heads + h) * D + d]);
		qbar[d] = s / (float)nrow;
	}
	__syncthreads();
	/* Gate scores, one warp per block, lanes over the dimensions. */
	const int64_t gb0 = (int64_t)(a.cu[seg] / a.block) + seg; /* padded block of block 0 */
	for (int b = warp; b < n; b += NWARP) {
		float s = 0.f;
		if (b < own) {
			const float *m = a.kmean + ((gb0 + b) * a.kv_heads + kvh) * D;
			for (int e = lane; e < D; e += 32)
				s += qbar[e] * m[e];
#pragma unroll
			for (int w = 16; w > 0; w >>= 1)
				s += __shfl_xor_sync(0xffffffffu, s, w);
		}
		if (lane == 0)
			key[b] = b < own ? cand_key(s, b) : ~0ull;
	}
	__syncthreads();
	bitonic_sort(key, n);
	/* The first keep are the winners; sort them by block index. */
	for (int i = threadIdx.x; i < n; i += NTHREAD)
		key[i] = i < keep ? (key[i] & 0xffffffffull) : ~0ull;
	__syncthreads();
	bitonic_sort(key, n);
	for (int i = threadIdx.x; i < keep; i += NTHREAD)
		list[i] = (int32_t)key[i];
	if (threadIdx.x == 0)
		list[keep] = own;
}

/* Step 3, forward: FA2 Algorithm 1 over the listed blocks, one block per (64-row query tile,
 * query head); the tile body is attn.cu's (S = Q K^T, online softmax in base 2, O += P V)
 * with the causal mask key <= row. */
template <int D>
__global__ void __launch_bounds__(NTHREAD) sp_fwd_kernel(fwd_args a)
{
	typedef fwd_smem<D> L;
	constexpr int LDH = L::LDH, LDF = L::LDF;
	extern __shared__ __align__(128) unsigned char smem[];
	bf16 *qs = reinterpret_cast<bf16 *>(smem + L::q);
	bf16 *ks = reinterpret_cast<bf16 *>(smem + L::k);
	bf16 *vs = reinterpret_cast<bf16 *>(smem + L::v);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	float *scr = reinterpret_cast<float *>(smem + L::scr) + warp * 16 * LDF;
	bf16 *ps = reinterpret_cast<bf16 *>(smem + L::p) + warp * 16 * LDP;

	const int h = blockIdx.y;
	const int kvh = h / (a.heads / a.kv_heads);
	/* Reverse order: long documents' last (longest-running) tiles first. */
	const int64_t gt = (int64_t)gridDim.x - 1 - blockIdx.x;
	int seg;
	const int tile = find_item(a.cu, a.nseg, BM, gt, &seg);
	const int64_t start = a.cu[seg];
	const int len = a.cu[seg + 1] - a.cu[seg];
	const int q0 = tile * BM;
	if (q0 >= len)
		return;
	const int own = q0 / a.block;
	const int nsel = a.count[gt * a.heads + h];
	const int32_t *list = a.blocks + (gt * a.heads + h) * a.cap;

	load_rows<D>(qs, a.q, start, q0, len, a.heads, h);
	__syncthreads();
	frag_a qf[D / 16];
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++)
		wmma::load_matrix_sync(qf[kk], qs + warp * 16 * LDH + kk * 16, LDH);

	const int rr = lane >> 1, half = lane & 1;
	const int row = q0 + warp * 16 + rr;
	const bool row_ok = row < len;
	float m = -INFINITY, l = 0.f;
	float acc[D / 2];
#pragma unroll
	for (int j = 0; j < D / 2; j++)
		acc[j] = 0.f;
	unsigned long long visited = 0;

	for (int j = 0; j < nsel; j++) {
		const int b = list[j];
		/* A past block is whole and before the tile; the own block ends at the tile's
		 * last row (causal). */
		const int kend = b == own ? min(q0 + BM, len) : min((b + 1) * a.block, len);
		for (int k0 = b * a.block; k0 < kend; k0 += BN) {
			visited++;
			__syncthreads();
			load_rows<D>(ks, a.k, start, k0, len, a.kv_heads, kvh);
			load_rows<D>(vs, a.v, start, k0, len, a.kv_heads, kvh);
			__syncthreads();
#pragma unroll
			for (int jj = 0; jj < BN / 16; jj++) {
				frag_c s;
				wmma::fill_fragment(s, 0.f);
#pragma unroll
				for (int kk = 0; kk < D / 16; kk++) {
					frag_bt kf;
					wmma::load_matrix_sync(kf, ks + jj * 16 * LDH + kk * 16,
							       LDH);
					wmma::mma_sync(s, qf[kk], kf, s);
				}
				wmma::store_matrix_sync(scr + jj * 16, s, LDF, wmma::mem_row_major);
			}
			__syncwarp();
			float sv[BN / 2];
			float tmax = -INFINITY;
#pragma unroll
			for (int jj = 0; jj < BN / 2; jj++) {
				const int c = half + 2 * jj;
				const int key = k0 + c;
				float x = scr[rr * LDF + c] * a.scale_log2;
				if (!row_ok || key > row || key >= len)
					x = -INFINITY;
				sv[jj] = x;
				tmax = fmaxf(tmax, x);
			}
			tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
			const float m_new = fmaxf(m, tmax);
			const float m_use = m_new == -INFINITY ? 0.f : m_new;
			const float alpha = exp2f(m - m_use);
			float rs = 0.f;
#pragma unroll
			for (int jj = 0; jj < BN / 2; jj++) {
				const float p = exp2f(sv[jj] - m_use);
				rs += p;
				ps[rr * LDP + half + 2 * jj] = __float2bfloat16_rn(p);
			}
			rs += __shfl_xor_sync(0xffffffffu, rs, 1);
			l = l * alpha + rs;
			m = m_new;
			__syncwarp();
			frag_a pf[BN / 16];
#pragma unroll
			for (int kk = 0; kk < BN / 16; kk++)
				wmma::load_matrix_sync(pf[kk], ps + kk * 16, LDP);
#pragma unroll
			for (int jj = 0; jj < D / 16; jj++) {
				frag_c o;
				wmma::fill_fragment(o, 0.f);
#pragma unroll
				for (int kk = 0; kk < BN / 16; kk++) {
					frag_b vf;
					wmma::load_matrix_sync(vf, vs + kk * 16 * LDH + jj * 16,
							       LDH);
					wmma::mma_sync(o, pf[kk], vf, o);
				}
				wmma::store_matrix_sync(scr + jj * 16, o, LDF, wmma::mem_row_major);
			}
			__syncwarp();
#pragma unroll
			for (int jj = 0; jj < D / 2; jj++)
				acc[jj] = acc[jj] * alpha + scr[rr * LDF + half + 2 * jj];
			__syncwarp();
		}
	}
	if (a.visits && threadIdx.x == 0)
		atomicAdd(a.visits, visited);

	/* Alg. 1 lines 13-16. A row that saw no key (no list: a document longer than max_len)
	 * gets l = 0, hence NaN, never a silent value. */
	const float inv = row_ok ? 1.f / l : 0.f;
#pragma unroll
	for (int j = 0; j < D / 2; j++)
		scr[rr * LDF + half + 2 * j] = acc[j] * inv;
	if (row_ok && half == 0)
		a.lse[(int64_t)h * a.total + start + row] = (m + log2f(l)) * LN2;
	__syncwarp();
	for (int i = lane; i < 16 * (D / 8); i += 32) {
		const int r = i / (D / 8), c = i % (D / 8);
		const int orow = q0 + warp * 16 + r;
		if (orow < len)
			*reinterpret_cast<uint4 *>(a.o + ((start + orow) * a.heads + h) * D +
						   c * 8) = to_bf16x8(scr + r * LDF + c * 8);
	}
}

/* Backward preprocessing (Alg. 2 lines 4-5): dsum = rowsum(dO o O), dQ accumulator = 0. One
 * warp per (token, head). */
template <int D>
__global__ void sp_bwd_pre_kernel(const bf16 *__restrict__ o, const bf16 *__restrict__ dout,
				  float *dq_ws, float *dsum, int64_t total, int heads)
{
	constexpr int E = D / 32;
	const int64_t id = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	const int lane = threadIdx.x & 31;
	if (id >= total * heads)
		return;
	float s = 0.f;
#pragma unroll
	for (int e = 0; e < E; e++) {
		const int64_t at = id * D + lane * E + e;
		s += __bfloat162float(o[at]) * __bfloat162float(dout[at]);
		dq_ws[at] = 0.f;
	}
#pragma unroll
	for (int w = 16; w > 0; w >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, w);
	if (lane == 0)
		dsum[(id % heads) * total + id / heads] = s;
}

/* Whether query tile gt (padded), head h listed block b: binary search in its ascending
 * list. */
__device__ __forceinline__ bool listed(const bwd_args &a, int64_t gt, int h, int b)
{
	const int64_t row = gt * a.heads + h;
	const int32_t *list = a.blocks + row * a.cap;
	int lo = 0, hi = a.count[row] - 1;
	while (lo <= hi) {
		const int mid = (lo + hi) >> 1;
		const int x = list[mid];
		if (x == b)
			return true;
		if (x < b)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return false;
}

/* Backward, FA2 Algorithm 2 over the query tiles that selected this key tile's block: one
 * block per (64-key tile, kv head), heads of the GQA group and query tiles in ascending
 * order, found NTHREAD candidates at a time (file comment). The tile body is attn.cu's. */
template <int D>
__global__ void __launch_bounds__(NTHREAD) sp_bwd_kernel(bwd_args a)
{
	typedef bwd_smem<D> L;
	constexpr int LDH = L::LDH, LDO = L::LDO;
	extern __shared__ __align__(128) unsigned char smem[];
	bf16 *ks = reinterpret_cast<bf16 *>(smem + L::k);
	bf16 *vs = reinterpret_cast<bf16 *>(smem + L::v);
	bf16 *qs = reinterpret_cast<bf16 *>(smem + L::q);
	bf16 *dos = reinterpret_cast<bf16 *>(smem + L::dout);
	bf16 *pds = reinterpret_cast<bf16 *>(smem + L::pds);
	float *lse2 = reinterpret_cast<float *>(smem + L::rows);
	float *dsum = lse2 + BM;
	unsigned char *flags = smem + L::flags;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	float *scr = reinterpret_cast<float *>(smem + L::scr) + warp * L::SCR;
	float *scr2 = scr + 16 * LDS;

	const int kvh = blockIdx.y;
	const int group = a.heads / a.kv_heads;
	int seg;
	/* Key tiles in their natural order: under the causal mask key tile j is seen by the
	 * query tiles from j on, so the first tiles carry the most work and start first (the
	 * forward's reversed order here left the heaviest tiles for the tail). */
	const int tile = find_item(a.cu, a.nseg, BN, (int64_t)blockIdx.x, &seg);
	const int64_t start = a.cu[seg];
	const int len = a.cu[seg + 1] - a.cu[seg];
	const int n0 = tile * BN;
	if (n0 >= len)
		return;
	const int b = n0 / a.block;
	/* Causal: query tiles before the key tile see none of it. */
	const int mt0 = n0 / BM, mt1 = (len + BM - 1) / BM, nmt = mt1 - mt0;
	const int ncand = group * nmt;
	const int64_t tbase = (int64_t)(a.cu[seg] / BM) + seg;

	load_rows<D>(ks, a.k, start, n0, len, a.kv_heads, kvh);
	load_rows<D>(vs, a.v, start, n0, len, a.kv_heads, kvh);
	frag_c dk[D / 16], dv[D / 16];
#pragma unroll
	for (int j = 0; j < D / 16; j++) {
		wmma::fill_fragment(dk[j], 0.f);
		wmma::fill_fragment(dv[j], 0.f);
	}
	const int rr = lane >> 1, half = lane & 1;
	const int key = n0 + warp * 16 + rr;

	for (int c0 = 0; c0 < ncand; c0 += NTHREAD) {
		__syncthreads(); /* the previous chunk's flags are read */
		{
			const int c = c0 + (int)threadIdx.x;
			unsigned char f = 0;
			if (c < ncand) {
				const int hh = c / nmt, mt = mt0 + c % nmt;
				/* A tile of block b has b as its own block; later ones search. */
				f = (mt * BM) / a.block == b ||
				    listed(a, tbase + mt, kvh * group + hh, b);
			}
			flags[threadIdx.x] = f;
		}
		__syncthreads();
		const int cn = min(NTHREAD, ncand - c0);
		for (int ci = 0; ci < cn; ci++) {
			if (!flags[ci])
				continue;
			const int hh = (c0 + ci) / nmt, mt = mt0 + (c0 + ci) % nmt;
			const int h = kvh * group + hh;
			const int q0 = mt * BM;
			__syncthreads();
			load_rows<D>(qs, a.q, start, q0, len, a.heads, h);
			load_rows<D>(dos, a.dout, start, q0, len, a.heads, h);
			if (threadIdx.x < BM) {
				const int r = q0 + threadIdx.x;
				const int64_t at = (int64_t)h * a.total + start + r;
				lse2[threadIdx.x] = r < len ? a.lse[at] * LOG2E : 0.f;
				dsum[threadIdx.x] = r < len ? a.dsum[at] : 0.f;
			}
			__syncthreads();
			/* S^T = K Q^T, dP^T = V dO^T (16 keys x 64 queries per warp). */
#pragma unroll 1
			for (int j = 0; j < BM / 16; j++) {
				frag_c s, dp;
				wmma::fill_fragment(s, 0.f);
				wmma::fill_fragment(dp, 0.f);
#pragma unroll
				for (int kk = 0; kk < D / 16; kk++) {
					frag_a x;
					frag_bt y;
					wmma::load_matrix_sync(x, ks + warp * 16 * LDH + kk * 16,
							       LDH);
					wmma::load_matrix_sync(y, qs + j * 16 * LDH + kk * 16, LDH);
					wmma::mma_sync(s, x, y, s);
					wmma::load_matrix_sync(x, vs + warp * 16 * LDH + kk * 16,
							       LDH);
					wmma::load_matrix_sync(y, dos + j * 16 * LDH + kk * 16,
							       LDH);
					wmma::mma_sync(dp, x, y, dp);
				}
				wmma::store_matrix_sync(scr + j * 16, s, LDS, wmma::mem_row_major);
				wmma::store_matrix_sync(scr2 + j * 16, dp, LDS,
							wmma::mem_row_major);
			}
			__syncwarp();
			/* P = exp(scale S - L), masked entries 0 (causal, document end). */
#pragma unroll
			for (int j = 0; j < BM / 2; j++) {
				const int c = half + 2 * j;
				const int r = q0 + c;
				const bool ok = r < len && key < len && key <= r;
				const float x = scr[rr * LDS + c] * a.scale_log2 - lse2[c];
				const float p = ok ? exp2f(x) : 0.f;
				scr[rr * LDS + c] = p;
				pds[(warp * 16 + rr) * LDP + c] = __float2bfloat16_rn(p);
			}
			__syncwarp();
			/* dV += P^T dO. */
#pragma unroll 1
			for (int kk = 0; kk < BM / 16; kk++) {
				frag_a x;
				wmma::load_matrix_sync(x, pds + warp * 16 * LDP + kk * 16, LDP);
#pragma unroll
				for (int j = 0; j < D / 16; j++) {
					frag_b y;
					wmma::load_matrix_sync(y, dos + kk * 16 * LDH + j * 16,
							       LDH);
					wmma::mma_sync(dv[j], x, y, dv[j]);
				}
			}
			__syncwarp();
			/* dS = P o (dP - D). */
#pragma unroll
			for (int j = 0; j < BM / 2; j++) {
				const int c = half + 2 * j;
				const float ds = scr[rr * LDS + c] * (scr2[rr * LDS + c] - dsum[c]);
				pds[(warp * 16 + rr) * LDP + c] = __float2bfloat16_rn(ds);
			}
			__syncwarp();
			/* dK += dS^T Q (scale at the write). */
#pragma unroll 1
			for (int kk = 0; kk < BM / 16; kk++) {
				frag_a x;
				wmma::load_matrix_sync(x, pds + warp * 16 * LDP + kk * 16, LDP);
#pragma unroll
				for (int j = 0; j < D / 16; j++) {
					frag_b y;
					wmma::load_matrix_sync(y, qs + kk * 16 * LDH + j * 16, LDH);
					wmma::mma_sync(dk[j], x, y, dk[j]);
				}
			}
			__syncthreads();
			/* dQ += scale dS K, added atomically to the fp32 workspace. */
			const int qrow0 = q0 + warp * 16;
			for (int j = 0; j < D / 16; j++) {
				frag_c dq;
				wmma::fill_fragment(dq, 0.f);
#pragma unroll
				for (int kk = 0; kk < BN / 16; kk++) {
					frag_at x;
					frag_b y;
					wmma::load_matrix_sync(x, pds + kk * 16 * LDP + warp * 16,
							       LDP);
					wmma::load_matrix_sync(y, ks + kk * 16 * LDH + j * 16, LDH);
					wmma::mma_sync(dq, x, y, dq);
				}
				wmma::store_matrix_sync(scr, dq, LDS, wmma::mem_row_major);
				__syncwarp();
				if (qrow0 < len) {
					for (int e = lane; e < 256; e += 32) {
						const int i = e >> 4, c = e & 15;
						if (qrow0 + i < len) {
							const int64_t qr = start + qrow0 + i;
							const int64_t at = (qr * a.heads + h) * D;
							atomicAdd(a.dq_ws + at + j * 16 + c,
								  scr[i * LDS + c] * a.scale);
						}
					}
				}
				__syncwarp();
			}
		}
	}

	/* Write dK (times the scale) and dV, rows below len only. */
	for (int which = 0; which < 2; which++) {
#pragma unroll
		for (int j = 0; j < D / 16; j++)
			wmma::store_matrix_sync(scr + j * 16, which ? dv[j] : dk[j], LDO,
						wmma::mem_row_major);
		__syncwarp();
		bf16 *out = which ? a.dv : a.dk;
		const float mul = which ? 1.f : a.scale;
		for (int i = lane; i < 16 * (D / 8); i += 32) {
			const int r = i / (D / 8), c = i % (D / 8);
			const int krow = n0 + warp * 16 + r;
			if (krow < len) {
				float x[8];
				for (int e = 0; e < 8; e++)
					x[e] = scr[r * LDO + c * 8 + e] * mul;
				*reinterpret_cast<uint4 *>(
					out + ((start + krow) * a.kv_heads + kvh) * D + c * 8) =
					to_bf16x8(x);
			}
		}
		__syncwarp();
	}
}

/* dQ: fp32 workspace to bf16, four values per thread. */
__global__ void sp_dq_convert_kernel(const float4 *__restrict__ ws, uint2 *dq, int64_t n4)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
	     i += (int64_t)gridDim.x * blockDim.x) {
		const float4 x = ws[i];
		__nv_bfloat162 h[2] = {__floats2bfloat162_rn(x.x, x.y),
				       __floats2bfloat162_rn(x.z, x.w)};
		uint2 u;
		memcpy(&u, h, sizeof u);
		dq[i] = u;
	}
}

/* ---- host side ---- */

/* The workspace: block means, list counts, lists, dQ accumulator, row sums; each region
 * 256-byte aligned. */
struct ws_layout {
	int64_t nb_pad, nt_pad;
	int cap, nbmax, nsort, max_k;
	size_t kmean, count, blocks, dq, dsum, bytes;
};

size_t align256(size_t x)
{
	return (x + 255) & ~(size_t)255;
}

int check_and_layout(const struct bp_sparse_shape *s, const char *what, struct ws_layout *w,
		     struct bp_error *err)
{
	if (!s)
		return bp_errorf(err, "%s: no shape given", what);
	if (s->nseg < 0 || s->heads < 0 || s->kv_heads < 0 || s->total < 0 || s->max_len < 0 ||
	    s->max_k < 0)
		return bp_errorf(err, "%s: negative size in shape (nseg %d, heads %d, kv_heads %d, "
				 "total %lld, max_len %d, max_k %d)", what, s->nseg, s->heads,
				 s->kv_heads, (long long)s->total, s->max_len, s->max_k);
	if (s->head_dim != 64 && s->head_dim != 128)
		return bp_errorf(err, "%s: unsupported head_dim %d (64 or 128)", what, s->head_dim);
	if (s->heads == 0 || s->kv_heads == 0)
		return bp_errorf(err, "%s: heads (%d) and kv_heads (%d) must be positive", what,
				 s->heads, s->kv_heads);
	if (s->heads % s->kv_heads != 0)
		return bp_errorf(err, "%s: heads (%d) is not a multiple of kv_heads (%d)", what,
				 s->heads, s->kv_heads);
	if (s->heads > 65535)
		return bp_errorf(err, "%s: heads %d above the grid limit 65535", what, s->heads);
	if (s->block < BN || s->block % BN != 0)
		return bp_errorf(err, "%s: block %d is not a positive multiple of %d tokens (the "
				 "kernel's key tile)", what, s->block, BN);
	if (s->k < 1)
		return bp_errorf(err, "%s: budget k %d is below 1 block", what, s->k);
	w->max_k = s->max_k ? s->max_k : s->k;
	if (w->max_k < s->k)
		return bp_errorf(err, "%s: max_k %d below k %d", what, s->max_k, s->k);
	if (s->total > INT32_MAX)
		return bp_errorf(err, "%s: total %lld beyond int32 offsets", what,
				 (long long)s->total);
	if (s->max_len > s->total)
		return bp_errorf(err, "%s: max_len %d above total %lld", what, s->max_len,
				 (long long)s->total);
	if (!isfinite(s->scale))
		return bp_errorf(err, "%s: scale is not finite", what);
	w->nbmax = (s->max_len + s->block - 1) / s->block;
	if (w->nbmax > MAX_SORT)
		return bp_errorf(err, "%s: a document of %d tokens has %d blocks of %d, above the "
				 "selection's %d", what, s->max_len, w->nbmax, s->block, MAX_SORT);
	w->nsort = 1;
	while (w->nsort < w->nbmax)
		w->nsort <<= 1;
	w->cap = w->max_k < w->nbmax ? w->max_k : w->nbmax;
	if (w->cap < 1)
		w->cap = 1;
	w->nb_pad = s->total / s->block + s->nseg;
	w->nt_pad = s->total / BM + s->nseg;
	if (w->nt_pad > INT_MAX)
		return bp_errorf(err, "%s: %lld tiles above the grid limit", what,
				 (long long)w->nt_pad);
	const size_t H = (size_t)s->heads, KH = (size_t)s->kv_heads, D = (size_t)s->head_dim;
	const size_t T = (size_t)s->total;
	w->kmean = 0;
	w->count = align256(w->kmean + (size_t)w->nb_pad * KH * D * 4);
	w->blocks = align256(w->count + (size_t)w->nt_pad * H * 4);
	w->dq = align256(w->blocks + (size_t)w->nt_pad * H * (size_t)w->cap * 4);
	w->dsum = align256(w->dq + T * H * D * 4);
	w->bytes = align256(w->dsum + T * H * 4);
	return 0;
}

int check_ptr(const void *p, int align, const char *what, const char *name, struct bp_error *err)
{
	if (!align)
		return 0;
	if (!p)
		return bp_errorf(err, "%s: '%s' is null", what, name);
	if ((uintptr_t)p % (uintptr_t)align != 0)
		return bp_errorf(err, "%s: '%s' is not %d-byte aligned", what, name, align);
	return 0;
}

int cuda_check(cudaError_t e, const char *what, struct bp_error *err)
{
	if (e == cudaSuccess)
		return 0;
	return bp_errorf(err, "%s: cuda error: %s", what, cudaGetErrorString(e));
}

template <int D>
int launch_select(const struct bp_sparse_shape *s, const ws_layout &w, const sel_args &a,
		  cudaStream_t st, struct bp_error *err)
{
	const char *what = "sparse attention selection";
	if (w.nb_pad > INT_MAX)
		return bp_errorf(err, "%s: %lld blocks above the grid limit", what,
				 (long long)w.nb_pad);
	sp_mean_kernel<D><<<dim3((unsigned)w.nb_pad, (unsigned)s->kv_heads), D, 0, st>>>(a);
	if (cuda_check(cudaGetLastError(), what, err))
		return -1;
	const size_t bytes = (size_t)w.nsort * 8 + (size_t)D * 4;
	if (cuda_check(cudaFuncSetAttribute(sp_select_kernel<D>,
					    cudaFuncAttributeMaxDynamicSharedMemorySize,
					    (int)bytes), what, err))
		return -1;
	const dim3 grid((unsigned)w.nt_pad, (unsigned)s->heads);
	sp_select_kernel<D><<<grid, NTHREAD, bytes, st>>>(a);
	return cuda_check(cudaGetLastError(), what, err);
}

int select_impl(const struct bp_sparse_shape *s, const ws_layout &w, const int32_t *cu,
		const int32_t *k_seg, const uint16_t *q, const uint16_t *k, void *ws,
		cudaStream_t st, struct bp_error *err)
{
	sel_args a;
	char *base = static_cast<char *>(ws);
	a.cu = cu;
	a.k_seg = k_seg;
	a.q = reinterpret_cast<const bf16 *>(q);
	a.k = reinterpret_cast<const bf16 *>(k);
	a.kmean = reinterpret_cast<float *>(base + w.kmean);
	a.count = reinterpret_cast<int32_t *>(base + w.count);
	a.blocks = reinterpret_cast<int32_t *>(base + w.blocks);
	a.nseg = s->nseg;
	a.heads = s->heads;
	a.kv_heads = s->kv_heads;
	a.block = s->block;
	a.kbud = s->k;
	a.max_k = w.max_k;
	a.cap = w.cap;
	a.nbmax = w.nbmax;
	a.nsort = w.nsort;
	return s->head_dim == 64 ? launch_select<64>(s, w, a, st, err)
				 : launch_select<128>(s, w, a, st, err);
}

/* Pointer checks shared by select and fwd. */
int check_inputs(const struct bp_sparse_shape *s, const int32_t *cu, const int32_t *k_seg,
		 const uint16_t *q, const uint16_t *k, const void *ws, const char *what,
		 struct bp_error *err)
{
	const int has = s->total > 0 ? 16 : 0;
	return check_ptr(cu, 4, what, "cu", err) ||
	       (k_seg && check_ptr(k_seg, 4, what, "k_seg", err)) ||
	       check_ptr(q, has, what, "q", err) || check_ptr(k, has, what, "k", err) ||
	       check_ptr(ws, has, what, "ws", err);
}

} /* namespace */

extern "C" int bp_sparse_check(const struct bp_sparse_shape *s, struct bp_error *err)
{
	ws_layout w;
	return check_and_layout(s, "sparse attention", &w, err);
}

extern "C" size_t bp_sparse_workspace(const struct bp_sparse_shape *s)
{
	ws_layout w;
	struct bp_error err;
	if (check_and_layout(s, "sparse attention", &w, &err))
		return 0;
	return w.bytes;
}

extern "C" int bp_sparse_lists(const struct bp_sparse_shape *s, const void *ws,
			       struct bp_sparse_lists *out, struct bp_error *err)
{
	ws_layout w;
	if (check_and_layout(s, "sparse attention lists", &w, err))
		return -1;
	const char *base = static_cast<const char *>(ws);
	out->count = reinterpret_cast<const int32_t *>(base + w.count);
	out->blocks = reinterpret_cast<const int32_t *>(base + w.blocks);
	out->cap = w.cap;
	out->ntiles = w.nt_pad;
	return 0;
}

extern "C" int bp_sparse_select(const struct bp_sparse_shape *s, const int32_t *cu,
				const int32_t *k_seg, const uint16_t *q, const uint16_t *k,
				void *ws, void *stream, struct bp_error *err)
{
	const char *what = "sparse attention selection";
	ws_layout w;
	if (check_and_layout(s, what, &w, err))
		return -1;
	if (s->nseg == 0 || s->total == 0)
		return 0;
	if (check_inputs(s, cu, k_seg, q, k, ws, what, err))
		return -1;
	return select_impl(s, w, cu, k_seg, q, k, ws, static_cast<cudaStream_t>(stream), err);
}

extern "C" int bp_sparse_fwd(const struct bp_sparse_shape *s, const int32_t *cu,
			     const int32_t *k_seg, const uint16_t *q, const uint16_t *k,
			     const uint16_t *v, uint16_t *o, float *lse, void *ws, void *stream,
			     struct bp_error *err)
{
	const char *what = "sparse attention forward";
	ws_layout w;
	if (check_and_layout(s, what, &w, err))
		return -1;
	if (s->nseg == 0 || s->total == 0)
		return 0;
	if (check_inputs(s, cu, k_seg, q, k, ws, what, err) || check_ptr(v, 16, what, "v", err) ||
	    check_ptr(o, 16, what, "o", err) || check_ptr(lse, 4, what, "lse", err))
		return -1;
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	if (select_impl(s, w, cu, k_seg, q, k, ws, st, err))
		return -1;
	char *base = static_cast<char *>(ws);
	fwd_args a;
	a.cu = cu;
	a.count = reinterpret_cast<const int32_t *>(base + w.count);
	a.blocks = reinterpret_cast<const int32_t *>(base + w.blocks);
	a.q = reinterpret_cast<const bf16 *>(q);
	a.k = reinterpret_cast<const bf16 *>(k);
	a.v = reinterpret_cast<const bf16 *>(v);
	a.o = reinterpret_cast<bf16 *>(o);
	a.lse = lse;
	a.visits = s->visits;
	a.nseg = s->nseg;
	a.heads = s->heads;
	a.kv_heads = s->kv_heads;
	a.block = s->block;
	a.cap = w.cap;
	a.total = s->total;
	a.scale_log2 = s->scale * LOG2E;
	const dim3 grid((unsigned)w.nt_pad, (unsigned)s->heads);
	if (s->head_dim == 64) {
		const size_t bytes = fwd_smem<64>::bytes;
		if (cuda_check(cudaFuncSetAttribute(sp_fwd_kernel<64>,
						    cudaFuncAttributeMaxDynamicSharedMemorySize,
						    (int)bytes), what, err))
			return -1;
		sp_fwd_kernel<64><<<grid, NTHREAD, bytes, st>>>(a);
	} else {
		const size_t bytes = fwd_smem<128>::bytes;
		if (cuda_check(cudaFuncSetAttribute(sp_fwd_kernel<128>,
						    cudaFuncAttributeMaxDynamicSharedMemorySize,
						    (int)bytes), what, err))
			return -1;
		sp_fwd_kernel<128><<<grid, NTHREAD, bytes, st>>>(a);
	}
	return cuda_check(cudaGetLastError(), what, err);
}

namespace {

template <int D>
int launch_bwd(const struct bp_sparse_shape *s, const ws_layout &w, const bwd_args &a,
	       const bf16 *o, float *dsum, bf16 *dq, cudaStream_t st, struct bp_error *err)
{
	const char *what = "sparse attention backward";
	const int64_t rows = s->total * s->heads;
	const int64_t nb = (rows + 7) / 8;
	if (nb > INT_MAX)
		return bp_errorf(err, "%s: %lld rows above the grid limit", what, (long long)rows);
	sp_bwd_pre_kernel<D><<<(unsigned)nb, 256, 0, st>>>(o, a.dout, a.dq_ws, dsum, s->total,
							    s->heads);
	if (cuda_check(cudaGetLastError(), what, err))
		return -1;
	const size_t bytes = bwd_smem<D>::bytes;
	if (cuda_check(cudaFuncSetAttribute(sp_bwd_kernel<D>,
					    cudaFuncAttributeMaxDynamicSharedMemorySize,
					    (int)bytes), what, err))
		return -1;
	/* Key tiles are numbered like query tiles (BN == BM). */
	const dim3 grid((unsigned)w.nt_pad, (unsigned)s->kv_heads);
	sp_bwd_kernel<D><<<grid, NTHREAD, bytes, st>>>(a);
	if (cuda_check(cudaGetLastError(), what, err))
		return -1;
	const int64_t n4 = rows * D / 4;
	const int64_t nc = (n4 + 255) / 256;
	sp_dq_convert_kernel<<<(unsigned)(nc < 65536 ? nc : 65536), 256, 0, st>>>(
		reinterpret_cast<const float4 *>(a.dq_ws), reinterpret_cast<uint2 *>(dq), n4);
	return cuda_check(cudaGetLastError(), what, err);
}

} /* namespace */

extern "C" int bp_sparse_bwd(const struct bp_sparse_shape *s, const int32_t *cu,
			     const uint16_t *q, const uint16_t *k, const uint16_t *v,
			     const uint16_t *o, const uint16_t *dout, const float *lse,
			     uint16_t *dq, uint16_t *dk, uint16_t *dv, void *ws, void *stream,
			     struct bp_error *err)
{
	const char *what = "sparse attention backward";
	ws_layout w;
	if (check_and_layout(s, what, &w, err))
		return -1;
	if (s->nseg == 0 || s->total == 0)
		return 0;
	if (check_inputs(s, cu, NULL, q, k, ws, what, err) || check_ptr(v, 16, what, "v", err) ||
	    check_ptr(o, 16, what, "o", err) || check_ptr(dout, 16, what, "dout", err) ||
	    check_ptr(lse, 4, what, "lse", err) || check_ptr(dq, 16, what, "dq", err) ||
	    check_ptr(dk, 16, what, "dk", err) || check_ptr(dv, 16, what, "dv", err))
		return -1;
	char *base = static_cast<char *>(ws);
	float *dsum = reinterpret_cast<float *>(base + w.dsum);
	bwd_args a;
	a.cu = cu;
	a.count = reinterpret_cast<const int32_t *>(base + w.count);
	a.blocks = reinterpret_cast<const int32_t *>(base + w.blocks);
	a.q = reinterpret_cast<const bf16 *>(q);
	a.k = reinterpret_cast<const bf16 *>(k);
	a.v = reinterpret_cast<const bf16 *>(v);
	a.dout = reinterpret_cast<const bf16 *>(dout);
	a.lse = lse;
	a.dsum = dsum;
	a.dq_ws = reinterpret_cast<float *>(base + w.dq);
	a.dk = reinterpret_cast<bf16 *>(dk);
	a.dv = reinterpret_cast<bf16 *>(dv);
	a.nseg = s->nseg;
	a.heads = s->heads;
	a.kv_heads = s->kv_heads;
	a.block = s->block;
	a.cap = w.cap;
	a.total = s->total;
	a.scale = s->scale;
	a.scale_log2 = s->scale * LOG2E;
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	const bf16 *ob = reinterpret_cast<const bf16 *>(o);
	bf16 *dqb = reinterpret_cast<bf16 *>(dq);
	return s->head_dim == 64 ? launch_bwd<64>(s, w, a, ob, dsum, dqb, st, err)
				 : launch_bwd<128>(s, w, a, ob, dsum, dqb, st, err);
}
