/* measure.c: the measuring profiler's plain-C half (measure.h): shared options, the cells
 * to measure, the resumable state file and the merge of measured medians into the analytic
 * skeleton. Called by `balplan profile` (options only) and balprof (all of it).
 *
 * Implements the measured side of DistCA Sec. 4.2 "Profiler" (attention over a (q_len, kv_len)
 * grid per TP head count, read with bilinear interpolation) and the profiled tables Hydraulis
 * App. B.2 fits T(l,P) = a l^2 + b l + c to, and SparseBalance Sec. IV-B Eq. 10's profiled
 * M[x,k] of block-sparse attention (profiler/README.md "sparse_attention[]": one causal
 * document of x tokens at budget k, selection included). Invariant: what bp_prof_merge returns
 * passes bp_profile_from_json (every replaced cell > 0, tables non-decreasing along every
 * axis). */
#include "measure.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel.h"
#include "jsonutil.h"
#include "presets.h"

#define STATE_MAGIC "# balprof-state v1 "

/* ---- options ---- */

/* The same texts as the front ends' integer options (cmd/cmdutil.c cmd_opt_int). */
static int parse_int(const char *opt, const char *arg, int64_t lo, int64_t hi, int64_t *out,
		     struct bp_error *err)
{
	int64_t v = 0;
	if (bp_parse_int64(arg, &v, opt, err) < 0)
		return -1;
	if (v < lo || v > hi)
		return bp_errorf(err, "%s %lld is outside [%lld, %lld]", opt, (long long)v,
				 (long long)lo, (long long)hi);
	*out = v;
	return 0;
}

static int parse_tokens(const char *opt, const char *arg, int64_t lo, int64_t hi,
			int64_t *out, struct bp_error *err)
{
	int64_t v = 0;
	if (bp_parse_tokens(arg, &v, opt, err) < 0)
		return -1;
	if (v < lo || v > hi)
		return bp_errorf(err, "%s %lld is outside [%lld, %lld]", opt, (long long)v,
				 (long long)lo, (long long)hi);
	*out = v;
	return 0;
}

int bp_prof_parse(int argc, char **argv, struct bp_prof_opts *o, struct bp_error *err)
{
	static const struct option opts[] = {
		{"analytic", no_argument, NULL, 'a'},
		{"gpu", required_argument, NULL, 'G'},
		{"model", required_argument, NULL, 'M'},
		{"scheme", required_argument, NULL, 'S'},
		{"max-len", required_argument, NULL, 'L'},
		{"out", required_argument, NULL, 'o'},
		{"state", required_argument, NULL, 's'},
		{"reps", required_argument, NULL, 'r'},
		{"warmup", required_argument, NULL, 'w'},
		{"quick", no_argument, NULL, 'q'},
		{"balprof", required_argument, NULL, 'B'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int64_t v = 0;
	int c;
	memset(o, 0, sizeof(*o));
	o->gpu = "H100";
	o->model = "llama3-8b";
	o->out = "-";
	o->max_len = 131072;
	o->reps = 10;
	o->warmup = 2;
	optind = 0; /* glibc: 0 also resets getopt's internal state */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': o->analytic = 1; break;
		case 'G': o->gpu = optarg; break;
		case 'M': o->model = optarg; break;
		case 'S': {
			int t, cc, p, n = 0;
			if (o->nschemes == BP_PROF_MAX_SCHEMES)
				return bp_errorf(err, "at most %d --scheme options",
						 BP_PROF_MAX_SCHEMES);
			if (sscanf(optarg, "%dx%dx%d%n", &t, &cc, &p, &n) != 3 || optarg[n] ||
			    t < 1 || cc < 1 || p < 1)
				return bp_errorf(err, "--scheme '%.40s' is not TPxCPxPP with positive "
						 "degrees", optarg);
			o->schemes[o->nschemes++] = (struct bp_scheme){t, cc, p};
			break;
		}
		case 'L':
			if (parse_tokens("--max-len", optarg, 256, (int64_t)1 << 24, &o->max_len, err))
				return -1;
			o->set_max_len = 1;
			break;
		case 'o': o->out = optarg; break;
		case 's':
			if (!optarg[0])
				return bp_errorf(err, "--state needs a file name");
			o->state = optarg;
			break;
		case 'r':
			if (parse_int("--reps", optarg, 1, 1000, &v, err) < 0)
				return -1;
			o->reps = (int)v;
			o->set_reps = 1;
			break;
		case 'w':
			if (parse_int("--warmup", optarg, 0, 100, &v, err) < 0)
				return -1;
			o->warmup = (int)v;
			o->set_warmup = 1;
			break;
		case 'q': o->quick = 1; break;
		case 'B':
			if (!optarg[0])
				return bp_errorf(err, "--balprof needs a file name");
			o->balprof = optarg;
			break;
		case 'h': o->help = 1; break;
		default: {
			const char *a = argv[optind - 1];
			return bp_errorf(err, "unknown or incomplete option '%.40s'", a ? a : "?");
		}
		}
	}
	if (optind < argc)
		return bp_errorf(err, "unexpected argument '%.40s'", argv[optind]);
	if (o->analytic) {
		const char *bad = o->state ? "--state" : o->set_reps ? "--reps"
			: o->set_warmup ? "--warmup" : o->quick ? "--quick"
			: o->balprof ? "--balprof" : NULL;
		if (bad)
			return bp_errorf(err, "%s is for measuring and cannot go with --analytic",
					 bad);
	}
	if (o->state && (!strcmp(o->state, o->out) || !strcmp(o->state, "-")))
		return bp_errorf(err, "--state '%.40s' cannot be %s", o->state,
				 strcmp(o->state, "-") ? "the output file" : "standard output");
	if (o->quick) {
		if (!o->set_max_len)
			o->max_len = 2048;
		if (!o->set_reps)
			o->reps = 3;
		if (!o->set_warmup)
			o->warmup = 1;
	}
	if (!o->nschemes)
		o->schemes[o->nschemes++] = (struct bp_scheme){8, 2, 4};
	return 0;
}

/* ---- tasks ---- */

static int push_task(struct bp_task **v, size_t *n, size_t *cap, const struct bp_task *t,
		     struct bp_error *err)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		struct bp_task *nv = bp_realloc_array(*v, nc, sizeof(**v), err);
		if (!nv)
			return -1;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = *t;
	return 0;
}

int bp_prof_group(const struct bp_prof_world *w, int inter, int r, int *nodes, int *per)
{
	int nn = w && w->per_node > 0 ? w->ranks / w->per_node : 1;
	*nodes = *per = 0;
	if (!w || r < 2 || r > w->ranks)
		return 0;
	if (!inter) {
		if (r > w->per_node)
			return 0;
		*nodes = 1;
		*per = r;
		return 1;
	}
	int g = r < nn ? r : nn;
	if (g < 2 || r % g || r / g > w->per_node)
		return 0;
	*nodes = g;
	*per = r / g;
	return 1;
}

/* A task of a kind at cell (i, j) of profile table `table`, the rest zero. */
static struct bp_task task_at(enum bp_task_kind kind, int tp, size_t table, size_t i, size_t j,
			      int bwd)
{
	struct bp_task t;
	memset(&t, 0, sizeof(t));
	t.kind = kind;
	t.tp = tp;
	t.table = table;
	t.i = i;
	t.j = j;
	t.bwd = bwd;
	return t;
}

int bp_prof_tasks(const struct bp_profile *p, const struct bp_prof_world *w,
		  struct bp_task **out, size_t *n, struct bp_error *err)
{
	struct bp_task *v = NULL, t;
	size_t cnt = 0, cap = 0;
	*out = NULL;
	*n = 0;
	t = task_at(BP_TASK_MEMORY, 0, 0, 0, 0, 0);
	snprintf(t.key, sizeof(t.key), "memory reserved");
	if (push_task(&v, &cnt, &cap, &t, err) < 0)
		goto fail;
	for (size_t a = 0; a < p->ncoll; a++) {
		const struct bp_coll_table *ct = &p->coll[a];
		int gn, gp;
		if (!bp_prof_group(w, ct->inter, ct->ranks, &gn, &gp))
			continue;
		for (size_t i = 0; i < ct->n; i++) {
			t = task_at(BP_TASK_COLL, 0, a, i, 0, 0);
			t.q = (int64_t)llround(ct->bytes[i]);
			t.op = (int)ct->op;
			t.inter = ct->inter;
			t.ranks = ct->ranks;
			t.gnodes = gn;
			t.gper = gp;
			snprintf(t.key, sizeof(t.key), "coll %s %s r=%d b=%lld",
				 bp_coll_op_name(ct->op), ct->inter ? "inter" : "intra", ct->ranks,
				 (long long)t.q);
			if (push_task(&v, &cnt, &cap, &t, err) < 0)
				goto fail;
		}
	}
	for (size_t a = 0; a < p->nlinear; a++) {
		const struct bp_linear_table *lt = &p->linear[a];
		for (size_t i = 0; i < lt->n; i++)
			for (int b = 0; b < 2; b++) {
				t = task_at(BP_TASK_LINEAR, lt->tp, a, i, 0, b);
				t.q = (int64_t)llround(lt->tokens[i]);
				snprintf(t.key, sizeof(t.key), "linear tp=%d t=%lld %s", t.tp,
					 (long long)t.q, b ? "bwd" : "fwd");
				if (push_task(&v, &cnt, &cap, &t, err) < 0)
					goto fail;
			}
		for (size_t i = 0; i < lt->n; i++)
			for (int b = 0; b < 2; b++) {
				t = task_at(BP_TASK_LM_HEAD, lt->tp, a, i, 0, b);
				t.q = (int64_t)llround(lt->tokens[i]);
				snprintf(t.key, sizeof(t.key), "lmhead tp=%d t=%lld %s", t.tp,
					 (long long)t.q, b ? "bwd" : "fwd");
				if (push_task(&v, &cnt, &cap, &t, err) < 0)
					goto fail;
			}
	}
	for (size_t a = 0; a < p->nattn; a++) {
		const struct bp_attn_table *at = &p->attn[a];
		for (size_t i = 0; i < at->nq; i++)
			for (size_t j = 0; j < at->nkv; j++) {
				if (at->kv[j] < at->q[i])
					continue;
				for (int b = 0; b < 2; b++) {
					t = task_at(BP_TASK_ATTN, at->tp, a, i, j, b);
					t.q = (int64_t)llround(at->q[i]);
					t.kv = (int64_t)llround(at->kv[j]);
					snprintf(t.key, sizeof(t.key), "attn tp=%d q=%lld kv=%lld %s",
						 t.tp, (long long)t.q, (long long)t.kv,
						 b ? "bwd" : "fwd");
					if (push_task(&v, &cnt, &cap, &t, err) < 0)
						goto fail;
				}
			}
		/* The same cells, the document alone in its launch (balprof reuses the packed
		 * measurement where the packed launch held one copy). */
		for (size_t i = 0; i < at->nq; i++)
			for (size_t j = 0; j < at->nkv; j++) {
				if (at->kv[j] < at->q[i])
					continue;
				for (int b = 0; b < 2; b++) {
					t = task_at(BP_TASK_ATTN_ALONE, at->tp, a, i, j, b);
					t.q = (int64_t)llround(at->q[i]);
					t.kv = (int64_t)llround(at->kv[j]);
					snprintf(t.key, sizeof(t.key), "attn1 tp=%d q=%lld kv=%lld %s",
						 t.tp, (long long)t.q, (long long)t.kv,
						 b ? "bwd" : "fwd");
					if (push_task(&v, &cnt, &cap, &t, err) < 0)
						goto fail;
				}
			}
	}
	/* M[x,k]: every cell is measured, those with k >= ceil(x/B) too (dense plus selection:
	 * what a consistency check compares with the dense table). */
	for (size_t a = 0; a < p->nsparse; a++) {
		const struct bp_sparse_table *st = &p->sparse[a];
		for (size_t i = 0; i < st->nx; i++)
			for (size_t j = 0; j < st->nk; j++)
				for (int b = 0; b < 2; b++) {
					t = task_at(BP_TASK_SPARSE, st->tp, a, i, j, b);
					t.q = t.kv = (int64_t)llround(st->x[i]);
					t.block = st->block;
					t.budget = st->k[j];
					snprintf(t.key, sizeof(t.key),
						 "sparse tp=%d block=%d x=%lld k=%d %s", t.tp,
						 t.block, (long long)t.q, t.budget,
						 b ? "bwd" : "fwd");
					if (push_task(&v, &cnt, &cap, &t, err) < 0)
						goto fail;
				}
	}
	*out = v;
	*n = cnt;
	return 0;
fail:
	free(v);
	return -1;
}

/* ---- state ---- */

void bp_state_init(struct bp_state *s)
{
	memset(s, 0, sizeof(*s));
}

void bp_state_release(struct bp_state *s)
{
	if (!s)
		return;
	free(s->m);
	bp_state_init(s);
}

void bp_prof_signature(const struct bp_prof_opts *o, const struct bp_prof_world *w,
		       const char *device, char *out, size_t n)
{
	size_t k = (size_t)snprintf(out, n, "cells=%d,gpu=%s,model=%s,max_len=%lld,reps=%d,"
				    "warmup=%d,tp=", BP_PROF_CELLS, o->gpu, o->model,
				    (long long)o->max_len, o->reps, o->warmup);
	/* The TP degrees decide the tables; cp and pp only the fits. */
	int seen[BP_PROF_MAX_SCHEMES], ns = 0;
	for (size_t i = 0; i < o->nschemes && k < n; i++) {
		int dup = 0;
		for (int j = 0; j < ns; j++)
			dup |= seen[j] == o->schemes[i].tp;
		if (dup)
			continue;
		seen[ns++] = o->schemes[i].tp;
		k += (size_t)snprintf(out + k, n - k, "%s%d", ns > 1 ? "/" : "", o->schemes[i].tp);
	}
	if (k < n)
		k += (size_t)snprintf(out + k, n - k, ",ranks=%d/%d,device=", w ? w->ranks : 1,
				      w ? w->per_node : 1);
	for (const char *d = device ? device : "?"; *d && k + 1 < n; d++)
		out[k++] = (*d == ' ' || *d == '\t' || *d == '\n') ? '_' : *d;
	if (k < n)
		out[k] = 0;
	else if (n)
		out[n - 1] = 0;
}

const struct bp_meas *bp_state_find(const struct bp_state *s, const char *key)
{
	for (size_t i = s->n; i-- > 0;)
		if (!strcmp(s->m[i].key, key))
			return &s->m[i];
	return NULL;
}

int bp_state_add(struct bp_state *s, const struct bp_meas *m, struct bp_error *err)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->m[i].key, m->key)) {
			s->m[i] = *m;
			return 0;
		}
	if (s->n == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 64;
		struct bp_meas *nv = bp_realloc_array(s->m, nc, sizeof(*nv), err);
		if (!nv)
			return -1;
		s->m = nv;
		s->cap = nc;
	}
	s->m[s->n++] = *m;
	return 0;
}

/* One measurement line without its newline: "KEY\tmedian min max n". */
static int parse_line(const char *line, size_t len, struct bp_meas *m, int lineno,
		      struct bp_error *err)
{
	char buf[512];
	if (len >= sizeof(buf))
		return bp_errorf(err, "line %d is too long", lineno);
	memcpy(buf, line, len);
	buf[len] = 0;
	char *tab = strchr(buf, '\t');
	if (!tab || tab == buf || (size_t)(tab - buf) >= sizeof(m->key))
		return bp_errorf(err, "line %d is not 'KEY<tab>median min max n'", lineno);
	*tab = 0;
	memset(m, 0, sizeof(*m));
	memcpy(m->key, buf, (size_t)(tab - buf) + 1);
	int used = 0;
	if (sscanf(tab + 1, "%lf %lf %lf %d%n", &m->median, &m->min, &m->max, &m->n, &used) != 4 ||
	    tab[1 + used] != 0)
		return bp_errorf(err, "line %d is not 'KEY<tab>median min max n'", lineno);
	if (!isfinite(m->median) || !isfinite(m->min) || !isfinite(m->max) || !(m->min > 0) ||
	    m->min > m->median || m->median > m->max || m->n < 1)
		return bp_errorf(err, "line %d (%s) has an impossible measurement (need 0 < min <= "
				 "median <= max, n >= 1)", lineno, m->key);
	return 0;
}

int bp_state_parse(struct bp_state *s, const char *text, size_t len, const char *sig,
		   struct bp_error *err)
{
	size_t pos = 0;
	int lineno = 0;
	s->valid_bytes = 0;
	if (!text || !len)
		return 0;
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		if (!nl) /* a torn last line: an interrupted write; valid_bytes stops before it */
			break;
		size_t ll = (size_t)(nl - (text + pos));
		lineno++;
		if (lineno == 1) {
			size_t ml = strlen(STATE_MAGIC);
			if (ll < ml || memcmp(text + pos, STATE_MAGIC, ml))
				return bp_errorf(err, "line 1 is not a balprof state header ('%s...')",
						 STATE_MAGIC);
			if (ll - ml != strlen(sig) || memcmp(text + pos + ml, sig, ll - ml))
				return bp_errorf(err, "it was made by another run (line 1: %.*s; this "
						 "run: %s): remove it or give another --state",
						 (int)(ll - ml > 300 ? 300 : ll - ml),
						 text + pos + ml, sig);
		} else if (ll > 0) {
			struct bp_meas m;
			if (parse_line(text + pos, ll, &m, lineno, err) < 0 ||
			    bp_state_add(s, &m, err) < 0)
				return -1;
		}
		pos += ll + 1;
		s->valid_bytes = (long)pos;
	}
	return 0;
}

int bp_state_header(FILE *f, const char *sig)
{
	return fprintf(f, "%s%s\n", STATE_MAGIC, sig) < 0 ? -1 : 0;
}

int bp_state_write(FILE *f, const struct bp_meas *m)
{
	return fprintf(f, "%s\t%.17g %.17g %.17g %d\n", m->key, m->median, m->min, m->max,
		       m->n) < 0 ? -1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

void bp_prof_stats(double *v, size_t n, double *median, double *min, double *max)
{
	qsort(v, n, sizeof(*v), cmp_double);
	*min = v[0];
	*max = v[n - 1];
	*median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- merge ---- */

/* Running maximum along both axes of an nr x nc row-major matrix: non-decreasing along
 * each row and each column afterwards (the reader's check). */
static void monotone2(double *v, size_t nr, size_t nc)
{
	for (size_t i = 0; i < nr; i++)
		for (size_t j = 0; j < nc; j++) {
			double x = v[i * nc + j];
			if (j > 0 && v[i * nc + j - 1] > x)
				x = v[i * nc + j - 1];
			if (i > 0 && v[(i - 1) * nc + j] > x)
				x = v[(i - 1) * nc + j];
			v[i * nc + j] = x;
		}
}

int bp_prof_merge(struct bp_profile *p, const struct bp_prof_world *w,
		  const struct bp_state *s, size_t *measured, size_t *total, struct bp_error *err)
{
	struct bp_task *t = NULL;
	size_t nt = 0;
	*measured = *total = 0;
	if (bp_prof_tasks(p, w, &t, &nt, err) < 0)
		return -1;
	/* The optional tables, NaN until measured (filled from their defaults below). */
	for (size_t a = 0; a < p->nattn; a++) {
		struct bp_attn_table *at = &p->attn[a];
		size_t nc = at->nq * at->nkv;
		free(at->fwd_alone);
		free(at->bwd_alone);
		at->fwd_alone = bp_calloc(nc, sizeof(double), err);
		at->bwd_alone = bp_calloc(nc, sizeof(double), err);
		if (!at->fwd_alone || !at->bwd_alone) {
			free(t);
			return -1;
		}
		for (size_t c = 0; c < nc; c++)
			at->fwd_alone[c] = at->bwd_alone[c] = NAN;
	}
	for (size_t a = 0; a < p->nlinear; a++) {
		struct bp_linear_table *lt = &p->linear[a];
		free(lt->lm_fwd);
		free(lt->lm_bwd);
		lt->lm_fwd = bp_calloc(lt->n, sizeof(double), err);
		lt->lm_bwd = bp_calloc(lt->n, sizeof(double), err);
		if (!lt->lm_fwd || !lt->lm_bwd) {
			free(t);
			return -1;
		}
		for (size_t c = 0; c < lt->n; c++)
			lt->lm_fwd[c] = lt->lm_bwd[c] = NAN;
	}
	for (size_t k = 0; k < nt; k++) {
		const struct bp_meas *m = bp_state_find(s, t[k].key);
		(*total)++;
		if (!m)
			continue;
		if (!(m->median > 0) || !isfinite(m->median)) {
			free(t);
			return bp_errorf(err, "measurement '%s' is %g, not a positive number",
					 t[k].key, m->median);
		}
		(*measured)++;
		if (t[k].kind == BP_TASK_MEMORY) {
			if (m->median >= (double)p->hw.hbm_bytes) {
				free(t);
				return bp_errorf(err, "the measured memory reserve %.0f bytes is not "
						 "below the device's %lld", m->median,
						 (long long)p->hw.hbm_bytes);
			}
			p->mem.reserved_bytes = (int64_t)llround(m->median);
		} else if (t[k].kind == BP_TASK_COLL) {
			p->coll[t[k].table].us[t[k].i] = m->median;
		} else if (t[k].kind == BP_TASK_LINEAR) {
			struct bp_linear_table *lt = &p->linear[t[k].table];
			(t[k].bwd ? lt->bwd : lt->fwd)[t[k].i] = m->median;
		} else if (t[k].kind == BP_TASK_SPARSE) {
			struct bp_sparse_table *st = &p->sparse[t[k].table];
			(t[k].bwd ? st->bwd : st->fwd)[t[k].i * st->nk + t[k].j] = m->median;
		} else if (t[k].kind == BP_TASK_LM_HEAD) {
			struct bp_linear_table *lt = &p->linear[t[k].table];
			(t[k].bwd ? lt->lm_bwd : lt->lm_fwd)[t[k].i] = m->median;
		} else if (t[k].kind == BP_TASK_ATTN_ALONE) {
			struct bp_attn_table *at = &p->attn[t[k].table];
			(t[k].bwd ? at->bwd_alone : at->fwd_alone)[t[k].i * at->nkv + t[k].j] =
				m->median;
		} else {
			struct bp_attn_table *at = &p->attn[t[k].table];
			(t[k].bwd ? at->bwd : at->fwd)[t[k].i * at->nkv + t[k].j] = m->median;
		}
	}
	free(t);
	/* Cells kv < q hold the kv = q value (profiler/README.md); then monotone. Only for
	 * tables whose cells were measured: an analytic table is monotone already. */
	for (size_t a = 0; a < p->nattn; a++) {
		struct bp_attn_table *at = &p->attn[a];
		for (int b = 0; b < 4; b++) {
			double *v = b == 0 ? at->fwd : b == 1 ? at->bwd : b == 2 ? at->fwd_alone
										 : at->bwd_alone;
			/* an alone cell not measured: the packed one (merged above) */
			for (size_t c = 0; b >= 2 && c < at->nq * at->nkv; c++)
				if (isnan(v[c]))
					v[c] = (b == 2 ? at->fwd : at->bwd)[c];
			for (size_t i = 0; i < at->nq; i++) {
				size_t jq = at->nkv;
				for (size_t j = 0; j < at->nkv; j++)
					if (at->kv[j] >= at->q[i]) {
						jq = j;
						break;
					}
				for (size_t j = 0; j < jq && jq < at->nkv; j++)
					v[i * at->nkv + j] = v[i * at->nkv + jq];
			}
			monotone2(v, at->nq, at->nkv);
		}
	}
	/* M[x,k]: rows x, columns k; the reader wants both directions non-decreasing. */
	for (size_t a = 0; a < p->nsparse; a++) {
		struct bp_sparse_table *st = &p->sparse[a];
		monotone2(st->fwd, st->nx, st->nk);
		monotone2(st->bwd, st->nx, st->nk);
	}
	/* The LM head not measured: lm_ratio x the layer's GEMMs, as the cost model prices it
	 * without a curve (costmodel.c bp_cost_lm_head). */
	int64_t lp = bp_model_layer_params(&p->model);
	double lmr = lp > 0 ? (double)p->model.hidden * (double)p->model.vocab / (double)lp : 0.0;
	for (size_t a = 0; a < p->nlinear; a++) {
		struct bp_linear_table *lt = &p->linear[a];
		monotone2(lt->fwd, 1, lt->n);
		monotone2(lt->bwd, 1, lt->n);
		for (size_t c = 0; c < lt->n; c++) {
			if (isnan(lt->lm_fwd[c]))
				lt->lm_fwd[c] = lmr * lt->fwd[c];
			if (isnan(lt->lm_bwd[c]))
				lt->lm_bwd[c] = lmr * lt->bwd[c];
		}
		monotone2(lt->lm_fwd, 1, lt->n);
		monotone2(lt->lm_bwd, 1, lt->n);
	}
	for (size_t a = 0; a < p->ncoll; a++)
		monotone2(p->coll[a].us, 1, p->coll[a].n);
	return 0;
}

static int profile_round_trip(struct bp_profile *p, struct bp_error *err)
{
	json_t *j = bp_profile_to_json(p);
	if (!j)
		return bp_errorf(err, "cannot encode the profile: out of memory");
	int rc = bp_profile_from_json(p, j, err);
	json_decref(j);
	return rc;
}

int bp_prof_finish(struct bp_profile *p, const struct bp_provenance *pv, int64_t max_len,
		   struct bp_error *err)
{
	char name[256];
	snprintf(name, sizeof(name), "measured-%s-%s", p->hw.gpu, p->model.name);
	if (bp_strlcpy_checked(p->name, name, sizeof(p->name), "profile name", err) < 0)
		return -1;
	memcpy(p->kind, "measured", sizeof("measured"));
	p->prov = *pv;
	p->prov.present = 1;
	/* Round the tables as the file holds them and validate, then fit on them (as
	 * solve/refit.c does), so a reread profile fits to the same coefficients. */
	if (profile_round_trip(p, err) < 0)
		return bp_error_prefix(err, "the measured tables are not a valid profile");
	for (size_t i = 0; i < p->nfits; i++) {
		struct bp_fit *f = &p->fits[i];
		struct bp_scheme sc = {f->tp, f->cp, f->pp};
		if (bp_fit_scheme(p, sc, max_len, f, err) < 0)
			return -1;
	}
	return profile_round_trip(p, err);
}
