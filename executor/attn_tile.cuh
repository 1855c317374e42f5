/* attn_tile.cuh: the attention tile that the dense kernels (attn.cu) and the block-sparse
 * ones (attn_sparse.cu) share: constants, shared-memory layouts, the padded tile numbering,
 * the asynchronous tile loads, and the steps of FlashAttention-2 (Dao 2023), Algorithm 1
 * (forward: load K_j, V_j, S = Q K^T, online softmax, O += P V) and Algorithm 2 (backward:
 * load Q_i, dO_i, S^T and dP^T, P, dV += P^T dO, dS, dK += dS^T Q, dQ += dS K), with their
 * start and final writes, written here for the bf16 mma.m16n8k16 tensor-core instruction
 * (attn_ptx.cuh); no code is taken from FlashAttention. Each kernel keeps what differs: which
 * tiles it visits, the bounds of its causal mask, and (sparse) the selection and the search
 * of its lists.
 *
 * Warps and registers: each warp owns 16 rows of a tile (query rows in the forward, key rows
 * in the backward); lane l holds rows g = l / 4 and g + 8 of them and, of an 8-column slice,
 * columns 2t and 2t + 1 (t = l % 4): the accumulator layout of mma.m16n8k16. Scores,
 * probabilities, the online softmax's state and the outputs stay in registers: a score tile
 * S (or S^T) in accumulator layout is, packed to bf16 pairs, the A operand of the next
 * product, so nothing but dS^T (which the dQ product needs across warps) goes through shared
 * memory. Operands come from shared memory by ldmatrix (x4; .trans where the product needs
 * the tile transposed); shared rows are padded by 16 bytes so the eight row addresses of
 * one 8 x 8 matrix fall in distinct banks.
 *
 * Pipeline: tiles move global -> shared by cp.async (16 bytes a thread, rows past a segment's
 * end zero-filled), double buffered: while a warp computes on stage s, the block's copies of
 * the next tile land in stage s ^ 1. A step starts with cp_async_wait<0> (this thread's copies
 * of the current tile landed) and one __syncthreads (everyone's landed, and nobody still reads
 * the other stage), then issues the next tile's copies, then computes.
 *
 * Forward blocks are 16 NW rows (NW warps: 8 for the dense kernel, 128 rows, so that each K,
 * V tile loaded serves twice the rows; 4 for the sparse one, whose selection is per 64-row
 * tile); backward blocks are 64 keys (4 warps) stepping over 64-query tiles.
 *
 * Barriers: fwd_begin, fwd_tile, bwd_tile and the issue functions are whole-block steps,
 * called by every thread of the block (never from divergent code). tests/emu runs this
 * header through emu_prep like the .cu files, so these barriers are named by these functions
 * ("fwd_tile:syncthreads:1", "bwd_tile:cpwait:1"; tests/emu/README.md).
 *
 * Everything is in namespace attn_tile and inline or a template: both .cu files include it
 * into one library. */
#ifndef BP_ATTN_TILE_CUH
#define BP_ATTN_TILE_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn_ptx.cuh"
#include "bp.h"

namespace attn_tile {

typedef __nv_bfloat16 bf16;
using attn_ptx::cp_async16;
using attn_ptx::cp_async_commit;
using attn_ptx::cp_async_wait;
using attn_ptx::ldsm_x4;
using attn_ptx::ldsm_x4_t;
using attn_ptx::mma_16816;

constexpr int BM = 64;              /* query rows of a sparse tile and of a backward step */
constexpr int BN = 64;              /* keys per tile (FA2's B_c) */
constexpr int NWARP = 4;            /* backward and sparse blocks: 4 warps, 64 rows */
constexpr int NTHREAD = NWARP * 32;
constexpr int PADH = 8;             /* bf16 padding per shared row: 16 bytes, spreads banks */
constexpr int LDP = BM + PADH;      /* the shared dS^T tile, 64 keys x 64 queries */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

/* Bytes of a 64-row bf16 tile of width D in shared memory. */
template <int D> struct tile_sz {
	static constexpr size_t bytes = (size_t)BN * (D + PADH) * 2;
};

/* Forward shared memory: two stages of K_j, V_j. Q_i (16 NW rows, at most two tiles' worth)
 * is loaded into stage 1 and read into registers before the first tile's barrier, after which
 * stage 1 takes the second KV tile. */
template <int D, int NW> struct fwd_smem {
	static_assert(NW == 4 || NW == 8, "64 or 128 query rows");
	static constexpr int LDH = D + PADH;
	static constexpr size_t stage = 2 * tile_sz<D>::bytes;
	static constexpr size_t q = stage;
	static constexpr size_t bytes = 2 * stage;
};

/* Backward shared memory: K_j, V_j for the block's life; two stages of Q_i, dO_i and the
 * tile's L_i (base 2) and D_i rows; the dS^T tile. TAIL: bytes after them for the kernel's
 * own use (the sparse backward's candidate flags), at offset tail. */
template <int D, int TAIL = 0> struct bwd_smem {
	static constexpr int LDH = D + PADH;
	static constexpr size_t k = 0;
	static constexpr size_t v = k + tile_sz<D>::bytes;
	static constexpr size_t st0 = v + tile_sz<D>::bytes;
	/* within a stage: Q_i, dO_i, then lse2[BM] and dsum[BM] */
	static constexpr size_t s_q = 0, s_do = tile_sz<D>::bytes, s_rows = 2 * tile_sz<D>::bytes;
	static constexpr size_t stage = s_rows + 2 * BM * 4;
	static constexpr size_t pds = st0 + 2 * stage;
	static constexpr size_t tail = pds + (size_t)BN * LDP * 2;
	static constexpr size_t bytes = tail + TAIL;
};

static_assert(fwd_smem<128, 8>::bytes <= 113 * 1024, "two forward blocks per H100 SM");
static_assert(bwd_smem<128, NTHREAD>::bytes <= 113 * 1024, "two backward blocks per H100 SM");
static_assert(bwd_smem<128>::stage % 16 == 0 && bwd_smem<64>::stage % 16 == 0, "cp.async");

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

/* Rows row0..row0+nrows-1 of head h of a segment from start (len rows, nh heads) into shared
 * memory at dst (leading dimension D + 8), by cp.async, 16 bytes a thread at a time, NT
 * threads; rows at or past len are zero-filled and never read from global (src itself is
 * only named). The caller commits the group. */
template <int D, int NT>
__device__ __forceinline__ void issue_rows(bf16 *dst, const bf16 *__restrict__ src, int64_t start,
					   int row0, int nrows, int len, int nh, int h)
{
	constexpr int CH = D / 8;
	constexpr int LDH = D + PADH;
	for (int i = threadIdx.x; i < nrows * CH; i += NT) {
		const int r = i / CH, c = i % CH;
		const bool ok = row0 + r < len;
		const bf16 *s = ok ? src + ((start + row0 + r) * nh + h) * D + c * 8 : src;
		cp_async16(dst + r * LDH + c * 8, s, ok ? 16 : 0);
	}
}

/* Two floats as one register of the bf16 pair (lo in the low half), an mma operand. */
__device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
	const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
	uint32_t u;
	memcpy(&u, &h, sizeof u);
	return u;
}

/* ldmatrix row addresses. A lane's address in a 16 x 16 A operand stored row-major (rows m,
 * columns k) at p, ld elements per row: */
__device__ __forceinline__ const bf16 *a_rows(const bf16 *p, int ld, int lane)
{
	return p + (lane & 15) * ld + 8 * (lane >> 4);
}

/* ... in the B operands of two n8 tiles (n 0-7, 8-15) by 16 k, stored with rows n and
 * columns k (K for S = Q K^T), read without .trans: r[0], r[1] tile 0, r[2], r[3] tile 1. */
__device__ __forceinline__ const bf16 *b_rows_nk(const bf16 *p, int ld, int lane)
{
	return p + ((lane & 7) + 8 * (lane >> 4)) * ld + 8 * ((lane >> 3) & 1);
}

/* ... stored with rows k and columns n (V for P V), read with .trans. */
__device__ __forceinline__ const bf16 *b_rows_kn(const bf16 *p, int ld, int lane)
{
	return p + ((lane & 7) + 8 * ((lane >> 3) & 1)) * ld + 8 * (lane >> 4);
}

/* ... in a 16 x 16 A operand stored transposed (rows k, columns m: dS^T for dQ = dS K), read
 * with .trans. */
__device__ __forceinline__ const bf16 *a_rows_t(const bf16 *p, int ld, int lane)
{
	return p + ((lane & 7) + 8 * (lane >> 4)) * ld + 8 * ((lane >> 3) & 1);
}

/* acc[2j], acc[2j + 1] += A B over the 16 columns of B from b (16 k rows, stored rows k,
 * columns n, leading dimension ld), for j = 0 .. N / 16 - 1: A one 16 x 16 operand in a. */
template <int N>
__device__ __forceinline__ void mma_a_bkn(float (&acc)[N / 8][4], const uint32_t (&a)[4],
					  const bf16 *b, int ld, int lane)
{
	const bf16 *p = b_rows_kn(b, ld, lane);
#pragma unroll
	for (int j = 0; j < N / 16; j++) {
		uint32_t r[4];
		ldsm_x4_t(r, p + 16 * j);
		const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
		mma_16816(acc[2 * j], a, b0, acc[2 * j]);
		mma_16816(acc[2 * j + 1], a, b1, acc[2 * j + 1]);
	}
}

/* The A operand of keys (or queries) 16 kk .. + 15 from a 16 x 64 score tile in accumulator
 * layout: n8 tiles 2 kk and 2 kk + 1, rows g and g + 8. */
__device__ __forceinline__ void a_from_acc(uint32_t (&a)[4], const float (&s)[8][4], int kk)
{
	a[0] = pack2(s[2 * kk][0], s[2 * kk][1]);
	a[1] = pack2(s[2 * kk][2], s[2 * kk][3]);
	a[2] = pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
	a[3] = pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

/* s = A B^T for the warp's 16 rows against 64 columns (rows of bt, a 64-row shared tile
 * stored rows n, columns k, leading dimension D + 8): A's D / 16 operands from a (rows
 * a_rows, or registers when af is given). */
template <int D>
__device__ __forceinline__ void mma_abt(float (&s)[8][4], const uint32_t (*af)[4],
					const bf16 *a, const bf16 *bt, int lane)
{
	constexpr int LDH = D + PADH;
#pragma unroll
	for (int n = 0; n < 8; n++)
		s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
	const bf16 *pa = a ? a_rows(a, LDH, lane) : nullptr;
	const bf16 *pb = b_rows_nk(bt, LDH, lane);
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++) {
		uint32_t ar[4];
		if (af) {
			ar[0] = af[kk][0];
			ar[1] = af[kk][1];
			ar[2] = af[kk][2];
			ar[3] = af[kk][3];
		} else {
			ldsm_x4(ar, pa + 16 * kk);
		}
#pragma unroll
		for (int np = 0; np < 4; np++) {
			uint32_t r[4];
			ldsm_x4(r, pb + 16 * np * LDH + 16 * kk);
			const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
			mma_16816(s[2 * np], ar, b0, s[2 * np]);
			mma_16816(s[2 * np + 1], ar, b1, s[2 * np + 1]);
		}
	}
}

/* ---- forward, FA2 Algorithm 1 ---- */

/* What a lane carries from one KV tile to the next: its two rows' softmax state and output
 * columns, and the warp's Q_i as A operands. */
template <int D> struct fwd_rows {
	float m[2], l[2];      /* running max (base-2 units of scale * q.k), the lane's part of
				* the sum (the quad's four parts add up at the end) */
	float o[D / 8][4];     /* O, not yet divided by l: n8 tile j, accumulator layout */
	uint32_t qf[D / 16][4];
};

/* K_j, V_j (keys k0.. of kv head kvh of a segment from start, klen keys, kv_heads heads)
 * into stage st of the forward's shared memory, as one group. */
template <int D, int NW>
__device__ __forceinline__ void fwd_issue(unsigned char *smem, int st, const bf16 *k,
					  const bf16 *v, int64_t start, int k0, int klen,
					  int kv_heads, int kvh)
{
	bf16 *ks = reinterpret_cast<bf16 *>(smem + st * fwd_smem<D, NW>::stage);
	bf16 *vs = reinterpret_cast<bf16 *>(smem + st * fwd_smem<D, NW>::stage + tile_sz<D>::bytes);
	issue_rows<D, NW * 32>(ks, k, start, k0, BN, klen, kv_heads, kvh);
	issue_rows<D, NW * 32>(vs, v, start, k0, BN, klen, kv_heads, kvh);
	cp_async_commit();
}

/* Where a KV tile is, if any (fwd_begin issues the first, fwd_tile the next). */
struct next_tile {
	bool has;
	int k0;
};

/* Alg. 1 lines 5-6, whole block: load Q_i (rows q0.. of head h of a segment from start, qlen
 * rows, nh heads) and, as a second group, the first KV tile (first) into stage 0; each warp
 * keeps its 16 x D slice of Q_i as A operands; O = 0, l = 0, m = -inf. */
template <int D, int NW>
__device__ __forceinline__ void fwd_begin(fwd_rows<D> &st, unsigned char *smem, const bf16 *q,
					  int64_t start, int q0, int qlen, int nh, int h,
					  const next_tile first, const bf16 *k, const bf16 *v,
					  int64_t kv_start, int klen, int kv_heads, int kvh, int warp,
					  int lane)
{
	constexpr int LDH = D + PADH;
	bf16 *qs = reinterpret_cast<bf16 *>(smem + fwd_smem<D, NW>::q);
	issue_rows<D, NW * 32>(qs, q, start, q0, 16 * NW, qlen, nh, h);
	cp_async_commit();
	if (first.has) {
		fwd_issue<D, NW>(smem, 0, k, v, kv_start, first.k0, klen, kv_heads, kvh);
		cp_async_wait<1>(); /* Q_i landed; K_1, V_1 may still be in flight */
	} else {
		cp_async_wait<0>();
	}
	__syncthreads();
	const bf16 *p = a_rows(qs + warp * 16 * LDH, LDH, lane);
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++)
		ldsm_x4(st.qf[kk], p + 16 * kk);
	st.m[0] = st.m[1] = -INFINITY;
	st.l[0] = st.l[1] = 0.f;
#pragma unroll
	for (int j = 0; j < D / 8; j++)
		st.o[j][0] = st.o[j][1] = st.o[j][2] = st.o[j][3] = 0.f;
}

/* Alg. 1 lines 8-11, whole block, for the KV tile of keys k0..k0+63 in stage st (kv head
 * kvh of a segment from start, klen keys, kv_heads heads); the next tile's copies go to
 * stage st ^ 1 meanwhile. Warp rows: row0 = the warp's first row (q0 + 16 warp), qlen rows
 * in all; row r sees key c iff r < qlen, c < klen and c <= r + off. A warp none of whose
 * rows sees a key of the tile skips it. */
template <int D, int NW>
__device__ __forceinline__ void fwd_tile(fwd_rows<D> &st, unsigned char *smem, int stg,
					 const next_tile nx, const bf16 *k, const bf16 *v,
					 int64_t start, int k0, int klen, int kv_heads, int kvh,
					 int row0, int qlen, int off, float scale_log2, int lane)
{
	constexpr int LDH = D + PADH;
	/* Alg. 1 line 8: K_j, V_j landed (this thread's copies, then everyone's); the other
	 * stage is free. */
	cp_async_wait<0>();
	__syncthreads();
	if (nx.has)
		fwd_issue<D, NW>(smem, stg ^ 1, k, v, start, nx.k0, klen, kv_heads, kvh);
	const int last_row = min(row0 + 15, qlen - 1);
	if (last_row < row0 || k0 > last_row + off)
		return; /* warp-uniform: every row of the warp is past qlen or before the tile */
	const bf16 *ks = reinterpret_cast<const bf16 *>(smem + stg * fwd_smem<D, NW>::stage);
	const bf16 *vs = ks + tile_sz<D>::bytes / 2;

	/* Alg. 1 line 9: S = Q_i K_j^T, 16 x 64 per warp. */
	float s[8][4];
	mma_abt<D>(s, st.qf, nullptr, ks, lane);

	/* Alg. 1 line 10: m_new = max(m, rowmax(S)), P = exp(S - m_new),
	 * l = e^(m - m_new) l + rowsum(P), per row (g: slots 0-1, g + 8: slots 2-3), the
	 * row's 64 columns spread over the quad's four lanes. */
	const int g = lane >> 2, t = lane & 3;
	const bool full = k0 + BN - 1 <= row0 + off && k0 + BN - 1 < klen && row0 + 15 < qlen;
	float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
	for (int n = 0; n < 8; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			float x = s[n][e] * scale_log2;
			if (!full) {
				const int row = row0 + g + 8 * (e >> 1);
				const int key = k0 + 8 * n + 2 * t + (e & 1);
				if (row >= qlen || key >= klen || key > row + off)
					x = -INFINITY;
			}
			s[n][e] = x;
			mx[e >> 1] = fmaxf(mx[e >> 1], x);
		}
	float alpha[2], m_use[2];
#pragma unroll
	for (int r = 0; r < 2; r++) {
		mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
		mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
		const float m_new = fmaxf(st.m[r], mx[r]);
		/* A row with no key seen yet keeps m = -inf; subtracting 0 instead avoids
		 * inf - inf. */
		m_use[r] = m_new == -INFINITY ? 0.f : m_new;
		alpha[r] = exp2f(st.m[r] - m_use[r]);
		st.m[r] = m_new;
	}
	float rs[2] = {0.f, 0.f};
#pragma unroll
	for (int n = 0; n < 8; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const float p = exp2f(s[n][e] - m_use[e >> 1]);
			s[n][e] = p;
			rs[e >> 1] += p;
		}
	st.l[0] = st.l[0] * alpha[0] + rs[0];
	st.l[1] = st.l[1] * alpha[1] + rs[1];

	/* Alg. 1 line 11: O = diag(e^(m - m_new)) O + P V_j, P in registers as A operands. */
#pragma unroll
	for (int j = 0; j < D / 8; j++) {
		st.o[j][0] *= alpha[0];
		st.o[j][1] *= alpha[0];
		st.o[j][2] *= alpha[1];
		st.o[j][3] *= alpha[1];
	}
#pragma unroll
	for (int kk = 0; kk < BN / 16; kk++) {
		uint32_t a[4];
		a_from_acc(a, s, kk);
		mma_a_bkn<D>(st.o, a, vs + 16 * kk * LDH, LDH, lane);
	}
}

/* Alg. 1 lines 13-16: O_i = diag(l)^-1 O, L_i = m + log(l) (natural log), for the warp's
 * rows row0.. below qlen: O to o (rows from start, nh heads, head h), L to lse_row[row]
 * (lse_row: the head's lse from the segment's start). A row with l = 0 gets NaN. */
template <int D>
__device__ __forceinline__ void fwd_finish(const fwd_rows<D> &st, int lane, int row0, int qlen,
					   float *lse_row, bf16 *o, int64_t start, int nh, int h)
{
	const int g = lane >> 2, t = lane & 3;
#pragma unroll
	for (int r = 0; r < 2; r++) {
		float l = st.l[r];
		l += __shfl_xor_sync(0xffffffffu, l, 1);
		l += __shfl_xor_sync(0xffffffffu, l, 2);
		const int row = row0 + g + 8 * r;
		if (row >= qlen)
			continue;
		const float inv = 1.f / l;
		if (t == 0)
			lse_row[row] = (st.m[r] + log2f(l)) * LN2;
		bf16 *out = o + ((start + row) * nh + h) * D + 2 * t;
#pragma unroll
		for (int j = 0; j < D / 8; j++) {
			const uint32_t u = pack2(st.o[j][2 * r] * inv, st.o[j][2 * r + 1] * inv);
			*reinterpret_cast<uint32_t *>(out + 8 * j) = u;
		}
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

/* The backward's accumulators: the warp's 16 key rows of dK_j and dV_j, n8 tile j of D / 8,
 * accumulator layout. */
template <int D> struct bwd_acc {
	float dk[D / 8][4], dv[D / 8][4];
};

/* Lines 7-8: load K_j, V_j (rows n0.. of kv head kvh of a segment from start, klen keys) as
 * one group; dK_j = dV_j = 0. */
template <int D>
__device__ __forceinline__ void bwd_begin(bwd_acc<D> &acc, unsigned char *smem, const bf16 *k,
					  const bf16 *v, int64_t start, int n0, int klen,
					  int kv_heads, int kvh)
{
	typedef bwd_smem<D> L;
	issue_rows<D, NTHREAD>(reinterpret_cast<bf16 *>(smem + L::k), k, start, n0, BN, klen,
			       kv_heads, kvh);
	issue_rows<D, NTHREAD>(reinterpret_cast<bf16 *>(smem + L::v), v, start, n0, BN, klen,
			       kv_heads, kvh);
	cp_async_commit();
#pragma unroll
	for (int j = 0; j < D / 8; j++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			acc.dk[j][e] = acc.dv[j][e] = 0.f;
}

/* A query tile of the backward: rows q0.. of query head h. */
struct q_tile {
	bool has;
	int q0, h;
};

/* What the backward's steps read besides the tiles: the query side's tensors and sizes. */
struct bwd_in {
	const bf16 *q, *dout;
	const float *lse, *dsum; /* [heads][total_q] */
	float *dq_ws;            /* fp32 [total_q][heads][D] */
	int64_t total_q, start;  /* the segment's first query row */
	int qlen, heads;
};

/* Line 10's loads for query tile x into stage st, whole block: Q_i, dO_i by cp.async (one
 * group), L_i (base 2) and D_i (0 past qlen) by plain stores, seen after the next
 * __syncthreads. */
template <int D, int TAIL>
__device__ __forceinline__ void bwd_issue(unsigned char *smem, int st, const bwd_in &in,
					  const q_tile x)
{
	typedef bwd_smem<D, TAIL> L;
	unsigned char *base = smem + L::st0 + st * L::stage;
	issue_rows<D, NTHREAD>(reinterpret_cast<bf16 *>(base + L::s_q), in.q, in.start, x.q0, BM,
			       in.qlen, in.heads, x.h);
	issue_rows<D, NTHREAD>(reinterpret_cast<bf16 *>(base + L::s_do), in.dout, in.start, x.q0,
			       BM, in.qlen, in.heads, x.h);
	cp_async_commit();
	if (threadIdx.x < BM) {
		float *rows = reinterpret_cast<float *>(base + L::s_rows);
		const int r = x.q0 + threadIdx.x;
		const int64_t at = (int64_t)x.h * in.total_q + in.start + r;
		rows[threadIdx.x] = r < in.qlen ? in.lse[at] * LOG2E : 0.f;
		rows[BM + threadIdx.x] = r < in.qlen ? in.dsum[at] : 0.f;
	}
}

/* Lines 10-17, whole block, for the key tile n0 (K_j, V_j from bwd_begin; klen keys) and the
 * query tile x in stage st (bwd_issue); the next query tile's loads go to stage st ^ 1
 * meanwhile (nx; or the caller issues each tile itself just before, nx.has false). Query row
 * r sees key c iff r < qlen, c < klen and c <= r + off. Warp w owns keys n0 + 16w .. + 15
 * and their dK, dV rows; lane l key rows g, g + 8 of them. */
template <int D, int TAIL>
__device__ __forceinline__ void bwd_tile(bwd_acc<D> &acc, unsigned char *smem, int st,
					 const bwd_in &in, const q_tile x, const q_tile nx,
					 int n0, int klen, int off, float scale, float scale_log2,
					 int warp, int lane)
{
	typedef bwd_smem<D, TAIL> L;
	constexpr int LDH = D + PADH;
	const unsigned char *base = smem + L::st0 + st * L::stage;
	const bf16 *ks = reinterpret_cast<const bf16 *>(smem + L::k);
	const bf16 *vs = reinterpret_cast<const bf16 *>(smem + L::v);
	const bf16 *qs = reinterpret_cast<const bf16 *>(base + L::s_q);
	const bf16 *dos = reinterpret_cast<const bf16 *>(base + L::s_do);
	const float *lse2 = reinterpret_cast<const float *>(base + L::s_rows);
	const float *dsum = lse2 + BM;
	bf16 *pds = reinterpret_cast<bf16 *>(smem + L::pds);
	const int g = lane >> 2, t = lane & 3;
	const int key0 = n0 + warp * 16; /* the warp's first key */

	/* Line 10: Q_i, dO_i, L_i, D_i landed (and K_j, V_j on the first call); nobody reads
	 * the other stage or dS^T any more. */
	cp_async_wait<0>();
	__syncthreads();
	if (nx.has)
		bwd_issue<D, TAIL>(smem, st ^ 1, in, nx);

	/* Warp-uniform: a warp none of whose keys is seen by a row of the tile has dS^T = 0. */
	const int last_q = min(x.q0 + BM - 1, in.qlen - 1);
	const bool idle = key0 >= klen || last_q < x.q0 || key0 > last_q + off;
	uint32_t *dst_row[2] = {
		reinterpret_cast<uint32_t *>(pds + (warp * 16 + g) * LDP + 2 * t),
		reinterpret_cast<uint32_t *>(pds + (warp * 16 + g + 8) * LDP + 2 * t)};
	if (idle) {
#pragma unroll
		for (int n = 0; n < 8; n++)
			dst_row[0][4 * n] = dst_row[1][4 * n] = 0u;
	} else {
		/* Lines 11 and 14, transposed: S^T = K_j Q_i^T, dP^T = V_j dO_i^T, 16 keys x 64
		 * queries per warp. */
		float s[8][4], dp[8][4];
		mma_abt<D>(s, nullptr, ks + warp * 16 * LDH, qs, lane);
		mma_abt<D>(dp, nullptr, vs + warp * 16 * LDH, dos, lane);
		/* Lines 12 and 15: P = exp(scale S - L_i) (masked entries 0),
		 * dS = P o (dP - D_i); s keeps P, dp becomes dS. */
#pragma unroll
		for (int n = 0; n < 8; n++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int key = key0 + g + 8 * (e >> 1);
				const int c = 8 * n + 2 * t + (e & 1);
				const int r = x.q0 + c;
				const bool ok = r < in.qlen && key < klen && key <= r + off;
				const float p = ok ? exp2f(s[n][e] * scale_log2 - lse2[c]) : 0.f;
				s[n][e] = p;
				dp[n][e] = p * (dp[n][e] - dsum[c]);
			}
		/* Lines 13 and 17: dV_j += P^T dO_i, dK_j += dS^T Q_i (the softmax scale is
		 * applied to dK once, at the write). */
#pragma unroll
		for (int kk = 0; kk < BM / 16; kk++) {
			uint32_t a[4];
			a_from_acc(a, s, kk);
			mma_a_bkn<D>(acc.dv, a, dos + 16 * kk * LDH, LDH, lane);
			a_from_acc(a, dp, kk);
			mma_a_bkn<D>(acc.dk, a, qs + 16 * kk * LDH, LDH, lane);
		}
		/* dS^T to shared memory for line 16, which needs every warp's keys. */
#pragma unroll
		for (int n = 0; n < 8; n++) {
			dst_row[0][4 * n] = pack2(dp[n][0], dp[n][1]);
			dst_row[1][4 * n] = pack2(dp[n][2], dp[n][3]);
		}
	}
	__syncthreads(); /* all of dS^T is written */

	/* Line 16: dQ_i += scale dS K_j, warp w taking query rows q0 + 16w .. + 15 (k: the 64
	 * keys), added atomically to the fp32 workspace. dS^T stored [key][query] is dS read
	 * with .trans. */
	const int qrow0 = x.q0 + warp * 16;
	if (qrow0 >= in.qlen)
		return;
	float dq[D / 8][4];
#pragma unroll
	for (int j = 0; j < D / 8; j++)
		dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.f;
	const bf16 *pa = a_rows_t(pds + warp * 16, LDP, lane);
#pragma unroll
	for (int kk = 0; kk < BN / 16; kk++) {
		uint32_t a[4];
		ldsm_x4_t(a, pa + 16 * kk * LDP);
		mma_a_bkn<D>(dq, a, ks + 16 * kk * LDH, LDH, lane);
	}
#pragma unroll
	for (int r = 0; r < 2; r++) {
		const int row = qrow0 + g + 8 * r;
		if (row >= in.qlen)
			continue;
		float *out = in.dq_ws + ((in.start + row) * in.heads + x.h) * D + 2 * t;
#pragma unroll
		for (int j = 0; j < D / 8; j++) {
			atomicAdd(out + 8 * j, dq[j][2 * r] * scale);
			atomicAdd(out + 8 * j + 1, dq[j][2 * r + 1] * scale);
		}
	}
}

/* Line 19: dK_j (times the softmax scale) and dV_j of the warp's key rows n0 + 16w .. below
 * klen (kv head kvh, kv_heads heads, a segment from start): written to dk_out, dv_out (bf16),
 * or, for one share of a split key tile (ADD), added to the fp32 accumulators ws (dK) and
 * ws + dv_at (dV), [total_kv][kv_heads][D] each, zeroed before the launch and converted to
 * bf16 after it. */
template <int D, bool ADD>
__device__ __forceinline__ void bwd_finish(const bwd_acc<D> &acc, bf16 *dk_out, bf16 *dv_out,
					   float *ws, int64_t dv_at, float scale, int warp,
					   int lane, int64_t start, int n0, int klen, int kv_heads,
					   int kvh)
{
	const int g = lane >> 2, t = lane & 3;
#pragma unroll
	for (int r = 0; r < 2; r++) {
		const int key = n0 + warp * 16 + g + 8 * r;
		if (key >= klen)
			continue;
		const int64_t at = ((start + key) * kv_heads + kvh) * D + 2 * t;
#pragma unroll
		for (int j = 0; j < D / 8; j++) {
			const float k0 = acc.dk[j][2 * r] * scale, k1 = acc.dk[j][2 * r + 1] * scale;
			const float v0 = acc.dv[j][2 * r], v1 = acc.dv[j][2 * r + 1];
			if (ADD) {
				atomicAdd(ws + at + 8 * j, k0);
				atomicAdd(ws + at + 8 * j + 1, k1);
				atomicAdd(ws + dv_at + at + 8 * j, v0);
				atomicAdd(ws + dv_at + at + 8 * j + 1, v1);
			} else {
				*reinterpret_cast<uint32_t *>(dk_out + at + 8 * j) = pack2(k0, k1);
				*reinterpret_cast<uint32_t *>(dv_out + at + 8 * j) = pack2(v0, v1);
			}
		}
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
