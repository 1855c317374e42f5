/* engine_ticks.c: a "distca-ticks" step replayed (engine_int.h; planner/sim/ticks.h; DistCA
 * Sec. 4.1, Fig. 7 and 8; executor/README.md "What a rank does", `distca-ticks`). Called by
 * engine.c's run_step for a step whose layout runs that schedule.
 *
 * Every rank of the layout (its pipelines' ranks and its attention servers) walks the same
 * timeline of 2 (M + pp - 1) ticks (bp_tick_op: forward tick t runs micro-batch t - r on
 * stage r, backward tick j micro-batch j - (pp - 1) + r; a micro-batch outside [0, M), or
 * past the end of a shorter pipeline, is a dummy that does no work of its own). Per tick a
 * rank receives its micro-batch's activation or gradient from the neighbour stage, runs the
 * layer loop (engine.c bp_eng_op) with, per layer between the pre- and post-attention
 * GEMMs, the all-to-all in (queries and KV of each CA-task to its server; backward in resend
 * mode Q, O, dO, the log-sum-exp and KV again, in non-resend mode dO alone), the attention
 * it serves (one call over the CA-tasks of that tick placed on its server: q = the task's
 * queries, kv = its causal prefix), and the all-to-all out (O, with the LSE in resend mode;
 * backward dQ, dK, dV), then sends to the other neighbour. The all-to-alls run over the
 * layout's ranks with the byte matrix of bp_ticks_bytes (the step's mode, ticks.h
 * bp_ticks_resend; per TP slice, self traffic excluded), capped at max_bytes /
 * group size per pair; every rank calls them the same number of times (L per tick and
 * direction: layers per stage are equal on a ticks layout), so the ticks are
 * world-synchronous through them and need no barrier.
 *
 * Emulated time follows the simulator's pricing of a tick (ticks.h): a rank's primitives end
 * at deadlines from the tick's start, the running sum of its own work (its op's shares,
 * shares.h), the all-to-all per layer (what the simulator's tick_us holds beyond its
 * slowest rank's work and served attention, / L: all of a2a_us single-stream, with Fig. 7's
 * ping-pong slots what they do not hide; split between in and out by bp_cost_alltoallv of
 * each direction's busiest rank) and the attention it serves (its attn / L); its
 * all-to-alls stay in flight meanwhile (stream-ordered), and at the tick's end the world
 * waits for the slowest rank (tick_end), whose end starts the next tick's clock. So a tick
 * takes the simulator's tick_us, plus what the real communication adds beyond it. (Before
 * this share, ping-pong plans replayed the whole all-to-all as if single-stream, 2-6% over
 * the plan; on test-balexec-kinds' pp-1 distca-3d plan 4-5.5% median.) The emulation
 * reproduces that pricing; it does not
 * check it: with compute and attention each waiting for the slowest rank at every layer's
 * all-to-all (DistCA's single stream without ping-pong), a tick would take max compute + max
 * attention per layer, 1.3-3.8% more on tests/slurm/test-balexec-kinds' plans; and waiting
 * at each all-to-all costs an oversubscribed host more scheduling latency than the
 * emulation can hide (measured: +16-37% per step on those plans, 8 ranks on 2 busy cores).
 * PP transfers are not emulated (the simulator hides them in the tick). */
#include <stdlib.h>
#include <string.h>

#include "costkinds.h"
#include "engine_int.h"
#include "ticks.h"

struct ticks_run {
	struct bp_ticks tk;
	int L, n, tp;         /* layers per stage, the all-to-all group's size, TP degree */
	size_t *cnt;          /* [nticks][2 dir][2: send, recv][n]: bytes per group member */
	size_t *sd, *rd;      /* [n]: displacements, scratch */
	double *a2a;          /* [nticks][2 dir]: the all-to-all per layer, us (unscaled) */
	int64_t (*seg)[2];    /* the attention this rank serves, by timeline position */
	size_t *seg_at;       /* [nticks + 1]: seg[seg_at[k] .. seg_at[k + 1]) run at k */
	struct bp_layer_share *zero; /* [L]: a server in no pipeline has no work of its own */
};

void bp_eng_ticks_free(struct ticks_run *t)
{
	if (!t)
		return;
	bp_ticks_release(&t->tk);
	free(t->cnt);
	free(t->sd);
	free(t->rd);
	free(t->a2a);
	free(t->seg);
	free(t->seg_at);
	free(t->zero);
	free(t);
}

/* The world rank of TP slice i of server s (ticks.h: the server is its rank's TP group; a
 * server in no pipeline serves every slice itself). */
static int server_rank(const struct bp_layout *l, int s, int i)
{
	int srv = l->servers[s];
	struct bp_place pl = bp_layout_place(l, srv);
	if (pl.pipe < 0)
		return srv;
	return bp_lpipe_rank(&l->pipes[pl.pipe], pl.stage, pl.cp_i, i);
}

struct span_key {
	int64_t doc, off;
	size_t mb;
};

static int cmp_span_key(const void *a, const void *b)
{
	const struct span_key *x = a, *y = b;
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	return (x->off > y->off) - (x->off < y->off);
}

/* The CA-tasks this rank serves, as attention segments by timeline position: a task runs at
 * its forward tick's position and, mirrored, at its micro-batch's backward position
 * (bp_tick_bwd_position; both modes reuse the forward placement). The plan is validated:
 * every task lies in one span of its micro-batch (validate.c check_ca). */
static int served_segments(struct bp_engine *e, const struct bp_step *st,
			   const struct bp_layout *l, struct ticks_run *t, struct bp_error *err)
{
	size_t nticks = t->tk.nticks, nsp = 0, nent = 0;
	int rc = -1;
	struct span_key *sp = NULL;
	size_t *pos = NULL, *fill = NULL;
	int *mine = bp_calloc(l->nservers + 1, sizeof(int), err); /* slices of s served here */
	t->seg_at = bp_calloc(nticks + 2, sizeof(size_t), err);
	if (!mine || !t->seg_at)
		goto out;
	for (size_t s = 0; s < l->nservers; s++)
		for (int i = 0; i < t->tp; i++)
			mine[s] += server_rank(l, (int)s, i) == e->rank;
	for (size_t q = 0; q < st->npipes; q++)
		for (size_t j = 0; j < st->pipes[q].nmbs; j++)
			nsp += st->pipes[q].mbs[j].nspans;
	for (size_t k = 0; k < st->nca; k++)
		nent += 2 * (size_t)mine[st->ca[k].server];
	sp = bp_calloc(nsp + 1, sizeof(*sp), err);
	pos = bp_calloc(nent + 1, sizeof(size_t), err);
	fill = bp_calloc(nticks + 1, sizeof(size_t), err);
	t->seg = bp_calloc(nent + 1, sizeof(*t->seg), err);
	if (!sp || !pos || !fill || !t->seg)
		goto out;
	nsp = 0;
	for (size_t q = 0; q < st->npipes; q++)
		for (size_t j = 0; j < st->pipes[q].nmbs; j++) {
			const struct bp_mb *mb = &st->pipes[q].mbs[j];
			for (size_t i = 0; i < mb->nspans; i++)
				sp[nsp++] = (struct span_key){mb->spans[i].doc, mb->spans[i].offset,
							      j};
		}
	qsort(sp, nsp, sizeof(*sp), cmp_span_key);
	/* positions first (a counting sort by position keeps the plan's task order); a task
	 * runs at its forward and backward positions, or at one of them where the step's
	 * backward ticks have placements of their own (ca_sched.h bp_ca_task_place) */
	const int own = bp_ca_own_bwd(st->nca ? st->ca[st->nca - 1].tick : -1, t->tk.pp,
				      t->tk.m);
	size_t n = 0;
	for (size_t k = 0; k < st->nca; k++) {
		const struct bp_ca_task *ca = &st->ca[k];
		if (!mine[ca->server])
			continue;
		struct span_key key = {ca->doc, ca->kv0, 0};
		const struct span_key *s = bsearch(&key, sp, nsp, sizeof(*sp), cmp_span_key);
		int stage;
		size_t pp_pos[2];
		if (!s || bp_ca_task_place(t->tk.pp, t->tk.m, ca->tick, s->mb, own, &stage,
					   &pp_pos[0], &pp_pos[1]) < 0) {
			bp_errorf(err, "step %lld ca_tasks[%zu] names no span running at its tick",
				  (long long)st->index, k);
			goto out;
		}
		for (int d = 0; d < 2; d++)
			if (pp_pos[d] != SIZE_MAX && pp_pos[d] >= nticks) {
				bp_errorf(err, "step %lld ca_tasks[%zu] runs outside the step's %zu "
					  "ticks", (long long)st->index, k, nticks);
				goto out;
			}
		for (int c = 0; c < mine[ca->server]; c++) {
			pos[n++] = pp_pos[0];
			pos[n++] = pp_pos[1];
		}
	}
	for (size_t i = 0; i < n; i++)
		if (pos[i] != SIZE_MAX)
			t->seg_at[pos[i] + 1]++;
	for (size_t k = 0; k < nticks; k++)
		t->seg_at[k + 1] += t->seg_at[k];
	n = 0;
	for (size_t k = 0; k < st->nca; k++) {
		const struct bp_ca_task *ca = &st->ca[k];
		for (int c = 0; c < 2 * mine[ca->server]; c++, n++) {
			size_t p = pos[n];
			if (p == SIZE_MAX)
				continue;
			int64_t *g = t->seg[t->seg_at[p] + fill[p]++];
			g[0] = ca->q1 - ca->q0;
			g[1] = ca->kv1 - ca->kv0;
		}
	}
	rc = 0;
out:
	free(mine);
	free(sp);
	free(pos);
	free(fill);
	return rc;
}

/* One direction's all-to-all time from its byte matrix, as the simulator prices it
 * (ticks.c): the busiest rank's sends and receives over a TP slice's ranks. */
static double a2a_time(const struct bp_engine *e, const struct bp_layout *l, int tp,
		       const double *bytes, double *tmp, struct bp_error *err)
{
	int world = e->world, slice = bp_layout_ranks(l) / tp;
	if (slice < 1)
		slice = 1;
	double ms = 0.0, mr = 0.0;
	for (int a = 0; a < world; a++) {
		double s = 0.0, r = 0.0;
		for (int b = 0; b < world; b++) {
			s += bytes[(size_t)a * world + b];
			r += bytes[(size_t)b * world + a];
		}
		if (s > ms)
			ms = s;
		if (r > mr)
			mr = r;
	}
	memset(tmp, 0, 2 * (size_t)slice * sizeof(double));
	tmp[0] = ms;
	tmp[slice] = mr;
	int inter = e->plan->cluster.gpus > e->plan->cluster.gpus_per_node;
	return bp_cost_alltoallv(e->costs->prof, slice, inter, tmp, tmp + slice, err);
}

int bp_eng_ticks_prepare(struct bp_engine *e, size_t si, struct ticks_run **out,
			 struct bp_error *err)
{
	const struct bp_plan *p = e->plan;
	const struct bp_step *st = &p->steps[si];
	const struct bp_layout *l = bp_plan_layout(p, st);
	const struct lrole *r = &e->lr[st->layout];
	size_t world = (size_t)e->world;
	double *bytes = NULL, *tmp = NULL;
	struct ticks_run *t = bp_calloc(1, sizeof(*t), err);
	*out = NULL;
	if (!t)
		return -1;
	if (bp_ticks_eval(p, st, e->costs, &t->tk, err) < 0) {
		bp_error_prefix(err, "step %lld", (long long)st->index);
		goto fail;
	}
	t->L = t->tk.layers;
	t->n = r->n_a2a;
	t->tp = l->pipes[0].sc.tp;
	if (t->L < 1 || t->L > e->lmax) {
		bp_errorf(err, "step %lld: %d layers per stage", (long long)st->index, t->L);
		goto fail;
	}
	t->zero = bp_calloc((size_t)t->L, sizeof(*t->zero), err);
	if (!t->zero)
		goto fail;
	size_t nt = t->tk.nticks, n = (size_t)t->n;
	t->cnt = bp_calloc(nt * 4 * n + 1, sizeof(size_t), err);
	t->sd = bp_calloc(n + 1, sizeof(size_t), err);
	t->rd = bp_calloc(n + 1, sizeof(size_t), err);
	t->a2a = bp_calloc(2 * nt + 1, sizeof(double), err);
	bytes = bp_calloc(world * world, sizeof(double), err);
	tmp = bp_calloc(2 * world + 2, sizeof(double), err);
	if (!t->cnt || !t->sd || !t->rd || !t->a2a || !bytes || !tmp)
		goto fail;
	for (size_t k = 0; k < nt; k++) {
		double td[2];
		for (int dir = 0; dir < 2; dir++) {
			if (bp_ticks_bytes(p, st, k, dir, bytes, err) < 0)
				goto fail;
			size_t *snd = &t->cnt[((k * 2 + (size_t)dir) * 2) * n], *rcv = snd + n;
			for (size_t i = 0; i < n; i++) {
				size_t peer = (size_t)r->a2a_ranks[i];
				double bs = bytes[(size_t)e->rank * world + peer];
				double br = bytes[peer * world + (size_t)e->rank];
				/* sender and receiver cap the same number the same way */
				snd[i] = bs > 0 ? bp_eng_cap(e, bs, t->n) : 0;
				rcv[i] = br > 0 ? bp_eng_cap(e, br, t->n) : 0;
			}
			td[dir] = a2a_time(e, l, t->tp, bytes, tmp, err);
			if (td[dir] < 0)
				goto fail;
		}
		/* what the simulator's tick holds beyond its slowest rank's work and served
		 * attention, per layer (single-stream: the all-to-all), split between in and
		 * out by their own times */
		double worst = 0.0;
		for (size_t q = 0; q < world; q++) {
			double w = t->tk.compute[k * world + q] + t->tk.attn[k * world + q];
			if (w > worst)
				worst = w;
		}
		double per_layer = (t->tk.tick_us[k] - worst) / t->L, sum = td[0] + td[1];
		if (per_layer < 0)
			per_layer = 0;
		t->a2a[2 * k] = sum > 0 ? per_layer * td[0] / sum : per_layer / 2;
		t->a2a[2 * k + 1] = sum > 0 ? per_layer * td[1] / sum : per_layer / 2;
	}
	if (served_segments(e, st, l, t, err) < 0)
		goto fail;
	free(bytes);
	free(tmp);
	*out = t;
	return 0;
fail:
	free(bytes);
	free(tmp);
	bp_eng_ticks_free(t);
	return -1;
}

struct mid {
	struct ticks_run *t;
	size_t k;
	double attn;  /* the attention this rank serves per layer, us (unscaled) */
};

/* One all-to-all of tick k, dir 0 in or 1 out: the plan's bytes (bp_ticks_bytes, capped) over
 * the layout's ranks; its predicted time moves the clock on. Stream-ordered: an
 * emulating backend keeps it in flight while the rank goes on (its tick ends with a sync,
 * bp_eng_ticks_run), a GPU's stream makes what follows wait for it. */
static int tick_a2a(struct bp_engine *e, struct op_run *o, struct ticks_run *t, size_t k,
		    int dir, struct bp_error *err)
{
	size_t n = (size_t)t->n;
	const size_t *snd = &t->cnt[((k * 2 + (size_t)dir) * 2) * n], *rcv = snd + n;
	int rc;
	bp_eng_advance(e, o, t->a2a[2 * k + (size_t)dir]);
	if (t->n > 1) {
		size_t so = 0, ro = 0, self = 0;
		for (size_t i = 0; i < n; i++) {
			t->sd[i] = so;
			t->rd[i] = ro;
			so += snd[i];
			ro += rcv[i];
			if (o->r->a2a_ranks[i] == e->rank)
				self = snd[i];
		}
		o->w.what = dir ? "all-to-all out" : "all-to-all in";
		struct bp_a2a a = {o->r->g_a2a, e->payload, NULL, snd, t->sd, rcv, t->rd,
				   &o->w};
		if ((rc = e->be->alltoallv(e->st, &a, err)) != 0)
			return rc;
		bp_eng_count(e, BP_EXEC_A2A, (double)(so - self));
	}
	return 0;
}

/* Per layer between the rank's own phases: the all-to-all in, the attention it serves at
 * tick k, the all-to-all out. */
static int tick_middle(struct bp_engine *e, struct op_run *o, int layer, struct bp_error *err)
{
	const struct mid *m = o->mid;
	struct ticks_run *t = m->t;
	size_t k = m->k;
	const char *what = o->w.what;
	int rc;
	(void)layer;
	if ((rc = tick_a2a(e, o, t, k, 0, err)) != 0)
		return rc;
	double until = bp_eng_advance(e, o, m->attn);
	size_t a0 = t->seg_at[k], nseg = t->seg_at[k + 1] - a0;
	if (nseg) {
		o->w.what = o->bwd ? "served attention backward" : "served attention";
		struct bp_attn a = {o->bwd, (const int64_t(*)[2])t->seg[a0], nseg, t->tp,
				    &e->plan->model, 0, 0, until, &o->w};
		if ((rc = e->be->attn_dense(e->st, &a, err)) != 0)
			return rc;
	}
	if ((rc = tick_a2a(e, o, t, k, 1, err)) != 0)
		return rc;
	o->w.what = what;
	return 0;
}

/* The end of tick k on an emulating backend: the world waits for its slowest rank (the
 * simulator's tick_us is the max over ranks), as DistCA's world-synchronous all-to-alls make
 * it. Every rank's wall-clock end goes round (an all-gather over the layout's ranks, which
 * completes once the slowest has sent its own), and the next tick's emulated clock starts
 * at the last end (*next, now_us clock), so the exchange's own latency is taken from the
 * next tick's first shares instead of added to it; never earlier than the tick's predicted
 * time before now (clocks of two hosts cannot take more, as with the PP headers). One
 * exchange per tick rather than a wait at each of its 2 L all-to-alls: on an oversubscribed
 * host every round of a collective costs scheduling latency (executor/README.md). */
static int tick_end(struct bp_engine *e, const struct lrole *r, struct ticks_run *t, size_t k,
		    struct bp_wait *w, double *next, struct bp_error *err)
{
	int rc;
	*next = e->be->now_us(e->st);
	if (!e->be->idle_until || t->n < 2)
		return 0;
	double done = bp_eng_wall_us(), last = done;
	w->what = "the end of a tick";
	if ((rc = e->be->allgather(e->st, r->g_a2a, &done, e->arrive, sizeof(double), w,
				   err)) != 0 ||
	    (rc = e->be->sync(e->st, w, err)) != 0)
		return rc;
	for (int i = 0; i < t->n; i++)
		if (e->arrive[i] > last)
			last = e->arrive[i];
	double now = e->be->now_us(e->st), ago = bp_eng_wall_us() - last;
	double most = t->tk.tick_us[k] * e->o.time_scale;
	*next = now - (ago < 0 ? 0 : ago > most ? most : ago);
	return 0;
}

int bp_eng_ticks_run(struct bp_engine *e, size_t si, struct ticks_run *t,
		     const struct step_ops *so, double t0, double *rec, struct bp_error *err)
{
	const struct bp_plan *p = e->plan;
	const struct bp_step *st = &p->steps[si];
	const struct lrole *r = &e->lr[st->layout];
	const struct bp_backend *be = e->be;
	const struct bp_costmodel *cm = r->cm; /* NULL on a server in no pipeline */
	const struct bp_pipe *pi = r->pl.pipe >= 0 ? &st->pipes[r->pl.pipe] : NULL;
	int pp = t->tk.pp, s = r->pl.stage >= 0 ? r->pl.stage : 0, rc;
	struct bp_wait w = {"", -1, st->index, -1};
	double next = t0; /* when the world ended the last tick: the next one's start */
	if (cm && cm->stage_layers[s] != t->L)
		return bp_errorf(err, "step %lld: stage %d has %d layers, the ticks %d",
				 (long long)st->index, s, cm->stage_layers[s], t->L);
	for (size_t k = 0; k < t->tk.nticks; k++) {
		int bwd;
		size_t phase;
		int64_t j = bp_tick_op(pp, t->tk.m, k, s, &bwd, &phase);
		const struct bp_mb *mb = pi && j >= 0 && (size_t)j < pi->nmbs ? &pi->mbs[j] : NULL;
		double p2p_bytes = mb ? (double)mb->tokens * cm->token_bytes / cm->sc.tp : 0.0;
		w.mb = mb ? j : -1;
		if (mb && !bwd && r->prev >= 0) {
			w.what = "pp recv of an activation";
			w.peer = r->prev;
			rc = bp_eng_recv_p2p(e, r->prev, (size_t)j, 0, p2p_bytes, 0.0, &w, err);
		} else if (mb && bwd && r->next >= 0) {
			w.what = "pp recv of a gradient";
			w.peer = r->next;
			rc = bp_eng_recv_p2p(e, r->next, (size_t)j, 1, p2p_bytes, 0.0, &w, err);
		} else {
			rc = 0;
		}
		if (rc != 0)
			return rc;
		struct op_run o;
		struct mid m = {t, k, t->tk.attn[k * (size_t)e->world + (size_t)e->rank] / t->L};
		memset(&o, 0, sizeof(o));
		o.r = r;
		o.bwd = bwd;
		o.stage = s;
		o.tp = t->tp;
		o.last = pi && s == pp - 1;
		o.mb = mb;
		o.middle = tick_middle;
		o.mid = &m;
		o.w = (struct bp_wait){bwd ? "backward" : "forward", -1, st->index, w.mb};
		if (so) { /* a dummy has no work of its own: only the all-to-alls and the
			   * attention it serves */
			bp_eng_op_from(&o, so, mb ? j : -1, bwd);
			if (mb)
				o.tp_bytes = (double)o.tokens * cm->token_bytes;
		} else {
			o.sh = (struct bp_op_shares){t->L, 0, 0.0, 0.0, t->zero};
		}
		double t_tick = next; /* what it waited for since is taken from its shares */
		o.t0 = t_tick;
		if ((rc = bp_eng_op(e, &o, err)) != 0)
			return rc;
		if ((rc = be->sync(e->st, &o.w, err)) != 0)
			return rc;
		if (mb) { /* the send is in flight while the world meets */
			double *slot = rec + REC_HEAD + REC_MB * (size_t)j;
			slot[bwd * 2] = t_tick - t0;
			slot[bwd * 2 + 1] = o.compute_us;
			if (!bwd && r->next >= 0)
				rc = bp_eng_send_p2p(e, r->next, (size_t)j, 0, p2p_bytes, err);
			else if (bwd && r->prev >= 0)
				rc = bp_eng_send_p2p(e, r->prev, (size_t)j, 1, p2p_bytes, err);
			if (rc != 0)
				return rc;
		}
		if ((rc = tick_end(e, r, t, k, &o.w, &next, err)) != 0)
			return rc;
	}
	return bp_eng_finish_step(e, st, r, t0, be->now_us(e->st), rec, err);
}
