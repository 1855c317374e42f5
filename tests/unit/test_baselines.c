/* test_baselines.c: the practical packing baselines of issue 3 (ffd, bfd, multipack, kk):
 * every document exactly once, bins within the token cap, FFD/BFD equal to naive O(n*bins)
 * references (in every size regime that picks a different data structure or sort) and
 * within their worst-case bound, multipack's rank loads within the longest
 * document, KK better balanced than a round-robin split, and plans through bp_solve that
 * validate and are reproducible. */
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "solve_fixture.h"
#include "jsonutil.h"
#include "method.h"
#include "pack.h"
#include "solve.h"
#include "validate.h"

/* A random instance: n lengths in [1, cap] of one of several shapes. */
static void gen(struct bp_rng *r, int64_t *len, size_t n, int64_t cap, int shape)
{
	for (size_t i = 0; i < n; i++) {
		int64_t l;
		switch (shape) {
		case 0: /* uniform */
			l = 1 + (int64_t)bp_rng_below(r, (uint64_t)cap);
			break;
		case 1: /* mostly short, a few long (long tail) */
			l = bp_rng_below(r, 10) ? 1 + (int64_t)bp_rng_below(r, (uint64_t)(cap / 8 + 1))
						: cap / 2 + (int64_t)bp_rng_below(r, (uint64_t)(cap / 2 + 1));
			break;
		case 2: /* around a third of the cap: FFD's hard case */
			l = cap / 4 + 1 + (int64_t)bp_rng_below(r, (uint64_t)(cap / 6 + 1));
			break;
		default: /* few distinct values: many ties */
			l = cap / (2 + (int64_t)bp_rng_below(r, 4));
			break;
		}
		len[i] = l < 1 ? 1 : l > cap ? cap : l;
	}
}

static int cmp_len_idx(const void *a, const void *b, const int64_t *len)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	if (len[x] != len[y])
		return len[x] < len[y] ? 1 : -1;
	return (x > y) - (x < y);
}

/* Insertion sort (the test's own, independent of pack.c's counting sort). */
static void naive_order(const int64_t *len, size_t n, size_t *order)
{
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		order[i] = i;
		while (j > 0 && cmp_len_idx(&order[j - 1], &order[j], len) > 0) {
			size_t t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
			j--;
		}
	}
}

/* First fit: the lowest bin with room. */
static size_t naive_ffd(const int64_t *len, size_t n, int64_t cap, int *bin_of)
{
	size_t *order = malloc((n + 1) * sizeof(size_t)), nb = 0;
	int64_t *fill = calloc(n + 1, sizeof(int64_t));
	naive_order(len, n, order);
	for (size_t q = 0; q < n; q++) {
		size_t i = order[q], b = 0;
		while (b < nb && fill[b] + len[i] > cap)
			b++;
		if (b == nb)
			nb++;
		fill[b] += len[i];
		bin_of[i] = (int)b;
	}
	free(order);
	free(fill);
	return nb;
}

/* Best fit: the fullest bin with room; ties: the one that reached its fill first. */
static size_t naive_bfd(const int64_t *len, size_t n, int64_t cap, int *bin_of)
{
	size_t *order = malloc((n + 1) * sizeof(size_t)), *stamp = calloc(n + 1, sizeof(size_t));
	size_t nb = 0;
	int64_t *fill = calloc(n + 1, sizeof(int64_t));
	naive_order(len, n, order);
	for (size_t q = 0; q < n; q++) {
		size_t i = order[q], best = nb;
		for (size_t b = 0; b < nb; b++)
			if (fill[b] + len[i] <= cap &&
			    (best == nb || fill[b] > fill[best] ||
			     (fill[b] == fill[best] && stamp[b] < stamp[best])))
				best = b;
		if (best == nb)
			nb++;
		fill[best] += len[i];
		stamp[best] = q;
		bin_of[i] = (int)best;
	}
	free(order);
	free(stamp);
	free(fill);
	return nb;
}

/* Each item in a bin below nbins, no bin over cap; returns the largest fill. */
static int64_t check_bins(const int64_t *len, size_t n, const int *bin_of, size_t nbins,
			  int64_t cap)
{
	int64_t *fill = calloc(nbins + 1, sizeof(int64_t)), mx = 0;
	for (size_t i = 0; i < n; i++) {
		CHECK(bin_of[i] >= 0 && (size_t)bin_of[i] < nbins);
		if (bin_of[i] >= 0 && (size_t)bin_of[i] < nbins)
			fill[bin_of[i]] += len[i];
	}
	for (size_t b = 0; b < nbins; b++) {
		CHECK(fill[b] <= cap);
		if (fill[b] > mx)
			mx = fill[b];
	}
	free(fill);
	return mx;
}

static void test_ffd_bfd(void)
{
	struct bp_rng r;
	struct bp_error err;
	bp_rng_seed(&r, 11);
	int64_t caps[4] = {1, 64, 1000, 16384};
	for (int t = 0; t < 400; t++) {
		size_t n = (size_t)bp_rng_below(&r, 300);
		int64_t cap = caps[t % 4];
		int64_t *len = malloc((n + 1) * sizeof(int64_t)), sum = 0;
		int *a = malloc((n + 1) * sizeof(int)), *b = malloc((n + 1) * sizeof(int));
		gen(&r, len, n, cap, t / 4 % 4);
		for (size_t i = 0; i < n; i++)
			sum += len[i];
		size_t lb = (size_t)((sum + cap - 1) / cap);
		bp_packer_fn fns[2] = {bp_pack_ffd, bp_pack_bfd};
		for (int f = 0; f < 2; f++) {
			size_t nb = 99, nref;
			CHECK(fns[f](len, n, cap, a, &nb, &err) == 0);
			nref = f ? naive_bfd(len, n, cap, b) : naive_ffd(len, n, cap, b);
			CHECK(nb == nref);
			CHECK(!n || !memcmp(a, b, n * sizeof(int)));
			check_bins(len, n, a, nb, cap);
			/* any-fit: no two bins at most half full, so nb < 2 sum / cap + 1 */
			CHECK(nb >= lb && (double)nb < 2.0 * (double)sum / (double)cap + 1.0);
			CHECK(n || nb == 0);
		}
		free(len);
		free(a);
		free(b);
	}
}

/* FFD and BFD pick their data structure by size (a scan over few bins, a segment tree over
 * bins or over fill values, a treap over bins) and bp_order_by_len its sort (counting, radix,
 * comparison); none of it may change a single bin. Each regime below reaches different
 * ones: {n range, cap, largest length}; lengths drawn in the four shapes of gen, then
 * clipped to the largest length. */
static void test_ffd_bfd_regimes(void)
{
	struct {
		size_t nmin, nmax;
		int64_t cap, maxlen;
	} reg[] = {
		{1, 250, 131072, 131072},            /* 7B-128K steps: scans, radix sort */
		{400, 2500, 131072, 131072},         /* many bins, cap >> n: treap, ffd tree */
		{400, 2500, 1000, 1000},             /* cap << n: fill-value tree, counting sort */
		{400, 2500, 4096, 40},               /* short items: one bin, huge n per bin */
		{1, 1200, (int64_t)1 << 40, (int64_t)1 << 40}, /* lengths past 2^32: qsort */
		{1, 1200, ((int64_t)1 << 32) - 1, ((int64_t)1 << 32) - 1}, /* 32-bit radix keys */
		{1, 600, 3, 3},                      /* tiny cap: ties everywhere */
	};
	struct bp_rng r;
	struct bp_error err;
	bp_rng_seed(&r, 13);
	for (size_t g = 0; g < sizeof(reg) / sizeof(reg[0]); g++)
		for (int t = 0; t < 24; t++) {
			size_t n = reg[g].nmin +
				   (size_t)bp_rng_below(&r, (uint64_t)(reg[g].nmax - reg[g].nmin + 1));
			int64_t cap = reg[g].cap;
			int64_t *len = malloc(n * sizeof(int64_t));
			int *a = malloc(n * sizeof(int)), *b = malloc(n * sizeof(int));
			size_t *o1 = malloc(n * sizeof(size_t)), *o2 = malloc(n * sizeof(size_t));
			gen(&r, len, n, cap, t % 4);
			for (size_t i = 0; i < n; i++)
				if (len[i] > reg[g].maxlen)
					len[i] = 1 + len[i] % reg[g].maxlen;
			CHECK(bp_order_by_len(len, n, o1, &err) == 0);
			naive_order(len, n, o2);
			CHECK(!memcmp(o1, o2, n * sizeof(size_t)));
			for (int f = 0; f < 2; f++) {
				size_t nb = 0, nref;
				CHECK((f ? bp_pack_bfd : bp_pack_ffd)(len, n, cap, a, &nb, &err) == 0);
				nref = f ? naive_bfd(len, n, cap, b) : naive_ffd(len, n, cap, b);
				CHECK(nb == nref);
				CHECK(!memcmp(a, b, n * sizeof(int)));
				check_bins(len, n, a, nb, cap);
			}
			free(len);
			free(a);
			free(b);
			free(o1);
			free(o2);
		}
}

/* Instances with a known optimum: K full bins cut into random pieces, then shuffled. FFD and
 * BFD use at most 11/9 OPT + 6/9 bins (Dosa 2007). */
static void test_known_optimum(void)
{
	struct bp_rng r;
	struct bp_error err;
	bp_rng_seed(&r, 12);
	for (int t = 0; t < 200; t++) {
		size_t K = 1 + (size_t)bp_rng_below(&r, 40), n = 0;
		int64_t cap = 1000 + (int64_t)bp_rng_below(&r, 5000);
		int64_t *len = malloc(K * 8 * sizeof(int64_t));
		for (size_t k = 0; k < K; k++) {
			int64_t left = cap;
			size_t pieces = 1 + (size_t)bp_rng_below(&r, 6);
			for (size_t p = 0; p + 1 < pieces && left > 1; p++) {
				int64_t l = 1 + (int64_t)bp_rng_below(&r, (uint64_t)(left - 1));
				len[n++] = l;
				left -= l;
			}
			len[n++] = left;
		}
		for (size_t i = n; i > 1; i--) {
			size_t j = (size_t)bp_rng_below(&r, i);
			int64_t x = len[i - 1];
			len[i - 1] = len[j];
			len[j] = x;
		}
		int *bin = malloc(n * sizeof(int));
		size_t nb;
		CHECK(bp_pack_ffd(len, n, cap, bin, &nb, &err) == 0);
		CHECK(9 * nb <= 11 * K + 6);
		check_bins(len, n, bin, nb, cap);
		CHECK(bp_pack_bfd(len, n, cap, bin, &nb, &err) == 0);
		CHECK(9 * nb <= 11 * K + 6);
		check_bins(len, n, bin, nb, cap);
		free(len);
		free(bin);
	}
}

static void test_bad_items(void)
{
	struct bp_error err;
	int64_t len[3] = {5, 11, 3};
	int bin[3];
	size_t nb;
	CHECK(bp_pack_ffd(len, 3, 10, bin, &nb, &err) == -1 && strstr(err.text, "outside"));
	CHECK(bp_pack_bfd(len, 3, 10, bin, &nb, &err) == -1 && strstr(err.text, "outside"));
	CHECK(bp_pack_bfd(len, 3, 11, bin, &nb, &err) == 0 && nb == 2 && bin[1] == 0 &&
	      bin[0] == 1 && bin[2] == 1);
}

/* KK's token-cap repair: the documents KK balances by workload overflow a bin's tokens. */
static void test_kk_repair(void)
{
	struct bp_error err;
	int64_t len[12] = {90, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, w[12], load[3], fill[3];
	int bin[12];
	for (size_t i = 0; i < 12; i++)
		w[i] = bp_kk_proxy(len[i], 1);
	/* unbounded: the 90 alone (8190) against eleven 10s (1210): 110 tokens in one bin */
	CHECK(bp_pack_kk(w, len, 12, 2, 1000, bin, load, fill, &err) == 0);
	CHECK((fill[0] == 90 && fill[1] == 110) || (fill[0] == 110 && fill[1] == 90));
	/* capped at 100: one 10 moves over */
	CHECK(bp_pack_kk(w, len, 12, 2, 100, bin, load, fill, &err) == 0);
	CHECK(fill[0] == 100 && fill[1] == 100);
	check_bins(len, 12, bin, 2, 100);
	/* three 60s do not fit two bins of 100 although 180 tokens would */
	int64_t l3[3] = {60, 60, 60}, w3[3] = {1, 1, 1};
	CHECK(bp_pack_kk(w3, l3, 3, 2, 100, bin, load, fill, &err) == 1);
	CHECK(bp_pack_kk(w3, l3, 3, 3, 100, bin, load, fill, &err) == 0);
	/* one bin: everything together */
	CHECK(bp_pack_kk(w3, l3, 3, 1, 150, bin, load, fill, &err) == 1);
	CHECK(bp_pack_kk(w3, l3, 3, 1, 180, bin, load, fill, &err) == 0 && fill[0] == 180);
}

static void test_lpt_tokens(void)
{
	struct bp_rng r;
	struct bp_error err;
	bp_rng_seed(&r, 13);
	for (int t = 0; t < 300; t++) {
		size_t n = 1 + (size_t)bp_rng_below(&r, 300), k = 1 + (size_t)bp_rng_below(&r, 32);
		int64_t cap = 4096, mxl = 0;
		int64_t *len = malloc(n * sizeof(int64_t)), *fill = malloc(k * sizeof(int64_t));
		int *bin = malloc(n * sizeof(int));
		gen(&r, len, n, cap, t % 4);
		for (size_t i = 0; i < n; i++)
			mxl = len[i] > mxl ? len[i] : mxl;
		int rc = bp_pack_lpt_tokens(len, n, k, cap, bin, fill, &err);
		CHECK(rc == 0 || rc == 1);
		if (rc == 0) {
			int64_t mx = check_bins(len, n, bin, k, cap), mn = fill[0];
			for (size_t b = 0; b < k; b++)
				mn = fill[b] < mn ? fill[b] : mn;
			CHECK(mx - mn <= mxl);
		}
		/* with the cap out of the way it always fits */
		CHECK(bp_pack_lpt_tokens(len, n, k, 1 << 30, bin, fill, &err) == 0);
		free(len);
		free(fill);
		free(bin);
	}
}

static void test_kk(void)
{
	struct bp_rng r;
	struct bp_error err;
	bp_rng_seed(&r, 14);
	int64_t coef = bp_kk_coef(bp_model_preset("llama3-8b"));
	CHECK(coef > 4096);
	int wins = 0, trials = 0;
	for (int t = 0; t < 300; t++) {
		size_t n = (size_t)bp_rng_below(&r, 400), k = 1 + (size_t)bp_rng_below(&r, 24);
		int64_t cap = t % 2 ? 16384 : 131072;
		int64_t *len = malloc((n + 1) * sizeof(int64_t)), *w = malloc((n + 1) * sizeof(int64_t));
		int64_t *load = malloc(k * sizeof(int64_t)), *fill = malloc(k * sizeof(int64_t));
		int64_t *rr = calloc(k, sizeof(int64_t)), tokens = 0;
		int *bin = malloc((n + 1) * sizeof(int));
		gen(&r, len, n, cap, t % 4);
		for (size_t i = 0; i < n; i++) {
			w[i] = bp_kk_proxy(len[i], coef);
			rr[i % k] += w[i];
			tokens += len[i];
		}
		/* unbounded cap: pure KK, compared with round-robin on the proxy's spread */
		CHECK(bp_pack_kk(w, len, n, k, INT64_MAX / 4, bin, load, fill, &err) == 0);
		check_bins(len, n, bin, k, INT64_MAX / 4);
		int64_t kmx = load[0], kmn = load[0], rmx = rr[0], rmn = rr[0], sum = 0;
		for (size_t b = 0; b < k; b++) {
			kmx = load[b] > kmx ? load[b] : kmx;
			kmn = load[b] < kmn ? load[b] : kmn;
			rmx = rr[b] > rmx ? rr[b] : rmx;
			rmn = rr[b] < rmn ? rr[b] : rmn;
			sum += load[b];
		}
		for (size_t i = 0; i < n; i++)
			sum -= w[i];
		CHECK(sum == 0);
		if (n > 2 * k && k > 1) {
			trials++;
			wins += kmx - kmn < rmx - rmn;
		}
		/* with the cap: enough bins for the tokens, grow until the repair succeeds */
		size_t kk = (size_t)((tokens + cap - 1) / cap);
		kk = kk < 1 ? 1 : kk;
		int rc;
		free(load);
		free(fill);
		load = malloc((kk + n + 1) * sizeof(int64_t));
		fill = malloc((kk + n + 1) * sizeof(int64_t));
		while ((rc = bp_pack_kk(w, len, n, kk, cap, bin, load, fill, &err)) == 1)
			kk++;
		CHECK(rc == 0);
		CHECK(kk <= (n ? n : 1));
		check_bins(len, n, bin, kk, cap);
		free(len);
		free(w);
		free(load);
		free(fill);
		free(rr);
		free(bin);
	}
	CHECK(trials > 100 && wins == trials);
}

/* method on 32 GPUs of scheme sc, 4 steps of synthetic-longtail at 12 max_tokens each. */
static int solve(const char *method, struct bp_scheme sc, int64_t max_tokens, uint64_t seed,
		 struct bp_profile *prof, struct bp_plan *plan)
{
	struct bp_error err;
	struct bp_solve_opts o = test_solve_opts(method, "synthetic-longtail", sc, 32);
	o.steps = 4;
	o.max_tokens = max_tokens;
	o.tokens_per_step = 12 * max_tokens;
	o.seed = seed;
	int rc = test_solve_preset(prof, &o, plan, &err);
	if (rc)
		fprintf(stderr, "solve %s: %s\n", method, err.text);
	return rc;
}

/* Plans through bp_solve validate, repeat byte for byte, and keep each method's promise. */
static void test_solve(void)
{
	const char *methods[4] = {"ffd", "bfd", "multipack", "kk"};
	struct bp_scheme sc = {2, 2, 2};
	struct bp_profile prof;
	struct bp_error err;
	bp_profile_init(&prof);
	CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), &sc,
				  1, 16384, &err) == 0);
	for (size_t m = 0; m < 4; m++)
		for (uint64_t seed = 1; seed <= 3; seed++) {
			struct bp_plan a, b;
			int64_t L = 16384; /* 32 GPUs: dp 4, three windows' worth each */
			bp_plan_init(&a);
			bp_plan_init(&b);
			if (solve(methods[m], sc, L, seed, &prof, &a) != 0 ||
			    solve(methods[m], sc, L, seed, &prof, &b) != 0) {
				CHECK(0);
				continue;
			}
			CHECK(bp_plan_validate(&a, NULL, &err) == 0);
			char *x = plan_text(&a, TEXT_CANONICAL), *y = plan_text(&b, TEXT_CANONICAL);
			CHECK(x && y && !strcmp(x, y));
			free(x);
			free(y);
			for (size_t s = 0; s < a.nsteps; s++) {
				const struct bp_step *st = &a.steps[s];
				int64_t mxl = 0, pmx = 0, pmn = INT64_MAX;
				size_t cmx = 0, cmn = SIZE_MAX;
				for (size_t i = 0; i < st->ndocs; i++)
					mxl = st->docs[i].len > mxl ? st->docs[i].len : mxl;
				for (size_t p = 0; p < st->npipes; p++) {
					int64_t tok = 0;
					for (size_t q = 0; q < st->pipes[p].nmbs; q++) {
						CHECK(st->pipes[p].mbs[q].tokens <= L);
						tok += st->pipes[p].mbs[q].tokens;
					}
					pmx = tok > pmx ? tok : pmx;
					pmn = tok < pmn ? tok : pmn;
					cmx = st->pipes[p].nmbs > cmx ? st->pipes[p].nmbs : cmx;
					cmn = st->pipes[p].nmbs < cmn ? st->pipes[p].nmbs : cmn;
				}
				if (!strcmp(methods[m], "multipack")) {
					CHECK(pmx - pmn <= mxl); /* LPT + snake deal */
					CHECK(cmx == cmn);       /* m micro-batches each */
				}
				if (!strcmp(methods[m], "ffd") || !strcmp(methods[m], "bfd"))
					CHECK(cmx <= cmn + 1); /* round-robin */
			}
			bp_plan_release(&a);
			bp_plan_release(&b);
		}
	bp_profile_release(&prof);
}

int main(void)
{
	test_ffd_bfd();
	test_ffd_bfd_regimes();
	test_known_optimum();
	test_bad_items();
	test_lpt_tokens();
	test_kk_repair();
	test_kk();
	test_solve();
	return CHECK_DONE();
}
