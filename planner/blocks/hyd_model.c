/* hyd_model.c: Hydraulis's schemes and strategies (Sec. 5.1), their placement on ranks, the
 * memory model MaxLen(P) (App. B.1), the latency model T(l, P) (App. B.2) and UtilLen
 * (App. C). Called by methods/hydraulis.c, `balplan propose` and the proposal
 * (hyd_propose.c). Invariants: a strategy's groups are canonical (tp descending, pp
 * descending, one per scheme); a fitted T has a, b >= 0, so it never decreases with l, which
 * Alg. 1's bookkeeping (hyd_dispatch.c) and the DP's two-pointer walk rely on; MaxLen is
 * computed with the simulator's own memory functions, so a micro-batch within it passes the
 * plan's memory check. */
#include "hyd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the latency model (App. B.2) ---- */

/* Weighted least squares of t over the basis functions the mask selects (bit 2: x^2, bit 1:
 * x, bit 0: 1), x = l / scale. Fills coef[3] (unselected 0) and the weighted residual. */
static int lsq(const double *l, const double *t, size_t n, int weighted, double scale,
	       int mask, double coef[3], double *sse)
{
	long double A[3][3] = {{0}}, y[3] = {0};
	int idx[3], m = 0;
	for (int k = 0; k < 3; k++)
		if (mask & (4 >> k))
			idx[m++] = k;
	for (size_t i = 0; i < n; i++) {
		long double x = (long double)l[i] / scale, w = weighted ? 1.0L / ((long double)t[i] * t[i]) : 1.0L;
		long double phi[3] = {x * x, x, 1.0L}, f[3];
		for (int a = 0; a < m; a++)
			f[a] = phi[idx[a]];
		for (int a = 0; a < m; a++) {
			for (int b = 0; b < m; b++)
				A[a][b] += w * f[a] * f[b];
			y[a] += w * f[a] * t[i];
		}
	}
	/* Gaussian elimination with partial pivoting on the m x m system. */
	for (int c = 0; c < m; c++) {
		int piv = c;
		for (int r = c + 1; r < m; r++)
			if (fabsl(A[r][c]) > fabsl(A[piv][c]))
				piv = r;
		if (fabsl(A[piv][c]) < 1e-300L)
			return -1;
		for (int k = 0; k < m; k++) {
			long double s = A[c][k];
			A[c][k] = A[piv][k];
			A[piv][k] = s;
		}
		long double s = y[c];
		y[c] = y[piv];
		y[piv] = s;
		for (int r = c + 1; r < m; r++) {
			long double f = A[r][c] / A[c][c];
			for (int k = c; k < m; k++)
				A[r][k] -= f * A[c][k];
			y[r] -= f * y[c];
		}
	}
	long double x[3] = {0};
	for (int r = m - 1; r >= 0; r--) {
		long double s = y[r];
		for (int k = r + 1; k < m; k++)
			s -= A[r][k] * x[k];
		x[r] = s / A[r][r];
	}
	coef[0] = coef[1] = coef[2] = 0.0;
	for (int a = 0; a < m; a++)
		coef[idx[a]] = (double)x[a];
	long double e = 0;
	for (size_t i = 0; i < n; i++) {
		long double u = (long double)l[i] / scale;
		long double r = (coef[0] * u + coef[1]) * u + coef[2] - t[i];
		e += (weighted ? 1.0L / ((long double)t[i] * t[i]) : 1.0L) * r * r;
	}
	*sse = (double)e;
	return 0;
}

int bp_hyd_fit_samples(const double *l, const double *t, size_t n, int weighted,
		       struct bp_hyd_fit *out, struct bp_error *err)
{
	double scale = 0.0, seen[3];
	size_t distinct = 0;
	for (size_t i = 0; i < n; i++) {
		if (!(t[i] > 0) || !(l[i] > 0) || !isfinite(t[i]) || !isfinite(l[i]))
			return bp_errorf(err, "fit sample %zu (l %g, T %g) is not positive", i, l[i],
					 t[i]);
		if (l[i] > scale)
			scale = l[i];
		int dup = 0;
		for (size_t k = 0; k < distinct; k++)
			dup |= seen[k] == l[i];
		if (!dup && distinct < 3)
			seen[distinct++] = l[i];
	}
	if (n < 3 || distinct < 3)
		return bp_errorf(err, "a fit of T(l) = a l^2 + b l + c needs 3 distinct lengths");
	/* The full quadratic; when a or b comes out negative (T would fall with l somewhere
	 * on l >= 0), the better of the two fits without that term, then a constant. */
	static const int masks[] = {7, 3, 5, 1};
	double best[3] = {0}, best_sse = INFINITY;
	for (size_t q = 0; q < BP_ARRAY_LEN(masks); q++) {
		double c[3], sse;
		if (lsq(l, t, n, weighted, scale, masks[q], c, &sse) < 0)
			continue;
		if (c[0] < 0 || c[1] < 0)
			continue;
		if (q == 0 || sse < best_sse) {
			memcpy(best, c, sizeof(best));
			best_sse = sse;
		}
		if (q == 0 || q == 2)
			break; /* the full fit, or the better of the two reduced ones */
	}
	if (!isfinite(best_sse))
		return bp_errorf(err, "cannot fit T(l) to the samples");
	out->a = best[0] / (scale * scale);
	out->b = best[1] / scale;
	out->c = best[2];
	double mx = 0.0, ss = 0.0;
	for (size_t i = 0; i < n; i++) {
		double f = (out->a * l[i] + out->b) * l[i] + out->c;
		double r = fabs(f - t[i]) / t[i];
		if (r > mx)
			mx = r;
		ss += r * r;
	}
	out->max_err = mx;
	out->rms_err = sqrt(ss / (double)n);
	return 0;
}

int bp_hyd_fit_cost(const struct bp_costmodel *cm, int64_t max_len, struct bp_hyd_fit *out,
		    struct bp_error *err)
{
	int64_t step = 128 * ((max_len + 128 * 512 - 1) / (128 * 512));
	if (max_len < 3 * step)
		return bp_errorf(err, "fitting T(l) needs lengths up to at least %lld tokens",
				 (long long)(3 * step));
	size_t n = (size_t)(max_len / step);
	double *l = bp_calloc(n, sizeof(double), err), *t = bp_calloc(n, sizeof(double), err);
	int rc = -1;
	if (!l || !t)
		goto out;
	for (size_t i = 0; i < n; i++) {
		l[i] = (double)(step * (int64_t)(i + 1));
		if (bp_cost_doc(cm, step * (int64_t)(i + 1), &t[i], err) < 0)
			goto out;
	}
	rc = bp_hyd_fit_samples(l, t, n, 1, out, err);
	if (rc < 0)
		bp_error_prefix(err, "scheme <%d,%d>", cm->sc.tp, cm->sc.pp);
out:
	free(l);
	free(t);
	return rc;
}

int64_t bp_hyd_util_len(const struct bp_hyd_fit *f, int64_t max_len, int64_t step,
			double theta)
{
	double peak = 0.0;
	for (int64_t l = step; l <= max_len; l += step) {
		double t = bp_hyd_T(f, (double)l);
		if (t > 0 && (double)l / t > peak)
			peak = (double)l / t;
	}
	for (int64_t l = step; l <= max_len; l += step) {
		double t = bp_hyd_T(f, (double)l);
		if (t > 0 && (double)l / t >= theta * peak)
			return l;
	}
	return step;
}

/* ---- the memory model (App. B.1) ---- */

/* Largest l with state + k * act(l) <= cap on stage s (act from bp_cost_act_bytes, exact
 * to its integer rounding), or 0. */
static int64_t stage_fit(const struct bp_costmodel *cm, int s, int64_t state, int64_t k,
			 int64_t cap)
{
	const int64_t probe = (int64_t)1 << 30;
	double per = (double)bp_cost_act_bytes(cm, s, probe) / (double)probe;
	if (state > cap)
		return 0;
	if (per <= 0)
		return INT64_C(1) << 40;
	double guess = floor((double)(cap - state) / ((double)k * per));
	int64_t l = guess > 1e12 ? (int64_t)1e12 : (int64_t)guess;
	while (l > 0 && bp_i64_mul_add_sat(k, bp_cost_act_bytes(cm, s, l), state) > cap)
		l--;
	while (l < (int64_t)1e12 &&
	       bp_i64_mul_add_sat(k, bp_cost_act_bytes(cm, s, l + 1), state) <= cap)
		l++;
	return l;
}

static int64_t align_down(int64_t l, int64_t align)
{
	if (align <= 1)
		return l;
	return l / align * align;
}

int64_t bp_hyd_maxlen(const struct bp_costmodel *cm, int replicas, int64_t align)
{
	struct bp_costmodel c = *cm; /* shallow: only the replicas change, nothing is freed */
	c.dp = replicas < 1 ? 1 : replicas;
	c.sync_ranks = c.dp * cm->sc.cp;
	int64_t cap = bp_cost_mem_cap(cm), best = INT64_MAX;
	for (int s = 0; s < cm->sc.pp; s++) {
		int64_t l = stage_fit(cm, s, bp_cost_state_bytes(&c, s), cm->sc.pp - s, cap);
		if (l < best)
			best = l;
	}
	return align_down(best, align);
}

int64_t bp_hyd_maxlen_full(const struct bp_costmodel *cm, int gpus, int64_t align)
{
	/* The optimizer's share of the state over all gpus, the rest per TP shard of the stage
	 * (bp_cost_state_bytes_full). */
	int64_t cap = bp_cost_mem_cap(cm), best = INT64_MAX;
	for (int s = 0; s < cm->sc.pp; s++) {
		int64_t l = stage_fit(cm, s, bp_cost_state_bytes_full(cm, s, gpus), cm->sc.pp - s,
				      cap);
		if (l < best)
			best = l;
	}
	return align_down(best, align);
}

int64_t bp_hyd_maxlen_appb1(const struct bp_hyd_appb1 *c, int tp, int pp)
{
	const double mib = 1048576.0;
	double L = c->layers, H = c->hidden, V = c->vocab;
	double e_os = c->os_pp == 1 ? 32.0 : 16.0, e = pp == 1 ? 32.0 : 16.0;
	double st = (L / c->os_pp) * (H * H / c->os_tp) * c->B * c->alpha / c->os_dp +
		    (L / pp) * (H * H / tp) * c->B * (1.0 - c->alpha) +
		    (H * V / c->os_tp) * e_os * c->alpha / c->os_dp +
		    (H * V / tp) * e * (1.0 - c->alpha);
	double avail = (c->bound_mib - c->safe_mib - c->gap_mib) * mib - st;
	return (int64_t)floor(avail / (L * (H / tp) * c->A));
}

/* ---- schemes and strategies (Sec. 5.1) ---- */

void bp_hyd_set_init(struct bp_hyd_set *s)
{
	memset(s, 0, sizeof(*s));
}

void bp_hyd_set_release(struct bp_hyd_set *s)
{
	if (!s)
		return;
	free(s->s);
	free(s->schemes);
	bp_hyd_set_init(s);
}

static int group_before(const struct bp_hyd_group *a, const struct bp_hyd_group *b)
{
	return a->tp > b->tp || (a->tp == b->tp && a->pp > b->pp);
}

void bp_hyd_strategy_canon(struct bp_hyd_strategy *st)
{
	for (size_t i = 1; i < st->ng; i++) /* insertion sort: a handful of groups */
		for (size_t k = i; k > 0 && group_before(&st->g[k], &st->g[k - 1]); k--) {
			struct bp_hyd_group t = st->g[k];
			st->g[k] = st->g[k - 1];
			st->g[k - 1] = t;
		}
	size_t m = 0;
	for (size_t i = 0; i < st->ng; i++) {
		if (m && st->g[m - 1].tp == st->g[i].tp && st->g[m - 1].pp == st->g[i].pp)
			st->g[m - 1].count += st->g[i].count;
		else
			st->g[m++] = st->g[i];
	}
	st->ng = m;
}

int bp_hyd_set_add(struct bp_hyd_set *s, const struct bp_hyd_strategy *st, struct bp_error *err)
{
	struct bp_hyd_strategy *ns = bp_realloc_array(s->s, s->n + 1, sizeof(*ns), err);
	if (!ns)
		return -1;
	s->s = ns;
	ns[s->n] = *st;
	bp_hyd_strategy_canon(&ns[s->n]);
	return (int)s->n++;
}

static int same_groups(const struct bp_hyd_strategy *a, const struct bp_hyd_strategy *b)
{
	if (a->ng != b->ng)
		return 0;
	for (size_t i = 0; i < a->ng; i++)
		if (a->g[i].tp != b->g[i].tp || a->g[i].pp != b->g[i].pp ||
		    a->g[i].count != b->g[i].count)
			return 0;
	return 1;
}

int bp_hyd_set_find(const struct bp_hyd_set *s, const struct bp_hyd_strategy *st)
{
	for (size_t i = 0; i < s->n; i++)
		if (same_groups(&s->s[i], st))
			return (int)i;
	return -1;
}

int64_t bp_hyd_strategy_gpus(const struct bp_hyd_strategy *st)
{
	int64_t n = 0;
	for (size_t i = 0; i < st->ng; i++)
		n += (int64_t)st->g[i].count * st->g[i].tp * st->g[i].pp;
	return n;
}

void bp_hyd_strategy_describe(const struct bp_hyd_strategy *st, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (size_t i = 0; i < st->ng && k < n; i++) {
		int w = snprintf(buf + k, n - k, "%s%dx<%d,%d>", i ? " + " : "", st->g[i].count,
				 st->g[i].tp, st->g[i].pp);
		if (w < 0)
			break;
		k += (size_t)w;
	}
}

/* Reads a positive integer at *p, advancing it; -1 when there is none. */
static int read_pos(const char **p, int *out)
{
	const char *s = *p;
	long v = 0;
	if (*s < '0' || *s > '9')
		return -1;
	while (*s >= '0' && *s <= '9') {
		v = v * 10 + (*s - '0');
		if (v > 1 << 24)
			return -1;
		s++;
	}
	if (v < 1)
		return -1;
	*out = (int)v;
	*p = s;
	return 0;
}

static void skip_space(const char **p)
{
	while (**p == ' ' || **p == '\t')
		(*p)++;
}

int bp_hyd_strategy_parse(const char *s, struct bp_hyd_strategy *st, struct bp_error *err)
{
	memset(st, 0, sizeof(*st));
	const char *p = s;
	for (;;) {
		struct bp_hyd_group g = {0, 0, 1};
		skip_space(&p);
		const char *part = p;
		size_t plen = strcspn(part, "+");
		const char *lt = memchr(part, '<', plen);
		if (lt) { /* "COUNTx<TP,PP>" */
			if (read_pos(&p, &g.count) < 0 || *p++ != 'x' || *p++ != '<' ||
			    read_pos(&p, &g.tp) < 0 || *p++ != ',' || read_pos(&p, &g.pp) < 0 ||
			    *p++ != '>')
				goto bad;
		} else { /* "TPxPP" or "TPxPP*COUNT" */
			if (read_pos(&p, &g.tp) < 0 || *p++ != 'x' || read_pos(&p, &g.pp) < 0)
				goto bad;
			if (*p == '*') {
				p++;
				if (read_pos(&p, &g.count) < 0)
					goto bad;
			}
		}
		skip_space(&p);
		if (*p && *p != '+')
			goto bad;
		if (st->ng == BP_HYD_MAX_GROUPS)
			return bp_errorf(err, "strategy '%.60s' has more than %d groups", s,
					 BP_HYD_MAX_GROUPS);
		st->g[st->ng++] = g;
		if (!*p)
			break;
		p++;
		continue;
	bad:
		return bp_errorf(err, "strategy '%.60s': '%.*s' is not TPxPP*COUNT or "
				 "COUNTx<TP,PP>", s, (int)(plen > 40 ? 40 : plen), part);
	}
	bp_hyd_strategy_canon(st);
	return 0;
}

int bp_hyd_strategy_check(const struct bp_hyd_strategy *st, int gpus, int gpus_per_node,
			  const struct bp_model *m, struct bp_error *err)
{
	char d[256];
	bp_hyd_strategy_describe(st, d, sizeof(d));
	if (!st->ng)
		return bp_errorf(err, "a strategy has no pipelines");
	for (size_t i = 0; i < st->ng; i++) {
		const struct bp_hyd_group *g = &st->g[i];
		if (g->tp < 1 || g->pp < 1 || g->count < 1)
			return bp_errorf(err, "strategy %s: scheme <%d,%d> x %d needs tp, pp and "
					 "count >= 1", d, g->tp, g->pp, g->count);
		if (m->heads % g->tp)
			return bp_errorf(err, "strategy %s: scheme <%d,%d>: tp %d does not divide "
					 "the %d heads of model '%s'", d, g->tp, g->pp, g->tp,
					 m->heads, m->name);
		if (m->layers % g->pp)
			return bp_errorf(err, "strategy %s: scheme <%d,%d>: pp %d does not divide "
					 "the %d layers of model '%s' (Hydraulis Sec. 5.1)", d, g->tp,
					 g->pp, g->pp, m->layers, m->name);
		if (g->tp > gpus_per_node && gpus > gpus_per_node)
			return bp_errorf(err, "strategy %s: scheme <%d,%d>: a TP group of %d GPUs "
					 "would cross nodes of %d GPUs", d, g->tp, g->pp, g->tp,
					 gpus_per_node);
	}
	int64_t n = bp_hyd_strategy_gpus(st);
	if (n > gpus)
		return bp_errorf(err, "strategy %s uses %lld GPUs, more than the cluster's %d", d,
				 (long long)n, gpus);
	return 0;
}

int bp_hyd_place(const struct bp_hyd_strategy *st, int gpus, int gpus_per_node, int layers,
		 const size_t *group_order, const int64_t *cap, struct bp_layout *out,
		 struct bp_error *err)
{
	int gpn = gpus < gpus_per_node ? gpus : gpus_per_node;
	int nodes = (gpus + gpn - 1) / gpn, rc = -1;
	int *used = bp_calloc((size_t)nodes, sizeof(int), err);
	size_t npipes = 0, *place_order = NULL, *first = NULL;
	int **ranks = NULL;
	if (!used)
		return -1;
	for (size_t i = 0; i < st->ng; i++)
		npipes += (size_t)st->g[i].count;
	place_order = bp_calloc(st->ng, sizeof(size_t), err);
	first = bp_calloc(st->ng + 1, sizeof(size_t), err);
	ranks = bp_calloc(npipes ? npipes : 1, sizeof(int *), err);
	if (!place_order || !first || !ranks)
		goto out;
	for (size_t i = 0; i < st->ng; i++) {
		first[i + 1] = first[i] + (size_t)st->g[i].count;
		place_order[i] = i;
	}
	/* Placement order: tp descending, pp descending (groups are canonical already, but a
	 * caller may hand any order). */
	for (size_t i = 1; i < st->ng; i++)
		for (size_t k = i; k > 0 && group_before(&st->g[place_order[k]],
							 &st->g[place_order[k - 1]]); k--) {
			size_t t = place_order[k];
			place_order[k] = place_order[k - 1];
			place_order[k - 1] = t;
		}
	for (size_t q = 0; q < st->ng; q++) {
		const struct bp_hyd_group *g = &st->g[place_order[q]];
		for (int c = 0; c < g->count; c++) {
			size_t pi = first[place_order[q]] + (size_t)c;
			ranks[pi] = bp_calloc((size_t)g->tp * g->pp, sizeof(int), err);
			if (!ranks[pi])
				goto out;
			for (int s = 0; s < g->pp; s++) {
				int best = -1;
				for (int nd = 0; nd < nodes; nd++) {
					int room = (nd == nodes - 1 ? gpus - nd * gpn : gpn) - used[nd];
					if (room >= g->tp && (best < 0 || used[nd] > used[best]))
						best = nd;
				}
				if (best < 0) {
					char d[256];
					bp_hyd_strategy_describe(st, d, sizeof(d));
					bp_errorf(err, "strategy %s: no node has %d free GPUs for a TP "
						  "group of scheme <%d,%d>", d, g->tp, g->tp, g->pp);
					goto out;
				}
				for (int t = 0; t < g->tp; t++)
					ranks[pi][s * g->tp + t] = best * gpn + used[best] + t;
				used[best] += g->tp;
			}
		}
	}
	snprintf(out->schedule, sizeof(out->schedule), "%s", BP_SCHEDULE_1F1B);
	for (size_t q = 0; q < st->ng; q++) {
		size_t gi = group_order ? group_order[q] : q;
		const struct bp_hyd_group *g = &st->g[gi];
		struct bp_scheme sc = {g->tp, 1, g->pp};
		for (int c = 0; c < g->count; c++)
			if (bp_layout_add_pipe(out, sc, ranks[first[gi] + (size_t)c], NULL, layers,
					       cap ? cap[gi] : 1, err) < 0)
				goto out;
	}
	rc = 0;
out:
	if (ranks)
		for (size_t i = 0; i < npipes; i++)
			free(ranks[i]);
	free(ranks);
	free(first);
	free(place_order);
	free(used);
	return rc;
}
