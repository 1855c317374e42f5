/* analytic.h: a balplan.profile/v2 computed from GPU specifications instead of measured, so
 * that planning, simulation and the tests run without a GPU (profiler/README.md gives every
 * formula and constant). */
#ifndef BP_ANALYTIC_H
#define BP_ANALYTIC_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"
#include "presets.h"
#include "profile.h"

/* Fills p with the analytic profile of model m on gpu: attention fwd/bwd over a (q, kv) grid
 * up to max_len tokens and linear-layer times over token counts, one table per distinct TP
 * degree of the nschemes schemes; block-sparse (MoBA, block 256) attention over document
 * lengths and top-k budgets per TP degree (SparseBalance Eq. 10's M[x,k]); collectives for
 * every op within a node (2..gpus_per_node ranks) and across nodes (2..1024 ranks) over
 * 1 KiB..4 GiB; memory constants; and a T(l) = a l^2 + b l + c fit per scheme
 * (bp_fit_scheme). max_len in [256, 2^24]. p must be
 * initialised (bp_profile_init); its old contents are released on success and left as they
 * were on failure. The caller releases p. Deterministic: the same arguments give the same
 * tables bit for bit. Returns 0 or -1 with err. */
int bp_profile_analytic(struct bp_profile *p, const struct bp_gpu *gpu,
			const struct bp_model *m, const struct bp_scheme *schemes,
			size_t nschemes, int64_t max_len, struct bp_error *err);

/* The analytic profile as the front ends make it (cmd/cmdutil.c, planner/api.c): tables up
 * to the power of two from 4096 at or above max_tokens, and into sha the sha256 of its
 * canonical text, which a plan records and `balplan check` compares. 0 or -1 with err. */
int bp_profile_analytic_digest(struct bp_profile *p, const struct bp_gpu *gpu,
			       const struct bp_model *m, const struct bp_scheme *schemes,
			       size_t nschemes, int64_t max_tokens, char sha[65],
			       struct bp_error *err);

/* The analytic selection overhead of MoBA sparse attention that fill_sparse adds to every
 * cell of the sparse table: us per layer for one causal document of x tokens with the given
 * block, forward (block means, fp32 gate over all chunks, top-k, index build, LSE merge, the
 * second attention launch) or backward (the second backward launch and the dQ sum). For the
 * table's k >= ceil(x/block) cells, cell = dense attention(x, x) + this. */
double bp_analytic_sparse_gate_us(const struct bp_gpu *g, const struct bp_model *m, int tp,
				  int block, double x, int bwd);

#endif
