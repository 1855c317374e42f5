/* pack.h: bin-packing building blocks shared by the methods. */
#ifndef BP_PACK_H
#define BP_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"

/* Orders item indices by cost descending, then length descending, then index: the
 * deterministic "largest first" order of LPT-style heuristics. order gets n indices. */
void bp_order_by_cost(const double *cost, const int64_t *len, size_t n, size_t *order);

/* Greedy longest-processing-time packing with a capacity (Graham's LPT, with the token cap of
 * WLB-LLM Sec. 3.2's fixed-length packing): items in bp_order_by_cost order, each into the
 * bin with the least load among those with room for it (ties: lowest bin). bin_of gets each
 * item's bin; load and fill (nbins each) the bins' cost and tokens. Returns 0 when every item
 * fit, 1 when one did not (the caller adds bins), -1 on allocation failure. */
int bp_pack_lpt(const double *cost, const int64_t *len, size_t n, size_t nbins, int64_t cap,
		int *bin_of, double *load, int64_t *fill, struct bp_error *err);

/* Deals nbins = groups * per bins to groups so each group gets exactly per bins and the
 * groups' load sums are balanced (LPT over groups). group_of gets each bin's group; within a
 * group, bins keep the order of decreasing load. */
int bp_deal_bins(const double *load, size_t nbins, size_t groups, size_t per, int *group_of,
		 struct bp_error *err);

/* A certified lower bound on min over packings of the largest bin cost, for n items with
 * additive costs into m bins (P||Cmax): the largest of max_i c_i, sum_i c_i / m and, when
 * n > m, c_(m) + c_(m+1) (two of the m+1 largest items share a bin). Caps only make the
 * optimum larger, so the bound holds with token caps too. 0 when n = 0. */
double bp_pack_bound(const double *cost, size_t n, size_t m);

#endif
