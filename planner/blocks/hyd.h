/* hyd.h: the building blocks of Hydraulis (Li et al., "Demystifying Workload Imbalances in
 * Large Transformer Model Training over Variable-length Sequences"; section, equation and
 * appendix numbers below are the paper's), used by methods/hydraulis.c, formats/hyd_json.c
 * and `balplan propose`:
 *   hyd_model.c    schemes <TP, PP> and heterogeneous strategies (Sec. 5.1), their placement
 *                  onto ranks, the memory model MaxLen(P) (App. B.1), the latency model
 *                  T(l, P) = a l^2 + b l + c fitted by least squares (App. B.2) and UtilLen
 *                  (App. C);
 *   hyd_dispatch.c sequences to pipelines: Eq. 2's per-pipeline bound, Alg. 1 (randomised
 *                  greedy, App. D.2), Eq. 3 as an ILP through GLPK and a certified bound;
 *   hyd_pack.c     one pipeline's sequences into V micro-batches, Eq. 1 over App. C's pruned
 *                  range of V;
 *   hyd_propose.c  the strategy proposal: the DP of Eq. 4 over GPU counts and length
 *                  intervals, its continuous relaxation and the rounding rule (Sec. 7).
 * Times are microseconds (the repository's a, b, c are milliseconds), lengths tokens. Nothing
 * here prints or reads files; randomness comes from seeds the caller passes. */
#ifndef BP_HYD_H
#define BP_HYD_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"
#include "costmodel.h"
#include "dataset.h"
#include "ilp.h"
#include "layout.h"
#include "presets.h"

/* ---- the latency model T(l, P) (App. B.2) ---- */

/* T(l) = a l^2 + b l + c, us, forward + backward of one sequence of l tokens on the busiest
 * stage of a pipeline (the "one pipeline stage" of App. B.2). a, b >= 0 (the fit enforces it),
 * so T never decreases with l; c may be negative, and bp_hyd_T clamps T at 0. max_err and
 * rms_err are the fit's relative errors |fit - sample| / sample over its samples. */
struct bp_hyd_fit {
	double a, b, c;
	double max_err, rms_err;
};

static inline double bp_hyd_T(const struct bp_hyd_fit *f, double l)
{
	double t = (f->a * l + f->b) * l + f->c;
	return t > 0.0 ? t : 0.0;
}

/* T without c: the public code's per-sequence cost in dispatch and packing, where it charges
 * App. B.2's c once per micro-batch instead (hyd_c=code). */
static inline double bp_hyd_T_noc(const struct bp_hyd_fit *f, double l)
{
	double t = (f->a * l + f->b) * l;
	return t > 0.0 ? t : 0.0;
}

/* Least-squares fit of T to n samples (l[i], t[i]), t > 0, with weights 1/t^2 (relative
 * error, so short sequences count as much as long ones) when weighted, else unweighted.
 * Lengths are scaled to [0, 1] before solving the normal equations. A negative a (or b) is
 * refitted with that term fixed at 0. Returns 0, or -1 with fewer than 3 distinct lengths. */
int bp_hyd_fit_samples(const double *l, const double *t, size_t n, int weighted,
		       struct bp_hyd_fit *out, struct bp_error *err);

/* Fits T for a pipeline from its cost model: samples bp_cost_doc (one sequence alone on the
 * busiest stage, the per-item cost of every balplan packer) on the linear grid 128, 256, ...
 * up to max_len (at most 512 points: the step grows in multiples of 128), weighted. */
int bp_hyd_fit_cost(const struct bp_costmodel *cm, int64_t max_len, struct bp_hyd_fit *out,
		    struct bp_error *err);

/* UtilLen(P) (App. C): the shortest length on the grid step, 2 step, ... <= max_len at which
 * the efficiency l / T(l) reaches theta (0.85 in the paper) of its largest value on that
 * grid. */
int64_t bp_hyd_util_len(const struct bp_hyd_fit *f, int64_t max_len, int64_t step,
			double theta);

/* ---- the memory model MaxLen(P) (App. B.1) ---- */

/* The longest micro-batch (tokens, aligned down to align) a pipeline with cost model cm can
 * hold on every stage s under 1F1B: state(s) + (pp - s) * act(s, l) <= HBM - reserve, with
 * the activations of bp_cost_act_bytes (App. B.1 (a)) and the model state of
 * bp_cost_state_bytes (App. B.1 (b)) with its optimizer share divided over `replicas`
 * pipelines of the scheme (what the simulator's dp-allreduce model charges, so plans made
 * with these caps pass the memory check). 0 when not even align tokens fit. */
int64_t bp_hyd_maxlen(const struct bp_costmodel *cm, int replicas, int64_t align);

/* The same with the paper's optimizer layout (App. B.1, footnote 3): optimizer states and
 * master weights fully sharded over all gpus GPUs; bf16 weights and gradients per TP shard.
 * For display (`balplan propose`): the simulator does not model it yet (issue 12 item 7). */
int64_t bp_hyd_maxlen_full(const struct bp_costmodel *cm, int gpus, int64_t align);

/* App. B.1 in the closed form of the public code (its `get_strategy_max_seqlen`),
 * with its profiled constants: static = (L/os_pp)(H^2/os_tp) B alpha / os_dp + (L/pp)(H^2/tp)
 * B (1 - alpha) + (H V / os_tp) e_os alpha / os_dp + (H V / tp) e (1 - alpha), e = 32 when
 * pp = 1 else 16 (e_os likewise with os_pp), and MaxLen = (bound - safe - static - gap) /
 * (L (H / tp) A[tp]). Memory constants in MiB. Returns the raw (unaligned, floored) value,
 * negative when the scheme cannot hold any sequence. Used for the known answers (K4). */
struct bp_hyd_appb1 {
	int layers, hidden, vocab;
	double A;            /* activation constant for the scheme's tp */
	double B, alpha;
	int os_dp, os_tp, os_pp;
	double bound_mib, safe_mib, gap_mib;
};
int64_t bp_hyd_maxlen_appb1(const struct bp_hyd_appb1 *c, int tp, int pp);

/* ---- schemes and strategies (Sec. 5.1) ---- */

#define BP_HYD_MAX_GROUPS 16 /* distinct schemes in one strategy */

/* count pipelines of scheme <tp, pp> (cp is always 1: Hydraulis uses TP and PP only). */
struct bp_hyd_group {
	int tp, pp, count;
};

/* A heterogeneous strategy S = sum_i d_i x P_i. Groups are kept in canonical order (tp
 * descending, then pp descending), one per scheme. */
struct bp_hyd_strategy {
	struct bp_hyd_group g[BP_HYD_MAX_GROUPS];
	size_t ng;
	/* Provenance (strategies files and proposals): */
	char origin[16];      /* "dp" (Eq. 4), "relaxed" (rounded relaxation), "file" */
	int64_t len_lo, len_hi; /* the range of L it was proposed for (0 when unknown) */
	int64_t max_len;      /* its longest pipeline's MaxLen (0 when unknown) */
	double expected_us;   /* the proposal's expected propagation time per step (0: none) */
};

/* What the proposal knew about a scheme (strategies files, `balplan propose`): MaxLen for
 * one pipeline (replica: the simulator's optimizer sharding; full: sharded over all GPUs,
 * App. B.1), UtilLen, the fitted T(l) and its largest relative error. */
struct bp_hyd_sinfo {
	int tp, pp;
	int64_t max_len, max_len_full, util_len;
	double a, b, c, fit_err;
};

/* The candidate set S^ with how it was made. */
struct bp_hyd_set {
	struct bp_hyd_strategy *s; /* owned */
	size_t n;
	struct bp_hyd_sinfo *schemes; /* the scheme space, owned (may be empty) */
	size_t nschemes;
	int gpus;                  /* the cluster the strategies were made for */
	char model[64];            /* "" when not recorded */
	/* Proposal provenance ("" / 0 for hand-written files): */
	char dataset[64], dataset_sha[65], profile[64];
	int64_t max_tokens, tokens_per_step, len_step;
	int gpu_step;
	char optimizer[16];        /* "replica" or "full" (memory model used for MaxLen) */
};

void bp_hyd_set_init(struct bp_hyd_set *s);
void bp_hyd_set_release(struct bp_hyd_set *s);
/* Appends a copy of st (groups canonicalised, equal schemes merged). Returns its index or
 * -1. Duplicates are not checked (bp_hyd_set_find). */
int bp_hyd_set_add(struct bp_hyd_set *s, const struct bp_hyd_strategy *st, struct bp_error *err);
/* Index of a strategy with the same groups, or -1. */
int bp_hyd_set_find(const struct bp_hyd_set *s, const struct bp_hyd_strategy *st);

/* Sorts groups canonically and merges equal schemes (counts add up). */
void bp_hyd_strategy_canon(struct bp_hyd_strategy *st);
/* GPUs the strategy's pipelines use: sum of count x tp x pp. */
int64_t bp_hyd_strategy_gpus(const struct bp_hyd_strategy *st);
/* "1x<16,1> + 2x<8,3>" (groups in canonical order). */
void bp_hyd_strategy_describe(const struct bp_hyd_strategy *st, char *buf, size_t n);
/* Parses the describe form or the short one "16x1*1+8x3*2" (tp x pp * count, '+'
 * separated); fills st (canonical). Returns 0 or -1 naming the bad part. */
int bp_hyd_strategy_parse(const char *s, struct bp_hyd_strategy *st, struct bp_error *err);

/* Checks a strategy for a cluster and a model: at least one pipeline; every count >= 1; tp
 * and pp >= 1; tp divides the model's heads; pp divides its layers (D_P of Sec. 5.1); tp at
 * most gpus_per_node (a TP group stays within a node: balplan's layouts never cross, so the
 * code's TP 16 over two 8-GPU nodes is not allowed); sum of GPUs <= gpus. Errors name the
 * scheme ("scheme <3,1>: tp 3 does not divide the 64 heads of model ..."). */
int bp_hyd_strategy_check(const struct bp_hyd_strategy *st, int gpus, int gpus_per_node,
			  const struct bp_model *m, struct bp_error *err);

/* Places a strategy's pipelines (Sec. 5.1) on ranks as the public code's convert_strategy
 * does: pipelines in order of tp descending (pp descending, then group order), each stage's
 * TP group onto the node with the most GPUs already used that still has room for it (ties:
 * the lowest node), on its lowest free GPUs; layers split evenly (pp divides layers). The
 * layout lists the groups' pipelines in the order group_order gives (ng group indices; NULL:
 * group order), group i's capped at cap[i] tokens. Fills an initialised layout; -1 when a
 * TP group finds no node with room. */
int bp_hyd_place(const struct bp_hyd_strategy *st, int gpus, int gpus_per_node, int layers,
		 const size_t *group_order, const int64_t *cap, struct bp_layout *out,
		 struct bp_error *err);

/* ---- dispatch across pipelines (Sec. 6.2, App. D) ---- */

/* One pipeline as dispatch sees it: its latency model, PP degree and cap MaxLen. */
struct bp_hyd_dpipe {
	const struct bp_hyd_fit *T; /* borrowed */
	int pp;
	int64_t cap;
};

/* A dispatch instance. Pipelines are ordered by cap, longest first (Sec. 6.2: MaxLen(P_1)
 * >= ... >= MaxLen(P_D)), so sequence i may go to pipelines 0 .. J_i - 1. */
struct bp_hyd_dispatch {
	const int64_t *len; /* n sequence lengths; borrowed */
	size_t n;
	const struct bp_hyd_dpipe *pipes; /* borrowed */
	size_t npipes;
	int no_c;          /* 1: per-sequence cost without c (the code's dispatch), else T */
	int code;          /* the public code's variant of Alg. 1 (App. D.2): its pre-pass (with
			    * one longest pipeline, the sequences only it holds go first) and ties
			    * to an empty pipeline */
	int trials;        /* Alg. 1's T */
	uint64_t seed;     /* trial t shuffles with a generator seeded seed + t */
	const uint32_t *orders; /* NULL, or trials x n: trial t's shuffle (bp_hyd_orders of the
				 * same n, trials and seed), shared by the candidates of a step;
				 * borrowed */
};

/* A step's shuffles made on demand (bp_hyd_dispatch_greedy_shared): trial t's row is drawn
 * the first time a candidate's greedy reaches trial t (trials stop early once no later one
 * can win), then shared by the step's other candidates. Rows [0, made) of o are filled. */
struct bp_hyd_shuffles {
	uint32_t *o; /* trials x n; owned */
	size_t n;
	int trials, made;
	uint64_t seed;
};
/* Returns 0, or -1 with err filled when out of memory or n >= 2^32. */
int bp_hyd_shuffles_init(struct bp_hyd_shuffles *s, size_t n, int trials, uint64_t seed,
			 struct bp_error *err);
void bp_hyd_shuffles_release(struct bp_hyd_shuffles *s);

/* Alg. 1's shuffles for `trials` trials of n sequences, trial t's at [t n, (t + 1) n): the
 * permutation bp_hyd_dispatch_greedy draws from a generator seeded seed + t. A step's
 * candidates all dispatch the same sequences with the same seeds, so they share one table.
 * Returns NULL with err filled when out of memory or n >= 2^32; the caller frees. */
uint32_t *bp_hyd_orders(size_t n, int trials, uint64_t seed, struct bp_error *err);

/* Per-sequence cost on pipeline j: T or T without c. */
double bp_hyd_seq_cost(const struct bp_hyd_dispatch *d, size_t j, int64_t len);

/* Eq. 2 for every pipeline of an assignment (pipe_of: n entries): sum of the pipeline's
 * sequence costs + T(longest) (PP - 1); per (npipes entries, may be NULL) gets each
 * pipeline's value. Returns the largest (Eq. 3's objective). */
double bp_hyd_eq2(const struct bp_hyd_dispatch *d, const int *pipe_of, double *per);

/* Alg. 1 (App. D.2), as printed: `trials` independent trials, each shuffling the sequences
 * and placing them one by one on the allowed pipeline that minimises the largest pipeline
 * cost (C_j + E_j), the first such pipeline on ties (with d->code, the first empty one among
 * them, after the code's pre-pass); the best trial (the first on ties) wins.
 * Per-group segment trees give each placement in O(groups x log pipelines) instead of
 * O(pipelines) (groups of up to 64 pipelines are scanned instead, four at a time); a trial
 * stops as soon as it cannot beat the best, and the trials stop once the best reaches a
 * floor no trial can go below (the largest over sequences of PP T(l) on their best group).
 * The result is the literal Alg. 1's, bit for bit. pipe_of gets the best
 * assignment, *objective its Eq. 3 value, *trial its index (from 0). Returns 0, or
 * BP_INFEASIBLE naming the first sequence longer than every cap. */
int bp_hyd_dispatch_greedy(const struct bp_hyd_dispatch *d, int *pipe_of, double *objective,
			   int *trial, struct bp_error *err);
/* The same with trial t's shuffle from sh (when d->orders is NULL; sh made for d's n,
 * trials and seed), drawn there if no earlier call reached trial t. */
int bp_hyd_dispatch_greedy_shared(const struct bp_hyd_dispatch *d, struct bp_hyd_shuffles *sh,
				  int *pipe_of, double *objective, int *trial,
				  struct bp_error *err);

/* A certified lower bound on Eq. 3's optimum: the largest of (a) each sequence alone on the
 * best pipeline it may use, PP T(l) (its C plus warm-up), and (b) for every prefix of
 * pipelines 0..J-1 (J at the ends of runs of equal caps), the cost of the sequences that
 * can only use that prefix, each at its cheapest allowed pipeline, over J. */
double bp_hyd_dispatch_bound(const struct bp_hyd_dispatch *d);

/* Eq. 3 as a mixed-integer program through GLPK (blocks/ilp.h), exact: min Z with
 * sum_{j < J_i} m_ij = 1, Z >= sum_i c_ij m_ij + E_j, E_j >= (PP_j - 1) c_ij m_ij (the max
 * inside Eq. 2 is linear for binary m and monotone T). Starts from warm (a feasible
 * assignment, e.g. Alg. 1's) and never returns worse; the budget is o's deterministic node
 * and work limits. pipe_of gets the result; bound the proven lower bound (at least
 * bp_hyd_dispatch_bound). */
struct bp_hyd_ilp_res {
	enum bp_ilp_status status; /* OPTIMAL, FEASIBLE (better than warm) or WARM_START */
	double objective, bound;
	int64_t nodes;
};
int bp_hyd_dispatch_ilp(const struct bp_hyd_dispatch *d, const struct bp_ilp_opts *o,
			const int *warm, int *pipe_of, struct bp_hyd_ilp_res *res,
			struct bp_error *err);

/* ---- packing within a pipeline (Sec. 6.1, Eq. 1; App. C) ---- */

struct bp_hyd_pack_in {
	const double *w;      /* n per-sequence costs (T, or T without c in code mode) */
	const int64_t *len;   /* n lengths */
	size_t n;
	int pp;
	int64_t cap;          /* MaxLen(P) */
	int64_t util_len;     /* UtilLen(P) */
	double c_mb;          /* added to each micro-batch's cost (code mode: c; paper: 0) */
	int v_tries;          /* at most this many V from the lower end (0: the whole range) */
	const struct bp_ilp_opts *ilp; /* GLPK per V when not NULL and n x V <= ilp->max_vars
					* (> 0), warm-started from the greedy */
};

struct bp_hyd_pack_out {
	int v, v_min, v_max;  /* V*, and the range searched */
	double z;             /* the largest micro-batch cost at V* (without c_mb) */
	double obj;           /* Eq. 1 at V*: (z + c_mb) (PP - 1 + V*) */
	int ilp_solves;       /* GLPK runs (0 without ilp) */
	int ilp_better;       /* of them, runs that beat the greedy at their V */
};

/* Eq. 1 (Sec. 6.1) for V = v_min .. v_max (App. C: v_min = max(ceil(sum l / cap), 1), v_max
 * = max(v_min, min(floor(sum l / UtilLen), n))): each V packed by LPT with the cap (bp_pack_lpt,
 * costliest sequence first into the least-loaded micro-batch with room), then by GLPK when
 * asked; V* the smallest V of least (z + c_mb)(PP - 1 + V) (scanning upward with strict <, as
 * the code does). If no V in the range packs, V grows past v_max until one does (V = n always
 * does). bin_of (n) gets each sequence's micro-batch. n = 0 gives V = 0 and objective 0.
 * Returns 0, -1, or BP_INFEASIBLE when a sequence is longer than cap. */
int bp_hyd_pack(const struct bp_hyd_pack_in *in, int *bin_of, struct bp_hyd_pack_out *out,
		struct bp_error *err);

/* ---- one step: every candidate, then the selection (Sec. 6, Fig. 6 steps 1-4) ---- */

/* A candidate strategy as a step sees it: its pipelines (MaxLen longest first), their
 * UtilLen and the longest cap. */
struct bp_hyd_cand {
	size_t npipes;
	const struct bp_hyd_dpipe *dp; /* borrowed */
	const int64_t *util;           /* borrowed */
	int64_t maxcap;
};

struct bp_hyd_step_opts {
	int trials;
	int code_c;       /* the code's c accounting: no c in dispatch and packing, c once per
			   * micro-batch in Eq. 1, and an idle pipeline rejects the strategy */
	int v_tries;
	const struct bp_ilp_opts *ilp;      /* Eq. 3 when its m_ij columns <= ilp->max_vars */
	const struct bp_ilp_opts *pack_ilp; /* Eq. 1 per V when n V <= pack_ilp->max_vars */
	int prune;        /* skip a candidate whose bound or dispatch reaches the best estimate */
};

/* What one candidate gave (the hydraulis record keeps these). */
struct bp_hyd_cand_res {
	/* "ok"; "too-short" (MaxLen below the step's longest); "empty-pipeline" (hyd_c=code);
	 * "pruned": its dispatch bound or objective, a lower bound on its estimate kept in
	 * estimate_us, already reached the best estimate of an earlier candidate */
	char status[16];
	double dispatch_us; /* Eq. 3 of the dispatch used */
	double bound_us;    /* a certified lower bound on Eq. 3 */
	double estimate_us; /* max over pipelines of Eq. 1: the estimated propagation time */
	int trial;          /* Alg. 1's winning trial, -1 when not run */
	char dispatch[16];  /* "greedy", "ilp-optimal", "ilp-feasible", "ilp-warm-start", "none" */
};

/* One pipeline of the chosen candidate. */
struct bp_hyd_pipe_res {
	double eq2_us;     /* Eq. 2 of its sequences */
	int v, v_min, v_max;
	double z_us, eq1_us;
};

/* Runs every candidate on the step's n sequences (Alg. 1 seeded seed + t, Eq. 3's ILP where
 * asked, Eq. 1 per pipeline) and selects the least estimate, the first on ties. res (nc)
 * gets every candidate's result, *selected the choice, pipe_of and bin_of (n) its dispatch
 * and packing (micro-batch index within the pipeline), pr (its npipes) its pipelines.
 * Returns 0, -1, or BP_INFEASIBLE when no candidate can take the step (err says why). */
int bp_hyd_step(const struct bp_hyd_cand *c, size_t nc, const int64_t *len, size_t n,
		uint64_t seed, const struct bp_hyd_step_opts *o, struct bp_hyd_cand_res *res,
		int *selected, int *pipe_of, int *bin_of, struct bp_hyd_pipe_res *pr,
		struct bp_error *err);

/* ---- strategy proposal (Sec. 7, Eq. 4) ---- */

/* The dataset as the DP sees it: nb length buckets of width step (bucket b, from 1, holds
 * lengths in ((b - 1) step, b step], the last one up to top), each with the expected number
 * of sequences per step and their sums of x and x^2, and the longest length present. */
struct bp_hyd_hist {
	size_t nb;
	int64_t step, top;
	double *cnt, *s1, *s2; /* [nb + 1], index 0 unused; owned */
	int64_t *xmax;         /* [nb + 1]; 0 for an empty bucket; owned */
};
void bp_hyd_hist_release(struct bp_hyd_hist *h);
/* Buckets a dataset cut at max_tokens (documents over it are truncated to it, or dropped
 * with BP_OVERLEN_DROP), scaled so a step holds tokens_per_step tokens on average (or
 * docs_per_step documents when that is > 0). Histogram bins spread their documents by the
 * dataset's in-bin rule (uniform exactly; log-uniform by its continuous density). */
int bp_hyd_hist_from_dataset(const struct bp_dataset *ds, int64_t max_tokens,
			     enum bp_overlen overlen, int64_t step, int64_t tokens_per_step,
			     int64_t docs_per_step, struct bp_hyd_hist *h, struct bp_error *err);
/* A histogram from explicit (length, count) pairs (tests, K3), step and top given. */
int bp_hyd_hist_from_counts(const int64_t *len, const double *cnt, size_t n, int64_t step,
			    int64_t top, struct bp_hyd_hist *h, struct bp_error *err);

/* A scheme of the space for the proposal: GPUs N(P) = tp pp, its fit and its MaxLen for d
 * pipelines, maxlen[d] for d = 1 .. nd (maxlen[0] unused; beyond nd, maxlen[nd]). */
struct bp_hyd_pscheme {
	int tp, pp;
	struct bp_hyd_fit fit;
	int64_t util_len;
	int64_t *maxlen; /* borrowed */
	size_t nd;
};

struct bp_hyd_propose_opts {
	int gpus;
	int gpu_step;    /* the DP's GPU unit (the code's N_STEP) */
	int relaxed;     /* also run the relaxation and add its rounded strategies */
	int warmup;      /* the code's warm-up term: + T(longest in the interval)(PP - 1), the
			  * whole cost over d (the public code's variant of Eq. 4, Sec. 7) */
	int keep_dominated; /* 0: drop a candidate that is a sub-multiset of another */
	/* Lengths L whose bucket no step is likely to end at or below are skipped: those with
	 * P(a step's longest <= L) = F(L)^(sequences per step) < min_prob (0: every L with
	 * sequences, the paper's S^ over all L). */
	double min_prob;
	/* A rounded relaxed strategy is kept when its expected time is within (1 + slack) of
	 * the best at its L (the integer DP's or another rounding's). */
	double relax_slack;
	/* An interval's latency is at least PP T(x) of its longest sequence x (one pipeline
	 * runs it whole: Eq. 2's bound), not only its expected W / d: without it Eq. 4 gives
	 * the rare longest sequences a sliver of a pipeline. 0: Eq. 4 as printed. */
	int indivisible;
};

/* The DP table of Eq. 4 for inspection (tests): t[n][l] for n = 0 .. nu GPU units and l = 0
 * .. nb buckets, at t[n * (nb + 1) + l]; INFINITY where nothing serves. */
struct bp_hyd_choice {
	int32_t k;      /* scheme index, -1: t[n - 1][l] (a GPU unit left unused), -2: none */
	int32_t m;      /* GPU units of the interval's pipelines */
	int32_t p;      /* buckets of the interval (l - l', l] */
};
struct bp_hyd_dp {
	size_t nu, nb;
	double *t;      /* owned */
	struct bp_hyd_choice *how; /* owned, same indexing: the choice behind t, for the trace */
	int relaxed;
	int unit;       /* GPUs per unit */
};
void bp_hyd_dp_release(struct bp_hyd_dp *dp);

/* Runs Eq. 4 over units of o->gpu_step GPUs (integer d: a scheme takes whole pipelines whose
 * GPUs fill whole units; relaxed: any number of units, so d = units x gpu_step / N(P) may be a
 * fraction) with 0 < l' <= l (Eq. 4, Sec. 7: with l' < l no homogeneous strategy is
 * reachable) and MaxLen(P_k, d) >= the interval's top. For
 * fixed (n, l, k) the best (d, l') is found by a two-pointer walk (the remaining latency
 * t[n - dN][l - l'] grows with d and falls with l', the interval's W/d the reverse), so the
 * table costs O(K N_u L_b (N_u + L_b)). Equal t are broken by the smaller sum of interval
 * latencies, then by more GPU units for the interval, then the earlier choice (skip first,
 * schemes in order, d and l' ascending). */
int bp_hyd_dp_run(const struct bp_hyd_hist *h, const struct bp_hyd_pscheme *k, size_t nk,
		  const struct bp_hyd_propose_opts *o, int relaxed, struct bp_hyd_dp *dp,
		  struct bp_error *err);

/* The intervals of S[nu][L] (L a bucket): scheme index, d (pipelines, fractional when
 * relaxed) and bucket range (lo, hi], longest interval first. Returns how many (<= cap). */
struct bp_hyd_interval {
	int k;
	double d;
	size_t lo, hi;
};
size_t bp_hyd_dp_trace(const struct bp_hyd_dp *dp, const struct bp_hyd_pscheme *k, size_t L,
		       struct bp_hyd_interval *out, size_t cap);

/* The scheme space of Sec. 5.1 as balplan places it: TP a power of two that divides the
 * heads and fits a node (and the cluster), PP dividing the layers and at most max_pp, TP x PP
 * <= gpus. Fills up to cap schemes (cp 1), returns how many. */
size_t bp_hyd_space(const struct bp_model *m, int gpus_per_node, int gpus, int max_pp,
		    struct bp_scheme *out, size_t cap);

/* The whole proposal on a profile: prices every scheme of sc (fit of T on the cost model up
 * to max_tokens, UtilLen at theta, MaxLen for 1 .. gpus / N(P) pipelines aligned to align;
 * schemes that cannot hold align tokens are left out), buckets the dataset
 * (bp_hyd_hist_from_dataset) and runs bp_hyd_propose. Fills set's strategies (with max_len),
 * schemes, gpus, model, profile, max_tokens, tokens_per_step, len_step, gpu_step and
 * optimizer; dataset names are the caller's. A zero len_step or gpu_step in o takes the
 * defaults bp_hyd_default_steps gives. */
struct bp_hyd_space_opts {
	struct bp_hyd_propose_opts p; /* p.gpus is the cluster */
	int64_t len_step, align;
	double theta;
};
void bp_hyd_default_steps(int gpus, int64_t max_tokens, int *gpu_step, int64_t *len_step);
int bp_hyd_propose_profile(const struct bp_profile *prof, const struct bp_scheme *sc,
			   size_t nsc, const struct bp_dataset *ds, int64_t max_tokens,
			   enum bp_overlen overlen, int64_t tokens_per_step, int64_t docs_per_step,
			   const struct bp_hyd_space_opts *o, struct bp_hyd_set *set,
			   struct bp_error *err);

/* What bp_hyd_propose_profile with the same arguments will cost, counted before any of its
 * tables is made (the guard of `balplan propose`): the schemes are priced (MaxLen only, no
 * fit), then the loops of bp_hyd_dp_run are counted from the sizes (hyd_propose.c
 * dp_count): units N_u = gpus / gpu_step, buckets L_b = ceil(max_tokens / len_step), the
 * schemes that hold align tokens, for the integer run and (o->p.relaxed) the relaxed one. */
struct bp_hyd_cost {
	size_t units, buckets, schemes;
	int64_t len_step;  /* the steps used (the defaults where o gives 0) */
	int gpu_step;
	double iters;      /* (n, l, scheme) heads and (n, l, scheme, m) iterations: exact */
	double evals;      /* of those, the (n, l, scheme, m) whose MaxLen holds bucket l */
	double walk;       /* steps of the two-pointer walk: an upper bound */
	double hist;       /* histogram and prefix-sum bucket visits */
	double bytes;      /* the peak of the histogram, prefix sums and DP tables */
};
int bp_hyd_propose_cost(const struct bp_profile *prof, const struct bp_scheme *sc, size_t nsc,
			const struct bp_dataset *ds, int64_t max_tokens,
			const struct bp_hyd_space_opts *o, struct bp_hyd_cost *cost,
			struct bp_error *err);

/* The proposal S^ (Sec. 7): for L = 1 .. nb, S[N][L] of the integer DP (origin "dp",
 * expected time t[N][L]) and, when o->relaxed, every rounding of the relaxed S[N][L]
 * (origin "relaxed", see hyd_propose.c for the rule), distinct, in order of the first L that
 * proposes them; then, unless o->keep_dominated, strategies that are sub-multisets of
 * another are dropped. len_lo/len_hi say for which lengths L (tokens) it was proposed. Fills
 * out's strategies (out initialised; provenance is the caller's). */
int bp_hyd_propose(const struct bp_hyd_hist *h, const struct bp_hyd_pscheme *k, size_t nk,
		   const struct bp_hyd_propose_opts *o, struct bp_hyd_set *out,
		   struct bp_error *err);

#endif
