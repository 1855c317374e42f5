/* schedule_fit.c: micro-batch counts fitted to the schedule's rule (schedule_fit.h). */
#include "schedule_fit.h"

#include <stdlib.h>
#include <string.h>

#include "layout.h"

/* The packing weight of a micro-batch: its documents' costs alone (bp_cost_doc), in *w.
 * 0 or -1. */
static int mb_weight(const struct bp_costmodel *cm, const struct bp_mb *mb, double *w,
		     struct bp_error *err)
{
	*w = 0.0;
	for (size_t i = 0; i < mb->nspans; i++) {
		double c;
		if (bp_cost_doc(cm, mb->spans[i].len, &c, err) < 0)
			return -1;
		*w += c;
	}
	return 0;
}

/* Splits micro-batch j of pi (two or more spans) after the span that best halves its
 * weight; the second part follows the first. */
static int split_mb(const struct bp_costmodel *cm, struct bp_pipe *pi, size_t j,
		    struct bp_error *err)
{
	struct bp_mb *mb = &pi->mbs[j];
	size_t n = mb->nspans, cut = 1;
	double total, pre = 0.0, best, c;
	if (mb_weight(cm, mb, &total, err) < 0)
		return -1;
	best = total;
	for (size_t i = 0; i + 1 < n; i++) {
		if (bp_cost_doc(cm, mb->spans[i].len, &c, err) < 0)
			return -1;
		pre += c;
		double worse = pre > total - pre ? pre : total - pre;
		if (worse < best) {
			best = worse;
			cut = i + 1;
		}
	}
	struct bp_mb *nm = bp_realloc_array(pi->mbs, pi->nmbs + 1, sizeof(*nm), err);
	if (!nm)
		return -1;
	pi->mbs = nm;
	mb = &nm[j];
	struct bp_mb tail;
	memset(&tail, 0, sizeof(tail));
	tail.spans = bp_calloc(n - cut, sizeof(*tail.spans), err);
	if (!tail.spans)
		return -1;
	memcpy(tail.spans, mb->spans + cut, (n - cut) * sizeof(*tail.spans));
	tail.nspans = n - cut;
	tail.shard = mb->shard;
	tail.attn = mb->attn;
	tail.sparse_block = mb->sparse_block;
	mb->nspans = cut;
	mb->tokens = 0;
	for (size_t i = 0; i < cut; i++)
		mb->tokens += mb->spans[i].len;
	for (size_t i = 0; i < tail.nspans; i++)
		tail.tokens += tail.spans[i].len;
	memmove(&nm[j + 2], &nm[j + 1], (pi->nmbs - j - 1) * sizeof(*nm));
	nm[j + 1] = tail;
	pi->nmbs++;
	return 0;
}

/* Moves micro-batch j of pipeline a to the end of pipeline b. */
static int move_mb(struct bp_pipe *a, size_t j, struct bp_pipe *b, struct bp_error *err)
{
	struct bp_mb *nm = bp_realloc_array(b->mbs, b->nmbs + 1, sizeof(*nm), err);
	if (!nm)
		return -1;
	b->mbs = nm;
	nm[b->nmbs++] = a->mbs[j];
	memmove(&a->mbs[j], &a->mbs[j + 1], (a->nmbs - j - 1) * sizeof(*a->mbs));
	a->nmbs--;
	return 0;
}

/* Whole micro-batches moved between the step's pipelines (a homogeneous layout: any of them
 * runs any micro-batch alike) until at most one pipeline's count is off a multiple of pp:
 * the pipeline with the fewest extra micro-batches hands its cheapest ones to those missing
 * the fewest, round after round (each round settles the donor, so it ends). */
static int move_counts(struct bp_step *st, const struct bp_layout *l, struct bp_costs *costs,
		       int64_t *moved, struct bp_error *err)
{
	size_t pp = (size_t)l->pipes[0].sc.pp, n = st->npipes;
	for (;;) {
		size_t donor = n, off = 0;
		for (size_t k = 0; k < n; k++) {
			size_t r = st->pipes[k].nmbs % pp;
			if (r && (donor == n || r < st->pipes[donor].nmbs % pp))
				donor = k;
			off += r != 0;
		}
		if (off < 2)
			return 0;
		const struct bp_costmodel *cm = bp_costs_pipe(costs, l, donor, err);
		if (!cm)
			return -1;
		for (size_t give = st->pipes[donor].nmbs % pp; give > 0; give--) {
			size_t to = n;
			for (size_t k = 0; k < n; k++) {
				size_t r = st->pipes[k].nmbs % pp;
				if (k != donor && r && (to == n || r > st->pipes[to].nmbs % pp))
					to = k;
			}
			if (to == n)
				break;
			struct bp_pipe *d = &st->pipes[donor];
			size_t cheap = 0;
			double wc = 0.0, wj;
			if (d->nmbs && mb_weight(cm, &d->mbs[0], &wc, err) < 0)
				return -1;
			for (size_t j = 1; j < d->nmbs; j++) {
				if (mb_weight(cm, &d->mbs[j], &wj, err) < 0)
					return -1;
				if (wj < wc) {
					cheap = j;
					wc = wj;
				}
			}
			if (move_mb(d, cheap, &st->pipes[to], err) < 0)
				return -1;
			(*moved)++;
		}
	}
}

/* The costliest micro-batch of two or more documents in pipeline k into *j (nmbs: none),
 * its weight in *w. 0 or -1. */
static int splittable(const struct bp_costmodel *cm, const struct bp_pipe *pi, size_t *j,
		      double *w, struct bp_error *err)
{
	*j = pi->nmbs;
	*w = -1.0;
	for (size_t i = 0; i < pi->nmbs; i++) {
		double x = -1.0;
		if (pi->mbs[i].nspans > 1 && mb_weight(cm, &pi->mbs[i], &x, err) < 0)
			return -1;
		if (x > *w) {
			*w = x;
			*j = i;
		}
	}
	return 0;
}

int bp_plan_fit_schedule(struct bp_plan *p, struct bp_costs *costs, int64_t *changed,
			 struct bp_error *err)
{
	int64_t n = 0;
	for (size_t i = 0; i < p->nsteps; i++) {
		struct bp_step *st = &p->steps[i];
		const struct bp_layout *l = bp_plan_layout(p, st);
		const struct bp_schedule *sch = bp_layout_schedule(l);
		int homo = bp_layout_homogeneous(l);
		if (!sch || !sch->check_count)
			continue;
		/* first each pipeline alone: splitting keeps its work where the method put it */
		for (size_t k = 0; k < st->npipes; k++) {
			struct bp_pipe *pi = &st->pipes[k];
			struct bp_error why = {""};
			const struct bp_costmodel *cm = NULL;
			double w;
			while (sch->check_count(l->pipes[k].sc.pp, l->vstages, pi->nmbs, &why) < 0) {
				if (!cm && !(cm = bp_costs_pipe(costs, l, k, err)))
					return -1;
				size_t j;
				if (splittable(cm, pi, &j, &w, err) < 0)
					return -1;
				if (j == pi->nmbs)
					break;
				if (split_mb(cm, pi, j, err) < 0)
					return -1;
				n++;
			}
		}
		for (;;) {
			if (homo && move_counts(st, l, costs, &n, err) < 0)
				return -1;
			size_t k = 0;
			struct bp_error why = {""};
			while (k < st->npipes && sch->check_count(l->pipes[k].sc.pp, l->vstages,
								   st->pipes[k].nmbs, &why) == 0)
				k++;
			if (k == st->npipes)
				break;
			/* split in the pipeline that is off, or (homogeneous: moves follow)
			 * wherever the costliest splittable micro-batch is */
			size_t at = k, j = st->pipes[k].nmbs;
			double w = -1.0, wq;
			const struct bp_costmodel *cm = bp_costs_pipe(costs, l, k, err);
			if (!cm)
				return -1;
			if (splittable(cm, &st->pipes[k], &j, &w, err) < 0)
				return -1;
			for (size_t q = 0; homo && j == st->pipes[k].nmbs && q < st->npipes; q++) {
				size_t jq;
				if (splittable(cm, &st->pipes[q], &jq, &wq, err) < 0)
					return -1;
				if (jq < st->pipes[q].nmbs && wq > w) {
					w = wq;
					at = q;
					j = jq;
				}
			}
			if (j >= st->pipes[at].nmbs)
				return bp_errorf(err, "step %lld pipeline %zu has %zu micro-batches "
						 "and none of the step's holds two documents to "
						 "split; %s needs a multiple of pp %d per pipeline "
						 "(more tokens per step, or --schedule 1f1b)",
						 (long long)st->index, k, st->pipes[k].nmbs,
						 sch->name, l->pipes[k].sc.pp);
			if (split_mb(cm, &st->pipes[at], j, err) < 0)
				return -1;
			n++;
		}
	}
	if (changed)
		*changed = n;
	return 0;
}
