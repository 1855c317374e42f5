/* validate.c: the plan invariants (validate.h). */
#include "validate.h"

#include <stdlib.h>
#include <string.h>

#include "predict.h"
#include "ticks.h"

/* Which drawn document a span refers to, and its coverage bookkeeping. */
struct doc_slot {
	int64_t id, len, step, to_step, covered;
};

static int cmp_slot(const void *a, const void *b)
{
	const struct doc_slot *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

static struct doc_slot *find_slot(struct doc_slot *v, size_t n, int64_t id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].id == id ? &v[lo] : NULL;
}

static int cmp_span(const void *a, const void *b)
{
	const struct bp_span *x = a, *y = b;
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	return (x->offset > y->offset) - (x->offset < y->offset);
}

/* A span of a step with where it lives, for CA-task lookups. */
struct span_at {
	int64_t doc, offset, len;
	size_t pipe, mb, span;
};

static int cmp_span_at(const void *a, const void *b)
{
	const struct span_at *x = a, *y = b;
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	return (x->offset > y->offset) - (x->offset < y->offset);
}

/* A CA-task resolved to its span and stage. */
struct task_at {
	size_t pipe, mb, span;
	int64_t stage, q0, q1;
};

static int cmp_task_at(const void *a, const void *b)
{
	const struct task_at *x = a, *y = b;
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

/* DistCA's CA-tasks of one step (Sec. 4.1-4.2): each tiles its micro-batch's spans once per
 * stage, at forward tick mb + stage (DistCA Fig. 8 as ticks.h lays it out: forward tick t
 * runs micro-batch t - r on stage r), with KV exactly the causal prefix of the queries inside
 * their span. */
static int check_ca(const struct bp_plan *p, const struct bp_step *st, size_t i,
		    struct bp_error *err)
{
	const struct bp_layout *l = bp_plan_layout(p, st);
	struct span_at *sp = NULL;
	struct task_at *ta = NULL;
	size_t nsp = 0, ndis = 0, expect = 0;
	int rc = -1;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
			const struct bp_mb *mb = &st->pipes[k].mbs[j];
			nsp += mb->nspans;
			if (mb->attn == BP_ATTN_DISAGG) {
				ndis++;
				expect += mb->nspans * (size_t)l->pipes[k].sc.pp;
			}
		}
	if (!ndis && !st->nca)
		return 0;
	if (ndis && !bp_layout_schedule(l)->world_ticks)
		return bp_errorf(err, "step %zu has disaggregated micro-batches but layout %d runs "
				 "\"%s\", not \"%s\"", i, st->layout, l->schedule,
				 BP_SCHEDULE_TICKS);
	if (ndis && !l->nservers)
		return bp_errorf(err, "step %zu has disaggregated micro-batches but layout %d has "
				 "no attention servers", i, st->layout);
	/* with pipeline stages the backward resends (as DistCA's code does); a plan that asked for
	 * resend resends everywhere (non-resend may fall back, never the other way) */
	if (!bp_ticks_resend(st) && l->npipes && l->pipes[0].sc.pp > 1)
		return bp_errorf(err, "step %zu runs non-resend mode on pp %d (only pp 1 may keep "
				 "Q, K and V on the servers)", i, l->pipes[0].sc.pp);
	/* A plan whose parameter resend is 1 resends at every step. The mode is the step's
	 * record's (bp_ticks_resend), and the parameter is the record's method's: the method
	 * whose row keeps that record, named as the record's kind. */
	const char *asked = bp_plan_param(p, "resend");
	if (!bp_ticks_resend(st) && !strcmp(p->method, st->record_ops->name) && asked &&
	    !strcmp(asked, "1"))
		return bp_errorf(err, "step %zu runs non-resend mode but the plan's parameter "
				 "resend is 1", i);
	sp = bp_calloc(nsp + 1, sizeof(*sp), err);
	ta = bp_calloc(st->nca + 1, sizeof(*ta), err);
	if (!sp || !ta)
		goto out;
	nsp = 0;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
			const struct bp_mb *mb = &st->pipes[k].mbs[j];
			for (size_t q = 0; q < mb->nspans; q++)
				sp[nsp++] = (struct span_at){mb->spans[q].doc, mb->spans[q].offset,
							     mb->spans[q].len, k, j, q};
		}
	qsort(sp, nsp, sizeof(*sp), cmp_span_at);
	for (size_t t = 0; t < st->nca; t++) {
		const struct bp_ca_task *c = &st->ca[t];
		if (t && task_order(&st->ca[t - 1], c) >= 0) {
			bp_errorf(err, "step %zu ca_tasks[%zu] is out of order (tasks are sorted by "
				  "tick, server, doc, query start, without duplicates)", i, t);
			goto out;
		}
		if (c->server < 0 || (size_t)c->server >= l->nservers) {
			bp_errorf(err, "step %zu ca_tasks[%zu] names server %d of %zu", i, t,
				  c->server, l->nservers);
			goto out;
		}
		if (c->q0 < 0 || c->q1 <= c->q0) {
			bp_errorf(err, "step %zu ca_tasks[%zu] has query range [%lld, %lld)", i, t,
				  (long long)c->q0, (long long)c->q1);
			goto out;
		}
		/* the span of doc holding q0: the last with offset <= q0 */
		size_t lo = 0, hi = nsp;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (sp[mid].doc < c->doc ||
			    (sp[mid].doc == c->doc && sp[mid].offset <= c->q0))
				lo = mid + 1;
			else
				hi = mid;
		}
		const struct span_at *s = lo ? &sp[lo - 1] : NULL;
		if (!s || s->doc != c->doc || c->q1 > s->offset + s->len) {
			bp_errorf(err, "step %zu ca_tasks[%zu]: queries [%lld, %lld) of document "
				  "%lld lie in no span of the step", i, t, (long long)c->q0,
				  (long long)c->q1, (long long)c->doc);
			goto out;
		}
		/* The causal prefix: KV [kv0, q1), kv0 the start of the run of the document's
		 * spans in micro-batches of the same index (all pipelines: DistCA's head-tail
		 * placement spreads a document over linear ranks, Sec. 6.1) that ends at the
		 * queries' span. Under "whole" and "cut" documents the run must start at token 0
		 * (the document's whole prefix: a CA-task's context is all that precedes its
		 * queries, DistCA Sec. 4.1); under
		 * "per-method" a span may be its own sequence, so kv0 may be any span start of
		 * the run. */
		size_t run = lo - 1;
		int kv_ok = c->kv0 == s->offset;
		while (run > 0 && sp[run - 1].doc == c->doc && sp[run - 1].mb == s->mb &&
		       sp[run - 1].offset + sp[run - 1].len == sp[run].offset &&
		       st->pipes[sp[run - 1].pipe].mbs[sp[run - 1].mb].attn == BP_ATTN_DISAGG) {
			run--;
			if (sp[run].offset == c->kv0)
				kv_ok = 1;
		}
		if (p->documents != BP_DOCS_PER_METHOD)
			kv_ok = c->kv0 == 0 && sp[run].offset == 0;
		if (!kv_ok || c->kv1 != c->q1) {
			bp_errorf(err, "step %zu ca_tasks[%zu]: KV range [%lld, %lld) of document "
				  "%lld does not cover the causal prefix [%lld, %lld) of its queries",
				  i, t, (long long)c->kv0, (long long)c->kv1, (long long)c->doc,
				  (long long)(p->documents != BP_DOCS_PER_METHOD ? 0 : s->offset),
				  (long long)c->q1);
			goto out;
		}
		const struct bp_mb *mb = &st->pipes[s->pipe].mbs[s->mb];
		if (mb->attn != BP_ATTN_DISAGG) {
			bp_errorf(err, "step %zu ca_tasks[%zu] serves pipeline %zu micro-batch %zu, "
				  "whose attention is %s", i, t, s->pipe, s->mb,
				  bp_attn_kind_name(mb->attn));
			goto out;
		}
		int64_t stage = c->tick - (int64_t)s->mb;
		if (stage < 0 || stage >= l->pipes[s->pipe].sc.pp) {
			bp_errorf(err, "step %zu ca_tasks[%zu]: tick %lld is not when pipeline %zu "
				  "micro-batch %zu runs (ticks %zu to %zu)", i, t,
				  (long long)c->tick, s->pipe, s->mb, s->mb,
				  s->mb + (size_t)l->pipes[s->pipe].sc.pp - 1);
			goto out;
		}
		ta[t] = (struct task_at){s->pipe, s->mb, s->span, stage, c->q0, c->q1};
	}
	qsort(ta, st->nca, sizeof(*ta), cmp_task_at);
	size_t groups = 0;
	for (size_t t = 0; t < st->nca;) {
		size_t u = t;
		const struct bp_span *span = &st->pipes[ta[t].pipe].mbs[ta[t].mb].spans[ta[t].span];
		int64_t pos = span->offset;
		while (u < st->nca && ta[u].pipe == ta[t].pipe && ta[u].mb == ta[t].mb &&
		       ta[u].span == ta[t].span && ta[u].stage == ta[t].stage) {
			if (ta[u].q0 != pos)
				break;
			pos = ta[u].q1;
			u++;
		}
		if (pos != span->offset + span->len || (u < st->nca && ta[u].pipe == ta[t].pipe &&
							ta[u].mb == ta[t].mb &&
							ta[u].span == ta[t].span &&
							ta[u].stage == ta[t].stage)) {
			bp_errorf(err, "step %zu: the CA-tasks of pipeline %zu micro-batch %zu stage "
				  "%lld do not tile the queries of document %lld [%lld, %lld) once",
				  i, ta[t].pipe, ta[t].mb, (long long)ta[t].stage,
				  (long long)span->doc, (long long)span->offset,
				  (long long)(span->offset + span->len));
			goto out;
		}
		groups++;
		t = u;
	}
	if (groups != expect) {
		bp_errorf(err, "step %zu: CA-tasks cover %zu (span, stage) pairs of its "
			  "disaggregated micro-batches, which have %zu", i, groups, expect);
		goto out;
	}
	rc = 0;
out:
	free(sp);
	free(ta);
	return rc;
}

/* The attention kind of one micro-batch. */
static int check_attn(const struct bp_plan *p, const struct bp_mb *mb, const struct bp_lpipe *lp,
		      size_t i, size_t q, size_t j, struct bp_error *err)
{
	if (mb->attn == BP_ATTN_SPARSE) {
		if (mb->sparse_block < 1 || !mb->sparse_k)
			return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu: sparse "
					 "attention needs a block >= 1 and a budget per layer", i,
					 q, j);
		int64_t longest = 0;
		for (size_t s = 0; s < mb->nspans; s++)
			if (mb->spans[s].len > longest)
				longest = mb->spans[s].len;
		int64_t blocks = (longest + mb->sparse_block - 1) / mb->sparse_block;
		for (int l = 0; l < p->model.layers; l++)
			if (mb->sparse_k[l] < 1 || mb->sparse_k[l] > blocks)
				return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu layer "
						 "%d: sparse budget %d is outside [1, %lld], the "
						 "blocks of %lld tokens in its longest span", i, q, j,
						 l, mb->sparse_k[l], (long long)blocks,
						 (long long)longest);
	} else if (mb->sparse_k) {
		return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu: a sparse budget on "
				 "%s attention", i, q, j, bp_attn_kind_name(mb->attn));
	}
	if (mb->attn == BP_ATTN_SPARSE && lp->sc.cp != 1)
		return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu: sparse attention "
				 "needs cp 1 (the latency table is measured on whole documents), "
				 "the pipeline has cp %d", i, q, j, lp->sc.cp);
	if (mb->attn == BP_ATTN_DISAGG && lp->sc.cp != 1)
		return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu: disaggregated "
				 "attention needs cp 1 (the servers do the context split), the "
				 "pipeline has cp %d", i, q, j, lp->sc.cp);
	return 0;
}

/* One step's shape: its index in the window, its layout and pipelines, its schedule's rules
 * (micro-batch counts, dense attention and dp-allreduce for chunked schedules), its sync
 * model, and that it trains something. */
static int check_step_shape(const struct bp_plan *p, const struct bp_step *st, size_t i,
			    int64_t first, struct bp_error *err)
{
	if (st->index != first + (int64_t)i)
		return bp_errorf(err, "step %zu has index %lld, not %lld", i, (long long)st->index,
				 (long long)(first + (int64_t)i));
	if (st->layout < 0 || (size_t)st->layout >= p->nlayouts)
		return bp_errorf(err, "step %zu names layout %d but the plan has %zu", i,
				 st->layout, p->nlayouts);
	if (st->npipes != p->layouts[st->layout].npipes)
		return bp_errorf(err, "step %zu has %zu pipelines but layout %d has %zu", i,
				 st->npipes, st->layout, p->layouts[st->layout].npipes);
	/* the schedule's rule on each pipeline's micro-batch count (schedule.h) */
	const struct bp_layout *sl = &p->layouts[st->layout];
	const struct bp_schedule *sch = bp_layout_schedule(sl);
	for (size_t q = 0; sch->check_count && q < st->npipes; q++)
		if (sch->check_count(sl->pipes[q].sc.pp, sl->vstages, st->pipes[q].nmbs, err) < 0)
			return bp_error_prefix(err, "step %zu pipeline %zu", i, q);
	/* model chunks split a stage's layers evenly: dense attention only (a sparse budget
	 * differs per layer, so chunks of a stage would not cost alike) */
	for (size_t q = 0; sch->chunked && q < st->npipes; q++)
		for (size_t j = 0; j < st->pipes[q].nmbs; j++)
			if (st->pipes[q].mbs[j].attn != BP_ATTN_DENSE)
				return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu has %s "
						 "attention; the %s schedule runs dense attention "
						 "only", i, q, j,
						 bp_attn_kind_name(st->pipes[q].mbs[j].attn),
						 sl->schedule);
	if (sch->chunked && strcmp(st->sync, BP_SYNC_DP_ALLREDUCE))
		return bp_errorf(err, "step %zu has sync model \"%s\"; the %s schedule is "
				 "modelled with \"%s\" only", i, st->sync, sl->schedule,
				 BP_SYNC_DP_ALLREDUCE);
	if (!bp_sync_known(st->sync))
		return bp_errorf(err, "step %zu has sync model \"%s\", not \"%s\", \"%s\" or "
				 "\"%s\"", i, st->sync, BP_SYNC_DP_ALLREDUCE, BP_SYNC_HYD_PULLPUSH,
				 BP_SYNC_HYD_PULLPUSH_SERIAL);
	/* a step that trains nothing would still pay its gradient synchronisation */
	size_t nmbs = 0;
	for (size_t q = 0; q < st->npipes; q++)
		nmbs += st->pipes[q].nmbs;
	if (!nmbs)
		return bp_errorf(err, "step %zu trains no micro-batch", i);
	return 0;
}

int bp_plan_validate(const struct bp_plan *p, struct bp_costs *costs, struct bp_error *err)
{
	int rc = -1;
	struct doc_slot *slots = NULL;
	struct bp_span *all = NULL;
	size_t nall = 0, capall = 0;
	if (bp_cluster_check(&p->cluster, err) < 0)
		return -1;
	if (!p->nlayouts)
		return bp_errorf(err, "the plan has no layouts");
	for (size_t i = 0; i < p->nlayouts; i++)
		if (bp_layout_check(&p->layouts[i], p->cluster.gpus, p->cluster.gpus_per_node,
				    p->model.layers, err) < 0)
			return bp_error_prefix(err, "layout %zu", i);
	if (p->max_tokens < 1 || bp_plan_mb_cap(p) < p->max_tokens)
		return bp_errorf(err, "max_tokens %lld and max_microbatch_tokens %lld are not "
				 "1 <= max_tokens <= max_microbatch_tokens",
				 (long long)p->max_tokens, (long long)bp_plan_mb_cap(p));
	/* Every drawn batch becomes a step; delays can only add steps after them. */
	if (p->nsteps_drawn < 1 || p->nsteps_drawn > (int64_t)p->nsteps)
		return bp_errorf(err, "the plan has %zu steps but sampling drew %lld", p->nsteps,
				 (long long)p->nsteps_drawn);
	/* A window (plan.h): steps keep the run's numbers, [first, end); documents drawn
	 * before it and trained in it are carried; an open window may delay past its end. */
	const int64_t first = p->first_step, end = first + (int64_t)p->nsteps;
	size_t ndocs = p->ncarried;
	for (size_t i = 0; i < p->nsteps; i++)
		ndocs += p->steps[i].ndocs;
	slots = bp_calloc(ndocs + 1, sizeof(*slots), err);
	if (!slots)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < p->ncarried; i++) {
		const struct bp_carried *c = &p->carried[i];
		if (c->d.len < 1 || c->step >= first || c->to_step < first || c->to_step >= end) {
			bp_errorf(err, "carried document %lld (%lld tokens, drawn in step %lld) is "
				  "trained in step %lld, outside the window's steps %lld to %lld",
				  (long long)c->d.id, (long long)c->d.len, (long long)c->step,
				  (long long)c->to_step, (long long)first, (long long)end - 1);
			goto out;
		}
		slots[k++] = (struct doc_slot){c->d.id, c->d.len, c->step, c->to_step, 0};
	}
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		if (check_step_shape(p, st, i, first, err) < 0)
			goto out;
		for (size_t d = 0; d < st->ndocs; d++) {
			if (st->docs[d].len < 1) {
				bp_errorf(err, "step %zu document %lld has length %lld", i,
					  (long long)st->docs[d].id, (long long)st->docs[d].len);
				goto out;
			}
			slots[k++] = (struct doc_slot){st->docs[d].id, st->docs[d].len,
						       st->index, st->index, 0};
		}
	}
	qsort(slots, ndocs, sizeof(*slots), cmp_slot);
	for (size_t i = 1; i < ndocs; i++)
		if (slots[i].id == slots[i - 1].id) {
			bp_errorf(err, "document %lld is drawn twice", (long long)slots[i].id);
			goto out;
		}
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		for (size_t d = 0; d < st->ndelayed; d++) {
			const struct bp_delayed *dl = &st->delayed[d];
			struct doc_slot *sl = find_slot(slots, ndocs, dl->doc);
			if (!sl || sl->step != st->index) {
				bp_errorf(err, "step %lld delays document %lld that it did not draw",
					  (long long)st->index, (long long)dl->doc);
				goto out;
			}
			if (dl->to_step <= st->index || (dl->to_step >= end && !p->open)) {
				bp_errorf(err, "step %lld delays document %lld to step %lld%s",
					  (long long)st->index, (long long)dl->doc,
					  (long long)dl->to_step,
					  dl->to_step >= end ? ", past the plan's last step (the "
							       "plan is not an open window)" : "");
				goto out;
			}
			if (dl->len != sl->len) {
				bp_errorf(err, "step %lld delays document %lld as %lld tokens, it has "
					  "%lld", (long long)st->index, (long long)dl->doc,
					  (long long)dl->len, (long long)sl->len);
				goto out;
			}
			sl->to_step = dl->to_step;
		}
	}
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		const struct bp_layout *l = bp_plan_layout(p, st);
		for (size_t q = 0; q < st->npipes; q++) {
			const struct bp_pipe *pi = &st->pipes[q];
			const struct bp_lpipe *lp = &l->pipes[q];
			for (size_t j = 0; j < pi->nmbs; j++) {
				const struct bp_mb *mb = &pi->mbs[j];
				int64_t tok = 0;
				if (nall + mb->nspans > capall) {
					size_t nc = (capall + mb->nspans) * 2;
					struct bp_span *na =
						bp_realloc_array(all, nc, sizeof(*na), err);
					if (!na)
						goto out;
					all = na;
					capall = nc;
				}
				if (mb->nspans) /* an empty micro-batch is reported below */
					memcpy(all + nall, mb->spans, mb->nspans * sizeof(*all));
				nall += mb->nspans;
				if (mb->shard != BP_SHARD_SEQUENCE && mb->shard != BP_SHARD_DOCUMENT &&
				    mb->shard != BP_SHARD_ULYSSES) {
					bp_errorf(err, "step %zu pipeline %zu micro-batch %zu has no "
						  "resolved sharding", i, q, j);
					goto out;
				}
				if (!mb->nspans) {
					bp_errorf(err, "step %zu pipeline %zu micro-batch %zu is empty",
						  i, q, j);
					goto out;
				}
				for (size_t s = 0; s < mb->nspans; s++) {
					const struct bp_span *sp = &mb->spans[s];
					struct doc_slot *sl = find_slot(slots, ndocs, sp->doc);
					if (!sl) {
						bp_errorf(err, "step %zu pipeline %zu micro-batch %zu: "
							  "document %lld was never drawn", i, q, j,
							  (long long)sp->doc);
						goto out;
					}
					if (sl->to_step != st->index) {
						bp_errorf(err, "step %lld trains document %lld that belongs "
							  "to step %lld", (long long)st->index,
							  (long long)sp->doc, (long long)sl->to_step);
						goto out;
					}
					if (sp->len < 1 || sp->offset < 0 ||
					    sp->offset > sl->len - sp->len) {
						bp_errorf(err, "step %zu: span [%lld, +%lld) lies outside "
							  "document %lld of length %lld", i,
							  (long long)sp->offset, (long long)sp->len,
							  (long long)sp->doc, (long long)sl->len);
						goto out;
					}
					/* Like for like (documents.h): under "whole" and "cut"
					 * every method trains the loader's documents whole; a
					 * disaggregated micro-batch may hold a piece, its
					 * CA-tasks then carry the whole prefix (check_ca). */
					if (p->documents != BP_DOCS_PER_METHOD &&
					    sp->len != sl->len && mb->attn != BP_ATTN_DISAGG) {
						bp_errorf(err, "step %zu: span [%lld, +%lld) cuts "
							  "document %lld of length %lld, but the "
							  "plan's documents are \"%s\": every "
							  "method trains them whole", i,
							  (long long)sp->offset, (long long)sp->len,
							  (long long)sp->doc, (long long)sl->len,
							  bp_documents_name(p->documents));
						goto out;
					}
					sl->covered += sp->len;
					tok += sp->len;
				}
				if (tok > lp->mb_max_tokens) {
					bp_errorf(err, "step %zu pipeline %zu micro-batch %zu holds %lld "
						  "tokens, more than max_microbatch_tokens %lld", i, q,
						  j, (long long)tok, (long long)lp->mb_max_tokens);
					goto out;
				}
				if (check_attn(p, mb, lp, i, q, j, err) < 0)
					goto out;
			}
			if (costs && pi->peak_mem) {
				const struct bp_costmodel *cm = bp_costs_pipe(costs, l, q, err);
				if (!cm)
					goto out;
				int64_t mem_cap = bp_cost_mem_cap(cm);
				for (int s = 0; s < lp->sc.pp; s++)
					if (pi->peak_mem[s] > mem_cap) {
						bp_errorf(err, "step %zu pipeline %zu stage %d needs "
							  "%.2f GiB, more than the %.2f GiB cap", i, q,
							  s, pi->peak_mem[s] / 1073741824.0,
							  mem_cap / 1073741824.0);
						goto out;
					}
			}
		}
		if (check_ca(p, st, i, err) < 0)
			goto out;
		if (st->record && st->record_ops && st->record_ops->validate &&
		    st->record_ops->validate(st->record, st, err) < 0) {
			bp_error_prefix(err, "step %zu record", i);
			goto out;
		}
	}
	/* Spans of one document must tile it: sorted by offset, each starts where the last
	 * ended. With the total equal to the length, every token is trained exactly once. */
	qsort(all, nall, sizeof(*all), cmp_span);
	for (size_t i = 1; i < nall; i++)
		if (all[i].doc == all[i - 1].doc &&
		    all[i].offset < all[i - 1].offset + all[i - 1].len) {
			bp_errorf(err, "document %lld has overlapping spans at offset %lld",
				  (long long)all[i].doc, (long long)all[i].offset);
			goto out;
		}
	for (size_t i = 0; i < ndocs; i++)
		if (slots[i].to_step < end && slots[i].covered != slots[i].len) {
			bp_errorf(err, "document %lld (step %lld, %lld tokens) is trained for %lld "
				  "tokens", (long long)slots[i].id, (long long)slots[i].step,
				  (long long)slots[i].len, (long long)slots[i].covered);
			goto out;
		}
	rc = 0;
out:
	free(slots);
	free(all);
	return rc;
}
