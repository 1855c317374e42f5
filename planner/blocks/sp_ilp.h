/* sp_ilp.h: FlexSP's step planning problem (Wang et al., "FlexSP", ASPLOS 2025, arXiv
 * 2412.01523): the step's sequences are assigned to sequence-parallel groups of
 * heterogeneous power-of-two sizes, chosen per step, so that the slowest group finishes
 * first; a mixed-integer program over length buckets keeps the solve small. Here a unit is
 * one TP group of the request (DistCA's "FlexSP+" re-implementation with TP 8, DistCA
 * Sec. 6.1 "Baselines"), a group is an aligned run of units (sizes 1, 2, 4, ...,
 * starting at a multiple of its size), and the program goes to GLPK through ilp.h with its
 * deterministic budget. Called by methods/flexsp.c; tests/unit/test_flexsp.c.
 *
 * The program (costs in us, scaled by the warm start's makespan before GLPK):
 *   min T
 *   sum_{g contains u} y_g <= 1                 every unit in at most one used group
 *   sum_g n_bg = c_b                            every document of bucket b placed once
 *   n_bg <= c_b y_g                             only used groups take documents
 *   sum_b len_b n_bg <= cap_g m_g               m_g micro-batches hold the group's tokens
 *   m_g <= M_g y_g
 *   T >= sum_b t_bg n_bg + fix_g m_g            the group's time: its documents' marginal
 *                                               costs and a fixed cost per micro-batch
 *   y_g <= sum_{h: |h| >= |g|, h contains first(g) - 1} y_h
 *                                               (only when costs depend on the size alone:
 *                                               used groups in descending size from unit 0,
 *                                               a canonical placement of every partition)
 *   T >= max_b min_g (t_bg + fix_g), T >= sum_b c_b min_g (|g| t_bg) / U
 *                                               certified bounds, as T's lower bound
 *   y binary, n and m integer; n_bg exists only where len_b <= cap_g.
 * t_bg and fix_g come from the shared cost model (flexsp.c: a document's attention plus its
 * tokens at the group's token rate, and a per-micro-batch floor); a bucket's representative
 * is its longest document, so the program's times bound the documents' from above. */
#ifndef BP_SP_ILP_H
#define BP_SP_ILP_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"
#include "ilp.h"

/* Units [first, first + size). */
struct bp_sp_group {
	int first, size;
};

/* The aligned power-of-two groups of units units with sizes up to max_size (<= 0: units):
 * for each size 1, 2, 4, ... the groups starting at multiples of it that end within the
 * units, size ascending, then first. Writes them to g when g is not NULL (room for the
 * count) and returns the count: 2U - 1 for U a power of two and max_size U. */
size_t bp_sp_groups(int units, int max_size, struct bp_sp_group *g);

/* Length buckets of one step's documents. */
struct bp_sp_buckets {
	size_t n;
	int64_t *len;   /* [n] representative: the bucket's longest document; descending */
	int64_t *count; /* [n] documents */
	size_t *of;     /* [ndocs] each document's bucket */
	int exact;      /* 1: every bucket holds one length (costs are the documents') */
};

/* Buckets for ndocs lengths (each >= 1): one per distinct length when there are at most
 * max_buckets of them (exact); otherwise lengths in descending order cut into at most
 * max_buckets runs, each closed once it holds its share (the weight left over the buckets
 * left) of the weight len^2 + coef len (pack.h bp_kk_proxy's attention-plus-GEMM proxy,
 * coef from bp_kk_coef), equal lengths never apart, so long documents get buckets of their
 * own and the many short ones share. Fills an initialised (zeroed) b; release it
 * after success or failure. Returns 0 or -1. */
int bp_sp_bucketize(const int64_t *len, size_t ndocs, size_t max_buckets, int64_t coef,
		    struct bp_sp_buckets *b, struct bp_error *err);
void bp_sp_buckets_release(struct bp_sp_buckets *b);

/* One step's instance; every pointer borrowed. */
struct bp_sp_problem {
	int units;
	const struct bp_sp_group *g; /* [ng] from bp_sp_groups */
	size_t ng;
	const int64_t *len, *count;  /* [nb] buckets, len descending */
	size_t nb;
	const double *t;             /* [nb * ng] marginal us of one document, t[b * ng + g] */
	const double *fix;           /* [ng] us per micro-batch */
	const int64_t *cap;          /* [ng] tokens per micro-batch (memory) */
	int canonical;               /* costs depend on the size only: add the canonical rows */
	int max_runs;                /* bp_sp_greedy's LPT runs at most: 0 its default
				      * (max(4, 65,536 / documents)), < 0 no limit (the
				      * exhaustive result; tests) */
};

/* A solution: used groups, documents per (bucket, group), micro-batches per group. */
struct bp_sp_sol {
	unsigned char *used; /* [ng] */
	int64_t *n;          /* [nb * ng] */
	int64_t *m;          /* [ng] */
};
int bp_sp_sol_alloc(struct bp_sp_sol *s, size_t nb, size_t ng, struct bp_error *err);
void bp_sp_sol_release(struct bp_sp_sol *s);

/* The program's makespan of s (us), after setting each m_g to the fewest micro-batches
 * that hold the group's tokens, ceil(tokens / cap_g); INFINITY when s breaks a constraint
 * (overlapping used groups, a bucket not placed exactly, documents in an unused group or
 * over a group's cap). */
double bp_sp_eval(const struct bp_sp_problem *p, struct bp_sp_sol *s);

/* The warm start: LPT (documents by bucket, longest first, each to the group whose time
 * grows least, with the per-micro-batch cost; ties to the earlier group) over a few
 * partitions: every homogeneous one (one size over all units, a remainder of units idle),
 * then every "k groups of size S, the rest in groups of a smaller size" (a long document's
 * group beside short documents' ones), in this order; the best makespan wins, the first in
 * the order on ties. Partitions run in ascending order of a certified lower bound on their
 * makespan, those whose bound exceeds the best found are skipped and a run stops once it
 * is worse, which leaves the result of running all of them; p->max_runs (default
 * max(4, 65,536 / documents)) caps the runs, so that on large steps the search may stop
 * before proving its best (a partition it did not run could be better; sp_ilp.c
 * GREEDY_RUNS says where it cannot). Every group of the chosen partition is marked used,
 * empty or not. *size gets the size of its largest group, *obj its makespan. O(documents
 * log units) a run where groups of one size cost alike, O(documents x units) otherwise.
 * Returns 0, or BP_INFEASIBLE when a bucket fits no partition's groups. */
int bp_sp_greedy(const struct bp_sp_problem *p, struct bp_sp_sol *s, int *size, double *obj,
		 struct bp_error *err);

/* What the search did. */
struct bp_sp_result {
	char status[16];      /* "optimal", "feasible" (better than the greedy, not proven),
			       * "warm-start" (nothing better found, or no search asked for),
			       * "too-large" (more columns than ilp_max_vars: GLPK not run) */
	enum bp_ilp_limit limit; /* what ended an unproven search (NODES or WORK) */
	double greedy, objective, bound, gap; /* us; gap (objective - bound) / objective */
	int64_t cols, rows, nodes;
	double work;          /* ilp.h's work units spent */
};

/* Solves p from the warm start in s (bp_sp_greedy's); s gets the best solution, never
 * worse than the warm start under bp_sp_eval. The result depends only on the inputs and
 * o's deterministic budget; a search the wall-clock safety net ends is an error. o NULL:
 * no search, r describes the warm start ("optimal" where it meets the certified bound,
 * else "warm-start" with its gap to the bound). Returns 0 or -1. */
int bp_sp_solve(const struct bp_sp_problem *p, const struct bp_ilp_opts *o,
		struct bp_sp_sol *s, struct bp_sp_result *r, struct bp_error *err);

#endif
