/* attn.h: balexec's own attention kernels for the CUDA backend (issue 4; executor/README.md
 * "Attention kernels"). Variable-length causal attention over document segments, bf16 in and
 * out, fp32 accumulation, FlashAttention-style tiling with an online softmax (Dao et al.,
 * FlashAttention-2, Alg. 1 forward / Alg. 2 backward; written here, not copied).
 *
 * Layout: Q, O, dO, dQ are [total_q][heads][head_dim], K, V, dK, dV are
 * [total_kv][kv_heads][head_dim], row-major bf16 (__nv_bfloat16 viewed as uint16_t here so
 * that C callers need no CUDA headers). Grouped-query attention: q head h reads kv head
 * h / (heads / kv_heads). Segment i owns Q rows cu_q[i]..cu_q[i+1] and KV rows
 * cu_kv[i]..cu_kv[i+1]; its mask is causal aligned at the bottom right: query row r of the
 * segment (0-based) sees KV rows 0..r + (kv_len - q_len). q_len == kv_len is an ordinary
 * causal document; q_len < kv_len is a context-parallel shard whose earlier keys came from
 * other ranks. kv_len >= q_len is required. A segment with q_len 0 is allowed.
 *
 * lse gets [heads][total_q] floats: the log-sum-exp (natural log, of scale * q.k) of each
 * query row, kept by the forward for the backward.
 *
 * Every function is asynchronous on the given stream (cudaStream_t passed as void *) and
 * returns 0, or -1 with err filled from the CUDA error (launch configuration, unsupported
 * head_dim, heads not a multiple of kv_heads, total_kv < total_q, a tensor pointer that is
 * NULL or not 16-byte aligned, a non-finite scale). cu_q and cu_kv are device arrays of
 * nseg + 1 int32 whose contents are trusted (a segment with kv_len < q_len is skipped). */
#ifndef BP_ATTN_H
#define BP_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bp_attn_shape {
	int nseg;          /* segments (documents or CP shards of documents) */
	int heads;         /* query heads */
	int kv_heads;      /* divides heads */
	int head_dim;      /* 64 or 128 */
	int64_t total_q;   /* cu_q[nseg] */
	int64_t total_kv;  /* cu_kv[nseg] */
	int max_q, max_kv; /* the longest segment's q_len and kv_len (grid sizing) */
	float scale;       /* softmax scale, usually 1 / sqrt(head_dim) */
	/* Backward blocks per (64-key tile, kv head), each taking a share of the tile's query
	 * tiles and adding its dK, dV in fp32 to the workspace (then bitwise reproducible only
	 * up to the order of those additions): 0 (set it, e.g. by memset) the kernels' choice,
	 * bp_attn_bwd_blocks; 1..64 forced (the tests run both paths). */
	int bwd_split;
};

/* The backward's blocks per (key tile, kv head) for this shape (planner/model/attn_geom.h:
 * enough to fill a GPU when the grid of key tiles x kv heads is short, as under tensor
 * parallelism), or s->bwd_split when set; 0 for a bad shape. */
int bp_attn_bwd_blocks(const struct bp_attn_shape *s);

/* Bytes of device workspace bp_attn_bwd needs for this shape (the fp32 dO.O row sums and
 * dQ accumulator, and the fp32 dK, dV accumulators when the backward splits its key
 * tiles). */
size_t bp_attn_bwd_workspace(const struct bp_attn_shape *s);

int bp_attn_fwd(const struct bp_attn_shape *s, const int32_t *cu_q, const int32_t *cu_kv,
		const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o, float *lse,
		void *stream, struct bp_error *err);

/* Gradients of the forward above: dq, dk, dv are written (not accumulated). ws is device
 * memory of bp_attn_bwd_workspace bytes. */
int bp_attn_bwd(const struct bp_attn_shape *s, const int32_t *cu_q, const int32_t *cu_kv,
		const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
		const uint16_t *dout, const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv,
		void *ws, void *stream, struct bp_error *err);

#ifdef __cplusplus
}
#endif

#endif
