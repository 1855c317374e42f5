/* hyd_propose.c: Hydraulis's data-distribution-aware strategy proposal (Sec. 7, Eq. 4,
 * Fig. 9, footnote 4): the dataset's length histogram, the DP over GPU counts and length
 * intervals, its continuous relaxation and the rounding rule, giving the candidate set S^.
 * Called by `balplan propose` and by `balplan solve -m hydraulis` without --strategies.
 *
 * The DP (Eq. 4, with 0 < l' <= l as spec Sec. 12.2 says): t[n][l] is the least propagation
 * time of the dataset's sequences of length <= l on at most n GPU units, each length
 * interval (l - l', l] served by d pipelines of one scheme P_k with MaxLen(P_k, d) >= l:
 *   t[n][l] = min(t[n-1][l], min_{k,d,l'} max(t[n - d N(P_k)][l - l'], W_k(l - l', l] / d)),
 * W_k = sum of T(x, P_k) over the interval's expected sequences (per step). t[n][0] = 0 for
 * every n (the code's rule: all GPUs may serve one interval), t[0][l > 0] = infinity.
 *
 * The relaxation (Sec. 7 "Continuous relaxation"): the same DP with d = m u / N(P_k) for any
 * whole number m of GPU units u, so a scheme larger than the unit may get a fraction of a
 * pipeline and one pipeline may serve several intervals (Fig. 9). The paper's step is 0.1;
 * ours is the DP's GPU unit (gpu_step), which keeps the table small.
 *
 * The rounding rule (the paper gives none; spec Sec. 15.3): the relaxed S[N][L] gives each
 * scheme k a total D_k = sum of its intervals' d. Every combination of floor(D_k) or
 * ceil(D_k) per scheme that fits the cluster (sum D'_k N(P_k) <= N) is a candidate if every
 * length bucket up to L with sequences can still be served: a bucket keeps its scheme when
 * that scheme keeps a pipeline, else it moves to the kept scheme of smallest sufficient
 * MaxLen (ties: the earlier scheme); a combination that leaves a bucket unserved is dropped.
 * Its expected time is max_k W'_k / D'_k (the buckets' work pooled per scheme, Fig. 9's
 * "rounding requires scaling the resulting latency"); roundings more than relax_slack
 * slower than the best solution at their L are dropped ("nearby" solutions). The integer
 * DP's S[N][L] is always a candidate too, with expected time t[N][L]. Strategies that are
 * sub-multisets of another candidate are dropped (more pipelines of the same schemes never
 * dispatch worse).
 *
 * Which L: the paper takes every L <= L_max. A strategy proposed only for lengths that no
 * step's longest sequence reaches (P(longest <= L) = F(L)^(sequences per step) below
 * min_prob) would be too short for every step, so those L are skipped. */
#include "hyd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bp_hyd_hist_release(struct bp_hyd_hist *h)
{
	if (!h)
		return;
	free(h->cnt);
	free(h->s1);
	free(h->s2);
	free(h->xmax);
	memset(h, 0, sizeof(*h));
}

static int hist_alloc(struct bp_hyd_hist *h, int64_t step, int64_t top, struct bp_error *err)
{
	memset(h, 0, sizeof(*h));
	if (step < 1 || top < 1)
		return bp_errorf(err, "length step %lld and cap %lld must be >= 1", (long long)step,
				 (long long)top);
	h->step = step;
	h->top = top;
	h->nb = (size_t)((top + step - 1) / step);
	h->cnt = bp_calloc(h->nb + 1, sizeof(double), err);
	h->s1 = bp_calloc(h->nb + 1, sizeof(double), err);
	h->s2 = bp_calloc(h->nb + 1, sizeof(double), err);
	h->xmax = bp_calloc(h->nb + 1, sizeof(int64_t), err);
	if (!h->cnt || !h->s1 || !h->s2 || !h->xmax) {
		bp_hyd_hist_release(h);
		return -1;
	}
	return 0;
}

static size_t bucket_of(const struct bp_hyd_hist *h, int64_t x)
{
	return (size_t)((x + h->step - 1) / h->step);
}

/* Adds c sequences of length x. */
static void hist_add(struct bp_hyd_hist *h, int64_t x, double c)
{
	size_t b = bucket_of(h, x);
	h->cnt[b] += c;
	h->s1[b] += c * (double)x;
	h->s2[b] += c * (double)x * (double)x;
	if (c > 0 && x > h->xmax[b])
		h->xmax[b] = x;
}

int bp_hyd_hist_from_counts(const int64_t *len, const double *cnt, size_t n, int64_t step,
			    int64_t top, struct bp_hyd_hist *h, struct bp_error *err)
{
	if (hist_alloc(h, step, top, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (len[i] < 1 || len[i] > top || !(cnt[i] >= 0)) {
			bp_hyd_hist_release(h);
			return bp_errorf(err, "histogram entry %zu (length %lld, count %g) is outside "
					 "[1, %lld]", i, (long long)len[i], cnt[i], (long long)top);
		}
		hist_add(h, len[i], cnt[i]);
	}
	return 0;
}

/* Sum of x and x^2 over the integers [a, b]. */
static double sum1(double a, double b)
{
	return (a + b) * (b - a + 1) / 2.0;
}
static double sum2(double a, double b)
{
	return (b * (b + 1) * (2 * b + 1) - (a - 1) * a * (2 * a - 1)) / 6.0;
}

/* The integral of (u - 1/2)^k / u over [a, b] for k = 0, 1, 2: floor(u) ~ u - 1/2. */
static void logint(double a, double b, double out[3])
{
	double L = log(b / a);
	out[0] = L;
	out[1] = (b - a) - 0.5 * L;
	out[2] = (b * b - a * a) / 2.0 - (b - a) + 0.25 * L;
}

int bp_hyd_hist_from_dataset(const struct bp_dataset *ds, int64_t max_tokens,
			     enum bp_overlen overlen, int64_t step, int64_t tokens_per_step,
			     int64_t docs_per_step, struct bp_hyd_hist *h, struct bp_error *err)
{
	if (hist_alloc(h, step, max_tokens, err) < 0)
		return -1;
	double over = 0.0; /* documents longer than max_tokens */
	if (ds->lengths) {
		for (size_t i = 0; i < ds->nlengths; i++) {
			if (ds->lengths[i] > max_tokens)
				over += 1.0;
			else if (ds->lengths[i] >= 1)
				hist_add(h, ds->lengths[i], 1.0);
		}
	} else {
		for (size_t i = 0; i < ds->nbins; i++) {
			const struct bp_bin *bn = &ds->bins[i];
			if (bn->count <= 0)
				continue;
			double c = (double)bn->count;
			int64_t hi = bn->hi < max_tokens ? bn->hi : max_tokens;
			if (bn->lo == bn->hi) {
				if (bn->lo > max_tokens)
					over += c;
				else
					hist_add(h, bn->lo, c);
				continue;
			}
			int lg = ds->rule == BP_BIN_LOGUNIFORM;
			double span = lg ? log(((double)bn->hi + 1.0) / (double)bn->lo)
					 : (double)(bn->hi - bn->lo + 1);
			for (int64_t a = bn->lo; a <= hi;) {
				size_t b = bucket_of(h, a);
				int64_t e = (int64_t)b * step;
				if (e > hi)
					e = hi;
				double m[3];
				if (lg) {
					logint((double)a, (double)e + 1.0, m);
					m[0] /= span;
					m[1] /= span;
					m[2] /= span;
				} else {
					m[0] = (double)(e - a + 1) / span;
					m[1] = sum1((double)a, (double)e) / span;
					m[2] = sum2((double)a, (double)e) / span;
				}
				h->cnt[b] += c * m[0];
				h->s1[b] += c * m[1];
				h->s2[b] += c * m[2];
				if (e > h->xmax[b])
					h->xmax[b] = e;
				a = e + 1;
			}
			if (bn->hi > max_tokens)
				over += c * (lg ? log(((double)bn->hi + 1.0) / ((double)max_tokens + 1.0))
						  / span
						: (double)(bn->hi - max_tokens) / span);
		}
	}
	if (over > 0 && overlen != BP_OVERLEN_DROP)
		hist_add(h, max_tokens, over); /* truncated to the cap */
	double docs = 0.0, tokens = 0.0;
	for (size_t b = 1; b <= h->nb; b++) {
		docs += h->cnt[b];
		tokens += h->s1[b];
	}
	if (!(docs > 0) || !(tokens > 0)) {
		bp_hyd_hist_release(h);
		return bp_errorf(err, "dataset '%s' has no documents of at most %lld tokens",
				 ds->name, (long long)max_tokens);
	}
	double f = docs_per_step > 0 ? (double)docs_per_step / docs
				     : (double)tokens_per_step / tokens;
	for (size_t b = 1; b <= h->nb; b++) {
		h->cnt[b] *= f;
		h->s1[b] *= f;
		h->s2[b] *= f;
	}
	return 0;
}

/* ---- the DP (Eq. 4) ---- */

void bp_hyd_dp_release(struct bp_hyd_dp *dp)
{
	if (!dp)
		return;
	free(dp->t);
	free(dp->how);
	memset(dp, 0, sizeof(*dp));
}

static int64_t gcd64(int64_t a, int64_t b)
{
	while (b) {
		int64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* The work of scheme k on the buckets (i, j]: prefix sums of a s2 + b s1 + c cnt, plus
 * the code's warm-up term when asked. */
struct work {
	const struct bp_hyd_hist *h;
	double *pre;     /* [nk][nb + 1] */
	size_t *lastne;  /* [nb + 1]: the last bucket <= j with sequences, 0 when none */
	int warmup;
	int indivisible;
};

static double work_of(const struct work *w, const struct bp_hyd_pscheme *k, size_t ki,
		      size_t i, size_t j)
{
	const double *pre = w->pre + ki * (w->h->nb + 1);
	double v = pre[j] - pre[i];
	if (w->warmup && k->pp > 1 && w->lastne[j] > i)
		v += (k->pp - 1) * bp_hyd_T(&k->fit, (double)w->h->xmax[w->lastne[j]]);
	return v;
}

/* The interval's latency on d pipelines: W / d (Eq. 4), and, with `indivisible`, at least
 * PP T(x) for its longest sequence x, which one pipeline runs whole (Eq. 2's bound,
 * App. D.1). Non-decreasing as the interval grows downward, as the two-pointer walk needs. */
static double lat(const struct work *w, const struct bp_hyd_pscheme *k, size_t ki, size_t i,
		  size_t j, double d)
{
	double v = work_of(w, k, ki, i, j) / d;
	if (w->indivisible && w->lastne[j] > i) {
		double one = k->pp * bp_hyd_T(&k->fit, (double)w->h->xmax[w->lastne[j]]);
		if (one > v)
			v = one;
	}
	return v;
}

static int work_make(struct work *w, const struct bp_hyd_hist *h,
		     const struct bp_hyd_pscheme *k, size_t nk, int warmup, struct bp_error *err)
{
	memset(w, 0, sizeof(*w));
	w->h = h;
	w->warmup = warmup;
	w->pre = bp_calloc(nk * (h->nb + 1), sizeof(double), err);
	w->lastne = bp_calloc(h->nb + 1, sizeof(size_t), err);
	if (!w->pre || !w->lastne)
		return -1;
	for (size_t q = 0; q < nk; q++) {
		double *pre = w->pre + q * (h->nb + 1);
		const struct bp_hyd_fit *f = &k[q].fit;
		for (size_t b = 1; b <= h->nb; b++) {
			double c = h->cnt[b] > 0 ? f->a * h->s2[b] + f->b * h->s1[b] + f->c * h->cnt[b]
						 : 0.0;
			pre[b] = pre[b - 1] + (c > 0 ? c : 0.0);
		}
	}
	for (size_t b = 1; b <= h->nb; b++)
		w->lastne[b] = h->cnt[b] > 0 ? b : w->lastne[b - 1];
	return 0;
}

static void work_release(struct work *w)
{
	free(w->pre);
	free(w->lastne);
}

static int64_t maxlen_at(const struct bp_hyd_pscheme *k, double d)
{
	size_t i = d < 1.0 ? 1 : (size_t)floor(d + 1e-9);
	if (i > k->nd)
		i = k->nd;
	return k->nd ? k->maxlen[i] : 0;
}

static int64_t top_of(const struct bp_hyd_hist *h, size_t l)
{
	int64_t t = (int64_t)l * h->step;
	return t < h->top ? t : h->top;
}

int bp_hyd_dp_run(const struct bp_hyd_hist *h, const struct bp_hyd_pscheme *k, size_t nk,
		  const struct bp_hyd_propose_opts *o, int relaxed, struct bp_hyd_dp *dp,
		  struct bp_error *err)
{
	struct work w;
	int rc = -1;
	memset(dp, 0, sizeof(*dp));
	if (o->gpu_step < 1 || o->gpus < o->gpu_step)
		return bp_errorf(err, "GPU step %d must be in [1, %d GPUs]", o->gpu_step, o->gpus);
	size_t nu = (size_t)(o->gpus / o->gpu_step), nb = h->nb, W = nb + 1;
	if ((double)(nu + 1) * (double)W > 5e7)
		return bp_errorf(err, "the proposal table of %zu GPU units x %zu length buckets is "
				 "too large; raise the GPU or length step", nu + 1, W);
	if (work_make(&w, h, k, nk, o->warmup, err) < 0)
		goto out;
	w.indivisible = o->indivisible;
	dp->nu = nu;
	dp->nb = nb;
	dp->relaxed = relaxed;
	dp->unit = o->gpu_step;
	dp->t = bp_calloc((nu + 1) * W, sizeof(double), err);
	dp->how = bp_calloc((nu + 1) * W, sizeof(*dp->how), err);
	/* Ties in t are broken by the sum of the intervals' latencies: among the solutions
	 * with the least slowest interval, the one whose other intervals are fastest, so GPUs
	 * the maximum does not need still go where they shorten an interval; then by the
	 * units the interval takes (more: spare GPUs still serve). */
	double *S = bp_calloc((nu + 1) * W, sizeof(double), err);
	int64_t *mstep = bp_calloc(nk ? nk : 1, sizeof(int64_t), err);
	if (!dp->t || !dp->how || !mstep || !S) {
		free(mstep);
		free(S);
		goto out;
	}
	for (size_t q = 0; q < nk; q++) {
		int64_t N = (int64_t)k[q].tp * k[q].pp;
		/* Integer d: whole pipelines filling whole units. Relaxed: any units. */
		mstep[q] = relaxed ? 1 : N / gcd64(o->gpu_step, N);
	}
	for (size_t n = 0; n <= nu; n++)
		for (size_t l = 0; l <= nb; l++) {
			double *T = dp->t;
			struct bp_hyd_choice *c = &dp->how[n * W + l];
			if (!l) {
				T[n * W] = 0.0;
				S[n * W] = 0.0;
				*c = (struct bp_hyd_choice){-2, 0, 0};
				continue;
			}
			if (!n) {
				T[l] = INFINITY;
				S[l] = INFINITY;
				*c = (struct bp_hyd_choice){-2, 0, 0};
				continue;
			}
			double best = T[(n - 1) * W + l], bests = S[(n - 1) * W + l];
			int64_t bm = 0; /* units of the best choice: on a full tie, more wins */
			struct bp_hyd_choice bc = {-1, 0, 0};
			int64_t top = top_of(h, l);
			for (size_t q = 0; q < nk; q++) {
				double unitd = (double)o->gpu_step / ((double)k[q].tp * k[q].pp);
				size_t p = 1;
				for (int64_t m = mstep[q]; m <= (int64_t)n; m += mstep[q]) {
					double d = (double)m * unitd;
					if (maxlen_at(&k[q], d) < top)
						continue; /* MaxLen(P_k, d) grows with d */
					const double *A = T + (n - (size_t)m) * W;
					const double *As = S + (n - (size_t)m) * W;
					/* the first p with W/d >= t[n - m][l - p] (W/d rises with p,
					 * t falls), not before the last m's (it only moves right); the
					 * optimum over p is there or one before */
					while (p < l && lat(&w, &k[q], q, l - p, l, d) < A[l - p])
						p++;
					for (size_t pp = p; pp + 1 >= p && pp >= 1; pp--) {
						double b = lat(&w, &k[q], q, l - pp, l, d);
						double v = A[l - pp] > b ? A[l - pp] : b;
						double vs = As[l - pp] + b;
						if (v < best || (v == best && (vs < bests ||
									       (vs == bests && m > bm)))) {
							best = v;
							bests = vs;
							bm = m;
							bc = (struct bp_hyd_choice){(int32_t)q, (int32_t)m,
										    (int32_t)pp};
						}
						if (pp == 1)
							break;
					}
				}
			}
			T[n * W + l] = best;
			S[n * W + l] = bests;
			*c = bc;
		}
	free(mstep);
	free(S);
	rc = 0;
out:
	work_release(&w);
	if (rc < 0)
		bp_hyd_dp_release(dp);
	return rc;
}

size_t bp_hyd_dp_trace(const struct bp_hyd_dp *dp, const struct bp_hyd_pscheme *k, size_t L,
		       struct bp_hyd_interval *out, size_t cap)
{
	size_t W = dp->nb + 1, n = dp->nu, l = L, m = 0;
	if (L > dp->nb || !isfinite(dp->t[n * W + L]))
		return 0;
	while (l > 0) {
		const struct bp_hyd_choice *c = &dp->how[n * W + l];
		if (c->k == -1) {
			n--;
			continue;
		}
		if (c->k < 0)
			break;
		if (m < cap)
			out[m] = (struct bp_hyd_interval){c->k,
							  (double)c->m * dp->unit /
							  ((double)k[c->k].tp * k[c->k].pp),
							  l - (size_t)c->p, l};
		m++;
		n -= (size_t)c->m;
		l -= (size_t)c->p;
	}
	return m < cap ? m : cap;
}

/* ---- the proposal ---- */

/* Adds st (or extends the one already there) for length L. */
static int offer(struct bp_hyd_set *out, struct bp_hyd_strategy *st, int64_t len,
		 double expected, struct bp_error *err)
{
	bp_hyd_strategy_canon(st);
	if (!st->ng)
		return 0;
	int i = bp_hyd_set_find(out, st);
	if (i < 0) {
		st->len_lo = st->len_hi = len;
		st->expected_us = expected;
		return bp_hyd_set_add(out, st, err) < 0 ? -1 : 0;
	}
	out->s[i].len_hi = len;
	out->s[i].expected_us = expected;
	return 0;
}

/* Every rounding of one relaxed solution (the rule in the file's head). */
static int round_relaxed(const struct bp_hyd_hist *h, const struct bp_hyd_pscheme *k,
			 size_t nk, const struct bp_hyd_propose_opts *o, const struct work *w,
			 const struct bp_hyd_interval *iv, size_t niv, size_t L, double t_int,
			 struct bp_hyd_set *out, struct bp_error *err)
{
	struct bp_hyd_strategy kept[64];
	size_t nkept = 0;
	double emin = t_int;
	int sch[BP_HYD_MAX_GROUPS];
	double D[BP_HYD_MAX_GROUPS];
	size_t ns = 0;
	int rc = -1;
	int *owner = bp_calloc(L + 1, sizeof(int), err); /* bucket -> relaxed scheme slot */
	double *load = bp_calloc(nk ? nk : 1, sizeof(double), err);
	int64_t *lx = bp_calloc(nk ? nk : 1, sizeof(int64_t), err);
	if (!owner || !load || !lx)
		goto out;
	for (size_t i = 0; i < niv; i++) {
		size_t s = 0;
		while (s < ns && sch[s] != iv[i].k)
			s++;
		if (s == ns) {
			if (ns == BP_HYD_MAX_GROUPS) {
				rc = 0; /* too many schemes to round: keep the integer DP's only */
				goto out;
			}
			sch[ns] = iv[i].k;
			D[ns++] = 0.0;
		}
		D[s] += iv[i].d;
		for (size_t b = iv[i].lo + 1; b <= iv[i].hi; b++)
			owner[b] = (int)s;
	}
	size_t ncombo = ns > 12 ? 1 : (size_t)1 << ns;
	for (size_t mask = 0; mask < ncombo; mask++) {
		int cnt[BP_HYD_MAX_GROUPS];
		int64_t gpus = 0, valid = 1;
		for (size_t s = 0; s < ns; s++) {
			double f = floor(D[s] + 1e-9), c = ceil(D[s] - 1e-9);
			if (f == c && (mask >> s & 1))
				valid = 0; /* an integral D: one choice, counted once */
			cnt[s] = (int)((mask >> s & 1) ? c : f);
			gpus += (int64_t)cnt[s] * k[sch[s]].tp * k[sch[s]].pp;
		}
		if (!valid || gpus > o->gpus || !gpus)
			continue;
		memset(load, 0, nk * sizeof(double));
		memset(lx, 0, nk * sizeof(int64_t));
		for (size_t b = 1; b <= L && valid; b++) {
			if (!(h->cnt[b] > 0))
				continue;
			int64_t top = top_of(h, b);
			int s = owner[b], pick = -1;
			if (cnt[s] > 0 && maxlen_at(&k[sch[s]], cnt[s]) >= top)
				pick = s;
			if (pick < 0) { /* the kept scheme of smallest sufficient MaxLen */
				int64_t best = INT64_MAX;
				for (size_t x = 0; x < ns; x++) {
					int64_t ml = cnt[x] > 0 ? maxlen_at(&k[sch[x]], cnt[x]) : 0;
					if (cnt[x] > 0 && ml >= top && ml < best) {
						best = ml;
						pick = (int)x;
					}
				}
			}
			if (pick < 0) {
				valid = 0;
				break;
			}
			size_t kq = (size_t)sch[pick];
			load[kq] += work_of(&(struct work){w->h, w->pre, w->lastne, 0, 0}, &k[kq], kq,
					    b - 1, b);
			if (h->xmax[b] > lx[kq])
				lx[kq] = h->xmax[b];
		}
		if (!valid)
			continue;
		struct bp_hyd_strategy st;
		memset(&st, 0, sizeof(st));
		double e = 0.0;
		for (size_t s = 0; s < ns; s++) {
			if (!cnt[s])
				continue;
			size_t kq = (size_t)sch[s];
			double v = load[kq];
			if (o->warmup && lx[kq] > 0)
				v += (k[kq].pp - 1) * bp_hyd_T(&k[kq].fit, (double)lx[kq]);
			v /= cnt[s];
			if (o->indivisible && lx[kq] > 0 &&
			    k[kq].pp * bp_hyd_T(&k[kq].fit, (double)lx[kq]) > v)
				v = k[kq].pp * bp_hyd_T(&k[kq].fit, (double)lx[kq]);
			if (v > e)
				e = v;
			st.g[st.ng++] = (struct bp_hyd_group){k[kq].tp, k[kq].pp, cnt[s]};
		}
		snprintf(st.origin, sizeof(st.origin), "relaxed");
		st.expected_us = e;
		if (e < emin)
			emin = e;
		if (nkept < BP_ARRAY_LEN(kept))
			kept[nkept++] = st;
	}
	for (size_t i = 0; i < nkept; i++)
		if (kept[i].expected_us <= emin * (1.0 + o->relax_slack) &&
		    offer(out, &kept[i], top_of(h, L), kept[i].expected_us, err) < 0)
			goto out;
	rc = 0;
out:
	free(owner);
	free(load);
	free(lx);
	return rc;
}

/* Is a a sub-multiset of b (every scheme of a in b with at least a's count)? */
static int submultiset(const struct bp_hyd_strategy *a, const struct bp_hyd_strategy *b)
{
	for (size_t i = 0; i < a->ng; i++) {
		int found = 0;
		for (size_t j = 0; j < b->ng && !found; j++)
			found = b->g[j].tp == a->g[i].tp && b->g[j].pp == a->g[i].pp &&
				b->g[j].count >= a->g[i].count;
		if (!found)
			return 0;
	}
	return 1;
}

int bp_hyd_propose(const struct bp_hyd_hist *h, const struct bp_hyd_pscheme *k, size_t nk,
		   const struct bp_hyd_propose_opts *o, struct bp_hyd_set *out,
		   struct bp_error *err)
{
	struct bp_hyd_dp di, dr;
	struct work w;
	struct bp_hyd_interval *iv = NULL;
	int rc = -1;
	memset(&di, 0, sizeof(di));
	memset(&dr, 0, sizeof(dr));
	memset(&w, 0, sizeof(w));
	if (!nk)
		return bp_errorf(err, "no parallel scheme to propose strategies from");
	size_t cap = h->nb + 1;
	iv = bp_calloc(cap, sizeof(*iv), err);
	if (!iv || work_make(&w, h, k, nk, o->warmup, err) < 0)
		goto out;
	if (bp_hyd_dp_run(h, k, nk, o, 0, &di, err) < 0)
		goto out;
	if (o->relaxed && bp_hyd_dp_run(h, k, nk, o, 1, &dr, err) < 0)
		goto out;
	size_t W = h->nb + 1;
	double ndocs = 0.0, cum = 0.0;
	for (size_t b = 1; b <= h->nb; b++)
		ndocs += h->cnt[b];
	for (size_t L = 1; L <= h->nb; L++) {
		cum += h->cnt[L];
		if (!(h->cnt[L] > 0))
			continue; /* no batch ends its lengths in an empty bucket */
		if (o->min_prob > 0 && cum < ndocs &&
		    ndocs * log(cum / ndocs) < log(o->min_prob))
			continue; /* no step's longest sequence is this short */
		size_t m = bp_hyd_dp_trace(&di, k, L, iv, cap);
		if (m) {
			struct bp_hyd_strategy st;
			memset(&st, 0, sizeof(st));
			for (size_t i = 0; i < m; i++) {
				if (st.ng == BP_HYD_MAX_GROUPS)
					break;
				st.g[st.ng++] = (struct bp_hyd_group){k[iv[i].k].tp, k[iv[i].k].pp,
								      (int)llround(iv[i].d)};
				bp_hyd_strategy_canon(&st);
			}
			snprintf(st.origin, sizeof(st.origin), "dp");
			if (offer(out, &st, top_of(h, L), di.t[di.nu * W + L], err) < 0)
				goto out;
		}
		if (o->relaxed) {
			m = bp_hyd_dp_trace(&dr, k, L, iv, cap);
			if (m && round_relaxed(h, k, nk, o, &w, iv, m, L, di.t[di.nu * W + L], out,
					       err) < 0)
				goto out;
		}
	}
	if (!out->n) {
		bp_errorf(err, "no strategy of the scheme space serves the dataset's lengths on %d "
			  "GPUs", o->gpus);
		goto out;
	}
	if (!o->keep_dominated) {
		size_t m = 0;
		for (size_t i = 0; i < out->n; i++) {
			int dom = 0;
			for (size_t j = 0; j < out->n && !dom; j++)
				dom = j != i && submultiset(&out->s[i], &out->s[j]);
			if (!dom)
				out->s[m++] = out->s[i];
		}
		out->n = m;
	}
	rc = 0;
out:
	free(iv);
	work_release(&w);
	bp_hyd_dp_release(&di);
	bp_hyd_dp_release(&dr);
	return rc;
}

/* ---- the proposal on a profile ---- */

size_t bp_hyd_space(const struct bp_model *m, int gpus_per_node, int gpus, int max_pp,
		    struct bp_scheme *out, size_t cap)
{
	size_t n = 0;
	for (int tp = 1; tp <= gpus_per_node && tp <= gpus; tp *= 2) {
		if (m->heads % tp)
			continue;
		for (int pp = 1; pp <= max_pp && pp <= m->layers; pp++)
			if (!(m->layers % pp) && (int64_t)tp * pp <= gpus && n < cap)
				out[n++] = (struct bp_scheme){tp, 1, pp};
	}
	return n;
}

/* The repository's configurations (spec Sec. 8): GPU step 1 and length step 128 up to 128
 * GPUs (7B and 13B on 16-32 GPUs), growing with the cluster (32B on 1024 GPUs: N_STEP 4,
 * S_STEP 1024); at most 256 length buckets at any context. */
void bp_hyd_default_steps(int gpus, int64_t max_tokens, int *gpu_step, int64_t *len_step)
{
	int64_t s = 128 * ((max_tokens + 128 * 256 - 1) / (128 * 256));
	*gpu_step = gpus > 256 ? gpus / 256 : 1;
	*len_step = gpus > 128 ? s * (gpus / 128) : s;
}

/* Prices scheme sc for a cluster of o->p.gpus GPUs: its MaxLen for d = 1 .. gpus / N(P)
 * pipelines (x->maxlen, x->nd, x->tp, x->pp) and, with `fit`, its T(l) fit on the cost model,
 * UtilLen and the "full" MaxLen (*full). x->maxlen is NULL (and 0 returned) when the scheme
 * cannot hold align tokens even with every GPU sharding. */
static int price_scheme(const struct bp_profile *prof, struct bp_scheme sc, int64_t max_tokens,
			const struct bp_hyd_space_opts *o, int fit, struct bp_hyd_pscheme *x,
			int64_t *full, struct bp_error *err)
{
	struct bp_costmodel cm;
	int gpus = o->p.gpus;
	x->maxlen = NULL;
	if (bp_costmodel_init(&cm, prof, sc, 1, err) < 0 ||
	    (fit && bp_hyd_fit_cost(&cm, max_tokens < 384 ? 384 : max_tokens, &x->fit, err) < 0)) {
		bp_costmodel_release(&cm);
		return bp_error_prefix(err, "scheme <%d,%d>", sc.tp, sc.pp);
	}
	size_t nd = (size_t)(gpus / (sc.tp * sc.pp));
	x->maxlen = bp_calloc(nd + 1, sizeof(int64_t), err);
	if (!x->maxlen) {
		bp_costmodel_release(&cm);
		return -1;
	}
	for (size_t d = 1; d <= nd; d++) {
		x->maxlen[d] = bp_hyd_maxlen(&cm, (int)d, o->align);
		/* MaxLen stops growing once the optimizer's share is small */
		if (d > 8 && x->maxlen[d] == x->maxlen[d - 1] && x->maxlen[d] == x->maxlen[d - 8]) {
			for (size_t e = d + 1; e <= nd; e++)
				x->maxlen[e] = x->maxlen[d];
			break;
		}
	}
	x->nd = nd;
	x->tp = sc.tp;
	x->pp = sc.pp;
	if (fit) {
		x->util_len = bp_hyd_util_len(&x->fit, max_tokens, o->align, o->theta);
		*full = bp_hyd_maxlen_full(&cm, gpus, o->align);
	}
	bp_costmodel_release(&cm);
	if (!nd || x->maxlen[nd] < o->align) {
		free(x->maxlen);
		x->maxlen = NULL;
	}
	return 0;
}

/* Sum of floor(n / s) over n = 1 .. nu. */
static double sum_floor(size_t nu, size_t s)
{
	double q = (double)(nu / s), r = (double)(nu % s);
	return (double)s * q * (q - 1.0) / 2.0 + q * (r + 1.0);
}

/* The counts of bp_hyd_dp_run's loops for one run (relaxed or not) on the priced schemes
 * ps[0 .. n) with nb buckets of `step` tokens up to `top` and nu units of `unit` GPUs. Per
 * scheme q with m stepping by mstep (1 relaxed, N(P) / gcd(unit, N(P)) otherwise):
 *   iterations   nb sum_{n=1}^{nu} floor(n / mstep)                     (every (n, l, m))
 *   evaluations  sum_m F(m) (nu - m + 1), F(m) = the buckets l whose top MaxLen(P, d(m))
 *                holds (nb when it holds the cap), d(m) = m unit / N(P)
 *   walk         sum_m min(mstep, nu - m + 1) F(m) (F(m) - 1) / 2
 * The walk is a bound: for each (n, l) the two-pointer p only moves right while the largest
 * m <= n holds bucket l (MaxLen grows with d), and stops before l; it reaches l - 1 when that
 * m is n itself (t[0][.] is infinite), so the bound is tight for the relaxed run. */
static void dp_count(const struct bp_hyd_pscheme *ps, size_t n, size_t nu, size_t nb,
		     int64_t step, int64_t top, int unit, int relaxed, struct bp_hyd_cost *c)
{
	c->iters += (double)nu * (double)nb * (double)n; /* the (n, l, q) heads */
	for (size_t q = 0; q < n; q++) {
		int64_t N = (int64_t)ps[q].tp * ps[q].pp;
		size_t ms = relaxed ? 1 : (size_t)(N / gcd64(unit, N));
		c->iters += (double)nb * sum_floor(nu, ms);
		for (size_t m = ms; m <= nu; m += ms) {
			int64_t ml = maxlen_at(&ps[q], (double)m * unit / (double)N);
			double F = ml >= top ? (double)nb : (double)(ml / step);
			double after = (double)(nu - m + 1);
			c->evals += F * after;
			c->walk += (after < (double)ms ? after : (double)ms) * F * (F - 1.0) / 2.0;
		}
	}
}

/* The buckets a dataset's histogram visits (bp_hyd_hist_from_dataset). */
static double hist_visits(const struct bp_dataset *ds, int64_t max_tokens, int64_t step)
{
	double v = 0.0;
	if (ds->lengths)
		return (double)ds->nlengths;
	for (size_t i = 0; i < ds->nbins; i++) {
		const struct bp_bin *bn = &ds->bins[i];
		int64_t hi = bn->hi < max_tokens ? bn->hi : max_tokens;
		if (bn->count > 0 && bn->lo <= hi)
			v += (double)((hi + step - 1) / step - (bn->lo + step - 1) / step + 1);
	}
	return v;
}

int bp_hyd_propose_cost(const struct bp_profile *prof, const struct bp_scheme *sc, size_t nsc,
			const struct bp_dataset *ds, int64_t max_tokens,
			const struct bp_hyd_space_opts *o, struct bp_hyd_cost *cost,
			struct bp_error *err)
{
	struct bp_hyd_pscheme *ps = bp_calloc(nsc ? nsc : 1, sizeof(*ps), err);
	size_t n = 0;
	int rc = -1;
	memset(cost, 0, sizeof(*cost));
	if (!ps)
		return -1;
	for (size_t i = 0; i < nsc; i++) {
		if (price_scheme(prof, sc[i], max_tokens, o, 0, &ps[n], NULL, err) < 0)
			goto out;
		if (ps[n].maxlen)
			n++;
	}
	int gs = o->p.gpu_step;
	int64_t ls = o->len_step;
	int gs0;
	int64_t ls0;
	bp_hyd_default_steps(o->p.gpus, max_tokens, &gs0, &ls0);
	if (!gs)
		gs = gs0;
	if (!ls)
		ls = ls0;
	if (gs < 1 || ls < 1 || max_tokens < 1 || o->p.gpus < gs) {
		bp_errorf(err, "GPU step %d and length step %lld must be in [1, %d GPUs] and [1, "
			  "%lld tokens]", gs, (long long)ls, o->p.gpus, (long long)max_tokens);
		goto out;
	}
	size_t nu = (size_t)(o->p.gpus / gs), nb = (size_t)((max_tokens + ls - 1) / ls);
	double W = (double)nb + 1.0, cells = ((double)nu + 1.0) * W;
	cost->units = nu;
	cost->buckets = nb;
	cost->schemes = n;
	cost->len_step = ls;
	cost->gpu_step = gs;
	dp_count(ps, n, nu, nb, ls, max_tokens, gs, 0, cost);
	if (o->p.relaxed)
		dp_count(ps, n, nu, nb, ls, max_tokens, gs, 1, cost);
	cost->hist = hist_visits(ds, max_tokens, ls) + 2.0 * W + (o->p.relaxed ? 3.0 : 2.0) *
		     (double)n * W;
	/* The peak: the histogram (cnt, s1, s2, xmax), the trace's intervals, two prefix-sum
	 * tables ([n][nb + 1] doubles and a bucket index), the integer run's t and how kept
	 * while the relaxed run holds its own and its tie-break sums S. */
	double run = (double)(sizeof(double) + sizeof(struct bp_hyd_choice)) * cells;
	cost->bytes = W * (4.0 * sizeof(double) + sizeof(struct bp_hyd_interval) + sizeof(int)) +
		      2.0 * W * ((double)n * sizeof(double) + sizeof(size_t)) +
		      (o->p.relaxed ? 2.0 : 1.0) * run + sizeof(double) * cells;
	rc = 0;
out:
	for (size_t i = 0; i < nsc; i++)
		free(ps[i].maxlen);
	free(ps);
	return rc;
}

int bp_hyd_propose_profile(const struct bp_profile *prof, const struct bp_scheme *sc,
			   size_t nsc, const struct bp_dataset *ds, int64_t max_tokens,
			   enum bp_overlen overlen, int64_t tokens_per_step, int64_t docs_per_step,
			   const struct bp_hyd_space_opts *o, struct bp_hyd_set *set,
			   struct bp_error *err)
{
	struct bp_hyd_pscheme *ps = bp_calloc(nsc ? nsc : 1, sizeof(*ps), err);
	int64_t *full = bp_calloc(nsc ? nsc : 1, sizeof(int64_t), err);
	struct bp_hyd_hist h;
	size_t n = 0;
	int rc = -1, gpus = o->p.gpus;
	memset(&h, 0, sizeof(h));
	if (!ps || !full)
		goto out;
	/* Price the schemes: T(l) fitted on the cost model, UtilLen, MaxLen by pipelines. */
	for (size_t i = 0; i < nsc; i++) {
		if (price_scheme(prof, sc[i], max_tokens, o, 1, &ps[n], &full[n], err) < 0)
			goto out;
		if (ps[n].maxlen)
			n++;
	}
	if (!n) {
		bp_errorf(err, "no scheme of the space can hold %lld tokens in memory",
			  (long long)o->align);
		goto out;
	}
	struct bp_hyd_propose_opts po = o->p;
	int64_t ls = o->len_step;
	int gs0;
	int64_t ls0;
	bp_hyd_default_steps(gpus, max_tokens, &gs0, &ls0);
	if (!po.gpu_step)
		po.gpu_step = gs0;
	if (!ls)
		ls = ls0;
	if (bp_hyd_hist_from_dataset(ds, max_tokens, overlen, ls, tokens_per_step, docs_per_step,
				     &h, err) < 0 ||
	    bp_hyd_propose(&h, ps, n, &po, set, err) < 0)
		goto out;
	for (size_t i = 0; i < set->n; i++) { /* each strategy's longest MaxLen */
		struct bp_hyd_strategy *st = &set->s[i];
		for (size_t g = 0; g < st->ng; g++)
			for (size_t q = 0; q < n; q++)
				if (ps[q].tp == st->g[g].tp && ps[q].pp == st->g[g].pp) {
					size_t d = (size_t)st->g[g].count;
					int64_t ml = ps[q].maxlen[d < ps[q].nd ? d : ps[q].nd];
					if (ml > st->max_len)
						st->max_len = ml;
				}
	}
	set->gpus = gpus;
	snprintf(set->model, sizeof(set->model), "%s", prof->model.name);
	snprintf(set->profile, sizeof(set->profile), "%s", prof->name);
	snprintf(set->optimizer, sizeof(set->optimizer), "replica");
	set->max_tokens = max_tokens;
	set->tokens_per_step = tokens_per_step;
	set->len_step = ls;
	set->gpu_step = po.gpu_step;
	set->schemes = bp_calloc(n, sizeof(*set->schemes), err);
	if (!set->schemes)
		goto out;
	set->nschemes = n;
	for (size_t i = 0; i < n; i++)
		set->schemes[i] = (struct bp_hyd_sinfo){ps[i].tp, ps[i].pp, ps[i].maxlen[1],
							full[i], ps[i].util_len, ps[i].fit.a,
							ps[i].fit.b, ps[i].fit.c, ps[i].fit.max_err};
	rc = 0;
out:
	if (ps)
		for (size_t i = 0; i < nsc; i++)
			free(ps[i].maxlen);
	free(ps);
	free(full);
	bp_hyd_hist_release(&h);
	return rc;
}
