/* plan.h: balplan.plan/v2 (plans/README.md): what a method decided for every step, and what
 * the shared cost model and simulator predict for it.
 *
 * Order (the canonical order the writer keeps): steps by index; a step's docs in draw order;
 * pipelines by DP index; micro-batches in execution order; spans in packing order; delayed
 * entries by doc id. A plan carries no time of day, host, path or solver duration. */
#ifndef BP_PLAN_H
#define BP_PLAN_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "bp.h"
#include "costmodel.h"
#include "dataset.h"
#include "documents.h"
#include "layout.h"
#include "presets.h"

#define BP_PLAN_FORMAT "balplan.plan/v2"
#define BP_PLAN_FORMAT_V1 "balplan.plan/v1"

/* Sync models (plan v2 steps[i].sync). */
#define BP_SYNC_DP_ALLREDUCE "dp-allreduce"
/* Hydraulis Sec. 5.2: the optimizer states fully sharded over the cluster's N GPUs; each
 * step pulls bf16 parameters into its pipelines and pushes bf16 gradients back (LNK), with
 * Fig. 8's overlap; -serial: pull, propagation and push one after the other (Table 1's
 * "w/o overlap"). */
#define BP_SYNC_HYD_PULLPUSH "hydraulis-pullpush"
#define BP_SYNC_HYD_PULLPUSH_SERIAL "hydraulis-pullpush-serial"
/* 1 for a known sync model name, 0 otherwise. */
int bp_sync_known(const char *name);

struct bp_cluster {
	char gpu[64];
	int gpus, gpus_per_node;
};

/* A micro-batch's attention (plan v2 "attention", costmodel.h's enum bp_attn_kind):
 * DENSE: varlen causal attention where the tokens live (every v1 plan);
 * SPARSE: block-sparse attention, block B, k[l] blocks per query tile in layer l
 *   (SparseBalance Sec. II-B, MoBA top-k); k has the model's layers entries;
 * DISAGG: attention runs on attention servers as the step's CA-tasks (DistCA Sec. 4). */
struct bp_mb {
	struct bp_span *spans; /* owned */
	size_t nspans;
	enum bp_shard shard;
	enum bp_attn_kind attn;
	int sparse_block;      /* SPARSE: block size B in tokens */
	int *sparse_k;         /* SPARSE: [model layers] blocks per layer; owned */
	/* Predicted (bp_plan_predict): */
	int64_t tokens;
	double *fwd, *bwd; /* [pp of the pipeline] per stage, us; owned */
};

struct bp_pipe {
	struct bp_mb *mbs; /* owned */
	size_t nmbs;
	/* Predicted: */
	double time_us;     /* schedule end of this pipeline, before gradient sync */
	double *busy_us;    /* [pp] compute per stage; owned */
	int64_t *peak_mem;  /* [pp] activations + model state, bytes; owned */
};

/* A document drawn for this step but trained in a later one (outlier delay, WLB Sec. 4.2). */
struct bp_delayed {
	int64_t doc, len;
	int64_t to_step;
};

/* A core-attention task (DistCA Sec. 4.1-4.2): the queries [q0, q1) of document doc, with
 * keys and values [kv0, kv1) (its causal prefix inside the span that holds the queries: kv0
 * the span's first token, kv1 = q1), computed on attention server `server` (index into the
 * layout's servers) at tick `tick` of the distca-ticks schedule: below m + pp - 1 a forward
 * tick, whose placement the backward reuses at the mirrored backward tick unless the step
 * has backward ticks' own tasks, from m + pp - 1 on (ca_sched.h bp_ca_task_place). */
struct bp_ca_task {
	int64_t tick;
	int server;
	int64_t doc, q0, q1, kv0, kv1;
};

struct bp_metrics {
	double step_us;        /* slowest pipeline (or the ticks) + gradient synchronisation */
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
	 * w = the method's item cost (bp_cost_doc for every method so far), and a certified
	 * lower bound on it for this step's spans and micro-batch count (bp_pack_bound);
	 * gap = max / bound - 1. */
	double pack_max_us, pack_bound_us, pack_gap;
	/* The work trained (sim/work.h): model FLOPs of the step's micro-batches, forward and
	 * backward, attention included, in TFLOP; -1 when a plan read from a file predates it. */
	double model_tflop;
	/* Hydraulis's optimisation-propagation disaggregation (Sec. 5.2, Table 1), for steps whose
	 * sync is hydraulis-pullpush[-serial]; -1 (not written) otherwise. pull_us and push_us:
	 * the LNK of the busiest (pipeline, stage), bf16 parameters from the optimizer shards and
	 * bf16 gradients back; optimizer_us: the fp32 Adam update of one shard; op_exposed_us:
	 * what pull and push add to the slowest pipeline after overlap (Table 1's O-P);
	 * lnk_bytes: the busiest GPU's bytes in one direction; lnk_slices_pull / _push: the
	 * mutual-slice granularities LCM(N, TP_max) and LCM(N, D TP_max). grad_sync_us is
	 * op_exposed_us + optimizer_us. */
	double pull_us, push_us, optimizer_us, op_exposed_us, lnk_bytes;
	double lnk_slices_pull, lnk_slices_push;
};

struct bp_step;

/* A method-owned per-step record (plan v2 steps[i].record): a method that keeps one gives
 * its codec here, and the plan holds a pointer to it beside the record. */
struct bp_ca_record; /* blocks/ca_sched.h */

struct bp_record_ops {
	const char *name;                       /* the JSON key's "kind" */
	size_t size;                            /* bytes of the record struct */
	json_t *(*to_json)(const void *rec);    /* new reference, NULL on failure */
	int (*from_json)(void *rec, json_t *o, const char *where, struct bp_error *err);
	/* Optional: checks a record against its step (NULL: nothing to check). */
	int (*validate)(const void *rec, const struct bp_step *st, struct bp_error *err);
	/* Optional: one line saying how a and b differ, or "" when they do not (buf n). */
	void (*diff)(const void *a, const void *b, char *buf, size_t n);
	/* Optional: frees what the record owns (not the record itself), for records with
	 * arrays (NULL: the record is flat). */
	void (*release)(void *rec);
	/* Optional: the step's tick-schedule decisions when the record keeps them (DistCA's
	 * ping/pong split and resend mode, read by sim/ticks.c), else NULL. */
	const struct bp_ca_record *(*ca)(const void *rec);
};

struct bp_step {
	int64_t index;
	int layout;              /* index into the plan's layouts */
	struct bp_doc *docs;     /* drawn for this step, draw order; owned */
	size_t ndocs;
	struct bp_delayed *delayed; /* of docs, those trained later; by doc id; owned */
	size_t ndelayed;
	struct bp_pipe *pipes;   /* one per pipeline of the layout; owned */
	size_t npipes;
	struct bp_ca_task *ca;   /* CA-tasks by (tick, server, doc, q0); owned */
	size_t nca;
	char sync[32];           /* the gradient synchronisation model (BP_SYNC_* above) */
	void *record;            /* method-owned record or NULL; owned, freed by release */
	const struct bp_record_ops *record_ops; /* static, set with record */
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
	/* Work-normalised throughput (sim/work.h): the steps' model FLOPs in TFLOP, model TFLOP/s
	 * per GPU over total_us, and MFU against the profile's dense bf16 peak; -1 each when a
	 * plan read from a file predates them. */
	double model_tflop, model_tflops_per_gpu, mfu;
};

/* Where a plan's samples came from (plan v2 sampling.source; absent under DRAW, issue 22):
 * the sample index read (its reader format and sha256 in inputs.dataset), its size, the
 * order and last-batch rule, the stream positions [first_pos, end_pos) the plan consumed
 * (position p is epoch p / samples, row p % samples of that epoch's order), samples left
 * untrained by the last-batch rule, and whether the data ended inside the plan. */
struct bp_source {
	enum bp_order order;
	char format[16];
	int64_t samples, sequences, tokens;
	int64_t epochs; /* 0: no end */
	enum bp_last_batch last;
	int64_t first_pos, end_pos, left;
	int data_ended;
};

/* A document drawn before a window's first step and trained in it (struct bp_plan's window):
 * its drawing step's delayed list, which lies in an earlier window, names to_step. */
struct bp_carried {
	struct bp_doc d;
	int64_t step, to_step; /* drawn in, trained in (run step numbers) */
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
	enum bp_overlen overlen;
	enum bp_documents documents; /* what the loader handed the method (documents.h) */
	struct bp_source source;     /* order DRAW: a what-if plan of drawn lengths */
	enum bp_recompute recompute; /* the run's activation recomputation (profile.h) */
	int optimizer_replicated;    /* 1: no distributed optimizer (profile.h) */
	struct bp_layout *layouts; /* owned; steps name one each */
	size_t nlayouts;
	struct bp_step *steps; /* owned */
	size_t nsteps;
	/* A window of a longer run (issue 22; plans/README.md "Windows"): steps[i] is the run's
	 * step first_step + i (steps and delays keep the run's step numbers); carried: the
	 * documents drawn before first_step and trained in the window, by id (owned); open: the
	 * run goes on after the last step, so a delay may name a later step, whose window
	 * trains the document. A plan of a whole run has first_step 0, nothing carried and is
	 * not open. */
	int64_t first_step;
	struct bp_carried *carried;
	size_t ncarried;
	int open;
	struct bp_summary summary;
};

void bp_plan_init(struct bp_plan *p);
void bp_plan_release(struct bp_plan *p);
void bp_plan_free(struct bp_plan *p);

/* Adds or replaces a method parameter (kept sorted by key). */
int bp_plan_set_param(struct bp_plan *p, const char *key, const char *value,
		      struct bp_error *err);
const char *bp_plan_param(const struct bp_plan *p, const char *key); /* NULL when absent */

/* Appends a layout (moved into the plan: l is left initialised). Returns its index or -1. */
int bp_plan_add_layout(struct bp_plan *p, struct bp_layout *l, struct bp_error *err);
/* The layout a step uses (borrowed). */
static inline const struct bp_layout *bp_plan_layout(const struct bp_plan *p,
						     const struct bp_step *st)
{
	return &p->layouts[st->layout];
}
/* Adds the homogeneous layout of dp pipelines of scheme sc in Megatron's placement, capped
 * at cap tokens per micro-batch (bp_layout_megatron, the model's layers from p->model).
 * Returns its index or -1. */
int bp_plan_add_megatron(struct bp_plan *p, struct bp_scheme sc, int dp, int64_t cap,
			 struct bp_error *err);
/* The largest per-pipeline micro-batch cap over all layouts (0 without layouts), and a
 * setter for every pipeline of every layout (variable-length packing raises it, WLB-LLM
 * Eq. 2's L_max). */
int64_t bp_plan_mb_cap(const struct bp_plan *p);
void bp_plan_set_mb_cap(struct bp_plan *p, int64_t cap);

/* Appends a micro-batch of spans (copied, dense attention) to a pipeline. */
int bp_pipe_add_mb(struct bp_pipe *pipe, const struct bp_span *spans, size_t n,
		   enum bp_shard shard, struct bp_error *err);
/* Copies a micro-batch's decisions (spans, shard, attention) into an initialised dst. */
int bp_mb_copy_decisions(struct bp_mb *dst, const struct bp_mb *src, int layers,
			 struct bp_error *err);
void bp_mb_release(struct bp_mb *mb);
/* Frees what a step owns (pipelines, documents, delays, CA-tasks, record). */
void bp_step_release(struct bp_step *st);

/* Gives a step a zeroed method-owned record of ops->size bytes (replacing any). Returns it,
 * owned by the step, or NULL. */
void *bp_step_set_record(struct bp_step *st, const struct bp_record_ops *ops,
			 struct bp_error *err);

/* Checks the cluster: gpus >= 1, gpus_per_node >= 1 and dividing gpus when gpus fill more
 * than one node. */
int bp_cluster_check(const struct bp_cluster *c, struct bp_error *err);

/* Megatron scheme of a homogeneous plan (all layouts one scheme, equal pipeline counts):
 * fills sc and dp and returns 1; returns 0 for heterogeneous plans. */
int bp_plan_uniform(const struct bp_plan *p, struct bp_scheme *sc, int *dp);

/* A plan's documents by id (sorted copies of every step's docs), for the sample a span
 * trains: docs[doc].sample and docs[doc].soff + span offset. */
struct bp_doc_index {
	struct bp_doc *d; /* sorted by id; owned */
	size_t n;
};
int bp_doc_index_build(struct bp_doc_index *m, const struct bp_plan *p, struct bp_error *err);
/* The document with that id, or NULL. */
const struct bp_doc *bp_doc_index_find(const struct bp_doc_index *m, int64_t id);

/* Codec (plan_json.c): writes balplan.plan/v2, reads v2 and v1. from_json fills an
 * initialised plan (release after failure too); it checks formats and layouts, not the
 * plan invariants (validate.h). */
int bp_plan_from_json(struct bp_plan *p, json_t *root, struct bp_error *err);
json_t *bp_plan_to_json(const struct bp_plan *p);
/* A plan of lines (plans/README.md "Plans of lines"): the header (the plan without steps and
 * summary, with "layout": "lines") on the first line, one step per line, and
 * {"summary": ...} last; every line compact with sorted keys, so a step is one line to seek
 * to and to append. Returns 0 or -1. */
int bp_plan_write_lines(const struct bp_plan *p, FILE *f, struct bp_error *err);
/* Its three parts, for a plan written a window at a time: the header line; a line per step
 * of p (spans of a plan of samples resolved through p's own documents); the summary line. */
int bp_plan_write_header(const struct bp_plan *p, FILE *f, struct bp_error *err);
int bp_plan_write_steps(const struct bp_plan *p, FILE *f, struct bp_error *err);
int bp_plan_write_summary(const struct bp_plan *p, FILE *f, struct bp_error *err);
/* A plan of lines read a window of steps at a time (check of a whole run in bounded
 * memory): open reads the header line into header (a plan of no steps, nsteps_drawn the
 * run's); window reads min step lines (all: SIZE_MAX) into w as a window plan of its own
 * (plan.h: the run's step numbers from *first, the documents earlier lines delayed into it
 * carried, open when a delay crosses its end or the file's plan is open), returning 1, or
 * 0 once the summary line is read; summary parses that line and requires nothing after
 * it. */
struct bp_plan_lines {
	FILE *f;
	json_t *header, *zero_summary, *summary;
	char *line;
	size_t cap, len;
	long lineno;
	int64_t next_index;
	int done;
	json_t *pending; /* documents delayed past the windows read so far: the carried_in
			  * entries of the windows that train them */
};
int bp_plan_lines_open(struct bp_plan_lines *r, FILE *f, struct bp_plan *header,
		       struct bp_error *err);
int bp_plan_lines_window(struct bp_plan_lines *r, size_t min, const struct bp_plan *header,
			 struct bp_plan *w, int64_t *first, struct bp_error *err);
int bp_plan_lines_summary(struct bp_plan_lines *r, struct bp_summary *s, struct bp_error *err);
void bp_plan_lines_close(struct bp_plan_lines *r);

/* Reads either layout of text (len bytes): one JSON object, or a plan of lines (read by
 * bp_plan_lines as one window). */
int bp_plan_parse(struct bp_plan *p, const char *text, size_t len, struct bp_error *err);
/* Whether text is a plan of lines: its first line is a whole JSON object with "layout" (the
 * one-object layout's first line is "{"). */
int bp_plan_text_is_lines(const char *text, size_t len);

#endif
