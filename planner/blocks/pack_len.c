/* pack_len.c: the length-only packers of the practical baselines (issue 3; pack.h): first-fit
 * decreasing (bp_pack_ffd), best-fit decreasing (bp_pack_bfd), token-balanced LPT
 * (bp_pack_lpt_tokens) and the any-fit bound on the bins (bp_anyfit_bins_bound) the first two
 * size their structures by. Called by methods/ffd.c and methods/bfd.c (through
 * bp_pack_step_rr), methods/multipack.c, methods/flexsp.c (FFD micro-batches) and
 * tools/bench/bench_pack*.c. Items are documents given by their token lengths in draw order,
 * ties broken by index, so a packing depends only on the inputs.
 *
 * FFD (Johnson 1973; NeMo's "first_fit_decreasing", methods/ffd.c):
 * The first fit is found in O(log B) with a max segment tree over the bins' free room; bins
 * not yet opened are leaves with full room, so the leftmost leaf with room >= len is the
 * first fit, opening a new bin when no open bin fits. The tree has B leaves, B a bound on
 * the bins FFD can open: any-fit packing leaves at most one bin at most half full (a later
 * bin's first item would have fitted there), so bins < 2 * tokens / cap + 1, and at most n.
 * So a step of 100 documents into 128K-token micro-batches builds a tree of about 16
 * leaves, and the cost follows the batch, not the context length; up to FFD_SCAN_BINS
 * bins a scan over the open bins is faster still and finds the same bin. Written from the
 * algorithm's description, not from NeMo's code.
 *
 * BFD (Johnson 1973; TRL's "bfd", methods/bfd.c):
 * Best fit is the open bin of the largest fill f = L - room with f <= L - len, ties by the
 * earliest to reach that fill. The structure that finds it is chosen by the size of the
 * step, never changing which bin is found, so the cost follows the batch and not the
 * context length L. With B = bp_anyfit_bins_bound (BFD is any-fit, so B >= the bins used):
 *   - B <= BFD_SCAN_BINS: a scan over the open bins, O(n B); a 7B-128K step (about 100
 *     documents of 512K tokens under L = 128K) has B <= 9.
 *   - F = min(L, T) <= BFD_FILL_TREE_PER_DOC * n (T the tokens): TRL's layout, an "any" tree
 *     over the fill values [0, F] with a first-come queue of bins per value, so best fit is
 *     the largest non-empty f <= L - len, O(F + n log F); 1M documents take this path.
 *   - otherwise: a treap over the open bins keyed by (fill ascending, time reached
 *     descending), so the predecessor of L - len is the best fit, O(n log B) expected.
 * A bin that is full (room 0) leaves every structure. Written from the description, not
 * from TRL.
 *
 * Token LPT (Graham 1969; the multipack sampler, methods/multipack.c): each document, longest
 * first, into the bin with the fewest tokens, which with a token cap is also the bin with the
 * most room. Written from the description, not from the sampler's code. */
#include "pack.h"

#include <stdlib.h>

#include "heap.h"

/* Up to this many bins a scan finds the first fit faster than the tree; speed only. */
#define FFD_SCAN_BINS 32

/* B: a bound on the bins any any-fit packing of n items, tokens in all, opens under cap. */
size_t bp_anyfit_bins_bound(size_t n, int64_t tokens, int64_t cap)
{
	if (tokens > INT64_MAX / 2)
		return n;
	int64_t b = 2 * tokens / cap + 1;
	return (uint64_t)b < (uint64_t)n ? (size_t)b : n;
}

/* FFD's and BFD's items: at most INT32_MAX, each of 1 .. cap tokens; *tokens their sum
 * (saturating). 0 or -1 naming the first bad item. */
static int any_fit_items(const int64_t *len, size_t n, int64_t cap, int64_t *tokens,
			 struct bp_error *err)
{
	if (n > (size_t)INT32_MAX)
		return bp_errorf(err, "%zu documents in one step are too many to pack", n);
	for (size_t i = 0; i < n; i++) {
		if (len[i] < 1 || len[i] > cap)
			return bp_errorf(err, "item %zu has %lld tokens, outside [1, %lld]", i,
					 (long long)len[i], (long long)cap);
		*tokens = *tokens > INT64_MAX - len[i] ? INT64_MAX : *tokens + len[i];
	}
	return 0;
}

int bp_pack_ffd(const int64_t *len, size_t n, int64_t cap, int *bin_of, size_t *nbins,
		struct bp_error *err)
{
	size_t *order = NULL;
	int64_t *room = NULL; /* segment tree: room[1] root, leaves room[P..2P) */
	size_t P, used = 0, B;
	int64_t tokens = 0;
	int rc = -1;
	*nbins = 0;
	if (!n)
		return 0;
	if (any_fit_items(len, n, cap, &tokens, err) < 0)
		return -1;
	B = bp_anyfit_bins_bound(n, tokens, cap);
	if (B <= FFD_SCAN_BINS)
		P = 0; /* no tree: room[0..B) are the bins */
	else
		for (P = 1; P < B; P *= 2)
			;
	order = bp_calloc(n, sizeof(size_t), err);
	room = bp_calloc(P ? 2 * P : B, sizeof(int64_t), err);
	if (!order || !room || bp_order_by_len(len, n, order, err) < 0)
		goto out;
	if (!P) { /* few bins: the first fit by a scan over the open ones, O(n B) */
		for (size_t q = 0; q < n; q++) {
			size_t i = order[q], b = 0;
			while (b < used && room[b] < len[i])
				b++;
			if (b == used) {
				if (used == B) {
					bp_errorf(err, "internal: ffd ran out of its %zu bins", B);
					goto out;
				}
				room[used++] = cap;
			}
			room[b] -= len[i];
			bin_of[i] = (int)b;
		}
		*nbins = used;
		rc = 0;
		goto out;
	}
	for (size_t v = P; v < 2 * P; v++)
		room[v] = v - P < B ? cap : -1; /* leaves past B never open */
	for (size_t v = P - 1; v >= 1; v--)
		room[v] = room[2 * v] >= room[2 * v + 1] ? room[2 * v] : room[2 * v + 1];
	for (size_t q = 0; q < n; q++) {
		size_t i = order[q], v = 1;
		int64_t l = len[i];
		/* room[1] >= l: fewer than B bins are open whenever one more must open. */
		if (room[1] < l) {
			bp_errorf(err, "internal: ffd ran out of its %zu bins", B);
			goto out;
		}
		while (v < P)
			v = room[2 * v] >= l ? 2 * v : 2 * v + 1;
		size_t b = v - P;
		bin_of[i] = (int)b;
		if (b + 1 > used)
			used = b + 1;
		room[v] -= l;
		for (v /= 2; v >= 1; v /= 2) {
			int64_t m = room[2 * v] >= room[2 * v + 1] ? room[2 * v] : room[2 * v + 1];
			if (room[v] == m)
				break; /* ancestors unchanged */
			room[v] = m;
		}
	}
	*nbins = used;
	rc = 0;
out:
	free(order);
	free(room);
	return rc;
}

/* The largest position <= x whose leaf is set in the "any" tree t (leaves t[P..2P)), or -1. */
static int64_t seg_last_le(const unsigned char *t, size_t P, size_t x)
{
	size_t v = x + P;
	if (t[v])
		return (int64_t)x;
	for (; v > 1; v /= 2)
		if ((v & 1) && t[v - 1]) {
			v--;
			while (v < P)
				v = t[2 * v + 1] ? 2 * v + 1 : 2 * v;
			return (int64_t)(v - P);
		}
	return -1;
}

static void seg_set(unsigned char *t, size_t P, size_t x, unsigned char on)
{
	size_t v = x + P;
	t[v] = on;
	for (v /= 2; v >= 1; v /= 2) {
		unsigned char a = t[2 * v] | t[2 * v + 1];
		if (t[v] == a)
			break;
		t[v] = a;
	}
}

/* Which structure finds the best fit (see the top of the file); speed only. */
#define BFD_SCAN_BINS 48
#define BFD_FILL_TREE_PER_DOC 8

/* Per bin: fill, and stamp, the item position q at which the bin reached that fill. */
struct bins {
	int64_t *fill;
	size_t *stamp;
};

/* Best fit by a scan: the largest fill <= x, ties by the smaller stamp; -1 when none. */
static int scan_best(const struct bins *bs, size_t used, int64_t x)
{
	int best = -1;
	for (size_t b = 0; b < used; b++)
		if (bs->fill[b] <= x && (best < 0 || bs->fill[b] > bs->fill[best] ||
					  (bs->fill[b] == bs->fill[best] &&
					   bs->stamp[b] < bs->stamp[best])))
			best = (int)b;
	return best;
}

/* Treap over the open bins (nodes are bin numbers, -1 is none). Key order: fill ascending,
 * then stamp descending, so among bins of one fill the earliest is the largest key. The
 * priorities are a fixed hash of the bin number: the shape, never the answer, depends on
 * them. */
struct treap {
	const struct bins *bs;
	int *left, *right;
	uint32_t *prio;
	int root;
};

static int key_less(const struct bins *bs, int a, int b)
{
	if (bs->fill[a] != bs->fill[b])
		return bs->fill[a] < bs->fill[b];
	return bs->stamp[a] > bs->stamp[b];
}

/* Splits t into the keys less than node k's (*l) and the rest (*r). */
static void treap_split(struct treap *tr, int t, int k, int *l, int *r)
{
	while (t >= 0) {
		if (key_less(tr->bs, t, k)) {
			*l = t;
			l = &tr->right[t];
			t = tr->right[t];
		} else {
			*r = t;
			r = &tr->left[t];
			t = tr->left[t];
		}
	}
	*l = *r = -1;
}

/* Merges a and b, every key of a less than every key of b. */
static int treap_merge(struct treap *tr, int a, int b)
{
	int root = -1, *at = &root;
	while (a >= 0 && b >= 0) {
		if (tr->prio[a] > tr->prio[b]) {
			*at = a;
			at = &tr->right[a];
			a = tr->right[a];
		} else {
			*at = b;
			at = &tr->left[b];
			b = tr->left[b];
		}
	}
	*at = a >= 0 ? a : b;
	return root;
}

static void treap_insert(struct treap *tr, int b)
{
	int *at = &tr->root;
	while (*at >= 0 && tr->prio[*at] >= tr->prio[b])
		at = key_less(tr->bs, b, *at) ? &tr->left[*at] : &tr->right[*at];
	treap_split(tr, *at, b, &tr->left[b], &tr->right[b]);
	*at = b;
}

static void treap_erase(struct treap *tr, int b)
{
	int *at = &tr->root;
	while (*at != b)
		at = key_less(tr->bs, b, *at) ? &tr->left[*at] : &tr->right[*at];
	*at = treap_merge(tr, tr->left[b], tr->right[b]);
}

/* The largest key whose fill is <= x, i.e. the best fit; -1 when none. */
static int treap_best(const struct treap *tr, int64_t x)
{
	int t = tr->root, best = -1;
	while (t >= 0) {
		if (tr->bs->fill[t] <= x) {
			best = t;
			t = tr->right[t];
		} else {
			t = tr->left[t];
		}
	}
	return best;
}

/* The scan and treap paths: bins numbered as they open, full bins dropped from the treap. */
static int bfd_by_bins(const int64_t *len, size_t n, int64_t cap, const size_t *order,
		       size_t B, int use_treap, int *bin_of, size_t *nbins, struct bp_error *err)
{
	struct bins bs = {bp_calloc(B, sizeof(int64_t), err), bp_calloc(B, sizeof(size_t), err)};
	struct treap tr = {&bs, NULL, NULL, NULL, -1};
	size_t used = 0;
	int rc = -1;
	if (!bs.fill || !bs.stamp)
		goto out;
	if (use_treap) {
		tr.left = bp_calloc(B, sizeof(int), err);
		tr.right = bp_calloc(B, sizeof(int), err);
		tr.prio = bp_calloc(B, sizeof(uint32_t), err);
		if (!tr.left || !tr.right || !tr.prio)
			goto out;
		for (size_t b = 0; b < B; b++) { /* a fixed mix of the bin number */
			uint64_t z = (uint64_t)b * 0x9e3779b97f4a7c15u;
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
			tr.prio[b] = (uint32_t)((z ^ (z >> 27)) >> 32);
		}
	}
	for (size_t q = 0; q < n; q++) {
		size_t i = order[q];
		int64_t l = len[i];
		int b = use_treap ? treap_best(&tr, cap - l) : scan_best(&bs, used, cap - l);
		if (b >= 0) {
			if (use_treap)
				treap_erase(&tr, b);
		} else {
			if (used == B) {
				bp_errorf(err, "internal: bfd ran out of its %zu bins", B);
				goto out;
			}
			b = (int)used++;
		}
		bin_of[i] = b;
		bs.fill[b] += l;
		bs.stamp[b] = q;
		if (use_treap && bs.fill[b] < cap) {
			tr.left[b] = tr.right[b] = -1;
			treap_insert(&tr, b);
		}
	}
	*nbins = used;
	rc = 0;
out:
	free(bs.fill);
	free(bs.stamp);
	free(tr.left);
	free(tr.right);
	free(tr.prio);
	return rc;
}

/* TRL's layout: an "any" tree over fill values [0, F] and a first-come queue per value. */
static int bfd_by_fill(const int64_t *len, size_t n, int64_t cap, const size_t *order,
		       int64_t F, int *bin_of, size_t *nbins, struct bp_error *err)
{
	unsigned char *tree = NULL;
	int *head = NULL, *tail = NULL; /* per fill value: first-come queue of bins */
	int *next = NULL;               /* per bin: the next bin in its queue, -1 at the end */
	int64_t *fill = NULL;           /* per bin */
	size_t P = 1, used = 0;
	int rc = -1;
	while ((int64_t)P < F + 1)
		P *= 2;
	tree = bp_calloc(2 * P, 1, err);
	head = bp_calloc((size_t)F + 1, sizeof(int), err);
	tail = bp_calloc((size_t)F + 1, sizeof(int), err);
	next = bp_calloc(n, sizeof(int), err);
	fill = bp_calloc(n, sizeof(int64_t), err);
	if (!tree || !head || !tail || !next || !fill)
		goto out;
	for (int64_t f = 0; f <= F; f++)
		head[f] = tail[f] = -1;
	for (size_t q = 0; q < n; q++) {
		size_t i = order[q];
		int64_t l = len[i], x = cap - l < F ? cap - l : F;
		int64_t f = x >= 1 ? seg_last_le(tree, P, (size_t)x) : -1;
		int b;
		if (f >= 1) { /* pop the first-come bin of fill f */
			b = head[f];
			head[f] = next[b];
			if (head[f] < 0) {
				tail[f] = -1;
				seg_set(tree, P, (size_t)f, 0);
			}
		} else {
			b = (int)used++;
		}
		bin_of[i] = b;
		fill[b] += l;
		if (fill[b] < cap) { /* queue it at its new fill; a full bin leaves */
			int64_t g = fill[b];
			next[b] = -1;
			if (tail[g] < 0) {
				head[g] = b;
				seg_set(tree, P, (size_t)g, 1);
			} else {
				next[tail[g]] = b;
			}
			tail[g] = b;
		}
	}
	*nbins = used;
	rc = 0;
out:
	free(tree);
	free(head);
	free(tail);
	free(next);
	free(fill);
	return rc;
}

int bp_pack_bfd(const int64_t *len, size_t n, int64_t cap, int *bin_of, size_t *nbins,
		struct bp_error *err)
{
	size_t *order = NULL, B;
	int64_t total = 0, F;
	int rc = -1;
	*nbins = 0;
	if (!n)
		return 0;
	if (any_fit_items(len, n, cap, &total, err) < 0)
		return -1;
	F = total < cap ? total : cap; /* every fill lies in [1, F] */
	B = bp_anyfit_bins_bound(n, total, cap);
	order = bp_calloc(n, sizeof(size_t), err);
	if (!order || bp_order_by_len(len, n, order, err) < 0)
		goto out;
	if (B <= BFD_SCAN_BINS)
		rc = bfd_by_bins(len, n, cap, order, B, 0, bin_of, nbins, err);
	else if ((uint64_t)F <= (uint64_t)BFD_FILL_TREE_PER_DOC * n)
		rc = bfd_by_fill(len, n, cap, order, F, bin_of, nbins, err);
	else
		rc = bfd_by_bins(len, n, cap, order, B, 1, bin_of, nbins, err);
out:
	free(order);
	return rc;
}

/* Heap order on bins: fewer tokens first, then lower index. */
static int bin_first(const void *keys, int a, int b)
{
	const int64_t *fill = keys;
	return fill[a] != fill[b] ? fill[a] < fill[b] : a < b;
}

int bp_pack_lpt_tokens(const int64_t *len, size_t n, size_t k, int64_t cap, int *bin_of,
		       int64_t *fill, struct bp_error *err)
{
	if (!k || k > (size_t)INT32_MAX)
		return bp_errorf(err, "internal: %zu bins", k);
	size_t *order = bp_calloc(n ? n : 1, sizeof(size_t), err);
	struct bp_heap heap = {0}; /* the bins by (fill, index) */
	int rc = -1;
	if (!order || bp_heap_reserve(&heap, k, 0, err) < 0 ||
	    bp_order_by_len(len, n, order, err) < 0)
		goto out;
	for (size_t b = 0; b < k; b++)
		fill[b] = 0;
	bp_heap_iota(&heap, k); /* all zero: index order is a valid heap */
	rc = 0;
	for (size_t q = 0; q < n; q++) {
		size_t i = order[q];
		int b = heap.h[0];
		if (fill[b] + len[i] > cap) {
			rc = 1;
			break;
		}
		bin_of[i] = b;
		fill[b] += len[i];
		bp_heap_down(&heap, 0, bin_first, fill);
	}
out:
	free(order);
	bp_heap_free(&heap);
	return rc;
}
