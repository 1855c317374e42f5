/* plan.c: plan ownership, prediction through the shared cost model and simulator, and the
 * plan invariants (plan.h). Called by solve (before writing), check and simulate. */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pack.h"
#include "sim.h"

void bp_plan_init(struct bp_plan *p)
{
	memset(p, 0, sizeof(*p));
}

static void mb_release(struct bp_mb *mb)
{
	free(mb->spans);
	free(mb->fwd);
	free(mb->bwd);
}

static void step_release(struct bp_step *st)
{
	for (size_t i = 0; i < st->npipes; i++) {
		struct bp_pipe *pi = &st->pipes[i];
		for (size_t j = 0; j < pi->nmbs; j++)
			mb_release(&pi->mbs[j]);
		free(pi->mbs);
		free(pi->busy_us);
		free(pi->peak_mem);
	}
	free(st->pipes);
	free(st->docs);
	free(st->delayed);
}

void bp_plan_release(struct bp_plan *p)
{
	for (size_t i = 0; i < p->nsteps; i++)
		step_release(&p->steps[i]);
	free(p->steps);
	free(p->params);
	bp_plan_init(p);
}

void bp_plan_free(struct bp_plan *p)
{
	if (!p)
		return;
	bp_plan_release(p);
	free(p);
}

int bp_plan_set_param(struct bp_plan *p, const char *key, const char *value,
		      struct bp_error *err)
{
	size_t i = 0;
	while (i < p->nparams && strcmp(p->params[i].key, key) < 0)
		i++;
	if (i == p->nparams || strcmp(p->params[i].key, key)) {
		struct bp_param *np =
			bp_realloc_array(p->params, p->nparams + 1, sizeof(*np), err);
		if (!np)
			return -1;
		p->params = np;
		memmove(&np[i + 1], &np[i], (p->nparams - i) * sizeof(*np));
		p->nparams++;
		memset(&np[i], 0, sizeof(np[i]));
	}
	if (bp_strlcpy_checked(p->params[i].key, key, sizeof(p->params[i].key),
			       "parameter name", err) < 0 ||
	    bp_strlcpy_checked(p->params[i].value, value, sizeof(p->params[i].value),
			       "parameter value", err) < 0)
		return -1;
	return 0;
}

const char *bp_plan_param(const struct bp_plan *p, const char *key)
{
	for (size_t i = 0; i < p->nparams; i++)
		if (!strcmp(p->params[i].key, key))
			return p->params[i].value;
	return NULL;
}

int bp_pipe_add_mb(struct bp_pipe *pipe, const struct bp_span *spans, size_t n,
		   enum bp_shard shard, struct bp_error *err)
{
	struct bp_mb *nm = bp_realloc_array(pipe->mbs, pipe->nmbs + 1, sizeof(*nm), err);
	if (!nm)
		return -1;
	pipe->mbs = nm;
	struct bp_mb *mb = &nm[pipe->nmbs];
	memset(mb, 0, sizeof(*mb));
	mb->spans = bp_calloc(n, sizeof(*spans), err);
	if (!mb->spans)
		return -1;
	memcpy(mb->spans, spans, n * sizeof(*spans));
	mb->nspans = n;
	mb->shard = shard;
	for (size_t i = 0; i < n; i++)
		mb->tokens += spans[i].len;
	pipe->nmbs++;
	return 0;
}

int bp_cluster_check(const struct bp_cluster *c, struct bp_error *err)
{
	if (c->gpus < 1)
		return bp_errorf(err, "the cluster needs at least one GPU (got %d)", c->gpus);
	if (c->tp < 1 || c->cp < 1 || c->pp < 1 || c->dp < 1)
		return bp_errorf(err, "parallel degrees must be >= 1 (tp %d cp %d pp %d dp %d)",
				 c->tp, c->cp, c->pp, c->dp);
	if (c->gpus_per_node < 1)
		return bp_errorf(err, "gpus per node must be >= 1 (got %d)", c->gpus_per_node);
	int64_t prod = (int64_t)c->tp * c->cp * c->pp * c->dp;
	if (prod != c->gpus)
		return bp_errorf(err, "tp*cp*pp*dp = %lld does not match %d GPUs", (long long)prod,
				 c->gpus);
	if (c->gpus > c->gpus_per_node && c->gpus % c->gpus_per_node)
		return bp_errorf(err, "%d GPUs do not fill nodes of %d", c->gpus,
				 c->gpus_per_node);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Quantile by the nearest-rank method on a sorted array. */
static double quantile(const double *v, size_t n, double f)
{
	if (!n)
		return 0.0;
	size_t k = (size_t)ceil(f * n);
	if (k < 1)
		k = 1;
	return v[k - 1];
}

/* Predicts one pipeline: micro-batch times, then the 1F1B simulation. */
static int predict_pipe(struct bp_pipe *pi, const struct bp_costmodel *cm,
			struct bp_error *err)
{
	int pp = cm->sc.pp, rc = -1;
	size_t m = pi->nmbs;
	double *fwd = NULL, *bwd = NULL, *p2p = NULL, *finish = NULL;
	int64_t *act = NULL, *peak = NULL;
	free(pi->busy_us);
	free(pi->peak_mem);
	pi->busy_us = bp_calloc((size_t)pp, sizeof(double), err);
	pi->peak_mem = bp_calloc((size_t)pp, sizeof(int64_t), err);
	fwd = bp_calloc(m * pp, sizeof(double), err);
	bwd = bp_calloc(m * pp, sizeof(double), err);
	p2p = bp_calloc(m, sizeof(double), err);
	act = bp_calloc(m * pp, sizeof(int64_t), err);
	finish = bp_calloc((size_t)pp, sizeof(double), err);
	peak = bp_calloc((size_t)pp, sizeof(int64_t), err);
	if (!pi->busy_us || !pi->peak_mem || !fwd || !bwd || !p2p || !act || !finish || !peak)
		goto out;
	for (size_t j = 0; j < m; j++) {
		struct bp_mb *mb = &pi->mbs[j];
		free(mb->fwd);
		free(mb->bwd);
		mb->fwd = bp_calloc((size_t)pp, sizeof(double), err);
		mb->bwd = bp_calloc((size_t)pp, sizeof(double), err);
		if (!mb->fwd || !mb->bwd)
			goto out;
		mb->tokens = 0;
		for (size_t k = 0; k < mb->nspans; k++)
			mb->tokens += mb->spans[k].len;
		if (bp_shard_resolve(cm, mb->spans, mb->nspans, mb->shard, &mb->shard, err) < 0)
			goto out;
		if (bp_cost_microbatch(cm, mb->spans, mb->nspans, mb->shard, mb->fwd, mb->bwd,
				       NULL, err) < 0)
			goto out;
		/* tokens on the busiest CP rank: within one token of tokens/cp by construction */
		int64_t per_rank = (mb->tokens + cm->sc.cp - 1) / cm->sc.cp;
		for (int s = 0; s < pp; s++) {
			fwd[j * pp + s] = mb->fwd[s];
			bwd[j * pp + s] = mb->bwd[s];
			act[j * pp + s] = bp_cost_act_bytes(cm, s, per_rank);
		}
		p2p[j] = bp_cost_p2p(cm, mb->tokens);
	}
	struct bp_sim_pipe in = {pp, m, fwd, bwd, p2p, act};
	struct bp_sim_result res = {0, pi->busy_us, finish, peak, NULL, NULL};
	if (bp_sim_1f1b(&in, &res, err) < 0)
		goto out;
	pi->time_us = res.end;
	for (int s = 0; s < pp; s++)
		pi->peak_mem[s] = peak[s] + bp_cost_state_bytes(cm, s);
	rc = 0;
out:
	free(fwd);
	free(bwd);
	free(p2p);
	free(act);
	free(finish);
	free(peak);
	return rc;
}

/* The packing objective of a step and its certified bound (plan.h, bp_pack_bound). */
static int pack_metrics(struct bp_step *st, const struct bp_costmodel *cm,
			struct bp_error *err)
{
	size_t nspans = 0, k = 0;
	for (size_t i = 0; i < st->npipes; i++)
		for (size_t j = 0; j < st->pipes[i].nmbs; j++)
			nspans += st->pipes[i].mbs[j].nspans;
	double *w = bp_calloc(nspans, sizeof(double), err);
	if (!w)
		return -1;
	double wmax = 0.0;
	for (size_t i = 0; i < st->npipes; i++)
		for (size_t j = 0; j < st->pipes[i].nmbs; j++) {
			const struct bp_mb *mb = &st->pipes[i].mbs[j];
			double sum = 0.0;
			for (size_t q = 0; q < mb->nspans; q++) {
				w[k] = bp_cost_doc(cm, mb->spans[q].len);
				sum += w[k++];
			}
			if (sum > wmax)
				wmax = sum;
		}
	st->m.pack_max_us = wmax;
	st->m.pack_bound_us = bp_pack_bound(w, nspans, (size_t)st->m.nmbs);
	st->m.pack_gap = st->m.pack_bound_us > 0 ? wmax / st->m.pack_bound_us - 1.0 : 0.0;
	free(w);
	return 0;
}

static int predict_step(struct bp_step *st, const struct bp_costmodel *cm,
			struct bp_error *err)
{
	int pp = cm->sc.pp;
	struct bp_metrics *mt = &st->m;
	memset(mt, 0, sizeof(*mt));
	double busy_max = 0.0, busy_min = INFINITY, busy_sum = 0.0;
	double fmax = 0.0, fsum = 0.0, tmax = 0.0, tsum = 0.0;
	mt->pipe_min_us = INFINITY;
	for (size_t i = 0; i < st->npipes; i++) {
		struct bp_pipe *pi = &st->pipes[i];
		if (predict_pipe(pi, cm, err) < 0)
			return bp_error_prefix(err, "step %lld pipeline %zu", (long long)st->index, i);
		if (pi->time_us > mt->pipe_max_us)
			mt->pipe_max_us = pi->time_us;
		if (pi->time_us < mt->pipe_min_us)
			mt->pipe_min_us = pi->time_us;
		for (int s = 0; s < pp; s++) {
			double b = pi->busy_us[s];
			busy_sum += b;
			if (b > busy_max)
				busy_max = b;
			if (b < busy_min)
				busy_min = b;
			if (pi->peak_mem[s] > mt->peak_mem)
				mt->peak_mem = pi->peak_mem[s];
		}
		for (size_t j = 0; j < pi->nmbs; j++) {
			double f = 0.0, t = 0.0;
			for (int s = 0; s < pp; s++) {
				f += pi->mbs[j].fwd[s];
				t += pi->mbs[j].fwd[s] + pi->mbs[j].bwd[s];
			}
			fsum += f;
			tsum += t;
			if (f > fmax)
				fmax = f;
			if (t > tmax)
				tmax = t;
			mt->tokens += pi->mbs[j].tokens;
			mt->nmbs++;
		}
	}
	if (!st->npipes)
		mt->pipe_min_us = 0.0;
	if (pack_metrics(st, cm, err) < 0)
		return -1;
	double sync = 0.0;
	for (int s = 0; s < pp; s++) {
		double g = bp_cost_grad_sync(cm, s);
		if (g > sync)
			sync = g;
	}
	mt->grad_sync_us = sync;
	mt->step_us = mt->pipe_max_us + sync;
	size_t ranks = st->npipes * (size_t)pp;
	mt->bubble = mt->pipe_max_us > 0 ? 1.0 - busy_sum / (ranks * mt->pipe_max_us) : 0.0;
	mt->imb_wlb = fsum > 0 ? fmax * mt->nmbs / fsum : 1.0;
	mt->imb_sb = tsum > 0 ? tmax * mt->nmbs / tsum : 1.0;
	mt->gap_hyd = busy_max > 0 ? (busy_max - busy_min) / busy_max : 0.0;
	return 0;
}

static void summarize(struct bp_plan *p)
{
	struct bp_summary *s = &p->summary;
	memset(s, 0, sizeof(*s));
	size_t n = p->nsteps;
	double *v = malloc((n ? n : 1) * sizeof(double));
	double *w = malloc((n ? n : 1) * sizeof(double));
	double delay_tok_steps = 0.0;
	s->steps = (int64_t)n;
	for (size_t i = 0; i < n; i++) {
		const struct bp_step *st = &p->steps[i];
		s->docs += (int64_t)st->ndocs;
		s->tokens += st->m.tokens;
		s->delayed += (int64_t)st->ndelayed;
		for (size_t k = 0; k < st->ndelayed; k++)
			delay_tok_steps += (double)st->delayed[k].len *
					   (double)(st->delayed[k].to_step - st->index);
		s->total_us += st->m.step_us;
		s->imb_wlb_mean += st->m.imb_wlb;
		s->imb_sb_mean += st->m.imb_sb;
		s->gap_hyd_mean += st->m.gap_hyd;
		s->bubble_mean += st->m.bubble;
		s->pack_gap_mean += st->m.pack_gap;
		if (st->m.pack_gap > s->pack_gap_max)
			s->pack_gap_max = st->m.pack_gap;
		if (st->m.peak_mem > s->peak_mem)
			s->peak_mem = st->m.peak_mem;
		if (v)
			v[i] = st->m.step_us;
		if (w)
			w[i] = st->m.imb_wlb;
	}
	if (n) {
		s->step_mean_us = s->total_us / n;
		s->imb_wlb_mean /= n;
		s->imb_sb_mean /= n;
		s->gap_hyd_mean /= n;
		s->bubble_mean /= n;
		s->pack_gap_mean /= n;
	}
	if (v && w) {
		qsort(v, n, sizeof(double), cmp_double);
		qsort(w, n, sizeof(double), cmp_double);
		s->step_p50_us = quantile(v, n, 0.5);
		s->step_p95_us = quantile(v, n, 0.95);
		s->step_max_us = n ? v[n - 1] : 0.0;
		s->imb_wlb_p95 = quantile(w, n, 0.95);
	}
	s->tokens_per_s = s->total_us > 0 ? s->tokens / (s->total_us * 1e-6) : 0.0;
	s->delay_steps_mean = s->tokens > 0 ? delay_tok_steps / s->tokens : 0.0;
	free(v);
	free(w);
}

int bp_pipe_schedule(const struct bp_pipe *pi, const struct bp_costmodel *cm, double *f_start,
		     double *b_start, struct bp_error *err)
{
	int pp = cm->sc.pp, rc = -1;
	size_t m = pi->nmbs;
	double *fwd = bp_calloc(m * pp, sizeof(double), err);
	double *bwd = bp_calloc(m * pp, sizeof(double), err);
	double *p2p = bp_calloc(m, sizeof(double), err);
	double *busy = bp_calloc((size_t)pp, sizeof(double), err);
	double *finish = bp_calloc((size_t)pp, sizeof(double), err);
	int64_t *peak = bp_calloc((size_t)pp, sizeof(int64_t), err);
	if (!fwd || !bwd || !p2p || !busy || !finish || !peak)
		goto out;
	for (size_t j = 0; j < m; j++) {
		const struct bp_mb *mb = &pi->mbs[j];
		if (!mb->fwd || !mb->bwd) {
			bp_errorf(err, "micro-batch %zu has no predicted times", j);
			goto out;
		}
		for (int s = 0; s < pp; s++) {
			fwd[j * pp + s] = mb->fwd[s];
			bwd[j * pp + s] = mb->bwd[s];
		}
		p2p[j] = bp_cost_p2p(cm, mb->tokens);
	}
	struct bp_sim_pipe in = {pp, m, fwd, bwd, p2p, NULL};
	struct bp_sim_result res = {0, busy, finish, peak, f_start, b_start};
	rc = bp_sim_1f1b(&in, &res, err);
out:
	free(fwd);
	free(bwd);
	free(p2p);
	free(busy);
	free(finish);
	free(peak);
	return rc;
}

int bp_plan_predict(struct bp_plan *p, const struct bp_costmodel *cm, struct bp_error *err)
{
	for (size_t i = 0; i < p->nsteps; i++)
		if (predict_step(&p->steps[i], cm, err) < 0)
			return -1;
	summarize(p);
	return 0;
}

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

int bp_plan_validate(const struct bp_plan *p, const struct bp_costmodel *cm,
		     struct bp_error *err)
{
	int rc = -1;
	struct doc_slot *slots = NULL;
	struct bp_span *all = NULL;
	size_t nall = 0, capall = 0;
	if (bp_cluster_check(&p->cluster, err) < 0)
		return -1;
	if (p->max_tokens < 1 || p->mb_max_tokens < p->max_tokens)
		return bp_errorf(err, "max_tokens %lld and max_microbatch_tokens %lld are not "
				 "1 <= max_tokens <= max_microbatch_tokens",
				 (long long)p->max_tokens, (long long)p->mb_max_tokens);
	size_t ndocs = 0;
	for (size_t i = 0; i < p->nsteps; i++)
		ndocs += p->steps[i].ndocs;
	slots = bp_calloc(ndocs, sizeof(*slots), err);
	if (!slots)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		if (st->index != (int64_t)i) {
			bp_errorf(err, "step %zu has index %lld", i, (long long)st->index);
			goto out;
		}
		if (st->npipes != (size_t)p->cluster.dp) {
			bp_errorf(err, "step %zu has %zu pipelines but dp is %d", i, st->npipes,
				  p->cluster.dp);
			goto out;
		}
		for (size_t d = 0; d < st->ndocs; d++) {
			if (st->docs[d].len < 1) {
				bp_errorf(err, "step %zu document %lld has length %lld", i,
					  (long long)st->docs[d].id, (long long)st->docs[d].len);
				goto out;
			}
			slots[k++] = (struct doc_slot){st->docs[d].id, st->docs[d].len,
						       (int64_t)i, (int64_t)i, 0};
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
			if (!sl || sl->step != (int64_t)i) {
				bp_errorf(err, "step %zu delays document %lld that it did not draw",
					  i, (long long)dl->doc);
				goto out;
			}
			if (dl->to_step <= (int64_t)i || dl->to_step >= (int64_t)p->nsteps) {
				bp_errorf(err, "step %zu delays document %lld to step %lld", i,
					  (long long)dl->doc, (long long)dl->to_step);
				goto out;
			}
			sl->to_step = dl->to_step;
		}
	}
	int64_t mem_cap = cm ? bp_cost_mem_cap(cm) : 0;
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		for (size_t q = 0; q < st->npipes; q++) {
			const struct bp_pipe *pi = &st->pipes[q];
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
				memcpy(all + nall, mb->spans, mb->nspans * sizeof(*all));
				nall += mb->nspans;
				if (mb->shard != BP_SHARD_SEQUENCE && mb->shard != BP_SHARD_DOCUMENT) {
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
					if (sl->to_step != (int64_t)i) {
						bp_errorf(err, "step %zu trains document %lld that belongs "
							  "to step %lld", i, (long long)sp->doc,
							  (long long)sl->to_step);
						goto out;
					}
					if (sp->len < 1 || sp->offset < 0 ||
					    sp->offset + sp->len > sl->len) {
						bp_errorf(err, "step %zu: span [%lld, +%lld) lies outside "
							  "document %lld of length %lld", i,
							  (long long)sp->offset, (long long)sp->len,
							  (long long)sp->doc, (long long)sl->len);
						goto out;
					}
					sl->covered += sp->len;
					tok += sp->len;
				}
				if (tok > p->mb_max_tokens) {
					bp_errorf(err, "step %zu pipeline %zu micro-batch %zu holds %lld "
						  "tokens, more than max_microbatch_tokens %lld", i, q,
						  j, (long long)tok, (long long)p->mb_max_tokens);
					goto out;
				}
			}
			if (cm && pi->peak_mem)
				for (int s = 0; s < p->cluster.pp; s++)
					if (pi->peak_mem[s] > mem_cap) {
						bp_errorf(err, "step %zu pipeline %zu stage %d needs "
							  "%.2f GiB, more than the %.2f GiB cap", i, q,
							  s, pi->peak_mem[s] / 1073741824.0,
							  mem_cap / 1073741824.0);
						goto out;
					}
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
		if (slots[i].covered != slots[i].len) {
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
