/* plan.h: balplan.plan/v1 (plans/README.md): what a method decided for every step, and what
 * the shared cost model and simulator predict for it.
 *
 * Order (the canonical order the writer keeps): steps by index; a step's docs in draw order;
 * pipelines by DP index; micro-batches in execution order; spans in packing order; delayed
 * entries by doc id. A plan carries no time of day, host, path or solver duration. */
#ifndef BP_PLAN_H
#define BP_PLAN_H

#include <jansson.h>
#include <stdint.h>

#include "bp.h"
#include "costmodel.h"
#include "dataset.h"
#include "presets.h"

#define BP_PLAN_FORMAT "balplan.plan/v1"

struct bp_cluster {
	char gpu[64];
	int gpus, gpus_per_node;
	int tp, cp, pp, dp;
};

struct bp_mb {
	struct bp_span *spans; /* owned */
	size_t nspans;
	enum bp_shard shard;
	/* Predicted (bp_plan_predict): */
	int64_t tokens;
	double *fwd, *bwd; /* [pp] per stage, us; owned */
};

struct bp_pipe {
	struct bp_mb *mbs; /* owned */
	size_t nmbs;
	/* Predicted: */
	double time_us;     /* 1F1B end of this pipeline, before gradient sync */
	double *busy_us;    /* [pp] compute per stage; owned */
	int64_t *peak_mem;  /* [pp] activations + model state, bytes; owned */
};

/* A document drawn for this step but trained in a later one (outlier delay, WLB Sec. 4.2). */
struct bp_delayed {
	int64_t doc, len;
	int64_t to_step;
};

struct bp_metrics {
	double step_us;        /* slowest pipeline + gradient synchronisation */
	double pipe_max_us, pipe_min_us;
	double grad_sync_us;
	double bubble;         /* 1 - busy / (ranks * step), over (pipeline, stage) ranks */
	double imb_wlb;        /* WLB-LLM Sec. 6.4: max fwd latency / mean, over micro-batches */
	double imb_sb;         /* SparseBalance Eq. 11: max(T_mb) / mean(T_mb), fwd+bwd */
	double gap_hyd;        /* Hydraulis Sec. 8: (slowest - fastest rank busy) / slowest */
	int64_t peak_mem;      /* max over ranks, bytes */
	int64_t tokens;        /* trained in this step */
	int64_t nmbs;          /* micro-batches in this step */
	/* The packing objective: the largest micro-batch cost W = sum of its spans' costs
	 * w = bp_cost_doc(len), and a certified lower bound on it for this step's spans and
	 * micro-batch count (bp_pack_bound); gap = max / bound - 1. */
	double pack_max_us, pack_bound_us, pack_gap;
};

/* What an exact solver said about one step (ILP methods); absent for heuristics. */
struct bp_solver {
	int present;
	char status[24];  /* "optimal", "feasible" (time limit hit), "warm-start" */
	double objective; /* best packing objective found, us */
	double bound;     /* best proven lower bound, us */
	double gap;       /* (objective - bound) / objective */
};

struct bp_step {
	int64_t index;
	struct bp_doc *docs;     /* drawn for this step, draw order; owned */
	size_t ndocs;
	struct bp_delayed *delayed; /* of docs, those trained later; by doc id; owned */
	size_t ndelayed;
	struct bp_pipe *pipes;   /* dp entries; owned */
	size_t npipes;
	struct bp_solver solver;
	struct bp_metrics m;
};

/* A method parameter kept as text, as the user gave it or the method defaulted it. */
struct bp_param {
	char key[32];
	char value[64];
};

struct bp_summary {
	int64_t steps, docs, tokens, truncated, dropped, delayed;
	double step_mean_us, step_p50_us, step_p95_us, step_max_us, total_us;
	double tokens_per_s;
	double imb_wlb_mean, imb_wlb_p95, imb_sb_mean, gap_hyd_mean, bubble_mean;
	double delay_steps_mean; /* tokens-weighted steps a delayed token waited, over all */
	int64_t peak_mem;
	double pack_gap_mean, pack_gap_max; /* of the steps' packing objective to its bound */
};

struct bp_plan {
	char dataset[64], dataset_sha[65];
	char profile[64], profile_sha[65];
	uint64_t seed;
	struct bp_cluster cluster;
	struct bp_model model;
	char method[32];
	struct bp_param *params; /* sorted by key; owned */
	size_t nparams;
	int64_t nsteps_drawn, tokens_per_step, docs_per_step;
	int64_t max_tokens;    /* the context cap: no drawn document is longer */
	int64_t mb_max_tokens; /* no micro-batch holds more (>= max_tokens; variable-length
				* packing raises it, WLB-LLM Eq. 2's L_max) */
	enum bp_overlen overlen;
	struct bp_step *steps; /* owned */
	size_t nsteps;
	struct bp_summary summary;
};

void bp_plan_init(struct bp_plan *p);
void bp_plan_release(struct bp_plan *p);
void bp_plan_free(struct bp_plan *p);

/* Adds or replaces a method parameter (kept sorted by key). */
int bp_plan_set_param(struct bp_plan *p, const char *key, const char *value,
		      struct bp_error *err);
const char *bp_plan_param(const struct bp_plan *p, const char *key); /* NULL when absent */

/* Appends a micro-batch of spans (copied) to a pipeline. */
int bp_pipe_add_mb(struct bp_pipe *pipe, const struct bp_span *spans, size_t n,
		   enum bp_shard shard, struct bp_error *err);

/* Re-runs the 1F1B simulation of one predicted pipeline and fills each operation's start time:
 * f_start and b_start get nmbs * pp entries, [j * pp + s] (caller-owned). For timelines. */
int bp_pipe_schedule(const struct bp_pipe *pi, const struct bp_costmodel *cm, double *f_start,
		     double *b_start, struct bp_error *err);

/* Checks the cluster: all degrees >= 1, gpus = tp*cp*pp*dp, gpus_per_node divides gpus or
 * gpus < gpus_per_node. */
int bp_cluster_check(const struct bp_cluster *c, struct bp_error *err);

/* Fills every predicted field: micro-batch times from the cost model, each pipeline through
 * the 1F1B simulator, the step metrics and the summary. cm must be made for the plan's
 * scheme and dp. */
int bp_plan_predict(struct bp_plan *p, const struct bp_costmodel *cm, struct bp_error *err);

/* The plan invariants (DESIGN.md "Tests"): each drawn document trained exactly once, in its
 * step or, if delayed, in the step named; spans inside their documents and non-overlapping;
 * every micro-batch within max_tokens tokens and every rank within the memory cap (when cm is
 * given); dp pipelines per step; cluster consistent. Returns 0 or -1 naming the first breach. */
int bp_plan_validate(const struct bp_plan *p, const struct bp_costmodel *cm,
		     struct bp_error *err);

/* Codec. from_json fills an initialised plan (release after failure too). */
int bp_plan_from_json(struct bp_plan *p, json_t *root, struct bp_error *err);
json_t *bp_plan_to_json(const struct bp_plan *p);

#endif
