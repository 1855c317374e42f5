/* method.h: the method table. Each method is one file under planner/methods/ named after it,
 * holding its row (BP_METHOD_ROW below); cmd/ lists, prepares, prices and calls methods only
 * through this table.
 *
 * A method turns the drawn global batches into steps: for each step, the documents drawn
 * (copied from the batch), which of them it delays and to which step, and per pipeline the
 * micro-batches as spans. It does not predict: bp_solve runs the shared cost model and
 * simulator on what it returns, then validates it. */
#ifndef BP_METHOD_H
#define BP_METHOD_H

#include "costmodel.h"
#include "dataset.h"
#include "plan.h"
#include "rng.h"

/* A run planned a window of global batches at a time (solve.h bp_solve_stream, issue 22): a
 * method whose steps depend on earlier steps (bp_method's `carries`) keeps its state here
 * between calls. Its batches then carry the run's document ids, in->b[0] is the run's step
 * step0, and it fills out->steps with the run's steps it has finished (run step numbers,
 * out->first_step the first's), which may lag its batches (a step is finished once every
 * document it drew is placed); with `last` it finishes every step, flushing what it holds
 * when `flush`. */
struct bp_method_run {
	void *state;                  /* the method's, NULL before its first call */
	void (*release)(void *state); /* set with state; frees it */
	int64_t step0;
	int last, flush;
};

struct bp_method_ctx {
	const struct bp_costmodel *cm; /* pipeline 0 of the request's layout (plan layout 0) */
	struct bp_rng *rng;            /* the plan's seeded generator */
	enum bp_shard shard;           /* CP sharding the user asked for */
	struct bp_costs *costs;        /* every (layout, pipeline)'s cost model, for methods
					* that add layouts of their own */
	const void *input;             /* a method's own input from the front end, borrowed
					* (hydraulis: const struct bp_hyd_set *, the candidate
					* strategies), or NULL */
	struct bp_method_run *run;     /* a run a window at a time, or NULL: in is the whole
					* run, its ids and steps from 0, and it ends flushed */
	/* A step's token budget for methods that size steps by it (wlb's N): tokens_per_step,
	 * or with docs_per_step that many times the data's mean document length, a property
	 * of the data and never of how many steps are planned (so a window plans as the whole
	 * run does). */
	double step_tokens;
};

/* Pipelines of the request's layout (plan layout 0): v1's dp. */
static inline int bp_plan_dp(const struct bp_plan *p)
{
	return (int)p->layouts[0].npipes;
}

/* Fills out->steps (out's cluster, max_tokens, params and layout 0, the request's, are set,
 * its pipelines capped at max_tokens; a variable-length method raises the cap with
 * bp_plan_set_mb_cap). Steps use layout 0 unless the method adds layouts. Returns 0, -1
 * (error) or BP_INFEASIBLE. */
typedef int (*bp_method_fn)(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			    struct bp_plan *out, struct bp_error *err);

/* A method's own input from the front end (ctx->input, bp_solve_opts.method_input): which one
 * the front end prepares and hands it. */
enum bp_method_input {
	BP_INPUT_NONE = 0,
	/* candidate strategies (struct bp_hyd_set, balplan.strategies/v1): `solve --strategies
	 * FILE` reads them, else the front end proposes them from the data, and the method plans
	 * on the profile of the request's and every candidate's schemes (cmd/cmd_propose.c
	 * cmd_hyd_candidates) */
	BP_INPUT_STRATEGIES,
	/* measured coverage (struct bp_sb_coverage, balplan.coverage/v1) when the parameter
	 * sb_coverage is measured:FILE, else NULL */
	BP_INPUT_COVERAGE,
};

/* A `balplan solve` request as a method's price sees it (the front end's planning limits,
 * cmd/solve_limits.h), before anything is drawn: per step docs (D) documents of tokens
 * tokens, mb0 = ceil(tokens / max_tokens). */
struct bp_price_req {
	double docs, tokens, mb0;
	double long_share; /* the share of documents at least max_tokens / 2 long once cut */
	int64_t max_tokens, gpus, tp, cp, pp, dp;
	int layers;        /* the model's; 0: not known before the profile is read */
	const struct bp_param *params; /* every --param given (bp_price_param reads one) */
	size_t nparams;
	int64_t inputs;    /* items of its input known up front (BP_INPUT_STRATEGIES: the
			    * strategies in --strategies, or as many as were proposed); 0: none,
			    * or not known yet */
	int inputs_made;   /* the front end makes the input (hydraulis's proposal): its work
			    * is part of the price */
	double instr_per_s; /* the front end's machine constant: a time limit in instructions */
};

/* What a method's own planning time grows with: how the front end's limits message names it
 * when its own work is the larger part of a price over the limit. */
enum bp_price_grows {
	BP_GROWS_STEPS = 0,    /* the steps and what each holds ("method 'NAME' is beyond ...") */
	BP_GROWS_GPUS,         /* the GPUs ("NAME at --gpus N is beyond ...") */
	BP_GROWS_DOCS_SQUARED, /* the square of the documents per step */
	BP_GROWS_TRIALS,       /* its parameter trials ("--param trials=N is beyond ...") */
};

/* A method's price (its row's price hook), in instructions (valgrind's Ir) as
 * cmd/cmd_solve_limits.c counts them. */
struct bp_price {
	double own;      /* per step, its own work (0 before the hook) */
	double pack;     /* of own, its packing alone: what a method packing with it pays
			  * (sparsebalance's sb_batching=NAME) */
	double once;     /* once per run: before the hook every method's setup, to which the
			  * hook adds its own */
	double mem_once; /* bytes it holds for the run (its scratch, tables) */
	int64_t trials;     /* hydraulis: dispatch trials per candidate and step, as priced */
	int64_t candidates; /* hydraulis: candidate strategies priced */
	enum bp_price_grows grows;
};

/* A method parameter's type (struct bp_param_spec). */
enum bp_param_type {
	BP_PARAM_INT,    /* an integer in [imin, imax], default idef */
	BP_PARAM_REAL,   /* a number in [rmin, rmax], default rdef */
	BP_PARAM_CHOICE, /* one of choices (NULL-terminated), default choices[0] */
};

/* One typed method parameter of a row's param_specs: what the one reader needs to record
 * its default and refuse a value out of range with one message format. */
struct bp_param_spec {
	const char *name;
	enum bp_param_type type;
	int64_t idef, imin, imax;
	double rdef, rmin, rmax;
	const char *const *choices;
	const char *about; /* one line */
};

#define BP_PARAM_SPEC_INT(n, def, lo, hi, ab)                                              \
	{ .name = (n), .type = BP_PARAM_INT, .idef = (def), .imin = (lo), .imax = (hi),      \
	  .about = (ab) }
#define BP_PARAM_SPEC_REAL(n, def, lo, hi, ab)                                             \
	{ .name = (n), .type = BP_PARAM_REAL, .rdef = (def), .rmin = (lo), .rmax = (hi),     \
	  .about = (ab) }
#define BP_PARAM_SPEC_CHOICE(n, ch, ab)                                                    \
	{ .name = (n), .type = BP_PARAM_CHOICE, .choices = (ch), .about = (ab) }

struct bp_method {
	const char *name;
	bp_method_fn solve;
	const char *summary; /* one line */
	const char *paper;   /* where it comes from */
	/* Parameter names the method accepts (NULL-terminated; NULL: none). The user's values
	 * are in the plan's params when solve runs; the method reads them with bp_plan_param
	 * and records every default it uses with bp_plan_set_param, so the plan names them all. */
	const char *const *params;
	/* The typed specs of its parameters the one reader (bp_param_int, bp_param_real,
	 * bp_param_choice) reads (NULL-terminated by name; NULL: none yet): each one of
	 * params, with its type, default and range. A parameter whose default or range depends
	 * on the request (distca's rank_tokens, wlb's thresholds) has none and keeps its own
	 * reader. */
	const struct bp_param_spec *param_specs;
	/* The method's per-step record (NULL: none): its codec, validation and diff. */
	const struct bp_record_ops *record;
	/* Called after prediction with the finished plan (NULL: nothing): fills buf (n bytes)
	 * with a warning the front end prints, or leaves it empty. */
	void (*warn)(const struct bp_plan *p, char *buf, size_t n);
	/* Checks a plan's parameters as solve reads them, and its records against them (NULL:
	 * nothing beyond the names): scratch holds a copy of p's parameters, cluster, model,
	 * max_tokens and layout 0, where the method's own parameter reader runs (recording its
	 * defaults there). bp_plan_check runs it through bp_method_check_params, so check and
	 * balexec accept no parameter solve would refuse. */
	int (*check_params)(const struct bp_plan *p, struct bp_plan *scratch,
			    struct bp_error *err);
	/* The request's layout the method can run on (NULL: any): solve asks every method
	 * named before any of them runs, so a run fails at once on a constraint, and the
	 * method's own solve asks again. sc is the request's scheme, m the model. */
	int (*check_request)(struct bp_scheme sc, const struct bp_model *m, enum bp_shard shard,
			     struct bp_error *err);
	/* 1: the method carries state from step to step (queues, a moving average, the last
	 * selection) and plans a run a window at a time through ctx->run; 0: a step depends on
	 * its own global batch (or, fixed's window, on its window of batches) alone. */
	int carries;
	/* 1: the method plans on the request's layout (layout 0) with dense attention, so any
	 * per-pipeline schedule of the table (planner/model/schedule.h) runs its plans and
	 * `solve --schedule` may choose one; 0: it brings its own schedule or layouts
	 * (distca's ticks, hydraulis's strategies, flexsp's groups) or sparse attention. */
	int schedules;
	int in_all;     /* 1: `solve -m all` runs it */
	int baseline;   /* 1: the reference of solve's speedup column when --baseline is not
			 * given (plain; one row) */
	int own_memory; /* 1: it checks its own memory (flexsp, whose groups span several of the
			 * request's pipelines); 0: solve refuses a max_tokens document that does
			 * not fit one pipeline of the request first */
	int rank;       /* its place in the table's order (-m all, presets, tables): ascending */
	/* Its own input from the front end in ctx->input (BP_INPUT_NONE: none). */
	enum bp_method_input input;
	/* The schemes of every layout it may add, when the front end makes the analytic profile
	 * (NULL: the request's scheme alone): the profile it plans on is made of exactly these
	 * (in place of the request's), so `check`, which regenerates an analytic profile from a
	 * plan's layouts, prices the same. m is the model (NULL: not known, the fewest), sc and
	 * dp the request's layout, params every --param given (a bad value is the method's own
	 * error, later). Writes at most cap schemes to out and returns how many. */
	size_t (*profile_schemes)(const struct bp_model *m, struct bp_scheme sc, int dp,
				  const struct bp_param *params, size_t nparams,
				  struct bp_scheme *out, size_t cap);
	/* Its price (NULL: nothing beyond every method's draw, plan and predict): adds its own
	 * work to p (zeroed, but for p->once) from the request r alone. */
	void (*price)(const struct bp_price_req *r, struct bp_price *p);
	/* Keys it records in a plan beyond its parameters and cp_shard (NULL-terminated; NULL:
	 * none), which check accepts as its own; a key ending in '*' stands for every key that
	 * begins with the rest (wlb's microbatches_per_step, hydraulis's fit_*). */
	const char *const *recorded;
	/* Its parameter (one of params) whose value names the method of the table it packs
	 * with (NULL: none; sparsebalance's sb_batching): it then takes that method's
	 * parameters and recorded keys too (bp_method_takes, bp_method_check_params). */
	const char *packer_param;
	/* `balplan check` after the plan's validation and bp_method_check_params (NULL:
	 * nothing more): re-derives what its records and parameters say from the plan, costs
	 * the plan's cost models (bp_plan_costs). 0 or -1 naming the first difference. */
	int (*recheck)(const struct bp_plan *p, struct bp_costs *costs, struct bp_error *err);
	/* Its parameter that, at a value other than 1, makes it carry state from step to step
	 * as `carries` does (NULL: none; fixed's window, packing several global batches
	 * together). */
	const char *carries_param;
	/* Its parameter bounding the tokens one rank holds (NULL: none; distca's rank_tokens,
	 * a micro-batch's documents spread over its pipelines): solve's memory check before it
	 * runs takes it in place of max_tokens when smaller. */
	const char *mem_tokens_param;
};

/* A method's row, defined in its own file under planner/methods/ as
 *     BP_METHOD_ROW(id) = { .name = "...", .solve = ..., ... };
 * at the start of a line: CMakeLists.txt collects every such row of the files of planner/methods/ into
 * the table (the generated method_rows.h), so a new method is its file alone. */
#define BP_METHOD_ROW(id)                                                                  \
	extern const struct bp_method bp_row_##id;                                         \
	const struct bp_method bp_row_##id

/* m's check_request, or 0 when it has none. */
int bp_method_check_request(const struct bp_method *m, struct bp_scheme sc,
			    const struct bp_model *mdl, enum bp_shard shard, struct bp_error *err);

/* Whether m takes parameter key: one of its own, or with batching (the value of its row's
 * packer_param, or NULL) one of the packing method it names. */
int bp_method_takes(const struct bp_method *m, const char *key, const char *batching);

/* One validation of a plan's method parameters for solve and check alike: every key one of
 * the method's (or cp_shard), then the method's check_params hook on a scratch copy. */
int bp_method_check_params(const struct bp_method *m, const struct bp_plan *p,
			   struct bp_error *err);

/* Whether `solve -m all` runs the method (its row's in_all): every method but hydraulis,
 * which brings its own layouts and candidate strategies, distca, which brings its own
 * schedule, flexsp (its own layouts, cp 1 and pp 1) and the sparse methods; they run only
 * when named. */
int bp_method_in_all(const struct bp_method *m);

/* Whether the method checks memory itself (its row's own_memory), so solve skips its max_tokens-on-one-pipeline
 * check (flexsp: a long document runs on a sequence-parallel group of several pipelines of
 * the request, and a document no group holds is the method's infeasibility). */
int bp_method_own_memory(const struct bp_method *m);

/* What the price hooks share (methods/methods.c). A --param's value as a number, or def when
 * absent or not a number (the method's own reader reports a bad value before anything runs);
 * its text, or NULL. */
double bp_price_param(const struct bp_price_req *r, const char *key, double def);
const char *bp_price_param_text(const struct bp_price_req *r, const char *key);
/* One GLPK search within a method's budget, in instructions: ilp_work_limit million work
 * units [work_m] at 30 instructions each (14-24 measured), at most ilp_time_limit_s
 * [time_s]. */
double bp_price_ilp_search(const struct bp_price_req *r, double work_m, double time_s);
/* The packing ILP of fixed-ilp and wlb-ilp per step, packing window global batches at once:
 * one search per window where a window's binaries (D mb0 window^2) fit twice ilp_max_vars (a
 * step may draw fewer documents than the mean says), else none. */
double bp_price_ilp_pack(const struct bp_price_req *r, double window);
/* The price hook of a packer that sorts the documents (ffd, bfd, multipack): 100 D log2 D
 * instructions per step, all of it packing. */
void bp_price_sort_packer(const struct bp_price_req *r, struct bp_price *p);
/* fixed's and wlb's packing per step (methods/fixed.c, wlb.c), which fixed-ilp and wlb-ilp
 * run before their ILP */
double bp_fixed_pack_price(const struct bp_price_req *r);
double bp_wlb_pack_price(const struct bp_price_req *r);

/* The record codec of a kind ("ilp"), searched in the method table; NULL when unknown. */
const struct bp_record_ops *bp_record_find(const char *kind);

/* The row marked baseline (the speedup column's reference without --baseline), or NULL. */
const struct bp_method *bp_method_baseline(void);

size_t bp_method_count(void);
const struct bp_method *bp_method_at(size_t i);     /* static; NULL past the end */
const struct bp_method *bp_method_find(const char *name); /* static; NULL when unknown */

/* The methods (one file each). */
int bp_method_plain(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		    struct bp_plan *out, struct bp_error *err);
int bp_plain_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			  struct bp_error *err);
int bp_method_fixed(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		    struct bp_plan *out, struct bp_error *err);
int bp_method_wlb(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		  struct bp_plan *out, struct bp_error *err);
/* The keys wlb and wlb-ilp record beyond their parameters (their rows' recorded; methods/wlb.c) */
extern const char *const bp_wlb_recorded[];
/* wlb's queue parameters as it reads them; wlb-ilp's add the ILP budgets (methods/wlb.c) */
int bp_wlb_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			struct bp_error *err);
int bp_wlb_ilp_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			    struct bp_error *err);
int bp_method_fixed_ilp(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			struct bp_plan *out, struct bp_error *err);
int bp_method_wlb_ilp(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		      struct bp_plan *out, struct bp_error *err);
int bp_method_ffd(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		  struct bp_plan *out, struct bp_error *err);
int bp_method_bfd(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		  struct bp_plan *out, struct bp_error *err);
int bp_method_multipack(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			struct bp_plan *out, struct bp_error *err);
int bp_method_kk(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		 struct bp_plan *out, struct bp_error *err);
int bp_method_hydraulis(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			struct bp_plan *out, struct bp_error *err);
extern const struct bp_record_ops bp_record_hydraulis; /* methods/hydraulis.c */
void bp_hyd_warn(const struct bp_plan *p, char *buf, size_t n);
/* `balplan check` for hydraulis plans: records' changed flags against the selections, and
 * every pipeline's micro-batches in decreasing tokens. 0 or -1 naming the first step. */
int bp_hyd_recheck(const struct bp_plan *p, struct bp_error *err);
int bp_hyd_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			struct bp_error *err);
int bp_method_sparsebalance(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			    struct bp_plan *out, struct bp_error *err);
int bp_method_sb_lbb(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		     struct bp_plan *out, struct bp_error *err);
extern const struct bp_record_ops bp_record_sparsebalance; /* methods/sparsebalance.c */
void bp_sb_warn(const struct bp_plan *p, char *buf, size_t n);
/* `balplan check` for sparsebalance / sb-lbb plans (plans/README.md "SparseBalance plans"): re-runs
 * Alg. 1 on the plan's packing with its recorded parameters on cm (layout 0's pipeline 0)
 * and compares every step's Spar state, T_anchor, k_anchor and per-layer budget. With
 * measured coverage the file is not at hand, so a bottleneck micro-batch's budgets and the
 * Spar state (which follows them) are left to the record's validate hook. Returns 0 or -1 with err naming the first difference. */
int bp_sb_recheck(const struct bp_plan *p, const struct bp_costmodel *cm,
		  struct bp_error *err);
int bp_method_distca(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		     struct bp_plan *out, struct bp_error *err);
extern const struct bp_record_ops bp_record_distca; /* methods/distca.c */
int bp_distca_check_request(struct bp_scheme sc, const struct bp_model *m,
			    enum bp_shard shard, struct bp_error *err);
int bp_flexsp_check_request(struct bp_scheme sc, const struct bp_model *m,
			    enum bp_shard shard, struct bp_error *err);
int bp_sb_check_request(struct bp_scheme sc, const struct bp_model *m, enum bp_shard shard,
			struct bp_error *err);
int bp_distca_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			   struct bp_error *err);
/* distca.c's step 1: a step's micro-batch boundaries bnd[0 .. *m] (n + 1 allocated) for
 * documents of len[] in order over dp pipelines of cap tokens, next-fit's cut, or evenly
 * re-cut with even (tests/unit/test_distca.c checks both). */
int bp_distca_cut(const int64_t *len, size_t n, int dp, int64_t cap, int pingpong, int even,
		  size_t *bnd, size_t *m, struct bp_error *err);
void bp_distca_warn(const struct bp_plan *p, char *buf, size_t n);
int bp_method_flexsp(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		     struct bp_plan *out, struct bp_error *err);
extern const struct bp_record_ops bp_record_flexsp; /* methods/flexsp.c */
int bp_flexsp_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			   struct bp_error *err);
/* fixed, fixed-ilp (and the ILP parameters of wlb-ilp): their window and GLPK budgets */
/* fixed's window, which fixed-ilp reads with them too (methods/fixed.c) */
extern const struct bp_param_spec bp_fixed_param_specs[];
int bp_fixed_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			  struct bp_error *err);
int bp_fixed_ilp_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			      struct bp_error *err);
void bp_flexsp_warn(const struct bp_plan *p, char *buf, size_t n);
/* flexsp's largest group, in units of tp GPUs: max_group when > 0 (a power of two), else
 * the largest power of two dividing the model's heads / tp (Ulysses gives each rank whole
 * heads); at most the largest power of two <= units. Its row's profile_schemes
 * (bp_flexsp_profile_schemes) lists a scheme per size up to it. */
int bp_flexsp_max_group(const struct bp_model *m, int tp, int units, int64_t max_group);
size_t bp_flexsp_profile_schemes(const struct bp_model *m, struct bp_scheme sc, int dp,
				 const struct bp_param *params, size_t nparams,
				 struct bp_scheme *out, size_t cap);

/* Reads an integer / real method parameter from the plan, or records the default there.
 * Fails naming the parameter when the value is not a number in [lo, hi]. */
int bp_method_param_int(struct bp_plan *p, const char *key, int64_t def, int64_t lo,
			int64_t hi, int64_t *out, struct bp_error *err);
int bp_method_param_real(struct bp_plan *p, const char *key, double def, double lo,
			 double hi, double *out, struct bp_error *err);

/* The one reader of a typed parameter: key's spec in specs (a row's param_specs), its value
 * from the plan or its default recorded there (as bp_method_param_int / _real record it).
 * Fails naming the parameter when the value is not of its type, outside its range
 * ("parameter K is V, outside [LO, HI]") or not one of its choices ("parameter K is 'V',
 * not 'A' or 'B'"), and on a key specs lacks or of another type. bp_param_choice sets *out
 * to the choice's index. */
const struct bp_param_spec *bp_param_spec_find(const struct bp_param_spec *specs,
					       const char *key);
int bp_param_int(struct bp_plan *p, const struct bp_param_spec *specs, const char *key,
		 int64_t *out, struct bp_error *err);
int bp_param_real(struct bp_plan *p, const struct bp_param_spec *specs, const char *key,
		  double *out, struct bp_error *err);
int bp_param_choice(struct bp_plan *p, const struct bp_param_spec *specs, const char *key,
		    int *out, struct bp_error *err);

/* Parameter grad_sync of the baselines that sync with dp-allreduce (plain, fixed, wlb; plans/
 * README.md "Gradient sync"; the model is sim/predict.c's): "exposed" (the default: the
 * whole reduce-scatter and all-gather after the pipelines), "overlap" (Megatron-LM's
 * --overlap-grad-reduce: the reduce-scatter during the last backward) or "overlap-gather"
 * (with --overlap-param-gather too: the all-gather ahead of the forward). The default is not
 * recorded: a plan without the key is an exposed one, as every plan before the parameter.
 * The names, NULL-terminated, and the reader: the value's index (0 exposed or absent, 1
 * overlap, 2 overlap-gather), or -1 with err ("parameter grad_sync is 'V', not 'exposed',
 * 'overlap' or 'overlap-gather'"). */
#define BP_GRAD_SYNC_PARAM "grad_sync"
extern const char *const bp_grad_sync_names[];
int bp_param_grad_sync(const struct bp_plan *p, struct bp_error *err);

/* The spec of parameter key of method m as a listing shows it (balplan presets --params):
 * the row's own (param_specs), else the spec of a parameter several rows share and read
 * with a reader of their own (grad_sync), else NULL (a parameter whose default or range
 * depends on the request). */
const struct bp_param_spec *bp_method_param_spec(const struct bp_method *m, const char *key);

/* One step of a method that plans each global batch on its own: fills st (its pipelines)
 * from batch b; out gives the cluster and caps, arg is the method's own (its parameters as
 * read, scratch kept between steps; bp_method_each_step's). Returns 0, -1 or BP_INFEASIBLE. */
typedef int (*bp_step_fn)(const struct bp_method_ctx *ctx, const struct bp_batch *b,
			  struct bp_step *st, const struct bp_plan *out, void *arg,
			  struct bp_error *err);

/* Runs fn(..., arg, ...) on every drawn batch in order, one step each, after
 * bp_method_alloc_steps; stops at the first step that fails and returns its status. */
int bp_method_each_step(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			struct bp_plan *out, bp_step_fn fn, void *arg, struct bp_error *err);

/* In a window of a run (ctx->run): moves out's steps (numbered from 0 by
 * bp_method_alloc_steps) to the run's numbers from step0, delays included, and sets
 * out->first_step; nothing outside a run. */
void bp_method_place_steps(const struct bp_method_ctx *ctx, struct bp_plan *out);
/* The method's state in a run (zeroed size bytes at the first call, freed with release, which
 * may be free), or NULL outside a run (err unset) or out of memory (err set). */
void *bp_method_state(const struct bp_method_ctx *ctx, size_t size, void (*release)(void *),
		      struct bp_error *err);

/* Shared by methods: allocates out->steps for n steps with dp empty pipelines each and copies
 * each batch's documents. */
int bp_method_alloc_steps(struct bp_plan *out, const struct bp_batches *in, size_t n,
			  struct bp_error *err);

#endif
