/* pack.c: LPT packing with a token cap and balanced dealing of bins to pipelines (pack.h).
 * Called by the packing methods (methods/), ilp_pack.c's warm starts, Hydraulis's packing
 * (hyd_pack.c), FlexSP's groups (sp_ilp.c) and the simulator's bound (sim/predict.c).
 * Invariant: results depend only on the inputs (ties broken by index), never on memory
 * addresses. */
#include "pack.h"

#include <stdlib.h>
#include <string.h>

struct ord {
	double cost;
	int64_t len;
	size_t i;
};

static int cmp_ord(const void *a, const void *b)
{
	const struct ord *x = a, *y = b;
	if (x->cost != y->cost)
		return x->cost < y->cost ? 1 : -1;
	if (x->len != y->len)
		return x->len < y->len ? 1 : -1;
	return (x->i > y->i) - (x->i < y->i);
}

void bp_order_by_cost(const double *cost, const int64_t *len, size_t n, size_t *order)
{
	struct ord *o = malloc((n ? n : 1) * sizeof(*o));
	if (!o) { /* fall back to insertion sort in place: slow but correct */
		for (size_t i = 0; i < n; i++)
			order[i] = i;
		for (size_t i = 1; i < n; i++)
			for (size_t j = i; j > 0; j--) {
				struct ord a = {cost[order[j - 1]], len[order[j - 1]], order[j - 1]};
				struct ord b = {cost[order[j]], len[order[j]], order[j]};
				if (cmp_ord(&a, &b) <= 0)
					break;
				size_t t = order[j];
				order[j] = order[j - 1];
				order[j - 1] = t;
			}
		return;
	}
	for (size_t i = 0; i < n; i++)
		o[i] = (struct ord){cost[i], len[i], i};
	qsort(o, n, sizeof(*o), cmp_ord);
	for (size_t i = 0; i < n; i++)
		order[i] = o[i].i;
	free(o);
}

int bp_pack_lpt(const double *cost, const int64_t *len, size_t n, size_t nbins, int64_t cap,
		int *bin_of, double *load, int64_t *fill, struct bp_error *err)
{
	size_t *order = bp_calloc(n, sizeof(size_t), err);
	if (!order)
		return -1;
	bp_order_by_cost(cost, len, n, order);
	for (size_t b = 0; b < nbins; b++) {
		load[b] = 0.0;
		fill[b] = 0;
	}
	int rc = 0;
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k];
		size_t best = nbins;
		for (size_t b = 0; b < nbins; b++)
			if (fill[b] + len[i] <= cap && (best == nbins || load[b] < load[best]))
				best = b;
		if (best == nbins) {
			rc = 1;
			break;
		}
		bin_of[i] = (int)best;
		load[best] += cost[i];
		fill[best] += len[i];
	}
	free(order);
	return rc;
}

int bp_deal_bins(const double *load, size_t nbins, size_t groups, size_t per, int *group_of,
		 struct bp_error *err)
{
	int64_t *zero = bp_calloc(nbins, sizeof(int64_t), err);
	size_t *order = bp_calloc(nbins, sizeof(size_t), err);
	double *sum = bp_calloc(groups, sizeof(double), err);
	size_t *count = bp_calloc(groups, sizeof(size_t), err);
	int rc = -1;
	if (!zero || !order || !sum || !count)
		goto out;
	if (nbins != groups * per) {
		bp_errorf(err, "internal: %zu bins for %zu groups of %zu", nbins, groups, per);
		goto out;
	}
	bp_order_by_cost(load, zero, nbins, order);
	for (size_t k = 0; k < nbins; k++) {
		size_t b = order[k], best = groups;
		for (size_t g = 0; g < groups; g++)
			if (count[g] < per && (best == groups || sum[g] < sum[best]))
				best = g;
		group_of[b] = (int)best;
		sum[best] += load[b];
		count[best]++;
	}
	rc = 0;
out:
	free(zero);
	free(order);
	free(sum);
	free(count);
	return rc;
}

static int cmp_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

double bp_pack_bound(const double *cost, size_t n, size_t m)
{
	if (!n || !m)
		return 0.0;
	double sum = 0.0, mx = 0.0;
	for (size_t i = 0; i < n; i++) {
		sum += cost[i];
		if (cost[i] > mx)
			mx = cost[i];
	}
	double lb = sum / (double)m;
	if (mx > lb)
		lb = mx;
	if (n > m) {
		double *c = malloc(n * sizeof(double));
		if (c) {
			memcpy(c, cost, n * sizeof(double));
			qsort(c, n, sizeof(double), cmp_desc);
			if (c[m - 1] + c[m] > lb)
				lb = c[m - 1] + c[m];
			free(c);
		}
	}
	return lb;
}

/* ---- Practical baselines (issue 3): shared pieces of ffd, bfd, multipack and kk. ---- */

static int cmp_len_desc(const void *a, const void *b)
{
	const struct ord *x = a, *y = b;
	if (x->len != y->len)
		return x->len < y->len ? 1 : -1;
	return (x->i > y->i) - (x->i < y->i);
}

/* Stable LSD radix sort of packed keys (mx - len) << 32 | index, ascending: longest first,
 * ties by index. Only the low `bits` bits of the upper half are sorted on: the index bits
 * start in order and every pass is stable. Digits of log2(n) bits (4 to 11), so a pass
 * costs O(n + min(n, 2^11)). key and tmp hold n entries each; the result is left in key. */
static void radix_sort_keys(uint64_t *key, uint64_t *tmp, size_t n, int bits)
{
	int dmax = 4;
	while (dmax < 11 && ((size_t)1 << dmax) < n)
		dmax++;
	int passes = (bits + dmax - 1) / dmax, d = passes ? (bits + passes - 1) / passes : 0;
	size_t count[(size_t)1 << 11];
	uint64_t mask = ((uint64_t)1 << d) - 1;
	for (int p = 0, shift = 32; p < passes; p++, shift += d) {
		memset(count, 0, ((size_t)1 << d) * sizeof(size_t));
		for (size_t i = 0; i < n; i++)
			count[(key[i] >> shift) & mask]++;
		size_t sum = 0;
		for (size_t v = 0; v <= mask; v++) {
			size_t c = count[v];
			count[v] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[count[(key[i] >> shift) & mask]++] = key[i];
		uint64_t *t = key;
		key = tmp;
		tmp = t;
	}
	if (passes & 1) /* the result is in the caller's tmp */
		memcpy(tmp, key, n * sizeof(uint64_t));
}

int bp_order_by_len(const int64_t *len, size_t n, size_t *order, struct bp_error *err)
{
	int64_t mx = 0;
	for (size_t i = 0; i < n; i++)
		if (len[i] > mx)
			mx = len[i];
	if (mx <= (int64_t)(2 * n) + 64) {
		/* Counting sort on len, longest first; a stable pass keeps index order in ties.
		 * O(n + max len), chosen only when the longest is within a few times n. */
		size_t *start = bp_calloc((size_t)mx + 2, sizeof(size_t), err);
		if (!start)
			return -1;
		for (size_t i = 0; i < n; i++)
			start[mx - (len[i] > 0 ? len[i] : 0) + 1]++;
		for (int64_t v = 1; v <= mx + 1; v++)
			start[v] += start[v - 1];
		for (size_t i = 0; i < n; i++)
			order[start[mx - (len[i] > 0 ? len[i] : 0)]++] = i;
		free(start);
		return 0;
	}
	if (mx < ((int64_t)1 << 32) && n <= (size_t)UINT32_MAX) {
		/* Radix sort on n-sized digits: O(n log(max len) / log n), no table of max len. */
		uint64_t *key = bp_calloc(2 * n, sizeof(uint64_t), err);
		int bits = 0;
		if (!key)
			return -1;
		while (bits < 32 && ((uint64_t)mx >> bits))
			bits++;
		for (size_t i = 0; i < n; i++)
			key[i] = (uint64_t)(mx - (len[i] > 0 ? len[i] : 0)) << 32 | (uint64_t)i;
		radix_sort_keys(key, key + n, n, bits);
		for (size_t i = 0; i < n; i++)
			order[i] = (size_t)(key[i] & UINT32_MAX);
		free(key);
		return 0;
	}
	struct ord *o = bp_calloc(n ? n : 1, sizeof(*o), err);
	if (!o)
		return -1;
	for (size_t i = 0; i < n; i++)
		o[i] = (struct ord){0.0, len[i], i};
	qsort(o, n, sizeof(*o), cmp_len_desc);
	for (size_t i = 0; i < n; i++)
		order[i] = o[i].i;
	free(o);
	return 0;
}

int bp_batch_lens(const struct bp_batch *b, int64_t cap, int64_t *len, struct bp_error *err)
{
	for (size_t i = 0; i < b->ndocs; i++) {
		len[i] = b->docs[i].len;
		if (len[i] < 1 || len[i] > cap)
			return bp_infeasiblef(err, "document %lld has %lld tokens, outside [1, "
					      "max_tokens %lld]", (long long)b->docs[i].id,
					      (long long)len[i], (long long)cap);
	}
	return 0;
}

int bp_emit_bins(const struct bp_doc *docs, size_t n, const size_t *order, const int *bin_of,
		 size_t nbins, const size_t *border, const int *group_of, struct bp_pipe *pipes,
		 size_t npipes, enum bp_shard shard, struct bp_error *err)
{
	size_t *start = bp_calloc(nbins + 1, sizeof(size_t), err);
	struct bp_span *spans = bp_calloc(n ? n : 1, sizeof(*spans), err);
	int rc = -1;
	if (!start || !spans)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (bin_of[i] < 0 || (size_t)bin_of[i] >= nbins) {
			bp_errorf(err, "internal: document %lld in bin %d of %zu",
				  (long long)docs[i].id, bin_of[i], nbins);
			goto out;
		}
		start[bin_of[i] + 1]++;
	}
	for (size_t b = 0; b < nbins; b++)
		start[b + 1] += start[b];
	/* Bucket the spans by bin; start[b] ends up at the end of bin b, i.e. the start of
	 * bin b+1, so bin b spans [b ? start[b-1] : 0, start[b]). */
	for (size_t q = 0; q < n; q++) {
		size_t i = order ? order[q] : q;
		spans[start[bin_of[i]]++] = (struct bp_span){docs[i].id, 0, docs[i].len};
	}
	size_t emitted = 0;
	for (size_t k = 0; k < nbins; k++) {
		size_t b = border ? border[k] : k;
		size_t lo = b ? start[b - 1] : 0, hi = start[b];
		if (hi == lo)
			continue;
		size_t g = group_of ? (size_t)group_of[b] : emitted % npipes;
		if (g >= npipes) {
			bp_errorf(err, "internal: bin %zu dealt to pipeline %zu of %zu", b, g, npipes);
			goto out;
		}
		if (bp_pipe_add_mb(&pipes[g], spans + lo, hi - lo, shard, err) < 0)
			goto out;
		emitted++;
	}
	rc = 0;
out:
	free(start);
	free(spans);
	return rc;
}

int bp_pack_step_rr(bp_packer_fn packer, const struct bp_batch *b, struct bp_step *st,
		    int64_t cap, enum bp_shard shard, struct bp_error *err)
{
	size_t n = b->ndocs, nbins = 0;
	int64_t *len = bp_calloc(n ? n : 1, sizeof(int64_t), err);
	int *bin_of = bp_calloc(n ? n : 1, sizeof(int), err);
	size_t *order = bp_calloc(n ? n : 1, sizeof(size_t), err);
	int rc = -1;
	if (!len || !bin_of || !order)
		goto out;
	rc = bp_batch_lens(b, cap, len, err);
	if (rc < 0)
		goto out;
	rc = -1;
	if (packer(len, n, cap, bin_of, &nbins, err) < 0 ||
	    bp_order_by_len(len, n, order, err) < 0 ||
	    bp_emit_bins(b->docs, n, order, bin_of, nbins, NULL, NULL, st->pipes, st->npipes,
			 shard, err) < 0)
		goto out;
	rc = 0;
out:
	free(len);
	free(bin_of);
	free(order);
	return rc;
}

int bp_pack_fixed_greedy(const struct bp_costmodel *cm, const struct bp_batch *b, int dp,
			 int64_t window, int64_t cap, double *cost, int64_t *len, int *bin_of,
			 double **load, size_t *m, struct bp_error *err)
{
	size_t n = b->ndocs;
	int64_t *fill = NULL;
	*load = NULL;
	for (size_t i = 0; i < n; i++) {
		len[i] = b->docs[i].len;
		if (len[i] > cap)
			return bp_infeasiblef(err, "document %lld has %lld tokens, more than the "
					      "micro-batch cap %lld", (long long)b->docs[i].id,
					      (long long)len[i], (long long)cap);
		cost[i] = bp_cost_doc(cm, len[i]);
	}
	*m = (size_t)((b->tokens + (int64_t)dp * window - 1) / ((int64_t)dp * window));
	if (*m < 1)
		*m = 1;
	for (;;) {
		size_t nbins = *m * (size_t)dp;
		free(*load);
		free(fill);
		*load = bp_calloc(nbins, sizeof(double), err);
		fill = bp_calloc(nbins, sizeof(int64_t), err);
		if (!*load || !fill)
			break;
		int r = bp_pack_lpt(cost, len, n, nbins, cap, bin_of, *load, fill, err);
		if (r <= 0) {
			free(fill);
			return r;
		}
		(*m)++; /* cannot pass n: with n bins every document fits alone */
	}
	free(fill);
	free(*load);
	*load = NULL;
	return -1;
}

int bp_emit_balanced(const struct bp_batch *b, const double *cost, const int64_t *len,
		     const int *bin_of, size_t m, struct bp_step *st, enum bp_shard shard,
		     struct bp_error *err)
{
	size_t n = b->ndocs, dp = st->npipes, nbins = m * dp;
	int rc = -1;
	double *load = bp_calloc(nbins, sizeof(double), err);
	int64_t *zero = bp_calloc(nbins, sizeof(int64_t), err);
	int *group_of = bp_calloc(nbins, sizeof(int), err);
	size_t *border = bp_calloc(nbins, sizeof(size_t), err);
	size_t *order = bp_calloc(n ? n : 1, sizeof(size_t), err);
	if (!load || !zero || !group_of || !border || !order)
		goto out;
	/* bin costs summed in packing order, as the greedy summed them */
	bp_order_by_cost(cost, len, n, order);
	for (size_t q = 0; q < n; q++)
		load[bin_of[order[q]]] += cost[order[q]];
	if (bp_deal_bins(load, nbins, dp, m, group_of, err) < 0)
		goto out;
	bp_order_by_cost(load, zero, nbins, border); /* ties by bin index */
	rc = bp_emit_bins(b->docs, n, order, bin_of, nbins, border, group_of, st->pipes, dp,
			  shard, err);
out:
	free(load);
	free(zero);
	free(group_of);
	free(border);
	free(order);
	return rc;
}
