/* attn_sparse.cu: balexec's block-sparse (MoBA top-k) attention kernels (attn_sparse.h),
 * called by the CUDA backend for sparse micro-batches (backend_cuda.c), by
 * tests/gpu/test_sparse_attention.cu and by its timing table (executor/README.md
 * "Block-sparse attention kernels"): SparseBalance Sec. II-B Eq. 2 over MoBA's gate (Sec.
 * V-A), at the granularity of a 64-row query tile (a deliberate deviation from MoBA's
 * per-token selection), on the tiles and the online softmax of attn.cu (FlashAttention-2,
 * Dao 2023, Alg. 1 forward and Alg. 2 backward, bf16 mma.m16n8k16): the tile, its layouts and each
 * warp's part of a step are attn_tile.cuh's, shared by both files; this one keeps the
 * selection, which tiles a block visits, and the list search. Written here, no code taken
 * from MoBA, FlashAttention or the public block-sparse kernels.
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

#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "attn_sparse.h"
#include "attn_tile.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "attn_sparse.cu needs bf16 tensor cores (sm_80 or newer)"
#endif

namespace {

using namespace attn_tile;

constexpr int MAX_SORT = 8192;      /* blocks per document the selection sorts (2M tokens at 256) */

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

/* Shared memory: attn_tile.cuh's layouts; the backward adds its candidate flags, one byte
 * per thread, at tail. */
template <int D> using sp_bwd_smem = bwd_smem<D, NTHREAD>;
static_assert(sp_bwd_smem<128>::bytes <= 113 * 1024, "two backward blocks per H100 SM");

/* Step 1: the mean of K over each block, per kv head (MoBA's mean-pooled keys). One thread
 * per dimension; grid (padded blocks, kv heads). */
template <int D> __global__ void sp_mean_kernel(sel_args a)
{
	int seg;
	const int b = find_tile(a.cu, a.nseg, a.block, blockIdx.x, &seg);
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
	const int tile = find_tile(a.cu, a.nseg, BM, blockIdx.x, &seg);
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
 * query head); attn.cu's tile step (attn_tile.cuh's fwd_tile) with the causal mask
 * key <= row. */
template <int D>
__global__ void __launch_bounds__(NTHREAD) sp_fwd_kernel(fwd_args a)
{
	extern __shared__ __align__(128) unsigned char smem[];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

	const int h = blockIdx.y;
	const int kvh = h / (a.heads / a.kv_heads);
	/* Reverse order: long documents' last (longest-running) tiles first. */
	const int64_t gt = (int64_t)gridDim.x - 1 - blockIdx.x;
	int seg;
	const int tile = find_tile(a.cu, a.nseg, BM, gt, &seg);
	const int64_t start = a.cu[seg];
	const int len = a.cu[seg + 1] - a.cu[seg];
	const int q0 = tile * BM;
	if (q0 >= len)
		return;
	const int own = q0 / a.block;
	const int nsel = a.count[gt * a.heads + h];
	const int32_t *list = a.blocks + (gt * a.heads + h) * a.cap;

	/* Alg. 1 lines 5-6 (fwd_begin), 8-11 per KV tile (fwd_tile), 13-16 (fwd_finish), over
	 * the listed blocks' tiles in list order; a cursor (j, k0) walks them one ahead, so
	 * that each step's copies of the next tile overlap its work. A past block is whole and
	 * before the tile; the own block ends at the tile's last row (causal). */
	int j = 0, k0 = nsel > 0 ? list[0] * a.block : 0;
	fwd_rows<D> st;
	fwd_begin<D, NWARP>(st, smem, a.q, start, q0, len, a.heads, h, next_tile{nsel > 0, k0},
			    a.k, a.v, start, len, a.kv_heads, kvh, warp, lane);
	const int row0 = q0 + warp * 16;
	unsigned long long visited = 0;
	for (int stg = 0; j < nsel; stg ^= 1) {
		/* the tile after (j, k0): jn == nsel, none */
		int jn = j, kn = k0 + BN;
		const int b = list[j];
		const int kend = b == own ? min(q0 + BM, len) : min((b + 1) * a.block, len);
		if (kn >= kend && ++jn < nsel)
			kn = list[jn] * a.block;
		visited++;
		fwd_tile<D, NWARP>(st, smem, stg, next_tile{jn < nsel, kn}, a.k, a.v, start, k0, len,
				   a.kv_heads, kvh, row0, len, 0, a.scale_log2, lane);
		j = jn;
		k0 = kn;
	}
	if (a.visits && threadIdx.x == 0)
		atomicAdd(a.visits, visited);

	/* A row that saw no key (no list: a document longer than max_len) gets l = 0, hence NaN,
	 * never a silent value. */
	fwd_finish<D>(st, lane, row0, len, a.lse + (int64_t)h * a.total + start, a.o, start,
		      a.heads, h);
}

/* Backward preprocessing (Alg. 2 lines 4-5, bwd_pre). */
template <int D>
__global__ void sp_bwd_pre_kernel(const bf16 *__restrict__ o, const bf16 *__restrict__ dout,
				  float *dq_ws, float *dsum, int64_t total, int heads)
{
	bwd_pre<D>(o, dout, dq_ws, dsum, total, heads);
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
 * order, found NTHREAD candidates at a time (file comment). The tile steps are attn.cu's
 * (attn_tile.cuh's bwd_tile), with the causal mask key <= row. */
template <int D>
__global__ void __launch_bounds__(NTHREAD) sp_bwd_kernel(bwd_args a)
{
	extern __shared__ __align__(128) unsigned char smem[];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	unsigned char *flags = smem + sp_bwd_smem<D>::tail;

	const int kvh = blockIdx.y;
	const int group = a.heads / a.kv_heads;
	int seg;
	/* Key tiles in their natural order: under the causal mask key tile j is seen by the
	 * query tiles from j on, so the first tiles carry the most work and start first (the
	 * forward's reversed order here left the heaviest tiles for the tail). */
	const int tile = find_tile(a.cu, a.nseg, BN, (int64_t)blockIdx.x, &seg);
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

	/* Alg. 2 lines 7-8 (bwd_begin), 10-17 per query tile (bwd_issue, bwd_tile), 19
	 * (bwd_finish). The next listed tile is not known before the next chunk's flags, so
	 * each tile's loads are issued just before its step (stages alternate), not a step
	 * ahead. */
	const bwd_in in{a.q, a.dout, a.lse, a.dsum, a.dq_ws, a.total, start, len, a.heads};
	const q_tile none{false, 0, 0};
	bwd_acc<D> acc;
	bwd_begin<D>(acc, smem, a.k, a.v, start, n0, len, a.kv_heads, kvh);
	int stg = 0;
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
			const q_tile x{true, mt * BM, kvh * group + hh};
			bwd_issue<D, NTHREAD>(smem, stg, in, x);
			/* q == kv per document: the mask's offset is 0. */
			bwd_tile<D, NTHREAD>(acc, smem, stg, in, x, none, n0, len, 0, a.scale,
					     a.scale_log2, warp, lane);
			stg ^= 1;
		}
	}
	bwd_finish<D, false>(acc, a.dk, a.dv, nullptr, 0, a.scale, warp, lane, start, n0, len,
			     a.kv_heads, kvh);
}

/* dQ: fp32 workspace to bf16 (dq_convert). */
__global__ void sp_dq_convert_kernel(const float4 *__restrict__ ws, uint2 *dq, int64_t n4)
{
	dq_convert(ws, dq, n4);
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
	if (check_heads(s->head_dim, s->heads, s->kv_heads, what, err))
		return -1;
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
		const size_t bytes = fwd_smem<64, NWARP>::bytes;
		if (cuda_check(cudaFuncSetAttribute(sp_fwd_kernel<64>,
						    cudaFuncAttributeMaxDynamicSharedMemorySize,
						    (int)bytes), what, err))
			return -1;
		sp_fwd_kernel<64><<<grid, NTHREAD, bytes, st>>>(a);
	} else {
		const size_t bytes = fwd_smem<128, NWARP>::bytes;
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
	const size_t bytes = sp_bwd_smem<D>::bytes;
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
