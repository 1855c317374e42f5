/* coverage_json.c: the reader of balplan.coverage/v1 (plans/README.md "Coverage files"), the
 * measured k_cov samples SparseBalance's DST (Sec. IV-A, Eq. 5) uses in mode `measured:FILE`
 * (a planner cannot see the routing scores, so it reads them measured). Called by
 * cmd/cmdutil.c (cmd_load_coverage, for solve) and the fuzzer; the data lives in
 * blocks/sparse_dst.h. Strict: unknown keys, wrong shapes, a bin or a layer missing, a sample
 * outside [1, k_base] or one that grows with p (k_cov is non-increasing in p) are errors naming
 * where. There is no writer: files come from running the model's gate (GPU and weights). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "sparse_dst.h"

#define COVERAGE_FORMAT "balplan.coverage/v1"

static int read_bin(struct bp_sb_coverage *c, json_t *o, size_t bi, struct bp_error *err)
{
	static const char *const keys[] = {"lo", "hi", "k_cov", NULL};
	struct bp_sb_covbin *b = &c->bins[bi];
	char w[64];
	snprintf(w, sizeof(w), "coverage.bins[%zu]", bi);
	if (bp_json_check_keys(o, keys, w, err) < 0 ||
	    bp_json_get_int(o, "lo", 1, 1, INT64_C(1) << 40, &b->lo, w, err) < 0 ||
	    bp_json_get_int(o, "hi", 1, 1, INT64_C(1) << 40, &b->hi, w, err) < 0)
		return -1;
	if (b->hi < b->lo)
		return bp_errorf(err, "%s: hi %lld is below lo %lld", w, (long long)b->hi,
				 (long long)b->lo);
	if (bi && b->lo <= c->bins[bi - 1].hi)
		return bp_errorf(err, "%s: lo %lld does not follow the previous bin's hi %lld",
				 w, (long long)b->lo, (long long)c->bins[bi - 1].hi);
	json_t *layers = bp_json_get_array(o, "k_cov", w, err);
	if (!layers)
		return -1;
	if (json_array_size(layers) != (size_t)c->layers)
		return bp_errorf(err, "%s.k_cov has %zu layers, not the file's %d", w,
				 json_array_size(layers), c->layers);
	b->k = bp_calloc((size_t)c->layers * c->np * c->nq, sizeof(*b->k), err);
	if (!b->k)
		return -1;
	for (size_t l = 0; l < (size_t)c->layers; l++) {
		json_t *lp = json_array_get(layers, l);
		if (!json_is_array(lp) || json_array_size(lp) != c->np)
			return bp_errorf(err, "%s.k_cov[%zu] is not an array of %zu lists (one per "
					 "p)", w, l, c->np);
		for (size_t ip = 0; ip < c->np; ip++) {
			json_t *q = json_array_get(lp, ip);
			if (!json_is_array(q) || json_array_size(q) != c->nq)
				return bp_errorf(err, "%s.k_cov[%zu][%zu] is not a list of %zu "
						 "samples", w, l, ip, c->nq);
			for (size_t iq = 0; iq < c->nq; iq++) {
				json_t *v = json_array_get(q, iq);
				if (!json_is_integer(v) || json_integer_value(v) < 1 ||
				    json_integer_value(v) > c->k_base)
					return bp_errorf(err, "%s.k_cov[%zu][%zu][%zu] is not an "
							 "integer in [1, k_base %d]", w, l, ip, iq,
							 c->k_base);
				int k = (int)json_integer_value(v);
				size_t at = (l * c->np + ip) * c->nq + iq;
				if (ip && k > b->k[at - c->nq])
					return bp_errorf(err, "%s.k_cov[%zu][%zu][%zu] is %d, above "
							 "%d at the smaller p (k_cov cannot grow "
							 "with p)", w, l, ip, iq, k,
							 b->k[at - c->nq]);
				b->k[at] = k;
			}
		}
	}
	return 0;
}

int bp_sb_coverage_from_json(struct bp_sb_coverage *c, json_t *root, struct bp_error *err)
{
	static const char *const keys[] = {"format", "model", "block", "k_base", "layers", "p",
					   "samples", "source", "bins", NULL};
	const char *w = "coverage";
	int64_t nq;
	if (bp_json_check_keys(root, keys, w, err) < 0 ||
	    bp_json_check_format(root, COVERAGE_FORMAT, w, err) < 0 ||
	    bp_json_get_str(root, "model", 1, c->model, sizeof(c->model), w, err) < 0 ||
	    bp_json_get_int32(root, "block", 1, 1, 1 << 20, &c->block, w, err) < 0 ||
	    bp_json_get_int32(root, "k_base", 1, 1, 1 << 20, &c->k_base, w, err) < 0 ||
	    bp_json_get_int32(root, "layers", 1, 1, 4096, &c->layers, w, err) < 0 ||
	    bp_json_get_int(root, "samples", 1, 1, 4096, &nq, w, err) < 0 ||
	    bp_json_get_real_array(root, "p", 1, &c->p, &c->np, w, err) < 0)
		return -1;
	/* the model whose gate was measured: solve checks it is the plan's (issue 27) */
	if (!c->model[0])
		return bp_errorf(err, "coverage.model is empty (name the model whose gate was "
				 "measured)");
	c->nq = (size_t)nq;
	if ((double)c->layers * (double)c->np * (double)c->nq > (double)(1 << 24))
		return bp_errorf(err, "coverage: %d layers x %zu p x %zu samples is over 16M samples "
				 "per bin", c->layers, c->np, c->nq);
	char src[256];
	if (bp_json_get_str(root, "source", 1, src, sizeof(src), w, err) < 0)
		return -1;
	for (size_t i = 0; i < c->np; i++)
		if (!(c->p[i] > 0 && c->p[i] <= 1) || (i && c->p[i] <= c->p[i - 1]))
			return bp_errorf(err, "coverage.p[%zu] is not in (0, 1] above the one "
					 "before", i);
	json_t *bins = bp_json_get_array(root, "bins", w, err);
	if (!bins)
		return -1;
	if (!json_array_size(bins))
		return bp_errorf(err, "coverage.bins is empty");
	c->bins = bp_calloc(json_array_size(bins), sizeof(*c->bins), err);
	if (!c->bins)
		return -1;
	for (size_t i = 0; i < json_array_size(bins); i++) {
		c->nbins = i + 1;
		if (read_bin(c, json_array_get(bins, i), i, err) < 0)
			return -1;
	}
	return 0;
}
