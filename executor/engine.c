/* engine.c: the replay engine (engine.h; executor/README.md "What a rank does"; issues 4, 9).
 *
 * Per step: a world barrier (so every rank's clock starts together), then this rank's part of
 * the step's schedule, then the gradient synchronisation of its stage. On a "1f1b" layout the
 * schedule is the rank's pipeline in the 1F1B order of planner/sim/sim.c; per operation the
 * activation (forward) or gradient (backward) from the neighbour stage, the layer loop
 * (bp_eng_op), and the send to the other neighbour. A "distca-ticks" layout is replayed by
 * engine_ticks.c with the same layer loop.
 *
 * The layer loop (bp_eng_op) owns the order of the primitives: per layer forward the QKV
 * GEMM, the CP all-gather of K and V (cp > 1), attention of the micro-batch's kind (dense
 * or sparse, where the tokens are), the O GEMM, a TP all-reduce, the FFN GEMMs, a TP
 * all-reduce (tp > 1), and the LM head after the last layer of the last stage; backward the
 * mirror image (the LM head first; per layer FFN, TP all-reduce, O, attention, the CP
 * reduce-scatter of dK and dV, QKV, TP all-reduce). Communication moves the real byte counts
 * of the cost model, capped by max_bytes.
 *
 * An emulating backend (one with idle_until) also reproduces the simulator's timing model:
 * each compute primitive's work ends at its deadline, the op's start plus the running sum
 * of the shares up to it (shares.h: bp_cost_mb's decomposed time, scaled to the plan's op
 * time, x time scale; a communication's share moves the clock on), and the rank sleeps to
 * the last one at the op's end, so an op lasts the plan's predicted time from its start; its
 * collectives, in flight meanwhile, must be done before its next op starts (and only then
 * lengthen the step, when they take longer than the time they had). An activation arrives
 * bp_cost_p2p after the sender finished (the sender's wall-clock time travels in a header
 * message); the gradient synchronisation lasts bp_cost_grad_sync of the stage from when the
 * rank reaches it. So the measured step time is the simulator's prediction times
 * time_scale, plus scheduling noise.
 *
 * Hydraulis's optimisation-propagation disaggregation (Sec. 5.2, a step's sync
 * hydraulis-pullpush[-serial]): the pull of bf16 parameter slices from the optimizer shards
 * on every rank right after the barrier, the push of gradient slices at the end, each one
 * all-to-all over the world with the LNK's per-pair byte counts (lnk_pair: the overlap of
 * an optimizer shard with a (stage, TP rank) slice, Fig. 7's mutual slices); the emulated
 * sync lasts the plan's grad_sync_us from the rank's pipeline end.
 *
 * A plan with grad_sync=overlap (Megatron-LM's reduce-scatter during the last backward,
 * sim/predict.c): the emulating backend moves the same bytes after the rank's pipeline and
 * ends its sync when the simulator's overlapped sync ends (bp_sync_overlap_wait: the step's
 * last reduce-scatter, or the slowest pipeline, then the all-gathers); a backend that runs
 * the collectives for real (no idle_until) would run them after the pipeline, so
 * bp_engine_check refuses such a plan there. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_int.h"
#include "method.h"
#include "predict.h"
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


size_t bp_eng_cap(const struct bp_engine *e, double bytes, int n)
{
	double cap = (double)e->o.max_bytes / (n > 0 ? n : 1);
	if (bytes > cap)
		bytes = cap;
	if (bytes < 1)
		bytes = 1;
	return (size_t)bytes;
}

double bp_eng_wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* The members of this rank's group of a kind in layout l: TP (same pipeline, stage and CP
 * position), CP (same pipeline, stage and TP position), gradient sync (the same stage and
 * TP position in every pipeline of the same tp and pp, all CP positions, whatever the
 * pipeline's cp: the replicas predict.c's dp-allreduce reduces over, costmodel.h
 * sync_ranks) or all-to-all (every rank of the layout: its
 * pipelines' and its attention servers; distca-ticks only). A rank outside every such group
 * is a group of one. */
enum { G_TP, G_CP, G_SYNC, G_A2A };
static const char *const group_names[] = {"tp", "cp", "gradient-sync", "all-to-all"};

static int group_members(const struct bp_layout *l, const struct bp_place *me, int world,
			 int kind, int self, int *ranks)
{
	int cnt = 0;
	if (kind == G_A2A) {
		if (me->pipe < 0 && me->server < 0) {
			ranks[0] = self;
			return 1;
		}
		for (int r = 0; r < world; r++) {
			struct bp_place o = bp_layout_place(l, r);
			if (o.pipe >= 0 || o.server >= 0)
				ranks[cnt++] = r;
		}
		return cnt;
	}
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
		if (kind == G_TP)
			same = o.pipe == me->pipe && o.cp_i == me->cp_i;
		else if (kind == G_CP)
			same = o.pipe == me->pipe && o.tp_i == me->tp_i;
		else
			same = o.tp_i == me->tp_i && op->sc.tp == mp->sc.tp && op->sc.pp == mp->sc.pp;
		if (same)
			ranks[cnt++] = r;
	}
	return cnt;
}

/* Every world rank calls this for every (layout, kind) in the same order, so backends whose
 * group creation is collective over the world (NCCL's split) see the same sequence. keep:
 * where the members go (NULL: freed). */
static int make_group(struct bp_engine *e, size_t li, int kind, void **g, int *n, int **keep,
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
		bp_error_prefix(err, "cannot make the %s group of layout %zu", group_names[kind],
				li);
	if (keep && rc == 0)
		*keep = ranks;
	else
		free(ranks);
	return rc;
}

void bp_engine_free(struct bp_engine *e)
{
	if (!e)
		return;
	for (size_t i = 0; e->lr && i < e->nl; i++) {
		struct lrole *r = &e->lr[i];
		void *g[] = {r->g_tp, r->g_cp, r->g_sync, r->g_a2a};
		for (size_t k = 0; k < BP_ARRAY_LEN(g); k++)
			if (g[k])
				e->be->group_free(e->st, g[k]);
		free(r->a2a_ranks);
	}
	free(e->lr);
	if (e->g_world)
		e->be->group_free(e->st, e->g_world);
	free(e->lnk);
	free(e->payload);
	free(e->cin);
	free(e->cout);
	free(e->tp_buf);
	free(e->hdr);
	free(e->rec);
	free(e->arrive);
	free(e);
}

int bp_engine_check(const struct bp_plan *plan, const struct bp_backend *be, size_t lo,
		    size_t hi, struct bp_error *err)
{
	for (size_t i = lo; i < hi && i < plan->nsteps; i++) {
		const struct bp_step *s = &plan->steps[i];
		const struct bp_layout *l = bp_plan_layout(plan, s);
		const struct bp_schedule *sch = bp_layout_schedule(l);
		if (!sch || (!sch->op && !sch->world_ticks))
			return bp_errorf(err, "step %lld runs layout %d's \"%s\" schedule, which "
					 "the engine cannot replay", (long long)s->index,
					 s->layout, l->schedule);
		int overlap = bp_step_grad_overlap(plan, s, err);
		if (overlap < 0)
			return -1;
		if (overlap && !be->idle_until)
			return bp_errorf(err, "step %lld asks for grad_sync=%s (the gradient "
					 "reduce-scatter during the last backward), which the %s "
					 "backend cannot replay: it runs the sync after the pipeline; "
					 "the host backend emulates it, or solve without the parameter",
					 (long long)s->index, bp_grad_sync_names[overlap], be->name);
		for (size_t k = 0; k < s->npipes; k++)
			for (size_t j = 0; j < s->pipes[k].nmbs; j++) {
				enum bp_attn_kind a = s->pipes[k].mbs[j].attn;
				const char *why = be->unsupported ? be->unsupported(a) : NULL;
				if (why)
					return bp_errorf(err, "step %lld pipeline %zu micro-batch %zu "
							 "has %s attention, which the %s backend "
							 "cannot replay: %s", (long long)s->index,
							 k, j, bp_attn_kind_name(a), be->name, why);
			}
	}
	return 0;
}

/* The engine's options against the plan and the world: 0, or -1 with err. */
static int check_opts(const struct bp_plan *plan, const struct bp_backend *be, int rank,
		      int world, const struct bp_engine_opts *o, struct bp_error *err)
{
	const struct bp_cluster *c = &plan->cluster;
	if (world != c->gpus)
		return bp_errorf(err, "the plan needs %d ranks, the world has %d", c->gpus, world);
	if (rank < 0 || rank >= world)
		return bp_errorf(err, "rank %d is outside the world of %d", rank, world);
	if (o->step_lo >= o->step_hi || o->step_hi > plan->nsteps)
		return bp_errorf(err, "steps %zu:%zu are outside the plan's 0:%zu", o->step_lo,
				 o->step_hi, plan->nsteps);
	if (!(o->time_scale > 0) || !(o->timeout_s > 0) || o->max_bytes < 64)
		return bp_errorf(err, "bad engine options");
	return bp_engine_check(plan, be, o->step_lo, o->step_hi, err);
}

/* This rank's role in layout l (r->pl: its place), its pipeline neighbours and cost model;
 * e->vmax and e->lmax grow to the layout's chunks and stage layers. */
static int make_role(struct bp_engine *e, const struct bp_layout *l, struct lrole *r,
		     struct bp_error *err)
{
	r->pl = bp_layout_place(l, e->rank);
	r->prev = r->next = r->wrap_prev = r->wrap_next = -1;
	r->sched = bp_layout_schedule(l);
	r->v = l->vstages > 1 ? l->vstages : 1;
	if (r->v > e->vmax)
		e->vmax = r->v;
	r->ticks = r->sched->world_ticks;
	r->active = r->pl.pipe >= 0 || (r->ticks && r->pl.server >= 0);
	for (size_t k = 0; k < l->npipes; k++)
		for (int s = 0; s < l->pipes[k].sc.pp; s++)
			if (l->pipes[k].stage_layers[s] > e->lmax)
				e->lmax = l->pipes[k].stage_layers[s];
	if (r->pl.pipe < 0)
		return 0;
	const struct bp_lpipe *lp = &l->pipes[r->pl.pipe];
	r->cm = bp_costs_pipe(e->costs, l, (size_t)r->pl.pipe, err);
	if (!r->cm)
		return -1;
	if (r->pl.stage > 0)
		r->prev = bp_lpipe_rank(lp, r->pl.stage - 1, r->pl.cp_i, r->pl.tp_i);
	if (r->pl.stage + 1 < lp->sc.pp)
		r->next = bp_lpipe_rank(lp, r->pl.stage + 1, r->pl.cp_i, r->pl.tp_i);
	if (r->v > 1 && r->pl.stage == 0)
		r->wrap_prev = bp_lpipe_rank(lp, lp->sc.pp - 1, r->pl.cp_i, r->pl.tp_i);
	if (r->v > 1 && r->pl.stage == lp->sc.pp - 1)
		r->wrap_next = bp_lpipe_rank(lp, 0, r->pl.cp_i, r->pl.tp_i);
	return 0;
}

/* The buffers of the replay, sized by the largest pipeline (e->mmax micro-batches) of the
 * steps run. */
static int make_buffers(struct bp_engine *e, struct bp_error *err)
{
	const struct bp_engine_opts *o = &e->o;
	for (size_t i = o->step_lo; i < o->step_hi; i++) {
		const struct bp_step *s = &e->plan->steps[i];
		for (size_t k = 0; k < s->npipes; k++)
			if (s->pipes[k].nmbs > e->mmax)
				e->mmax = s->pipes[k].nmbs;
	}
	/* Tags are (micro-batch, chunk, direction, header/payload): MPI guarantees tags up to
	 * 32767. */
	if (e->mmax * (size_t)e->vmax * 4 > 32767)
		return bp_errorf(err, "a pipeline has %zu micro-batches of %d model chunks, more "
				 "than the 8191 the tags allow", e->mmax, e->vmax);
	e->nsteps = o->step_hi - o->step_lo;
	e->rec_len = REC_HEAD + REC_MB * e->mmax;
	/* The payload stays zero (calloc): only its size matters, and untouched pages of a
	 * large cap (the CUDA backend's) cost no memory. */
	e->payload = bp_calloc((size_t)o->max_bytes, 1, err);
	e->cin = bp_calloc((size_t)o->max_bytes, 1, err);
	e->cout = bp_calloc((size_t)o->max_bytes, 1, err);
	e->tp_buf = bp_calloc((size_t)o->max_bytes / 2, 1, err);
	e->hdr = bp_calloc(2 * e->mmax * (size_t)e->vmax + 1, sizeof(double), err);
	e->rec = bp_calloc(e->nsteps * e->rec_len, sizeof(double), err);
	e->arrive = bp_calloc((size_t)e->world + 1, sizeof(double), err);
	if (!e->payload || !e->cin || !e->cout || !e->tp_buf || !e->hdr || !e->rec || !e->arrive)
		return -1;
	return 0;
}

/* Every rank makes its groups in the same order: per layout, TP, CP, gradient sync, and for
 * a distca-ticks layout the all-to-all group; then, where a step pulls or pushes
 * (Hydraulis's slices move between every pair of world ranks), the world group. */
static int make_groups(struct bp_engine *e, struct bp_error *err)
{
	for (size_t i = 0; i < e->nl; i++) {
		struct lrole *r = &e->lr[i];
		if (make_group(e, i, G_TP, &r->g_tp, &r->n_tp, NULL, err) < 0 ||
		    make_group(e, i, G_CP, &r->g_cp, &r->n_cp, NULL, err) < 0 ||
		    make_group(e, i, G_SYNC, &r->g_sync, &r->n_sync, NULL, err) < 0)
			return -1;
		if (r->ticks &&
		    make_group(e, i, G_A2A, &r->g_a2a, &r->n_a2a, &r->a2a_ranks, err) < 0)
			return -1;
	}
	int lnk = 0, world = e->world;
	for (size_t i = e->o.step_lo; i < e->o.step_hi; i++)
		lnk |= bp_eng_pullpush(&e->plan->steps[i]);
	if (!lnk || world <= 1)
		return 0;
	int *all = bp_calloc((size_t)world, sizeof(int), err);
	e->lnk = bp_calloc(4 * (size_t)world, sizeof(size_t), err);
	if (!all || !e->lnk) {
		free(all);
		return -1;
	}
	for (int q = 0; q < world; q++)
		all[q] = q;
	int rc = e->be->group_create(e->st, all, world, &e->g_world, err);
	free(all);
	if (rc < 0) {
		bp_error_prefix(err, "cannot make the world group of the pull and push");
		return -1;
	}
	return 0;
}

struct bp_engine *bp_engine_new(const struct bp_plan *plan, struct bp_costs *costs,
				const struct bp_backend *be, void *st, int rank, int world,
				const struct bp_engine_opts *o, struct bp_error *err)
{
	if (check_opts(plan, be, rank, world, o, err) < 0)
		return NULL;
	struct bp_engine *e = bp_calloc(1, sizeof(*e), err);
	if (!e)
		return NULL;
	e->plan = plan;
	e->costs = costs;
	e->be = be;
	e->st = st;
	e->o = *o;
	e->rank = rank;
	e->world = world;
	e->nl = plan->nlayouts;
	e->lr = bp_calloc(e->nl + 1, sizeof(*e->lr), err);
	if (!e->lr)
		goto fail;
	for (size_t i = 0; i < e->nl; i++)
		if (make_role(e, &plan->layouts[i], &e->lr[i], err) < 0)
			goto fail;
	if (make_buffers(e, err) < 0 || make_groups(e, err) < 0)
		goto fail;
	return e;
fail:
	bp_engine_free(e);
	return NULL;
}

int bp_eng_recv_p2p(struct bp_engine *e, int peer, size_t j, int dir, double bytes,
		    double p2p_us, struct bp_wait *w, struct bp_error *err)
{
	double sent = 0;
	int tag = (int)(j * 4 + (size_t)dir * 2);
	size_t n = bp_eng_cap(e, bytes, 1);
	int rc = e->be->recv(e->st, &sent, sizeof(sent), peer, tag, w, err);
	if (rc == 0)
		rc = e->be->recv(e->st, e->cout, n, peer, tag + 1, w, err);
	if (rc != 0 || !e->be->idle_until)
		return rc;
	double lat = p2p_us * e->o.time_scale;
	double delay = sent + lat - bp_eng_wall_us();
	if (delay > lat)
		delay = lat; /* clocks of two hosts disagree: never more than the transfer */
	if (delay <= 0)
		return 0;
	return e->be->idle_until(e->st, e->be->now_us(e->st) + delay, err);
}

int bp_eng_send_p2p(struct bp_engine *e, int peer, size_t j, int dir, double bytes,
		    struct bp_error *err)
{
	int tag = (int)(j * 4 + (size_t)dir * 2);
	double *h = &e->hdr[j * 2 + (size_t)dir];
	size_t n = bp_eng_cap(e, bytes, 1);
	*h = bp_eng_wall_us();
	if (e->be->send(e->st, h, sizeof(*h), peer, tag, err) < 0 ||
	    e->be->send(e->st, e->payload, n, peer, tag + 1, err) < 0)
		return -1;
	bp_eng_count(e, BP_EXEC_PP, (double)n);
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

/* ---- the layer loop ---- */

double bp_eng_advance(const struct bp_engine *e, struct op_run *o, double share)
{
	o->acc += share * e->o.time_scale;
	return o->t0 + o->acc;
}

int bp_eng_idle(struct bp_engine *e, double t_us, struct bp_error *err)
{
	return e->be->idle_until ? e->be->idle_until(e->st, t_us, err) : 0;
}

int bp_eng_stamp(struct bp_engine *e, struct op_run *o, double *t, struct bp_error *err)
{
	int rc = e->be->idle_until ? e->be->idle_until(e->st, o->t0 + o->acc, err)
				   : e->be->sync(e->st, &o->w, err);
	*t = e->be->now_us(e->st);
	return rc;
}

static int op_gemm(struct bp_engine *e, struct op_run *o, enum bp_gemm_kind kind, double share,
		   struct bp_error *err)
{
	double until = bp_eng_advance(e, o, share);
	if (!o->tokens)
		return 0;
	struct bp_gemm g = {kind, o->bwd, o->tokens, o->tp, &e->plan->model, until, &o->w};
	return e->be->gemm(e->st, &g, err);
}

/* The TP all-reduce. Its share only moves the clock on: the next deadline includes it. */
static int op_tp(struct bp_engine *e, struct op_run *o, double share, struct bp_error *err)
{
	int rc;
	bp_eng_advance(e, o, share);
	if (o->mb && o->r->n_tp > 1) { /* a TP group runs one op: all or none */
		size_t n = bp_eng_cap(e, o->tp_bytes, 2);
		o->w.what = "tp all-reduce";
		rc = e->be->allreduce(e->st, o->r->g_tp, NULL, n, &o->w, err);
		if (rc != 0)
			return rc;
		bp_eng_count(e, BP_EXEC_TP, (double)n);
	}
	return 0;
}

/* The CP all-gather of K and V (forward) or reduce-scatter of dK and dV (backward). */
static int op_cp(struct bp_engine *e, struct op_run *o, double share, struct bp_error *err)
{
	int rc;
	bp_eng_advance(e, o, share);
	if (o->mb && o->r->n_cp > 1 && o->mb->attn != BP_ATTN_DISAGG) {
		size_t n = bp_eng_cap(e, o->kv_bytes, o->r->n_cp);
		if (o->bwd) {
			o->w.what = "cp reduce-scatter of dK and dV";
			rc = e->be->reducescatter(e->st, o->r->g_cp, e->cin, NULL, n, &o->w, err);
		} else {
			o->w.what = "cp all-gather of K and V";
			rc = e->be->allgather(e->st, o->r->g_cp, e->cin, NULL, n, &o->w, err);
		}
		if (rc != 0)
			return rc;
		bp_eng_count(e, BP_EXEC_CP, (double)n);
	}
	return 0;
}

/* Attention where the tokens are: dense or sparse (a disaggregated micro-batch's runs on
 * the servers, engine_ticks.c). layer: the stage's. */
static int op_attn(struct bp_engine *e, struct op_run *o, int layer, double share,
		   struct bp_error *err)
{
	double until = bp_eng_advance(e, o, share);
	if (!o->mb || !o->tokens || !o->nseg || o->mb->attn == BP_ATTN_DISAGG)
		return 0;
	struct bp_attn a = {o->bwd, o->seg, o->nseg, o->tp, &e->plan->model, 0, 0, until, &o->w};
	o->w.what = o->bwd ? "attention backward" : "attention forward";
	if (o->mb->attn == BP_ATTN_SPARSE) {
		a.block = o->mb->sparse_block;
		a.k = o->mb->sparse_k[o->sh.first_layer + layer];
		return e->be->attn_sparse(e->st, &a, err);
	}
	return e->be->attn_dense(e->st, &a, err);
}

/* Runs body's primitives as one phase of the rank's own work: with a middle (ticks), the
 * time up to its start and up to its end is slept (bp_eng_stamp) and its wall time counts
 * into compute_us. */
#define OWN_PHASE(body)                                                                \
	do {                                                                           \
		double t_a_ = 0, t_b_ = 0;                                             \
		if (o->middle && (rc = bp_eng_stamp(e, o, &t_a_, err)) != 0)           \
			return rc;                                                     \
		body;                                                                  \
		if (o->middle) {                                                       \
			if ((rc = bp_eng_stamp(e, o, &t_b_, err)) != 0)                \
				return rc;                                             \
			o->compute_us += t_b_ - t_a_;                                  \
		}                                                                      \
	} while (0)

#define RUN(call)                                                                      \
	do {                                                                           \
		if ((rc = (call)) != 0)                                                \
			return rc;                                                     \
	} while (0)

int bp_eng_op(struct bp_engine *e, struct op_run *o, struct bp_error *err)
{
	int rc = 0, L = o->sh.layers;
	const char *what = o->w.what;
	if (o->bwd && o->last && o->sh.lm > 0)
		OWN_PHASE(RUN(op_gemm(e, o, BP_GEMM_LM_HEAD, o->sh.lm, err)));
	for (int i = 0; i < L; i++) {
		int l = o->bwd ? L - 1 - i : i;
		const struct bp_layer_share *s = &o->sh.l[l];
		o->w.what = what;
		if (!o->bwd) {
			OWN_PHASE({
				RUN(op_gemm(e, o, BP_GEMM_QKV, s->qkv, err));
				RUN(op_cp(e, o, s->cp, err));
				RUN(op_attn(e, o, l, s->attn, err));
			});
			if (o->middle)
				RUN(o->middle(e, o, l, err));
			OWN_PHASE({
				o->w.what = what;
				RUN(op_gemm(e, o, BP_GEMM_O, s->o, err));
				RUN(op_tp(e, o, s->tp_a, err));
				o->w.what = what;
				RUN(op_gemm(e, o, BP_GEMM_FFN, s->ffn, err));
				RUN(op_tp(e, o, s->tp_b, err));
			});
		} else {
			/* Full recompute (Korthikanti et al. Sec. 5): the layer's forward GEMMs and
			 * attention again before its backward. Their time is inside the backward's
			 * shares (the cost model adds it there), so they carry none of their own: an
			 * emulating backend sleeps nothing for them, a real one runs them. The
			 * forward's collectives are priced, not replayed. */
			if (e->plan->recompute == BP_RECOMPUTE_FULL)
				OWN_PHASE({
					o->bwd = 0;
					RUN(op_gemm(e, o, BP_GEMM_QKV, 0.0, err));
					RUN(op_attn(e, o, l, 0.0, err));
					RUN(op_gemm(e, o, BP_GEMM_O, 0.0, err));
					RUN(op_gemm(e, o, BP_GEMM_FFN, 0.0, err));
					o->bwd = 1;
				});
			OWN_PHASE({
				RUN(op_gemm(e, o, BP_GEMM_FFN, s->ffn, err));
				RUN(op_tp(e, o, s->tp_b, err));
				o->w.what = what;
				RUN(op_gemm(e, o, BP_GEMM_O, s->o, err));
				RUN(op_attn(e, o, l, s->attn, err));
				RUN(op_cp(e, o, s->cp, err));
			});
			if (o->middle)
				RUN(o->middle(e, o, l, err));
			OWN_PHASE({
				o->w.what = what;
				RUN(op_gemm(e, o, BP_GEMM_QKV, s->qkv, err));
				RUN(op_tp(e, o, s->tp_a, err));
			});
		}
	}
	o->w.what = what;
	if (!o->bwd && o->last && o->sh.lm > 0)
		OWN_PHASE(RUN(op_gemm(e, o, BP_GEMM_LM_HEAD, o->sh.lm, err)));
	return 0;
}

void bp_eng_step_ops_release(struct step_ops *o)
{
	free(o->tokens);
	free(o->seg);
	free(o->seg_at);
	free(o->sh);
	free(o->ls);
	memset(o, 0, sizeof(*o));
}

int bp_eng_step_ops(const struct bp_step *st, const struct lrole *r, struct step_ops *out,
		    struct bp_error *err)
{
	const struct bp_costmodel *cm = r->cm;
	const struct bp_pipe *pi = &st->pipes[r->pl.pipe];
	int s = r->pl.stage, cp = cm->sc.cp, L = cm->stage_layers[s];
	size_t m = pi->nmbs, nseg = 0, cap = 0;
	memset(out, 0, sizeof(*out));
	out->m = m;
	out->layers = L;
	for (size_t j = 0; j < m; j++)
		cap += 2 * pi->mbs[j].nspans + 4; /* bp_shard_segments' bound */
	out->tokens = bp_calloc(m + 1, sizeof(int64_t), err);
	out->seg = bp_calloc(cap + 1, sizeof(*out->seg), err);
	out->seg_at = bp_calloc(m + 1, sizeof(size_t), err);
	out->sh = bp_calloc(2 * m + 1, sizeof(*out->sh), err);
	out->ls = bp_calloc((2 * m + 1) * (size_t)L, sizeof(*out->ls), err);
	if (!out->tokens || !out->seg || !out->seg_at || !out->sh || !out->ls)
		goto fail;
	for (size_t j = 0; j < m; j++) {
		const struct bp_mb *mb = &pi->mbs[j];
		size_t k = bp_shard_segments(mb->spans, mb->nspans, mb->shard, cp, r->pl.cp_i,
					     out->seg + nseg, cap - nseg, &out->tokens[j]);
		if (k > cap - nseg) { /* cannot happen with 2n + 4 each */
			bp_errorf(err, "internal: %zu shard segments", k);
			goto fail;
		}
		out->seg_at[j] = nseg;
		nseg += k;
		for (int b = 0; b < 2; b++) {
			struct bp_op_shares *sh = &out->sh[2 * j + (size_t)b];
			sh->l = &out->ls[(2 * j + (size_t)b) * (size_t)L];
			if (bp_op_shares(cm, mb, s, b, b ? mb->bwd[s] : mb->fwd[s], sh, err) < 0) {
				bp_error_prefix(err, "step %lld micro-batch %zu",
						(long long)st->index, j);
				goto fail;
			}
		}
	}
	out->seg_at[m] = nseg;
	return 0;
fail:
	bp_eng_step_ops_release(out);
	return -1;
}

void bp_eng_op_from(struct op_run *o, const struct step_ops *so, int64_t j, int bwd)
{
	if (j < 0) { /* a dummy: the zero shares at the end */
		o->sh = (struct bp_op_shares){so->layers, 0, 0.0, 0.0,
					      &so->ls[2 * so->m * (size_t)so->layers]};
		o->tokens = 0;
		o->nseg = 0;
		return;
	}
	o->sh = so->sh[2 * (size_t)j + (size_t)bwd];
	o->tokens = so->tokens[j];
	o->seg = (const int64_t(*)[2])(so->seg + so->seg_at[j]);
	o->nseg = so->seg_at[j + 1] - so->seg_at[j];
}

int bp_eng_pullpush(const struct bp_step *st)
{
	return !strcmp(st->sync, BP_SYNC_HYD_PULLPUSH) ||
	       !strcmp(st->sync, BP_SYNC_HYD_PULLPUSH_SERIAL);
}

/* Bytes optimizer shard `o` moves to GPU g in the pull of Hydraulis's LNK (Sec. 5.2,
 * Fig. 7), the push moving the same back: the optimizer shards every parameter over the N
 * world ranks (rank o owns its o-th N-th), a pipeline's (stage, TP rank r) GPU holds the r-th
 * tp-th of its stage's parameters (every CP rank the same), so o sends g their overlap, in
 * mutual slices of 1 / LCM(N, tp): 2 stage_params |[o/N, (o+1)/N) & [r/tp, (r+1)/tp)|
 * bytes (bf16). A GPU outside the step's pipelines receives nothing; a rank's own slice is a
 * local move (0 here). The same arithmetic on every rank gives every rank's counts. */
static double lnk_pair(const struct bp_layout *l, const struct bp_costmodel *const *cms,
		       int world, int o, int g)
{
	if (o == g)
		return 0.0;
	struct bp_place pl = bp_layout_place(l, g);
	if (pl.pipe < 0)
		return 0.0;
	const struct bp_costmodel *cm = cms[pl.pipe];
	int64_t tp = cm->sc.tp, n = world, r = pl.tp_i;
	int64_t lo = (int64_t)o * tp > r * n ? (int64_t)o * tp : r * n;
	int64_t hi = (int64_t)(o + 1) * tp < (r + 1) * n ? (int64_t)(o + 1) * tp : (r + 1) * n;
	if (hi <= lo)
		return 0.0;
	return 2.0 * bp_cost_stage_params(cm, pl.stage) * (double)(hi - lo) / (double)(n * tp);
}

/* This rank's LNK counts for the step (e->lnk: send, sdispl, recv, rdispl per world rank,
 * the pull's direction; the push swaps send and recv), all scaled by one factor so that the
 * busiest rank moves at most max_bytes each way: the same factor on every rank keeps every
 * pair's send and receive equal. Returns the rank's unscaled bytes out (pull). */
static int lnk_counts(struct bp_engine *e, const struct bp_step *st, double *mine,
		      struct bp_error *err)
{
	const struct bp_layout *l = bp_plan_layout(e->plan, st);
	int n = e->world, rc = -1;
	const struct bp_costmodel **cms = bp_calloc(l->npipes + 1, sizeof(*cms), err);
	double *out = bp_calloc((size_t)n, sizeof(double), err);
	double *in = bp_calloc((size_t)n, sizeof(double), err);
	if (!cms || !out || !in)
		goto done;
	for (size_t k = 0; k < l->npipes; k++)
		if (!(cms[k] = bp_costs_pipe(e->costs, l, k, err)))
			goto done;
	double peak = 0.0;
	for (int o = 0; o < n; o++)
		for (int g = 0; g < n; g++) {
			double b = lnk_pair(l, cms, n, o, g);
			out[o] += b;
			in[g] += b;
		}
	for (int q = 0; q < n; q++) {
		peak = out[q] > peak ? out[q] : peak;
		peak = in[q] > peak ? in[q] : peak;
	}
	double f = peak > (double)e->o.max_bytes ? (double)e->o.max_bytes / peak : 1.0;
	size_t *snd = e->lnk, *sd = snd + n, *rcv = sd + n, *rd = rcv + n, so = 0, ro = 0;
	for (int q = 0; q < n; q++) {
		snd[q] = (size_t)(lnk_pair(l, cms, n, e->rank, q) * f);
		rcv[q] = (size_t)(lnk_pair(l, cms, n, q, e->rank) * f);
		sd[q] = so;
		rd[q] = ro;
		so += snd[q];
		ro += rcv[q];
	}
	*mine = out[e->rank];
	rc = 0;
done:
	free(cms);
	free(out);
	free(in);
	return rc;
}

int bp_eng_lnk(struct bp_engine *e, const struct bp_step *st, int push, struct bp_error *err)
{
	if (e->world < 2)
		return 0;
	double mine;
	int rc, n = e->world;
	if (lnk_counts(e, st, &mine, err) < 0)
		return -1;
	size_t *snd = e->lnk, *sd = snd + n, *rcv = sd + n, *rd = rcv + n, total = 0;
	struct bp_wait w = {push ? "hydraulis push" : "hydraulis pull", -1, st->index, -1};
	struct bp_a2a a = {e->g_world, e->payload, NULL, push ? rcv : snd, push ? rd : sd,
			   push ? snd : rcv, push ? sd : rd, &w};
	for (int q = 0; q < n; q++)
		total += push ? rcv[q] : snd[q];
	if ((rc = e->be->alltoallv(e->st, &a, err)) != 0)
		return rc;
	bp_eng_count(e, BP_EXEC_SYNC, (double)total);
	return e->be->sync(e->st, &w, err);
}

int bp_eng_finish_step(struct bp_engine *e, const struct bp_step *st, const struct lrole *r,
		       double t0, double t_pipe, double *rec, struct bp_error *err)
{
	const struct bp_backend *be = e->be;
	struct bp_wait w = {"gradient reduce-scatter", -1, st->index, -1};
	int rc;
	if (bp_eng_pullpush(st)) {
		/* Hydraulis Sec. 5.2: the gradients pushed to the optimizer shards; the emulated
		 * time is the plan's exposed pull/push and optimizer step (sim/predict.c's sync
		 * model, which already overlaps the pull with the first forwards), charged from
		 * the rank's pipeline end, so the slowest pipeline sets the step's end. */
		w.what = "hydraulis push";
		if ((rc = be->sync(e->st, &w, err)) != 0 || (rc = bp_eng_lnk(e, st, 1, err)) != 0)
			return rc;
		if (bp_eng_idle(e, t_pipe + st->m.grad_sync_us * e->o.time_scale, err) < 0)
			return -1;
	} else if (r->n_sync > 1) {
		/* Distributed optimizer: reduce-scatter then all-gather of the stage's bf16
		 * gradients over its replicas; the emulated time starts on arrival. */
		const struct bp_costmodel *cm = r->cm;
		int s = r->pl.stage;
		double gbytes = 2.0 * bp_cost_stage_params(cm, s) / cm->sc.tp;
		size_t n = bp_eng_cap(e, gbytes / r->n_sync, r->n_sync);
		if ((rc = be->reducescatter(e->st, r->g_sync, e->cin, NULL, n, &w, err)) != 0)
			return rc;
		w.what = "gradient all-gather";
		if ((rc = be->allgather(e->st, r->g_sync, e->cin, NULL, n, &w, err)) != 0)
			return rc;
		bp_eng_count(e, BP_EXEC_SYNC, (double)n);
		bp_eng_count(e, BP_EXEC_SYNC, (double)n);
		if ((rc = be->sync(e->st, &w, err)) != 0)
			return rc;
		double t_us = bp_cost_grad_sync(cm, s);
		int overlap = bp_step_grad_overlap(e->plan, st, err);
		if (overlap < 0 || (overlap && bp_sync_overlap_wait(e->plan, st, e->costs,
								    (size_t)r->pl.pipe, s, &t_us,
								    err) < 0))
			return -1;
		if (bp_eng_idle(e, t_pipe + t_us * e->o.time_scale, err) < 0)
			return -1;
	}
	if ((rc = be->sync(e->st, &w, err)) != 0) /* the last ops' collectives */
		return rc;
	double t_sync = be->now_us(e->st);
	w.what = "pp send completion";
	if ((rc = be->wait_sends(e->st, &w, err)) != 0)
		return rc;
	rec[0] = t_sync - t0;
	rec[1] = t_pipe - t0;
	rec[2] = t_sync - t_pipe;
	return 0;
}

/* The rank's pipeline of a step whose schedule runs per-pipeline ops (schedule.h: 1F1B,
 * interleaved 1F1B), from the step start t0, in the op order of the schedule's row, the
 * order the simulator (planner/sim/sim.c) predicts. With v model chunks per rank an op is
 * one chunk: the v-th of the stage's layers starting at chunk c's (the LM head on the last
 * virtual stage only), taking its share of the plan's op time; its input comes from the
 * previous virtual stage (stage s - 1, or for stage 0 the last stage's chunk c - 1) and its
 * output goes to the next. A micro-batch's record holds its first chunk's start and the
 * chunks' summed durations, comparable with the plan's per-stage time. */
static int run_pipe(struct bp_engine *e, const struct bp_step *st, const struct lrole *r,
		    const struct step_ops *so, double t0, double *rec, struct bp_error *err)
{
	const struct bp_backend *be = e->be;
	const struct bp_costmodel *cm = r->cm;
	const struct bp_pipe *pi = &st->pipes[r->pl.pipe];
	int pp = cm->sc.pp, s = r->pl.stage, tp = cm->sc.tp, cp = cm->sc.cp, v = r->v, rc;
	double scale = e->o.time_scale;
	struct bp_wait w = {"", -1, st->index, -1};
	size_t m = pi->nmbs;
	for (size_t k = 0; k < 2 * m * (size_t)v; k++) {
		struct bp_sched_op op;
		r->sched->op(pp, v, m, s, k, &op);
		size_t j = op.mb;
		int bwd = op.bwd, c = op.chunk;
		const struct bp_mb *mb = &pi->mbs[j];
		double tokens = (double)mb->tokens;
		/* Bytes as bp_cost_p2p counts them: the micro-batch's hidden states per TP/CP
		 * shard; a CP rank's K and V; a TP shard's partial sums of its CP share. */
		double p2p_bytes = tokens * cm->token_bytes / (tp * cp);
		double p2p_us = bp_cost_p2p(cm, mb->tokens);
		/* the neighbours of virtual stage c pp + s, and the chunk each message is for */
		int from = bwd ? (s + 1 < pp ? r->next : c + 1 < v ? r->wrap_next : -1)
			       : (s > 0 ? r->prev : c > 0 ? r->wrap_prev : -1);
		int to = bwd ? (s > 0 ? r->prev : c > 0 ? r->wrap_prev : -1)
			     : (s + 1 < pp ? r->next : c + 1 < v ? r->wrap_next : -1);
		size_t to_id = j * (size_t)v + (size_t)(bwd ? (s > 0 ? c : c - 1)
							  : (s + 1 < pp ? c : c + 1));
		w.mb = (int64_t)j;
		if (from >= 0) {
			w.what = bwd ? "pp recv of a gradient" : "pp recv of an activation";
			w.peer = from;
			rc = bp_eng_recv_p2p(e, from, j * (size_t)v + (size_t)c, bwd, p2p_bytes,
					     p2p_us, &w, err);
			if (rc != 0)
				return rc;
		}
		struct op_run o;
		memset(&o, 0, sizeof(o));
		o.r = r;
		o.bwd = bwd;
		o.stage = s;
		o.tp = tp;
		o.last = s == pp - 1 && c == v - 1;
		o.mb = mb;
		o.w = (struct bp_wait){bwd ? "backward" : "forward", -1, st->index, (int64_t)j};
		bp_eng_op_from(&o, so, (int64_t)j, bwd);
		double plan_us = bwd ? mb->bwd[s] : mb->fwd[s];
		if (v > 1) { /* chunk c: its layers' shares, the head on the last chunk */
			int lc = o.sh.layers / v;
			plan_us = 0.0;
			for (int i = c * lc; i < (c + 1) * lc; i++) {
				const struct bp_layer_share *ls = &o.sh.l[i];
				plan_us += ls->qkv + ls->cp + ls->attn + ls->o + ls->tp_a + ls->ffn +
					   ls->tp_b;
			}
			o.sh.l += c * lc;
			o.sh.first_layer += c * lc;
			o.sh.layers = lc;
			if (!o.last)
				o.sh.lm = 0.0;
			plan_us += o.sh.lm;
			o.sh.total = plan_us;
		}
		o.kv_bytes = (double)o.tokens * cm->kv_token_bytes / tp;
		o.tp_bytes = (double)o.tokens * cm->token_bytes;
		/* An emulated op ends at its deadline; what its last layers' collectives still
		 * have in flight must be done before the rank's next op starts (here, after the
		 * receive that usually hides it) and before the gradient synchronisation. A real
		 * op ends when its queue has drained. */
		if (be->idle_until && (rc = be->sync(e->st, &o.w, err)) != 0)
			return rc;
		double t_op = be->now_us(e->st);
		o.t0 = t_op;
		if ((rc = bp_eng_op(e, &o, err)) != 0)
			return rc;
		if (!be->idle_until && (rc = be->sync(e->st, &o.w, err)) != 0)
			return rc;
		if (bp_eng_idle(e, t_op + plan_us * scale, err) < 0)
			return -1;
		double t_end = be->now_us(e->st);
		double *slot = rec + REC_HEAD + REC_MB * j;
		if (c == (bwd ? v - 1 : 0)) /* a micro-batch's first chunk in this direction */
			slot[bwd * 2] = t_op - t0;
		slot[bwd * 2 + 1] += t_end - t_op;
		if (to >= 0 && (rc = bp_eng_send_p2p(e, to, to_id, bwd, p2p_bytes, err)) != 0)
			return rc;
	}
	return bp_eng_finish_step(e, st, r, t0, be->now_us(e->st), rec, err);
}

/* One step of the plan; rec (rec_len doubles) gets the measurements. */
static int run_step(struct bp_engine *e, size_t si, double *rec, struct bp_error *err)
{
	const struct bp_step *st = &e->plan->steps[si];
	const struct lrole *r = &e->lr[st->layout];
	const struct bp_backend *be = e->be;
	struct ticks_run *tr = NULL;
	int rc;
	struct bp_wait w = {"step barrier", -1, st->index, -1};
	memset(rec, 0, e->rec_len * sizeof(double));
	e->cur = rec;
	struct step_ops so;
	memset(&so, 0, sizeof(so));
	/* what the step needs is worked out before the clock starts */
	if (r->pl.pipe >= 0 && (rc = bp_eng_step_ops(st, r, &so, err)) != 0)
		return rc;
	if (r->ticks && r->active && (rc = bp_eng_ticks_prepare(e, si, &tr, err)) != 0)
		goto out;
	if ((rc = be->barrier(e->st, NULL, &w, err)) != 0)
		goto out;
	double t0 = be->now_us(e->st);
	if (e->o.exit_rank == e->rank) {
		rc = BP_EXEC_EXIT;
		bp_errorf(err, "exiting in step %lld as --debug-exit-rank asked",
			  (long long)st->index);
		goto out;
	}
	if (e->o.hang_rank == e->rank && !e->hung) {
		e->hung = 1;
		rc = hang_forever(e, err);
		goto out;
	}
	/* Hydraulis's pull (Sec. 5.2), every world rank: the optimizer shards live on all */
	if (bp_eng_pullpush(st) && (rc = bp_eng_lnk(e, st, 0, err)) != 0)
		goto out;
	if (!r->active) /* idle in this step's layout: the barrier, and the push if any */
		rc = bp_eng_pullpush(st) ? bp_eng_lnk(e, st, 1, err) : 0;
	else if (r->ticks)
		rc = bp_eng_ticks_run(e, si, tr, r->pl.pipe >= 0 ? &so : NULL, t0, rec, err);
	else
		rc = run_pipe(e, st, r, &so, t0, rec, err);
out:
	bp_eng_ticks_free(tr);
	bp_eng_step_ops_release(&so);
	return rc;
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

static const char *const kind_names[BP_EXEC_NKINDS] = {
	"pp send", "tp all-reduce", "cp collective", "all-to-all", "gradient sync"};

const char *bp_exec_kind_name(int kind)
{
	return kind >= 0 && kind < BP_EXEC_NKINDS ? kind_names[kind] : "?";
}

void bp_engine_stats(const struct bp_engine *e, struct bp_exec_stats *out)
{
	*out = e->stats;
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
			for (int k = 0; k < BP_EXEC_NKINDS; k++) {
				e->stats.calls[k] += rec[REC_STATS + k];
				e->stats.bytes[k] += rec[REC_STATS + BP_EXEC_NKINDS + k];
			}
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
