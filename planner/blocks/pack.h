/* pack.h: bin-packing building blocks shared by the methods (pack.c; the length-only packers
 * in pack_len.c, Karmarkar-Karp in kk_part.c). */
#ifndef BP_PACK_H
#define BP_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"
#include "plan.h"

/* Orders item indices by cost descending, then length descending, then index: the
 * deterministic "largest first" order of LPT-style heuristics. order gets n indices. A radix
 * sort on the keys' bits from a few hundred items (O(n)), qsort below that or with a NaN
 * cost. */
void bp_order_by_cost(const double *cost, const int64_t *len, size_t n, size_t *order);

/* Greedy longest-processing-time packing with a capacity (Graham's LPT, with the token cap of
 * WLB-LLM Sec. 3.2's fixed-length packing): items in bp_order_by_cost order, each into the
 * bin with the least load among those with room for it (ties: lowest bin). bin_of gets each
 * item's bin; load and fill (nbins each) the bins' cost and tokens. Returns 0 when every item
 * fit, 1 when one did not (the caller adds bins), -1 on allocation failure. O(n log n) plus
 * O(n log nbins) (bp_pack_lpt_ex). */
int bp_pack_lpt(const double *cost, const int64_t *len, size_t n, size_t nbins, int64_t cap,
		int *bin_of, double *load, int64_t *fill, struct bp_error *err);

/* bp_pack_lpt's rule with more bins and a count limit (SparseBalance's batching, plain's
 * balanced deal, bp_deal_bins): items in bp_order_by_cost order (order gets it, n entries),
 * each into the bin of least load among the open bins with room for it (fill + len <= cap
 * and, when per > 0, fewer than per items; ties: lowest bin); when none has room, bin nbins,
 * nbins + 1, ... opens for it while fewer than maxbins are open (maxbins <= nbins: none
 * opens). With sorted set, order already holds that order (a caller packing the same items
 * again). load (and fill unless NULL) get max(nbins, maxbins) entries, *nused the bins open
 * at the end. Many bins are kept in a treap ordered by (load, bin), so an item costs
 * O(log bins) rather than a scan of the bins. Returns 0, 1 when an item fit no bin with all
 * bins open (bin_of, load and fill then partial), -1 on error. */
struct bp_lpt_opts {
	size_t nbins, maxbins;
	int64_t cap;
	size_t per;
	int sorted;
};

int bp_pack_lpt_ex(const struct bp_lpt_opts *o, const double *cost, const int64_t *len,
		   size_t n, size_t *order, int *bin_of, double *load, int64_t *fill,
		   size_t *nused, struct bp_error *err);

/* The micro-batch count of a packer that adds micro-batches until its packing fits (fixed's
 * greedy, multipack, kk): try_m(m, arg, err) packs into m per pipeline and returns 0 (it
 * fit), 1 (it did not) or -1 (error). From m = first, then m + 1, ... for BP_GROW_STEPS
 * tries: the smallest count that fits from first. Past that (data whose documents are
 * mostly near the cap, where a greedy may need hundreds more), m grows by an eighth,
 * doubling the step, until one fits, then bisects between it and the last that did not,
 * so the tries stay about BP_GROW_STEPS + 2 log2(the gap); a packer's fit need not be
 * monotone in m, so the count found there is one that fits, near the smallest. *m gets
 * it; try_m's outputs are its call for *m (called again if the bisection ended on a
 * miss). A packer that fits every item alone in a bin of its own fits by m = n; past
 * that, an error. Returns 0 or -1. */
typedef int (*bp_try_m_fn)(size_t m, void *arg, struct bp_error *err);
#define BP_GROW_STEPS 8

int bp_grow_m(size_t first, size_t n, bp_try_m_fn try_m, void *arg, size_t *m,
	      struct bp_error *err);

/* The first count bp_grow_m should try: m = ceil(tokens / (dp * per_mb)), at least 1, and
 * at least the bins no packing can do without: items longer than cap / 2 never share a bin
 * of cap tokens, so dp * m >= their number (a count below it fails for every packer, so
 * starting there gives the same packing as counting up from the first). */
size_t bp_first_m(int64_t tokens, int dp, int64_t per_mb, const int64_t *len, size_t n,
		  int64_t cap);

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

/* ---- Practical baselines (issue 3): length-only packers. Items are documents given by
 * their token lengths, in draw order, so the item index breaks ties as the doc id would. ---- */

/* Orders item indices by length descending, ties by index ascending (a stable sort): the
 * "decreasing" order of FFD/BFD/LPT. Chosen by size so the cost follows n, not the longest
 * length: a counting sort, O(n + max len), when the longest item is at most 2n + 64 tokens;
 * otherwise a radix sort on digits of about log2 n bits, O(n log(max len) / log n), for
 * lengths below 2^32; otherwise qsort. Returns 0 or -1 (allocation). */
int bp_order_by_len(const int64_t *len, size_t n, size_t *order, struct bp_error *err);

/* A bound on the bins any any-fit packing (FFD, BFD: a bin opens only when the item fits
 * no open bin) of n items of tokens tokens in all opens under cap: at most one bin ends at
 * most half full, so fewer than 2 * tokens / cap + 1; and at most n. pack_len.c. */
size_t bp_anyfit_bins_bound(size_t n, int64_t tokens, int64_t cap);

/* First-fit-decreasing to capacity cap (NeMo's sequence packing; Johnson 1973): items in
 * bp_order_by_len order, each into the lowest-numbered bin with room, a new bin when none has.
 * A max segment tree over the bins' free room, with bp_anyfit_bins_bound leaves, finds that
 * bin in O(log bins). Every len must be in [1, cap] (checked: -1). bin_of gets each item's
 * bin; *nbins the bins used, numbered in the order they were opened. O(n log n) plus the
 * sort. Returns 0 or -1. pack_len.c. */
int bp_pack_ffd(const int64_t *len, size_t n, int64_t cap, int *bin_of, size_t *nbins,
		struct bp_error *err);

/* Best-fit-decreasing to capacity cap (TRL's packing): items in bp_order_by_len order, each
 * into the open bin with the least room that still fits it, a new bin when none fits. Bins of
 * equal room are taken first-come (the one that reached that room first, TRL's queue per
 * room). The structure is chosen by size (a scan over few bins, TRL's tree over room values
 * when min(cap, sum of len) is within a few times n, a treap over the bins otherwise), so
 * time and memory follow n, not cap. Same contract as bp_pack_ffd. pack_len.c. */
int bp_pack_bfd(const int64_t *len, size_t n, int64_t cap, int *bin_of, size_t *nbins,
		struct bp_error *err);

/* Token-balanced LPT over k bins with a capacity (multipack sampler; Graham 1969): items in
 * bp_order_by_len order, each into the bin with the fewest tokens (ties: lowest bin), which
 * is also the bin with the most room. Returns 0 when all fit (then the bins' token loads are
 * within the longest item of each other, Graham's invariant), 1 when an item did not fit
 * (the caller adds bins), -1 on error. fill gets k token loads. pack_len.c. */
int bp_pack_lpt_tokens(const int64_t *len, size_t n, size_t k, int64_t cap, int *bin_of,
		       int64_t *fill, struct bp_error *err);

/* The length-only workload proxy kk balances (verl's calculate_workload, with the constant
 * derived from the model instead of fixed for a 7B model): a document of s tokens costs
 * 2*P*s linear-layer FLOPs per layer (P = bp_model_layer_params) and 2*h*s^2 causal
 * attention FLOPs (QK^T and PV, half the square); divided by 2h that is s^2 + coef*s with
 * coef = P / h. bp_kk_coef returns coef (>= 1); the proxy is exact in int64 for s <= 2^24.
 * kk_part.c. */
int64_t bp_kk_coef(const struct bp_model *m);
int64_t bp_kk_proxy(int64_t len, int64_t coef);

/* Karmarkar-Karp largest differencing method for k-way balanced partition (Karmarkar & Karp
 * 1982; the k-way form of verl's seqlen balancing): every item starts as a k-tuple with
 * itself in one subset; the two tuples of largest spread (max - min subset sum; ties: the
 * older tuple) are merged, the heaviest subset of one with the lightest of the other, until
 * one tuple remains. Then the token cap verl lacks: while a bin holds more than cap tokens,
 * one of its items moves (the shortest that ends the overflow, else the longest that fits)
 * to the bin of least workload that has room. Returns 0, 1 when the cap cannot be met with k
 * bins (the caller adds bins), -1 on error. bin_of gets each item's bin (0..k-1), load and
 * fill (k each) the bins' workload and tokens. Items must be within cap. kk_part.c. */
int bp_pack_kk(const int64_t *w, const int64_t *len, size_t n, size_t k, int64_t cap,
	       int *bin_of, int64_t *load, int64_t *fill, struct bp_error *err);

/* Copies the batch's document lengths into len (ndocs entries). BP_INFEASIBLE naming the
 * document when one is longer than cap (the sampler's cap rule should have prevented it). */
int bp_batch_lens(const struct bp_batch *b, int64_t cap, int64_t *len, struct bp_error *err);

/* A length-only packer with bp_pack_ffd's contract. */
typedef int (*bp_packer_fn)(const int64_t *len, size_t n, int64_t cap, int *bin_of,
			    size_t *nbins, struct bp_error *err);

/* One step of a pack-to-length method (ffd, bfd): packs the batch with packer under cap and
 * deals the bins round-robin to st's pipelines in the order they were opened, each bin's
 * documents longest first. Returns 0, -1 or BP_INFEASIBLE (a document over cap). */
int bp_pack_step_rr(bp_packer_fn packer, const struct bp_batch *b, struct bp_step *st,
		    int64_t cap, enum bp_shard shard, struct bp_error *err);

/* The fixed-length greedy of WLB-LLM Sec. 3.2 that fixed, fixed-ilp and wlb-ilp share: each
 * document's cost w = bp_cost_doc (cost and len get n entries), m = ceil(tokens / (dp *
 * window)) micro-batches per pipeline, and LPT with capacity cap into dp*m bins, one more
 * micro-batch per pipeline each time a document finds no room. bin_of gets the packing,
 * *load (caller frees) the dp*m bin costs, *m the count. Returns 0, -1, or BP_INFEASIBLE
 * when a document is longer than cap. */
int bp_pack_fixed_greedy(const struct bp_costmodel *cm, const struct bp_batch *b, int dp,
			 int64_t window, int64_t cap, double *cost, int64_t *len, int *bin_of,
			 double **load, size_t *m, struct bp_error *err);

/* Emits a cost-balanced packing as fixed.c does: the dp*m bins dealt so pipelines' total
 * costs balance (bp_deal_bins, m each), every pipeline's bins in decreasing cost, a bin's
 * documents in bp_order_by_cost order. Returns 0 or -1. */
int bp_emit_balanced(const struct bp_batch *b, const double *cost, const int64_t *len,
		     const int *bin_of, size_t m, struct bp_step *st, enum bp_shard shard,
		     struct bp_error *err);

/* Emits a step's bins as micro-batches: bins[0..nbins) go, in the order border gives (NULL:
 * bin order), to pipeline group_of[bin] (NULL: the k-th bin emitted goes to pipeline k mod
 * npipes, round-robin). A bin's spans are its items, whole documents, in the order order
 * lists them (NULL: index order). Empty bins are skipped. Returns 0 or -1. */
int bp_emit_bins(const struct bp_doc *docs, size_t n, const size_t *order, const int *bin_of,
		 size_t nbins, const size_t *border, const int *group_of, struct bp_pipe *pipes,
		 size_t npipes, enum bp_shard shard, struct bp_error *err);

#endif
