/* ilp.c: the GLPK wrapper (ilp.h), the one file that includes glpk.h. Called by the packing
 * formulations in ilp_pack.c (fixed-ilp, wlb-ilp), Hydraulis's dispatch ILP (hyd_dispatch.c,
 * Eq. 3) and FlexSP's group MILP (sp_ilp.c).
 *
 * Invariants kept here:
 *   - GLPK never aborts the process: glp_error_hook longjmps back to bp_ilp_solve, which frees
 *     GLPK's whole environment (glp_free_env; GLPK's own memory goes with it) and returns -1
 *     with the message GLPK printed.
 *   - GLPK never writes to stdout: glp_term_hook is installed before the first GLPK call of
 *     every solve and keeps the last few lines for error messages; the environment is freed
 *     at the end of every solve, so no hook or GLPK state outlives it.
 *   - Every glp_simplex / glp_intopt return code and every solution status is mapped.
 *   - Only deterministic GLPK options: no proximity search or feasibility pump (both run on
 *     their own time limits). The node and work limits are counted in the callback from
 *     glp_ios_tree_size and glp_get_it_cnt, both functions of the inputs alone; the root
 *     relaxation's simplex gets it_lim = work_limit / nonzeros. The time limit is a safety
 *     net whose hits are reported as irreproducible (BP_ILP_LIMIT_TIME).
 *   - The result is never worse than the warm start. */
#include "ilp.h"

#include <glpk.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct col {
	enum bp_ilp_kind kind;
	double lo, hi, obj;
};

struct row {
	size_t n;
	int64_t *cols;
	double *vals;
	double lo, hi;
};

struct bp_ilp {
	struct col *cols;
	size_t ncols, capcols;
	struct row *rows;
	size_t nrows, caprows;
};

const char *bp_ilp_status_name(enum bp_ilp_status s)
{
	switch (s) {
	case BP_ILP_OPTIMAL: return "optimal";
	case BP_ILP_FEASIBLE: return "feasible";
	case BP_ILP_WARM_START: return "warm-start";
	case BP_ILP_NO_SOLUTION: return "no-solution";
	case BP_ILP_INFEASIBLE: return "infeasible";
	case BP_ILP_ERROR: return "error";
	}
	return "error";
}

void bp_ilp_opts_default(struct bp_ilp_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->time_limit_s = 300.0;
	o->rel_gap = 1e-4;
	o->node_limit = 2000;
	o->work_limit = BP_ILP_WORK_LIMIT_M * 1e6;
	o->max_vars = 10000;
}

void bp_ilp_result_release(struct bp_ilp_result *r)
{
	if (!r)
		return;
	free(r->x);
	r->x = NULL;
}

struct bp_ilp *bp_ilp_new(struct bp_error *err)
{
	return bp_calloc(1, sizeof(struct bp_ilp), err);
}

void bp_ilp_free(struct bp_ilp *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nrows; i++) {
		free(p->rows[i].cols);
		free(p->rows[i].vals);
	}
	free(p->rows);
	free(p->cols);
	free(p);
}

size_t bp_ilp_ncols(const struct bp_ilp *p)
{
	return p->ncols;
}

int64_t bp_ilp_add_col(struct bp_ilp *p, enum bp_ilp_kind kind, double lo, double hi,
		       double obj, struct bp_error *err)
{
	if (p->ncols >= (size_t)INT32_MAX - 1)
		return bp_errorf(err, "too many ilp columns");
	if (kind == BP_ILP_BINARY) {
		lo = 0.0;
		hi = 1.0;
	}
	if (isnan(lo) || isnan(hi) || isnan(obj) || lo > hi)
		return bp_errorf(err, "ilp column %zu has bounds [%g, %g]", p->ncols, lo, hi);
	if (p->ncols == p->capcols) {
		size_t nc = p->capcols ? 2 * p->capcols : 64;
		struct col *v = bp_realloc_array(p->cols, nc, sizeof(*v), err);
		if (!v)
			return -1;
		p->cols = v;
		p->capcols = nc;
	}
	p->cols[p->ncols] = (struct col){kind, lo, hi, obj};
	return (int64_t)p->ncols++;
}

int64_t bp_ilp_add_row(struct bp_ilp *p, size_t n, const int64_t *cols, const double *vals,
		       double lo, double hi, struct bp_error *err)
{
	if (p->nrows >= (size_t)INT32_MAX - 1)
		return bp_errorf(err, "too many ilp rows");
	if (isnan(lo) || isnan(hi) || lo > hi)
		return bp_errorf(err, "ilp row %zu has bounds [%g, %g]", p->nrows, lo, hi);
	if (p->nrows == p->caprows) {
		size_t nc = p->caprows ? 2 * p->caprows : 64;
		struct row *v = bp_realloc_array(p->rows, nc, sizeof(*v), err);
		if (!v)
			return -1;
		p->rows = v;
		p->caprows = nc;
	}
	struct row r = {n, NULL, NULL, lo, hi};
	r.cols = bp_calloc(n ? n : 1, sizeof(int64_t), err);
	r.vals = bp_calloc(n ? n : 1, sizeof(double), err);
	if (!r.cols || !r.vals) {
		free(r.cols);
		free(r.vals);
		return -1;
	}
	if (n) {
		memcpy(r.cols, cols, n * sizeof(int64_t));
		memcpy(r.vals, vals, n * sizeof(double));
	}
	p->rows[p->nrows] = r;
	return (int64_t)p->nrows++;
}

/* Everything the hooks and the callback share with bp_ilp_solve. */
struct run {
	jmp_buf jb;
	char term[512]; /* the tail of GLPK's terminal output */
	size_t nterm;
	const double *warm1; /* 1-based warm start, or NULL */
	int injected, accepted;
	int64_t node_limit, nodes;
	int64_t iters; /* simplex iterations, the root relaxation's included */
	double nnz, work_limit; /* work = (iters + BP_ILP_NODE_WORK * nodes) * nnz */
	int node_stop, work_stop;
	double bound; /* best proven bound seen in the tree */
};

/* Keeps the last bytes GLPK printed; returning nonzero suppresses its own output. */
static int term_hook(void *info, const char *s)
{
	struct run *r = info;
	size_t n = strlen(s), room = sizeof(r->term) - 1;
	if (n >= room) {
		memcpy(r->term, s + n - room, room);
		r->nterm = room;
	} else {
		if (r->nterm + n > room) {
			size_t drop = r->nterm + n - room;
			memmove(r->term, r->term + drop, r->nterm - drop);
			r->nterm -= drop;
		}
		memcpy(r->term + r->nterm, s, n);
		r->nterm += n;
	}
	r->term[r->nterm] = '\0';
	return 1;
}

static void error_hook(void *info)
{
	struct run *r = info;
	longjmp(r->jb, 1);
}

/* GLPK's message for the error: its first printed line after the last blank one, without the
 * "Error detected in file ..." trailer, lowercased at the start. */
static void glpk_message(const struct run *r, char *out, size_t n)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", r->term);
	char *err = strstr(buf, "Error detected in file");
	if (err)
		*err = '\0';
	size_t len = strlen(buf);
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' ' || buf[len - 1] == '.'))
		buf[--len] = '\0';
	char *start = strrchr(buf, '\n');
	start = start ? start + 1 : buf;
	snprintf(out, n, "%s", *start ? start : "unknown glpk error");
}

static void callback(glp_tree *T, void *info)
{
	struct run *r = info;
	int a_cnt, n_cnt, t_cnt;
	glp_ios_tree_size(T, &a_cnt, &n_cnt, &t_cnt);
	r->nodes = t_cnt;
	r->iters = glp_get_it_cnt(glp_ios_get_prob(T));
	int best = glp_ios_best_node(T);
	if (best) {
		double b = glp_ios_node_bound(T, best);
		if (b > r->bound)
			r->bound = b;
	}
	if (glp_ios_reason(T) == GLP_IHEUR && r->warm1 && !r->injected) {
		r->injected = 1;
		r->accepted = glp_ios_heur_sol(T, r->warm1) == 0;
	}
	if (r->node_stop || r->work_stop)
		return;
	if (r->node_limit > 0 && t_cnt >= r->node_limit) {
		r->node_stop = 1;
		glp_ios_terminate(T);
	} else if (r->work_limit > 0 &&
		   ((double)r->iters + BP_ILP_NODE_WORK * (double)t_cnt) * r->nnz >=
			   r->work_limit) {
		r->work_stop = 1;
		glp_ios_terminate(T);
	}
}

static const char *simplex_message(int rc)
{
	switch (rc) {
	case GLP_EBADB: return "the initial basis is invalid";
	case GLP_ESING: return "the basis matrix is singular";
	case GLP_ECOND: return "the basis matrix is ill-conditioned";
	case GLP_EBOUND: return "a double-bounded variable has incorrect bounds";
	case GLP_EFAIL: return "the simplex solver failed";
	case GLP_EOBJLL: return "the objective reached its lower limit";
	case GLP_EOBJUL: return "the objective reached its upper limit";
	case GLP_EITLIM: return "the simplex iteration limit was exceeded";
	case GLP_ETMLIM: return "the time limit ran out in the root relaxation";
	case GLP_ENOPFS: return "the relaxation has no primal feasible solution";
	case GLP_ENODFS: return "the relaxation has no dual feasible solution";
	default: return "the simplex solver returned an unknown code";
	}
}

static const char *intopt_message(int rc)
{
	switch (rc) {
	case 0: return "solved";
	case GLP_EBOUND: return "an integer or double-bounded variable has incorrect bounds";
	case GLP_EROOT: return "the root relaxation has no optimal basis";
	case GLP_ENOPFS: return "the relaxation has no primal feasible solution";
	case GLP_ENODFS: return "the relaxation has no dual feasible solution";
	case GLP_EFAIL: return "the branch-and-bound search failed";
	case GLP_EMIPGAP: return "the relative gap tolerance was reached";
	case GLP_ETMLIM: return "the time limit ran out";
	case GLP_ESTOP: return "the search was stopped at the node limit";
	default: return "the branch-and-bound solver returned an unknown code";
	}
}

static const char *mip_status_name(int s)
{
	switch (s) {
	case GLP_OPT: return "optimal";
	case GLP_FEAS: return "feasible";
	case GLP_NOFEAS: return "no feasible solution";
	case GLP_UNDEF: return "undefined";
	default: return "unknown status";
	}
}

/* Objective of x, and whether x satisfies every bound, row and integrality (tolerance scaled
 * by the row's magnitude). Returns the index of the first violated row + 1, or -(column + 1)
 * for a column, or 0. */
static int64_t check_point(const struct bp_ilp *p, const double *x, double *obj)
{
	double o = 0.0;
	for (size_t j = 0; j < p->ncols; j++) {
		const struct col *c = &p->cols[j];
		if (x[j] < c->lo - 1e-9 || x[j] > c->hi + 1e-9 ||
		    (c->kind != BP_ILP_CONTINUOUS && x[j] != floor(x[j])))
			return -(int64_t)j - 1;
		o += c->obj * x[j];
	}
	for (size_t i = 0; i < p->nrows; i++) {
		const struct row *r = &p->rows[i];
		double act = 0.0, mag = 1.0;
		for (size_t k = 0; k < r->n; k++) {
			if (r->cols[k] < 0 || (size_t)r->cols[k] >= p->ncols)
				return (int64_t)i + 1;
			act += r->vals[k] * x[r->cols[k]];
			mag += fabs(r->vals[k] * x[r->cols[k]]);
		}
		if (act < r->lo - 1e-9 * mag || act > r->hi + 1e-9 * mag)
			return (int64_t)i + 1;
	}
	*obj = o;
	return 0;
}

static int bound_type(double lo, double hi)
{
	if (isinf(lo) && isinf(hi))
		return GLP_FR;
	if (isinf(hi))
		return GLP_LO;
	if (isinf(lo))
		return GLP_UP;
	return lo == hi ? GLP_FX : GLP_DB;
}

static int time_ms(double s)
{
	if (s <= 0)
		return INT32_MAX;
	double ms = ceil(s * 1e3);
	return ms > INT32_MAX ? INT32_MAX : ms < 1 ? 1 : (int)ms;
}

/* Builds the GLPK problem; GLPK reports bad indices through the error hook. */
static glp_prob *build(const struct bp_ilp *p, int *ind, double *val)
{
	glp_prob *lp = glp_create_prob();
	glp_set_obj_dir(lp, GLP_MIN);
	if (p->ncols)
		glp_add_cols(lp, (int)p->ncols);
	if (p->nrows)
		glp_add_rows(lp, (int)p->nrows);
	for (size_t j = 0; j < p->ncols; j++) {
		const struct col *c = &p->cols[j];
		int jj = (int)j + 1;
		if (c->kind == BP_ILP_BINARY) {
			glp_set_col_kind(lp, jj, GLP_BV);
		} else {
			glp_set_col_kind(lp, jj, c->kind == BP_ILP_INTEGER ? GLP_IV : GLP_CV);
			glp_set_col_bnds(lp, jj, bound_type(c->lo, c->hi), c->lo, c->hi);
		}
		glp_set_obj_coef(lp, jj, c->obj);
	}
	for (size_t i = 0; i < p->nrows; i++) {
		const struct row *r = &p->rows[i];
		int ii = (int)i + 1;
		for (size_t k = 0; k < r->n; k++) {
			/* Out-of-range indices go to GLPK as 0 or beyond ncols: it rejects them. */
			int64_t c = r->cols[k];
			ind[k + 1] = c < 0 || c >= INT32_MAX ? 0 : (int)c + 1;
			val[k + 1] = r->vals[k];
		}
		glp_set_row_bnds(lp, ii, bound_type(r->lo, r->hi), r->lo, r->hi);
		glp_set_mat_row(lp, ii, (int)r->n, ind, val);
	}
	return lp;
}

/* The result before the search: an error until a step says otherwise. */
static void result_init(const struct bp_ilp *p, struct bp_ilp_result *r)
{
	memset(r, 0, sizeof(*r));
	r->status = BP_ILP_ERROR;
	r->objective = INFINITY;
	r->bound = -INFINITY;
	r->gap = INFINITY;
	r->ncols = p->ncols;
}

/* A proven infeasible problem: no point to report. */
static void result_infeasible(struct bp_ilp_result *r)
{
	r->status = BP_ILP_INFEASIBLE;
	free(r->x);
	r->x = NULL;
}

/* Checks the problem and its warm start, and sizes the run's work unit (the nonzeros, at
 * least 1) and the longest row (its column buffers, 1-based). */
static int prepare_run(const struct bp_ilp *p, const struct bp_ilp_opts *o, struct run *run,
		       double *warm_obj, size_t *maxrow, struct bp_error *err)
{
	run->bound = -INFINITY;
	run->node_limit = o->node_limit;
	if (!p->ncols)
		return bp_errorf(err, "ilp has no columns");
	if (o->warm) {
		int64_t bad = check_point(p, o->warm, warm_obj);
		if (bad > 0)
			return bp_errorf(err, "warm start violates ilp row %lld", (long long)bad - 1);
		if (bad < 0)
			return bp_errorf(err, "warm start violates ilp column %lld",
					 (long long)-bad - 1);
	}
	*maxrow = 1;
	for (size_t i = 0; i < p->nrows; i++) {
		if (p->rows[i].n + 1 > *maxrow)
			*maxrow = p->rows[i].n + 1;
		run->nnz += (double)p->rows[i].n;
	}
	if (run->nnz < 1.0)
		run->nnz = 1.0;
	run->work_limit = o->work_limit;
	return 0;
}

/* Without the MIP presolver glp_intopt needs an optimal root relaxation: solves it within the
 * root's share of the budgets. Returns 0 (go on, r->limit set when a budget ended it), 1
 * (infeasible) or -1. */
static int solve_root(glp_prob *lp, const struct bp_ilp_opts *o, struct run *run,
		      struct bp_ilp_result *r, struct bp_error *err)
{
	glp_smcp smcp;
	glp_init_smcp(&smcp);
	smcp.msg_lev = GLP_MSG_OFF;
	smcp.presolve = o->presolve ? GLP_ON : GLP_OFF;
	smcp.tm_lim = time_ms(o->time_limit_s);
	if (o->work_limit > 0) { /* the root's share of the work budget, at least 1 */
		double it = floor(o->work_limit / run->nnz);
		smcp.it_lim = it < 1 ? 1 : it > INT32_MAX ? INT32_MAX : (int)it;
	}
	if (o->presolve)
		return 0;
	glp_scale_prob(lp, GLP_SF_AUTO);
	glp_adv_basis(lp, 0);
	int simplex_rc = glp_simplex(lp, &smcp);
	int st = glp_get_status(lp);
	if (simplex_rc == GLP_ETMLIM) {
		r->limit = BP_ILP_LIMIT_TIME;
	} else if (simplex_rc == GLP_EITLIM) {
		r->limit = BP_ILP_LIMIT_WORK; /* the budget ends before the root is solved */
	} else if (simplex_rc == 0 && (st == GLP_NOFEAS || st == GLP_INFEAS)) {
		return 1;
	} else if (simplex_rc != 0 || st != GLP_OPT) {
		return bp_errorf(err, "glpk root relaxation failed: %s (status %d)",
				 simplex_message(simplex_rc), st);
	} else {
		run->bound = glp_get_obj_val(lp);
	}
	return 0;
}

/* Branch and bound within what is left of the time budget (from t0); its return code, and
 * the solution status in *mip_st. */
static int search(glp_prob *lp, const struct bp_ilp_opts *o, struct run *run, double t0,
		  int *mip_st)
{
	glp_iocp iocp;
	glp_init_iocp(&iocp);
	iocp.msg_lev = GLP_MSG_OFF;
	iocp.presolve = o->presolve ? GLP_ON : GLP_OFF;
	iocp.mip_gap = o->rel_gap;
	iocp.br_tech = GLP_BR_DTH;
	iocp.bt_tech = GLP_BT_BLB;
	iocp.mir_cuts = iocp.cov_cuts = iocp.clq_cuts = o->cuts ? GLP_ON : GLP_OFF;
	iocp.gmi_cuts = GLP_OFF;
	iocp.fp_heur = iocp.ps_heur = GLP_OFF;
	iocp.sr_heur = GLP_ON;
	iocp.cb_func = callback;
	iocp.cb_info = run;
	if (o->time_limit_s > 0) {
		double left = o->time_limit_s * 1e3 - glp_difftime(glp_time(), t0) * 1e3;
		iocp.tm_lim = left < 1 ? 1 : left > INT32_MAX ? INT32_MAX : (int)ceil(left);
	}
	int rc = glp_intopt(lp, &iocp);
	*mip_st = glp_mip_status(lp);
	return rc;
}

/* What the search's return code says: 0 (a point may follow; *proven when optimal within the
 * gap, r->limit the budget that ended it), 1 (infeasible) or -1. */
static int search_outcome(int mip_rc, int mip_st, const struct run *run,
			  struct bp_ilp_result *r, int *proven, struct bp_error *err)
{
	*proven = 0;
	switch (mip_rc) {
	case 0:
		if (mip_st == GLP_NOFEAS)
			return 1;
		*proven = mip_st == GLP_OPT;
		if (!*proven)
			return bp_errorf(err, "glpk finished the search with solution status '%s'",
					 mip_status_name(mip_st));
		return 0;
	case GLP_EMIPGAP:
		*proven = 1; /* optimal within the relative gap */
		return 0;
	case GLP_ETMLIM:
		r->limit = BP_ILP_LIMIT_TIME;
		return 0;
	case GLP_ESTOP: /* our callback, or the root relaxation's limit above */
		if (r->limit == BP_ILP_LIMIT_NONE)
			r->limit = run->node_stop   ? BP_ILP_LIMIT_NODES
				   : run->work_stop ? BP_ILP_LIMIT_WORK
						    : BP_ILP_LIMIT_TIME;
		return 0;
	case GLP_ENOPFS:
		return 1;
	default:
		return bp_errorf(err, "glpk branch-and-bound failed: %s (code %d, solution status "
				 "'%s')", intopt_message(mip_rc), mip_rc, mip_status_name(mip_st));
	}
}

/* How the search ended: glp_intopt's return code and solution status, whether it proved
 * optimality (within the gap), the best bound seen, and the warm start's objective. */
struct outcome {
	int mip_rc, mip_st, proven;
	double bound, warm_obj;
};

/* The point found (rounded, kept only if still feasible) or the warm start when no worse,
 * its objective, bound and gap. */
static void take_point(glp_prob *lp, const struct bp_ilp *p, const struct bp_ilp_opts *o,
		       const struct outcome *oc, struct bp_ilp_result *r)
{
	const int mip_rc = oc->mip_rc, proven = oc->proven;
	const double warm_obj = oc->warm_obj;
	int have = oc->mip_st == GLP_OPT || oc->mip_st == GLP_FEAS;
	double obj = INFINITY;
	if (have) {
		for (size_t j = 0; j < p->ncols; j++) {
			double v = glp_mip_col_val(lp, (int)j + 1);
			r->x[j] = p->cols[j].kind == BP_ILP_CONTINUOUS ? v : (double)lround(v);
		}
		/* Rounded values must still be feasible; otherwise the solution is dropped. */
		if (check_point(p, r->x, &obj) != 0)
			have = 0;
	}
	if (o->warm && (!have || warm_obj <= obj)) {
		/* Never worse than the warm start (a tie keeps the warm start's exact values). */
		memcpy(r->x, o->warm, p->ncols * sizeof(double));
		obj = warm_obj;
		have = 1;
		r->status = BP_ILP_WARM_START;
	} else if (have) {
		r->status = BP_ILP_FEASIBLE;
	} else {
		r->status = BP_ILP_NO_SOLUTION;
		free(r->x);
		r->x = NULL;
	}
	r->objective = obj;
	r->bound = oc->bound;
	if (proven && have) {
		r->status = BP_ILP_OPTIMAL;
		if (mip_rc == 0 || r->bound > obj)
			r->bound = obj;
	}
	if (r->bound > obj)
		r->bound = obj;
	if (have) {
		double denom = fabs(obj) > 1e-300 ? fabs(obj) : 1.0;
		r->gap = isinf(r->bound) ? INFINITY : (obj - r->bound) / denom;
	}
}

/* The warning naming the budget that ended the search, if one did. */
static void limit_warning(const struct bp_ilp_opts *o, struct bp_ilp_result *r)
{
	if (r->limit == BP_ILP_LIMIT_NODES)
		snprintf(r->warning, sizeof(r->warning),
			 "node limit %lld reached, solution %s, gap %.3g%%", (long long)o->node_limit,
			 bp_ilp_status_name(r->status), 100.0 * r->gap);
	else if (r->limit == BP_ILP_LIMIT_WORK)
		snprintf(r->warning, sizeof(r->warning),
			 "work limit %.3g reached after %lld nodes and %lld simplex iterations, "
			 "solution %s, gap %.3g%%", o->work_limit, (long long)r->nodes,
			 (long long)r->iterations, bp_ilp_status_name(r->status), 100.0 * r->gap);
	else if (r->limit == BP_ILP_LIMIT_TIME)
		snprintf(r->warning, sizeof(r->warning),
			 "time limit %gs reached after %lld nodes, solution %s, gap %.3g%%; the "
			 "result may differ between runs", o->time_limit_s, (long long)r->nodes,
			 bp_ilp_status_name(r->status), 100.0 * r->gap);
}

int bp_ilp_solve(const struct bp_ilp *p, const struct bp_ilp_opts *o, struct bp_ilp_result *r,
		 struct bp_error *err)
{
	struct run run;
	glp_prob *volatile lp = NULL;
	int *volatile ind = NULL;
	double *volatile val = NULL;
	double *volatile warm1 = NULL;
	volatile int rc = -1;
	double warm_obj = INFINITY;
	size_t maxrow = 1;
	memset(&run, 0, sizeof(run));
	result_init(p, r);
	if (prepare_run(p, o, &run, &warm_obj, &maxrow, err) < 0)
		return -1;
	ind = bp_calloc(maxrow, sizeof(int), err);
	val = bp_calloc(maxrow, sizeof(double), err);
	r->x = bp_calloc(p->ncols, sizeof(double), err);
	if (o->warm)
		warm1 = bp_calloc(p->ncols + 1, sizeof(double), err);
	if (!ind || !val || !r->x || (o->warm && !warm1))
		goto out;
	if (warm1 && !o->presolve) {
		memcpy(warm1 + 1, o->warm, p->ncols * sizeof(double));
		run.warm1 = warm1;
	}

	glp_term_hook(term_hook, &run);
	glp_error_hook(error_hook, &run);
	if (setjmp(run.jb)) {
		/* GLPK called glp_error: its environment (lp included) is unusable. */
		char msg[200];
		glpk_message(&run, msg, sizeof(msg));
		glp_free_env();
		lp = NULL;
		bp_errorf(err, "glpk failed: %s", msg);
		goto out;
	}
	lp = build(p, ind, val);
	double t0 = glp_time();
	int done = solve_root(lp, o, &run, r, err);
	if (done) {
		if (done > 0) {
			result_infeasible(r);
			rc = 0;
		}
		goto out;
	}
	int mip_rc = GLP_ESTOP, mip_st = GLP_UNDEF, proven;
	if (r->limit == BP_ILP_LIMIT_NONE)
		mip_rc = search(lp, o, &run, t0, &mip_st);
	r->nodes = run.nodes;
	r->iterations = glp_get_it_cnt(lp);
	r->work = ((double)r->iterations + BP_ILP_NODE_WORK * (double)r->nodes) * run.nnz;
	r->warm_injected = run.accepted;
	done = search_outcome(mip_rc, mip_st, &run, r, &proven, err);
	if (done) {
		if (done > 0) {
			result_infeasible(r);
			rc = 0;
		}
		goto out;
	}
	struct outcome oc = {mip_rc, mip_st, proven, run.bound, warm_obj};
	take_point(lp, p, o, &oc, r);
	limit_warning(o, r);
	rc = 0;
out:
	if (lp)
		glp_delete_prob(lp);
	glp_free_env(); /* drops the hooks with everything else */
	free(ind);
	free(val);
	free(warm1);
	if (rc < 0) {
		r->status = BP_ILP_ERROR;
		free(r->x);
		r->x = NULL;
	}
	return rc;
}
