/* attn_geom.h: how balexec's attention kernels (executor/attn.cu) cut a launch into blocks,
 * in one place for the kernels' launchers and for the cost model's launch model
 * (costmodel.c), which deals the same blocks onto the GPU's places. Plain C, header only.
 *
 * Two generations of kernels have been measured, and a measured profile says which of them
 * its attention cells timed (its provenance's "attn_kernels", profile_json.c):
 *   BP_ATTN_GEOM_WMMA  the WMMA kernels (to 2026-11-27): 64-row forward blocks, one
 *                      backward block per (64-key tile, kv head);
 *   BP_ATTN_GEOM_MMA   the mma.m16n8k16 kernels: 128-row forward blocks; the backward's
 *                      steps of a (key tile, kv head) split over bp_attn_bwd_split blocks
 *                      when the launch has too few blocks to fill a GPU. */
#ifndef BP_ATTN_GEOM_H
#define BP_ATTN_GEOM_H

#include <stdint.h>

#define BP_ATTN_GEOM_WMMA 0 /* also what a table that says nothing holds */
#define BP_ATTN_GEOM_MMA 1
#define BP_ATTN_GEOM_NAME "mma16816" /* the current kernels' name in a profile */

#define BP_ATTN_FWD_ROWS_WMMA 64  /* query rows per forward block, per generation */
#define BP_ATTN_FWD_ROWS_MMA 128
#define BP_ATTN_BWD_KEYS 64      /* keys per backward block, query rows per backward step */
#define BP_ATTN_BWD_FILL 1024    /* backward blocks a launch should have: ~4 waves of an H100
				  * (132 SMs x 2 blocks) */
#define BP_ATTN_BWD_SPLIT_MAX 8  /* blocks per (key tile, kv head) at most */

/* Query rows per forward block. */
static inline int bp_attn_fwd_rows(int geom)
{
	return geom == BP_ATTN_GEOM_WMMA ? BP_ATTN_FWD_ROWS_WMMA : BP_ATTN_FWD_ROWS_MMA;
}

/* Blocks per (key tile, kv head) in the backward of a launch of nseg segments, total_kv keys
 * and kv_heads heads, whose busiest key tile runs max_steps steps (the GQA group times the
 * longest segment's query tiles): as many as bring the launch to BP_ATTN_BWD_FILL blocks, at
 * most BP_ATTN_BWD_SPLIT_MAX and max_steps; 1 (no split, dK and dV written directly) for
 * BP_ATTN_GEOM_WMMA or a launch that already has the blocks. Each of the s blocks takes a
 * contiguous share of the steps, [steps i / s, steps (i + 1) / s). */
static inline int bp_attn_bwd_split(int geom, int64_t total_kv, int64_t nseg, int kv_heads,
				    int64_t max_steps)
{
	const int64_t blocks = (total_kv / BP_ATTN_BWD_KEYS + nseg) * (int64_t)kv_heads;
	if (geom == BP_ATTN_GEOM_WMMA || blocks <= 0 || blocks >= BP_ATTN_BWD_FILL ||
	    max_steps <= 1)
		return 1;
	int64_t s = (BP_ATTN_BWD_FILL + blocks - 1) / blocks;
	if (s > BP_ATTN_BWD_SPLIT_MAX)
		s = BP_ATTN_BWD_SPLIT_MAX;
	if (s > max_steps)
		s = max_steps;
	return (int)s;
}

#endif
