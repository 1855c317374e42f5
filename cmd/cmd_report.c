/* cmd_report.c: `balplan report PLAN TRACE`: how a replay's measured times (balexec's
 * balplan.trace/v1) compare with what the plan predicted, at the trace's time scale; the
 * profile-correction loop (--refit, fitting in planner/solve/refit.c); and
 * the trace in the Chrome trace event format (--chrome) so Perfetto shows it.
 *
 * The trace must be of this plan: its plan_sha256 is the sha256 of the plan file's bytes, its
 * cluster and world are the plan's, its steps are plan steps, its ranks hold the Megatron role
 * of their number and as many micro-batches as their pipeline. Output order is the trace's
 * (steps, ranks, micro-batches), the worst-operations list breaks ties by step, rank,
 * micro-batch, forward first, so the text is stable for golden tests. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmdutil.h"
#include "validate.h"
#include "commands.h"
#include "jsonutil.h"
#include "refit.h"
#include "solve.h"
#include "strbuf.h"
#include "trace.h"

/* bp_sb_fill's writer: cmd_plan_layout, whole however long. */
static void fill_plan_layout(const void *p, char *buf, size_t n)
{
	cmd_plan_layout(p, buf, n);
}

static void report_usage(FILE *f)
{
	fprintf(f, "usage: balplan report [--top N] [--refit FILE] [--profile FILE]\n"
		   "                      [--chrome FILE] PLAN TRACE\n\n"
		   "Compares what balexec measured (TRACE, balplan.trace/v1) with what PLAN\n"
		   "predicted, the prediction multiplied by the trace's time scale: step by step,\n"
		   "the median, p95 and max relative error of steps and of micro-batch forward and\n"
		   "backward operations (every rank's), and the operations furthest off.\n\n"
		   "  --top N          operations to list [5; 0: none]\n"
		   "  --refit FILE     fit measured / time scale ~ alpha * attention + beta *\n"
		   "                   linear + collectives over every operation (weighted least\n"
		   "                   squares) and write the profile with its attention tables\n"
		   "                   x alpha and linear tables x beta (kind measured, name\n"
		   "                   refit-...; collective tables unchanged, fits recomputed)\n"
		   "  --profile FILE   for --refit: the profile the plan was made with (its sha256\n"
		   "                   must match); by default the analytic profile the plan names\n"
		   "                   is regenerated\n"
		   "  --chrome FILE    write the trace in the Chrome trace event format, steps end\n"
		   "                   to end (Perfetto, chrome://tracing)\n\n"
		   "With '-' for --refit or --chrome that JSON alone goes to standard output, and\n"
		   "the refit summary to standard error.\n\n"
		   "exit status: 0 ok, 1 data or runtime error, 2 usage error\n");
}

/* One micro-batch operation of the trace. */
struct op {
	size_t step;   /* position in the trace */
	int rank;
	size_t mb;
	int bwd;
	int stage;
	double measured, predicted, after; /* us; predicted and after x time scale */
};

struct stats {
	size_t n;
	double median, p95, max;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Relative error; 0 when undefined (predicted <= 0): such entries are left out of stats. */
static double rel_err(double measured, double predicted)
{
	return predicted > 0 ? (measured - predicted) / predicted : 0.0;
}

/* Median, p95 (nearest rank, as the plan summary's) and max of |rel error| over the pairs
 * with a positive prediction. v is scratch of n entries. */
static struct stats err_stats(const double *meas, const double *pred, size_t n, double *v)
{
	struct stats s = {0, 0, 0, 0};
	for (size_t i = 0; i < n; i++)
		if (pred[i] > 0)
			v[s.n++] = fabs(rel_err(meas[i], pred[i]));
	if (!s.n)
		return s;
	qsort(v, s.n, sizeof(*v), cmp_double);
	size_t k50 = (size_t)ceil(0.5 * s.n), k95 = (size_t)ceil(0.95 * s.n);
	s.median = v[(k50 ? k50 : 1) - 1];
	s.p95 = v[(k95 ? k95 : 1) - 1];
	s.max = v[s.n - 1];
	return s;
}

static int cmp_worst(const void *a, const void *b)
{
	const struct op *x = *(const struct op *const *)a, *y = *(const struct op *const *)b;
	double ex = fabs(rel_err(x->measured, x->predicted));
	double ey = fabs(rel_err(y->measured, y->predicted));
	if (ex != ey)
		return ex < ey ? 1 : -1;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->mb != y->mb)
		return x->mb < y->mb ? -1 : 1;
	return x->bwd - y->bwd;
}

/* Reads plan and trace; sha gets the sha256 of the plan file's bytes. */
static int load_inputs(const char *plan_path, const char *trace_path, struct bp_plan *plan,
		       struct bp_trace *tr, char sha[65])
{
	struct bp_error err;
	char *buf = NULL;
	size_t len = 0;
	if (cmd_read_file(plan_path, &buf, &len, &err) < 0)
		return cmd_error("cannot read plan '%s': %s", plan_path, err.text);
	bp_sha256_hex(buf, len, sha);
	int rc = bp_plan_parse(plan, buf, len, &err);
	free(buf);
	buf = NULL;
	if (rc < 0)
		return cmd_error("cannot read plan '%s': %s", plan_path, err.text);
	if (bp_plan_validate(plan, NULL, &err) < 0)
		return cmd_error("invalid plan '%s': %s", plan_path, err.text);
	if (cmd_read_file(trace_path, &buf, &len, &err) < 0)
		return cmd_error("cannot read trace '%s': %s", trace_path, err.text);
	rc = bp_trace_parse(tr, buf, len, &err); /* step order checked before the tree is built */
	free(buf);
	if (rc < 0)
		return cmd_error("cannot read trace '%s': %s", trace_path, err.text);
	return EXIT_OK;
}

static const struct bp_step *find_step(const struct bp_plan *p, int64_t index)
{
	for (size_t i = 0; i < p->nsteps; i++)
		if (p->steps[i].index == index)
			return &p->steps[i];
	return NULL;
}

/* Measured times that cannot belong to one step (issue 27 item 9): a rank slower than its
 * step (the slowest rank's), a pipeline end after the rank's step end, an operation ending
 * after the rank's pipeline end, a backward starting before its forward. The tolerance,
 * 1 us plus 1% of the step, is far above the trace's 1e-3 us rounding and clock noise.
 * Writes what is wrong into buf and returns 1, else 0. */
static int implausible_times(const struct bp_trace_step *s, const struct bp_trace_rank *k,
			     char *buf, size_t n)
{
	double tol = 1.0 + 0.01 * s->step_us;
	if (k->step_us > s->step_us + tol) {
		snprintf(buf, n, "its step_us %.3f is over the step's %.3f (the slowest rank's)",
			 k->step_us, s->step_us);
		return 1;
	}
	if (k->pipeline_us > k->step_us + tol) {
		snprintf(buf, n, "its pipeline_us %.3f is after its step_us %.3f", k->pipeline_us,
			 k->step_us);
		return 1;
	}
	for (size_t j = 0; j < k->nmbs; j++) {
		const struct bp_trace_mb *m = &k->mbs[j];
		for (int b = 0; b < 2; b++) {
			double end = b ? m->bwd_start_us + m->bwd_us : m->fwd_start_us + m->fwd_us;
			if (end > k->pipeline_us + tol) {
				snprintf(buf, n, "micro-batch %zu's %s ends at %.3f us, after the "
					 "rank's pipeline_us %.3f", j, b ? "backward" : "forward",
					 end, k->pipeline_us);
				return 1;
			}
		}
		if (m->bwd_start_us + tol < m->fwd_start_us) {
			snprintf(buf, n, "micro-batch %zu's backward starts at %.3f us, before its "
				 "forward at %.3f us", j, m->bwd_start_us, m->fwd_start_us);
			return 1;
		}
	}
	return 0;
}

/* The checks that the trace is a replay of this plan. steps gets, per trace step, the plan
 * step it measured. */
static int check_match(const struct bp_plan *p, const struct bp_trace *t, const char *sha,
		       const char *pp_, const char *tp_, const struct bp_step **steps)
{
	const struct bp_cluster *c = &p->cluster;
	if (strcmp(t->plan_sha, sha))
		return cmd_error("trace '%s' is not a replay of plan '%s': its plan_sha256 is "
				 "%.12s..., the plan file's sha256 is %.12s...", tp_, pp_,
				 t->plan_sha, sha);
	if (strcmp(t->method, p->method))
		return cmd_error("trace '%s' is of method '%s', plan '%s' of method '%s'", tp_,
				 t->method, pp_, p->method);
	if (t->world != c->gpus)
		return cmd_error("trace '%s' has world %d, plan '%s' %d GPUs", tp_, t->world, pp_,
				 c->gpus);
	if (!t->nsteps)
		return cmd_error("trace '%s' has no steps: there is nothing to compare with plan "
				 "'%s'", tp_, pp_);
	for (size_t i = 0; i < t->nsteps; i++) {
		const struct bp_trace_step *s = &t->steps[i];
		steps[i] = find_step(p, s->index);
		if (!steps[i])
			return cmd_error("trace '%s' step %lld is not a step of plan '%s' (%zu steps)",
					 tp_, (long long)s->index, pp_, p->nsteps);
		for (size_t r = 0; r < s->nranks; r++) {
			const struct bp_trace_rank *k = &s->ranks[r];
			struct bp_place want = bp_layout_place(bp_plan_layout(p, steps[i]), k->rank);
			if (k->layout != steps[i]->layout || want.pipe != k->pipe ||
			    want.stage != k->stage || want.cp_i != k->cp_i || want.tp_i != k->tp_i)
				return cmd_error("trace '%s' step %lld: rank %d has the role (layout %d "
						 "pipeline %d stage %d cp %d tp %d), plan '%s' gives "
						 "it (layout %d pipeline %d stage %d cp %d tp %d)",
						 tp_, (long long)s->index, k->rank, k->layout,
						 k->pipe, k->stage, k->cp_i, k->tp_i, pp_,
						 steps[i]->layout, want.pipe, want.stage, want.cp_i,
						 want.tp_i);
			size_t want_mbs = k->pipe >= 0 ? steps[i]->pipes[k->pipe].nmbs : 0;
			if (k->nmbs != want_mbs)
				return cmd_error("trace '%s' step %lld: rank %d has %zu micro-batches, "
						 "pipeline %d of plan '%s' has %zu", tp_,
						 (long long)s->index, k->rank, k->nmbs, k->pipe, pp_,
						 want_mbs);
			char why[256];
			if (implausible_times(s, k, why, sizeof(why)))
				return cmd_error("trace '%s' step %lld: rank %d: %s", tp_,
						 (long long)s->index, k->rank, why);
		}
	}
	return EXIT_OK;
}

/* The Chrome trace event format (the JSON object form): metadata naming each pipeline (pid)
 * and rank (tid), then per step, rank and micro-batch a complete event per forward and
 * backward and one per gradient sync, steps laid end to end by their measured step_us. */
static json_t *chrome_json(const struct bp_plan *p, const struct bp_trace *t,
			   const struct bp_step *const *steps)
{
	int ok = 1;
	json_t *root = json_object(), *ev = json_array(), *other = json_object();
	double scale = t->time_scale;
	/* Processes are pipelines (the most any layout has); threads are ranks, named by their
	 * role in the first replayed step's layout. */
	const struct bp_layout *l0 = t->nsteps ? bp_plan_layout(p, steps[0]) : &p->layouts[0];
	size_t npipes = 0;
	for (size_t i = 0; i < p->nlayouts; i++)
		if (p->layouts[i].npipes > npipes)
			npipes = p->layouts[i].npipes;
	for (int k = 0; k < (int)npipes; k++) {
		char name[32];
		json_t *e = json_object(), *a = json_object();
		snprintf(name, sizeof(name), "pipeline %d", k);
		bp_json_set(a, "name", json_string(name), &ok);
		bp_json_set(e, "name", json_string("process_name"), &ok);
		bp_json_set(e, "ph", json_string("M"), &ok);
		bp_json_set(e, "pid", json_integer(k), &ok);
		bp_json_set(e, "args", a, &ok);
		bp_json_append(ev, e, &ok);
		e = json_object();
		a = json_object();
		bp_json_set(a, "sort_index", json_integer(k), &ok);
		bp_json_set(e, "name", json_string("process_sort_index"), &ok);
		bp_json_set(e, "ph", json_string("M"), &ok);
		bp_json_set(e, "pid", json_integer(k), &ok);
		bp_json_set(e, "args", a, &ok);
		bp_json_append(ev, e, &ok);
	}
	for (int r = 0; r < t->world; r++) {
		struct bp_place pl = bp_layout_place(l0, r);
		int dp_i = pl.pipe >= 0 ? pl.pipe : (int)npipes;
		char name[96];
		snprintf(name, sizeof(name), "rank %d (pp %d, tp %d, cp %d)", r, pl.stage, pl.tp_i,
			 pl.cp_i);
		json_t *e = json_object(), *a = json_object();
		bp_json_set(a, "name", json_string(name), &ok);
		bp_json_set(e, "name", json_string("thread_name"), &ok);
		bp_json_set(e, "ph", json_string("M"), &ok);
		bp_json_set(e, "pid", json_integer(dp_i), &ok);
		bp_json_set(e, "tid", json_integer(r), &ok);
		bp_json_set(e, "args", a, &ok);
		bp_json_append(ev, e, &ok);
		e = json_object();
		a = json_object();
		bp_json_set(a, "sort_index", json_integer(r), &ok);
		bp_json_set(e, "name", json_string("thread_sort_index"), &ok);
		bp_json_set(e, "ph", json_string("M"), &ok);
		bp_json_set(e, "pid", json_integer(dp_i), &ok);
		bp_json_set(e, "tid", json_integer(r), &ok);
		bp_json_set(e, "args", a, &ok);
		bp_json_append(ev, e, &ok);
	}
	double offset = 0.0;
	for (size_t i = 0; ok && i < t->nsteps; i++) {
		const struct bp_trace_step *s = &t->steps[i];
		const struct bp_step *st = steps[i];
		for (size_t r = 0; r < s->nranks; r++) {
			const struct bp_trace_rank *k = &s->ranks[r];
			if (k->pipe < 0)
				continue;
			const struct bp_pipe *pi = &st->pipes[k->pipe];
			for (size_t j = 0; j < k->nmbs; j++)
				for (int b = 0; b < 2; b++) {
					const struct bp_trace_mb *m = &k->mbs[j];
					char name[48];
					snprintf(name, sizeof(name), "%c mb%zu", b ? 'B' : 'F', j);
					double pred = (b ? pi->mbs[j].bwd : pi->mbs[j].fwd)[k->stage];
					json_t *e = json_object(), *a = json_object();
					bp_json_set(a, "step", json_integer(s->index), &ok);
					bp_json_set(a, "mb", json_integer((json_int_t)j), &ok);
					bp_json_set(a, "predicted_us", bp_json_real(pred * scale), &ok);
					bp_json_set(a, "measured_us",
						    bp_json_real(b ? m->bwd_us : m->fwd_us), &ok);
					bp_json_set(e, "name", json_string(name), &ok);
					bp_json_set(e, "cat", json_string(b ? "bwd" : "fwd"), &ok);
					bp_json_set(e, "ph", json_string("X"), &ok);
					bp_json_set(e, "ts",
						    bp_json_real(offset + (b ? m->bwd_start_us
									      : m->fwd_start_us)),
						    &ok);
					bp_json_set(e, "dur", bp_json_real(b ? m->bwd_us : m->fwd_us),
						    &ok);
					bp_json_set(e, "pid", json_integer(k->pipe), &ok);
					bp_json_set(e, "tid", json_integer(k->rank), &ok);
					bp_json_set(e, "args", a, &ok);
					bp_json_append(ev, e, &ok);
				}
			json_t *e = json_object(), *a = json_object();
			bp_json_set(a, "step", json_integer(s->index), &ok);
			bp_json_set(a, "predicted_us", bp_json_real(st->m.grad_sync_us * scale), &ok);
			bp_json_set(a, "measured_us", bp_json_real(k->grad_sync_us), &ok);
			bp_json_set(e, "name", json_string("grad sync"), &ok);
			bp_json_set(e, "cat", json_string("grad_sync"), &ok);
			bp_json_set(e, "ph", json_string("X"), &ok);
			bp_json_set(e, "ts", bp_json_real(offset + k->pipeline_us), &ok);
			bp_json_set(e, "dur", bp_json_real(k->grad_sync_us), &ok);
			bp_json_set(e, "pid", json_integer(k->pipe), &ok);
			bp_json_set(e, "tid", json_integer(k->rank), &ok);
			bp_json_set(e, "args", a, &ok);
			bp_json_append(ev, e, &ok);
		}
		offset += s->step_us;
	}
	bp_json_set(other, "plan_sha256", json_string(t->plan_sha), &ok);
	bp_json_set(other, "method", json_string(t->method), &ok);
	bp_json_set(other, "backend", json_string(t->backend), &ok);
	bp_json_set(other, "time_scale", json_real(t->time_scale), &ok);
	bp_json_set(root, "displayTimeUnit", json_string("ms"), &ok);
	bp_json_set(root, "otherData", other, &ok);
	bp_json_set(root, "traceEvents", ev, &ok);
	if (!ok) {
		json_decref(root);
		return NULL;
	}
	return root;
}

static int write_json(json_t *root, const char *path, const char *what)
{
	struct bp_error err;
	char *text = root ? bp_json_dump_canonical(root) : NULL;
	if (!text)
		return cmd_error("cannot encode the %s", what);
	int rc = cmd_write_file(path, text, strlen(text), &err);
	free(text);
	if (rc < 0)
		return cmd_error("cannot write %s '%s': %s", what, path, err.text);
	return EXIT_OK;
}

/* What --refit found, for the summary. */
struct refit_result {
	struct bp_refit fit;
	char name[64];
	struct stats before[3], after[3]; /* steps, forward ops, backward ops */
};

/* The predicted parts of every operation (obs, in the order of ops), from the cost model of
 * the op's pipeline. The parts must add up to the plan's prediction: a profile that does not
 * reproduce the plan would fit nonsense. */
static int split_ops(const struct bp_plan *p, const struct bp_trace *t,
		     const struct bp_step *const *steps, struct bp_costs *costs,
		     const struct op *ops, struct bp_refit_obs *obs, struct bp_error *err)
{
	size_t o = 0;
	for (size_t i = 0; i < t->nsteps; i++) {
		const struct bp_trace_step *s = &t->steps[i];
		for (size_t r = 0; r < s->nranks; r++) {
			const struct bp_trace_rank *k = &s->ranks[r];
			if (k->pipe < 0)
				continue;
			const struct bp_pipe *pi = &steps[i]->pipes[k->pipe];
			const struct bp_costmodel *cm =
				bp_costs_pipe(costs, bp_plan_layout(p, steps[i]), (size_t)k->pipe, err);
			if (!cm)
				return -1;
			for (size_t j = 0; j < k->nmbs; j++, o += 2) {
				const struct bp_mb *mb = &pi->mbs[j];
				/* the fit scales the dense attention tables; sparse tables and
				 * attention on servers (a ticks step) are not fitted yet */
				if (mb->attn != BP_ATTN_DENSE)
					return bp_errorf(err, "step %lld pipeline %d micro-batch %zu "
							 "has %s attention: the refit fits dense "
							 "attention only",
							 (long long)steps[i]->index, k->pipe, j,
							 bp_attn_kind_name(mb->attn));
				if (bp_refit_split(cm, mb->spans, mb->nspans, mb->shard, k->stage,
						   &obs[o].pred, &obs[o + 1].pred, err) < 0)
					return -1;
				for (int d = 0; d < 2; d++) {
					const struct bp_refit_parts *q = &obs[o + d].pred;
					double sum = q->attn + q->linear + q->coll;
					double v = (d ? mb->bwd : mb->fwd)[k->stage];
					if (fabs(sum - v) > 1e-3 + 1e-5 * v)
						return bp_errorf(err, "profile '%s' does not reproduce "
								 "its predictions (step %lld, pipeline "
								 "%d, micro-batch %zu, stage %d: %.3f us, "
								 "the plan has %.3f us)", cm->prof->name,
								 (long long)steps[i]->index, k->pipe, j,
								 k->stage, sum, v);
					obs[o + d].measured = ops[o + d].measured / t->time_scale;
				}
			}
		}
	}
	return 0;
}

/* Fits the factors on every operation, makes the refit profile (into *out) and re-predicts
 * the plan on it (the plan's predictions are replaced: call after everything that reads
 * them). ops[].after and step_after get the re-predicted times x scale. */
static int do_refit(struct bp_plan *p, const struct bp_trace *t,
		    const struct bp_step *const *steps, const char *profile_path,
		    const char *plan_path, struct op *ops, size_t nops, double *step_after,
		    struct bp_profile *out, struct refit_result *res)
{
	struct bp_profile prof;
	struct bp_costs cm, cm2;
	struct bp_error err;
	struct bp_refit_obs *obs = NULL;
	int rc = EXIT_DATA;
	bp_profile_init(&prof);
	bp_costs_init(&cm, &prof);
	bp_costs_init(&cm2, out);
	if (cmd_plan_profile(p, profile_path, 1, &prof, &err) < 0 ||
	    bp_plan_costs(p, &prof, &cm, &err) < 0) {
		cmd_error("cannot refit plan '%s': %s", plan_path, err.text);
		goto out;
	}
	obs = calloc(nops ? nops : 1, sizeof(*obs));
	if (!obs) {
		cmd_error("cannot refit: out of memory");
		goto out;
	}
	/* ops are in trace order (step, rank, mb, fwd/bwd), as obs. */
	if (split_ops(p, t, steps, &cm, ops, obs, &err) < 0) {
		cmd_error("cannot refit plan '%s': %s", plan_path, err.text);
		goto out;
	}
	if (bp_refit_fit(obs, nops, &res->fit, &err) < 0 ||
	    bp_refit_profile(&prof, &res->fit, out, &err) < 0 ||
	    bp_plan_costs(p, out, &cm2, &err) < 0 || bp_plan_repredict(p, &cm2, &err) < 0) {
		cmd_error("cannot refit plan '%s': %s", plan_path, err.text);
		goto out;
	}
	snprintf(res->name, sizeof(res->name), "%s", out->name);
	for (size_t i = 0; i < nops; i++) {
		const struct bp_step *st = steps[ops[i].step];
		const struct bp_trace_rank *k = &t->steps[ops[i].step].ranks[ops[i].rank];
		const struct bp_mb *mb = &st->pipes[k->pipe].mbs[ops[i].mb];
		ops[i].after = (ops[i].bwd ? mb->bwd : mb->fwd)[ops[i].stage] * t->time_scale;
	}
	for (size_t i = 0; i < t->nsteps; i++)
		step_after[i] = steps[i]->m.step_us * t->time_scale;
	rc = EXIT_OK;
out:
	free(obs);
	bp_costs_release(&cm);
	bp_costs_release(&cm2);
	bp_profile_release(&prof);
	return rc;
}

/* Stats of steps, forward ops and backward ops, against predicted or (after) re-predicted. */
static int three_stats(const struct op *ops, size_t nops, const double *step_meas,
		       const double *step_pred, size_t nsteps, int after, struct stats s[3])
{
	size_t cap = (nops > nsteps ? nops : nsteps) + 1;
	double *m = calloc(cap, sizeof(double)), *p = calloc(cap, sizeof(double));
	double *v = calloc(cap, sizeof(double));
	if (!m || !p || !v) {
		free(m);
		free(p);
		free(v);
		return -1;
	}
	s[0] = err_stats(step_meas, step_pred, nsteps, v);
	for (int b = 0; b < 2; b++) {
		size_t n = 0;
		for (size_t i = 0; i < nops; i++)
			if (ops[i].bwd == b) {
				m[n] = ops[i].measured;
				p[n++] = after ? ops[i].after : ops[i].predicted;
			}
		s[1 + b] = err_stats(m, p, n, v);
	}
	free(m);
	free(p);
	free(v);
	return 0;
}

static const char *const stat_names[3] = {"steps", "forward ops", "backward ops"};

static void print_refit(FILE *f, const struct refit_result *r, double scale, size_t nops)
{
	fprintf(f, "refit: measured / %g ~ alpha * attention + beta * linear + collectives\n",
		scale);
	fprintf(f, "  weighted least squares (weights 1 / predicted^2) over %zu of %zu "
		   "micro-batch ops%s\n", r->fit.nused, nops,
		r->fit.common ? "; one common factor (attention and linear not separable)" : "");
	fprintf(f, "  alpha %.6f: attention tables x alpha\n", r->fit.alpha);
	fprintf(f, "  beta  %.6f: linear tables x beta\n", r->fit.beta);
	fprintf(f, "  collective tables and memory constants unchanged, T(l,P) fits recomputed\n");
	fprintf(f, "  profile '%s' (kind measured)\n", r->name);
	fprintf(f, "  |error| before -> after (the plan re-predicted on the refit profile):\n");
	fprintf(f, "  %-14s %17s %17s %17s\n", "", "median", "p95", "max");
	for (int i = 0; i < 3; i++) {
		double b[3] = {r->before[i].median, r->before[i].p95, r->before[i].max};
		double a[3] = {r->after[i].median, r->after[i].p95, r->after[i].max};
		fprintf(f, "  %-14s", stat_names[i]);
		for (int k = 0; k < 3; k++) {
			char cell[64];
			snprintf(cell, sizeof(cell), "%.2f%% -> %.2f%%", 100 * b[k], 100 * a[k]);
			fprintf(f, " %17s", cell);
		}
		fprintf(f, "\n");
	}
}

static void print_report(const struct bp_plan *p, const struct bp_trace *t,
			 const char *plan_path, const char *trace_path, size_t nops,
			 const double *step_meas, const double *step_pred, const struct stats s[3],
			 const struct op **worst, size_t nworst)
{
	const struct bp_cluster *c = &p->cluster;
	struct bp_sb lay = BP_SB_INIT;
	bp_sb_fill(&lay, fill_plan_layout, p);
	printf("plan %s: method %s, %d x %s (%s)\n", plan_path, p->method, c->gpus, c->gpu,
	       lay.buf); /* out of memory: what fit */
	bp_sb_release(&lay);
	printf("trace %s: backend %s, time scale %g, %zu steps, %d ranks, %zu micro-batch ops\n",
	       trace_path, t->backend, t->time_scale, t->nsteps, t->world, nops);
	printf("predicted = plan x %g; error = (measured - predicted) / predicted\n\n",
	       t->time_scale);
	printf("%5s %13s %13s %9s\n", "step", "measured", "predicted", "error");
	for (size_t i = 0; i < t->nsteps; i++) {
		printf("%5lld %10.3f ms %10.3f ms", (long long)t->steps[i].index, step_meas[i] / 1e3,
		       step_pred[i] / 1e3);
		if (step_pred[i] > 0)
			printf(" %+8.2f%%\n", 100 * rel_err(step_meas[i], step_pred[i]));
		else
			printf(" %9s\n", "n/a");
	}
	printf("\n%-14s %6s %8s %8s %8s\n", "|error|", "n", "median", "p95", "max");
	for (int i = 0; i < 3; i++)
		printf("%-14s %6zu %7.2f%% %7.2f%% %7.2f%%\n", stat_names[i], s[i].n,
		       100 * s[i].median, 100 * s[i].p95, 100 * s[i].max);
	if (!nworst)
		return;
	printf("\nworst %zu micro-batch ops by |error|:\n", nworst);
	printf("%5s %5s %3s %3s %3s %3s %4s %3s %13s %13s %9s\n", "step", "rank", "dp", "pp",
	       "cp", "tp", "mb", "op", "measured", "predicted", "error");
	for (size_t i = 0; i < nworst; i++) {
		const struct op *o = worst[i];
		const struct bp_trace_rank *k = &t->steps[o->step].ranks[o->rank];
		printf("%5lld %5d %3d %3d %3d %3d %4zu %3s %10.3f ms %10.3f ms %+8.2f%%\n",
		       (long long)t->steps[o->step].index, o->rank, k->pipe, k->stage, k->cp_i,
		       k->tp_i, o->mb, o->bwd ? "bwd" : "fwd", o->measured / 1e3,
		       o->predicted / 1e3, 100 * rel_err(o->measured, o->predicted));
	}
}

int cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{"top", required_argument, NULL, 'n'},
		{"refit", required_argument, NULL, 'r'},
		{"profile", required_argument, NULL, 'p'},
		{"chrome", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *refit = NULL, *profile = NULL, *chrome = NULL;
	int64_t top = 5;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (cmd_opt_int("report", "--top", optarg, 0, 1 << 30, &top) < 0)
				return EXIT_USAGE;
			break;
		case 'r': refit = optarg; break;
		case 'p': profile = optarg; break;
		case 'c': chrome = optarg; break;
		case 'h': report_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("report", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
	}
	if (argc - optind != 2)
		return cmd_usage("report", "expected a plan file and a trace file");
	if (profile && !refit)
		return cmd_usage("report", "--profile is only used by --refit");
	if (refit && chrome && !strcmp(refit, "-") && !strcmp(chrome, "-"))
		return cmd_usage("report", "--refit and --chrome cannot both write to "
				 "standard output");
	const char *plan_path = argv[optind], *trace_path = argv[optind + 1];
	{
		const char *names[] = {"the plan", "the trace", "--profile"};
		const char *paths[] = {plan_path, trace_path, profile};
		int r = cmd_one_stdin("report", 3, names, paths);
		const char *outs[] = {"--chrome", "--refit"}, *outp[] = {chrome, refit};
		for (int i = 0; i < 2 && !r; i++)
			if (outp[i])
				for (int k = 0; k < 3 && !r; k++)
					r = cmd_refuse_overwrite("report", outs[i], outp[i],
								 k == 0 ? "plan" : k == 1 ? "trace"
									: "profile", paths[k]);
		if (!r && refit && chrome && cmd_same_file(refit, chrome))
			r = cmd_usage("report", "--refit and --chrome name the same file '%s'",
				      cmd_cut(refit));
		if (r)
			return r;
	}
	int json_stdout = (refit && !strcmp(refit, "-")) || (chrome && !strcmp(chrome, "-"));
	struct bp_plan plan;
	struct bp_trace tr;
	struct bp_profile newprof;
	struct refit_result res;
	char sha[65];
	const struct bp_step **steps = NULL;
	struct op *ops = NULL;
	const struct op **worst = NULL;
	double *step_meas = NULL, *step_pred = NULL, *step_after = NULL;
	struct stats st[3];
	int rc;
	bp_plan_init(&plan);
	bp_trace_init(&tr);
	bp_profile_init(&newprof);
	memset(&res, 0, sizeof(res));
	rc = load_inputs(plan_path, trace_path, &plan, &tr, sha);
	if (rc != EXIT_OK)
		goto out;
	rc = EXIT_DATA;
	size_t nops = 0;
	for (size_t i = 0; i < tr.nsteps; i++)
		for (size_t r = 0; r < tr.steps[i].nranks; r++)
			nops += 2 * tr.steps[i].ranks[r].nmbs;
	steps = calloc(tr.nsteps + 1, sizeof(*steps));
	ops = calloc(nops + 1, sizeof(*ops));
	worst = calloc(nops + 1, sizeof(*worst));
	step_meas = calloc(tr.nsteps + 1, sizeof(double));
	step_pred = calloc(tr.nsteps + 1, sizeof(double));
	step_after = calloc(tr.nsteps + 1, sizeof(double));
	if (!steps || !ops || !worst || !step_meas || !step_pred || !step_after) {
		cmd_error("cannot report: out of memory");
		goto out;
	}
	rc = check_match(&plan, &tr, sha, plan_path, trace_path, steps);
	if (rc != EXIT_OK)
		goto out;
	rc = EXIT_DATA;
	/* The comparison, from the plan's own predictions x the trace's time scale. */
	double scale = tr.time_scale;
	size_t o = 0, nw = 0;
	for (size_t i = 0; i < tr.nsteps; i++) {
		const struct bp_trace_step *s = &tr.steps[i];
		step_meas[i] = s->step_us;
		step_pred[i] = steps[i]->m.step_us * scale;
		for (size_t r = 0; r < s->nranks; r++) {
			const struct bp_trace_rank *k = &s->ranks[r];
			if (k->pipe < 0)
				continue;
			const struct bp_pipe *pi = &steps[i]->pipes[k->pipe];
			for (size_t j = 0; j < k->nmbs; j++)
				for (int b = 0; b < 2; b++, o++) {
					ops[o] = (struct op){i, k->rank, j, b, k->stage,
						b ? k->mbs[j].bwd_us : k->mbs[j].fwd_us,
						(b ? pi->mbs[j].bwd : pi->mbs[j].fwd)[k->stage] * scale,
						0.0};
					if (ops[o].predicted > 0)
						worst[nw++] = &ops[o];
				}
		}
	}
	qsort(worst, nw, sizeof(*worst), cmp_worst);
	if (nw > (size_t)top)
		nw = (size_t)top;
	if (three_stats(ops, nops, step_meas, step_pred, tr.nsteps, 0, st) < 0) {
		cmd_error("cannot report: out of memory");
		goto out;
	}
	if (chrome) { /* before --refit, which re-predicts the plan */
		json_t *j = chrome_json(&plan, &tr, steps);
		rc = write_json(j, chrome, "Chrome trace");
		json_decref(j);
		if (rc != EXIT_OK)
			goto out;
		rc = EXIT_DATA;
	}
	if (refit) {
		memcpy(res.before, st, sizeof(st));
		rc = do_refit(&plan, &tr, steps, profile, plan_path, ops, nops, step_after,
			      &newprof, &res);
		if (rc != EXIT_OK)
			goto out;
		rc = EXIT_DATA;
		if (three_stats(ops, nops, step_meas, step_after, tr.nsteps, 1, res.after) < 0) {
			cmd_error("cannot report: out of memory");
			goto out;
		}
		if (res.fit.common)
			cmd_warn("attention and linear times cannot be told apart in trace '%s': "
				 "one common factor fitted", trace_path);
		if (res.fit.clamped)
			cmd_warn("a refit factor was clamped to [%g, %g]", BP_REFIT_MIN,
				 BP_REFIT_MAX);
		json_t *j = bp_profile_to_json(&newprof);
		rc = write_json(j, refit, "refit profile");
		json_decref(j);
		if (rc != EXIT_OK)
			goto out;
	}
	if (!json_stdout) {
		print_report(&plan, &tr, plan_path, trace_path, nops, step_meas, step_pred, st,
			     worst, nw);
		if (refit) {
			printf("\n");
			print_refit(stdout, &res, scale, nops);
			printf("wrote %s\n", refit);
		}
	} else if (refit) {
		print_refit(stderr, &res, scale, nops);
	}
	rc = EXIT_OK;
out:
	free(steps);
	free(ops);
	free(worst);
	free(step_meas);
	free(step_pred);
	free(step_after);
	bp_profile_release(&newprof);
	bp_trace_release(&tr);
	bp_plan_release(&plan);
	return rc;
}
