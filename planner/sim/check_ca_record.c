/* check_ca_record.c: a "distca" record's per-call figures re-derived from the step
 * (check_ca.h bp_check_ca_record). DistCA's scheduler (Sec. 4.2, App. E; blocks/ca_sched.c
 * bp_ca_schedule, bp_ca_emit) runs once per tick and nano-batch over the Items of every
 * stage's micro-batch, each Item on its linear rank (its TP group's in-place server, Sec.
 * 4.1) before the call; its chunks are the step's CA-tasks of that call. So the tasks, the
 * spans that hold their queries, the ping/pong split and the layout's servers give back
 * what the call reported: its mean load, the largest load before and after, the pairs it
 * moved and the bytes of one layer's all-to-all in. */
#include "check_ca.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ticks.h"

/* A span of the step with where it lives (pipeline, micro-batch, index in it). */
/* The span of doc holding token at (check_ca.h's index; NULL: none). */
static const struct bp_step_span *span_holding(const struct bp_step_span *sp, size_t n,
					       int64_t doc, int64_t at)
{
	size_t lo = bp_step_span_after(sp, n, doc, at);
	return lo && sp[lo - 1].doc == doc && at < sp[lo - 1].offset + sp[lo - 1].len
		       ? &sp[lo - 1]
		       : NULL;
}

/* A CA-task as its scheduler call saw it: the call (tick, nano-batch), the linear rank
 * holding its queries (src, a server index: its Item's place before the call), the server
 * computing it, and its attended (query, key) pairs. */
struct call_task {
	int64_t tick, doc, kv0, q0, q1, pairs;
	int nano, src, server;
};

/* By call, then unit (doc, kv0), then server, then q0: a call's tasks in one run, a unit's
 * tasks on one server in one run (the KV each server needs, below). */
static int cmp_call_task(const void *a, const void *b)
{
	const struct call_task *x = a, *y = b;
	if (x->tick != y->tick)
		return (x->tick > y->tick) - (x->tick < y->tick);
	if (x->nano != y->nano)
		return (x->nano > y->nano) - (x->nano < y->nano);
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	if (x->kv0 != y->kv0)
		return (x->kv0 > y->kv0) - (x->kv0 < y->kv0);
	if (x->server != y->server)
		return (x->server > y->server) - (x->server < y->server);
	return (x->q0 > y->q0) - (x->q0 < y->q0);
}

/* One call's figures, the record's names for them. */
struct call_figs {
	double mean, max_before, max_after, moved, bytes;
};

/* What every call of a step shares: the servers (n), the step's forward ticks (F: a tick
 * from F on is a backward tick with its own placement, ca_sched.h), and per-server scratch
 * (zeroed per call). */
struct call_ctx {
	const struct bp_plan *p;
	int n, tp;
	int64_t F;
	int64_t *before, *after; /* [n]: pairs per server before and after the call */
	double *send, *recv;      /* [n]: one layer's all-to-all in, bytes per rank */
};

/* The figures of the call whose tasks are ct[a, b) (sorted by cmp_call_task), as
 * bp_ca_schedule and bp_ca_emit state them for the call's Items: the tasks are the Items'
 * chunks, each on its Item's server and inside the pieces of its Item's linear rank (a split
 * keeps the rank), so a unit's tasks partition its tokens among the linear ranks as its
 * Items do. Loads are sums of whole pairs and bytes whole multiples of the bytes per token,
 * all far below 2^53, so every sum is exact in any order: mean (the total over the servers),
 * max_before (the loads as placed) and the bytes are what the call computed, under every
 * ca_comm (which prices candidate moves only: a call reports the bytes of the split it
 * made), and max_after up to the rounding of the scheduler's running deficits
 * (figure_ok). */
static struct call_figs call_figures(struct call_ctx *x, const struct call_task *ct, size_t a,
				     size_t b)
{
	struct call_figs f = {0, 0, 0, 0, 0};
	int64_t total = 0, moved = 0;
	size_t n = (size_t)x->n;
	/* the all-to-all in of the call's phase as sim/ticks.h prices it: the forward's Q and
	 * K, V; a backward tick's own call (resend mode) Q, O, dO, the log-sum-exp and K, V */
	struct bp_ca_bytes tb = bp_ca_bytes_per_token(&x->p->model, x->tp, ct[a].tick >= x->F, 0,
						      1);
	memset(x->before, 0, n * sizeof(*x->before));
	memset(x->after, 0, n * sizeof(*x->after));
	memset(x->send, 0, n * sizeof(*x->send));
	memset(x->recv, 0, n * sizeof(*x->recv));
	for (size_t t = a; t < b; t++) {
		const struct call_task *c = &ct[t];
		total += c->pairs;
		x->before[c->src] += c->pairs;
		x->after[c->server] += c->pairs;
		if (c->src != c->server) { /* its queries go to the server */
			double q = (double)(c->q1 - c->q0) * tb.q_in;
			moved += c->pairs;
			x->send[c->src] += q;
			x->recv[c->server] += q;
		}
	}
	/* KV: per unit, every server computing part of it gets from every other linear rank
	 * that rank's tokens of the unit inside the longest prefix [kv0, end) it needs, once
	 * (deduplicated per server; self traffic excluded) */
	for (size_t u0 = a, u1; u0 < b; u0 = u1) {
		for (u1 = u0; u1 < b && ct[u1].doc == ct[u0].doc && ct[u1].kv0 == ct[u0].kv0; u1++)
			;
		for (size_t s0 = u0, s1; s0 < u1; s0 = s1) {
			int64_t end = ct[s0].q1;
			for (s1 = s0; s1 < u1 && ct[s1].server == ct[s0].server; s1++)
				if (ct[s1].q1 > end)
					end = ct[s1].q1;
			int dst = ct[s0].server;
			for (size_t t = u0; t < u1; t++) {
				int64_t tok = (ct[t].q1 < end ? ct[t].q1 : end) - ct[t].q0;
				if (ct[t].src == dst || tok <= 0)
					continue;
				x->send[ct[t].src] += (double)tok * tb.kv_in;
				x->recv[dst] += (double)tok * tb.kv_in;
			}
		}
	}
	f.mean = (double)total / x->n;
	f.moved = (double)moved;
	for (size_t s = 0; s < n; s++) {
		if ((double)x->before[s] > f.max_before)
			f.max_before = (double)x->before[s];
		if ((double)x->after[s] > f.max_after)
			f.max_after = (double)x->after[s];
		if (x->send[s] + x->recv[s] > f.bytes)
			f.bytes = x->send[s] + x->recv[s];
	}
	return f;
}

/* Whether a recorded figure matches the derived one. The plan file holds each number rounded
 * to 1e-3 (base/jsonutil.c bp_json_real), so a plan read back is up to 0.0005 off what the
 * call computed (the mean is total / servers, a fraction); and the scheduler's max_after is
 * its running deficit plus the mean (sd = load - mean, then whole pairs added and taken),
 * a few ulps of the loads off the exact sum. One pair or byte absolute covers the rounding,
 * 1e-9 relative the drift many times over (it is under 1e-15 relative per move); an edit of
 * a figure by one part in a billion and a pair shows. */
static int figure_ok(double rec, double der)
{
	return fabs(rec - der) <= 1e-9 * fabs(der) + 1.0;
}

/* Call k's recorded figures against f. moves_once: the one-sided stop rule, under which a
 * move takes pairs off a donor's own linear rank to a recipient, which never gives (it ends
 * at most at the mean), so the pairs moved are exactly those off their linear rank after the
 * call; the paper's two-sided band (parameter two_sided 1) may move an Item again or back to
 * its rank, so they are at least those. */
static int compare_call(const struct bp_ca_record *r, size_t k, const struct call_figs *f,
			int moves_once, size_t i, struct bp_error *err)
{
	const char *const names[] = {"mean_pairs", "max_before_pairs", "max_after_pairs",
				     "moved_pairs", "a2a_bytes_max"};
	const double rec[] = {r->mean[k], r->max_before[k], r->max_after[k], r->moved[k],
			      r->bytes[k]};
	const double der[] = {f->mean, f->max_before, f->max_after, f->moved, f->bytes};
	for (size_t q = 0; q < BP_ARRAY_LEN(names); q++) {
		int at_least = q == 3 && !moves_once;
		int ok = at_least ? rec[q] >= der[q] - 1e-9 * der[q] - 1.0
				  : figure_ok(rec[q], der[q]);
		if (!ok)
			return bp_errorf(err, "step %zu record: call %zu (tick %.0f, nano-batch "
					 "%.0f) has %s %.15g, the step's CA-tasks give %s%.15g",
					 i, k, r->tick[k], r->nano[k], names[q], rec[q],
					 at_least ? "at least " : "", der[q]);
	}
	return 0;
}

/* The server index of every linear rank (pipeline k, stage s) at srv[k * pp + s]: its TP
 * group's first rank among the layout's servers (DistCA's in-place servers, Sec. 4.1, as
 * methods/distca.c places them), -1 where that rank serves nothing. */
static void linear_servers(const struct bp_layout *l, int pp, int *srv)
{
	for (size_t k = 0; k < l->npipes; k++)
		for (int s = 0; s < pp; s++) {
			const struct bp_lpipe *pi = &l->pipes[k];
			int rank = s < pi->sc.pp ? bp_lpipe_rank(pi, s, 0, 0) : -1;
			size_t lo = 0, hi = l->nservers;
			while (lo < hi) { /* servers are ascending */
				size_t mid = (lo + hi) / 2;
				if (l->servers[mid] < rank)
					lo = mid + 1;
				else
					hi = mid;
			}
			int hit = rank >= 0 && lo < l->nservers && l->servers[lo] == rank;
			srv[k * (size_t)pp + (size_t)s] = hit ? (int)lo : -1;
		}
}

/* What resolving a step's tasks needs: its spans sorted, where each pipeline's micro-batches
 * start in ping_spans (pipeline-major), the linear ranks' servers, pp and the forward ticks. */
struct resolve {
	const struct bp_step *st;
	const struct bp_ca_record *r;
	size_t i;
	const struct bp_step_span *sp;
	size_t nsp;
	const size_t *mb_at;
	const int *srv;
	int pp;
	int64_t F;
	size_t m;
	int own; /* the step has backward ticks' own tasks (ca_sched.h bp_ca_own_bwd) */
};

/* Task t resolved into ct: the span holding its queries, its stage (ca_sched.h
 * bp_ca_task_place: forward tick t runs micro-batch t - stage; a backward tick's own call,
 * tick F + j, runs micro-batch j - (pp - 1) + stage), its linear rank and nano-batch
 * (ping_spans: a micro-batch's first spans are ping). */
static int resolve_task(const struct resolve *v, size_t t, struct call_task *ct,
			struct bp_error *err)
{
	const struct bp_ca_task *a = &v->st->ca[t];
	const struct bp_step_span *s = span_holding(v->sp, v->nsp, a->doc, a->q0);
	int stage = -1;
	size_t pf, pb;
	if (!s || bp_ca_task_place(v->pp, v->m, a->tick, s->mb, v->own, &stage, &pf, &pb) < 0)
		return bp_errorf(err, "step %zu ca_tasks[%zu] lies in no span of a micro-batch "
				 "running at its tick", v->i, t);
	int src = v->srv[s->pipe * (size_t)v->pp + (size_t)stage];
	if (src < 0)
		return bp_errorf(err, "step %zu record: pipeline %zu stage %lld (ca_tasks[%zu]'s "
				 "queries) has no attention server of its own, which the record's "
				 "loads before scheduling need (DistCA's in-place servers, Sec. "
				 "4.1)", v->i, s->pipe, (long long)stage, t);
	size_t at = v->mb_at[s->pipe] + s->mb;
	if (v->r->ping_spans && at >= v->r->nmbs)
		return bp_errorf(err, "step %zu record: ping_spans has %zu entries, fewer than "
				 "the step's micro-batches", v->i, v->r->nmbs);
	*ct = (struct call_task){a->tick, a->doc, a->kv0, a->q0, a->q1,
				 bp_ca_pairs(a->q0 - a->kv0, a->q1 - a->kv0),
				 v->r->ping_spans && (double)s->span >= v->r->ping_spans[at], src,
				 a->server};
	return 0;
}

/* The recorded calls against the step's (ct sorted): one call per (tick, nano-batch) with
 * CA-tasks, in that order, each with its figures. */
static int compare_calls(const struct bp_ca_record *r, struct call_ctx *x,
			 const struct call_task *ct, size_t nct, int moves_once, size_t i,
			 struct bp_error *err)
{
	size_t k = 0;
	for (size_t a = 0, b; a < nct; a = b, k++) {
		for (b = a; b < nct && ct[b].tick == ct[a].tick && ct[b].nano == ct[a].nano; b++)
			;
		double tk = (double)ct[a].tick, nn = ct[a].nano;
		if (k == r->ncalls || r->tick[k] > tk || (r->tick[k] == tk && r->nano[k] > nn))
			return bp_errorf(err, "step %zu record: tick %.0f nano-batch %.0f has "
					 "CA-tasks but no scheduler call (call %zu)", i, tk, nn, k);
		if (r->tick[k] != tk || r->nano[k] != nn)
			return bp_errorf(err, "step %zu record: call %zu (tick %.0f, nano-batch "
					 "%.0f) has no CA-tasks in the step", i, k, r->tick[k],
					 r->nano[k]);
		struct call_figs f = call_figures(x, ct, a, b);
		if (compare_call(r, k, &f, moves_once, i, err) < 0)
			return -1;
	}
	if (k < r->ncalls)
		return bp_errorf(err, "step %zu record: call %zu (tick %.0f, nano-batch %.0f) has "
				 "no CA-tasks in the step", i, k, r->tick[k], r->nano[k]);
	return 0;
}

/* Whether the calls ran the one-sided stop rule: the plan's parameter two_sided (the distca
 * method's, methods/distca.c; the record does not say) absent or 0. */
static int one_sided(const struct bp_plan *p)
{
	const char *v = bp_plan_param(p, "two_sided");
	int64_t ts;
	return !v || (bp_parse_int64(v, &ts, "two_sided", NULL) == 0 && ts == 0);
}

int bp_check_ca_record(const struct bp_plan *p, const struct bp_step *st, size_t i,
		       struct bp_error *err)
{
	if (!st->record || !st->record_ops || !st->record_ops->ca)
		return 0;
	const struct bp_ca_record *r = st->record_ops->ca(st->record);
	const struct bp_layout *l = bp_plan_layout(p, st);
	if (!r || (!st->nca && !r->ncalls))
		return 0;
	if (!l->npipes || !l->nservers)
		return bp_errorf(err, "step %zu record: %zu scheduler calls on a layout without "
				 "attention servers", i, r->ncalls);
	struct resolve v = {.st = st, .r = r, .i = i};
	struct call_ctx x = {.p = p, .n = (int)l->nservers, .tp = l->pipes[0].sc.tp};
	size_t m = 0;
	int rc = -1;
	for (size_t k = 0; k < l->npipes; k++)
		v.pp = l->pipes[k].sc.pp > v.pp ? l->pipes[k].sc.pp : v.pp;
	for (size_t k = 0; k < st->npipes; k++)
		m = st->pipes[k].nmbs > m ? st->pipes[k].nmbs : m;
	v.F = x.F = (int64_t)m + v.pp - 1;
	v.m = m;
	v.own = bp_ca_own_bwd(st->nca ? st->ca[st->nca - 1].tick : -1, v.pp, m);
	size_t *mb_at = bp_calloc(st->npipes + 1, sizeof(size_t), err);
	int *srv = bp_calloc(l->npipes * (size_t)v.pp + 1, sizeof(int), err);
	struct call_task *ct = bp_calloc(st->nca + 1, sizeof(*ct), err);
	struct bp_step_span *sp = NULL;
	x.before = bp_calloc(2 * (size_t)x.n, sizeof(int64_t), err);
	x.send = bp_calloc(2 * (size_t)x.n, sizeof(double), err);
	if (!mb_at || !srv || !ct || !x.before || !x.send)
		goto out;
	for (size_t k = 0; k < st->npipes; k++)
		mb_at[k + 1] = mb_at[k] + st->pipes[k].nmbs;
	sp = bp_step_spans(st, &v.nsp, err);
	if (!sp)
		goto out;
	x.after = x.before + x.n;
	x.recv = x.send + x.n;
	v.sp = sp;
	v.mb_at = mb_at;
	v.srv = srv;
	linear_servers(l, v.pp, srv);
	for (size_t t = 0; t < st->nca; t++)
		if (resolve_task(&v, t, &ct[t], err) < 0)
			goto out;
	qsort(ct, st->nca, sizeof(*ct), cmp_call_task);
	rc = compare_calls(r, &x, ct, st->nca, one_sided(p), i, err);
out:
	free(sp);
	free(mb_at);
	free(srv);
	free(ct);
	free(x.before);
	free(x.send);
	return rc;
}
