/* kk.c: the "kk" method, Karmarkar-Karp balanced partitioning on a length-only workload proxy,
 * the way verl balances sequence lengths across data-parallel ranks (its seqlen balancing:
 * the largest differencing method of Karmarkar & Karp 1982, "The differencing method of set
 * partitioning", in its k-way form), plus the per-micro-batch token cap verl's partition does
 * not enforce. Called through the method table (methods.c) by bp_solve.
 *
 * Per step: k = dp * m bins with m = ceil(tokens / (dp * max_tokens)). Each document's
 * workload is bp_kk_proxy (s^2 + coef * s, coef from the model: pack.h), not the cost model:
 * this baseline shows what a FLOP proxy buys. KK partitions the documents into k bins of
 * balanced workload; bins over max_tokens are then repaired by moving documents to bins with
 * room (bp_pack_kk); when no repair exists m grows by one. The k bins are dealt m to each
 * pipeline, pipelines' workloads balanced (bp_deal_bins), each pipeline's in decreasing
 * workload. Invariant: every document whole in exactly one micro-batch within max_tokens.
 * Written from the algorithm's description, not from verl's code. */
#include "method.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pack.h"

int64_t bp_kk_coef(const struct bp_model *m)
{
	int64_t h = m->hidden > 0 ? m->hidden : 1;
	int64_t c = bp_model_layer_params(m) / h;
	return c > 0 ? c : 1;
}

int64_t bp_kk_proxy(int64_t len, int64_t coef)
{
	return len * len + coef * len;
}

/* A subset of a partial solution: its workload and its items as a list through next[]. */
struct subset {
	int64_t sum;
	int head, tail; /* -1: empty */
};

/* Heaviest first; ties by first item (empty subsets, all alike, last). */
static int cmp_subset(const void *a, const void *b)
{
	const struct subset *x = a, *y = b;
	if (x->sum != y->sum)
		return x->sum < y->sum ? 1 : -1;
	if (x->head != y->head)
		return (unsigned)x->head > (unsigned)y->head ? 1 : -1; /* -1 sorts last */
	return 0;
}

/* A partial solution in the heap: its spread, its age, and where its k subsets are. */
struct tup {
	int64_t spread;
	int64_t seq;  /* creation order: documents 0..n-1, then merges */
	size_t slot;  /* first of its k subsets in the pool */
};

/* Max-heap: larger spread first, then older. */
static int tup_before(const struct tup *a, const struct tup *b)
{
	return a->spread != b->spread ? a->spread > b->spread : a->seq < b->seq;
}

static void heap_push(struct tup *h, size_t *nh, struct tup t)
{
	size_t v = (*nh)++;
	while (v > 0 && tup_before(&t, &h[(v - 1) / 2])) {
		h[v] = h[(v - 1) / 2];
		v = (v - 1) / 2;
	}
	h[v] = t;
}

static struct tup heap_pop(struct tup *h, size_t *nh)
{
	struct tup top = h[0], last = h[--(*nh)];
	size_t v = 0, size = *nh;
	for (;;) {
		size_t c = 2 * v + 1;
		if (c >= size)
			break;
		if (c + 1 < size && tup_before(&h[c + 1], &h[c]))
			c++;
		if (!tup_before(&h[c], &last))
			break;
		h[v] = h[c];
		v = c;
	}
	if (size)
		h[v] = last;
	return top;
}

/* Moves items out of bins over cap (see pack.h). Returns 0 or 1 (no bin has room). */
static int kk_repair(const int64_t *w, const int64_t *len, size_t n, size_t k, int64_t cap,
		     int *bin_of, int64_t *load, int64_t *fill)
{
	for (size_t b = 0; b < k; b++)
		while (fill[b] > cap) {
			int64_t over = fill[b] - cap, room = 0;
			for (size_t c = 0; c < k; c++)
				if (c != b && cap - fill[c] > room)
					room = cap - fill[c];
			/* The shortest item that ends the overflow, else the longest that fits
			 * somewhere; ties by index. */
			size_t pick = n;
			int ends = 0;
			for (size_t i = 0; i < n; i++) {
				if ((size_t)bin_of[i] != b || len[i] > room)
					continue;
				int e = len[i] >= over;
				if (pick == n || (e && !ends) ||
				    (e && ends && len[i] < len[pick]) ||
				    (!e && !ends && len[i] > len[pick])) {
					pick = i;
					ends = e;
				}
			}
			if (pick == n)
				return 1;
			size_t to = k;
			for (size_t c = 0; c < k; c++)
				if (c != b && fill[c] + len[pick] <= cap &&
				    (to == k || load[c] < load[to]))
					to = c;
			bin_of[pick] = (int)to;
			fill[b] -= len[pick];
			load[b] -= w[pick];
			fill[to] += len[pick];
			load[to] += w[pick];
		}
	return 0;
}

int bp_pack_kk(const int64_t *w, const int64_t *len, size_t n, size_t k, int64_t cap,
	       int *bin_of, int64_t *load, int64_t *fill, struct bp_error *err)
{
	struct subset *pool = NULL, *tmp = NULL;
	struct tup *heap = NULL;
	size_t *freed = NULL; /* slots of merged-away partials, reused */
	int *next = NULL;
	size_t npool = 0, cappool = 0, nfreed = 0, nh = 0;
	int rc = -1;
	if (!k || k > (size_t)INT32_MAX || n > (size_t)INT32_MAX)
		return bp_errorf(err, "internal: %zu items into %zu bins", n, k);
	for (size_t b = 0; b < k; b++)
		load[b] = fill[b] = 0;
	int64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (w[i] < 0 || w[i] > INT64_MAX / 2 - total)
			return bp_errorf(err, "the workload proxy overflows at item %zu", i);
		total += w[i];
	}
	heap = bp_calloc(n ? n : 1, sizeof(*heap), err);
	freed = bp_calloc(n ? n : 1, sizeof(size_t), err);
	next = bp_calloc(n ? n : 1, sizeof(int), err);
	tmp = bp_calloc(k, sizeof(*tmp), err);
	if (!heap || !freed || !next || !tmp)
		goto out;
	/* Every item a partial solution of its own: itself in one subset, k-1 empty ones, of
	 * spread w. Its k subsets are written out only when it is merged (slot SIZE_MAX: the
	 * singleton of item seq), so memory is k subsets per merged partial, not per item. */
	for (size_t i = 0; i < n; i++) {
		next[i] = -1;
		heap_push(heap, &nh, (struct tup){k > 1 ? w[i] : 0, (int64_t)i, SIZE_MAX});
	}
	int64_t seq = (int64_t)n;
	while (nh > 1) {
		struct tup a = heap_pop(heap, &nh), b = heap_pop(heap, &nh);
		struct subset *sa, *sb, single[2] = {{0, -1, -1}, {0, -1, -1}};
		size_t slot;
		if (a.slot == SIZE_MAX) { /* materialise a singleton into a fresh slot */
			if (nfreed) {
				slot = freed[--nfreed];
			} else {
				if (npool == cappool) {
					size_t nc = cappool ? 2 * cappool : 64;
					struct subset *np = bp_realloc_array(pool, nc * k, sizeof(*np), err);
					if (!np)
						goto out;
					pool = np;
					cappool = nc;
				}
				slot = npool++ * k;
			}
			pool[slot] = (struct subset){w[a.seq], (int)a.seq, (int)a.seq};
			for (size_t j = 1; j < k; j++)
				pool[slot + j] = (struct subset){0, -1, -1};
		} else {
			slot = a.slot;
		}
		sa = &pool[slot];
		if (b.slot == SIZE_MAX) {
			/* b's subsets ascending are k-1 empty then itself: only the lightest
			 * subset of a gets it. */
			single[0] = (struct subset){w[b.seq], (int)b.seq, (int)b.seq};
			single[1] = (struct subset){0, -1, -1};
			sb = NULL;
		} else {
			sb = &pool[b.slot];
		}
		/* a's heaviest with b's lightest: a[j] + b[k-1-j] */
		for (size_t j = 0; j < k; j++) {
			struct subset x = sa[j];
			struct subset y = sb ? sb[k - 1 - j] : (j == k - 1 ? single[0] : single[1]);
			if (y.head >= 0) {
				if (x.head < 0)
					x.head = y.head;
				else
					next[x.tail] = y.head;
				x.tail = y.tail;
				x.sum += y.sum;
			}
			tmp[j] = x;
		}
		qsort(tmp, k, sizeof(*tmp), cmp_subset);
		memcpy(sa, tmp, k * sizeof(*tmp));
		if (sb)
			freed[nfreed++] = b.slot;
		heap_push(heap, &nh, (struct tup){sa[0].sum - sa[k - 1].sum, seq++, slot});
	}
	if (nh == 1) {
		struct tup t = heap[0];
		if (t.slot == SIZE_MAX) { /* a single item */
			bin_of[t.seq] = 0;
			load[0] = w[t.seq];
			fill[0] = len[t.seq];
		} else {
			for (size_t j = 0; j < k; j++)
				for (int i = pool[t.slot + j].head; i >= 0; i = next[i]) {
					bin_of[i] = (int)j;
					load[j] += w[i];
					fill[j] += len[i];
				}
		}
	}
	rc = kk_repair(w, len, n, k, cap, bin_of, load, fill);
out:
	free(pool);
	free(tmp);
	free(heap);
	free(freed);
	free(next);
	return rc;
}

static int kk_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		      struct bp_step *st, const struct bp_plan *out, void *arg,
		      struct bp_error *err)
{
	(void)arg;
	int dp = bp_plan_dp(out);
	int64_t cap = out->max_tokens;
	size_t n = b->ndocs;
	int64_t coef = bp_kk_coef(&ctx->cm->prof->model);
	int64_t *len = bp_calloc(n ? n : 1, sizeof(int64_t), err);
	int64_t *w = bp_calloc(n ? n : 1, sizeof(int64_t), err);
	int *bin_of = bp_calloc(n ? n : 1, sizeof(int), err);
	size_t *order = bp_calloc(n ? n : 1, sizeof(size_t), err);
	int64_t *load = NULL, *fill = NULL;
	double *dload = NULL;
	size_t *border = NULL;
	int *group_of = NULL;
	int rc = -1;
	if (!len || !w || !bin_of || !order)
		goto out;
	rc = bp_batch_lens(b, cap, len, err);
	if (rc < 0 || !n)
		goto out;
	rc = -1;
	int64_t tokens = 0;
	for (size_t i = 0; i < n; i++) {
		w[i] = bp_kk_proxy(len[i], coef);
		tokens += len[i];
	}
	size_t m = (size_t)((tokens + (int64_t)dp * cap - 1) / ((int64_t)dp * cap));
	if (m < 1)
		m = 1;
	for (;;) { /* ends by m = n at the latest: every document alone in a bin */
		size_t k = m * (size_t)dp;
		free(load);
		free(fill);
		load = bp_calloc(k, sizeof(int64_t), err);
		fill = bp_calloc(k, sizeof(int64_t), err);
		if (!load || !fill)
			goto out;
		int r = bp_pack_kk(w, len, n, k, cap, bin_of, load, fill, err);
		if (r < 0)
			goto out;
		if (r == 0)
			break;
		m++;
	}
	size_t k = m * (size_t)dp;
	dload = bp_calloc(k, sizeof(double), err);
	border = bp_calloc(k, sizeof(size_t), err);
	group_of = bp_calloc(k, sizeof(int), err);
	if (!dload || !border || !group_of)
		goto out;
	for (size_t j = 0; j < k; j++)
		dload[j] = (double)load[j];
	if (bp_deal_bins(dload, k, (size_t)dp, m, group_of, err) < 0 ||
	    bp_order_by_len(len, n, order, err) < 0)
		goto out;
	bp_order_by_cost(dload, fill, k, border);
	if (bp_emit_bins(b->docs, n, order, bin_of, k, border, group_of, st->pipes, st->npipes,
			 ctx->shard, err) < 0)
		goto out;
	rc = 0;
out:
	free(len);
	free(w);
	free(bin_of);
	free(order);
	free(load);
	free(fill);
	free(dload);
	free(border);
	free(group_of);
	return rc;
}

int bp_method_kk(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		   struct bp_plan *out, struct bp_error *err)
{
	return bp_method_each_step(ctx, in, out, kk_step, NULL, err);
}

/* Its price (cmd/cmd_solve_limits.c): 40 D k log2 k instructions per step over k = mb0
 * rounded up to dp bins, times the Karmarkar-Karp runs: one more each time its repair finds
 * no room and a micro-batch is added, 2 + 100 x the share of documents of at least
 * max-tokens / 2, at most 9 (5-6 measured at 4K context). */
#define I_KK_MERGE 40.0

static void kk_price(const struct bp_price_req *r, struct bp_price *p)
{
	double dp = (double)r->dp, k = dp * ceil(r->mb0 / dp);
	double runs = 2.0 + fmin(7.0, 100.0 * r->long_share);
	p->own = p->pack = I_KK_MERGE * r->docs * k * log2(k + 1.0) * runs;
}

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(kk) = {
	.name = "kk",
	.solve = bp_method_kk,
	.summary = "Karmarkar-Karp balanced partition on a workload proxy, with a token cap",
	.paper = "verl's seqlen balancing (Karmarkar-Karp)",
	.schedules = 1,
	.in_all = 1,
	.rank = 90,
	.price = kk_price,
};
