/* ilp.h: a small mixed-integer programming interface over GLPK. planner/blocks/ilp.c is the only
 * file that includes glpk.h (planner/README.md "Files"); the packing formulations of
 * WLB-LLM Eq. 1 and Eq. 2 (ilp_pack.c) are built on it.
 *
 * A problem is a list of columns (kind, bounds, objective coefficient) and sparse rows
 * (lo <= sum a_j x_j <= hi), always minimised. Solving never aborts the process and never
 * writes to stdout: GLPK's error hook longjmps back and its terminal output is captured.
 * The budget is deterministic (the content of a plan never depends on how busy the machine
 * was): a node limit, and a work limit that scales with the problem,
 * work = (simplex iterations + BP_ILP_NODE_WORK x branch-and-bound nodes) x constraint
 * nonzeros, both counted in the branch-and-bound callback; the root relaxation gets the
 * simplex iteration limit work_limit / nonzeros. The wall-clock time limit is a safety net: a solve it ends may
 * differ run to run, and the result says so (limit BP_ILP_LIMIT_TIME); callers that write
 * plans turn that into an error (ilp_pack.c). A warm start (a full integer-feasible column
 * vector) is injected once as the first incumbent, and the result is never worse than it. */
#ifndef BP_ILP_H
#define BP_ILP_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"

enum bp_ilp_kind { BP_ILP_CONTINUOUS, BP_ILP_INTEGER, BP_ILP_BINARY };

enum bp_ilp_status {
	BP_ILP_OPTIMAL,    /* proven optimal within the relative gap */
	BP_ILP_FEASIBLE,   /* a limit ended the search; the incumbent beats the warm start */
	BP_ILP_WARM_START, /* a limit ended the search; nothing beat the warm start */
	BP_ILP_NO_SOLUTION, /* a limit ended the search before any solution, no warm start */
	BP_ILP_INFEASIBLE, /* proven infeasible */
	BP_ILP_ERROR,
};

/* What ended the search before it proved optimality. NODES and WORK are deterministic. */
enum bp_ilp_limit { BP_ILP_LIMIT_NONE, BP_ILP_LIMIT_NODES, BP_ILP_LIMIT_WORK,
		    BP_ILP_LIMIT_TIME };

/* "optimal", "feasible", "warm-start", "no-solution", "infeasible", "error"; static. */
const char *bp_ilp_status_name(enum bp_ilp_status s);

struct bp_ilp_opts {
	double time_limit_s; /* wall-clock safety net; <= 0: none */
	double rel_gap;      /* stop when (incumbent - bound) / |incumbent| <= rel_gap */
	int64_t node_limit;  /* branch-and-bound nodes; <= 0: none. Deterministic */
	/* (simplex iterations + BP_ILP_NODE_WORK x nodes) x nonzeros of the constraint matrix;
	 * <= 0: none. Deterministic, and close to proportional to the solve's time (on the
	 * packing ILP 2-5 ns a unit, mostly 3, on one x86 core; tools/bench/REPRODUCING.md "ILP
	 * methods"), so a larger problem gets fewer nodes for the same time. */
	double work_limit;
	int presolve;        /* GLPK's MIP presolver; a warm start is then not injected */
	int cuts;            /* GLPK's MIR, cover and clique cuts */
	/* Packing problems with more binaries (documents x micro-batches) are not given to
	 * GLPK at all (bp_ilp_pack_step keeps the greedy): past this size the node budget
	 * takes longer than the time limit, which would make plans depend on machine speed.
	 * <= 0: no limit. Read by ilp_pack.c, not by bp_ilp_solve. */
	int64_t max_vars;
	/* A warm start: one value per column, integer-feasible for every row (checked), or
	 * NULL. Borrowed for the call. */
	const double *warm;
};

/* The defaults the methods use (ilp_time_limit_s 300, a safety net far from what a search
 * within its work budget takes even under sanitizers on a loaded machine, ilp_gap 1e-4, node limit 2000, work
 * limit BP_ILP_WORK_LIMIT_M million, no presolve, no cuts, no warm start, ilp_max_vars
 * 10000). */
#define BP_ILP_WORK_LIMIT_M 100
/* A branch-and-bound node costs GLPK about as much as this many simplex iterations (node
 * set-up, basis factorisation, rounding heuristic; a least-squares fit over the shipped
 * datasets at 7B-128K). */
#define BP_ILP_NODE_WORK 32.0
void bp_ilp_opts_default(struct bp_ilp_opts *o);

struct bp_ilp_result {
	enum bp_ilp_status status;
	enum bp_ilp_limit limit;
	double objective; /* of x; +inf without a solution */
	double bound;     /* proven lower bound on the optimum; -inf when none */
	double gap;       /* (objective - bound) / |objective|, 0 when optimal, inf if unknown */
	int64_t nodes;    /* branch-and-bound nodes created */
	int64_t iterations; /* simplex iterations, root relaxation included */
	double work;      /* as work_limit counts it */
	int warm_injected; /* the warm start reached GLPK's tree and was accepted */
	double *x;        /* ncols values (integers rounded with lround); owned, NULL without a
			   * solution; freed by bp_ilp_result_release */
	size_t ncols;
	/* Non-empty when the caller should warn (a limit was hit). No trailing period. */
	char warning[256];
};

void bp_ilp_result_release(struct bp_ilp_result *r);

/* A problem under construction. bp_ilp_new returns one the caller frees with bp_ilp_free
 * (NULL is a no-op); NULL on allocation failure. */
struct bp_ilp;
struct bp_ilp *bp_ilp_new(struct bp_error *err);
void bp_ilp_free(struct bp_ilp *p);

/* Adds a column; returns its index (0, 1, ...) or -1. lo/hi may be -INFINITY/INFINITY. A
 * binary column ignores lo/hi (0 and 1). */
int64_t bp_ilp_add_col(struct bp_ilp *p, enum bp_ilp_kind kind, double lo, double hi,
		       double obj, struct bp_error *err);
/* Adds a row lo <= sum vals[k] x[cols[k]] <= hi (copied); returns its index or -1. Column
 * indices are not checked here: GLPK rejects bad ones when solving (an error, not an
 * abort). */
int64_t bp_ilp_add_row(struct bp_ilp *p, size_t n, const int64_t *cols, const double *vals,
		       double lo, double hi, struct bp_error *err);
size_t bp_ilp_ncols(const struct bp_ilp *p);

/* Solves p. Returns 0 with r filled (any status but BP_ILP_ERROR), or -1 with err naming
 * what GLPK said (r->status is then BP_ILP_ERROR); either way release r afterwards. GLPK's
 * environment is freed before returning, so no GLPK state outlives the call. Not
 * reentrant across threads sharing one GLPK environment. */
int bp_ilp_solve(const struct bp_ilp *p, const struct bp_ilp_opts *o, struct bp_ilp_result *r,
		 struct bp_error *err);

#endif
