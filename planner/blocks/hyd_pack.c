/* hyd_pack.c: Hydraulis's packing within one pipeline (Sec. 6.1, Eq. 1) over the pruned
 * range of micro-batch counts (App. C). Called by methods/hydraulis.c for every pipeline of
 * every candidate strategy; the largest result over a strategy's pipelines is its estimated
 * propagation time (Sec. 6, step 3 of Fig. 6).
 *
 * For a fixed V, Eq. 1's factor (PP - 1 + V) is constant, so Eq. 1 is min-max partitioning
 * with a token cap (MaxLen of the pipeline's scheme): LPT with the cap (bp_pack_lpt), then,
 * when asked, WLB-LLM's packing ILP (bp_ilp_pack_solve) warm-started from it and bounded by
 * the deterministic budget. Invariants: every sequence in exactly one micro-batch, none over
 * the cap, none empty (V <= n); V* never leaves a sequence unplaced. */
#include "hyd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ilp_pack.h"
#include "pack.h"

/* LPT with a cap for v micro-batches, blocks/pack.c's (the costliest sequence first into the
 * least-loaded micro-batch with room, the first on ties) with the order by cost given: it
 * is the same for every V, so it is sorted once (bp_order_by_cost). Returns 0, 1 when a
 * sequence finds no micro-batch with room (bin_of, load and fill then partial), -1 on
 * error. */
static int lpt_ordered(const double *w, const int64_t *len, size_t *order, size_t n, size_t v,
		       int64_t cap, int *bin_of, double *load, int64_t *fill, struct bp_error *err)
{
	struct bp_lpt_opts o = {.nbins = v, .maxbins = v, .cap = cap, .sorted = 1};
	size_t used;
	return bp_pack_lpt_ex(&o, w, len, n, order, bin_of, load, fill, &used, err);
}

int bp_hyd_pack(const struct bp_hyd_pack_in *in, int *bin_of, struct bp_hyd_pack_out *out,
		struct bp_error *err)
{
	size_t n = in->n;
	int rc = -1;
	memset(out, 0, sizeof(*out));
	if (!n)
		return 0;
	int64_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		if (in->len[i] > in->cap)
			return bp_infeasiblef(err, "a sequence of %lld tokens is longer than the "
					      "pipeline's MaxLen %lld", (long long)in->len[i],
					      (long long)in->cap);
		sum += in->len[i];
	}
	/* App. C: V in [max(sum / MaxLen, 1), min(sum / UtilLen, U)]. */
	int64_t vmin = (sum + in->cap - 1) / in->cap, vmax;
	if (vmin < 1)
		vmin = 1;
	vmax = in->util_len > 0 ? sum / in->util_len : (int64_t)n;
	if (vmax > (int64_t)n)
		vmax = (int64_t)n;
	if (vmax < vmin)
		vmax = vmin;
	if (in->v_tries > 0 && vmax > vmin + in->v_tries - 1)
		vmax = vmin + in->v_tries - 1;
	out->v_min = (int)vmin;
	out->v_max = (int)vmax;
	int *bins = bp_calloc(n, sizeof(int), err), *ib = bp_calloc(n, sizeof(int), err);
	double *load = bp_calloc(n, sizeof(double), err);
	int64_t *fill = bp_calloc(n, sizeof(int64_t), err);
	size_t *order = bp_calloc(n, sizeof(size_t), err);
	if (!bins || !ib || !load || !fill || !order)
		goto out;
	bp_order_by_cost(in->w, in->len, n, order);
	double best = INFINITY, wmax = 0.0, wsum = 0.0;
	for (size_t i = 0; i < n; i++) {
		wsum += in->w[i];
		if (in->w[i] > wmax)
			wmax = in->w[i];
	}
	for (int64_t v = vmin; v <= (int64_t)n; v++) {
		if (v > vmax && isfinite(best))
			break; /* past the range only until one V packs */
		/* P4: Eq. 1 at V is at least (max(w_max, sum w / V) + c_mb)(PP - 1 + V); once that
		 * reaches the best it does for every larger V (w_max's term grows with V), and
		 * a V that cannot beat the best strictly never changes the choice. */
		double lbv = ((wsum / (double)v > wmax ? wsum / (double)v : wmax) + in->c_mb) *
			     (double)(in->pp - 1 + v);
		if (isfinite(best) && lbv >= best) {
			if (wmax * (double)v >= wsum)
				break;
			continue;
		}
		int r = lpt_ordered(in->w, in->len, order, n, (size_t)v, in->cap, bins, load, fill,
				    err);
		if (r < 0)
			goto out;
		if (r)
			continue; /* the greedy left a sequence out at this V */
		double z = 0.0;
		for (int64_t k = 0; k < v; k++)
			if (load[k] > z)
				z = load[k];
		if (in->ilp && in->ilp->max_vars > 0 && (double)n * (double)v <=
		    (double)in->ilp->max_vars && v > 1 && (size_t)v < n) {
			struct bp_ilp_pack ip = {in->w, in->len, n, (size_t)v, in->cap, bins, 1, 1, 1};
			struct bp_ilp_pack_result pr;
			if (bp_ilp_pack_solve(&ip, in->ilp, ib, &pr, err) < 0)
				goto out;
			out->ilp_solves++;
			if (pr.objective < z) {
				out->ilp_better++;
				z = pr.objective;
				memcpy(bins, ib, n * sizeof(int));
			}
		}
		double obj = (z + in->c_mb) * (double)(in->pp - 1 + v);
		/* strict: the smaller V on ties (App. C's range scanned upward, as the public
		 * code does) */
		if (obj < best) {
			best = obj;
			out->v = (int)v;
			out->z = z;
			out->obj = obj;
			memcpy(bin_of, bins, n * sizeof(int));
		}
	}
	if (!isfinite(best)) {
		bp_errorf(err, "internal: no micro-batch count packs %zu sequences", n);
		goto out;
	}
	/* LPT leaves no micro-batch empty unless sequences cost nothing (a fit with c < 0 at
	 * tiny lengths); then the empty ones are dropped and V counts the rest. */
	for (size_t i = 0; i < n; i++)
		ib[i] = -1;
	int used = 0;
	for (size_t i = 0; i < n; i++) {
		if (ib[bin_of[i]] < 0)
			ib[bin_of[i]] = used++;
		bin_of[i] = ib[bin_of[i]];
	}
	if (used != out->v) {
		out->v = used;
		out->obj = (out->z + in->c_mb) * (double)(in->pp - 1 + used);
	}
	rc = 0;
out:
	free(bins);
	free(ib);
	free(load);
	free(fill);
	free(order);
	return rc;
}
