/* check_ca.c: the CA-task invariants of a step (check_ca.h), as DistCA lays them out: each
 * CA-task tiles its micro-batch's spans once per stage, at forward tick mb + stage (DistCA
 * Fig. 8 as ticks.h lays it out: forward tick t runs micro-batch t - r on stage r), with KV
 * exactly the causal prefix of the queries inside their span (Sec. 4.1-4.2). */
#include "check_ca.h"

#include <stdlib.h>
#include <string.h>

#include "ticks.h"

/* A span of a step with where it lives, for CA-task lookups. */
static int cmp_step_span(const void *a, const void *b)
{
	const struct bp_step_span *x = a, *y = b;
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	return (x->offset > y->offset) - (x->offset < y->offset);
}

struct bp_step_span *bp_step_spans(const struct bp_step *st, size_t *n, struct bp_error *err)
{
	size_t k_n = 0;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++)
			k_n += st->pipes[k].mbs[j].nspans;
	struct bp_step_span *sp = bp_calloc(k_n + 1, sizeof(*sp), err);
	if (!sp)
		return NULL;
	*n = 0;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
			const struct bp_mb *mb = &st->pipes[k].mbs[j];
			for (size_t q = 0; q < mb->nspans; q++)
				sp[(*n)++] = (struct bp_step_span){mb->spans[q].doc,
								   mb->spans[q].offset,
								   mb->spans[q].len, k, j, q};
		}
	qsort(sp, *n, sizeof(*sp), cmp_step_span);
	return sp;
}

size_t bp_step_span_after(const struct bp_step_span *sp, size_t n, int64_t doc, int64_t at)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (sp[mid].doc < doc || (sp[mid].doc == doc && sp[mid].offset <= at))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct task_at {
	int bwd; /* a backward tick's own task (ca_sched.h bp_ca_task_place) */
	size_t pipe, mb, span;
	int64_t stage, q0, q1;
};

static int cmp_task_at(const void *a, const void *b)
{
	const struct task_at *x = a, *y = b;
	if (x->bwd != y->bwd)
		return x->bwd - y->bwd;
	if (x->pipe != y->pipe)
		return (x->pipe > y->pipe) - (x->pipe < y->pipe);
	if (x->mb != y->mb)
		return (x->mb > y->mb) - (x->mb < y->mb);
	if (x->span != y->span)
		return (x->span > y->span) - (x->span < y->span);
	if (x->stage != y->stage)
		return (x->stage > y->stage) - (x->stage < y->stage);
	return (x->q0 > y->q0) - (x->q0 < y->q0);
}

static int task_order(const struct bp_ca_task *a, const struct bp_ca_task *b)
{
	if (a->tick != b->tick)
		return (a->tick > b->tick) - (a->tick < b->tick);
	if (a->server != b->server)
		return (a->server > b->server) - (a->server < b->server);
	if (a->doc != b->doc)
		return (a->doc > b->doc) - (a->doc < b->doc);
	return (a->q0 > b->q0) - (a->q0 < b->q0);
}

/* One step's check: its spans sorted by (doc, offset) and its tasks resolved. */
struct ca_check {
	const struct bp_plan *p;
	const struct bp_step *st;
	const struct bp_layout *l;
	size_t i; /* the step's place in the plan, for messages */
	struct bp_step_span *sp;
	size_t nsp;
	struct task_at *ta;
	size_t m;  /* the step's most micro-batches per pipeline */
	int own;   /* the step has backward ticks' own tasks (bp_ca_own_bwd) */
};

/* The step's disaggregated micro-batches (*ndis) and the (span, stage) pairs they hold
 * (*expect). */
static void count_spans(const struct bp_step *st, const struct bp_layout *l, size_t *ndis,
			size_t *expect)
{
	*ndis = *expect = 0;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
			const struct bp_mb *mb = &st->pipes[k].mbs[j];
			if (mb->attn == BP_ATTN_DISAGG) {
				(*ndis)++;
				*expect += mb->nspans * (size_t)l->pipes[k].sc.pp;
			}
		}
}

/* Where disaggregated micro-batches may run: a world-ticks layout with attention servers; and
 * the step's mode (bp_ticks_resend): with pipeline stages the backward resends (as DistCA's
 * code does). */
static int check_mode(const struct ca_check *c, size_t ndis, struct bp_error *err)
{
	const struct bp_layout *l = c->l;
	if (ndis && !bp_layout_schedule(l)->world_ticks)
		return bp_errorf(err, "step %zu has disaggregated micro-batches but layout %d runs "
				 "\"%s\", not \"%s\"", c->i, c->st->layout, l->schedule,
				 BP_SCHEDULE_TICKS);
	if (ndis && !l->nservers)
		return bp_errorf(err, "step %zu has disaggregated micro-batches but layout %d has "
				 "no attention servers", c->i, c->st->layout);
	if (!bp_ticks_resend(c->st) && l->npipes && l->pipes[0].sc.pp > 1)
		return bp_errorf(err, "step %zu runs non-resend mode on pp %d (only pp 1 may keep "
				 "Q, K and V on the servers)", c->i, l->pipes[0].sc.pp);
	return 0;
}

/* Task t's order, server and query range. */
static int check_task_fields(const struct ca_check *c, size_t t, struct bp_error *err)
{
	const struct bp_step *st = c->st;
	const struct bp_ca_task *a = &st->ca[t];
	if (t && task_order(&st->ca[t - 1], a) >= 0)
		return bp_errorf(err, "step %zu ca_tasks[%zu] is out of order (tasks are sorted by "
				 "tick, server, doc, query start, without duplicates)", c->i, t);
	if (a->server < 0 || (size_t)a->server >= c->l->nservers)
		return bp_errorf(err, "step %zu ca_tasks[%zu] names server %d of %zu", c->i, t,
				 a->server, c->l->nservers);
	if (a->q0 < 0 || a->q1 <= a->q0)
		return bp_errorf(err, "step %zu ca_tasks[%zu] has query range [%lld, %lld)", c->i,
				 t, (long long)a->q0, (long long)a->q1);
	return 0;
}

/* The index past the span of task a's document holding q0 (the last with offset <= q0). */
static size_t span_after(const struct ca_check *c, const struct bp_ca_task *a)
{
	return bp_step_span_after(c->sp, c->nsp, a->doc, a->q0);
}

/* The causal prefix: KV [kv0, q1), kv0 the start of the run of the document's spans in
 * micro-batches of the same index (all pipelines: DistCA's head-tail placement spreads a
 * document over linear ranks, Sec. 6.1) that ends at the queries' span (c->sp[at]). Under
 * "whole" and "cut" documents the run must start at token 0 (the document's whole prefix: a
 * CA-task's context is all that precedes its queries, DistCA Sec. 4.1); under "per-method" a
 * span may be its own sequence, so kv0 may be any span start of the run. */
static int kv_prefix_ok(const struct ca_check *c, const struct bp_ca_task *a, size_t at)
{
	const struct bp_step_span *sp = c->sp, *s = &sp[at];
	size_t run = at;
	int kv_ok = a->kv0 == s->offset;
	while (run > 0 && sp[run - 1].doc == a->doc && sp[run - 1].mb == s->mb &&
	       sp[run - 1].offset + sp[run - 1].len == sp[run].offset &&
	       c->st->pipes[sp[run - 1].pipe].mbs[sp[run - 1].mb].attn == BP_ATTN_DISAGG) {
		run--;
		if (sp[run].offset == a->kv0)
			kv_ok = 1;
	}
	if (c->p->documents != BP_DOCS_PER_METHOD)
		kv_ok = a->kv0 == 0 && sp[run].offset == 0;
	return kv_ok && a->kv1 == a->q1;
}

/* Task t: its fields, its queries inside one span, its KV prefix, a disaggregated
 * micro-batch and the tick it runs; resolved into c->ta[t]. */
static int check_task(struct ca_check *c, size_t t, struct bp_error *err)
{
	const struct bp_ca_task *a = &c->st->ca[t];
	size_t i = c->i;
	if (check_task_fields(c, t, err) < 0)
		return -1;
	size_t lo = span_after(c, a);
	const struct bp_step_span *s = lo ? &c->sp[lo - 1] : NULL;
	if (!s || s->doc != a->doc || a->q1 > s->offset + s->len)
		return bp_errorf(err, "step %zu ca_tasks[%zu]: queries [%lld, %lld) of document "
				 "%lld lie in no span of the step", i, t, (long long)a->q0,
				 (long long)a->q1, (long long)a->doc);
	if (!kv_prefix_ok(c, a, lo - 1))
		return bp_errorf(err, "step %zu ca_tasks[%zu]: KV range [%lld, %lld) of document "
				 "%lld does not cover the causal prefix [%lld, %lld) of its queries",
				 i, t, (long long)a->kv0, (long long)a->kv1, (long long)a->doc,
				 (long long)(c->p->documents != BP_DOCS_PER_METHOD ? 0 : s->offset),
				 (long long)a->q1);
	const struct bp_mb *mb = &c->st->pipes[s->pipe].mbs[s->mb];
	if (mb->attn != BP_ATTN_DISAGG)
		return bp_errorf(err, "step %zu ca_tasks[%zu] serves pipeline %zu micro-batch %zu, "
				 "whose attention is %s", i, t, s->pipe, s->mb,
				 bp_attn_kind_name(mb->attn));
	int pp = c->l->pipes[s->pipe].sc.pp, stage;
	size_t pf, pb, F = c->m + (size_t)pp - 1;
	if (bp_ca_task_place(pp, c->m, a->tick, s->mb, c->own, &stage, &pf, &pb) < 0) {
		if (c->own)
			return bp_errorf(err, "step %zu ca_tasks[%zu]: tick %lld is not when pipeline "
					 "%zu micro-batch %zu runs (forward ticks %zu to %zu, backward "
					 "ticks' own tasks %zu to %zu)", i, t, (long long)a->tick,
					 s->pipe, s->mb, s->mb, s->mb + (size_t)pp - 1,
					 F + s->mb, F + s->mb + (size_t)pp - 1);
		return bp_errorf(err, "step %zu ca_tasks[%zu]: tick %lld is not when pipeline %zu "
				 "micro-batch %zu runs (ticks %zu to %zu)", i, t, (long long)a->tick,
				 s->pipe, s->mb, s->mb, s->mb + (size_t)pp - 1);
	}
	c->ta[t] = (struct task_at){a->tick >= (int64_t)F, s->pipe, s->mb, s->span, stage,
				    a->q0, a->q1};
	return 0;
}

static int same_group(const struct task_at *a, const struct task_at *b)
{
	return a->bwd == b->bwd && a->pipe == b->pipe && a->mb == b->mb && a->span == b->span &&
	       a->stage == b->stage;
}

/* The resolved tasks, sorted, tile each (span, stage) once and cover all expect pairs. */
static int check_tiling(struct ca_check *c, size_t expect, struct bp_error *err)
{
	const struct bp_step *st = c->st;
	struct task_at *ta = c->ta;
	qsort(ta, st->nca, sizeof(*ta), cmp_task_at);
	size_t groups = 0;
	for (size_t t = 0; t < st->nca;) {
		size_t u = t;
		const struct bp_span *span = &st->pipes[ta[t].pipe].mbs[ta[t].mb].spans[ta[t].span];
		int64_t pos = span->offset;
		while (u < st->nca && same_group(&ta[u], &ta[t])) {
			if (ta[u].q0 != pos)
				break;
			pos = ta[u].q1;
			u++;
		}
		if (pos != span->offset + span->len || (u < st->nca && same_group(&ta[u], &ta[t])))
			return bp_errorf(err, "step %zu: the %sCA-tasks of pipeline %zu micro-batch "
					 "%zu stage %lld do not tile the queries of document %lld "
					 "[%lld, %lld) once", c->i, ta[t].bwd ? "backward " : "",
					 ta[t].pipe, ta[t].mb, (long long)ta[t].stage,
					 (long long)span->doc,
					 (long long)span->offset,
					 (long long)(span->offset + span->len));
		groups++;
		t = u;
	}
	if (groups != expect)
		return bp_errorf(err, "step %zu: CA-tasks cover %zu (span, stage) pairs of its "
				 "disaggregated micro-batches, which have %zu", c->i, groups, expect);
	return 0;
}

int bp_check_ca_tasks(const struct bp_plan *p, const struct bp_step *st, size_t i,
		      struct bp_error *err)
{
	struct ca_check c = {.p = p, .st = st, .l = bp_plan_layout(p, st), .i = i};
	size_t ndis, expect;
	int rc = -1;
	count_spans(st, c.l, &ndis, &expect);
	if (!ndis && !st->nca)
		return 0;
	if (check_mode(&c, ndis, err) < 0)
		return -1;
	for (size_t k = 0; k < st->npipes; k++)
		if (st->pipes[k].nmbs > c.m)
			c.m = st->pipes[k].nmbs;
	if (st->nca && c.l->npipes) {
		c.own = bp_ca_own_bwd(st->ca[st->nca - 1].tick, c.l->pipes[0].sc.pp, c.m);
		if (c.own && !bp_ticks_resend(st))
			return bp_errorf(err, "step %zu has backward ticks' own CA-tasks in non-resend "
					 "mode, whose backward must run where the forward left Q, K "
					 "and V", i);
		if (c.own)
			expect *= 2; /* every (span, stage) once forward, once backward */
	}
	c.sp = bp_step_spans(st, &c.nsp, err);
	c.ta = bp_calloc(st->nca + 1, sizeof(*c.ta), err);
	if (!c.sp || !c.ta)
		goto out;
	for (size_t t = 0; t < st->nca; t++)
		if (check_task(&c, t, err) < 0)
			goto out;
	rc = check_tiling(&c, expect, err);
out:
	free(c.sp);
	free(c.ta);
	return rc;
}
