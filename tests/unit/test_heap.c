/* test_heap.c: the shared heap (planner/base/heap.h, issue 28): pops in the caller's order
 * against a sort (many ties, broken by index), keys changed in place and put back by
 * bp_heap_fix, growth keeping the items (and pos added later), caller-owned storage, the
 * bare-value sift (bp_heap_grow_least) against a scan; and what must not change with it:
 * bp_pack_kk (blocks/kk_part.c: a sparse Karmarkar-Karp on melded heaps and a treap repair, issue 24)
 * equal, bin by bin and in its repair's moves, to the KK it replaced, which sorted all k
 * subsets of a partial at every merge and scanned every item and bin for each move
 * (written out below as the reference). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "heap.h"
#include "pack.h"
#include "rng.h"

/* Keys for the order "lower key first, ties by the lower index". */
static int key_first(const void *keys, int a, int b)
{
	const int64_t *k = keys;
	return k[a] != k[b] ? k[a] < k[b] : a < b;
}

static int cmp_by_key(const void *x, const void *y, const int64_t *k)
{
	int a = *(const int *)x, b = *(const int *)y;
	if (k[a] != k[b])
		return k[a] < k[b] ? -1 : 1;
	return a < b ? -1 : a > b;
}

static const int64_t *sort_keys;

static int cmp_sorted(const void *x, const void *y)
{
	return cmp_by_key(x, y, sort_keys);
}

/* The heap property and, when kept, pos. */
static int heap_ok(const struct bp_heap *hp, const int64_t *keys)
{
	for (size_t i = 1; i < hp->n; i++)
		if (key_first(keys, hp->h[i], hp->h[(i - 1) / 2]))
			return 0;
	if (hp->pos)
		for (size_t i = 0; i < hp->n; i++)
			if (hp->pos[hp->h[i]] != (int)i)
				return 0;
	return 1;
}

/* Random keys (spread 1..range, so ties when range is small) pushed, then popped: the
 * pops are the sort by (key, index). */
static void test_order(void)
{
	struct bp_rng r;
	struct bp_error err;
	bp_rng_seed(&r, 7);
	for (int round = 0; round < 200; round++) {
		size_t n = bp_rng_below(&r, 300);
		uint64_t range = round % 3 ? 1 + bp_rng_below(&r, 8) : 1000000;
		int64_t *keys = calloc(n ? n : 1, sizeof(*keys));
		int *want = calloc(n ? n : 1, sizeof(*want));
		struct bp_heap hp = {0};
		CHECK(keys && want);
		CHECK(bp_heap_reserve(&hp, n, round % 2, &err) == 0);
		for (size_t i = 0; i < n; i++) {
			keys[i] = (int64_t)bp_rng_below(&r, range);
			want[i] = (int)i;
		}
		/* pushed in a random order */
		for (size_t i = n; i > 1; i--) {
			size_t j = bp_rng_below(&r, i);
			int t = want[i - 1];
			want[i - 1] = want[j];
			want[j] = t;
		}
		for (size_t i = 0; i < n; i++)
			bp_heap_push(&hp, want[i], key_first, keys);
		CHECK(hp.n == n && heap_ok(&hp, keys));
		sort_keys = keys;
		qsort(want, n, sizeof(*want), cmp_sorted);
		int good = 1;
		for (size_t i = 0; i < n; i++)
			good &= bp_heap_pop(&hp, key_first, keys) == want[i];
		CHECK(good && hp.n == 0);
		bp_heap_free(&hp);
		CHECK(!hp.h && !hp.pos && hp.cap == 0);
		free(keys);
		free(want);
	}
}

/* Keys changed anywhere in the heap (up and down) and put back by bp_heap_fix, between
 * pops, pushes and removals anywhere (bp_heap_remove, also of items not in it); the top is
 * always the least by (key, index), as a scan finds it. */
static void test_fix(void)
{
	struct bp_rng r;
	struct bp_error err;
	enum { N = 64 };
	int64_t keys[N] = {0};
	int in[N];
	struct bp_heap hp = {0};
	bp_rng_seed(&r, 11);
	CHECK(bp_heap_reserve(&hp, N, 1, &err) == 0);
	bp_heap_iota(&hp, N); /* all keys 0: index order is heap order */
	for (int i = 0; i < N; i++)
		in[i] = 1;
	CHECK(heap_ok(&hp, keys) && hp.h[0] == 0);
	int good = 1;
	for (int step = 0; step < 20000; step++) {
		uint64_t op = bp_rng_below(&r, 10);
		int it = (int)bp_rng_below(&r, N);
		if (op < 6 && in[it]) {
			keys[it] += (int64_t)bp_rng_below(&r, 7) - 3;
			bp_heap_fix(&hp, it, key_first, keys);
		} else if (op < 7 && hp.n) {
			int top = bp_heap_pop(&hp, key_first, keys);
			good &= in[top] && hp.pos[top] == -1;
			in[top] = 0;
		} else if (op < 8) {
			size_t n0 = hp.n;
			bp_heap_remove(&hp, it, key_first, keys);
			good &= hp.pos[it] == -1 && hp.n == n0 - (size_t)in[it];
			in[it] = 0;
		} else if (!in[it]) {
			keys[it] = (int64_t)bp_rng_below(&r, 20) - 10;
			bp_heap_push(&hp, it, key_first, keys);
			in[it] = 1;
		}
		good &= heap_ok(&hp, keys);
		int best = -1;
		for (int i = 0; i < N; i++)
			if (in[i] && (best < 0 || key_first(keys, i, best)))
				best = i;
		good &= hp.n ? hp.h[0] == best : best < 0;
	}
	CHECK(good);
	bp_heap_free(&hp);
}

/* Growth keeps the items and their order; pos added to a heap without it is filled in;
 * the caller's own storage works as well. */
static void test_growth(void)
{
	struct bp_error err;
	int64_t keys[100];
	struct bp_heap hp = {0};
	for (int i = 0; i < 100; i++)
		keys[i] = (i * 37) % 11;
	CHECK(bp_heap_reserve(&hp, 0, 0, &err) == 0 && hp.cap >= 1 && !hp.pos);
	for (int i = 0; i < 100; i++) {
		if (hp.n == hp.cap)
			CHECK(bp_heap_reserve(&hp, 2 * hp.cap, 0, &err) == 0);
		if (i == 50) /* pos added to 50 items, same room */
			CHECK(bp_heap_reserve(&hp, hp.cap, 1, &err) == 0 && hp.pos &&
			      heap_ok(&hp, keys));
		bp_heap_push(&hp, i, key_first, keys);
	}
	CHECK(hp.cap >= 100 && hp.pos && heap_ok(&hp, keys));
	CHECK(bp_heap_reserve(&hp, 10, 1, &err) == 0 && hp.cap >= 100); /* never shrinks */
	int prev = bp_heap_pop(&hp, key_first, keys), good = 1;
	while (hp.n) {
		int x = bp_heap_pop(&hp, key_first, keys);
		good &= key_first(keys, prev, x);
		prev = x;
	}
	CHECK(good);
	bp_heap_free(&hp);

	int store[8];
	struct bp_heap own = {.h = store, .cap = 8};
	int64_t k2[8] = {5, 3, 5, 1, 9, 3, 0, 5};
	for (int i = 0; i < 8; i++)
		bp_heap_push(&own, i, key_first, k2);
	const int want[8] = {6, 3, 1, 5, 0, 2, 7, 4};
	good = 1;
	for (int i = 0; i < 8; i++)
		good &= bp_heap_pop(&own, key_first, k2) == want[i];
	CHECK(good);
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return a < b ? -1 : a > b;
}

/* The bare-value heap: the least of n values grows by d each time, as a scan for the least
 * does it; the values come out the same, bit for bit (ties: either of two equal values). */
static void test_grow_least(void)
{
	struct bp_rng r;
	bp_rng_seed(&r, 3);
	int good = 1;
	for (int round = 0; round < 100; round++) {
		size_t n = 1 + bp_rng_below(&r, 40);
		double h[40], ref[40];
		for (size_t i = 0; i < n; i++)
			h[i] = ref[i] = round % 2 ? 0.0 : 1.5;
		for (int step = 0; step < 500; step++) {
			double d = round % 3 ? (double)(1 + bp_rng_below(&r, 4)) : bp_rng_uniform(&r);
			bp_heap_grow_least(h, (int)n, d);
			size_t m = 0;
			for (size_t i = 1; i < n; i++)
				if (ref[i] < ref[m])
					m = i;
			ref[m] += d;
			for (size_t i = 1; i < n; i++)
				good &= !(h[i] < h[(i - 1) / 2]);
		}
		qsort(h, n, sizeof(*h), cmp_double);
		qsort(ref, n, sizeof(*ref), cmp_double);
		good &= !memcmp(h, ref, n * sizeof(*h));
	}
	CHECK(good);
}

/* The reference: Karmarkar-Karp as kk.c had it before issue 24, every partial's k subsets
 * written out and sorted (heaviest first, ties by the first item, empty ones last) after
 * every merge; the partials taken by the largest spread, ties by age, by a scan. */
struct ref_sub {
	int64_t sum;
	int head, tail;
};

static int ref_cmp(const void *a, const void *b)
{
	const struct ref_sub *x = a, *y = b;
	if (x->sum != y->sum)
		return x->sum < y->sum ? 1 : -1;
	if (x->head != y->head)
		return (unsigned)x->head > (unsigned)y->head ? 1 : -1;
	return 0;
}

static void ref_kk(const int64_t *w, size_t n, size_t k, int *bin_of, int64_t *load)
{
	struct ref_sub *sub = calloc(n * k + 1, sizeof(*sub)), *tmp = calloc(k, sizeof(*tmp));
	int64_t *spread = calloc(n + 1, sizeof(*spread)), *seq = calloc(n + 1, sizeof(*seq));
	int *alive = calloc(n + 1, sizeof(*alive)), *next = calloc(n + 1, sizeof(*next));
	for (size_t i = 0; i < n; i++) {
		struct ref_sub *s = &sub[i * k];
		s[0] = (struct ref_sub){w[i], (int)i, (int)i};
		for (size_t j = 1; j < k; j++)
			s[j] = (struct ref_sub){0, -1, -1};
		spread[i] = s[0].sum - s[k - 1].sum;
		seq[i] = (int64_t)i;
		alive[i] = 1;
		next[i] = -1;
	}
	int64_t age = (int64_t)n;
	for (size_t left = n; left > 1; left--) {
		int pick[2] = {-1, -1};
		for (int q = 0; q < 2; q++)
			for (size_t i = 0; i < n; i++)
				if (alive[i] && (int)i != pick[0] &&
				    (pick[q] < 0 || spread[i] > spread[pick[q]] ||
				     (spread[i] == spread[pick[q]] && seq[i] < seq[pick[q]])))
					pick[q] = (int)i;
		struct ref_sub *a = &sub[(size_t)pick[0] * k], *b = &sub[(size_t)pick[1] * k];
		for (size_t j = 0; j < k; j++) {
			struct ref_sub x = a[j], y = b[k - 1 - j];
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
		qsort(tmp, k, sizeof(*tmp), ref_cmp);
		memcpy(a, tmp, k * sizeof(*tmp));
		alive[pick[1]] = 0;
		spread[pick[0]] = a[0].sum - a[k - 1].sum;
		seq[pick[0]] = age++;
	}
	for (size_t j = 0; j < k; j++)
		load[j] = 0;
	for (size_t p = 0; p < n; p++)
		if (alive[p])
			for (size_t j = 0; j < k; j++)
				for (int i = sub[p * k + j].head; i >= 0; i = next[i]) {
					bin_of[i] = (int)j;
					load[j] += w[i];
				}
	free(sub);
	free(tmp);
	free(spread);
	free(seq);
	free(alive);
	free(next);
}

/* The reference's repair, as kk.c had it: every move a scan over the items and the bins. */
static int ref_repair(const int64_t *w, const int64_t *len, size_t n, size_t k, int64_t cap,
		      int *bin_of, int64_t *load, int64_t *fill)
{
	for (size_t b = 0; b < k; b++)
		while (fill[b] > cap) {
			int64_t over = fill[b] - cap, room = 0;
			for (size_t c = 0; c < k; c++)
				if (c != b && cap - fill[c] > room)
					room = cap - fill[c];
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

/* bp_pack_kk's partition (no cap to repair) equals the reference's bin by bin, on weights
 * with many ties and with few, k from 1 to past n, zero weights included. */
static void test_kk_same(void)
{
	struct bp_rng r;
	struct bp_error err;
	bp_rng_seed(&r, 24);
	int good = 1, runs = 0, repaired = 0, failed = 0;
	for (int round = 0; round < 600; round++) {
		size_t n = bp_rng_below(&r, 120);
		size_t k = 1 + bp_rng_below(&r, round % 4 ? 12 : 150);
		uint64_t range = round % 3 == 0 ? 4 : round % 3 == 1 ? 60 : 1000000000;
		int64_t *w = calloc(n + 1, sizeof(*w)), *len = calloc(n + 1, sizeof(*len));
		int *bin = calloc(n + 1, sizeof(*bin)), *rbin = calloc(n + 1, sizeof(*rbin));
		int64_t *load = calloc(k, sizeof(*load)), *fill = calloc(k, sizeof(*fill));
		int64_t *rload = calloc(k, sizeof(*rload));
		CHECK(w && len && bin && rbin && load && fill && rload);
		for (size_t i = 0; i < n; i++) {
			w[i] = (int64_t)bp_rng_below(&r, range) + (round % 5 ? 1 : 0);
			len[i] = 1 + (int64_t)bp_rng_below(&r, 100);
		}
		CHECK(bp_pack_kk(w, len, n, k, INT64_MAX / 4, bin, load, fill, &err) == 0);
		ref_kk(w, n, k, rbin, rload);
		good &= !n || !memcmp(bin, rbin, n * sizeof(*bin));
		good &= !memcmp(load, rload, k * sizeof(*load));
		/* a cap that some bins break: the same moves, or the same failure */
		int64_t most = 0, tokens = 0;
		for (size_t i = 0; i < n; i++) {
			tokens += len[i];
			most = len[i] > most ? len[i] : most;
		}
		for (int c = 0; c < 3 && n; c++) {
			int64_t cap = tokens / (int64_t)k + (int64_t)bp_rng_below(&r, 80);
			cap = cap < most ? most : cap;
			int64_t *rfill = calloc(k, sizeof(*rfill));
			CHECK(rfill != NULL);
			int got = bp_pack_kk(w, len, n, k, cap, bin, load, fill, &err);
			ref_kk(w, n, k, rbin, rload);
			for (size_t j = 0; j < k; j++)
				rfill[j] = 0;
			for (size_t i = 0; i < n; i++)
				rfill[rbin[i]] += len[i];
			int want = ref_repair(w, len, n, k, cap, rbin, rload, rfill);
			good &= got == want && !memcmp(bin, rbin, n * sizeof(*bin));
			good &= !memcmp(load, rload, k * sizeof(*load));
			good &= !memcmp(fill, rfill, k * sizeof(*fill));
			repaired += want == 0;
			failed += want == 1;
			free(rfill);
		}
		runs++;
		free(w);
		free(len);
		free(bin);
		free(rbin);
		free(load);
		free(fill);
		free(rload);
	}
	CHECK(good && runs == 600);
	CHECK(repaired > 100 && failed > 100); /* both outcomes were compared */
}

int main(void)
{
	test_order();
	test_fix();
	test_growth();
	test_grow_least();
	test_kk_same();
	return CHECK_DONE();
}
