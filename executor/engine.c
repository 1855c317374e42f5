/* engine.c: the replay engine (engine.h; DESIGN.md "Executor"; issue 4).
 *
 * Per step: a world barrier (so every rank's clock starts together), then this rank's
 * pipeline in the 1F1B order of planner/sim.c, then the gradient synchronisation of its
 * stage. Per operation: the activation (forward) or gradient (backward) from the neighbour
 * stage, a TP all-reduce and a CP all-gather (forward) or reduce-scatter (backward) of the
 * real byte counts (capped by max_bytes), the compute, and the send to the other neighbour.
 *
 * An emulating backend (one with idle_until) also reproduces the simulator's timing model:
 * an op lasts the plan's predicted time from its start, collectives included (the plan's
 * times include them); an activation arrives bp_cost_p2p after the sender finished (the
 * sender's wall-clock time travels in a header message); the gradient synchronisation lasts
 * bp_cost_grad_sync of the stage from when the rank reaches it. So the measured step time is
 * the simulator's prediction times time_scale, plus scheduling noise. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "sim.h"

#ifdef BP_HAVE_MPI
extern const struct bp_backend bp_backend_host;
#endif
#ifdef BP_HAVE_CUDA
extern const struct bp_backend bp_backend_cuda;
#endif

static const struct bp_backend *const backends[] = {
#ifdef BP_HAVE_CUDA
	&bp_backend_cuda,
#endif
#ifdef BP_HAVE_MPI
	&bp_backend_host,
#endif
	NULL,
};

const struct bp_backend *bp_backend_find(const char *name)
{
	for (size_t i = 0; backends[i]; i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

const char *bp_backend_names(void)
{
#if defined(BP_HAVE_CUDA) && defined(BP_HAVE_MPI)
	return "cuda, host";
#elif defined(BP_HAVE_CUDA)
	return "cuda";
#elif defined(BP_HAVE_MPI)
	return "host";
#else
	return "";
#endif
}

/* Per rank and timed step, the record gathered to rank 0: step, pipeline and grad sync
 * times, then per micro-batch slot (mmax of them) fwd start, fwd, bwd start, bwd. */
#define REC_HEAD 3
#define REC_MB 4

/* This rank's role in one layout of the plan, and the groups that role needs. */
struct lrole {
	struct bp_place pl;             /* pipe and stage -1: idle in this layout */
	const struct bp_costmodel *cm;  /* the pipeline's (NULL when idle); borrowed */
	void *g_tp, *g_cp, *g_sync;     /* backend handles; used only when n_* > 1 */
	int n_tp, n_cp, n_sync;
	int prev, next;                 /* neighbour stages' world ranks, -1 at the ends */
};

struct bp_engine {
	const struct bp_plan *plan;
	const struct bp_backend *be;
	void *st;
	struct bp_engine_opts o;
	int rank, world;
	struct lrole *lr;           /* [plan->nlayouts] */
	size_t nl;
	size_t mmax;                /* most micro-batches of a pipeline in the timed steps */
	char *payload;              /* what sends carry; never written after setup */
	char *cin, *cout;           /* collective buffers, max_bytes each */
	char *tp_buf;               /* the TP all-reduce's buffer, max_bytes / 2 */
	double *hdr;                /* [2 * mmax] send headers: the sender's wall clock */
	double *rec;                /* [nsteps][rec_len] */
	size_t rec_len, nsteps;
	int hung;
};

static double wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static size_t cap_bytes(const struct bp_engine *e, double bytes, int n)
{
	double cap = (double)e->o.max_bytes / (n > 0 ? n : 1);
	if (bytes > cap)
		bytes = cap;
	if (bytes < 1)
		bytes = 1;
	return (size_t)bytes;
}

/* The members of this rank's group of a kind in layout l: TP (same pipeline, stage and CP
 * position), CP (same pipeline, stage and TP position) or gradient sync (the same stage and
 * TP position in every pipeline of the same scheme, all CP positions: the replicas
 * predict.c's dp-allreduce reduces over). A rank idle in the layout is a group of one. */
static int group_members(const struct bp_layout *l, const struct bp_place *me, int world,
			 int kind, int self, int *ranks)
{
	int cnt = 0;
	if (me->pipe < 0) {
		ranks[0] = self;
		return 1;
	}
	const struct bp_lpipe *mp = &l->pipes[me->pipe];
	for (int r = 0; r < world; r++) {
		struct bp_place o = bp_layout_place(l, r);
		if (o.pipe < 0 || o.stage != me->stage)
			continue;
		const struct bp_lpipe *op = &l->pipes[o.pipe];
		int same;
		if (kind == 0)
			same = o.pipe == me->pipe && o.cp_i == me->cp_i;
		else if (kind == 1)
			same = o.pipe == me->pipe && o.tp_i == me->tp_i;
		else
			same = o.tp_i == me->tp_i && op->sc.tp == mp->sc.tp && op->sc.cp == mp->sc.cp &&
			       op->sc.pp == mp->sc.pp;
		if (same)
			ranks[cnt++] = r;
	}
	return cnt;
}

/* Every world rank calls this for every (layout, kind) in the same order, so backends whose
 * group creation is collective over the world (NCCL's split) see the same sequence. */
static int make_group(struct bp_engine *e, size_t li, int kind, void **g, int *n,
		      struct bp_error *err)
{
	int *ranks = bp_calloc((size_t)e->world, sizeof(int), err);
	if (!ranks)
		return -1;
	int cnt = group_members(&e->plan->layouts[li], &e->lr[li].pl, e->world, kind, e->rank,
				ranks);
	*n = cnt;
	*g = NULL;
	int rc = e->be->group_create(e->st, ranks, cnt, g, err);
	if (rc < 0)
		bp_error_prefix(err, "cannot make the %s group of layout %zu",
				kind == 0 ? "tp" : kind == 1 ? "cp" : "gradient-sync", li);
	free(ranks);
	return rc;
}

void bp_engine_free(struct bp_engine *e)
{
	if (!e)
		return;
	for (size_t i = 0; e->lr && i < e->nl; i++) {
		struct lrole *r = &e->lr[i];
		if (r->g_tp)
			e->be->group_free(e->st, r->g_tp);
		if (r->g_cp)
			e->be->group_free(e->st, r->g_cp);
		if (r->g_sync)
			e->be->group_free(e->st, r->g_sync);
	}
	free(e->lr);
	free(e->payload);
	free(e->cin);
	free(e->cout);
	free(e->tp_buf);
	free(e->hdr);
	free(e->rec);
	free(e);
}

struct bp_engine *bp_engine_new(const struct bp_plan *plan, struct bp_costs *costs,
				const struct bp_backend *be, void *st, int rank, int world,
				const struct bp_engine_opts *o, struct bp_error *err)
{
	const struct bp_cluster *c = &plan->cluster;
	struct bp_engine *e = NULL;
	if (world != c->gpus)
		return bp_errorf(err, "the plan needs %d ranks, the world has %d", c->gpus, world),
		       NULL;
	if (rank < 0 || rank >= world)
		return bp_errorf(err, "rank %d is outside the world of %d", rank, world), NULL;
	if (o->step_lo >= o->step_hi || o->step_hi > plan->nsteps)
		return bp_errorf(err, "steps %zu:%zu are outside the plan's 0:%zu", o->step_lo,
				 o->step_hi, plan->nsteps),
		       NULL;
	if (!(o->time_scale > 0) || !(o->timeout_s > 0) || o->max_bytes < 64)
		return bp_errorf(err, "bad engine options"), NULL;
	e = bp_calloc(1, sizeof(*e), err);
	if (!e)
		return NULL;
	e->plan = plan;
	e->be = be;
	e->st = st;
	e->o = *o;
	e->rank = rank;
	e->world = world;
	e->nl = plan->nlayouts;
	e->lr = bp_calloc(e->nl + 1, sizeof(*e->lr), err);
	if (!e->lr)
		goto fail;
	for (size_t i = 0; i < e->nl; i++) {
		const struct bp_layout *l = &plan->layouts[i];
		struct lrole *r = &e->lr[i];
		r->pl = bp_layout_place(l, rank);
		r->prev = r->next = -1;
		if (r->pl.pipe < 0)
			continue;
		if (strcmp(l->schedule, BP_SCHEDULE_1F1B)) {
			bp_errorf(err, "layout %zu runs the \"%s\" schedule, which this engine does "
				  "not replay yet", i, l->schedule);
			goto fail;
		}
		const struct bp_lpipe *lp = &l->pipes[r->pl.pipe];
		r->cm = bp_costs_pipe(costs, l, (size_t)r->pl.pipe, err);
		if (!r->cm)
			goto fail;
		if (r->pl.stage > 0)
			r->prev = bp_lpipe_rank(lp, r->pl.stage - 1, r->pl.cp_i, r->pl.tp_i);
		if (r->pl.stage + 1 < lp->sc.pp)
			r->next = bp_lpipe_rank(lp, r->pl.stage + 1, r->pl.cp_i, r->pl.tp_i);
	}
	for (size_t i = o->step_lo; i < o->step_hi; i++) {
		const struct bp_step *s = &plan->steps[i];
		for (size_t k = 0; k < s->npipes; k++) {
			if (s->pipes[k].nmbs > e->mmax)
				e->mmax = s->pipes[k].nmbs;
			for (size_t j = 0; j < s->pipes[k].nmbs; j++)
				if (s->pipes[k].mbs[j].attn != BP_ATTN_DENSE) {
					bp_errorf(err, "step %zu pipeline %zu micro-batch %zu has %s "
						  "attention, which this engine does not replay yet",
						  i, k, j, bp_attn_kind_name(s->pipes[k].mbs[j].attn));
					goto fail;
				}
		}
	}
	/* Tags are (micro-batch, direction, header/payload): MPI guarantees tags up to 32767. */
	if (e->mmax * 4 > 32767) {
		bp_errorf(err, "a pipeline has %zu micro-batches, more than the 8191 the tags allow",
			  e->mmax);
		goto fail;
	}
	e->nsteps = o->step_hi - o->step_lo;
	e->rec_len = REC_HEAD + REC_MB * e->mmax;
	e->payload = bp_calloc((size_t)o->max_bytes, 1, err);
	e->cin = bp_calloc((size_t)o->max_bytes, 1, err);
	e->cout = bp_calloc((size_t)o->max_bytes, 1, err);
	e->tp_buf = bp_calloc((size_t)o->max_bytes / 2, 1, err);
	e->hdr = bp_calloc(2 * e->mmax + 1, sizeof(double), err);
	e->rec = bp_calloc(e->nsteps * e->rec_len, sizeof(double), err);
	if (!e->payload || !e->cin || !e->cout || !e->tp_buf || !e->hdr || !e->rec)
		goto fail;
	/* The payload stays zero (calloc): only its size matters, and untouched pages of a
	 * large cap (the CUDA backend's) cost no memory. */
	/* Every rank makes its groups in the same order: per layout, TP, CP, gradient sync. */
	for (size_t i = 0; i < e->nl; i++) {
		struct lrole *r = &e->lr[i];
		if (make_group(e, i, 0, &r->g_tp, &r->n_tp, err) < 0 ||
		    make_group(e, i, 1, &r->g_cp, &r->n_cp, err) < 0 ||
		    make_group(e, i, 2, &r->g_sync, &r->n_sync, err) < 0)
			goto fail;
	}
	return e;
fail:
	bp_engine_free(e);
	return NULL;
}

/* Receives micro-batch j's activation (dir 0) or gradient (dir 1) from peer, then, when
 * emulating, idles until bp_cost_p2p after the sender's end (at most that long from now). */
static int recv_p2p(struct bp_engine *e, int peer, size_t j, int dir, double bytes,
		    double p2p_us, struct bp_wait *w, struct bp_error *err)
{
	double sent = 0;
	int tag = (int)(j * 4 + (size_t)dir * 2);
	size_t n = cap_bytes(e, bytes, 1);
	int rc = e->be->recv(e->st, &sent, sizeof(sent), peer, tag, w, err);
	if (rc == 0)
		rc = e->be->recv(e->st, e->cout, n, peer, tag + 1, w, err);
	if (rc != 0 || !e->be->idle_until)
		return rc;
	double lat = p2p_us * e->o.time_scale;
	double delay = sent + lat - wall_us();
	if (delay > lat)
		delay = lat; /* clocks of two hosts disagree: never more than the transfer */
	if (delay <= 0)
		return 0;
	return e->be->idle_until(e->st, e->be->now_us(e->st) + delay, err);
}

static int send_p2p(struct bp_engine *e, int peer, size_t j, int dir, double bytes,
		    struct bp_error *err)
{
	int tag = (int)(j * 4 + (size_t)dir * 2);
	double *h = &e->hdr[j * 2 + (size_t)dir];
	*h = wall_us();
	if (e->be->send(e->st, h, sizeof(*h), peer, tag, err) < 0 ||
	    e->be->send(e->st, e->payload, cap_bytes(e, bytes, 1), peer, tag + 1, err) < 0)
		return -1;
	return 0;
}

static int hang_forever(struct bp_engine *e, struct bp_error *err)
{
	for (;;) {
		double t = e->be->now_us(e->st) + 1e6;
		if (e->be->idle_until) {
			if (e->be->idle_until(e->st, t, err) < 0)
				return -1;
		} else {
			struct timespec ts = {1, 0};
			nanosleep(&ts, NULL);
		}
	}
}

/* One step of the plan; rec (rec_len doubles) gets the measurements. */
static int run_step(struct bp_engine *e, size_t si, double *rec, struct bp_error *err)
{
	const struct bp_plan *p = e->plan;
	const struct bp_step *st = &p->steps[si];
	const struct lrole *r = &e->lr[st->layout];
	const struct bp_backend *be = e->be;
	int rc;
	double scale = e->o.time_scale;
	struct bp_wait w = {"step barrier", -1, st->index, -1};
	memset(rec, 0, e->rec_len * sizeof(double));
	if ((rc = be->barrier(e->st, NULL, &w, err)) != 0)
		return rc;
	double t0 = be->now_us(e->st);
	if (e->o.exit_rank == e->rank)
		return bp_errorf(err, "exiting in step %lld as --debug-exit-rank asked",
				 (long long)st->index),
		       BP_EXEC_EXIT;
	if (e->o.hang_rank == e->rank && !e->hung) {
		e->hung = 1;
		return hang_forever(e, err);
	}
	if (r->pl.pipe < 0) /* idle in this step's layout: only the barrier */
		return 0;
	const struct bp_costmodel *cm = r->cm;
	const struct bp_pipe *pi = &st->pipes[r->pl.pipe];
	int pp = cm->sc.pp, s = r->pl.stage, tp = cm->sc.tp, cp = cm->sc.cp;
	size_t m = pi->nmbs;
	for (size_t k = 0; k < 2 * m; k++) {
		size_t j;
		int bwd = bp_sim_1f1b_op(pp, m, s, k, &j);
		const struct bp_mb *mb = &pi->mbs[j];
		double tokens = (double)mb->tokens;
		/* Bytes as bp_cost_p2p counts them: the micro-batch's hidden states per TP/CP
		 * shard; a CP rank's K and V; a TP shard's partial sums of its CP share. */
		double p2p_bytes = tokens * cm->token_bytes / (tp * cp);
		double kv_bytes = tokens / cp * cm->kv_token_bytes / tp;
		double tp_bytes = tokens / cp * cm->token_bytes;
		double p2p_us = bp_cost_p2p(cm, mb->tokens);
		w.mb = (int64_t)j;
		if (!bwd && r->prev >= 0) {
			w.what = "pp recv of an activation";
			w.peer = r->prev;
			rc = recv_p2p(e, r->prev, j, 0, p2p_bytes, p2p_us, &w, err);
		} else if (bwd && r->next >= 0) {
			w.what = "pp recv of a gradient";
			w.peer = r->next;
			rc = recv_p2p(e, r->next, j, 1, p2p_bytes, p2p_us, &w, err);
		} else {
			rc = 0;
		}
		if (rc != 0)
			return rc;
		double t_op = be->now_us(e->st);
		w.peer = -1;
		w.what = bwd ? "backward" : "forward";
		struct bp_op op = {bwd, s, cm->stage_layers[s], st->index, (int64_t)j, mb,
				   &p->model, t_op, (bwd ? mb->bwd[s] : mb->fwd[s]) * scale,
				   {{BP_EXEC_ALLREDUCE, r->n_tp > 1 ? r->g_tp : NULL, e->tp_buf,
				     e->tp_buf, cap_bytes(e, tp_bytes, 2), "tp all-reduce"},
				    {bwd ? BP_EXEC_REDUCESCATTER : BP_EXEC_ALLGATHER,
				     r->n_cp > 1 ? r->g_cp : NULL, e->cin, e->cout,
				     cap_bytes(e, kv_bytes, r->n_cp),
				     bwd ? "cp reduce-scatter of dK and dV"
					 : "cp all-gather of K and V"}},
				   w};
		if ((rc = be->compute(e->st, &op, err)) != 0)
			return rc;
		double t_end = be->now_us(e->st);
		double *slot = rec + REC_HEAD + REC_MB * j;
		slot[bwd * 2] = t_op - t0;
		slot[bwd * 2 + 1] = t_end - t_op;
		if (!bwd && r->next >= 0)
			rc = send_p2p(e, r->next, j, 0, p2p_bytes, err);
		else if (bwd && r->prev >= 0)
			rc = send_p2p(e, r->prev, j, 1, p2p_bytes, err);
		if (rc != 0)
			return rc;
	}
	double t_pipe = be->now_us(e->st);
	w.mb = -1;
	if (r->n_sync > 1) {
		/* Distributed optimizer: reduce-scatter then all-gather of the stage's bf16
		 * gradients over its replicas; the emulated time starts on arrival. */
		double gbytes = 2.0 * bp_cost_stage_params(cm, s) / tp;
		size_t n = cap_bytes(e, gbytes / r->n_sync, r->n_sync);
		w.what = "gradient reduce-scatter";
		if ((rc = be->reducescatter(e->st, r->g_sync, e->cin, e->cout, n, &w, err)) != 0)
			return rc;
		w.what = "gradient all-gather";
		if ((rc = be->allgather(e->st, r->g_sync, e->cout, e->cin, n, &w, err)) != 0)
			return rc;
		if (be->idle_until &&
		    be->idle_until(e->st, t_pipe + bp_cost_grad_sync(cm, s) * scale, err) < 0)
			return -1;
	}
	double t_sync = be->now_us(e->st);
	w.what = "pp send completion";
	if ((rc = be->wait_sends(e->st, &w, err)) != 0)
		return rc;
	rec[0] = t_sync - t0;
	rec[1] = t_pipe - t0;
	rec[2] = t_sync - t_pipe;
	return 0;
}

int bp_engine_run(struct bp_engine *e, struct bp_error *err)
{
	int rc;
	for (int i = 0; i < e->o.warmup; i++)
		if ((rc = run_step(e, e->o.step_lo, e->rec, err)) != 0)
			return rc;
	for (size_t i = 0; i < e->nsteps; i++)
		if ((rc = run_step(e, e->o.step_lo + i, e->rec + i * e->rec_len, err)) != 0)
			return rc;
	return 0;
}

int bp_engine_gather(struct bp_engine *e, const char *plan_sha, struct bp_trace *tr,
		     struct bp_error *err)
{
	const struct bp_plan *p = e->plan;
	size_t bytes = e->nsteps * e->rec_len * sizeof(double);
	double *all = NULL;
	int rc = -1;
	struct bp_wait w = {"trace gather", 0, -1, -1};
	if (e->rank == 0) {
		all = bp_calloc((size_t)e->world, bytes, err);
		if (!all)
			goto out; /* the others then time out in the gather: nothing better to do */
	}
	if ((rc = e->be->gather(e->st, e->rec, all, bytes, &w, err)) != 0 || e->rank != 0)
		goto out;
	rc = -1;
	bp_strlcpy_checked(tr->plan_sha, plan_sha, sizeof(tr->plan_sha), "plan sha256", NULL);
	snprintf(tr->method, sizeof(tr->method), "%s", p->method);
	snprintf(tr->backend, sizeof(tr->backend), "%s", e->be->name);
	tr->time_scale = e->o.time_scale;
	tr->timeout_s = e->o.timeout_s;
	tr->max_bytes = e->o.max_bytes;
	tr->warmup = e->o.warmup;
	tr->world = e->world;
	tr->steps = bp_calloc(e->nsteps, sizeof(*tr->steps), err);
	if (!tr->steps)
		goto out;
	tr->nsteps = e->nsteps;
	for (size_t i = 0; i < e->nsteps; i++) {
		const struct bp_step *ps = &p->steps[e->o.step_lo + i];
		struct bp_trace_step *ts = &tr->steps[i];
		ts->index = ps->index;
		ts->predicted_us = ps->m.step_us;
		ts->ranks = bp_calloc((size_t)e->world, sizeof(*ts->ranks), err);
		if (!ts->ranks)
			goto out;
		ts->nranks = (size_t)e->world;
		for (int r = 0; r < e->world; r++) {
			const double *rec = all + ((size_t)r * e->nsteps + i) * e->rec_len;
			struct bp_trace_rank *tr_r = &ts->ranks[r];
			struct bp_place ro = bp_layout_place(bp_plan_layout(p, ps), r);
			size_t m = ro.pipe >= 0 ? ps->pipes[ro.pipe].nmbs : 0;
			tr_r->rank = r;
			tr_r->layout = ps->layout;
			tr_r->pipe = ro.pipe;
			tr_r->stage = ro.stage;
			tr_r->cp_i = ro.cp_i;
			tr_r->tp_i = ro.tp_i;
			tr_r->step_us = rec[0];
			tr_r->pipeline_us = rec[1];
			tr_r->grad_sync_us = rec[2];
			if (rec[0] > ts->step_us)
				ts->step_us = rec[0];
			tr_r->mbs = bp_calloc(m ? m : 1, sizeof(*tr_r->mbs), err);
			if (!tr_r->mbs)
				goto out;
			tr_r->nmbs = m;
			for (size_t j = 0; j < m; j++) {
				const double *sl = rec + REC_HEAD + REC_MB * j;
				tr_r->mbs[j] = (struct bp_trace_mb){sl[0], sl[1], sl[2], sl[3]};
			}
		}
	}
	rc = 0;
out:
	free(all);
	return rc;
}
