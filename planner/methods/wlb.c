/* wlb.c: the "wlb" method, WLB-LLM's heuristic variable-length packing with outlier delay
 * (WLB-LLM Sec. 4.1-4.3, Eq. 2, Alg. 1), and the queue driver bp_wlb_plan (wlb.h) that
 * "wlb-ilp" shares, so both methods train the same documents in every step. Invariant: every
 * drawn document is trained exactly once, at most max_delay steps after the step that drew
 * it, and every step trains at least one micro-batch.
 *
 * Per step t, as Alg. 1 runs it:
 *   1. Doc_Set starts with the documents carried from step t-1 (Remained_Doc, line 3).
 *   2. Each drawn document of at least L_1 tokens is an outlier and joins queue i with
 *      L_i <= len < L_{i+1}; the others join Doc_Set (lines 4-11). (Sec. 4.2 says both
 *      "greater than L_1" and "L_i <= Doc_len"; balplan uses >=.)
 *   3. Every queue holding at least N documents releases N, oldest first (FIFO, lines
 *      12-17). (Default: the largest multiple of N; see release below.)
 *   4. Doc_Set is sorted by length, longest first (line 19; ties by document id).
 *   5. Each document goes to the micro-batch of least workload W = W_a + W_l (Eq. 2; the cost
 *      model's fwd+bwd time of the document alone, bp_cost_doc) if its tokens stay within
 *      L_max, else to the micro-batch of fewest tokens if they fit there, else it is carried
 *      to step t+1 (lines 21-35; ties: the lowest micro-batch). Alg. 1 writes "< L_max";
 *      balplan allows a micro-batch of exactly L_max tokens, the most memory permits.
 *
 * Where balplan departs from Alg. 1, and why (tools/bench/REPRODUCING.md "WLB-LLM audit" has
 * the measurements).
 * Alg. 1 alone cannot bound the delay: a queue releases N per step, so a queue that receives
 * more than N outliers per step grows without end (prolong-64k at 7B-128K: about 5 documents
 * of 64K tokens per step against N = 4; 20 drawn steps became 26 with a mean token delay of
 * 2.0 steps, 60 became 75 with 5.1), and a queue that rarely receives outliers holds them
 * until N have come (prolong-512k: 16 steps). Two balplan additions bound it:
 *   release (parameter, "multiple" by default, "n" for Alg. 1's rule 3): a queue holding k
 *     documents releases the largest multiple of N not above k, oldest first, so every
 *     micro-batch still gets the same number of this queue's outliers (Sec. 4.2's "each
 *     micro-batch contains exactly one outlier document", once per round of N) and a queue
 *     never holds N or more after rule 3.
 *   max_delay D (parameter, default 8 steps): a document drawn in step s trains in step
 *     s + D at the latest. In step t each queue also releases, after rule 3, its documents
 *     drawn in t - D or earlier (a prefix of the FIFO), and a document of that age is never
 *     carried: when rule 5 would carry one, the step is packed again with those documents
 *     first (same rule, longest first), one more micro-batch per pipeline whenever one fits
 *     no micro-batch, then the others as rule 5 says.
 *   An empty step (a balplan addition): when Doc_Set is empty after rule 3 (every drawn
 *     document an outlier, no queue at N, nothing carried), the N oldest queued documents
 *     (by draw step, then id, over all queues) are released. Alg. 1 would emit a step that
 *     trains nothing and still pays a gradient sync (slimpajama-book: the step that drew 4
 *     books of >= 32K tokens).
 *   End of data: after the last drawn batch, flush steps release every queued document and
 *     pack with the same rules until nothing is queued or carried; no document is lost.
 *   N = dp * m with m = ceil(step budget / (dp * max_tokens)), fixed for the run (Alg. 1's
 *     "#Micro-Batch per Iteration"; the budget is tokens_per_step, or the mean drawn tokens
 *     per step with docs_per_step); a step has more only by the max_delay rule above.
 *   L_max = min(max_len_factor * max_tokens, the largest micro-batch whose 1F1B in-flight
 *     activations fit every stage's memory), never below max_tokens: Eq. 2's "maximum
 *     sequence length permitted by GPU memory"; the plan's max_microbatch_tokens.
 *   Thresholds for n queues default to L_i = max_tokens / 2^(n+1-i) (n = 2: L/4 and L/2);
 *     the paper gives none.
 *   The N micro-batches are dealt to pipelines balancing their total workload (pack.c),
 *     each pipeline's in decreasing workload.
 * Every document trained after the step that drew it is recorded in that step's delayed
 * list with the step that trains it. */
#include "wlb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap.h"
#include "pack.h"

#define WLB_MAX_QUEUES 8
#define WLB_MAX_DELAY 8 /* steps; tools/bench/REPRODUCING.md "WLB-LLM audit": how chosen */

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
	size_t nbins, dp;  /* N, pipelines */
	int64_t lmax, max_delay;
	int release_n; /* release=n: Alg. 1's N per queue and step; else multiples of N */
	int nq;
	int64_t thr[WLB_MAX_QUEUES];
	struct fifo q[WLB_MAX_QUEUES];
	struct item *set;  /* the step's pending documents (Doc_Set) */
	size_t nset, capset;
	struct item *carry; /* Remained_Doc */
	size_t ncarry, capcarry;
	/* per-micro-batch state of one step (capbins entries) */
	double *load;
	int64_t *fill;
	size_t capbins;
	/* the micro-batches by load and by tokens (each a min-heap of indices, ties by the
	 * lower index), so placing a document costs log N, not N (issue 24) */
	struct bp_heap by_load, by_fill;
	/* per-document state of one step (capitems entries) */
	int *bin_of, *sub_bin;
	double *sub_cost;
	int64_t *sub_len;
	size_t *sub;
	size_t capitems;
	/* Steps planned but not finished: a step is finished once every document it drew is
	 * placed (at most max_delay steps later), and only then are its delays known. pend[0]
	 * is the run's step pend_first; open counts a step's documents not yet placed. */
	struct pend {
		struct bp_step st;
		size_t open;
	} *pend;
	size_t npend, cappend;
	int64_t pend_first, next_step; /* next_step: the run's number of the next step */
	bp_wlb_repack_fn repack;
	void *arg;
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

/* The largest micro-batch (tokens, at most hi) whose worst-case 1F1B in-flight activations
 * fit every stage: state(s) + (pp - s) * act(s, ceil(T / cp)) <= cap (Hydraulis App. B.1).
 * act_bytes grows with tokens, so bisect. */
static int64_t memory_lmax(const struct bp_costmodel *cm, int64_t hi)
{
	int64_t cap = bp_cost_mem_cap(cm), lo = 0;
	int cp = cm->sc.cp, pp = cm->sc.pp;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo + 1) / 2, per_rank = (mid + cp - 1) / cp;
		int fits = 1;
		for (int s = 0; s < pp && fits; s++)
			fits = bp_i64_mul_add_sat(pp - s, bp_cost_act_bytes(cm, s, per_rank),
						  bp_cost_state_bytes(cm, s)) <= cap;
		if (fits)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
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

/* The heaps' orders: a before b when its key is lower, or equal and its index lower. */
static int load_first(const void *keys, int a, int b)
{
	const struct wlb *w = keys;
	return w->load[a] != w->load[b] ? w->load[a] < w->load[b] : a < b;
}

static int fill_first(const void *keys, int a, int b)
{
	const struct wlb *w = keys;
	return w->fill[a] != w->fill[b] ? w->fill[a] < w->fill[b] : a < b;
}

/* Makes room for nb micro-batches and empties [from, nb); the heaps hold [0, nb). */
static int grow_bins(struct wlb *w, size_t from, size_t nb, struct bp_error *err)
{
	if (nb > w->capbins) {
		double *nl = bp_realloc_array(w->load, nb, sizeof(double), err);
		if (!nl)
			return -1;
		w->load = nl;
		int64_t *nf = bp_realloc_array(w->fill, nb, sizeof(int64_t), err);
		if (!nf)
			return -1;
		w->fill = nf;
		if (bp_heap_reserve(&w->by_load, nb, 1, err) < 0 ||
		    bp_heap_reserve(&w->by_fill, nb, 1, err) < 0)
			return -1;
		w->capbins = nb;
	}
	for (size_t b = from; b < nb; b++) {
		w->load[b] = 0.0;
		w->fill[b] = 0;
	}
	if (!from) { /* all empty: index order is heap order */
		bp_heap_iota(&w->by_load, nb);
		bp_heap_iota(&w->by_fill, nb);
		return 0;
	}
	for (size_t b = from; b < nb; b++) {
		bp_heap_push(&w->by_load, (int)b, load_first, w);
		bp_heap_push(&w->by_fill, (int)b, fill_first, w);
	}
	return 0;
}

/* Alg. 1 lines 24-34 for one document over the micro-batches: its micro-batch, or -1 when
 * it is to be carried. The least-loaded and the fewest-token micro-batch are the heaps'
 * tops (ties: the lowest index, as a scan from 0 would find). */
static int place(struct wlb *w, const struct item *it)
{
	int wi = w->by_load.h[0], li = w->by_fill.h[0], to;
	if (w->fill[wi] + it->len <= w->lmax)
		to = wi;
	else if (w->fill[li] + it->len <= w->lmax)
		to = li;
	else
		return -1;
	w->load[to] += it->w;
	w->fill[to] += it->len;
	bp_heap_down(&w->by_load, (size_t)w->by_load.pos[to], load_first, w);
	bp_heap_down(&w->by_fill, (size_t)w->by_fill.pos[to], fill_first, w);
	return to;
}

/* A document that has waited max_delay steps by step si trains in si. */
static int must_train(const struct wlb *w, const struct item *it, int64_t si)
{
	return si - it->step >= w->max_delay;
}

/* Packs Doc_Set into the micro-batches of step si (Alg. 1 lines 18-35 plus the max_delay
 * rule); fills bin_of, the carry list and *nbins. */
static int pack_greedy(struct wlb *w, int64_t si, size_t *nbins, struct bp_error *err)
{
	size_t nb = w->nbins, n = w->nset;
	int late = 0; /* a document at max_delay would be carried */
	if (grow_bins(w, 0, nb, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		w->bin_of[i] = place(w, &w->set[i]);
		late |= w->bin_of[i] < 0 && must_train(w, &w->set[i], si);
	}
	if (late) { /* again: the documents at max_delay first, the others after */
		if (grow_bins(w, 0, nb, err) < 0)
			return -1;
		for (size_t i = 0; i < n; i++) {
			if (!must_train(w, &w->set[i], si))
				continue;
			int b = place(w, &w->set[i]);
			if (b < 0) { /* one more micro-batch per pipeline: it fits an empty one */
				if (grow_bins(w, nb, nb + w->dp, err) < 0)
					return -1;
				nb += w->dp;
				b = place(w, &w->set[i]);
				if (b < 0)
					return bp_errorf(err, "internal: document %lld of %lld tokens "
							 "fits no empty micro-batch of %lld",
							 (long long)w->set[i].id,
							 (long long)w->set[i].len, (long long)w->lmax);
			}
			w->bin_of[i] = b;
		}
		for (size_t i = 0; i < n; i++)
			if (!must_train(w, &w->set[i], si))
				w->bin_of[i] = place(w, &w->set[i]);
	}
	w->ncarry = 0;
	for (size_t i = 0; i < n; i++)
		if (w->bin_of[i] < 0 &&
		    push_item(&w->carry, &w->ncarry, &w->capcarry, w->set[i], err) < 0)
			return -1;
	*nbins = nb;
	return 0;
}

/* Hands the placed documents to the repack hook (wlb-ilp's ILP) and takes its packing. */
static int repack_step(struct wlb *w, int64_t si, size_t nb, struct bp_error *err)
{
	size_t k = 0;
	for (size_t i = 0; i < w->nset; i++)
		if (w->bin_of[i] >= 0) {
			w->sub[k] = i;
			w->sub_cost[k] = w->set[i].w;
			w->sub_len[k] = w->set[i].len;
			w->sub_bin[k++] = w->bin_of[i];
		}
	if (w->repack(w->arg, w->sub_cost, w->sub_len, k, nb, w->lmax, w->sub_bin,
		      &w->pend[si - (size_t)w->pend_first].st, err) < 0)
		return -1;
	if (grow_bins(w, 0, nb, err) < 0)
		return -1;
	for (size_t j = 0; j < k; j++) {
		int b = w->sub_bin[j];
		if (b < 0 || (size_t)b >= nb)
			return bp_errorf(err, "internal: repacked document in micro-batch %d of %zu",
					 b, nb);
		w->bin_of[w->sub[j]] = b;
		w->load[b] += w->sub_cost[j];
		w->fill[b] += w->sub_len[j];
	}
	for (size_t b = 0; b < nb; b++)
		if (w->fill[b] > w->lmax)
			return bp_errorf(err, "internal: repacked micro-batch %zu holds %lld tokens "
					 "over %lld", b, (long long)w->fill[b],
					 (long long)w->lmax);
	return 0;
}

/* Records that document it, drawn in its step, trains in step si: a delay in its drawing
 * step when later (wlb.h's invariant: at most max_delay later). */
static int placed(struct wlb *w, const struct item *it, int64_t si, struct bp_error *err)
{
	if (it->step < w->pend_first || it->step > si)
		return bp_errorf(err, "internal: document %lld drawn in step %lld is placed in "
				 "step %lld", (long long)it->id, (long long)it->step,
				 (long long)si);
	if (si - it->step > w->max_delay)
		return bp_errorf(err, "internal: document %lld waited %lld steps, over max_delay "
				 "%lld", (long long)it->id, (long long)(si - it->step),
				 (long long)w->max_delay);
	struct pend *d = &w->pend[it->step - w->pend_first];
	d->open--;
	if (it->step == si)
		return 0;
	struct bp_step *st = &d->st;
	struct bp_delayed *nd = bp_realloc_array(st->delayed, st->ndelayed + 1, sizeof(*nd), err);
	if (!nd)
		return -1;
	st->delayed = nd;
	nd[st->ndelayed++] = (struct bp_delayed){it->id, it->len, si};
	return 0;
}

/* Packs Doc_Set (sorted here) into step si (pending) and records where each placed
 * document trains. */
static int pack_step(struct wlb *w, int64_t si, struct bp_error *err)
{
	struct bp_step *st = &w->pend[si - w->pend_first].st;
	size_t nb = 0, n = w->nset;
	int rc = -1;
	int *group_of = NULL;
	struct bp_span *spans = NULL;
	size_t *border = NULL, *at = NULL, *by_bin = NULL;
	int64_t *zero = NULL;
	qsort(w->set, n, sizeof(*w->set), cmp_len_desc);
	if (n > w->capitems) {
		free(w->bin_of);
		free(w->sub_bin);
		free(w->sub_cost);
		free(w->sub_len);
		free(w->sub);
		w->bin_of = bp_calloc(n, sizeof(int), err);
		w->sub_bin = bp_calloc(n, sizeof(int), err);
		w->sub_cost = bp_calloc(n, sizeof(double), err);
		w->sub_len = bp_calloc(n, sizeof(int64_t), err);
		w->sub = bp_calloc(n, sizeof(size_t), err);
		w->capitems = n;
		if (!w->bin_of || !w->sub_bin || !w->sub_cost || !w->sub_len || !w->sub) {
			w->capitems = 0;
			return -1;
		}
	}
	if (pack_greedy(w, si, &nb, err) < 0)
		return -1;
	if (w->repack && repack_step(w, si, nb, err) < 0)
		return -1;
	/* Deal the micro-batches to pipelines, nb / dp each, balancing their total workload;
	 * emit each pipeline's in decreasing workload, a micro-batch's documents longest
	 * first. */
	size_t dp = w->dp, per = nb / dp;
	group_of = bp_calloc(nb, sizeof(int), err);
	spans = bp_calloc(n ? n : 1, sizeof(*spans), err);
	border = bp_calloc(nb, sizeof(size_t), err);
	zero = bp_calloc(nb, sizeof(int64_t), err);
	if (!group_of || !spans || !border || !zero)
		goto out;
	if (bp_deal_bins(w->load, nb, dp, per, group_of, err) < 0)
		goto out;
	bp_order_by_cost(w->load, zero, nb, border);
	/* each micro-batch's documents in Doc_Set's order: bucketed by micro-batch, not
	 * scanned once per micro-batch */
	at = bp_calloc(nb + 1, sizeof(size_t), err);
	by_bin = bp_calloc(n + 1, sizeof(size_t), err);
	if (!at || !by_bin)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (w->bin_of[i] >= 0)
			at[w->bin_of[i] + 1]++;
	for (size_t b = 0; b < nb; b++)
		at[b + 1] += at[b];
	for (size_t i = 0; i < n; i++)
		if (w->bin_of[i] >= 0)
			by_bin[at[w->bin_of[i]]++] = i;
	for (size_t b = nb; b > 0; b--) /* at[b] back to the bucket's start */
		at[b] = at[b - 1];
	at[0] = 0;
	for (size_t k = 0; k < nb; k++) {
		size_t bin = border[k], ns = 0;
		for (size_t q = at[bin]; q < at[bin + 1]; q++) {
			const struct item *it = &w->set[by_bin[q]];
			spans[ns++] = (struct bp_span){it->id, 0, it->len};
		}
		if (ns && bp_pipe_add_mb(&st->pipes[group_of[bin]], spans, ns, w->ctx->shard,
					 err) < 0)
			goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (w->bin_of[i] >= 0 && placed(w, &w->set[i], si, err) < 0)
			goto out;
	rc = 0;
out:
	free(group_of);
	free(spans);
	free(border);
	free(zero);
	free(at);
	free(by_bin);
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

static int pop_into_set(struct wlb *w, struct fifo *f, size_t take, struct bp_error *err)
{
	for (size_t k = 0; k < take; k++) {
		if (push_item(&w->set, &w->nset, &w->capset, f->v[f->head], err) < 0)
			return -1;
		f->head++;
		f->n--;
	}
	return 0;
}

/* Rule 3 and the max_delay release for step si; flush releases everything. Then, if Doc_Set
 * is still empty, the N oldest queued documents. */
static int release_queues(struct wlb *w, int64_t si, int flush, struct bp_error *err)
{
	for (int q = 0; q < w->nq; q++) {
		struct fifo *f = &w->q[q];
		size_t take = f->n / w->nbins * w->nbins; /* the most whole rounds of N */
		if (w->release_n && take)
			take = w->nbins;
		if (flush)
			take = f->n;
		while (take < f->n && must_train(w, &f->v[f->head + take], si))
			take++;
		if (pop_into_set(w, f, take, err) < 0)
			return -1;
	}
	for (size_t k = 0, empty = !w->nset; empty && k < w->nbins; k++) {
		struct fifo *best = NULL;
		for (int q = 0; q < w->nq; q++) {
			struct fifo *f = &w->q[q];
			if (!f->n)
				continue;
			const struct item *h = &f->v[f->head], *b = best ? &best->v[best->head] : NULL;
			if (!b || h->step < b->step || (h->step == b->step && h->id < b->id))
				best = f;
		}
		if (!best)
			break;
		if (pop_into_set(w, best, 1, err) < 0)
			return -1;
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

/* Appends the run's next step to the pending ones: the documents of batch b (NULL: a flush
 * step, which draws none), dp empty pipelines. */
static int push_step(struct wlb *w, const struct bp_batch *b, struct bp_error *err)
{
	if (w->npend == w->cappend) {
		size_t nc = w->cappend ? 2 * w->cappend : 16;
		struct pend *np = bp_realloc_array(w->pend, nc, sizeof(*np), err);
		if (!np)
			return -1;
		w->pend = np;
		w->cappend = nc;
	}
	if (!w->npend)
		w->pend_first = w->next_step;
	struct pend *d = &w->pend[w->npend];
	memset(d, 0, sizeof(*d));
	struct bp_step *st = &d->st;
	st->index = w->next_step;
	st->npipes = w->dp;
	strcpy(st->sync, BP_SYNC_DP_ALLREDUCE);
	st->pipes = bp_calloc(st->npipes, sizeof(*st->pipes), err);
	if (!st->pipes)
		return -1;
	w->npend++; /* owned from here: released with the state */
	w->next_step++;
	if (b && b->ndocs) {
		st->docs = bp_calloc(b->ndocs, sizeof(*st->docs), err);
		if (!st->docs)
			return -1;
		memcpy(st->docs, b->docs, b->ndocs * sizeof(*st->docs));
		st->ndocs = d->open = b->ndocs;
	}
	return 0;
}

static int cmp_delayed(const void *a, const void *b)
{
	const struct bp_delayed *x = a, *y = b;
	return (x->doc > y->doc) - (x->doc < y->doc);
}

/* Moves the finished pending steps (every document placed), oldest first, to out->steps;
 * with all, every pending step (after a flush each is finished). */
static int emit_finished(struct wlb *w, int all, struct bp_error *err)
{
	struct bp_plan *out = w->out;
	size_t n = 0;
	while (n < w->npend && !w->pend[n].open)
		n++;
	if (all && n < w->npend)
		return bp_errorf(err, "internal: step %lld ends the run with %zu documents unplaced",
				 (long long)w->pend[n].st.index, w->pend[n].open);
	if (!n)
		return 0;
	struct bp_step *ns = bp_realloc_array(out->steps, out->nsteps + n, sizeof(*ns), err);
	if (!ns)
		return -1;
	out->steps = ns;
	if (!out->nsteps)
		out->first_step = w->pend_first;
	for (size_t i = 0; i < n; i++) {
		struct bp_step *st = &w->pend[i].st;
		if (st->ndelayed > 1)
			qsort(st->delayed, st->ndelayed, sizeof(*st->delayed), cmp_delayed);
		ns[out->nsteps++] = *st;
	}
	memmove(w->pend, w->pend + n, (w->npend - n) * sizeof(*w->pend));
	w->npend -= n;
	w->pend_first += (int64_t)n;
	return 0;
}

static const char *const wlb_releases[] = {"multiple", "n", NULL};

const struct bp_param_spec bp_wlb_param_specs[] = {
	BP_PARAM_SPEC_INT("queues", 2, 0, WLB_MAX_QUEUES, "outlier queues"),
	BP_PARAM_SPEC_REAL("max_len_factor", 2.0, 1.0, 64.0, "L_max over max_tokens"),
	BP_PARAM_SPEC_INT("max_delay", WLB_MAX_DELAY, 1, INT32_MAX,
			  "steps a document may wait"),
	BP_PARAM_SPEC_CHOICE("release", wlb_releases,
			     "a queue releases the largest multiple of N, or N (Alg. 1)"),
	{0},
};

/* Reads queues, thresholds, max_len_factor and max_delay; sets L_max and N. */
/* The parameters that need no cost model (queues, thresholds, max_len_factor, max_delay,
 * release) from out, recording their defaults: what check and solve's preflight read too. */
static int read_queue_params(struct wlb *w, struct bp_plan *out, double *factor_out,
			     struct bp_error *err)
{
	int64_t nq = 2, L = out->max_tokens;
	double factor = 2.0;
	int rel;
	if (bp_param_int(out, bp_wlb_param_specs, "queues", &nq, err) < 0 ||
	    bp_param_real(out, bp_wlb_param_specs, "max_len_factor", &factor, err) < 0 ||
	    bp_param_int(out, bp_wlb_param_specs, "max_delay", &w->max_delay, err) < 0 ||
	    bp_param_choice(out, bp_wlb_param_specs, "release", &rel, err) < 0)
		return -1;
	w->release_n = rel == 1;
	w->nq = (int)nq;
	if (!bp_plan_param(out, "thresholds")) {
		char buf[64] = "", part[24];
		for (int i = 0; i < w->nq; i++) {
			w->thr[i] = L >> (w->nq - i);
			if (w->thr[i] < 1)
				w->thr[i] = 1;
			snprintf(part, sizeof(part), "%s%lld", i ? "," : "", (long long)w->thr[i]);
			strncat(buf, part, sizeof(buf) - strlen(buf) - 1);
		}
		if (bp_plan_set_param(out, "thresholds", w->nq ? buf : "none", err) < 0)
			return -1;
	} else if (w->nq) {
		if (parse_thresholds(w, bp_plan_param(out, "thresholds"), err) < 0)
			return -1;
	}
	*factor_out = factor;
	return 0;
}

int bp_wlb_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			struct bp_error *err)
{
	struct wlb w;
	double factor;
	(void)p;
	memset(&w, 0, sizeof(w));
	if (bp_param_grad_sync(scratch, err) < 0)
		return -1;
	return read_queue_params(&w, scratch, &factor, err);
}

int bp_wlb_ilp_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			    struct bp_error *err)
{
	if (bp_fixed_ilp_check_params(p, scratch, err) < 0)
		return -1;
	return bp_wlb_check_params(p, scratch, err);
}

static int read_params(struct wlb *w, struct bp_error *err)
{
	struct bp_plan *out = w->out;
	int64_t L = out->max_tokens, dp = bp_plan_dp(out);
	double factor = 2.0;
	if (read_queue_params(w, out, &factor, err) < 0)
		return -1;
	w->lmax = memory_lmax(w->ctx->cm, (int64_t)(factor * (double)L));
	if (w->lmax < L)
		w->lmax = L; /* bp_solve already checked that max_tokens fits */
	bp_plan_set_mb_cap(out, w->lmax);
	/* N from the step budget (Alg. 1's fixed #Micro-Batch per Iteration): a property of
	 * the request and the data, never of the steps planned (method.h step_tokens) */
	double budget = w->ctx->step_tokens;
	int64_t m = (int64_t)((budget + (double)(dp * L) - 1) / (double)(dp * L));
	if (m < 1)
		m = 1;
	w->dp = (size_t)dp;
	w->nbins = (size_t)(m * dp);
	char nbuf[24];
	snprintf(nbuf, sizeof(nbuf), "%zu", w->nbins);
	return bp_plan_set_param(out, "microbatches_per_step", nbuf, err);
}

static void wlb_free(void *state)
{
	struct wlb *w = state;
	if (!w)
		return;
	for (int q = 0; q < WLB_MAX_QUEUES; q++)
		free(w->q[q].v);
	for (size_t i = 0; i < w->npend; i++)
		bp_step_release(&w->pend[i].st);
	free(w->pend);
	free(w->set);
	free(w->carry);
	free(w->load);
	free(w->fill);
	bp_heap_free(&w->by_load);
	bp_heap_free(&w->by_fill);
	free(w->bin_of);
	free(w->sub_bin);
	free(w->sub_cost);
	free(w->sub_len);
	free(w->sub);
	free(w);
}

int bp_wlb_plan(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		struct bp_plan *out, bp_wlb_repack_fn repack, void *arg, struct bp_error *err)
{
	/* the whole run in one call (ctx->run NULL), or a window of it (method.h) */
	struct bp_method_run whole = {.last = 1}, *run = ctx->run ? ctx->run : &whole;
	struct wlb *w = run->state;
	int rc = -1;
	if (!w) {
		if (!(w = bp_calloc(1, sizeof(*w), err)))
			return -1;
		run->state = w;
		run->release = wlb_free;
		w->next_step = run->step0;
	}
	w->ctx = ctx;
	w->out = out;
	w->repack = repack;
	w->arg = arg;
	if (w->next_step != run->step0) {
		bp_errorf(err, "internal: wlb planned up to step %lld, the batches start at %lld",
			  (long long)w->next_step, (long long)run->step0);
		goto out;
	}
	/* every call records the parameters in its window's plan; they are the same each time */
	if (read_params(w, err) < 0)
		goto out;
	for (size_t j = 0; j < in->n; j++) {
		const struct bp_batch *b = &in->b[j];
		int64_t s = w->next_step;
		if (push_step(w, b, err) < 0)
			goto out;
		w->nset = 0;
		if (take_carry(w, err) < 0)
			goto out;
		for (size_t k = 0; k < b->ndocs; k++) {
			struct item it = {b->docs[k].id, b->docs[k].len, s, 0.0};
			if (bp_cost_doc(ctx->cm, it.len, &it.w, err) < 0)
				goto out;
			int q = queue_of(w, it.len);
			if (q >= 0 ? fifo_push(&w->q[q], it, err) < 0
				   : push_item(&w->set, &w->nset, &w->capset, it, err) < 0)
				goto out;
		}
		if (release_queues(w, s, 0, err) < 0 || pack_step(w, s, err) < 0)
			goto out;
	}
	/* Flush where the run ends: extra steps until every queued and carried document is
	 * trained. */
	while (run->last && (w->ncarry || queued(w))) {
		int64_t s = w->next_step;
		if (push_step(w, NULL, err) < 0)
			goto out;
		w->nset = 0;
		if (take_carry(w, err) < 0 || release_queues(w, s, 1, err) < 0 ||
		    pack_step(w, s, err) < 0)
			goto out;
	}
	rc = emit_finished(w, run->last, err);
out:
	if (!ctx->run || (rc < 0 && run->state)) {
		wlb_free(run->state);
		run->state = NULL;
		run->release = NULL;
	}
	return rc;
}

int bp_method_wlb(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		  struct bp_plan *out, struct bp_error *err)
{
	return bp_wlb_plan(ctx, in, out, NULL, NULL, err);
}

static const char *const wlb_params[] = {"queues", "thresholds", "max_len_factor",
					 "max_delay", "release", BP_GRAD_SYNC_PARAM, NULL};

/* The N it records (method.h's recorded), wlb-ilp's too. */
const char *const bp_wlb_recorded[] = {"microbatches_per_step", NULL};

/* Its price (cmd/cmd_solve_limits.c): 5,000 instructions a document per step (the queues
 * and the greedy packing). */
#define I_WLB_DOC 5e3

double bp_wlb_pack_price(const struct bp_price_req *r)
{
	return I_WLB_DOC * r->docs;
}

static void wlb_price(const struct bp_price_req *r, struct bp_price *p)
{
	p->own = p->pack = bp_wlb_pack_price(r);
}

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(wlb) = {
	.name = "wlb",
	.solve = bp_method_wlb,
	.summary = "variable-length packing with outlier delay queues (Alg. 1)",
	.paper = "WLB-LLM Sec. 4.1-4.2, Eq. 2, Alg. 1",
	.params = wlb_params,
	.param_specs = bp_wlb_param_specs,
	.check_params = bp_wlb_check_params,
	.carries = 1,
	.schedules = 1,
	.in_all = 1,
	.rank = 30,
	.price = wlb_price,
	.recorded = bp_wlb_recorded,
};
