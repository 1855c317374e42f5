/* attn_sparse_ref.h: the float64 CPU reference of balexec's block-sparse (MoBA top-k)
 * attention (executor/attn_sparse.cu), plain C. Used by tests/unit/test_sparse_attn_ref.c
 * (the sparse path against dense attention under the same explicit block mask, and against
 * finite differences) and by tests/gpu/test_sparse_attention.cu (the oracle of the CUDA
 * kernel). MoBA's semantics with the kernel's tile-level selection (executor/README.md
 * "Block-sparse attention kernels"); SparseBalance Sec. II-B, Eq. 2; MoBA's gate (Lu et al.
 * 2025).
 *
 * Shape: nseg causal documents (q_len == kv_len: sparse attention runs with cp = 1, the paper's
 * sequence parallelism being inside the TP group), document i owning rows cu[i]..cu[i+1] of Q
 * [total][heads][head_dim] and of K, V [total][kv_heads][head_dim] (row-major; GQA: query head
 * h reads kv head h / (heads / kv_heads)). Keys are cut into blocks of `block` tokens from each
 * document's start (the last one may be shorter). Queries are grouped into tiles of `qtile`
 * rows from the document's start; block must be a multiple of qtile, so a tile lies in one
 * block, its own. qtile 64 is the CUDA kernel's granularity (a deliberate deviation from MoBA);
 * qtile 1 is MoBA's per-token selection.
 *
 * Selection (bp_sparse_ref_select), per (tile, query head): the gate score of each earlier
 * block b of the same document is s(b) = mean over the tile's rows of q . mean over b's keys
 * of k (MoBA's parameter-free gate, no scale, no softmax; with qtile 1 exactly MoBA's
 * q_t . mean(K_b)). The top k_seg - 1 earlier blocks by score (ties: the lower block index
 * first) are kept, plus the own block, which is attended causally; k counts the own block
 * (MoBA always selects it), so a document of at most k_seg blocks is dense. Each (tile, head)
 * gets a sorted list of min(k_seg, own + 1) blocks (CSR).
 *
 * Attention under a selection: query row r of a document attends key c iff c <= r and
 * c's block is in the row's tile's list for that head. Two independent paths compute it:
 * bp_sparse_ref_fwd/_bwd walk the CSR lists (block -> keys, the own block trimmed to the
 * causal limit), as the kernel does; bp_masked_ref_fwd/_bwd run the full causal attention
 * over every key 0..r and skip the keys whose block the explicit bitmap masks out (all ones:
 * plain dense causal attention). lse is [heads][total] (natural log of sum exp(scale q.k)).
 * Backward: dQ, dK, dV of sum(dO . O), written (not accumulated), from the forward's O and
 * lse (softmax backward: dS = P (dP - rowsum(dO o O)), FlashAttention-2 Alg. 2's algebra).
 *
 * Every function returns 0, or -1 with err filled (a bad shape: heads not a multiple of
 * kv_heads, block not a multiple of qtile, a budget below 1, cu not increasing from 0). */
#ifndef BP_ATTN_SPARSE_REF_H
#define BP_ATTN_SPARSE_REF_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bp_sparse_ref_shape {
	int nseg;
	const int32_t *cu;   /* [nseg + 1] host, cu[0] = 0, non-decreasing; borrowed */
	int heads, kv_heads, head_dim;
	int block;           /* B, tokens per key block (MoBA chunk), >= 1 */
	int qtile;           /* query rows per selection tile, >= 1, divides block */
	const int *k_seg;    /* [nseg] budgets in blocks, own block included, >= 1; NULL: k */
	int k;               /* the budget of every document when k_seg is NULL */
	double scale;        /* softmax scale, usually 1 / sqrt(head_dim) */
};

/* A selection: per (tile, head) a sorted list of blocks (document-local indices). Tiles are
 * numbered document after document, ceil(len / qtile) each; row t * heads + h lists
 * blocks[row_ptr[row] .. row_ptr[row + 1]). tile_seg and tile_row0 say whose tile t is. */
struct bp_sparse_sel {
	int64_t ntiles;
	int heads;
	int64_t *row_ptr;   /* [ntiles * heads + 1] */
	int32_t *blocks;    /* [row_ptr[ntiles * heads]] */
	int32_t *tile_seg;  /* [ntiles] */
	int32_t *tile_row0; /* [ntiles] first row of the tile within its document */
};

void bp_sparse_sel_init(struct bp_sparse_sel *sel);
/* Frees the arrays (sel itself is the caller's); the struct is left as after init. */
void bp_sparse_sel_release(struct bp_sparse_sel *sel);

/* Checks the shape (see the file comment); 0 or -1 with err naming the problem. */
int bp_sparse_ref_check(const struct bp_sparse_ref_shape *s, struct bp_error *err);

/* Number of tiles of the shape (the sum of ceil(len / qtile)). */
int64_t bp_sparse_ref_tiles(const struct bp_sparse_ref_shape *s);

/* MoBA top-k selection (file comment) from Q and K; sel is filled (released first), the
 * caller releases it. */
int bp_sparse_ref_select(const struct bp_sparse_ref_shape *s, const double *q, const double *k,
			 struct bp_sparse_sel *sel, struct bp_error *err);

/* The gate scores of one (tile, head) over the earlier blocks of its document: scores[b] for
 * b < own block, in the order of the blocks; *n gets their number. scores must hold the
 * document's block count. For tests that compare a GPU selection with near ties. */
int bp_sparse_ref_scores(const struct bp_sparse_ref_shape *s, const double *q, const double *k,
			 int64_t tile, int head, double *scores, int *n, struct bp_error *err);

/* Expands a selection into the explicit block bitmap the masked path reads:
 * mask[(t * heads + h) * stride + b] = 1 when tile t, head h selected block b, with stride the
 * largest block count of any document. The caller frees *mask; *stride gets the stride. */
int bp_sparse_ref_mask(const struct bp_sparse_ref_shape *s, const struct bp_sparse_sel *sel,
		       unsigned char **mask, int *stride, struct bp_error *err);

/* Sparse path: attention over the CSR lists. o [total][heads][head_dim], lse [heads][total]. */
int bp_sparse_ref_fwd(const struct bp_sparse_ref_shape *s, const struct bp_sparse_sel *sel,
		      const double *q, const double *k, const double *v, double *o, double *lse,
		      struct bp_error *err);
int bp_sparse_ref_bwd(const struct bp_sparse_ref_shape *s, const struct bp_sparse_sel *sel,
		      const double *q, const double *k, const double *v, const double *o,
		      const double *lse, const double *dout, double *dq, double *dk, double *dv,
		      struct bp_error *err);

/* Masked path: full causal attention with the explicit bitmap of bp_sparse_ref_mask
 * (mask NULL: every block, i.e. dense causal attention; stride ignored then). */
int bp_masked_ref_fwd(const struct bp_sparse_ref_shape *s, const unsigned char *mask,
		      int stride, const double *q, const double *k, const double *v, double *o,
		      double *lse, struct bp_error *err);
int bp_masked_ref_bwd(const struct bp_sparse_ref_shape *s, const unsigned char *mask,
		      int stride, const double *q, const double *k, const double *v,
		      const double *o, const double *lse, const double *dout, double *dq,
		      double *dk, double *dv, struct bp_error *err);

#ifdef __cplusplus
}
#endif

#endif
