/* measure.h: the plain-C half of the measuring profiler (profiler/README.md "Measuring";
 * issue 15 item 1). balprof (profiler/gpu/balprof.c, CUDA) runs the timings; everything it
 * decides without a GPU lives here so unit tests drive it: the options `balplan profile`
 * and balprof share, the list of cells to measure (taken from the analytic profile of the
 * same inputs, so the measured profile has its tables, grids and shapes), the state file an
 * interrupted run resumes from, and the merge of measured medians into that skeleton.
 * No printing, no exit, no CUDA. */
#ifndef BP_MEASURE_H
#define BP_MEASURE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bp.h"
#include "profile.h"

#define BP_PROF_MAX_SCHEMES 32
#define BP_PROF_KEY 64

/* Options of `balplan profile` and balprof (the same parser for both). */
struct bp_prof_opts {
	const char *gpu, *model, *out, *state, *balprof; /* borrowed from argv or literals */
	struct bp_scheme schemes[BP_PROF_MAX_SCHEMES];
	size_t nschemes;    /* 0 after parsing: none given (the caller's default 8x2x4) */
	int64_t max_len;
	int reps, warmup;
	int analytic, quick, help;
	int set_max_len, set_reps, set_warmup; /* given explicitly */
};

/* Parses argv[1..argc-1] (argv[0] is the command's name; getopt_long with optind reset).
 * Defaults: H100, llama3-8b, scheme 8x2x4 (filled in), max-len 131072, reps 10, warmup 2,
 * out "-", state NULL (balprof: "<out>.state", "balprof.state" for "-"); --quick changes
 * the defaults to max-len 2048, reps 3, warmup 1 (explicit options still win). Measuring
 * options (--state, --reps, --warmup, --quick) with --analytic are a usage error, as is
 * --balprof with --analytic. Returns 0, or -1 with err (a usage error: exit 2). */
int bp_prof_parse(int argc, char **argv, struct bp_prof_opts *o, struct bp_error *err);

/* The processes measuring: ranks in all, per_node on each node, placed in blocks (rank r on
 * node r / per_node, srun's default). One process: {1, 1}. */
struct bp_prof_world {
	int ranks, per_node;
};

/* Which ranks time the collective table (inter, r) in world w: `nodes` nodes (node 0 first),
 * `per` consecutive ranks on each: ranks i * w->per_node + j, i < nodes, j < per. Within a
 * node (inter 0): one node, r ranks, when r <= per_node. Across nodes: min(r, nodes of w)
 * nodes with r / that many ranks each, when it divides and fits. Returns 1 (measurable, the
 * group always holds rank 0) or 0 (the table stays analytic). */
int bp_prof_group(const struct bp_prof_world *w, int inter, int r, int *nodes, int *per);

/* One measurement: a cell of a table, forward or backward. */
enum bp_task_kind { BP_TASK_MEMORY, BP_TASK_COLL, BP_TASK_LINEAR, BP_TASK_ATTN,
		    BP_TASK_SPARSE, BP_TASK_ATTN_ALONE, BP_TASK_LM_HEAD };
struct bp_task {
	enum bp_task_kind kind;
	int tp;
	size_t table;       /* index into p->attn, p->linear, p->sparse or p->coll */
	size_t i, j;        /* attention: q index, kv index; sparse: x index, k index;
			     * linear: token index; coll: size */
	int bwd;
	int64_t q, kv;      /* attention: tokens; sparse: x in both; linear: tokens in q;
			     * coll: bytes in q */
	int block, budget;  /* sparse: MoBA block B and budget k in blocks */
	int op, inter, ranks, gnodes, gper; /* coll: enum bp_coll_op, placement, group */
	char key[BP_PROF_KEY]; /* "attn tp=8 q=128 kv=256 fwd", "linear tp=8 t=4096 bwd",
				  "attn1 tp=8 q=128 kv=256 fwd" (alone in its launch),
				  "lmhead tp=8 t=4096 fwd",
				  "sparse tp=8 block=256 x=32768 k=8 fwd",
				  "coll all_reduce intra r=8 b=1024", "memory reserved" */
};

/* The cells of skeleton p that world w (NULL: one process) measures, in run order: memory
 * first; then the collective tables w can form (bp_prof_group; none for one process), per
 * table every size ascending; then per TP degree the linear table (forward, backward per
 * token count) and the LM head at the same token counts, then the attention grid (forward
 * and backward per cell with kv >= q; cells kv < q are copies of kv = q and not measured),
 * rows by q ascending, then the same cells alone in a launch (fwd_alone, bwd_alone); then
 * every sparse
 * table in p->sparse order (by tp, block), every (x, k) cell, forward then backward, x
 * ascending, then k ascending (M[x,k], SparseBalance Eq. 10). *out is the
 * caller's to free(). Returns 0 or -1 with err. */
int bp_prof_tasks(const struct bp_profile *p, const struct bp_prof_world *w,
		  struct bp_task **out, size_t *n, struct bp_error *err);

/* A finished measurement as the state file holds it: median, min and max of n timed runs
 * (us, or bytes for the memory reserve). */
struct bp_meas {
	char key[BP_PROF_KEY];
	double median, min, max;
	int n;
};

/* The state file: a header line "# balprof-state v1 <sig>" then one line per finished
 * measurement, "KEY<TAB>median min max n" (%.17g). Appended and flushed as each finishes,
 * so an interrupted run loses at most the line being written. */
struct bp_state {
	struct bp_meas *m;  /* owned, in file order; a key seen twice keeps the last */
	size_t n, cap;
	long valid_bytes;   /* bytes up to the last complete line (a torn tail is cut there) */
};

void bp_state_init(struct bp_state *s);
void bp_state_release(struct bp_state *s);

/* What the cells' keys mean, as a version: bumped whenever what a key measures changes
 * without the key changing, so that a state file of the old meaning is refused instead of
 * mixed into a profile. 2: the sparse cells exist, a forward includes the selection and a
 * backward re-runs it before the gradients (what balexec's CUDA backend runs); and the
 * skeleton's sparse grid (x, k, block) is in the keys. State files without "cells=" (1:
 * before the sparse cells) are refused. 3: a packed attention or sparse cell runs as many
 * copies as fill the GPU, its work uncapped (2 capped it, leaving mid-length documents alone
 * in their launch); the alone cells and the LM head exist. */
#define BP_PROF_CELLS 3

/* The signature of a run: what decides the grid and the meaning of the cells (the cells
 * version BP_PROF_CELLS, gpu, model, schemes, max-len, reps, warm-ups, the world's ranks and
 * ranks per node, device). A state file made under another signature is refused. Writes at
 * most n bytes to out; no spaces. */
void bp_prof_signature(const struct bp_prof_opts *o, const struct bp_prof_world *w,
		       const char *device, char *out, size_t n);

/* Reads the state text (len bytes; text NULL or len 0: an empty state). The header must
 * name sig; a final line without its newline (an interrupted write) is ignored and
 * valid_bytes stops before it. Returns 0, or -1 with err naming the line (a malformed line,
 * another signature, an unknown format). */
int bp_state_parse(struct bp_state *s, const char *text, size_t len, const char *sig,
		   struct bp_error *err);
/* The measurement with this key, or NULL. */
const struct bp_meas *bp_state_find(const struct bp_state *s, const char *key);
/* Adds (or replaces) m in s. Returns 0 or -1 with err. */
int bp_state_add(struct bp_state *s, const struct bp_meas *m, struct bp_error *err);
/* The header line and one measurement line, as written to the file (with the newline). */
int bp_state_header(FILE *f, const char *sig);
int bp_state_write(FILE *f, const struct bp_meas *m);

/* Median, min and max of v[0..n-1] (sorted in place), n >= 1. */
void bp_prof_stats(double *v, size_t n, double *median, double *min, double *max);

/* Replaces every cell of skeleton p that s has with its median (the cells of
 * bp_prof_tasks(p, w)): attention (cells kv < q copy kv = q), sparse attention, linear,
 * collectives, memory.reserved_bytes; and gives every attention table fwd_alone/bwd_alone
 * and every linear table its LM head curve (a cell s lacks: the packed cell's value, and
 * lm_ratio x the layer's GEMMs, as the cost model prices them without). Then makes each table non-decreasing along every axis
 * (sparse: along x and along k) by a running maximum (timing noise between neighbouring
 * cells would otherwise fail the reader's monotonicity check; the state file keeps the raw
 * medians). Cells s lacks keep their analytic values (raised only where the running
 * maximum meets a larger measured neighbour).
 * *measured and *total count the cells replaced and the cells that could be. Fits are not
 * touched (bp_prof_finish). Returns 0 or -1 with err. */
int bp_prof_merge(struct bp_profile *p, const struct bp_prof_world *w,
		  const struct bp_state *s, size_t *measured, size_t *total, struct bp_error *err);

/* The end of a run: kind "measured", name "measured-<gpu>-<model>", the provenance pv,
 * the tables rounded as the file holds them (a JSON round trip through the reader, which
 * validates them), then T(l,P) fitted again per scheme over [128, max_len]. Returns 0 or
 * -1 with err. */
int bp_prof_finish(struct bp_profile *p, const struct bp_provenance *pv, int64_t max_len,
		   struct bp_error *err);

#endif
