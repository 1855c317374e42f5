/* attn.cu: balexec's own varlen causal attention kernels (attn.h; executor/README.md
 * "Attention kernels"). Called by the CUDA backend for the attention of every synthetic
 * layer, and by tests/gpu and tools/bench directly. FlashAttention-2 (Dao 2023), Algorithm 1
 * (forward) and Algorithm 2 (backward), written here for the bf16 mma.m16n8k16 tensor-core
 * instruction; no code is taken from FlashAttention.
 *
 * Invariants: a query row r of a segment sees keys 0..r + (kv_len - q_len) (bottom-right
 * causal mask); rows and keys past a segment's end are never read (tiles are zero-filled) and
 * never written; fully masked KV tiles are skipped; everything is accumulated in fp32.
 *
 * Tiles: the forward takes 128 query rows (8 warps) against 64 keys per step, the backward
 * 64 keys (4 warps) against 64 query rows, each warp owning 16 rows of the tile (query rows
 * in the forward, key rows in the backward). Blocks are numbered over a padded tile list so
 * that one launch covers all segments without a host-side tile table: with T rows a tile,
 * segment i owns tiles cu[i] / T + i .. cu[i + 1] / T + i (inclusive), at least
 * ceil(len / T) of them; the spare one, if any, exits at once. The tile, its layouts and each
 * warp's part of a step (with the comments naming the algorithm's lines) are attn_tile.cuh's,
 * shared with attn_sparse.cu; this file keeps which tiles a block visits and its mask's
 * bounds. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "attn.h"
#include "attn_geom.h"
#include "attn_tile.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "attn.cu needs bf16 tensor cores (sm_80 or newer)"
#endif

namespace {

using namespace attn_tile;

struct fwd_args {
	const int32_t *cu_q, *cu_kv;
	const bf16 *q, *k, *v;
	bf16 *o;
	float *lse;
	int nseg, heads, kv_heads;
	int64_t total_q;
	float scale_log2; /* scale * log2(e): the softmax runs in base 2 */
};

struct bwd_args {
	const int32_t *cu_q, *cu_kv;
	const bf16 *q, *k, *v, *dout;
	const float *lse, *dsum;
	float *dq_ws;
	float *dkv_ws; /* fp32 dK then dV, [total_kv][kv_heads][D] each, when nsplit > 1 */
	bf16 *dk, *dv;
	int nseg, heads, kv_heads, nsplit;
	int64_t total_q, total_kv;
	float scale, scale_log2;
};

/* Forward, FA2 Algorithm 1: one block per (128-row query tile, query head), 8 warps, over
 * the KV tiles up to the causal limit. */
constexpr int FWD_NW = 8;
constexpr int FWD_BM = 16 * FWD_NW;
static_assert(FWD_BM == BP_ATTN_FWD_ROWS_MMA && BN == BP_ATTN_BWD_KEYS &&
		      BM == BP_ATTN_BWD_KEYS,
	      "the launch model's geometry (attn_geom.h) is the kernels'");

template <int D>
__global__ void __launch_bounds__(FWD_NW * 32) attn_fwd_kernel(fwd_args a)
{
	extern __shared__ __align__(128) unsigned char smem[];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

	const int h = blockIdx.y;
	const int kvh = h / (a.heads / a.kv_heads); /* GQA */
	int seg;
	/* Reverse order: a segment's last (longest-running) tiles are scheduled first. */
	const int tile =
		find_tile(a.cu_q, a.nseg, FWD_BM, (int64_t)gridDim.x - 1 - blockIdx.x, &seg);
	const int64_t q_start = a.cu_q[seg], kv_start = a.cu_kv[seg];
	const int lq = a.cu_q[seg + 1] - a.cu_q[seg], lk = a.cu_kv[seg + 1] - a.cu_kv[seg];
	const int q0 = tile * FWD_BM;
	if (q0 >= lq || lk < lq)
		return; /* spare tile, empty segment, or a broken cu_kv (attn.h requires kv >= q) */
	const int off = lk - lq;
	/* Causal early exit: the tile's last row, min(q0 + 128, lq) - 1, sees keys up to
	 * min(q0 + 128, lq) - 1 + off <= lk - 1; later KV tiles are fully masked. */
	const int n_tiles = (min(q0 + FWD_BM, lq) + off + BN - 1) / BN;

	/* Alg. 1 lines 5-6 (fwd_begin), 8-11 per KV tile (fwd_tile), 13-16 (fwd_finish). */
	fwd_rows<D> st;
	fwd_begin<D, FWD_NW>(st, smem, a.q, q_start, q0, lq, a.heads, h, next_tile{true, 0}, a.k,
			     a.v, kv_start, lk, a.kv_heads, kvh, warp, lane);
	const int row0 = q0 + warp * 16;
	for (int n = 0; n < n_tiles; n++)
		fwd_tile<D, FWD_NW>(st, smem, n & 1, next_tile{n + 1 < n_tiles, (n + 1) * BN}, a.k,
				    a.v, kv_start, n * BN, lk, a.kv_heads, kvh, row0, lq, off,
				    a.scale_log2, lane);
	fwd_finish<D>(st, lane, row0, lq, a.lse + (int64_t)h * a.total_q + q_start, a.o, q_start,
		      a.heads, h);
}

/* Backward preprocessing, FA2 Alg. 2 lines 4-5 (bwd_pre). */
template <int D>
__global__ void attn_bwd_pre_kernel(const bf16 *__restrict__ o, const bf16 *__restrict__ dout,
				    float *dq_ws, float *dsum, int64_t total_q, int heads)
{
	bwd_pre<D>(o, dout, dq_ws, dsum, total_q, heads);
}

/* Backward, FA2 Algorithm 2: one block per (64-key tile, kv head, share), looping over the
 * query heads of its GQA group and the query tiles that see the tile (its share of them when
 * nsplit > 1), the next tile's loads in flight during each step. Warp w owns keys
 * 16w..16w+15: its dK, dV rows stay in registers for the whole loop, then are written (one
 * share) or added to the fp32 workspace (several). dQ is added to the fp32 workspace with
 * atomics. */
template <int D>
__global__ void __launch_bounds__(NTHREAD) attn_bwd_kernel(bwd_args a)
{
	extern __shared__ __align__(128) unsigned char smem[];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

	const int kvh = blockIdx.y;
	const int group = a.heads / a.kv_heads;
	int seg;
	/* Key tiles in their natural order: under the causal mask key tile j is seen by the
	 * query tiles from j on, so the first tiles carry the most work and start first (the
	 * forward's reversed order here left the heaviest tiles for the tail). */
	const int tile = find_tile(a.cu_kv, a.nseg, BN, (int64_t)blockIdx.x, &seg);
	const int64_t q_start = a.cu_q[seg], kv_start = a.cu_kv[seg];
	const int lq = a.cu_q[seg + 1] - a.cu_q[seg], lk = a.cu_kv[seg + 1] - a.cu_kv[seg];
	const int n0 = tile * BN;
	if (n0 >= lk || lk < lq)
		return;
	const int off = lk - lq;
	/* Query row r sees key c iff c <= r + off: the first row that sees any key of this tile
	 * is n0 - off. Earlier query tiles are fully masked and skipped. A segment with q_len 0
	 * runs no iteration and writes dK = dV = 0. */
	const int mt0 = max(0, n0 - off) / BM;
	const int mt1 = (lq + BM - 1) / BM;
	const int nmt = mt1 - mt0, steps = group * nmt;
	/* This block's share of the steps (attn_geom.h bp_attn_bwd_split). */
	const int i0 = (int)((int64_t)steps * blockIdx.z / a.nsplit);
	const int i1 = (int)((int64_t)steps * (blockIdx.z + 1) / a.nsplit);
	if (a.nsplit > 1 && i0 == i1)
		return; /* nothing to add: the workspace starts at zero */

	/* Alg. 2 lines 7-8 (bwd_begin), 10-17 per query tile (bwd_issue, bwd_tile), 19
	 * (bwd_finish). Step i is query tile mt0 + i % nmt of head kvh * group + i / nmt. */
	const bwd_in in{a.q, a.dout, a.lse, a.dsum, a.dq_ws, a.total_q, q_start, lq, a.heads};
	bwd_acc<D> acc;
	bwd_begin<D>(acc, smem, a.k, a.v, kv_start, n0, lk, a.kv_heads, kvh);
	if (i0 < i1)
		bwd_issue<D, 0>(smem, 0, in,
				q_tile{true, (mt0 + i0 % nmt) * BM, kvh * group + i0 / nmt});
	for (int i = i0; i < i1; i++) {
		const q_tile x{true, (mt0 + i % nmt) * BM, kvh * group + i / nmt};
		const q_tile nx{i + 1 < i1, (mt0 + (i + 1) % nmt) * BM,
				kvh * group + (i + 1) / nmt};
		bwd_tile<D, 0>(acc, smem, (i - i0) & 1, in, x, nx, n0, lk, off, a.scale,
			       a.scale_log2, warp, lane);
	}
	if (a.nsplit > 1)
		bwd_finish<D, true>(acc, a.dk, a.dv, a.dkv_ws, a.total_kv * a.kv_heads * D, a.scale,
				    warp, lane, kv_start, n0, lk, a.kv_heads, kvh);
	else
		bwd_finish<D, false>(acc, a.dk, a.dv, nullptr, 0, a.scale, warp, lane, kv_start,
				     n0, lk, a.kv_heads, kvh);
}

/* dQ: fp32 workspace to bf16 (dq_convert). */
__global__ void attn_dq_convert_kernel(const float4 *__restrict__ ws, uint2 *dq, int64_t n4)
{
	dq_convert(ws, dq, n4);
}

/* Checks shared by both directions; what is "attention forward" or "attention backward". */
int check_shape(const struct bp_attn_shape *s, const char *what, struct bp_error *err)
{
	if (!s)
		return bp_errorf(err, "%s: no shape given", what);
	if (s->nseg < 0 || s->heads < 0 || s->kv_heads < 0 || s->head_dim < 0 || s->total_q < 0 ||
	    s->total_kv < 0 || s->max_q < 0 || s->max_kv < 0)
		return bp_errorf(err,
				 "%s: negative size in shape (nseg %d, heads %d, kv_heads %d, "
				 "head_dim %d, total_q %lld, total_kv %lld, max_q %d, max_kv %d)",
				 what, s->nseg, s->heads, s->kv_heads, s->head_dim,
				 (long long)s->total_q, (long long)s->total_kv, s->max_q, s->max_kv);
	if (check_heads(s->head_dim, s->heads, s->kv_heads, what, err))
		return -1;
	if (s->total_q > INT32_MAX || s->total_kv > INT32_MAX)
		return bp_errorf(err, "%s: total_q %lld or total_kv %lld beyond int32 offsets", what,
				 (long long)s->total_q, (long long)s->total_kv);
	if (s->total_kv < s->total_q)
		return bp_errorf(err, "%s: total_kv %lld below total_q %lld (kv_len >= q_len per "
				 "segment)", what, (long long)s->total_kv, (long long)s->total_q);
	if (!isfinite(s->scale))
		return bp_errorf(err, "%s: scale is not finite", what);
	if (s->bwd_split < 0 || s->bwd_split > 64)
		return bp_errorf(err, "%s: bwd_split %d outside 0..64", what, s->bwd_split);
	return 0;
}

/* Padded tile count of the file comment: total / rows + nseg blocks. */
int tile_blocks(int64_t total, int nseg, int rows, const char *what, unsigned *out,
		struct bp_error *err)
{
	const int64_t n = total / rows + nseg;
	if (n > INT_MAX)
		return bp_errorf(err, "%s: %lld tiles above the grid limit", what, (long long)n);
	*out = (unsigned)n;
	return 0;
}

template <int D>
int launch_fwd(const struct bp_attn_shape *s, const fwd_args &a, cudaStream_t st, unsigned nblk,
	       struct bp_error *err)
{
	const char *what = "attention forward";
	const size_t bytes = fwd_smem<D, FWD_NW>::bytes;
	if (cuda_check(cudaFuncSetAttribute(attn_fwd_kernel<D>,
					    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
		       what, err))
		return -1;
	attn_fwd_kernel<D><<<dim3(nblk, (unsigned)s->heads), FWD_NW * 32, bytes, st>>>(a);
	return cuda_check(cudaGetLastError(), what, err);
}

template <int D>
int launch_bwd(const struct bp_attn_shape *s, const bwd_args &a, const bf16 *o, float *dsum,
	       bf16 *dq, cudaStream_t st, unsigned nblk, struct bp_error *err)
{
	const char *what = "attention backward";
	const int64_t rows = s->total_q * s->heads;
	if (rows > 0) {
		const int64_t nb = (rows + 7) / 8;
		if (nb > INT_MAX)
			return bp_errorf(err, "%s: %lld rows above the grid limit", what, (long long)rows);
		attn_bwd_pre_kernel<D><<<(unsigned)nb, 256, 0, st>>>(o, a.dout, a.dq_ws, dsum,
								     s->total_q, s->heads);
		if (cuda_check(cudaGetLastError(), what, err))
			return -1;
	}
	const int64_t nkv = s->total_kv * s->kv_heads * D; /* dK (or dV) values */
	if (a.nsplit > 1 &&
	    cuda_check(cudaMemsetAsync(a.dkv_ws, 0, (size_t)nkv * 2 * sizeof(float), st), what,
		       err))
		return -1;
	const size_t bytes = bwd_smem<D>::bytes;
	if (cuda_check(cudaFuncSetAttribute(attn_bwd_kernel<D>,
					    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
		       what, err))
		return -1;
	attn_bwd_kernel<D><<<dim3(nblk, (unsigned)s->kv_heads, (unsigned)a.nsplit), NTHREAD, bytes,
			     st>>>(a);
	if (cuda_check(cudaGetLastError(), what, err))
		return -1;
	/* fp32 to bf16: dQ always, dK and dV from a split's accumulators. */
	const float *from[3] = {a.dq_ws, a.dkv_ws, a.dkv_ws + nkv};
	bf16 *to[3] = {dq, a.dk, a.dv};
	const int64_t n[3] = {rows * D, a.nsplit > 1 ? nkv : 0, a.nsplit > 1 ? nkv : 0};
	for (int i = 0; i < 3; i++) {
		if (n[i] <= 0)
			continue;
		const int64_t n4 = n[i] / 4;
		const int64_t nb = (n4 + 255) / 256;
		attn_dq_convert_kernel<<<(unsigned)(nb < 65536 ? nb : 65536), 256, 0, st>>>(
			reinterpret_cast<const float4 *>(from[i]), reinterpret_cast<uint2 *>(to[i]),
			n4);
		if (cuda_check(cudaGetLastError(), what, err))
			return -1;
	}
	return 0;
}

/* Workspace layout: dQ fp32 [total_q][heads][head_dim], then dsum fp32 [heads][total_q],
 * then (a split backward) from the next 256-byte boundary dK and dV fp32
 * [total_kv][kv_heads][head_dim] each. dQ's size is a multiple of 256 bytes (head_dim is 64
 * or 128), so dsum is aligned as it is. */
size_t dq_ws_bytes(const struct bp_attn_shape *s)
{
	return (size_t)s->total_q * (size_t)s->heads * (size_t)s->head_dim * sizeof(float);
}

size_t dkv_ws_at(const struct bp_attn_shape *s)
{
	const size_t end = dq_ws_bytes(s) + (size_t)s->total_q * (size_t)s->heads * sizeof(float);
	return (end + 255) / 256 * 256;
}

/* The backward's blocks per (key tile, kv head) of a valid shape: the one it forces, or
 * attn_geom.h's choice. */
int bwd_blocks(const struct bp_attn_shape *s)
{
	if (s->bwd_split > 0)
		return s->bwd_split;
	const int64_t q_tiles = ((int64_t)s->max_q + BM - 1) / BM;
	return bp_attn_bwd_split(BP_ATTN_GEOM_MMA, s->total_kv, s->nseg, s->kv_heads,
				 (int64_t)(s->heads / s->kv_heads) * q_tiles);
}

} /* namespace */

extern "C" int bp_attn_bwd_blocks(const struct bp_attn_shape *s)
{
	if (!s || s->nseg < 0 || s->heads <= 0 || s->kv_heads <= 0 || s->heads % s->kv_heads ||
	    s->total_kv < 0 || s->max_q < 0 || s->bwd_split < 0 || s->bwd_split > 64)
		return 0;
	return bwd_blocks(s);
}

extern "C" size_t bp_attn_bwd_workspace(const struct bp_attn_shape *s)
{
	if (!s || s->total_q < 0 || s->heads < 0 || s->head_dim < 0 || s->total_kv < 0)
		return 0;
	const size_t base = dq_ws_bytes(s) + (size_t)s->total_q * (size_t)s->heads * sizeof(float);
	if (bp_attn_bwd_blocks(s) <= 1)
		return base;
	return dkv_ws_at(s) +
	       2 * (size_t)s->total_kv * (size_t)s->kv_heads * (size_t)s->head_dim * sizeof(float);
}

extern "C" int bp_attn_fwd(const struct bp_attn_shape *s, const int32_t *cu_q,
			   const int32_t *cu_kv, const uint16_t *q, const uint16_t *k,
			   const uint16_t *v, uint16_t *o, float *lse, void *stream,
			   struct bp_error *err)
{
	const char *what = "attention forward";
	if (check_shape(s, what, err))
		return -1;
	if (s->nseg == 0)
		return 0;
	const int hq = s->total_q > 0, hk = s->total_kv > 0;
	const int aq = hq ? 16 : 0, ak = hk ? 16 : 0;
	if (check_ptr(cu_q, 4, what, "cu_q", err) || check_ptr(cu_kv, 4, what, "cu_kv", err) ||
	    check_ptr(q, aq, what, "q", err) || check_ptr(k, ak, what, "k", err) ||
	    check_ptr(v, ak, what, "v", err) || check_ptr(o, aq, what, "o", err) ||
	    check_ptr(lse, hq ? 4 : 0, what, "lse", err))
		return -1;
	if (!hq)
		return 0; /* no query row: nothing to write */
	unsigned nblk = 0;
	if (tile_blocks(s->total_q, s->nseg, FWD_BM, what, &nblk, err))
		return -1;
	fwd_args a;
	a.cu_q = cu_q;
	a.cu_kv = cu_kv;
	a.q = reinterpret_cast<const bf16 *>(q);
	a.k = reinterpret_cast<const bf16 *>(k);
	a.v = reinterpret_cast<const bf16 *>(v);
	a.o = reinterpret_cast<bf16 *>(o);
	a.lse = lse;
	a.nseg = s->nseg;
	a.heads = s->heads;
	a.kv_heads = s->kv_heads;
	a.total_q = s->total_q;
	a.scale_log2 = s->scale * LOG2E;
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	return s->head_dim == 64 ? launch_fwd<64>(s, a, st, nblk, err)
				 : launch_fwd<128>(s, a, st, nblk, err);
}

extern "C" int bp_attn_bwd(const struct bp_attn_shape *s, const int32_t *cu_q,
			   const int32_t *cu_kv, const uint16_t *q, const uint16_t *k,
			   const uint16_t *v, const uint16_t *o, const uint16_t *dout,
			   const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv, void *ws,
			   void *stream, struct bp_error *err)
{
	const char *what = "attention backward";
	if (check_shape(s, what, err))
		return -1;
	if (s->nseg == 0)
		return 0;
	const int hq = s->total_q > 0, hk = s->total_kv > 0;
	const int aq = hq ? 16 : 0, ak = hk ? 16 : 0;
	if (check_ptr(cu_q, 4, what, "cu_q", err) || check_ptr(cu_kv, 4, what, "cu_kv", err) ||
	    check_ptr(q, aq, what, "q", err) || check_ptr(k, ak, what, "k", err) ||
	    check_ptr(v, ak, what, "v", err) || check_ptr(o, aq, what, "o", err) ||
	    check_ptr(dout, aq, what, "dout", err) || check_ptr(lse, hq ? 4 : 0, what, "lse", err) ||
	    check_ptr(dq, aq, what, "dq", err) || check_ptr(dk, ak, what, "dk", err) ||
	    check_ptr(dv, ak, what, "dv", err) ||
	    check_ptr(ws, hq || (hk && bwd_blocks(s) > 1) ? 16 : 0, what, "ws", err))
		return -1;
	if (!hk)
		return 0; /* no key, hence no query row either */
	unsigned nblk = 0;
	if (tile_blocks(s->total_kv, s->nseg, BN, what, &nblk, err))
		return -1;
	float *dq_ws = static_cast<float *>(ws);
	float *dsum = hq ? reinterpret_cast<float *>(static_cast<char *>(ws) + dq_ws_bytes(s))
			 : nullptr;
	bwd_args a;
	a.nsplit = bwd_blocks(s);
	a.dkv_ws = a.nsplit > 1 ? reinterpret_cast<float *>(static_cast<char *>(ws) + dkv_ws_at(s))
				: nullptr;
	a.total_kv = s->total_kv;
	a.cu_q = cu_q;
	a.cu_kv = cu_kv;
	a.q = reinterpret_cast<const bf16 *>(q);
	a.k = reinterpret_cast<const bf16 *>(k);
	a.v = reinterpret_cast<const bf16 *>(v);
	a.dout = reinterpret_cast<const bf16 *>(dout);
	a.lse = lse;
	a.dsum = dsum;
	a.dq_ws = dq_ws;
	a.dk = reinterpret_cast<bf16 *>(dk);
	a.dv = reinterpret_cast<bf16 *>(dv);
	a.nseg = s->nseg;
	a.heads = s->heads;
	a.kv_heads = s->kv_heads;
	a.total_q = s->total_q;
	a.scale = s->scale;
	a.scale_log2 = s->scale * LOG2E;
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	const bf16 *ob = reinterpret_cast<const bf16 *>(o);
	bf16 *dqb = reinterpret_cast<bf16 *>(dq);
	return s->head_dim == 64 ? launch_bwd<64>(s, a, ob, dsum, dqb, st, nblk, err)
				 : launch_bwd<128>(s, a, ob, dsum, dqb, st, nblk, err);
}
