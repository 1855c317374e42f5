/* pack.c: LPT packing with a token cap and balanced dealing of bins to pipelines (pack.h).
 * Called by the packing methods (methods/), ilp_pack.c's warm starts, Hydraulis's packing
 * (hyd_pack.c), FlexSP's groups (sp_ilp.c) and the simulator's bound (sim/predict.c).
 * One LPT (bp_pack_lpt_ex) serves bp_pack_lpt, bp_deal_bins, Hydraulis's packing,
 * SparseBalance's batching and
 * plain's balanced deal. Invariant: results depend only on the inputs (ties broken by
 * index), never on memory addresses. */
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

/* A double's bits as an unsigned key in the double's order, -0.0 as 0.0 (they compare
 * equal); not for NaN. */
static uint64_t double_key(double x)
{
	uint64_t u;
	if (x == 0.0)
		x = 0.0;
	memcpy(&u, &x, sizeof(u));
	return u >> 63 ? ~u : u | (uint64_t)1 << 63;
}

#define ORDER_RADIX_MIN 256 /* items from which the radix sort is cheaper than qsort */

/* cmp_ord's order by a stable LSD radix sort, a byte a pass, the least significant key
 * first (len, then cost, each descending: keys complemented) over the identity, which
 * orders the ties by index; bytes equal in every key are skipped. O(n) a pass, at most 16
 * passes (a few where the keys share their high bytes). key and tmp hold n entries each. */
static void order_radix(const double *cost, const int64_t *len, size_t n, size_t *order,
			uint64_t *key, size_t *tmp)
{
	size_t *a = order, *b = tmp, count[257];
	for (size_t i = 0; i < n; i++)
		a[i] = i;
	for (int k = 0; k < 2; k++) {
		uint64_t all = ~(uint64_t)0, any = 0;
		for (size_t i = 0; i < n; i++) {
			key[i] = ~(k ? double_key(cost[i]) : (uint64_t)len[i] ^ (uint64_t)1 << 63);
			all &= key[i];
			any |= key[i];
		}
		for (int sh = 0; sh < 64; sh += 8) {
			if (!(((all ^ any) >> sh) & 0xff))
				continue; /* every key has this byte: the pass keeps the order */
			memset(count, 0, sizeof(count));
			for (size_t i = 0; i < n; i++)
				count[((key[a[i]] >> sh) & 0xff) + 1]++;
			for (int v = 0; v < 256; v++)
				count[v + 1] += count[v];
			for (size_t i = 0; i < n; i++)
				b[count[(key[a[i]] >> sh) & 0xff]++] = a[i];
			size_t *t = a;
			a = b;
			b = t;
		}
	}
	if (a != order)
		memcpy(order, a, n * sizeof(size_t));
}

void bp_order_by_cost(const double *cost, const int64_t *len, size_t n, size_t *order)
{
	int nan = 0;
	for (size_t i = 0; i < n && n >= ORDER_RADIX_MIN; i++)
		nan |= cost[i] != cost[i];
	if (n >= ORDER_RADIX_MIN && !nan) {
		uint64_t *key = malloc(n * sizeof(*key));
		size_t *tmp = malloc(n * sizeof(*tmp));
		if (key && tmp)
			order_radix(cost, len, n, order, key, tmp);
		free(key);
		free(tmp);
		if (key && tmp)
			return;
	}
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

/* ---- LPT with a capacity: one core for bp_pack_lpt, bp_pack_lpt_ex and bp_deal_bins ----
 *
 * Each item goes to the bin of least load among those that take it, ties to the lowest bin:
 * the least (load, bin) in lexicographic order among bins whose room (cap - fill, or none
 * once a bin holds per items) is at least the item's length. Few bins are scanned; more are
 * kept in a treap ordered by (load, bin) whose nodes carry the largest room in their subtree,
 * so the first bin in that order with room is found in O(log bins) (expected): descend left
 * while the left subtree has a bin with room. The treap only orders the same keys the scan
 * compares, so both pick the same bin. The priorities are a hash of the bin index, so the
 * tree's shape, and the time, depend only on the inputs. */

#define LPT_SCAN_MAX 32 /* open bins up to which a linear scan is cheaper than the treap */
#define LPT_NO_ROOM INT64_MIN

struct lpt {
	double *load;
	int64_t *fill, *room, *best; /* best: the largest room in the bin's subtree */
	size_t *cnt;
	int *l, *r, *path, *spl; /* path: the picked bin's ancestors, root first */
	uint32_t *pri;
	size_t open, per, np;
	int64_t cap;
	int root, tree; /* root: -1 when empty; tree: the treap is in use */
};

/* (load, bin) order; no NaN loads, so -0.0 and 0.0 tie and the index decides, as in the
 * scan's strict comparison */
static int lpt_less(const struct lpt *s, int a, int b)
{
	if (s->load[a] != s->load[b])
		return s->load[a] < s->load[b];
	return a < b;
}

static void lpt_pull(struct lpt *s, int x)
{
	int64_t m = s->room[x];
	if (s->l[x] >= 0 && s->best[s->l[x]] > m)
		m = s->best[s->l[x]];
	if (s->r[x] >= 0 && s->best[s->r[x]] > m)
		m = s->best[s->r[x]];
	s->best[x] = m;
}

/* joins a and b, every node of a before every node of b */
static int lpt_merge(struct lpt *s, int a, int b)
{
	if (a < 0 || b < 0)
		return a < 0 ? b : a;
	if (s->pri[a] > s->pri[b]) {
		s->r[a] = lpt_merge(s, s->r[a], b);
		lpt_pull(s, a);
		return a;
	}
	s->l[b] = lpt_merge(s, a, s->l[b]);
	lpt_pull(s, b);
	return b;
}

/* Inserts x (no children yet): down from the root while the priorities are higher, then the
 * subtree there is split by x's key into x's children, whose nodes are pulled from the
 * deepest up (a node visited later lies below the ones visited before it). */
static void lpt_insert(struct lpt *s, int x)
{
	int *link = &s->root, *lo = &s->l[x], *hi = &s->r[x], t;
	size_t np = 0, ns = 0;
	while (*link >= 0 && s->pri[*link] > s->pri[x]) {
		t = *link;
		s->path[np++] = t;
		link = lpt_less(s, x, t) ? &s->l[t] : &s->r[t];
	}
	for (t = *link; t >= 0;) {
		s->spl[ns++] = t;
		if (lpt_less(s, t, x)) {
			*lo = t;
			lo = &s->r[t];
			t = s->r[t];
		} else {
			*hi = t;
			hi = &s->l[t];
			t = s->l[t];
		}
	}
	*lo = *hi = -1;
	while (ns)
		lpt_pull(s, s->spl[--ns]);
	lpt_pull(s, x);
	*link = x;
	/* the ancestors gained x only: their largest room rises to x's, up to the first that
	 * has as much already (so has every one above it) */
	while (np && s->best[s->path[np - 1]] < s->room[x])
		s->best[s->path[--np]] = s->room[x];
}

/* Removes x, which lpt_pick just found: its ancestors are in path. */
static void lpt_unlink(struct lpt *s, int x)
{
	int sub = lpt_merge(s, s->l[x], s->r[x]);
	size_t np = s->np;
	if (!np)
		s->root = sub;
	else if (s->l[s->path[np - 1]] == x)
		s->l[s->path[np - 1]] = sub;
	else
		s->r[s->path[np - 1]] = sub;
	/* pulled from the parent up, to the first whose largest room stays (so do the rest) */
	while (np) {
		int t = s->path[--np];
		int64_t was = s->best[t];
		lpt_pull(s, t);
		if (s->best[t] == was)
			break;
	}
}

static void lpt_add_node(struct lpt *s, int x)
{
	uint64_t h = ((uint64_t)x + 1) * 0x9E3779B97F4A7C15ull; /* splitmix64's finalizer */
	h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
	h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
	s->pri[x] = (uint32_t)(h >> 32);
	s->l[x] = s->r[x] = -1;
	lpt_insert(s, x);
}

static void lpt_tree_on(struct lpt *s)
{
	s->tree = 1;
	s->root = -1;
	for (size_t b = 0; b < s->open; b++)
		lpt_add_node(s, (int)b);
}

/* The first bin in (load, bin) order with room for len tokens, or open when none; with the
 * treap, path gets its ancestors. */
static size_t lpt_pick(struct lpt *s, int64_t len)
{
	if (!s->tree) {
		size_t best = s->open;
		for (size_t b = 0; b < s->open; b++)
			if (s->room[b] >= len && (best == s->open || s->load[b] < s->load[best]))
				best = b;
		return best;
	}
	int t = s->root;
	s->np = 0;
	if (t < 0 || s->best[t] < len)
		return s->open;
	for (;;) {
		if (s->l[t] >= 0 && s->best[s->l[t]] >= len) {
			s->path[s->np++] = t;
			t = s->l[t];
		} else if (s->room[t] >= len) {
			return (size_t)t;
		} else {
			s->path[s->np++] = t;
			t = s->r[t];
		}
	}
}

/* Puts an item in bin b: picked from the treap, or fresh (just opened, not in it yet). */
static void lpt_place(struct lpt *s, size_t b, double cost, int64_t len, int fresh)
{
	if (s->tree && !fresh)
		lpt_unlink(s, (int)b);
	s->load[b] += cost;
	s->fill[b] += len;
	s->cnt[b]++;
	s->room[b] = s->per && s->cnt[b] >= s->per ? LPT_NO_ROOM : s->cap - s->fill[b];
	if (s->tree)
		lpt_add_node(s, (int)b);
}

int bp_pack_lpt_ex(const struct bp_lpt_opts *o, const double *cost, const int64_t *len,
		   size_t n, size_t *order, int *bin_of, double *load, int64_t *fill,
		   size_t *nused, struct bp_error *err)
{
	size_t mx = o->maxbins > o->nbins ? o->maxbins : o->nbins;
	struct lpt s = {.load = load, .open = o->nbins, .per = o->per, .cap = o->cap,
			.root = -1};
	int rc = -1;
	s.fill = bp_calloc(mx + 1, sizeof(int64_t), err);
	s.room = bp_calloc(mx + 1, sizeof(int64_t), err);
	s.best = bp_calloc(mx + 1, sizeof(int64_t), err);
	s.cnt = bp_calloc(mx + 1, sizeof(size_t), err);
	s.l = bp_calloc(mx + 1, sizeof(int), err);
	s.r = bp_calloc(mx + 1, sizeof(int), err);
	s.path = bp_calloc(mx + 1, sizeof(int), err);
	s.spl = bp_calloc(mx + 1, sizeof(int), err);
	s.pri = bp_calloc(mx + 1, sizeof(uint32_t), err);
	if (!s.fill || !s.room || !s.best || !s.cnt || !s.l || !s.r || !s.path || !s.spl ||
	    !s.pri)
		goto out;
	if (mx > (size_t)INT32_MAX) {
		bp_errorf(err, "internal: %zu bins for LPT", mx);
		goto out;
	}
	for (size_t b = 0; b < mx; b++) {
		load[b] = 0.0;
		s.room[b] = o->cap;
	}
	if (!o->sorted)
		bp_order_by_cost(cost, len, n, order);
	if (s.open > LPT_SCAN_MAX)
		lpt_tree_on(&s);
	rc = 0;
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k], b = lpt_pick(&s, len[i]);
		int fresh = b == s.open;
		if (fresh) {
			if (s.open >= mx) {
				rc = 1;
				break;
			}
			s.open++;
		}
		bin_of[i] = (int)b;
		lpt_place(&s, b, cost[i], len[i], fresh);
		if (!s.tree && s.open > LPT_SCAN_MAX)
			lpt_tree_on(&s);
	}
	if (fill)
		memcpy(fill, s.fill, mx * sizeof(int64_t));
	*nused = s.open;
out:
	free(s.fill);
	free(s.room);
	free(s.best);
	free(s.cnt);
	free(s.l);
	free(s.r);
	free(s.path);
	free(s.spl);
	free(s.pri);
	return rc;
}

int bp_pack_lpt(const double *cost, const int64_t *len, size_t n, size_t nbins, int64_t cap,
		int *bin_of, double *load, int64_t *fill, struct bp_error *err)
{
	struct bp_lpt_opts o = {.nbins = nbins, .maxbins = nbins, .cap = cap};
	size_t *order = bp_calloc(n, sizeof(size_t), err), used;
	if (!order)
		return -1;
	int rc = bp_pack_lpt_ex(&o, cost, len, n, order, bin_of, load, fill, &used, err);
	free(order);
	return rc;
}

/* LPT over the groups with len 0 and at most per bins a group: bins costliest first, each to
 * the group of least load that has fewer than per (ties: the lowest group). */
int bp_deal_bins(const double *load, size_t nbins, size_t groups, size_t per, int *group_of,
		 struct bp_error *err)
{
	struct bp_lpt_opts o = {.nbins = groups, .maxbins = groups, .cap = INT64_MAX, .per = per};
	int64_t *zero = bp_calloc(nbins, sizeof(int64_t), err);
	size_t *order = bp_calloc(nbins, sizeof(size_t), err), used;
	double *sum = bp_calloc(groups, sizeof(double), err);
	int rc = -1;
	if (!zero || !order || !sum)
		goto out;
	if (nbins != groups * per) {
		bp_errorf(err, "internal: %zu bins for %zu groups of %zu", nbins, groups, per);
		goto out;
	}
	rc = bp_pack_lpt_ex(&o, load, zero, nbins, order, group_of, sum, NULL, &used, err);
	if (rc > 0)
		rc = bp_errorf(err, "internal: %zu bins do not fit %zu groups of %zu", nbins,
			       groups, per);
out:
	free(zero);
	free(order);
	free(sum);
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

size_t bp_first_m(int64_t tokens, int dp, int64_t per_mb, const int64_t *len, size_t n,
		  int64_t cap)
{
	int64_t per_m = (int64_t)dp * per_mb;
	size_t first = (size_t)((tokens + per_m - 1) / per_m), big = 0;
	for (size_t i = 0; i < n; i++)
		big += 2 * len[i] > cap;
	size_t need = (big + (size_t)dp - 1) / (size_t)dp;
	if (need > first)
		first = need;
	return first < 1 ? 1 : first;
}

int bp_grow_m(size_t first, size_t n, bp_try_m_fn try_m, void *arg, size_t *m,
	      struct bp_error *err)
{
	size_t last = first > n ? first : n; /* every item alone fits by then */
	int r = 1;
	/* one by one for the first tries: the smallest count that fits */
	for (*m = first; *m < first + BP_GROW_STEPS && *m <= last; (*m)++)
		if ((r = try_m(*m, arg, err)) <= 0)
			return r;
	if (*m > last)
		return bp_errorf(err, "internal: %zu items fit no packing up to %zu "
				 "micro-batches per pipeline", n, last);
	/* then in steps of an eighth, doubling, to a count that fits, and back by bisection
	 * between it and the last that did not */
	size_t lo = *m - 1, step = lo / 8 ? lo / 8 : 1, hi;
	for (;;) {
		hi = lo + step > last ? last : lo + step;
		if ((r = try_m(hi, arg, err)) <= 0)
			break;
		if (hi == last)
			return bp_errorf(err, "internal: %zu items fit no packing up to %zu "
					 "micro-batches per pipeline", n, last);
		lo = hi;
		step *= 2;
	}
	if (r < 0)
		return -1;
	size_t tried = hi;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if ((r = try_m(mid, arg, err)) < 0)
			return -1;
		tried = mid;
		if (r == 0)
			hi = mid;
		else
			lo = mid;
	}
	*m = hi;
	/* the try's outputs are the last call's: make them hi's */
	return tried == hi ? 0 : try_m(hi, arg, err);
}

/* bp_pack_fixed_greedy's try: LPT into dp * m bins (load and fill reallocated to fit), the
 * documents in the order sorted once */
struct fixed_try {
	const double *cost;
	const int64_t *len;
	size_t n, dp;
	int64_t cap;
	size_t *order;
	int *bin_of;
	double *load;
	int64_t *fill;
};

static int fixed_try(size_t m, void *arg, struct bp_error *err)
{
	struct fixed_try *t = arg;
	size_t nbins = m * t->dp, used;
	struct bp_lpt_opts o = {.nbins = nbins, .maxbins = nbins, .cap = t->cap, .sorted = 1};
	free(t->load);
	free(t->fill);
	t->load = bp_calloc(nbins, sizeof(double), err);
	t->fill = bp_calloc(nbins, sizeof(int64_t), err);
	if (!t->load || !t->fill)
		return -1;
	return bp_pack_lpt_ex(&o, t->cost, t->len, t->n, t->order, t->bin_of, t->load, t->fill,
			      &used, err);
}

int bp_pack_fixed_greedy(const struct bp_costmodel *cm, const struct bp_batch *b, int dp,
			 int64_t window, int64_t cap, double *cost, int64_t *len, int *bin_of,
			 double **load, size_t *m, struct bp_error *err)
{
	size_t n = b->ndocs;
	*load = NULL;
	for (size_t i = 0; i < n; i++) {
		len[i] = b->docs[i].len;
		if (len[i] > cap)
			return bp_infeasiblef(err, "document %lld has %lld tokens, more than the "
					      "micro-batch cap %lld", (long long)b->docs[i].id,
					      (long long)len[i], (long long)cap);
		if (bp_cost_doc(cm, len[i], &cost[i], err) < 0)
			return -1;
	}
	struct fixed_try t = {cost, len, n, (size_t)dp, cap, NULL, bin_of, NULL, NULL};
	int rc = -1;
	t.order = bp_calloc(n, sizeof(size_t), err);
	if (t.order) {
		bp_order_by_cost(cost, len, n, t.order);
		rc = bp_grow_m(bp_first_m(b->tokens, dp, window, len, n, cap), n, fixed_try, &t,
			       m, err);
	}
	free(t.order);
	free(t.fill);
	if (rc < 0) {
		free(t.load);
		return -1;
	}
	*load = t.load;
	return 0;
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
