/* wlb.c: the "wlb" method, WLB-LLM's heuristic variable-length packing with outlier delay
 * (WLB-LLM Sec. 4.1-4.3, Eq. 2, Alg. 1).
 *
 * Per step (Alg. 1): documents carried from the previous step plus the step's non-outlier
 * documents, plus every outlier queue holding at least N documents (it releases N, FIFO),
 * are sorted by length descending and packed into N micro-batches: each document goes to the
 * micro-batch of least workload W = W_a + W_l (the cost model's per-document fwd+bwd time,
 * bp_cost_doc) if its tokens stay within L_max, else to the micro-batch of least length if
 * they fit there, else it is carried to the next step (line 32). Outliers are documents of at
 * least L_1 tokens; queue i takes lengths in [L_i, L_{i+1}) (Sec. 4.2). When a queue
 * releases, its N documents land one per micro-batch, since they are the longest of the set.
 *
 * Choices the paper leaves open (plans/README.md, README "wlb"):
 *   N = dp * m with m = ceil(step budget / (dp * max_tokens)), fixed for the run (Alg. 1's
 *     "#Micro-Batch per Iteration"); the budget is tokens_per_step, or the mean drawn tokens
 *     per step with docs_per_step;
 *   L_max = min(max_len_factor * max_tokens, the largest micro-batch whose 1F1B in-flight
 *     activations fit every stage's memory): "the maximum sequence length permitted by GPU
 *     memory" (Eq. 2); it is the plan's max_microbatch_tokens;
 *   default thresholds for n queues: L_i = max_tokens / 2^(n+1-i) (n = 2: L/4 and L/2);
 *   after the last drawn batch, extra steps flush the queues and carried documents with the
 *     same packing until none is left: no document is ever lost;
 *   the N micro-batches are dealt to pipelines balancing their total workload (pack.c).
 * Every document trained after the step that drew it is recorded in that step's delayed
 * list with the step that trains it. */
#include "method.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pack.h"

#define WLB_MAX_QUEUES 8

struct item {
	int64_t id, len;
	int64_t step; /* drawn in */
	double w;
};

struct fifo {
	struct item *v;
	size_t head, n, cap;
};

static int fifo_push(struct fifo *q, struct item it, struct bp_error *err)
{
	if (q->head + q->n == q->cap) {
		if (q->head > 0) { /* compact before growing */
			memmove(q->v, q->v + q->head, q->n * sizeof(*q->v));
			q->head = 0;
		}
		if (q->n == q->cap) {
			size_t nc = q->cap ? 2 * q->cap : 16;
			struct item *nv = bp_realloc_array(q->v, nc, sizeof(*nv), err);
			if (!nv)
				return -1;
			q->v = nv;
			q->cap = nc;
		}
	}
	q->v[q->head + q->n++] = it;
	return 0;
}

struct wlb {
	const struct bp_method_ctx *ctx;
	struct bp_plan *out;
	size_t nbins;      /* N */
	int64_t lmax;
	int nq;
	int64_t thr[WLB_MAX_QUEUES];
	struct fifo q[WLB_MAX_QUEUES];
	struct item *set;  /* the step's pending documents */
	size_t nset, capset;
	struct item *carry;
	size_t ncarry, capcarry;
	/* per-bin state for one step */
	double *load;
	int64_t *fill;
	int *bin_of;
	size_t capbin_of;
	/* train step of every drawn document, by id (ids are 0..ndocs-1) */
	int64_t *train_step;
	int64_t *draw_step;
};

static int push_item(struct item **v, size_t *n, size_t *cap, struct item it,
		     struct bp_error *err)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		struct item *nv = bp_realloc_array(*v, nc, sizeof(*nv), err);
		if (!nv)
			return -1;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = it;
	return 0;
}

static int cmp_len_desc(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	if (x->len != y->len)
		return x->len < y->len ? 1 : -1;
	return (x->id > y->id) - (x->id < y->id);
}

/* The largest micro-batch (tokens) whose worst-case 1F1B in-flight activations fit every
 * stage: state(s) + (pp - s) * act(s, ceil(T / cp)) <= cap (Hydraulis App. B.1). */
static int64_t memory_lmax(const struct bp_costmodel *cm)
{
	int64_t cap = bp_cost_mem_cap(cm), best = INT64_MAX;
	for (int s = 0; s < cm->sc.pp; s++) {
		int64_t room = cap - bp_cost_state_bytes(cm, s);
		int64_t per_tok = bp_cost_act_bytes(cm, s, 1024); /* bytes per 1024 tokens/rank */
		if (room <= 0 || per_tok <= 0)
			return room <= 0 ? 0 : INT64_MAX;
		double tokens_rank = (double)room / (cm->sc.pp - s) / (per_tok / 1024.0);
		int64_t t = (int64_t)(tokens_rank * cm->sc.cp);
		if (t < best)
			best = t;
	}
	return best;
}

static int parse_thresholds(struct wlb *w, const char *text, struct bp_error *err)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%s", text);
	int n = 0;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int64_t v;
		if (n == WLB_MAX_QUEUES)
			return bp_errorf(err, "parameter thresholds has more than %d values",
					 WLB_MAX_QUEUES);
		if (bp_parse_int64(tok, &v, "threshold", err) < 0)
			return bp_error_prefix(err, "parameter thresholds");
		if (v < 1 || (n > 0 && v <= w->thr[n - 1]))
			return bp_errorf(err, "parameter thresholds must be positive and increasing "
					 "(got '%s')", text);
		w->thr[n++] = v;
	}
	if (n != w->nq)
		return bp_errorf(err, "parameter thresholds has %d values for %d queues", n, w->nq);
	return 0;
}

/* Queue index of an outlier, or -1 for a regular document. */
static int queue_of(const struct wlb *w, int64_t len)
{
	int q = -1;
	for (int i = 0; i < w->nq; i++)
		if (len >= w->thr[i])
			q = i;
	return q;
}

/* Packs w->set into N bins (Alg. 1 lines 18-35) and emits them into step si. */
static int pack_step(struct wlb *w, size_t si, struct bp_error *err)
{
	struct bp_plan *out = w->out;
	struct bp_step *st = &out->steps[si];
	size_t nb = w->nbins, n = w->nset;
	int rc = -1;
	int *group_of = NULL;
	struct bp_span *spans = NULL;
	qsort(w->set, n, sizeof(*w->set), cmp_len_desc);
	if (n > w->capbin_of) {
		int *nbo = bp_realloc_array(w->bin_of, n, sizeof(int), err);
		if (!nbo)
			return -1;
		w->bin_of = nbo;
		w->capbin_of = n;
	}
	for (size_t b = 0; b < nb; b++) {
		w->load[b] = 0.0;
		w->fill[b] = 0;
	}
	w->ncarry = 0;
	for (size_t i = 0; i < n; i++) {
		const struct item *it = &w->set[i];
		size_t wi = 0, li = 0;
		for (size_t b = 1; b < nb; b++) {
			if (w->load[b] < w->load[wi])
				wi = b;
			if (w->fill[b] < w->fill[li])
				li = b;
		}
		size_t to = nb;
		if (w->fill[wi] + it->len <= w->lmax)
			to = wi;
		else if (w->fill[li] + it->len <= w->lmax)
			to = li;
		if (to == nb) {
			w->bin_of[i] = -1;
			if (push_item(&w->carry, &w->ncarry, &w->capcarry, *it, err) < 0)
				return -1;
			continue;
		}
		w->bin_of[i] = (int)to;
		w->load[to] += it->w;
		w->fill[to] += it->len;
	}
	/* Deal the N micro-batches to pipelines, each pipeline N/dp of them, balancing their
	 * total workload; emit each pipeline's in decreasing workload. */
	size_t dp = (size_t)bp_plan_dp(out), per = nb / dp;
	group_of = bp_calloc(nb, sizeof(int), err);
	spans = bp_calloc(n ? n : 1, sizeof(*spans), err);
	size_t *border = bp_calloc(nb, sizeof(size_t), err);
	int64_t *zero = bp_calloc(nb, sizeof(int64_t), err);
	if (!group_of || !spans || !border || !zero)
		goto out;
	if (bp_deal_bins(w->load, nb, dp, per, group_of, err) < 0)
		goto out;
	bp_order_by_cost(w->load, zero, nb, border);
	for (size_t k = 0; k < nb; k++) {
		size_t bin = border[k], ns = 0;
		for (size_t i = 0; i < n; i++)
			if (w->bin_of[i] == (int)bin)
				spans[ns++] = (struct bp_span){w->set[i].id, 0, w->set[i].len};
		if (ns && bp_pipe_add_mb(&st->pipes[group_of[bin]], spans, ns, w->ctx->shard,
					 err) < 0)
			goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (w->bin_of[i] >= 0)
			w->train_step[w->set[i].id] = (int64_t)si;
	rc = 0;
out:
	free(group_of);
	free(spans);
	free(border);
	free(zero);
	return rc;
}

/* Moves the carried documents into the pending set of the next step. */
static int take_carry(struct wlb *w, struct bp_error *err)
{
	struct item *c = w->carry;
	size_t nc = w->ncarry;
	w->carry = NULL;
	w->ncarry = w->capcarry = 0;
	int rc = 0;
	for (size_t i = 0; i < nc && rc == 0; i++)
		rc = push_item(&w->set, &w->nset, &w->capset, c[i], err);
	free(c);
	return rc;
}

static int release_queues(struct wlb *w, int flush, struct bp_error *err)
{
	for (int q = 0; q < w->nq; q++) {
		struct fifo *f = &w->q[q];
		size_t take = f->n >= w->nbins ? w->nbins : flush ? f->n : 0;
		for (size_t k = 0; k < take; k++) {
			if (push_item(&w->set, &w->nset, &w->capset, f->v[f->head], err) < 0)
				return -1;
			f->head++;
			f->n--;
		}
	}
	return 0;
}

static size_t queued(const struct wlb *w)
{
	size_t n = 0;
	for (int q = 0; q < w->nq; q++)
		n += w->q[q].n;
	return n;
}

/* Grows out->steps by one empty step (a flush step past the last drawn batch). */
static int add_flush_step(struct bp_plan *out, struct bp_error *err)
{
	struct bp_step *ns = bp_realloc_array(out->steps, out->nsteps + 1, sizeof(*ns), err);
	if (!ns)
		return -1;
	out->steps = ns;
	struct bp_step *st = &ns[out->nsteps];
	memset(st, 0, sizeof(*st));
	st->index = (int64_t)out->nsteps;
	st->npipes = (size_t)bp_plan_dp(out);
	strcpy(st->sync, "dp-allreduce");
	st->pipes = bp_calloc(st->npipes, sizeof(*st->pipes), err);
	if (!st->pipes)
		return -1;
	out->nsteps++;
	return 0;
}

/* Records, per drawn step, the documents trained later (sorted by id: ids are in order). */
static int record_delays(struct wlb *w, int64_t ndocs, struct bp_error *err)
{
	for (int64_t id = 0; id < ndocs; id++) {
		int64_t s = w->draw_step[id], t = w->train_step[id];
		if (t < 0)
			return bp_errorf(err, "internal: document %lld was never packed",
					 (long long)id);
		if (t == s)
			continue;
		struct bp_step *st = &w->out->steps[s];
		struct bp_delayed *nd =
			bp_realloc_array(st->delayed, st->ndelayed + 1, sizeof(*nd), err);
		if (!nd)
			return -1;
		st->delayed = nd;
		int64_t len = 0;
		for (size_t k = 0; k < st->ndocs; k++)
			if (st->docs[k].id == id)
				len = st->docs[k].len;
		nd[st->ndelayed++] = (struct bp_delayed){id, len, t};
	}
	return 0;
}

int bp_method_wlb(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		  struct bp_plan *out, struct bp_error *err)
{
	struct wlb w;
	int rc = -1;
	int64_t nq = 2, ndocs = 0;
	double factor = 2.0;
	memset(&w, 0, sizeof(w));
	w.ctx = ctx;
	w.out = out;
	const struct bp_costmodel *cm = ctx->cm;
	int64_t L = out->max_tokens, dp = bp_plan_dp(out);
	if (bp_method_param_int(out, "queues", 2, 0, WLB_MAX_QUEUES, &nq, err) < 0 ||
	    bp_method_param_real(out, "max_len_factor", 2.0, 1.0, 64.0, &factor, err) < 0)
		return -1;
	w.nq = (int)nq;
	if (!bp_plan_param(out, "thresholds")) {
		char buf[64] = "", part[24];
		for (int i = 0; i < w.nq; i++) {
			w.thr[i] = L >> (w.nq - i);
			if (w.thr[i] < 1)
				w.thr[i] = 1;
			snprintf(part, sizeof(part), "%s%lld", i ? "," : "", (long long)w.thr[i]);
			strncat(buf, part, sizeof(buf) - strlen(buf) - 1);
		}
		if (w.nq && bp_plan_set_param(out, "thresholds", buf, err) < 0)
			return -1;
		if (!w.nq && bp_plan_set_param(out, "thresholds", "none", err) < 0)
			return -1;
	} else if (w.nq) {
		if (parse_thresholds(&w, bp_plan_param(out, "thresholds"), err) < 0)
			return -1;
	}
	int64_t lmem = memory_lmax(cm);
	w.lmax = (int64_t)(factor * (double)L);
	if (lmem < w.lmax)
		w.lmax = lmem;
	if (w.lmax < L)
		w.lmax = L; /* solve already checked max_tokens fits */
	bp_plan_set_mb_cap(out, w.lmax);
	/* N from the step budget (Alg. 1's fixed #Micro-Batch per Iteration). */
	double budget = (double)out->tokens_per_step;
	if (budget <= 0) {
		double sum = 0;
		for (size_t s = 0; s < in->n; s++)
			sum += (double)in->b[s].tokens;
		budget = in->n ? sum / (double)in->n : 0;
	}
	int64_t m = (int64_t)((budget + (double)(dp * L) - 1) / (double)(dp * L));
	if (m < 1)
		m = 1;
	w.nbins = (size_t)(m * dp);
	char nbuf[24];
	snprintf(nbuf, sizeof(nbuf), "%zu", w.nbins);
	if (bp_plan_set_param(out, "microbatches_per_step", nbuf, err) < 0)
		return -1;
	if (bp_method_alloc_steps(out, in, in->n, err) < 0)
		return -1;
	for (size_t s = 0; s < in->n; s++)
		ndocs += (int64_t)in->b[s].ndocs;
	w.load = bp_calloc(w.nbins, sizeof(double), err);
	w.fill = bp_calloc(w.nbins, sizeof(int64_t), err);
	w.train_step = bp_calloc((size_t)ndocs, sizeof(int64_t), err);
	w.draw_step = bp_calloc((size_t)ndocs, sizeof(int64_t), err);
	if (!w.load || !w.fill || !w.train_step || !w.draw_step)
		goto out;
	for (size_t s = 0; s < in->n; s++)
		for (size_t k = 0; k < in->b[s].ndocs; k++) {
			int64_t id = in->b[s].docs[k].id;
			if (id < 0 || id >= ndocs) {
				bp_errorf(err, "internal: document id %lld out of order", (long long)id);
				goto out;
			}
			w.draw_step[id] = (int64_t)s;
			w.train_step[id] = -1;
		}
	/* Cache per-length workloads: lengths repeat little, so compute per document. */
	for (size_t s = 0; s < in->n; s++) {
		w.nset = 0;
		if (take_carry(&w, err) < 0)
			goto out;
		const struct bp_batch *b = &in->b[s];
		for (size_t k = 0; k < b->ndocs; k++) {
			struct item it = {b->docs[k].id, b->docs[k].len, (int64_t)s,
					  bp_cost_doc(cm, b->docs[k].len)};
			int q = queue_of(&w, it.len);
			if (q >= 0 ? fifo_push(&w.q[q], it, err) < 0
				   : push_item(&w.set, &w.nset, &w.capset, it, err) < 0)
				goto out;
		}
		if (release_queues(&w, 0, err) < 0 || pack_step(&w, s, err) < 0)
			goto out;
	}
	/* Flush: extra steps until every queued and carried document is trained. */
	while (w.ncarry || queued(&w)) {
		size_t s = out->nsteps;
		if (add_flush_step(out, err) < 0)
			goto out;
		w.nset = 0;
		if (take_carry(&w, err) < 0 || release_queues(&w, 1, err) < 0 ||
		    pack_step(&w, s, err) < 0)
			goto out;
	}
	rc = record_delays(&w, ndocs, err);
out:
	for (int q = 0; q < WLB_MAX_QUEUES; q++)
		free(w.q[q].v);
	free(w.set);
	free(w.carry);
	free(w.load);
	free(w.fill);
	free(w.bin_of);
	free(w.train_step);
	free(w.draw_step);
	return rc;
}
