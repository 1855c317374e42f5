/* validate.c: the plan invariants (validate.h). */
#include "validate.h"

#include <stdlib.h>
#include <string.h>

#include "check_ca.h"
#include "predict.h"

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

/* The plan as a whole: its cluster, layouts, token caps and step count. */
static int check_frame(const struct bp_plan *p, struct bp_error *err)
{
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
	return 0;
}

/* One validation: the plan, its window [first, end) of the run's steps, every document it
 * holds (slots, by id) and every span it trains (all). */
struct vcheck {
	const struct bp_plan *p;
	struct bp_costs *costs;
	int64_t first, end;
	struct doc_slot *slots;
	size_t ndocs;
	struct bp_span *all;
	size_t nall, capall;
};

/* Every document the window holds, carried ones first, then each step's (its shape checked
 * on the way): sorted by id, none twice. A window (plan.h): steps keep the run's numbers,
 * [first, end); documents drawn before it and trained in it are carried. */
static int collect_docs(struct vcheck *v, struct bp_error *err)
{
	const struct bp_plan *p = v->p;
	size_t k = 0;
	v->ndocs = p->ncarried;
	for (size_t i = 0; i < p->nsteps; i++)
		v->ndocs += p->steps[i].ndocs;
	v->slots = bp_calloc(v->ndocs + 1, sizeof(*v->slots), err);
	if (!v->slots)
		return -1;
	for (size_t i = 0; i < p->ncarried; i++) {
		const struct bp_carried *c = &p->carried[i];
		if (c->d.len < 1 || c->step >= v->first || c->to_step < v->first ||
		    c->to_step >= v->end)
			return bp_errorf(err, "carried document %lld (%lld tokens, drawn in step "
					 "%lld) is trained in step %lld, outside the window's steps "
					 "%lld to %lld", (long long)c->d.id, (long long)c->d.len,
					 (long long)c->step, (long long)c->to_step,
					 (long long)v->first, (long long)v->end - 1);
		v->slots[k++] = (struct doc_slot){c->d.id, c->d.len, c->step, c->to_step, 0};
	}
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		if (check_step_shape(p, st, i, v->first, err) < 0)
			return -1;
		for (size_t d = 0; d < st->ndocs; d++) {
			if (st->docs[d].len < 1)
				return bp_errorf(err, "step %zu document %lld has length %lld", i,
						 (long long)st->docs[d].id,
						 (long long)st->docs[d].len);
			v->slots[k++] = (struct doc_slot){st->docs[d].id, st->docs[d].len,
							  st->index, st->index, 0};
		}
	}
	qsort(v->slots, v->ndocs, sizeof(*v->slots), cmp_slot);
	for (size_t i = 1; i < v->ndocs; i++)
		if (v->slots[i].id == v->slots[i - 1].id)
			return bp_errorf(err, "document %lld is drawn twice",
					 (long long)v->slots[i].id);
	return 0;
}

/* A step's delays: of documents it drew, to a later step of the window (an open window may
 * delay past its end), at their length; each slot then belongs to the step named. */
static int apply_delays(struct vcheck *v, const struct bp_step *st, struct bp_error *err)
{
	for (size_t d = 0; d < st->ndelayed; d++) {
		const struct bp_delayed *dl = &st->delayed[d];
		struct doc_slot *sl = find_slot(v->slots, v->ndocs, dl->doc);
		if (!sl || sl->step != st->index)
			return bp_errorf(err, "step %lld delays document %lld that it did not draw",
					 (long long)st->index, (long long)dl->doc);
		if (dl->to_step <= st->index || (dl->to_step >= v->end && !v->p->open))
			return bp_errorf(err, "step %lld delays document %lld to step %lld%s",
					 (long long)st->index, (long long)dl->doc,
					 (long long)dl->to_step,
					 dl->to_step >= v->end ? ", past the plan's last step (the "
								 "plan is not an open window)" : "");
		if (dl->len != sl->len)
			return bp_errorf(err, "step %lld delays document %lld as %lld tokens, it has "
					 "%lld", (long long)st->index, (long long)dl->doc,
					 (long long)dl->len, (long long)sl->len);
		sl->to_step = dl->to_step;
	}
	return 0;
}

/* Keeps a micro-batch's spans for the tiling check at the end. */
static int keep_spans(struct vcheck *v, const struct bp_mb *mb, struct bp_error *err)
{
	if (v->nall + mb->nspans > v->capall) {
		size_t nc = (v->capall + mb->nspans) * 2;
		struct bp_span *na = bp_realloc_array(v->all, nc, sizeof(*na), err);
		if (!na)
			return -1;
		v->all = na;
		v->capall = nc;
	}
	if (mb->nspans) /* an empty micro-batch is reported by check_mb */
		memcpy(v->all + v->nall, mb->spans, mb->nspans * sizeof(*v->all));
	v->nall += mb->nspans;
	return 0;
}

/* Span s of step i's (st) pipeline q micro-batch j (mb): of a document drawn, trained in this
 * step, inside it, and whole unless the plan's documents allow pieces. */
static int check_span(struct vcheck *v, const struct bp_step *st, const struct bp_mb *mb,
		      const struct bp_span *sp, size_t i, size_t q, size_t j,
		      struct bp_error *err)
{
	const struct bp_plan *p = v->p;
	struct doc_slot *sl = find_slot(v->slots, v->ndocs, sp->doc);
	if (!sl)
		return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu: document %lld was "
				 "never drawn", i, q, j, (long long)sp->doc);
	if (sl->to_step != st->index)
		return bp_errorf(err, "step %lld trains document %lld that belongs to step %lld",
				 (long long)st->index, (long long)sp->doc, (long long)sl->to_step);
	if (sp->len < 1 || sp->offset < 0 || sp->offset > sl->len - sp->len)
		return bp_errorf(err, "step %zu: span [%lld, +%lld) lies outside document %lld of "
				 "length %lld", i, (long long)sp->offset, (long long)sp->len,
				 (long long)sp->doc, (long long)sl->len);
	/* Like for like (documents.h): under "whole" and "cut" every method trains the
	 * loader's documents whole; a disaggregated micro-batch may hold a piece, its CA-tasks
	 * then carry the whole prefix (check_ca.c). */
	if (p->documents != BP_DOCS_PER_METHOD && sp->len != sl->len &&
	    mb->attn != BP_ATTN_DISAGG)
		return bp_errorf(err, "step %zu: span [%lld, +%lld) cuts document %lld of length "
				 "%lld, but the plan's documents are \"%s\": every method trains "
				 "them whole", i, (long long)sp->offset, (long long)sp->len,
				 (long long)sp->doc, (long long)sl->len,
				 bp_documents_name(p->documents));
	sl->covered += sp->len;
	return 0;
}

/* Micro-batch j of step i's pipeline q: sharding resolved, not empty, its spans, its token
 * cap and its attention. */
static int check_mb(struct vcheck *v, const struct bp_step *st, const struct bp_lpipe *lp,
		    size_t i, size_t q, size_t j, struct bp_error *err)
{
	const struct bp_mb *mb = &st->pipes[q].mbs[j];
	int64_t tok = 0;
	if (keep_spans(v, mb, err) < 0)
		return -1;
	if (mb->shard != BP_SHARD_SEQUENCE && mb->shard != BP_SHARD_DOCUMENT &&
	    mb->shard != BP_SHARD_ULYSSES)
		return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu has no resolved "
				 "sharding", i, q, j);
	if (!mb->nspans)
		return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu is empty", i, q, j);
	for (size_t s = 0; s < mb->nspans; s++) {
		if (check_span(v, st, mb, &mb->spans[s], i, q, j, err) < 0)
			return -1;
		tok += mb->spans[s].len;
	}
	if (tok > lp->mb_max_tokens)
		return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu holds %lld tokens, "
				 "more than max_microbatch_tokens %lld", i, q, j, (long long)tok,
				 (long long)lp->mb_max_tokens);
	return check_attn(v->p, mb, lp, i, q, j, err);
}

/* With costs: every stage's recorded peak of step i's pipeline q within the memory cap. */
static int check_pipe_mem(const struct vcheck *v, const struct bp_layout *l,
			  const struct bp_pipe *pi, size_t i, size_t q, struct bp_error *err)
{
	if (!v->costs || !pi->peak_mem)
		return 0;
	const struct bp_costmodel *cm = bp_costs_pipe(v->costs, l, q, err);
	if (!cm)
		return -1;
	int64_t mem_cap = bp_cost_mem_cap(cm);
	for (int s = 0; s < l->pipes[q].sc.pp; s++)
		if (pi->peak_mem[s] > mem_cap)
			return bp_errorf(err, "step %zu pipeline %zu stage %d needs %.2f GiB, more "
					 "than the %.2f GiB cap", i, q, s,
					 pi->peak_mem[s] / 1073741824.0, mem_cap / 1073741824.0);
	return 0;
}

/* Step i's micro-batches, memory, CA-tasks and record. */
static int check_step(struct vcheck *v, size_t i, struct bp_error *err)
{
	const struct bp_step *st = &v->p->steps[i];
	const struct bp_layout *l = bp_plan_layout(v->p, st);
	for (size_t q = 0; q < st->npipes; q++) {
		for (size_t j = 0; j < st->pipes[q].nmbs; j++)
			if (check_mb(v, st, &l->pipes[q], i, q, j, err) < 0)
				return -1;
		if (check_pipe_mem(v, l, &st->pipes[q], i, q, err) < 0)
			return -1;
	}
	if (bp_check_ca_tasks(v->p, st, i, err) < 0)
		return -1;
	if (st->record && st->record_ops && st->record_ops->validate &&
	    st->record_ops->validate(st->record, st, err) < 0)
		return bp_error_prefix(err, "step %zu record", i);
	return bp_check_ca_record(v->p, st, i, err);
}

/* Spans of one document must tile it: sorted by offset, each starts where the last ended.
 * With the total equal to the length, every token is trained exactly once. */
static int check_coverage(struct vcheck *v, struct bp_error *err)
{
	qsort(v->all, v->nall, sizeof(*v->all), cmp_span);
	for (size_t i = 1; i < v->nall; i++)
		if (v->all[i].doc == v->all[i - 1].doc &&
		    v->all[i].offset < v->all[i - 1].offset + v->all[i - 1].len)
			return bp_errorf(err, "document %lld has overlapping spans at offset %lld",
					 (long long)v->all[i].doc, (long long)v->all[i].offset);
	for (size_t i = 0; i < v->ndocs; i++) {
		const struct doc_slot *sl = &v->slots[i];
		if (sl->to_step < v->end && sl->covered != sl->len)
			return bp_errorf(err, "document %lld (step %lld, %lld tokens) is trained for "
					 "%lld tokens", (long long)sl->id, (long long)sl->step,
					 (long long)sl->len, (long long)sl->covered);
	}
	return 0;
}

int bp_plan_validate(const struct bp_plan *p, struct bp_costs *costs, struct bp_error *err)
{
	if (check_frame(p, err) < 0)
		return -1;
	struct vcheck v = {.p = p, .costs = costs, .first = p->first_step,
			   .end = p->first_step + (int64_t)p->nsteps};
	int rc = collect_docs(&v, err);
	for (size_t i = 0; !rc && i < p->nsteps; i++)
		rc = apply_delays(&v, &p->steps[i], err);
	for (size_t i = 0; !rc && i < p->nsteps; i++)
		rc = check_step(&v, i, err);
	if (!rc)
		rc = check_coverage(&v, err);
	free(v.slots);
	free(v.all);
	return rc < 0 ? -1 : 0;
}
