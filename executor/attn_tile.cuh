/* attn_tile.cuh: the attention tile that the dense kernels (attn.cu) and the block-sparse
 * ones (attn_sparse.cu) share: constants, fragment types, shared-memory layouts, the padded
 * tile numbering, the tile loader, and the steps of FlashAttention-2 (Dao 2023) on a 64 x 64
 * tile, Algorithm 1 (forward: load K_j, V_j, S = Q K^T, online softmax, O += P V) and
 * Algorithm 2 (backward: load Q_i, dO_i, S^T and dP^T, P, dV += P^T dO, dS, dK += dS^T Q,
 * dQ += dS K), with their start and final writes, written here for WMMA bf16 tensor cores; no
 * code is taken from FlashAttention. Each kernel keeps what differs: which tiles it visits,
 * the bounds of its causal mask, and (sparse) the selection and the search of its lists.
 *
 * Tiles: 64 query rows x 64 keys, 4 warps per block, each warp owning 16 rows of the tile
 * (query rows in the forward, key rows in the backward).
 *
 * Barriers: fwd_start, fwd_tile and bwd_tile are whole-block steps, called by every thread
 * of the block (never from divergent code); they hold the __syncthreads around the tile loads
 * and between the backward's dK and dQ steps, and every function here holds the __syncwarp
 * that order its warp's own scratch. tests/emu runs this header through emu_prep like the .cu
 * files, so these barriers are named by these functions ("fwd_tile:syncthreads:1",
 * "bwd_tile:syncwarp:3"; tests/emu/README.md).
 *
 * Everything is in namespace attn_tile and inline or a template: both .cu files include it
 * into one library. */
#ifndef BP_ATTN_TILE_CUH
#define BP_ATTN_TILE_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bp.h"

namespace attn_tile {

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

/* TAIL: bytes after the shared regions for the kernel's own use (the sparse backward's
 * candidate flags), at offset tail. */
template <int D, int TAIL = 0> struct bwd_smem {
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
	static constexpr size_t tail = rows + (size_t)2 * BM * 4;
	static constexpr size_t bytes = tail + TAIL;
};

static_assert(fwd_smem<128>::p % 32 == 0 && fwd_smem<64>::p % 32 == 0, "wmma alignment");
static_assert(bwd_smem<128>::bytes <= 113 * 1024, "two backward blocks per H100 SM");
static_assert(bwd_smem<128>::rows % 32 == 0 && bwd_smem<64>::rows % 32 == 0, "wmma alignment");

/* Padded numbering: segment i owns items (tiles of T rows, or the sparse selection's blocks of
 * T keys) cu[i] / T + i .. cu[i + 1] / T + i (inclusive), at least ceil(len / T) of them; the
 * spare one, if any, exits at once. So one launch covers all segments without a host-side
 * table. Returns the local index of padded item b and sets *seg: the largest segment i with
 * cu[i] / T + i <= b. That start is strictly increasing in i, and b is below
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

/* ---- forward, FA2 Algorithm 1 ---- */

/* The forward's shared memory (fwd_smem) as one warp uses it. */
template <int D> struct fwd_shared {
	bf16 *qs, *ks, *vs; /* Q_i, K_j, V_j: 64 rows each, leading dimension D + 8 */
	float *scr;         /* the warp's fp32 scratch: 16 x 64 scores or 16 x D */
	bf16 *ps;           /* the warp's P, 16 x 64 */
};

template <int D>
__device__ __forceinline__ fwd_shared<D> fwd_shared_at(unsigned char *smem, int warp)
{
	typedef fwd_smem<D> L;
	fwd_shared<D> sh;
	sh.qs = reinterpret_cast<bf16 *>(smem + L::q);
	sh.ks = reinterpret_cast<bf16 *>(smem + L::k);
	sh.vs = reinterpret_cast<bf16 *>(smem + L::v);
	sh.scr = reinterpret_cast<float *>(smem + L::scr) + warp * 16 * L::LDF;
	sh.ps = reinterpret_cast<bf16 *>(smem + L::p) + warp * 16 * LDP;
	return sh;
}

/* What a lane carries from one KV tile to the next: lane l of warp w keeps the softmax state
 * of tile row 16w + l/2 and the output columns (l & 1) + 2j. */
template <int D> struct fwd_rows {
	float m, l;       /* running max (base-2 units of scale * q.k) and sum */
	float acc[D / 2]; /* O, not yet divided by l */
};

/* Alg. 1 lines 5-6, whole block: load Q_i (rows q0.. of head h of a segment from start, qlen
 * rows, nh heads); each warp keeps its 16 x D slice as A fragments; O = 0, l = 0, m = -inf. */
template <int D>
__device__ __forceinline__ void fwd_start(frag_a (&qf)[D / 16], fwd_rows<D> &st,
					  const fwd_shared<D> &sh, const bf16 *q, int64_t start,
					  int q0, int qlen, int nh, int h, int warp)
{
	constexpr int LDH = fwd_smem<D>::LDH;
	load_tile<D>(sh.qs, q, start, q0, qlen, nh, h);
	__syncthreads();
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++)
		wmma::load_matrix_sync(qf[kk], sh.qs + warp * 16 * LDH + kk * 16, LDH);
	st.m = -INFINITY;
	st.l = 0.f;
#pragma unroll
	for (int j = 0; j < D / 2; j++)
		st.acc[j] = 0.f;
}

/* Alg. 1 lines 8-11, whole block, for the KV tile of keys k0..k0+63 (kv head kvh of a segment
 * from start, klen keys, kv_heads heads); each warp does its 16 rows. The lane's row is
 * masked out entirely unless row_ok, and sees key c iff c <= last_key and c < klen. */
template <int D>
__device__ __forceinline__ void fwd_tile(fwd_rows<D> &st, const frag_a (&qf)[D / 16],
					 const fwd_shared<D> &sh, const bf16 *k, const bf16 *v,
					 int64_t start, int k0, int klen, int kv_heads, int kvh,
					 int lane, bool row_ok, int last_key, float scale_log2)
{
	constexpr int LDH = fwd_smem<D>::LDH, LDF = fwd_smem<D>::LDF;
	const bf16 *ks = sh.ks, *vs = sh.vs;
	float *scr = sh.scr;
	bf16 *ps = sh.ps;
	const int rr = lane >> 1, half = lane & 1;

	__syncthreads(); /* every warp is done with the previous K_j, V_j */
	/* Alg. 1 line 8: load K_j, V_j. */
	load_tile<D>(sh.ks, k, start, k0, klen, kv_heads, kvh);
	load_tile<D>(sh.vs, v, start, k0, klen, kv_heads, kvh);
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
		float x = scr[rr * LDF + c] * scale_log2;
		if (!row_ok || key > last_key || key >= klen)
			x = -INFINITY;
		sv[j] = x;
		tmax = fmaxf(tmax, x);
	}
	tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
	const float m_new = fmaxf(st.m, tmax);
	/* A row with no key seen yet (only rows past the segment end: every real row sees the
	 * first key of the first tile it visits) keeps m = -inf; subtracting 0 instead avoids
	 * inf - inf. */
	const float m_use = m_new == -INFINITY ? 0.f : m_new;
	const float alpha = exp2f(st.m - m_use);
	float rs = 0.f;
#pragma unroll
	for (int j = 0; j < BN / 2; j++) {
		const float p = exp2f(sv[j] - m_use);
		rs += p;
		ps[rr * LDP + half + 2 * j] = __float2bfloat16_rn(p);
	}
	rs += __shfl_xor_sync(0xffffffffu, rs, 1);
	st.l = st.l * alpha + rs;
	st.m = m_new;
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
		st.acc[j] = st.acc[j] * alpha + scr[rr * LDF + half + 2 * j];
	__syncwarp();
}

/* Alg. 1 lines 13-16: O_i = diag(l)^-1 O, L_i = m + log(l) (natural log), written for the
 * warp's rows q0 + 16 warp .. below qlen: O to o (rows from start, nh heads, head h), L to
 * lse[lse_at] (the lane's row, when row_ok). A row with l = 0 gets NaN. */
template <int D>
__device__ __forceinline__ void fwd_finish(const fwd_rows<D> &st, const fwd_shared<D> &sh,
					   int warp, int lane, bool row_ok, float *lse,
					   int64_t lse_at, bf16 *o, int64_t start, int q0, int qlen,
					   int nh, int h)
{
	constexpr int LDF = fwd_smem<D>::LDF;
	float *scr = sh.scr;
	const int rr = lane >> 1, half = lane & 1;
	const float inv = row_ok ? 1.f / st.l : 0.f;
#pragma unroll
	for (int j = 0; j < D / 2; j++)
		scr[rr * LDF + half + 2 * j] = st.acc[j] * inv;
	if (row_ok && half == 0)
		lse[lse_at] = (st.m + log2f(st.l)) * LN2;
	__syncwarp();
	for (int i = lane; i < 16 * (D / 8); i += 32) {
		const int r = i / (D / 8), c = i % (D / 8);
		const int orow = q0 + warp * 16 + r;
		if (orow < qlen)
			*reinterpret_cast<uint4 *>(o + ((start + orow) * nh + h) * D + c * 8) =
				pack8(scr + r * LDF + c * 8);
	}
}

/* ---- backward, FA2 Algorithm 2 ---- */

/* Lines 4-5, one warp per (token, head) of a preprocessing kernel: D = rowsum(dO o O) in
 * fp32 (dsum, laid out [heads][total_q] like lse) and dQ = 0 in the fp32 workspace. */
template <int D>
__device__ __forceinline__ void bwd_pre(const bf16 *__restrict__ o,
					const bf16 *__restrict__ dout, float *dq_ws, float *dsum,
					int64_t total_q, int heads)
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

/* The backward's shared memory (bwd_smem, whatever its TAIL) as one warp uses it. */
template <int D> struct bwd_shared {
	bf16 *ks, *vs, *qs, *dos; /* K_j, V_j, Q_i, dO_i: 64 rows each, leading dimension D + 8 */
	bf16 *pds;                /* P^T or dS^T, 64 keys x 64 queries */
	float *lse2, *dsum;       /* L_i (base 2) and D_i of the query tile's 64 rows */
	float *scr;               /* the warp's fp32 scratch: S^T, then dP^T 16 LDS further */
};

template <int D>
__device__ __forceinline__ bwd_shared<D> bwd_shared_at(unsigned char *smem, int warp)
{
	typedef bwd_smem<D> L;
	bwd_shared<D> sh;
	sh.ks = reinterpret_cast<bf16 *>(smem + L::k);
	sh.vs = reinterpret_cast<bf16 *>(smem + L::v);
	sh.qs = reinterpret_cast<bf16 *>(smem + L::q);
	sh.dos = reinterpret_cast<bf16 *>(smem + L::dout);
	sh.pds = reinterpret_cast<bf16 *>(smem + L::pds);
	sh.lse2 = reinterpret_cast<float *>(smem + L::rows);
	sh.dsum = sh.lse2 + BM;
	sh.scr = reinterpret_cast<float *>(smem + L::scr) + warp * L::SCR;
	return sh;
}

/* Lines 7-8: load K_j, V_j (rows n0.. of kv head kvh of a segment from start, klen keys);
 * dK_j = dV_j = 0. */
template <int D>
__device__ __forceinline__ void bwd_start(frag_c (&dk)[D / 16], frag_c (&dv)[D / 16],
					  const bwd_shared<D> &sh, const bf16 *k, const bf16 *v,
					  int64_t start, int n0, int klen, int kv_heads, int kvh)
{
	load_tile<D>(sh.ks, k, start, n0, klen, kv_heads, kvh);
	load_tile<D>(sh.vs, v, start, n0, klen, kv_heads, kvh);
#pragma unroll
	for (int j = 0; j < D / 16; j++) {
		wmma::fill_fragment(dk[j], 0.f);
		wmma::fill_fragment(dv[j], 0.f);
	}
}

/* acc += X Y for the warp's 16 rows: X the warp's 16 x 64 rows of P^T or dS^T at x (leading
 * dimension LDP), Y a 64 x D shared tile at y (dO or Q). One X fragment at a time, kk not
 * unrolled: at D = 128 the 16 dK, dV fragments leave little room (ptxas -v with CUDA 13.0:
 * 252 registers in attn.cu, 255 in attn_sparse.cu, no spill). */
template <int D>
__device__ __forceinline__ void mma_rows(frag_c (&acc)[D / 16], const bf16 *x, const bf16 *y)
{
	constexpr int LDH = D + PADH;
#pragma unroll 1
	for (int kk = 0; kk < BM / 16; kk++) {
		frag_a xf;
		wmma::load_matrix_sync(xf, x + kk * 16, LDP);
#pragma unroll
		for (int j = 0; j < D / 16; j++) {
			frag_b yf;
			wmma::load_matrix_sync(yf, y + kk * 16 * LDH + j * 16, LDH);
			wmma::mma_sync(acc[j], xf, yf, acc[j]);
		}
	}
}

/* Lines 10-17, whole block, for the pair of the key tile n0 (K_j, V_j loaded by bwd_start;
 * klen keys) and the query tile q0 of head h (rows from start, qlen of them, heads heads; lse
 * and dsum_g [heads][total_q], dQ_i added to dq_ws). Query row r sees key c iff r < qlen,
 * c < klen and c <= r + off. Warp w owns keys n0 + 16w .. + 15, their dK, dV rows in dk, dv;
 * lane l does the elementwise work of key n0 + 16w + l/2, query columns (l & 1) + 2j. */
template <int D>
__device__ __forceinline__ void bwd_tile(frag_c (&dk)[D / 16], frag_c (&dv)[D / 16],
					 const bwd_shared<D> &sh, const bf16 *q, const bf16 *dout,
					 const float *lse, const float *dsum_g, float *dq_ws,
					 int64_t total_q, int64_t start, int q0, int qlen,
					 int heads, int h, int n0, int klen, int off, float scale,
					 float scale_log2, int warp, int lane)
{
	constexpr int LDH = bwd_smem<D>::LDH;
	const bf16 *ks = sh.ks, *vs = sh.vs, *qs = sh.qs, *dos = sh.dos;
	bf16 *pds = sh.pds;
	float *scr = sh.scr, *scr2 = sh.scr + 16 * LDS;
	const int rr = lane >> 1, half = lane & 1;
	const int key = n0 + warp * 16 + rr; /* key within the segment */
	/* The warp's rows of K_j and V_j, formed once: as "ks + warp * 16 * LDH + kk * 16"
	 * inside the loop, D = 128 took 3 more registers (ptxas, CUDA 13.0). */
	const bf16 *kw = ks + warp * 16 * LDH, *vw = vs + warp * 16 * LDH;

	__syncthreads(); /* previous Q_i, dO_i, dS^T no longer read */
	/* Line 10: load Q_i, dO_i, L_i (base 2), D_i (0 past qlen); dQ_i stays in global
	 * fp32. */
	load_tile<D>(sh.qs, q, start, q0, qlen, heads, h);
	load_tile<D>(sh.dos, dout, start, q0, qlen, heads, h);
	if (threadIdx.x < BM) {
		const int r = q0 + threadIdx.x;
		const int64_t at = (int64_t)h * total_q + start + r;
		sh.lse2[threadIdx.x] = r < qlen ? lse[at] * LOG2E : 0.f;
		sh.dsum[threadIdx.x] = r < qlen ? dsum_g[at] : 0.f;
	}
	__syncthreads();

	/* Lines 11 and 14, transposed: S^T = K_j Q_i^T and dP^T = V_j dO_i^T, 16 keys x 64
	 * queries per warp. Q stored [query][d] read column-major is Q^T. (Not unrolled over j,
	 * for registers as in mma_rows.) */
#pragma unroll 1
	for (int j = 0; j < BM / 16; j++) {
		frag_c s, dp;
		wmma::fill_fragment(s, 0.f);
		wmma::fill_fragment(dp, 0.f);
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			frag_a x;
			frag_bt y;
			wmma::load_matrix_sync(x, kw + kk * 16, LDH);
			wmma::load_matrix_sync(y, qs + j * 16 * LDH + kk * 16, LDH);
			wmma::mma_sync(s, x, y, s);
			wmma::load_matrix_sync(x, vw + kk * 16, LDH);
			wmma::load_matrix_sync(y, dos + j * 16 * LDH + kk * 16, LDH);
			wmma::mma_sync(dp, x, y, dp);
		}
		wmma::store_matrix_sync(scr + j * 16, s, LDS, wmma::mem_row_major);
		wmma::store_matrix_sync(scr2 + j * 16, dp, LDS, wmma::mem_row_major);
	}
	__syncwarp();

	/* Line 12: P = exp(scale S - L_i), masked entries 0; kept in fp32 in place of S for
	 * line 15, and as bf16 P^T for the product. */
#pragma unroll
	for (int j = 0; j < BM / 2; j++) {
		const int c = half + 2 * j;
		const int r = q0 + c;
		const bool ok = r < qlen && key < klen && key <= r + off;
		const float p = ok ? exp2f(scr[rr * LDS + c] * scale_log2 - sh.lse2[c]) : 0.f;
		scr[rr * LDS + c] = p;
		pds[(warp * 16 + rr) * LDP + c] = __float2bfloat16_rn(p);
	}
	__syncwarp();

	/* Line 13: dV_j += P^T dO_i. */
	mma_rows<D>(dv, pds + warp * 16 * LDP, dos);
	__syncwarp(); /* this warp's P^T rows are read; dS^T replaces them */

	/* Line 15: dS = P o (dP - D_i), stored as bf16 dS^T. */
#pragma unroll
	for (int j = 0; j < BM / 2; j++) {
		const int c = half + 2 * j;
		const float ds = scr[rr * LDS + c] * (scr2[rr * LDS + c] - sh.dsum[c]);
		pds[(warp * 16 + rr) * LDP + c] = __float2bfloat16_rn(ds);
	}
	__syncwarp();

	/* Line 17: dK_j += dS^T Q_i (the softmax scale is applied once, at the write). */
	mma_rows<D>(dk, pds + warp * 16 * LDP, qs);
	__syncthreads(); /* all of dS^T is written */

	/* Line 16: dQ_i += scale dS K_j, warp w taking query rows q0 + 16w .. + 15, one 16 x 16
	 * block at a time, added atomically to the fp32 workspace. dS^T stored [key][query]
	 * read column-major is dS. */
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
		if (qrow0 < qlen) {
			for (int e = lane; e < 256; e += 32) {
				const int i = e >> 4, c = e & 15;
				if (qrow0 + i < qlen)
					atomicAdd(dq_ws + ((start + qrow0 + i) * heads + h) * D +
							  j * 16 + c,
						  scr[i * LDS + c] * scale);
			}
		}
		__syncwarp();
	}
}

/* Line 19: write dK_j (times the softmax scale) and dV_j, the warp's rows n0 + 16w .. below
 * klen (kv head kvh, kv_heads heads, a segment from start). */
template <int D>
__device__ __forceinline__ void bwd_finish(const frag_c (&dk)[D / 16], const frag_c (&dv)[D / 16],
					   const bwd_shared<D> &sh, bf16 *dk_out, bf16 *dv_out,
					   float scale, int warp, int lane, int64_t start, int n0,
					   int klen, int kv_heads, int kvh)
{
	constexpr int LDO = bwd_smem<D>::LDO;
	float *scr = sh.scr;
	for (int which = 0; which < 2; which++) {
#pragma unroll
		for (int j = 0; j < D / 16; j++)
			wmma::store_matrix_sync(scr + j * 16, which ? dv[j] : dk[j], LDO,
						wmma::mem_row_major);
		__syncwarp();
		bf16 *out = which ? dv_out : dk_out;
		const float mul = which ? 1.f : scale;
		for (int i = lane; i < 16 * (D / 8); i += 32) {
			const int r = i / (D / 8), c = i % (D / 8);
			const int krow = n0 + warp * 16 + r;
			if (krow < klen) {
				float x[8];
				for (int e = 0; e < 8; e++)
					x[e] = scr[r * LDO + c * 8 + e] * mul;
				*reinterpret_cast<uint4 *>(
					out + ((start + krow) * kv_heads + kvh) * D + c * 8) = pack8(x);
			}
		}
		__syncwarp();
	}
}

/* dQ: fp32 workspace to bf16, four values per thread (the size is a multiple of 64), the
 * body of a grid-stride kernel. */
__device__ __forceinline__ void dq_convert(const float4 *__restrict__ ws, uint2 *dq, int64_t n4)
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

/* ---- host side: the launchers' checks ---- */

/* The tensors move in 16-byte vectors, so their rows (head_dim * 2 bytes) must be 16-byte
 * aligned; cu arrays, lse and k_seg are read one element at a time and need only their
 * element's alignment (4). align 0: the pointer is not used (an empty tensor). */
inline int check_ptr(const void *p, int align, const char *what, const char *name,
		     struct bp_error *err)
{
	if (!align)
		return 0;
	if (!p)
		return bp_errorf(err, "%s: '%s' is null", what, name);
	if ((uintptr_t)p % (uintptr_t)align != 0)
		return bp_errorf(err, "%s: '%s' is not %d-byte aligned", what, name, align);
	return 0;
}

/* The head checks of both shapes; what names the call ("attention forward", ...). */
inline int check_heads(int head_dim, int heads, int kv_heads, const char *what,
		       struct bp_error *err)
{
	if (head_dim != 64 && head_dim != 128)
		return bp_errorf(err, "%s: unsupported head_dim %d (64 or 128)", what, head_dim);
	if (heads == 0 || kv_heads == 0)
		return bp_errorf(err, "%s: heads (%d) and kv_heads (%d) must be positive", what,
				 heads, kv_heads);
	if (heads % kv_heads != 0)
		return bp_errorf(err, "%s: heads (%d) is not a multiple of kv_heads (%d)", what,
				 heads, kv_heads);
	if (heads > 65535)
		return bp_errorf(err, "%s: heads %d above the grid limit 65535", what, heads);
	return 0;
}

inline int cuda_check(cudaError_t e, const char *what, struct bp_error *err)
{
	if (e == cudaSuccess)
		return 0;
	return bp_errorf(err, "%s: cuda error: %s", what, cudaGetErrorString(e));
}

} /* namespace attn_tile */

#endif
