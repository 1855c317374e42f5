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

struct bp_role bp_rank_role(const struct bp_cluster *c, int rank)
{
	struct bp_role r;
	r.tp_i = rank % c->tp;
	rank /= c->tp;
	r.cp_i = rank % c->cp;
	rank /= c->cp;
	r.dp_i = rank % c->dp;
	r.pp_i = rank / c->dp;
	return r;
}

int bp_role_rank(const struct bp_cluster *c, struct bp_role r)
{
	return r.tp_i + c->tp * (r.cp_i + c->cp * (r.dp_i + c->dp * r.pp_i));
}

/* Per rank and timed step, the record gathered to rank 0: step, pipeline and grad sync
 * times, then per micro-batch slot (mmax of them) fwd start, fwd, bwd start, bwd. */
#define REC_HEAD 3
#define REC_MB 4

struct bp_engine {
	const struct bp_plan *plan;
	const struct bp_costmodel *cm;
	const struct bp_backend *be;
	void *st;
	struct bp_engine_opts o;
	int rank, world;
	struct bp_role role;
	void *g_tp, *g_cp, *g_sync; /* NULL for a group of one */
	int n_tp, n_cp, n_sync;
	int prev, next;             /* neighbour stages' world ranks, -1 at the ends */
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

static int make_group(struct bp_engine *e, int kind, void **g, int *n, struct bp_error *err)
{
	const struct bp_cluster *c = &e->plan->cluster;
	int cap = c->gpus, cnt = 0, rc = -1;
	int *ranks = bp_calloc((size_t)cap, sizeof(int), err);
	if (!ranks)
		return -1;
	for (int r = 0; r < c->gpus; r++) {
		struct bp_role o = bp_rank_role(c, r), me = e->role;
		int same = o.pp_i == me.pp_i;
		if (kind == 0) /* TP: same pipeline, stage and CP position */
			same = same && o.dp_i == me.dp_i && o.cp_i == me.cp_i;
		else if (kind == 1) /* CP: same pipeline, stage and TP position */
			same = same && o.dp_i == me.dp_i && o.tp_i == me.tp_i;
		else /* gradient sync: the dp*cp replicas of this stage's TP shard */
			same = same && o.tp_i == me.tp_i;
		if (same)
			ranks[cnt++] = r;
	}
	*n = cnt;
	*g = NULL;
	if (cnt > 1 && e->be->group_create(e->st, ranks, cnt, g, err) < 0) {
		bp_error_prefix(err, "cannot make the %s group",
				kind == 0 ? "tp" : kind == 1 ? "cp" : "gradient-sync");
		goto out;
	}
	rc = 0;
out:
	free(ranks);
	return rc;
}

void bp_engine_free(struct bp_engine *e)
{
	if (!e)
		return;
	if (e->g_tp)
		e->be->group_free(e->st, e->g_tp);
	if (e->g_cp)
		e->be->group_free(e->st, e->g_cp);
	if (e->g_sync)
		e->be->group_free(e->st, e->g_sync);
	free(e->payload);
	free(e->cin);
	free(e->cout);
	free(e->tp_buf);
	free(e->hdr);
	free(e->rec);
	free(e);
}

struct bp_engine *bp_engine_new(const struct bp_plan *plan, const struct bp_costmodel *cm,
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
	e->cm = cm;
	e->be = be;
	e->st = st;
	e->o = *o;
	e->rank = rank;
	e->world = world;
	e->role = bp_rank_role(c, rank);
	struct bp_role nb = e->role;
	nb.pp_i = e->role.pp_i - 1;
	e->prev = nb.pp_i >= 0 ? bp_role_rank(c, nb) : -1;
	nb.pp_i = e->role.pp_i + 1;
	e->next = nb.pp_i < c->pp ? bp_role_rank(c, nb) : -1;
	for (size_t i = o->step_lo; i < o->step_hi; i++) {
		const struct bp_step *s = &plan->steps[i];
		if (s->npipes != (size_t)c->dp) {
			bp_errorf(err, "step %zu has %zu pipelines, expected dp = %d", i, s->npipes,
				  c->dp);
			goto fail;
		}
		for (size_t k = 0; k < s->npipes; k++)
			if (s->pipes[k].nmbs > e->mmax)
				e->mmax = s->pipes[k].nmbs;
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
	/* Every rank makes its groups in the same order: TP, CP, gradient sync. */
	if (make_group(e, 0, &e->g_tp, &e->n_tp, err) < 0 ||
	    make_group(e, 1, &e->g_cp, &e->n_cp, err) < 0 ||
	    make_group(e, 2, &e->g_sync, &e->n_sync, err) < 0)
		goto fail;
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
	const struct bp_cluster *c = &p->cluster;
	const struct bp_step *st = &p->steps[si];
	const struct bp_pipe *pi = &st->pipes[e->role.dp_i];
	const struct bp_backend *be = e->be;
	int pp = c->pp, s = e->role.pp_i, rc;
	size_t m = pi->nmbs;
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
	for (size_t k = 0; k < 2 * m; k++) {
		size_t j;
		int bwd = bp_sim_1f1b_op(pp, m, s, k, &j);
		const struct bp_mb *mb = &pi->mbs[j];
		double tokens = (double)mb->tokens;
		/* Bytes as bp_cost_p2p counts them: the micro-batch's hidden states per TP/CP
		 * shard; a CP rank's K and V; a TP shard's partial sums of its CP share. */
		double p2p_bytes = tokens * e->cm->token_bytes / (c->tp * c->cp);
		double kv_bytes = tokens / c->cp * e->cm->kv_token_bytes / c->tp;
		double tp_bytes = tokens / c->cp * e->cm->token_bytes;
		double p2p_us = bp_cost_p2p(e->cm, mb->tokens);
		w.mb = (int64_t)j;
		if (!bwd && e->prev >= 0) {
			w.what = "pp recv of an activation";
			w.peer = e->prev;
			rc = recv_p2p(e, e->prev, j, 0, p2p_bytes, p2p_us, &w, err);
		} else if (bwd && e->next >= 0) {
			w.what = "pp recv of a gradient";
			w.peer = e->next;
			rc = recv_p2p(e, e->next, j, 1, p2p_bytes, p2p_us, &w, err);
		} else {
			rc = 0;
		}
		if (rc != 0)
			return rc;
		double t_op = be->now_us(e->st);
		w.peer = -1;
		w.what = bwd ? "backward" : "forward";
		struct bp_op op = {bwd, s, e->cm->stage_layers[s], st->index, (int64_t)j, mb,
				   &p->model, t_op, (bwd ? mb->bwd[s] : mb->fwd[s]) * scale,
				   {{BP_EXEC_ALLREDUCE, e->g_tp, e->tp_buf, e->tp_buf,
				     cap_bytes(e, tp_bytes, 2), "tp all-reduce"},
				    {bwd ? BP_EXEC_REDUCESCATTER : BP_EXEC_ALLGATHER, e->g_cp, e->cin,
				     e->cout, cap_bytes(e, kv_bytes, e->n_cp),
				     bwd ? "cp reduce-scatter of dK and dV"
					 : "cp all-gather of K and V"}},
				   w};
		if ((rc = be->compute(e->st, &op, err)) != 0)
			return rc;
		double t_end = be->now_us(e->st);
		double *slot = rec + REC_HEAD + REC_MB * j;
		slot[bwd * 2] = t_op - t0;
		slot[bwd * 2 + 1] = t_end - t_op;
		if (!bwd && e->next >= 0)
			rc = send_p2p(e, e->next, j, 0, p2p_bytes, err);
		else if (bwd && e->prev >= 0)
			rc = send_p2p(e, e->prev, j, 1, p2p_bytes, err);
		if (rc != 0)
			return rc;
	}
	double t_pipe = be->now_us(e->st);
	w.mb = -1;
	if (e->g_sync) {
		/* Distributed optimizer: reduce-scatter then all-gather of the stage's bf16
		 * gradients over the dp*cp replicas; the emulated time starts on arrival. */
		double params = (double)bp_model_layer_params(&p->model) * e->cm->stage_layers[s];
		if (s == 0)
			params += (double)p->model.hidden * p->model.vocab; /* embedding */
		if (s == pp - 1)
			params += (double)p->model.hidden * p->model.vocab; /* LM head */
		double gbytes = 2.0 * params / c->tp;
		size_t n = cap_bytes(e, gbytes / e->n_sync, e->n_sync);
		w.what = "gradient reduce-scatter";
		if ((rc = be->reducescatter(e->st, e->g_sync, e->cin, e->cout, n, &w, err)) != 0)
			return rc;
		w.what = "gradient all-gather";
		if ((rc = be->allgather(e->st, e->g_sync, e->cout, e->cin, n, &w, err)) != 0)
			return rc;
		if (be->idle_until &&
		    be->idle_until(e->st, t_pipe + bp_cost_grad_sync(e->cm, s) * scale, err) < 0)
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
	const struct bp_cluster *c = &p->cluster;
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
	tr->tp = c->tp;
	tr->cp = c->cp;
	tr->pp = c->pp;
	tr->dp = c->dp;
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
			struct bp_role ro = bp_rank_role(c, r);
			size_t m = ps->pipes[ro.dp_i].nmbs;
			tr_r->rank = r;
			tr_r->tp_i = ro.tp_i;
			tr_r->cp_i = ro.cp_i;
			tr_r->dp_i = ro.dp_i;
			tr_r->pp_i = ro.pp_i;
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
