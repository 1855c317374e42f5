/* attn.cu: balexec's own varlen causal attention kernels (attn.h; executor/README.md
 * "Attention kernels"). Called by the CUDA backend for the attention of every synthetic
 * layer, and by tests/gpu and tools/bench directly. FlashAttention-2 (Dao 2023), Algorithm 1
 * (forward) and Algorithm 2 (backward), written here for WMMA bf16 tensor cores; no code is
 * taken from FlashAttention.
 *
 * Invariants: a query row r of a segment sees keys 0..r + (kv_len - q_len) (bottom-right
 * causal mask); rows and keys past a segment's end are never read (tiles are zero-filled) and
 * never written; fully masked KV tiles are skipped; everything is accumulated in fp32.
 *
 * Tiles: 64 query rows x 64 keys per step, 4 warps per block, each warp owning 16 rows of the
 * tile (query rows in the forward, key rows in the backward). Blocks are numbered over a
 * padded tile list so that one launch covers all segments without a host-side tile table:
 * segment i owns tiles cu[i] / 64 + i .. cu[i + 1] / 64 + i (inclusive), at least
 * ceil(len / 64) of them; the spare one, if any, exits at once. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "attn.cu needs bf16 tensor cores (sm_80 or newer)"
#endif

namespace {

using namespace nvcuda;
typedef __nv_bfloat16 bf16;

constexpr int BM = 64;              /* query rows per tile (FA2's B_r) */
constexpr int BN = 64;              /* keys per tile (FA2's B_c) */
constexpr int NWARP = 4;            /* each warp owns 16 rows of a 64-row tile */
constexpr int NTHREAD = NWARP * 32;
constexpr int PADH = 8;             /* bf16 padding per shared row: 16 bytes, spreads banks */
constexpr int LDP = BN + PADH;      /* shared P / dS tiles, 64 wide */
constexpr int LDS = BN + 4;         /* fp32 per-warp 16 x 64 scratch */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> frag_at;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_bt;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

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
	bf16 *dk, *dv;
	int nseg, heads, kv_heads;
	int64_t total_q;
	float scale, scale_log2;
};

/* Shared memory of one block, in bytes. Every region starts on a 32-byte boundary, as WMMA
 * loads and stores need. */
template <int D> struct fwd_smem {
	static constexpr int LDH = D + PADH;
	static constexpr int LDF = D + 4; /* fp32 per-warp scratch: 16 x 64 scores or 16 x D */
	static constexpr size_t q = 0;
	static constexpr size_t k = q + (size_t)BM * LDH * 2;
	static constexpr size_t v = k + (size_t)BN * LDH * 2;
	static constexpr size_t scr = v + (size_t)BN * LDH * 2;
	static constexpr size_t p = scr + (size_t)NWARP * 16 * LDF * 4;
	static constexpr size_t bytes = p + (size_t)NWARP * 16 * LDP * 2;
};

template <int D> struct bwd_smem {
	static constexpr int LDH = D + PADH;
	static constexpr int LDO = D + 4;      /* fp32 16 x D for the final dK, dV */
	static constexpr int SCR = 16 * 2 * LDS; /* per warp: S^T then dP^T, 16 x 64 each */
	static_assert(16 * LDO <= SCR, "per-warp scratch holds a 16 x D fp32 tile");
	static constexpr size_t k = 0;
	static constexpr size_t v = k + (size_t)BN * LDH * 2;
	static constexpr size_t q = v + (size_t)BN * LDH * 2;
	static constexpr size_t dout = q + (size_t)BM * LDH * 2;
	static constexpr size_t scr = dout + (size_t)BM * LDH * 2;
	/* P^T, then dS^T in the same place: one buffer keeps D = 128 at 113 KiB, two blocks
	 * per SM on an H100 (228 KiB). */
	static constexpr size_t pds = scr + (size_t)NWARP * SCR * 4;
	static constexpr size_t rows = pds + (size_t)BN * LDP * 2; /* lse2[BM], dsum[BM] */
	static constexpr size_t bytes = rows + (size_t)2 * BM * 4;
};

static_assert(fwd_smem<128>::p % 32 == 0 && fwd_smem<64>::p % 32 == 0, "wmma alignment");
static_assert(bwd_smem<128>::bytes <= 113 * 1024, "two backward blocks per H100 SM");
static_assert(bwd_smem<128>::rows % 32 == 0 && bwd_smem<64>::rows % 32 == 0, "wmma alignment");

/* Segment and tile of block number b in the padded tile list (file comment): the largest
 * segment i with cu[i] / T + i <= b. That start is strictly increasing in i, and b is below
 * cu[nseg] / T + nseg, so i < nseg. All threads search alike (broadcast loads). */
__device__ __forceinline__ int find_tile(const int32_t *cu, int nseg, int t, int64_t b, int *seg)
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

/* Rows row0..row0+63 of one head of a segment into shared memory (leading dimension D + 8),
 * 16 bytes per load; rows at or past len are zero-filled and never read from global. */
template <int D>
__device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *__restrict__ src, int64_t start,
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

__device__ __forceinline__ uint4 pack8(const float *x)
{
	__nv_bfloat162 h[4];
	for (int i = 0; i < 4; i++)
		h[i] = __floats2bfloat162_rn(x[2 * i], x[2 * i + 1]);
	uint4 u;
	memcpy(&u, h, sizeof u);
	return u;
}

/* Forward, FA2 Algorithm 1: one block per (64-row query tile, query head). Lane l of warp w
 * keeps the softmax state of tile row 16w + l/2 and the output columns (l & 1) + 2j. */
template <int D>
__global__ void __launch_bounds__(NTHREAD) attn_fwd_kernel(fwd_args a)
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
	const int kvh = h / (a.heads / a.kv_heads); /* GQA */
	int seg;
	/* Reverse order: a segment's last (longest-running) tiles are scheduled first. */
	const int tile = find_tile(a.cu_q, a.nseg, BM, (int64_t)gridDim.x - 1 - blockIdx.x, &seg);
	const int64_t q_start = a.cu_q[seg], kv_start = a.cu_kv[seg];
	const int lq = a.cu_q[seg + 1] - a.cu_q[seg], lk = a.cu_kv[seg + 1] - a.cu_kv[seg];
	const int q0 = tile * BM;
	if (q0 >= lq || lk < lq)
		return; /* spare tile, empty segment, or a broken cu_kv (attn.h requires kv >= q) */
	const int off = lk - lq;
	/* Causal early exit: the tile's last row, min(q0 + 64, lq) - 1, sees keys up to
	 * min(q0 + 64, lq) - 1 + off <= lk - 1; later KV tiles are fully masked. */
	const int n_tiles = (min(q0 + BM, lq) + off + BN - 1) / BN;

	/* Alg. 1 line 5: load Q_i; each warp keeps its 16 x D slice as A fragments. */
	load_tile<D>(qs, a.q, q_start, q0, lq, a.heads, h);
	__syncthreads();
	frag_a qf[D / 16];
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++)
		wmma::load_matrix_sync(qf[kk], qs + warp * 16 * LDH + kk * 16, LDH);

	const int rr = lane >> 1, half = lane & 1;
	const int row = q0 + warp * 16 + rr; /* row within the segment */
	const bool row_ok = row < lq;
	const int last_key = row + off; /* bottom-right causal mask (attn.h) */
	/* Alg. 1 line 6: O = 0, l = 0, m = -inf (m in base-2 units of scale * q.k). */
	float m = -INFINITY, l = 0.f;
	float acc[D / 2];
#pragma unroll
	for (int j = 0; j < D / 2; j++)
		acc[j] = 0.f;

	for (int n = 0; n < n_tiles; n++) {
		const int k0 = n * BN;
		__syncthreads(); /* every warp is done with the previous K_j, V_j */
		/* Alg. 1 line 8: load K_j, V_j. */
		load_tile<D>(ks, a.k, kv_start, k0, lk, a.kv_heads, kvh);
		load_tile<D>(vs, a.v, kv_start, k0, lk, a.kv_heads, kvh);
		__syncthreads();

		/* Alg. 1 line 9: S = Q_i K_j^T (16 x 64 per warp). K stored [key][d] read as
		 * column-major D x 64 is K^T. */
#pragma unroll
		for (int j = 0; j < BN / 16; j++) {
			frag_c s;
			wmma::fill_fragment(s, 0.f);
#pragma unroll
			for (int kk = 0; kk < D / 16; kk++) {
				frag_bt kf;
				wmma::load_matrix_sync(kf, ks + j * 16 * LDH + kk * 16, LDH);
				wmma::mma_sync(s, qf[kk], kf, s);
			}
			wmma::store_matrix_sync(scr + j * 16, s, LDF, wmma::mem_row_major);
		}
		__syncwarp();

		/* Alg. 1 line 10: m_new = max(m, rowmax(S)), P = exp(S - m_new),
		 * l = e^(m - m_new) l + rowsum(P). Two lanes per row, 32 columns each. */
		float sv[BN / 2];
		float tmax = -INFINITY;
#pragma unroll
		for (int j = 0; j < BN / 2; j++) {
			const int c = half + 2 * j;
			const int key = k0 + c;
			float x = scr[rr * LDF + c] * a.scale_log2;
			if (!row_ok || key > last_key || key >= lk)
				x = -INFINITY;
			sv[j] = x;
			tmax = fmaxf(tmax, x);
		}
		tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
		const float m_new = fmaxf(m, tmax);
		/* A row with no key seen yet (only rows past the segment end: every real row sees
		 * key 0 in tile 0) keeps m = -inf; subtracting 0 instead avoids inf - inf. */
		const float m_use = m_new == -INFINITY ? 0.f : m_new;
		const float alpha = exp2f(m - m_use);
		float rs = 0.f;
#pragma unroll
		for (int j = 0; j < BN / 2; j++) {
			const float p = exp2f(sv[j] - m_use);
			rs += p;
			ps[rr * LDP + half + 2 * j] = __float2bfloat16_rn(p);
		}
		rs += __shfl_xor_sync(0xffffffffu, rs, 1);
		l = l * alpha + rs;
		m = m_new;
		__syncwarp();

		/* Alg. 1 line 11: O = diag(e^(m - m_new)) O + P V_j. The product goes through the
		 * scratch (its scores are consumed) so that each lane can rescale its own rows. */
		frag_a pf[BN / 16];
#pragma unroll
		for (int kk = 0; kk < BN / 16; kk++)
			wmma::load_matrix_sync(pf[kk], ps + kk * 16, LDP);
#pragma unroll
		for (int j = 0; j < D / 16; j++) {
			frag_c o;
			wmma::fill_fragment(o, 0.f);
#pragma unroll
			for (int kk = 0; kk < BN / 16; kk++) {
				frag_b vf;
				wmma::load_matrix_sync(vf, vs + kk * 16 * LDH + j * 16, LDH);
				wmma::mma_sync(o, pf[kk], vf, o);
			}
			wmma::store_matrix_sync(scr + j * 16, o, LDF, wmma::mem_row_major);
		}
		__syncwarp();
#pragma unroll
		for (int j = 0; j < D / 2; j++)
			acc[j] = acc[j] * alpha + scr[rr * LDF + half + 2 * j];
		__syncwarp();
	}

	/* Alg. 1 lines 13-16: O_i = diag(l)^-1 O, L_i = m + log(l) (natural log), write both. */
	const float inv = row_ok ? 1.f / l : 0.f;
#pragma unroll
	for (int j = 0; j < D / 2; j++)
		scr[rr * LDF + half + 2 * j] = acc[j] * inv;
	if (row_ok && half == 0)
		a.lse[(int64_t)h * a.total_q + q_start + row] = (m + log2f(l)) * LN2;
	__syncwarp();
	for (int i = lane; i < 16 * (D / 8); i += 32) {
		const int r = i / (D / 8), c = i % (D / 8);
		const int orow = q0 + warp * 16 + r;
		if (orow < lq)
			*reinterpret_cast<uint4 *>(a.o + ((q_start + orow) * a.heads + h) * D + c * 8) =
				pack8(scr + r * LDF + c * 8);
	}
}

/* Backward preprocessing, FA2 Alg. 2 lines 4-5: D = rowsum(dO o O) in fp32 (dsum, laid out
 * [heads][total_q] like lse) and dQ = 0 in the fp32 workspace. One warp per (token, head). */
template <int D>
__global__ void attn_bwd_pre_kernel(const bf16 *__restrict__ o, const bf16 *__restrict__ dout,
				    float *dq_ws, float *dsum, int64_t total_q, int heads)
{
	constexpr int E = D / 32;
	const int64_t id = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	const int lane = threadIdx.x & 31;
	if (id >= total_q * heads)
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
		dsum[(id % heads) * total_q + id / heads] = s;
}

/* Backward, FA2 Algorithm 2: one block per (64-key tile, kv head), looping over the query
 * heads of its GQA group and the query tiles that see the tile. Warp w owns keys 16w..16w+15:
 * its dK, dV rows stay in accumulator fragments for the whole loop. dQ is added to the fp32
 * workspace with atomics. Lane l does the elementwise work of key 16w + l/2, query columns
 * (l & 1) + 2j. */
template <int D>
__global__ void __launch_bounds__(NTHREAD) attn_bwd_kernel(bwd_args a)
{
	typedef bwd_smem<D> L;
	constexpr int LDH = L::LDH, LDO = L::LDO;
	extern __shared__ __align__(128) unsigned char smem[];
	bf16 *ks = reinterpret_cast<bf16 *>(smem + L::k);
	bf16 *vs = reinterpret_cast<bf16 *>(smem + L::v);
	bf16 *qs = reinterpret_cast<bf16 *>(smem + L::q);
	bf16 *dos = reinterpret_cast<bf16 *>(smem + L::dout);
	bf16 *pds = reinterpret_cast<bf16 *>(smem + L::pds); /* P^T or dS^T, 64 keys x 64 queries */
	float *lse2 = reinterpret_cast<float *>(smem + L::rows);
	float *dsum = lse2 + BM;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	float *scr = reinterpret_cast<float *>(smem + L::scr) + warp * L::SCR;
	float *scr2 = scr + 16 * LDS;

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

	/* Alg. 2 lines 7-8: load K_j, V_j; dK_j = dV_j = 0. */
	load_tile<D>(ks, a.k, kv_start, n0, lk, a.kv_heads, kvh);
	load_tile<D>(vs, a.v, kv_start, n0, lk, a.kv_heads, kvh);
	frag_c dk[D / 16], dv[D / 16];
#pragma unroll
	for (int j = 0; j < D / 16; j++) {
		wmma::fill_fragment(dk[j], 0.f);
		wmma::fill_fragment(dv[j], 0.f);
	}
	const int rr = lane >> 1, half = lane & 1;
	const int key = n0 + warp * 16 + rr; /* key within the segment */

	for (int hh = 0; hh < group; hh++) {
		const int h = kvh * group + hh;
		for (int mt = mt0; mt < mt1; mt++) {
			const int q0 = mt * BM;
			__syncthreads(); /* previous Q_i, dO_i, dS^T no longer read */
			/* Alg. 2 line 10: load Q_i, dO_i, L_i, D_i (dQ_i stays in global fp32). */
			load_tile<D>(qs, a.q, q_start, q0, lq, a.heads, h);
			load_tile<D>(dos, a.dout, q_start, q0, lq, a.heads, h);
			if (threadIdx.x < BM) {
				const int r = q0 + threadIdx.x;
				const int64_t at = (int64_t)h * a.total_q + q_start + r;
				lse2[threadIdx.x] = r < lq ? a.lse[at] * LOG2E : 0.f;
				dsum[threadIdx.x] = r < lq ? a.dsum[at] : 0.f;
			}
			__syncthreads();

			/* Alg. 2 lines 11 and 14, transposed: S^T = K_j Q_i^T and dP^T = V_j dO_i^T,
			 * 16 keys x 64 queries per warp. Q stored [query][d] read column-major is
			 * Q^T. (Not unrolled over j, for registers as below.) */
#pragma unroll 1
			for (int j = 0; j < BM / 16; j++) {
				frag_c s, dp;
				wmma::fill_fragment(s, 0.f);
				wmma::fill_fragment(dp, 0.f);
#pragma unroll
				for (int kk = 0; kk < D / 16; kk++) {
					frag_a x;
					frag_bt y;
					wmma::load_matrix_sync(x, ks + warp * 16 * LDH + kk * 16, LDH);
					wmma::load_matrix_sync(y, qs + j * 16 * LDH + kk * 16, LDH);
					wmma::mma_sync(s, x, y, s);
					wmma::load_matrix_sync(x, vs + warp * 16 * LDH + kk * 16, LDH);
					wmma::load_matrix_sync(y, dos + j * 16 * LDH + kk * 16, LDH);
					wmma::mma_sync(dp, x, y, dp);
				}
				wmma::store_matrix_sync(scr + j * 16, s, LDS, wmma::mem_row_major);
				wmma::store_matrix_sync(scr2 + j * 16, dp, LDS, wmma::mem_row_major);
			}
			__syncwarp();

			/* Alg. 2 line 12: P = exp(scale S - L_i), masked entries 0; kept in fp32 in
			 * place of S for line 15, and as bf16 P^T for the product. */
#pragma unroll
			for (int j = 0; j < BM / 2; j++) {
				const int c = half + 2 * j;
				const int r = q0 + c;
				const bool ok = r < lq && key < lk && key <= r + off;
				const float p = ok ? exp2f(scr[rr * LDS + c] * a.scale_log2 - lse2[c]) : 0.f;
				scr[rr * LDS + c] = p;
				pds[(warp * 16 + rr) * LDP + c] = __float2bfloat16_rn(p);
			}
			__syncwarp();

			/* Alg. 2 line 13: dV_j += P^T dO_i. One product at a time, kk not unrolled: at
			 * D = 128 the 16 dK, dV fragments leave little room (ptxas -v with CUDA 13.0:
			 * 252 registers, no spill). */
#pragma unroll 1
			for (int kk = 0; kk < BM / 16; kk++) {
				frag_a x;
				wmma::load_matrix_sync(x, pds + warp * 16 * LDP + kk * 16, LDP);
#pragma unroll
				for (int j = 0; j < D / 16; j++) {
					frag_b y;
					wmma::load_matrix_sync(y, dos + kk * 16 * LDH + j * 16, LDH);
					wmma::mma_sync(dv[j], x, y, dv[j]);
				}
			}
			__syncwarp(); /* this warp's P^T rows are read; dS^T replaces them */

			/* Alg. 2 line 15: dS = P o (dP - D_i), stored as bf16 dS^T. */
#pragma unroll
			for (int j = 0; j < BM / 2; j++) {
				const int c = half + 2 * j;
				const float ds = scr[rr * LDS + c] * (scr2[rr * LDS + c] - dsum[c]);
				pds[(warp * 16 + rr) * LDP + c] = __float2bfloat16_rn(ds);
			}
			__syncwarp();

			/* Alg. 2 line 17: dK_j += dS^T Q_i (the softmax scale is applied once, at the
			 * write). */
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
			__syncthreads(); /* all of dS^T is written */

			/* Alg. 2 line 16: dQ_i += scale dS K_j, warp w taking query rows 16w..16w+15,
			 * one 16 x 16 block at a time, added atomically to the fp32 workspace. dS^T
			 * stored [key][query] read column-major is dS. */
			const int qrow0 = q0 + warp * 16;
			for (int j = 0; j < D / 16; j++) {
				frag_c dq;
				wmma::fill_fragment(dq, 0.f);
#pragma unroll
				for (int kk = 0; kk < BN / 16; kk++) {
					frag_at x;
					frag_b y;
					wmma::load_matrix_sync(x, pds + kk * 16 * LDP + warp * 16, LDP);
					wmma::load_matrix_sync(y, ks + kk * 16 * LDH + j * 16, LDH);
					wmma::mma_sync(dq, x, y, dq);
				}
				wmma::store_matrix_sync(scr, dq, LDS, wmma::mem_row_major);
				__syncwarp();
				if (qrow0 < lq) {
					for (int e = lane; e < 256; e += 32) {
						const int i = e >> 4, c = e & 15;
						if (qrow0 + i < lq)
							atomicAdd(a.dq_ws + ((q_start + qrow0 + i) * a.heads + h) * D +
									  j * 16 + c,
								  scr[i * LDS + c] * a.scale);
					}
				}
				__syncwarp();
			}
		}
	}

	/* Alg. 2 line 19: write dK_j (times the softmax scale) and dV_j, rows below lk only. */
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
			if (krow < lk) {
				float x[8];
				for (int e = 0; e < 8; e++)
					x[e] = scr[r * LDO + c * 8 + e] * mul;
				*reinterpret_cast<uint4 *>(
					out + ((kv_start + krow) * a.kv_heads + kvh) * D + c * 8) = pack8(x);
			}
		}
		__syncwarp();
	}
}

/* dQ: fp32 workspace to bf16, four values per thread (the size is a multiple of 64). */
__global__ void attn_dq_convert_kernel(const float4 *__restrict__ ws, uint2 *dq, int64_t n4)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
	     i += (int64_t)gridDim.x * blockDim.x) {
		const float4 x = ws[i];
		__nv_bfloat162 h[2] = {__floats2bfloat162_rn(x.x, x.y), __floats2bfloat162_rn(x.z, x.w)};
		uint2 u;
		memcpy(&u, h, sizeof u);
		dq[i] = u;
	}
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
	if (s->total_q > INT32_MAX || s->total_kv > INT32_MAX)
		return bp_errorf(err, "%s: total_q %lld or total_kv %lld beyond int32 offsets", what,
				 (long long)s->total_q, (long long)s->total_kv);
	if (s->total_kv < s->total_q)
		return bp_errorf(err, "%s: total_kv %lld below total_q %lld (kv_len >= q_len per "
				 "segment)", what, (long long)s->total_kv, (long long)s->total_q);
	if (!isfinite(s->scale))
		return bp_errorf(err, "%s: scale is not finite", what);
	return 0;
}

/* The tensors move in 16-byte vectors, so their rows (head_dim * 2 bytes) must be 16-byte
 * aligned; cu_q, cu_kv and lse are read one element at a time and need only their element's
 * alignment (4). align 0: the pointer is not used (an empty tensor). */
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

/* Padded tile count of the file comment: total / T + nseg blocks. */
int tile_blocks(int64_t total, int nseg, const char *what, unsigned *out, struct bp_error *err)
{
	const int64_t n = total / 64 + nseg;
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
	const size_t bytes = fwd_smem<D>::bytes;
	if (cuda_check(cudaFuncSetAttribute(attn_fwd_kernel<D>,
					    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
		       what, err))
		return -1;
	attn_fwd_kernel<D><<<dim3(nblk, (unsigned)s->heads), NTHREAD, bytes, st>>>(a);
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
	const size_t bytes = bwd_smem<D>::bytes;
	if (cuda_check(cudaFuncSetAttribute(attn_bwd_kernel<D>,
					    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
		       what, err))
		return -1;
	attn_bwd_kernel<D><<<dim3(nblk, (unsigned)s->kv_heads), NTHREAD, bytes, st>>>(a);
	if (cuda_check(cudaGetLastError(), what, err))
		return -1;
	if (rows > 0) {
		const int64_t n4 = rows * D / 4;
		const int64_t nb = (n4 + 255) / 256;
		attn_dq_convert_kernel<<<(unsigned)(nb < 65536 ? nb : 65536), 256, 0, st>>>(
			reinterpret_cast<const float4 *>(a.dq_ws), reinterpret_cast<uint2 *>(dq), n4);
		if (cuda_check(cudaGetLastError(), what, err))
			return -1;
	}
	return 0;
}

/* Workspace layout: dQ fp32 [total_q][heads][head_dim], then dsum fp32 [heads][total_q]. The
 * first part is a multiple of 256 bytes (head_dim is 64 or 128), so dsum stays aligned. */
size_t dq_ws_bytes(const struct bp_attn_shape *s)
{
	return (size_t)s->total_q * (size_t)s->heads * (size_t)s->head_dim * sizeof(float);
}

} /* namespace */

extern "C" size_t bp_attn_bwd_workspace(const struct bp_attn_shape *s)
{
	if (!s || s->total_q < 0 || s->heads < 0 || s->head_dim < 0)
		return 0;
	return dq_ws_bytes(s) + (size_t)s->total_q * (size_t)s->heads * sizeof(float);
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
	if (tile_blocks(s->total_q, s->nseg, what, &nblk, err))
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
	    check_ptr(dv, ak, what, "dv", err) || check_ptr(ws, aq, what, "ws", err))
		return -1;
	if (!hk)
		return 0; /* no key, hence no query row either */
	unsigned nblk = 0;
	if (tile_blocks(s->total_kv, s->nseg, what, &nblk, err))
		return -1;
	float *dq_ws = static_cast<float *>(ws);
	float *dsum = hq ? reinterpret_cast<float *>(static_cast<char *>(ws) + dq_ws_bytes(s))
			 : nullptr;
	bwd_args a;
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
