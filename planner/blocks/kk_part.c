/* kk_part.c: Karmarkar-Karp balanced partitioning with a token cap (bp_pack_kk, pack.h) and the
 * length-only workload proxy it balances (bp_kk_coef, bp_kk_proxy): the largest differencing
 * method of Karmarkar & Karp 1982, "The differencing method of set partitioning", in its k-way
 * form (verl's seqlen balancing), then a repair that moves documents out of bins over the
 * cap. Called by methods/kk.c per step, methods/sparsebalance.c and methods/flexsp.c
 * (bp_kk_coef).
 *
 * Cost (issue 24): a partial solution keeps only its non-empty subsets, so a merge touches
 * only the subsets that pair up (kk_merge), and the repair finds its bins in a treap: a run
 * is O(n log n) in the n documents (plus O(k log k) when a bin is over cap), not O(n k log k);
 * the partition and the moves are the ones of the sort-per-merge KK it replaced
 * (tests/unit/test_heap.c compares the two).
 * Written from the algorithm's description, not from verl's code. */
#include "pack.h"

#include <stdlib.h>

#include "heap.h"

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

/* The subsets of every partial solution, one node per subset named by its first item (its
 * head, which it keeps for life: a merge appends the other subset's items to it). Each
 * partial keeps its non-empty subsets in a pairing heap (Fredman, Sedgewick, Sleator &
 * Tarjan 1986, "The pairing heap: a new form of self-adjusting heap": melding two is one
 * comparison, taking the least out O(log n) amortised) in the reverse of the order KK sorts
 * them in, heaviest first and ties by the lower head, so its lightest subsets come out
 * first; the k - count empty ones are implicit (they sort after every non-empty one, as
 * head -1 did). */
struct kk_node {
	int64_t sum;
	int child;   /* its first child; -1: none; KK_GONE: merged into another subset */
	int sibling; /* the next child of its parent; -1: none */
	int tail;    /* the last of its items */
};

#define KK_GONE (-2)

struct kk_nodes {
	struct kk_node *v;
	int *next; /* the items' lists */
};

/* Node a before b in the min-heap: lighter, or as heavy with the higher head. */
static int node_first(const struct kk_nodes *t, int a, int b)
{
	return t->v[a].sum != t->v[b].sum ? t->v[a].sum < t->v[b].sum : a > b;
}

/* Melds two heaps (roots, or -1) into one: the later root becomes the first child of the
 * earlier. */
static int node_meld(struct kk_nodes *t, int a, int b)
{
	if (a < 0 || b < 0)
		return a < 0 ? b : a;
	if (node_first(t, b, a)) {
		int x = a;
		a = b;
		b = x;
	}
	t->v[b].sibling = t->v[a].child;
	t->v[a].child = b;
	return a;
}

/* The heap of a popped root's children c (a list through sibling), by the two passes:
 * melded in pairs left to right, then the pairs right to left into one. */
static int node_pairs(struct kk_nodes *t, int c)
{
	int acc = -1; /* the pairs, last first, through sibling */
	while (c >= 0) {
		int a = c, b = t->v[a].sibling;
		c = b >= 0 ? t->v[b].sibling : -1;
		t->v[a].sibling = -1;
		if (b >= 0)
			t->v[b].sibling = -1;
		a = node_meld(t, a, b);
		t->v[a].sibling = acc;
		acc = a;
	}
	int root = -1;
	while (acc >= 0) {
		int nx = t->v[acc].sibling;
		t->v[acc].sibling = -1;
		root = node_meld(t, root, acc);
		acc = nx;
	}
	return root;
}

/* A partial solution: its non-empty subsets (a heap of count nodes), the heaviest one's
 * workload, its spread (heaviest minus lightest of its k subsets) and its age. */
struct kk_part {
	int64_t spread, seq, max;
	int root, count;
};

/* The partials' max-heap order: larger spread first, then older. */
static int part_first(const void *keys, int a, int b)
{
	const struct kk_part *p = keys;
	return p[a].spread != p[b].spread ? p[a].spread > p[b].spread : p[a].seq < p[b].seq;
}

/* Takes the cnt lightest subsets of partial a out into x, lightest first. */
static void pop_lightest(struct kk_nodes *t, struct kk_part *p, int a, size_t cnt, int *x)
{
	for (size_t i = 0; i < cnt; i++) {
		int r = p[a].root;
		x[i] = r;
		p[a].root = node_pairs(t, t->v[r].child);
		t->v[r].child = -1;
	}
	p[a].count -= (int)cnt;
}

/* Karmarkar-Karp's merge of partial b into partial a (a came out of the heap first): with
 * both partials' k subsets heaviest first, a's j-th takes b's (k-1-j)-th. Where one of the
 * two is empty that leaves the other as it was, so only where both are non-empty do two
 * subsets become one: a's ov lightest non-empty ones with b's ov lightest, a's lightest
 * with the heaviest of b's ov (ov = count_a + count_b - k when over 0). The rest of the two
 * heaps are melded, so a merge costs O(1 + ov log n) amortised, not O(k log k); every pair
 * ends a subset, so all merges together pair at most n. */
static void kk_merge(struct kk_nodes *t, struct kk_part *p, int a, int b, size_t k,
		     int *xa, int *xb)
{
	size_t ca = (size_t)p[a].count, cb = (size_t)p[b].count;
	size_t ov = ca + cb > k ? ca + cb - k : 0;
	int64_t max = 0;
	if (ca > ov)
		max = p[a].max;
	if (cb > ov && p[b].max > max)
		max = p[b].max;
	pop_lightest(t, p, a, ov, xa);
	pop_lightest(t, p, b, ov, xb);
	int root = node_meld(t, p[a].root, p[b].root);
	for (size_t i = 0; i < ov; i++) {
		int x = xa[i], y = xb[ov - 1 - i];
		t->next[t->v[x].tail] = y;
		t->v[x].tail = t->v[y].tail;
		t->v[x].sum += t->v[y].sum;
		t->v[y].child = KK_GONE;
		if (t->v[x].sum > max)
			max = t->v[x].sum;
		root = node_meld(t, root, x);
	}
	p[a].root = root;
	p[a].count = (int)(ca + cb - ov);
	p[a].max = max;
	p[a].spread = (size_t)p[a].count == k ? max - t->v[root].sum : max;
}

/* A subset of the final partition, for KK's order: heaviest first, ties by the lower head. */
struct kk_bin {
	int64_t sum;
	int head;
};

static int cmp_bin(const void *x, const void *y)
{
	const struct kk_bin *a = x, *b = y;
	if (a->sum != b->sum)
		return a->sum < b->sum ? 1 : -1;
	return (a->head > b->head) - (a->head < b->head);
}

/* The bins for kk_repair in a treap (Seidel & Aragon 1996, "Randomized search trees")
 * keyed by tokens, ties by index, each node also holding the least-loaded bin of its
 * subtree (ties by the lower index): so the least-loaded bin with room for len more tokens
 * is one walk down (keys at most cap - len), and the bin with the most room its first node.
 * These are what the scans over bins 0..k-1 it replaced found. Priorities are a hash of the
 * index: the tree's shape never changes what a query returns. */
struct kk_treap {
	const int64_t *load, *fill;
	int *l, *r, *best; /* -1: none */
	int root;
};

static uint32_t treap_prio(int v)
{
	uint64_t x = (uint64_t)v * 0x9e3779b97f4a7c15ull;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(x >> 32);
}

/* Bin a's key before bin b's: fewer tokens, or as many and a lower index. */
static int treap_key_less(const struct kk_treap *t, int a, int b)
{
	return t->fill[a] != t->fill[b] ? t->fill[a] < t->fill[b] : a < b;
}

/* The lighter of two bins (or -1s), ties by the lower index. */
static int treap_lighter(const struct kk_treap *t, int a, int b)
{
	if (a < 0 || b < 0)
		return a < 0 ? b : a;
	if (t->load[a] != t->load[b])
		return t->load[a] < t->load[b] ? a : b;
	return a < b ? a : b;
}

static void treap_pull(struct kk_treap *t, int v)
{
	int b = treap_lighter(t, v, t->l[v] >= 0 ? t->best[t->l[v]] : -1);
	t->best[v] = treap_lighter(t, b, t->r[v] >= 0 ? t->best[t->r[v]] : -1);
}

/* Splits v's tree into keys before c's (or, with incl, up to c's) and the rest. */
static void treap_split(struct kk_treap *t, int v, int c, int incl, int *lo, int *hi)
{
	if (v < 0) {
		*lo = *hi = -1;
		return;
	}
	if (treap_key_less(t, v, c) || (incl && v == c)) {
		treap_split(t, t->r[v], c, incl, &t->r[v], hi);
		*lo = v;
	} else {
		treap_split(t, t->l[v], c, incl, lo, &t->l[v]);
		*hi = v;
	}
	treap_pull(t, v);
}

/* Joins two trees, every key of a before every key of b. */
static int treap_join(struct kk_treap *t, int a, int b)
{
	if (a < 0 || b < 0)
		return a < 0 ? b : a;
	if (treap_prio(a) > treap_prio(b)) {
		t->r[a] = treap_join(t, t->r[a], b);
		treap_pull(t, a);
		return a;
	}
	t->l[b] = treap_join(t, a, t->l[b]);
	treap_pull(t, b);
	return b;
}

static void treap_insert(struct kk_treap *t, int c)
{
	int lo, hi;
	t->l[c] = t->r[c] = -1;
	t->best[c] = c;
	treap_split(t, t->root, c, 0, &lo, &hi);
	t->root = treap_join(t, treap_join(t, lo, c), hi);
}

/* Takes bin c out (before its tokens or workload change). */
static void treap_erase(struct kk_treap *t, int c)
{
	int lo, mid, hi;
	treap_split(t, t->root, c, 0, &lo, &mid);
	treap_split(t, mid, c, 1, &mid, &hi);
	t->root = treap_join(t, lo, hi);
}

/* The least-loaded bin with at most x tokens, or -1. */
static int treap_lightest_upto(const struct kk_treap *t, int64_t x)
{
	int best = -1;
	for (int v = t->root; v >= 0;) {
		if (t->fill[v] <= x) {
			best = treap_lighter(t, best, t->l[v] >= 0 ? t->best[t->l[v]] : -1);
			best = treap_lighter(t, best, v);
			v = t->r[v];
		} else {
			v = t->l[v];
		}
	}
	return best;
}

/* The bin with the fewest tokens (k > 0). */
static int treap_first(const struct kk_treap *t)
{
	int v = t->root;
	while (t->l[v] >= 0)
		v = t->l[v];
	return v;
}

/* An item of a bin being repaired; i = -1 once it has moved out. */
struct kk_item {
	int64_t len;
	int i;
};

static int cmp_item(const void *x, const void *y)
{
	const struct kk_item *a = x, *b = y;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/* The first place of it[0..s) (by length, then index) with length at least x, and the
 * first place from p on whose item has not moved. */
static size_t first_len(const struct kk_item *it, size_t s, int64_t x)
{
	size_t lo = 0, hi = s;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (it[mid].len < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t still_from(const struct kk_item *it, size_t s, size_t p)
{
	while (p < s && it[p].i < 0)
		p++;
	return p;
}

/* The item to move out of a bin over by `over`, where the roomiest other bin has room:
 * the shortest that ends the overflow, else the longest that fits; ties by index. s when
 * none fits. */
static size_t repair_pick(const struct kk_item *it, size_t s, int64_t over, int64_t room)
{
	size_t p = still_from(it, s, first_len(it, s, over));
	if (p < s && it[p].len <= room)
		return p;
	size_t q = first_len(it, s, room + 1);
	while (q > 0 && it[q - 1].i < 0)
		q--;
	if (!q)
		return s;
	return still_from(it, s, first_len(it, s, it[q - 1].len));
}

/* Moves items out of bins over cap (see pack.h), bins in index order. Only bins over cap
 * to begin with are, since none takes an item beyond cap. Returns 0, 1 (no bin has room)
 * or -1. */
static int kk_repair(const int64_t *w, const int64_t *len, size_t n, size_t k, int64_t cap,
		     int *bin_of, int64_t *load, int64_t *fill, struct bp_error *err)
{
	struct kk_treap s = {.load = load, .fill = fill, .root = -1};
	struct kk_item *its = NULL;
	size_t *at = NULL;
	int rc = -1;
	size_t nover = 0;
	for (size_t b = 0; b < k; b++)
		nover += fill[b] > cap;
	if (!nover)
		return 0;
	its = bp_calloc(n ? n : 1, sizeof(*its), err);
	at = bp_calloc(k + 1, sizeof(*at), err);
	s.l = bp_calloc(k, sizeof(int), err);
	s.r = bp_calloc(k, sizeof(int), err);
	s.best = bp_calloc(k, sizeof(int), err);
	if (!its || !at || !s.l || !s.r || !s.best)
		goto out;
	/* the items of the bins over cap, bin by bin (a counting sort) */
	for (size_t i = 0; i < n; i++)
		if (fill[bin_of[i]] > cap)
			at[bin_of[i] + 1]++;
	for (size_t b = 0; b < k; b++)
		at[b + 1] += at[b];
	for (size_t i = 0; i < n; i++)
		if (fill[bin_of[i]] > cap)
			its[at[bin_of[i]]++] = (struct kk_item){len[i], (int)i};
	for (size_t b = k; b > 0; b--)
		at[b] = at[b - 1];
	at[0] = 0;
	for (size_t b = 0; b < k; b++)
		treap_insert(&s, (int)b);
	rc = 0;
	for (size_t b = 0; b < k && !rc; b++) {
		struct kk_item *it = its + at[b];
		size_t sz = at[b + 1] - at[b];
		if (fill[b] > cap)
			qsort(it, sz, sizeof(*it), cmp_item);
		while (fill[b] > cap) {
			/* b itself, over cap, never has the most room */
			int64_t room = cap - fill[treap_first(&s)];
			size_t p = repair_pick(it, sz, fill[b] - cap, room > 0 ? room : 0);
			int i = p < sz ? it[p].i : -1;
			int to = i >= 0 ? treap_lightest_upto(&s, cap - len[i]) : -1;
			if (to < 0) {
				rc = 1;
				break;
			}
			it[p].i = -1;
			bin_of[i] = to;
			treap_erase(&s, (int)b);
			treap_erase(&s, to);
			fill[b] -= len[i];
			load[b] -= w[i];
			fill[to] += len[i];
			load[to] += w[i];
			treap_insert(&s, (int)b);
			treap_insert(&s, to);
		}
	}
out:
	free(its);
	free(at);
	free(s.l);
	free(s.r);
	free(s.best);
	return rc;
}

/* Writes the last partial out: its subsets in KK's order are bins 0..count-1. */
static int kk_emit(const struct kk_nodes *t, const int64_t *w, const int64_t *len, size_t n,
		   int *bin_of, int64_t *load, int64_t *fill, struct bp_error *err)
{
	size_t nb = 0;
	struct kk_bin *bins = bp_calloc(n ? n : 1, sizeof(*bins), err);
	if (!bins)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (t->v[i].child != KK_GONE)
			bins[nb++] = (struct kk_bin){t->v[i].sum, (int)i};
	qsort(bins, nb, sizeof(*bins), cmp_bin);
	for (size_t j = 0; j < nb; j++)
		for (int i = bins[j].head; i >= 0; i = t->next[i]) {
			bin_of[i] = (int)j;
			load[j] += w[i];
			fill[j] += len[i];
		}
	free(bins);
	return 0;
}

int bp_pack_kk(const int64_t *w, const int64_t *len, size_t n, size_t k, int64_t cap,
	       int *bin_of, int64_t *load, int64_t *fill, struct bp_error *err)
{
	struct kk_nodes t = {0};
	struct kk_part *p = NULL;
	struct bp_heap heap = {0};
	int *xa = NULL, *xb = NULL;
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
	size_t nn = n ? n : 1, nx = k < nn ? k : nn;
	t.v = bp_calloc(nn, sizeof(*t.v), err);
	t.next = bp_calloc(nn, sizeof(int), err);
	p = bp_calloc(nn, sizeof(*p), err);
	xa = bp_calloc(nx, sizeof(int), err);
	xb = bp_calloc(nx, sizeof(int), err);
	if (!t.v || !t.next || !p || !xa || !xb || bp_heap_reserve(&heap, nn, 0, err) < 0)
		goto out;
	/* Every item a partial solution of its own (partial i): itself in one subset, k-1
	 * empty ones, of spread w (0 when k = 1). A merge keeps the partial that came out
	 * first and gives it the next age: documents 0..n-1, then merges. */
	for (size_t i = 0; i < n; i++) {
		t.v[i] = (struct kk_node){w[i], -1, -1, (int)i};
		t.next[i] = -1;
		p[i] = (struct kk_part){k > 1 ? w[i] : 0, (int64_t)i, w[i], (int)i, 1};
		bp_heap_push(&heap, (int)i, part_first, p);
	}
	int64_t seq = (int64_t)n;
	while (heap.n > 1) {
		/* the first two out; the merge takes the second's place (the same heap as a
		 * pop and a push, with one sift fewer) */
		int a = bp_heap_pop(&heap, part_first, p), b = heap.h[0];
		kk_merge(&t, p, a, b, k, xa, xb);
		p[a].seq = seq++;
		heap.h[0] = a;
		bp_heap_down(&heap, 0, part_first, p);
	}
	if (kk_emit(&t, w, len, n, bin_of, load, fill, err) < 0)
		goto out;
	rc = kk_repair(w, len, n, k, cap, bin_of, load, fill, err);
out:
	free(t.v);
	free(t.next);
	free(p);
	free(xa);
	free(xb);
	bp_heap_free(&heap);
	return rc;
}
