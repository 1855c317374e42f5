/* pack.c: LPT packing with a token cap and balanced dealing of bins to pipelines (pack.h).
 * Called by the fixed method now and by later packing methods. Invariant: results depend
 * only on the inputs (ties broken by index), never on memory addresses. */
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
