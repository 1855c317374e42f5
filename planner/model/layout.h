/* layout.h: where every rank sits (plan v2, plans/README.md "layouts").
 *
 * A layout is a set of pipelines, each with its own scheme {tp, cp, pp}, the world rank of
 * every (stage, cp, tp) position, the transformer layers of each stage and a token cap per
 * micro-batch, plus optional attention-server ranks (DistCA Sec. 4.1) and the name of the
 * schedule its pipelines run. v1's homogeneous tp/cp/pp/dp cluster is one layout built by
 * bp_layout_megatron, the only place that knows Megatron's rank order; Hydraulis's
 * heterogeneous strategies (Sec. 5.1) are layouts whose pipelines differ.
 *
 * Invariants (bp_layout_check): rank sets of the pipelines are disjoint and inside the
 * cluster; a TP group lies within one node; stage layers are >= 1 and sum to the model's
 * layers; attention servers are distinct ranks of the cluster. */
#ifndef BP_LAYOUT_H
#define BP_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"
#include "profile.h"
#include "schedule.h"

struct bp_lpipe {
	struct bp_scheme sc;   /* tp, cp, pp >= 1 */
	int *ranks;            /* [pp * cp * tp]: rank of (stage s, cp c, tp t) at
				* (s * cp + c) * tp + t; owned */
	int *stage_layers;     /* [pp]; owned */
	int64_t mb_max_tokens; /* no micro-batch of this pipeline holds more */
};

struct bp_layout {
	char schedule[16];      /* a row of schedule.h's table: "1f1b" (the default),
				 * "interleaved" or "distca-ticks" */
	int vstages;            /* virtual stages (model chunks) per rank: 1, or >= 2 for a
				 * chunked schedule (interleaved) */
	struct bp_lpipe *pipes; /* owned */
	size_t npipes;
	int *servers;           /* attention-server ranks, ascending; owned */
	size_t nservers;
};

/* A rank's place in a layout. */
struct bp_place {
	int pipe, stage, cp_i, tp_i; /* -1 each when the rank is in no pipeline */
	int server;                  /* index in servers, or -1 */
};

void bp_layout_init(struct bp_layout *l);
void bp_layout_release(struct bp_layout *l);
/* Deep copy into an initialised dst. */
int bp_layout_copy(struct bp_layout *dst, const struct bp_layout *src, struct bp_error *err);

/* Appends a pipeline of scheme sc with ranks (pp*cp*tp entries, copied) and stage layers (pp
 * entries, copied; NULL: the model's layers split evenly, first stages take the remainder,
 * as Megatron does). */
int bp_layout_add_pipe(struct bp_layout *l, struct bp_scheme sc, const int *ranks,
		       const int *stage_layers, int layers, int64_t mb_max_tokens,
		       struct bp_error *err);

/* The homogeneous layout of v1 plans: dp pipelines of scheme sc, rank of (tp_i, cp_i, dp_i,
 * pp_i) = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i)) (Megatron-LM's order, TP fastest). The
 * one function that knows this order. */
int bp_layout_megatron(struct bp_layout *l, struct bp_scheme sc, int dp, int layers,
		       int64_t mb_max_tokens, struct bp_error *err);

/* Checks the invariants above for a cluster of gpus GPUs, gpus_per_node per node and a
 * model of layers layers. */
int bp_layout_check(const struct bp_layout *l, int gpus, int gpus_per_node, int layers,
		    struct bp_error *err);

/* Where rank sits (a search over the layout; bp_layout_place_all for many ranks). */
struct bp_place bp_layout_place(const struct bp_layout *l, int rank);
/* Every rank's place at once, in one pass over the layout (bp_layout_place per rank costs a
 * search each): out[r] for 0 <= r < world, {-1, ...} for a rank the layout does not use. */
void bp_layout_place_all(const struct bp_layout *l, int world, struct bp_place *out);

/* The rank at (pipe, stage, cp_i, tp_i); no bounds checks beyond the layout's. */
static inline int bp_lpipe_rank(const struct bp_lpipe *p, int stage, int cp_i, int tp_i)
{
	return p->ranks[((size_t)stage * p->sc.cp + cp_i) * p->sc.tp + tp_i];
}

/* Does any group of this kind in pipeline p cross a node boundary? TP: the tp ranks of one
 * (stage, cp_i); CP: the cp*tp ranks of a stage; PP: two adjacent stages' ranks at the same
 * (cp_i, tp_i). */
int bp_lpipe_tp_inter(const struct bp_lpipe *p, int gpus_per_node);
int bp_lpipe_cp_inter(const struct bp_lpipe *p, int gpus_per_node);
int bp_lpipe_pp_inter(const struct bp_lpipe *p, int gpus_per_node);
/* Do the gradient-sync groups of a stage (the same (stage, tp_i) position in every pipeline
 * of the same tp and pp, whatever its cp, and all cp ranks: costmodel.h sync_ranks) cross
 * a node boundary? */
int bp_layout_sync_inter(const struct bp_layout *l, size_t pipe, int gpus_per_node);

/* The schedule row of the layout (schedule.h); NULL when its name is not in the table
 * (bp_layout_check says so). */
const struct bp_schedule *bp_layout_schedule(const struct bp_layout *l);

/* Are all pipelines of the same scheme and stage layers (a homogeneous layout)? */
int bp_layout_homogeneous(const struct bp_layout *l);

/* One line for people: "2 x <tp 2 cp 1 pp 2>, 1 x <tp 4 cp 1 pp 2>, 1f1b, cap 8192" (runs of
 * equal schemes, the schedule, pipeline 0's token cap, attention servers if any). */
void bp_layout_describe(const struct bp_layout *l, char *buf, size_t n);

/* Ranks in pipelines plus attention servers not in any pipeline. */
int bp_layout_ranks(const struct bp_layout *l);

#endif
