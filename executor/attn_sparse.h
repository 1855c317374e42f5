/* attn_sparse.h: balexec's block-sparse (MoBA top-k) attention for the CUDA backend
 * (executor/attn_sparse.cu; executor/README.md "Block-sparse attention kernels"; SparseBalance
 * Sec. II-B Eq. 2 over MoBA's gate, Sec. V-A). bf16 in and out, fp32 accumulation, the tiles
 * and the online softmax of attn.h's dense kernels (FlashAttention-2 Alg. 1 and 2) over a list
 * of key blocks per (64-row query tile, query head).
 *
 * Layout as attn.h: Q, O, dO, dQ [total][heads][head_dim], K, V, dK, dV
 * [total][kv_heads][head_dim], bf16 viewed as uint16_t; GQA: query head h reads kv head
 * h / (heads / kv_heads). Segments are causal documents (q_len == kv_len: sparse attention
 * runs with cp = 1: the paper's sequence parallelism lives inside the TP group): segment i
 * owns rows cu[i]..cu[i+1].
 * lse is [heads][total] (natural log), kept by the forward for the backward.
 *
 * Selection (executor/attn_sparse_ref.h has the same definition in float64): keys are cut
 * into blocks of `block` tokens from each document's start (a multiple of 64; MoBA's B =
 * 256 by default); for each 64-row query tile and query head, the gate score of every
 * earlier block b of the document is mean(tile's q rows) . mean(b's keys) in fp32; the top
 * k - 1 (ties to the lower block index) are kept and the tile's own block is added, attended
 * causally; k is the segment's budget (k_seg[i], or k for every segment when k_seg is NULL),
 * so a document of at most k blocks is dense. The lists stay in the workspace: the backward
 * reads the forward's selection.
 *
 * Every function is asynchronous on the given stream (cudaStream_t as void *) and returns
 * 0, or -1 with err filled (unsupported head_dim, block not a positive multiple of 64, a
 * budget below 1 or max_k below k, heads not a multiple of kv_heads, a pointer NULL or
 * misaligned, sizes beyond the grid or int32 offsets, a CUDA error). cu and k_seg are device
 * arrays whose contents are trusted (a budget below 1 counts as 1, above max_k as max_k). */
#ifndef BP_ATTN_SPARSE_H
#define BP_ATTN_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bp_sparse_shape {
	int nseg;        /* documents */
	int heads;       /* query heads */
	int kv_heads;    /* divides heads */
	int head_dim;    /* 64 or 128 */
	int64_t total;   /* cu[nseg] */
	int max_len;     /* the longest document (sizes the selection's sort) */
	int block;       /* B, tokens per key block: 64, 128, 192, 256, ... */
	int k;           /* the budget of every document when k_seg is NULL, >= 1 */
	int max_k;       /* the largest budget k_seg may hold (sizes the lists); with k_seg
			  * NULL, 0 means k */
	float scale;     /* softmax scale, usually 1 / sqrt(head_dim) */
	unsigned long long *visits; /* debug, device: the forward adds the number of 64-key
				     * tiles it visited over all (query tile, head); NULL: none */
};

/* Checks the shape (file comment) without touching the device: 0, or -1 with err naming the
 * problem as the functions below would. */
int bp_sparse_check(const struct bp_sparse_shape *s, struct bp_error *err);

/* Bytes of device workspace the functions below need for this shape: the block means, the
 * lists, and the backward's fp32 dQ accumulator and dO.O row sums. 0 for a bad shape. */
size_t bp_sparse_workspace(const struct bp_sparse_shape *s);

/* The selection alone (block means, gate scores, top k - 1 plus the own block) into ws. */
int bp_sparse_select(const struct bp_sparse_shape *s, const int32_t *cu, const int32_t *k_seg,
		     const uint16_t *q, const uint16_t *k, void *ws, void *stream,
		     struct bp_error *err);

/* Selection, then the forward over the selected blocks. ws keeps the selection for the
 * backward. */
int bp_sparse_fwd(const struct bp_sparse_shape *s, const int32_t *cu, const int32_t *k_seg,
		  const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o, float *lse,
		  void *ws, void *stream, struct bp_error *err);

/* Gradients of the forward that filled ws (same shape, cu and inputs): dq, dk, dv are
 * written, not accumulated. */
int bp_sparse_bwd(const struct bp_sparse_shape *s, const int32_t *cu, const uint16_t *q,
		  const uint16_t *k, const uint16_t *v, const uint16_t *o, const uint16_t *dout,
		  const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv, void *ws,
		  void *stream, struct bp_error *err);

/* Where the selection lies in ws, for tests and tools: per padded query tile t and head h
 * (segment i's tiles are cu[i] / 64 + i + j for j < ceil(len / 64), as attn.cu numbers
 * them), count[t * heads + h] blocks, ascending, at blocks[(t * heads + h) * cap ...];
 * ntiles padded tiles. Device pointers into ws; 0 or -1 for a bad shape. */
struct bp_sparse_lists {
	const int32_t *count;
	const int32_t *blocks;
	int cap;
	int64_t ntiles;
};
int bp_sparse_lists(const struct bp_sparse_shape *s, const void *ws,
		    struct bp_sparse_lists *out, struct bp_error *err);

#ifdef __cplusplus
}
#endif

#endif
