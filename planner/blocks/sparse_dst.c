/* sparse_dst.c: SparseBalance's DST and Spar building blocks (sparse_dst.h).
 *
 * The SparseBalance paper: Sec. IV-A (Eq. 3-7, Alg. 1, Dynamic Sparsity Tuning), Sec. IV-B
 * (Eq. 8-9, Perf.predict / Perf.align), Sec. IV-C (Alg. 2's Spar bins), Sec. V-B3 (Eq. 11).
 * Where the paper leaves a point open, the reading is ours (sparse_dst.h gives the reasons):
 * align returns min K when nothing fits and the largest tying k on flat rows; Eq. 6-7 are read
 * as k_final = max(k_anchor, k_cov); the synthetic coverage is a seeded power law.
 * Invariants: align's result is in K; k_cov in K and non-increasing in p; nothing here keeps
 * state between calls (struct bp_sb_syn, bp_sb_syn_solve's tables, is the caller's). */
#include "sparse_dst.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costkinds.h"
#include "rng.h"

static const char *const anchor_names[] = {"min", "mean", "max"};

int bp_sb_anchor_parse(const char *s, enum bp_sb_anchor *out)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, anchor_names[i])) {
			*out = (enum bp_sb_anchor)i;
			return 0;
		}
	return -1;
}

const char *bp_sb_anchor_name(enum bp_sb_anchor a)
{
	return (unsigned)a < 3 ? anchor_names[a] : "?";
}

int bp_sb_kset_parse(const char *s, int **out, size_t *n, struct bp_error *err)
{
	size_t cap = 1;
	for (const char *c = s; *c; c++)
		cap += *c == ',';
	int *k = bp_calloc(cap, sizeof(*k), err);
	if (!k)
		return -1;
	size_t m = 0;
	const char *c = s;
	for (;;) {
		/* one entry up to the next comma, parsed by bp_parse_int64 (no spaces, no sign
		 * games: the one number grammar) */
		const char *end = strchr(c, ',');
		size_t len = end ? (size_t)(end - c) : strlen(c);
		char num[24];
		int64_t v = 0;
		if (!end)
			end = c + len;
		if (len < sizeof(num)) {
			memcpy(num, c, len);
			num[len] = 0;
		}
		if (len >= sizeof(num) || bp_parse_int64(num, &v, "budget", NULL) < 0 || v < 1 ||
		    v > (1L << 20) || (m && v <= k[m - 1])) {
			free(k);
			return bp_errorf(err, "budget set '%s': entry %zu is not an integer in [1, "
					 "1048576] above the one before", s, m + 1);
		}
		k[m++] = (int)v;
		if (!*end)
			break;
		c = end + 1;
	}
	*out = k;
	*n = m;
	return 0;
}

double bp_sb_predict(const struct bp_sparse_table *t, const int64_t *lens, size_t n,
		     double other, double k, int fwd_only)
{
	double s = other;
	for (size_t i = 0; i < n; i++) {
		s += bp_cost_sparse_attn(t, (double)lens[i], k, 0);
		if (!fwd_only)
			s += bp_cost_sparse_attn(t, (double)lens[i], k, 1);
	}
	return s;
}

/* Eq. 9 by binary search: predict is non-decreasing in k (costkinds.h), so the k with
 * predict <= target form a prefix of K. */
int bp_sb_align(const struct bp_sparse_table *t, const int64_t *lens, size_t n, double other,
		const int *kset, size_t nk, double target, int fwd_only)
{
	size_t lo = 0, hi = nk; /* answer: the last index of the prefix, in [lo - 1, hi) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bp_sb_predict(t, lens, n, other, kset[mid], fwd_only) <= target)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? kset[lo - 1] : kset[0];
}

double bp_sb_anchor_time(const double *T, size_t n, enum bp_sb_anchor a)
{
	double v = T[0], s = 0.0;
	for (size_t i = 0; i < n; i++) {
		s += T[i];
		if (a == BP_SB_MIN ? T[i] < v : T[i] > v)
			v = T[i];
	}
	return a == BP_SB_MEAN ? s / (double)n : v;
}

int bp_sb_kcov(const int *kset, size_t nk, const double *c, double c_base, int k_base,
	       double p)
{
	/* C is non-decreasing in k, so the first k that meets the bound is the smallest; the
	 * 1e-12 absorbs rounding in coverage sums that equal p exactly. */
	for (size_t i = 0; i < nk && kset[i] <= k_base; i++)
		if (c_base - c[i] <= p + 1e-12)
			return kset[i];
	return k_base;
}

/* sum_{j=1}^{upto} j^-alpha. */
static double power_sum(int64_t upto, double alpha)
{
	double s = 0.0;
	for (int64_t j = 1; j <= upto; j++)
		s += alpha == 0.0 ? 1.0 : exp(-alpha * log((double)j));
	return s;
}

/* f(alpha) = S(head)/S(m) - 0.9 and its derivative, one pass over j = 1..m; lj[j - 1] =
 * log j when the caller has the table (NULL: computed here). */
static double syn_f(int64_t head, int64_t m, double alpha, const double *lj_tab, double *df)
{
	double sh = 0, sm = 0, dh = 0, dm = 0;
	for (int64_t j = 1; j <= m; j++) {
		double lj = lj_tab ? lj_tab[j - 1] : log((double)j), t = exp(-alpha * lj);
		sm += t;
		dm -= lj * t;
		if (j == head) {
			sh = sm;
			dh = dm;
		}
	}
	*df = (dh * sm - sh * dm) / (sm * sm);
	return sh / sm - 0.9;
}

double bp_sb_syn_alpha(int64_t m, int k90)
{
	int64_t head = k90 - 1; /* past chunks the budget k90 selects beside the own one */
	if (head <= 0 || m <= head || (double)head / (double)m >= 0.9)
		return 0.0;
	/* f rises from head/m - 0.9 < 0 at alpha = 0 towards 0.1: safeguarded Newton inside a
	 * bracket that every step keeps (bisection when Newton leaves it). The logs are taken
	 * once (a failed allocation only costs time). */
	double *lj = malloc((size_t)m * sizeof(*lj));
	for (int64_t j = 1; lj && j <= m; j++)
		lj[j - 1] = log((double)j);
	double lo = 0.0, hi = 1.0, df;
	while (hi < 64 && syn_f(head, m, hi, lj, &df) < 0)
		hi *= 2;
	double x = 0.5 * (lo + hi);
	for (int it = 0; it < 100 && hi - lo > 1e-13; it++) {
		double f = syn_f(head, m, x, lj, &df);
		if (f < 0)
			lo = x;
		else
			hi = x;
		if (fabs(f) < 1e-13)
			break;
		double nx = df > 0 ? x - f / df : lo - 1;
		x = nx > lo && nx < hi ? nx : 0.5 * (lo + hi);
	}
	free(lj);
	return x;
}

void bp_sb_syn_cov(int64_t m, double alpha, const int *kset, size_t nk, int k_base, double *c,
		   double *c_base)
{
	/* power_sum at every k - 1 below m and at m from one pass over j = 1..m: each prefix is
	 * the same additions in the same order as power_sum's own loop, so the same double. The
	 * targets (k - 1 < m, index nk for k_base) in increasing order, by insertion. */
	int64_t at[65];
	size_t nt = 0;
	double *want[65], s = 0.0, pre[65];
	if (nk + 1 > 64) { /* a large budget set: one power_sum per budget */
		double total = power_sum(m, alpha);
		for (size_t i = 0; i < nk; i++)
			c[i] = kset[i] - 1 >= m ? 1.0 : power_sum(kset[i] - 1, alpha) / total;
		*c_base = k_base - 1 >= m ? 1.0 : power_sum(k_base - 1, alpha) / total;
		return;
	}
	for (size_t i = 0; i <= nk; i++) {
		int64_t u = (i < nk ? kset[i] : k_base) - 1;
		double *out = i < nk ? &c[i] : c_base;
		if (u >= m) {
			*out = 1.0;
			continue;
		}
		size_t k = nt++;
		for (; k > 0 && at[k - 1] > u; k--) {
			at[k] = at[k - 1];
			want[k] = want[k - 1];
		}
		at[k] = u;
		want[k] = out;
	}
	size_t t = 0;
	while (t < nt && at[t] <= 0)
		pre[t++] = s;
	for (int64_t j = 1; j <= m; j++) {
		s += alpha == 0.0 ? 1.0 : exp(-alpha * log((double)j));
		while (t < nt && at[t] == j)
			pre[t++] = s;
	}
	for (size_t k = 0; k < nt; k++)
		*want[k] = pre[k] / s;
}

/* The alphas struct bp_sb_syn tabulates: bp_sb_syn_alpha's bracket points hi = 1, 2, ..., 32
 * (64 ends the search untried) and its first Newton point 0.5 * (lo + hi), lo = hi / 2 (0 for
 * hi = 1); all exact in binary, so a solve meets them by exact comparison. */
static const double syn_tab_alpha[BP_SB_SYN_NA] = {0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32,
						   48};

void bp_sb_syn_free(struct bp_sb_syn *s)
{
	free(s->lj);
	for (int a = 0; a < BP_SB_SYN_NA; a++) {
		free(s->p[a]);
		free(s->d[a]);
	}
	free(s->sp);
	free(s->sd);
	memset(s, 0, sizeof(*s));
}

/* The prefix sums of syn_f's pass at alpha, p[j] = sm and d[j] = dm after term j: the same
 * operations in the same order, so the same doubles. */
static void syn_prefix(const double *lj, int64_t m, double alpha, double *p, double *d)
{
	double sm = 0, dm = 0;
	p[0] = d[0] = 0;
	for (int64_t j = 1; j <= m; j++) {
		double l = lj[j - 1], t = exp(-alpha * l);
		sm += t;
		dm -= l * t;
		p[j] = sm;
		d[j] = dm;
	}
}

/* Makes s hold everything up to m (rebuilt whole: the prefix sums start at j = 1). */
static int syn_grow(struct bp_sb_syn *s, int64_t m)
{
	if (m <= s->cap)
		return 0;
	struct bp_sb_syn n;
	memset(&n, 0, sizeof(n));
	n.cap = m > 2 * s->cap ? m : 2 * s->cap;
	if (n.cap < 256)
		n.cap = 256;
	size_t sz = (size_t)(n.cap + 1) * sizeof(double);
	int ok = (n.lj = malloc(sz)) && (n.sp = malloc(sz)) && (n.sd = malloc(sz));
	for (int a = 0; ok && a < BP_SB_SYN_NA; a++)
		ok = (n.p[a] = malloc(sz)) && (n.d[a] = malloc(sz));
	if (!ok) {
		bp_sb_syn_free(&n);
		return -1;
	}
	for (int64_t j = 1; j <= n.cap; j++)
		n.lj[j - 1] = log((double)j);
	for (int a = 0; a < BP_SB_SYN_NA; a++)
		syn_prefix(n.lj, n.cap, syn_tab_alpha[a], n.p[a], n.d[a]);
	bp_sb_syn_free(s);
	*s = n;
	return 0;
}

/* syn_f at alpha from s's tables (one pass into s->sp, s->sd when alpha is not tabulated);
 * *pp: the prefix sums of j^-alpha it used. */
static double syn_f_tab(struct bp_sb_syn *s, int64_t head, int64_t m, double alpha, double *df,
			const double **pp)
{
	const double *p = s->sp, *d = s->sd;
	int a = 0;
	while (a < BP_SB_SYN_NA && syn_tab_alpha[a] != alpha)
		a++;
	if (a < BP_SB_SYN_NA) {
		p = s->p[a];
		d = s->d[a];
	} else {
		syn_prefix(s->lj, m, alpha, s->sp, s->sd);
	}
	double sh = p[head], sm = p[m], dh = d[head], dm = d[m];
	*df = (dh * sm - sh * dm) / (sm * sm);
	*pp = p;
	return sh / sm - 0.9;
}

/* bp_sb_syn_cov's results from the prefix sums p of its pass (p[0] = 0 stands for every
 * empty prefix). */
static void syn_fill(const double *p, int64_t m, const int *kset, size_t nk, int k_base,
		     double *c, double *c_base)
{
	for (size_t i = 0; i <= nk; i++) {
		int64_t u = (i < nk ? kset[i] : k_base) - 1;
		double *out = i < nk ? &c[i] : c_base;
		*out = u >= m ? 1.0 : (u <= 0 ? 0.0 : p[u]) / p[m];
	}
}

void bp_sb_syn_solve(struct bp_sb_syn *s, int64_t m, int k90, const int *kset, size_t nk,
		     int k_base, double *c, double *c_base)
{
	int64_t head = k90 - 1;
	if (head <= 0 || m <= head || (double)head / (double)m >= 0.9 || syn_grow(s, m) < 0) {
		/* alpha = 0 (cheap) or no tables */
		bp_sb_syn_cov(m, bp_sb_syn_alpha(m, k90), kset, nk, k_base, c, c_base);
		return;
	}
	/* bp_sb_syn_alpha's steps, each syn_f from the tables */
	const double *p, *px = NULL;
	double lo = 0.0, hi = 1.0, df;
	while (hi < 64 && syn_f_tab(s, head, m, hi, &df, &p) < 0)
		hi *= 2;
	double x = 0.5 * (lo + hi);
	for (int it = 0; it < 100 && hi - lo > 1e-13; it++) {
		double f = syn_f_tab(s, head, m, x, &df, &p);
		if (f < 0)
			lo = x;
		else
			hi = x;
		if (fabs(f) < 1e-13) {
			px = p; /* the pass was at the alpha returned */
			break;
		}
		double nx = df > 0 ? x - f / df : lo - 1;
		x = nx > lo && nx < hi ? nx : 0.5 * (lo + hi);
	}
	if (!px) {
		syn_prefix(s->lj, m, x, s->sp, s->sd);
		px = s->sp;
	}
	syn_fill(px, m, kset, nk, k_base, c, c_base);
}

int bp_sb_syn_k90(uint64_t seed, int64_t doc, int layer, int layers, double lo, double hi,
		  double slope)
{
	struct bp_rng r;
	/* One generator per (seed, doc, layer): the odd multipliers spread the pair over 64
	 * bits before splitmix64 (inside bp_rng_seed) mixes them. */
	bp_rng_seed(&r, seed ^ ((uint64_t)doc * 0x9E3779B97F4A7C15ull) ^
				((uint64_t)(layer + 1) * 0xC2B2AE3D27D4EB4Full));
	double u = bp_rng_uniform(&r);
	double k90 = lo * exp(u * log(hi / lo));
	if (layers > 1)
		k90 *= 1.0 + slope * (double)layer / (double)(layers - 1);
	long v = lround(k90);
	return v < 2 ? 2 : (int)v;
}

size_t bp_sb_bin(const struct bp_sparse_table *t, int64_t len)
{
	size_t i = 0;
	while (i + 1 < t->nx && t->x[i + 1] <= (double)len)
		i++;
	return i;
}

double bp_sb_imbalance(const double *T, size_t n)
{
	double mx = 0.0, s = 0.0;
	for (size_t i = 0; i < n; i++) {
		s += T[i];
		if (T[i] > mx)
			mx = T[i];
	}
	return s > 0.0 ? mx * (double)n / s : 1.0;
}

double bp_sb_imbalance_slot(const double *T, size_t npipes, size_t per)
{
	double mx = 0.0, s = 0.0;
	for (size_t i = 0; i < per; i++) {
		double a = 0.0;
		for (size_t q = 0; q < npipes; q++)
			a += T[q * per + i];
		a /= (double)npipes;
		s += a;
		if (a > mx)
			mx = a;
	}
	return s > 0.0 ? mx * (double)per / s : 1.0;
}

void bp_sb_coverage_init(struct bp_sb_coverage *c)
{
	memset(c, 0, sizeof(*c));
}

void bp_sb_coverage_release(struct bp_sb_coverage *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nbins; i++)
		free(c->bins[i].k);
	free(c->bins);
	free(c->p);
	bp_sb_coverage_init(c);
}

int bp_sb_coverage_kcov(const struct bp_sb_coverage *c, int64_t len, int layer, size_t ip,
			uint64_t seed, int64_t doc, struct bp_error *err)
{
	for (size_t i = 0; i < c->nbins; i++) {
		const struct bp_sb_covbin *b = &c->bins[i];
		if (len < b->lo || len > b->hi)
			continue;
		struct bp_rng r;
		/* a stream apart from the synthetic k90 draw's (the extra constant) */
		bp_rng_seed(&r, seed ^ 0x5851F42D4C957F2Dull ^
					((uint64_t)doc * 0x9E3779B97F4A7C15ull) ^
					((uint64_t)(layer + 1) * 0xC2B2AE3D27D4EB4Full));
		size_t q = (size_t)bp_rng_below(&r, c->nq);
		return b->k[((size_t)layer * c->np + ip) * c->nq + q];
	}
	return bp_errorf(err, "the coverage file has no bin for a document of %lld tokens",
			 (long long)len);
}
