/* profile_json.c: the balplan.profile codec, v1 and v2 (profile.h; the format is documented
 * field by field in profiler/README.md).
 *
 * Called by every front end that reads a profile (solve, simulate, check, propose) and by
 * `balplan profile`, which writes one. Reading is strict and keeps the invariants the cost
 * model's interpolation relies on (DistCA Sec. 4.2 "Profiler": bilinear lookups on a
 * (q_len, kv_len) grid; SparseBalance Sec. IV-B Eq. 10: the M[x,k] grid): axes strictly
 * increasing, every table finite and non-decreasing along each axis, every time > 0 (a kernel
 * takes time: an all-zero profile would plan steps of zero seconds) and <= BP_PROFILE_MAX_US
 * (no absurd times that push a plan's numbers out of range), one table per TP degree, per
 * (TP degree, block) and per (op, inter, ranks), one fit per scheme (Hydraulis App. B.2).
 * Version 1 is version 2 without `sparse_attention`; both are read, v2 is written. Writing is
 * canonical: arrays sorted by their documented key (attention and linear by tp, sparse
 * attention by (tp, block), collectives by (op, inter, ranks), schemes and fits by
 * (tp, cp, pp)), table values rounded to 1e-3 (bp_json_real), fit coefficients to 9
 * significant digits (they are as small as 1e-6 us per token^2). */
#include "profile.h"
#include "attn_geom.h"
#include "costmodel.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "model_json.h"

#define MAX_DEGREE (1 << 20)

/* ---- reading: scalar checks ------------------------------------------------------------ */

/* ---- reading: axes and tables ---------------------------------------------------------- */

/* A time cell that already passed the sign and monotonicity checks: > 0 and not absurd. Run
 * after monotonicity, so in a table that is non-decreasing the first zero found is in its
 * leading cells, and an ordering mistake is reported as one. */
static int check_time(double v, const char *where, const char *key, const char *cell,
		      struct bp_error *err)
{
	if (v == 0)
		return bp_errorf(err, "%s.%s%s is zero (a kernel or a call takes time)", where, key,
				 cell);
	if (v > BP_PROFILE_MAX_US)
		return bp_errorf(err, "%s.%s%s is %.6g us, above the %.0e us limit", where, key,
				 cell, v, BP_PROFILE_MAX_US);
	return 0;
}

/* Reads a strictly increasing axis of integers >= 1. */
static int read_int_axis(json_t *obj, const char *key, int **out, size_t *n,
			 const char *where, struct bp_error *err)
{
	json_t *a = bp_json_get_array(obj, key, where, err);
	if (!a)
		return -1;
	*n = json_array_size(a);
	if (!*n)
		return bp_errorf(err, "%s.%s is empty", where, key);
	int *v = bp_calloc(*n, sizeof(*v), err);
	if (!v)
		return -1;
	free(*out);
	*out = v; /* owned by the table from here on */
	for (size_t i = 0; i < *n; i++) {
		json_t *x = json_array_get(a, i);
		if (!json_is_integer(x))
			return bp_errorf(err, "%s.%s[%zu] is not an integer", where, key, i);
		json_int_t y = json_integer_value(x);
		if (y < 0)
			return bp_errorf(err, "%s.%s[%zu] is negative", where, key, i);
		if (y == 0)
			return bp_errorf(err, "%s.%s[%zu] is zero", where, key, i);
		if (y > (1 << 24))
			return bp_errorf(err, "%s.%s[%zu] is %lld, above %d", where, key, i,
					 (long long)y, 1 << 24);
		v[i] = (int)y;
		if (i > 0 && !(v[i] > v[i - 1]))
			return bp_errorf(err, "%s.%s is not strictly increasing at index %zu", where,
					 key, i);
	}
	return 0;
}

/* Reads a strictly increasing axis of values >= 0 (> 0 when positive). */
static int read_axis(json_t *obj, const char *key, int positive, double **out, size_t *n,
		     const char *where, struct bp_error *err)
{
	if (bp_json_get_real_array(obj, key, 1, out, n, where, err) < 0)
		return -1;
	const double *v = *out;
	for (size_t i = 0; i < *n; i++) {
		if (v[i] < 0)
			return bp_errorf(err, "%s.%s[%zu] is negative", where, key, i);
		if (positive && v[i] == 0)
			return bp_errorf(err, "%s.%s[%zu] is zero", where, key, i);
		if (i > 0 && !(v[i] > v[i - 1]))
			return bp_errorf(err, "%s.%s is not strictly increasing at index %zu", where,
					 key, i);
	}
	return 0;
}

/* Reads a curve of n values (one per axis point, axis named per): >= 0, non-decreasing. */
static int read_curve(json_t *obj, const char *key, size_t want, const char *per,
		      double **out, const char *where, struct bp_error *err)
{
	size_t n = 0;
	if (bp_json_get_real_array(obj, key, 0, out, &n, where, err) < 0)
		return -1;
	if (n != want)
		return bp_errorf(err, "%s.%s has %zu values, expected %zu (one per %s)", where, key,
				 n, want, per);
	const double *v = *out;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < 0)
			return bp_errorf(err, "%s.%s[%zu] is negative", where, key, i);
		if (i > 0 && v[i] < v[i - 1])
			return bp_errorf(err, "%s.%s is not monotonic: [%zu] < [%zu]", where, key, i,
					 i - 1);
	}
	for (size_t i = 0; i < n; i++) {
		char cell[32];
		snprintf(cell, sizeof(cell), "[%zu]", i);
		if (check_time(v[i], where, key, cell, err) < 0)
			return -1;
	}
	return 0;
}

/* Reads an nq x nkv matrix (an array of nq rows of nkv numbers) into a new row-major array:
 * finite, > 0, non-decreasing along kv (within a row) and along q (down a column), no cell
 * above BP_PROFILE_MAX_US. rows and cols name the two axes in messages ("q" and "kv", "x" and
 * "k"). */
static int read_matrix(json_t *obj, const char *key, size_t nq, size_t nkv,
		       const char *rows_name, const char *cols_name, double **out,
		       const char *where, struct bp_error *err)
{
	json_t *rows = bp_json_get_array(obj, key, where, err);
	if (!rows)
		return -1;
	if (json_array_size(rows) != nq)
		return bp_errorf(err, "%s.%s has %zu rows, expected %zu (one per %s)", where, key,
				 json_array_size(rows), nq, rows_name);
	double *v = bp_calloc(nq * nkv, sizeof(*v), err);
	if (!v)
		return -1;
	free(*out);
	*out = v; /* owned by the table from here on, freed with it */
	for (size_t i = 0; i < nq; i++) {
		json_t *row = json_array_get(rows, i);
		if (!json_is_array(row))
			return bp_errorf(err, "%s.%s[%zu] is not an array", where, key, i);
		if (json_array_size(row) != nkv)
			return bp_errorf(err, "%s.%s[%zu] has %zu values, expected %zu (one per %s)",
					 where, key, i, json_array_size(row), nkv, cols_name);
		for (size_t j = 0; j < nkv; j++) {
			json_t *x = json_array_get(row, j);
			if (!json_is_number(x))
				return bp_errorf(err, "%s.%s[%zu][%zu] is not a number", where, key, i,
						 j);
			double d = json_number_value(x);
			if (!isfinite(d))
				return bp_errorf(err, "%s.%s[%zu][%zu] is not finite", where, key, i, j);
			if (d < 0)
				return bp_errorf(err, "%s.%s[%zu][%zu] is negative", where, key, i, j);
			v[i * nkv + j] = d;
		}
	}
	for (size_t i = 0; i < nq; i++)
		for (size_t j = 0; j < nkv; j++) {
			if (j > 0 && v[i * nkv + j] < v[i * nkv + j - 1])
				return bp_errorf(err, "%s.%s is not monotonic: [%zu][%zu] < [%zu][%zu]",
						 where, key, i, j, i, j - 1);
			if (i > 0 && v[i * nkv + j] < v[(i - 1) * nkv + j])
				return bp_errorf(err, "%s.%s is not monotonic: [%zu][%zu] < [%zu][%zu]",
						 where, key, i, j, i - 1, j);
		}
	for (size_t i = 0; i < nq; i++)
		for (size_t j = 0; j < nkv; j++) {
			char cell[48];
			snprintf(cell, sizeof(cell), "[%zu][%zu]", i, j);
			if (check_time(v[i * nkv + j], where, key, cell, err) < 0)
				return -1;
		}
	return 0;
}

/* ---- reading: sections ----------------------------------------------------------------- */

/* The flat objects, each field named once for the reader and the writer. */
static const struct bp_field hardware_fields[] = {
	BP_FIELD_STR(struct bp_hardware, gpu, "gpu"),
	BP_FIELD_INT(struct bp_hardware, gpus_per_node, "gpus_per_node", 1, 1024),
	BP_FIELD_I64F(struct bp_hardware, hbm_bytes, "hbm_bytes", 0, BP_PROFILE_MAX_HBM_BYTES,
		      BP_FF_POS),
	BP_FIELD_REALF(struct bp_hardware, hbm_gbps, "hbm_gbps", 1, BP_PROFILE_MAX_GBPS, BP_FF_POS),
	BP_FIELD_REALF(struct bp_hardware, nvlink_gbps, "nvlink_gbps", 0.01, BP_PROFILE_MAX_GBPS,
		       BP_FF_POS),
	BP_FIELD_REALF(struct bp_hardware, net_gbps, "net_gbps", 0.001, BP_PROFILE_MAX_GBPS,
		       BP_FF_POS),
	BP_FIELD_REALF(struct bp_hardware, bf16_tflops, "bf16_tflops", BP_PROFILE_MIN_TFLOPS,
		       BP_PROFILE_MAX_TFLOPS, BP_FF_POS),
};
/* Physical-sense bounds (profile.h) keep every memory product below int64's range for any
 * request the planning limits accept; costmodel.c saturates what goes past them anyway. */
static const struct bp_field memory_fields[] = {
	BP_FIELD_REALF(struct bp_memory, act_bytes_per_token_layer, "act_bytes_per_token_layer", 0,
		       BP_PROFILE_MAX_ACT_BYTES, BP_FF_POS),
	BP_FIELD_REALF(struct bp_memory, state_bytes_per_param, "state_bytes_per_param", 0,
		       BP_PROFILE_MAX_STATE_BYTES, BP_FF_POS),
	BP_FIELD_I64F(struct bp_memory, reserved_bytes, "reserved_bytes", 0, 0, BP_FF_NONNEG),
};

/* The optional provenance of a measured profile (profiler/README.md "provenance"). */
static const struct bp_field prov_fields[] = {
	BP_FIELD_STR(struct bp_provenance, tool, "tool"),
	BP_FIELD_STR(struct bp_provenance, date, "date"),
	BP_FIELD_STR(struct bp_provenance, device, "device"),
	BP_FIELD_STR(struct bp_provenance, driver, "driver"),
	BP_FIELD_STR(struct bp_provenance, cuda_driver, "cuda_driver"),
	BP_FIELD_STR(struct bp_provenance, cuda_runtime, "cuda_runtime"),
	BP_FIELD_STR(struct bp_provenance, cublas, "cublas"),
	BP_FIELD_STR(struct bp_provenance, nccl, "nccl"),
	BP_FIELD_STR(struct bp_provenance, measured, "measured"),
	BP_FIELD_STR(struct bp_provenance, analytic, "analytic"),
	BP_FIELD_INT(struct bp_provenance, ranks, "ranks", 1, 1 << 20),
	BP_FIELD_INT(struct bp_provenance, reps, "reps", 1, 1000000),
	BP_FIELD_INT(struct bp_provenance, warmup, "warmup", 0, 1000000),
	BP_FIELD_STR_OPT(struct bp_provenance, attn_kernels, "attn_kernels"),
};

static int read_provenance(struct bp_provenance *pv, json_t *root, struct bp_error *err)
{
	if (!json_object_get(root, "provenance"))
		return 0;
	json_t *o = bp_json_get_object(root, "provenance", "profile", err);
	if (!o || bp_json_read_fields(o, prov_fields, BP_ARRAY_LEN(prov_fields), pv, NULL, 1,
				      "profile.provenance", err) < 0)
		return -1;
	pv->present = 1;
	return 0;
}

static int read_hardware(struct bp_hardware *hw, json_t *root, struct bp_error *err)
{
	json_t *o = bp_json_get_object(root, "hardware", "profile", err);
	if (!o || bp_json_read_fields(o, hardware_fields, BP_ARRAY_LEN(hardware_fields), hw,
				      NULL, 1, "profile.hardware", err) < 0)
		return -1;
	return 0;
}

static int read_memory(struct bp_memory *mem, const struct bp_hardware *hw, json_t *root,
		       struct bp_error *err)
{
	json_t *o = bp_json_get_object(root, "memory", "profile", err);
	if (!o || bp_json_read_fields(o, memory_fields, BP_ARRAY_LEN(memory_fields), mem, NULL,
				      1, "profile.memory", err) < 0)
		return -1;
	if (mem->reserved_bytes >= hw->hbm_bytes)
		return bp_errorf(err,
				 "profile.memory.reserved_bytes %lld is not below "
				 "profile.hardware.hbm_bytes %lld",
				 (long long)mem->reserved_bytes, (long long)hw->hbm_bytes);
	return 0;
}

static int cmp_scheme(const void *a, const void *b)
{
	const struct bp_scheme *x = a, *y = b;
	if (x->tp != y->tp)
		return x->tp < y->tp ? -1 : 1;
	if (x->cp != y->cp)
		return x->cp < y->cp ? -1 : 1;
	return x->pp < y->pp ? -1 : x->pp > y->pp;
}

static int cmp_fit(const void *a, const void *b)
{
	const struct bp_fit *x = a, *y = b;
	struct bp_scheme sx = {x->tp, x->cp, x->pp}, sy = {y->tp, y->cp, y->pp};
	return cmp_scheme(&sx, &sy);
}

static int cmp_attn(const void *a, const void *b)
{
	const struct bp_attn_table *x = a, *y = b;
	return x->tp < y->tp ? -1 : x->tp > y->tp;
}

static int cmp_linear(const void *a, const void *b)
{
	const struct bp_linear_table *x = a, *y = b;
	return x->tp < y->tp ? -1 : x->tp > y->tp;
}

static int cmp_sparse(const void *a, const void *b)
{
	const struct bp_sparse_table *x = a, *y = b;
	if (x->tp != y->tp)
		return x->tp < y->tp ? -1 : 1;
	return x->block < y->block ? -1 : x->block > y->block;
}

static int cmp_coll(const void *a, const void *b)
{
	const struct bp_coll_table *x = a, *y = b;
	if (x->op != y->op)
		return x->op < y->op ? -1 : 1;
	if (x->inter != y->inter)
		return x->inter < y->inter ? -1 : 1;
	return x->ranks < y->ranks ? -1 : x->ranks > y->ranks;
}

/* Reads {tp, cp, pp} at obj (keys: extra, NULL-terminated, also allowed). */
static int read_degrees(json_t *o, const char *const *keys, int *tp, int *cp, int *pp,
			const char *where, struct bp_error *err)
{
	if (bp_json_check_keys(o, keys, where, err) < 0 ||
	    bp_json_get_int32(o, "tp", 1, 1, MAX_DEGREE, tp, where, err) < 0 ||
	    bp_json_get_int32(o, "cp", 1, 1, MAX_DEGREE, cp, where, err) < 0 ||
	    bp_json_get_int32(o, "pp", 1, 1, MAX_DEGREE, pp, where, err) < 0)
		return -1;
	return 0;
}

static int read_schemes(struct bp_profile *p, json_t *root, struct bp_error *err)
{
	static const char *const keys[] = {"tp", "cp", "pp", NULL};
	json_t *a = bp_json_get_array(root, "schemes", "profile", err);
	if (!a)
		return -1;
	size_t n = json_array_size(a);
	p->schemes = bp_calloc(n, sizeof(*p->schemes), err);
	if (!p->schemes)
		return -1;
	p->nschemes = n;
	for (size_t i = 0; i < n; i++) {
		char w[64];
		struct bp_scheme *s = &p->schemes[i];
		snprintf(w, sizeof(w), "profile.schemes[%zu]", i);
		if (read_degrees(json_array_get(a, i), keys, &s->tp, &s->cp, &s->pp, w, err) < 0)
			return -1;
	}
	qsort(p->schemes, n, sizeof(*p->schemes), cmp_scheme);
	for (size_t i = 1; i < n; i++)
		if (!cmp_scheme(&p->schemes[i], &p->schemes[i - 1]))
			return bp_errorf(err, "profile.schemes has tp %d cp %d pp %d twice",
					 p->schemes[i].tp, p->schemes[i].cp, p->schemes[i].pp);
	return 0;
}

static int read_attention(struct bp_profile *p, json_t *root, struct bp_error *err)
{
	static const char *const keys[] = {"tp", "q", "kv", "fwd", "bwd", "fwd_alone",
					   "bwd_alone", NULL};
	json_t *a = bp_json_get_array(root, "attention", "profile", err);
	if (!a)
		return -1;
	size_t n = json_array_size(a);
	p->attn = bp_calloc(n, sizeof(*p->attn), err);
	if (!p->attn)
		return -1;
	p->nattn = n;
	for (size_t i = 0; i < n; i++) {
		struct bp_attn_table *t = &p->attn[i];
		json_t *o = json_array_get(a, i);
		char w[64];
		snprintf(w, sizeof(w), "profile.attention[%zu]", i);
		if (bp_json_check_keys(o, keys, w, err) < 0 ||
		    bp_json_get_int32(o, "tp", 1, 1, MAX_DEGREE, &t->tp, w, err) < 0)
			return -1;
		snprintf(w, sizeof(w), "profile.attention[tp=%d]", t->tp);
		if (read_axis(o, "q", 1, &t->q, &t->nq, w, err) < 0 ||
		    read_axis(o, "kv", 1, &t->kv, &t->nkv, w, err) < 0 ||
		    read_matrix(o, "fwd", t->nq, t->nkv, "q", "kv", &t->fwd, w, err) < 0 ||
		    read_matrix(o, "bwd", t->nq, t->nkv, "q", "kv", &t->bwd, w, err) < 0)
			return -1;
		int ha = json_object_get(o, "fwd_alone") != NULL;
		if (ha != (json_object_get(o, "bwd_alone") != NULL))
			return bp_errorf(err, "%s has one of fwd_alone and bwd_alone: both or neither",
					 w);
		if (ha && (read_matrix(o, "fwd_alone", t->nq, t->nkv, "q", "kv", &t->fwd_alone, w,
				       err) < 0 ||
			   read_matrix(o, "bwd_alone", t->nq, t->nkv, "q", "kv", &t->bwd_alone, w,
				       err) < 0))
			return -1;
	}
	qsort(p->attn, n, sizeof(*p->attn), cmp_attn);
	for (size_t i = 1; i < n; i++)
		if (p->attn[i].tp == p->attn[i - 1].tp)
			return bp_errorf(err, "profile.attention has two tables for tp %d",
					 p->attn[i].tp);
	return 0;
}

static int read_linear(struct bp_profile *p, json_t *root, struct bp_error *err)
{
	static const char *const keys[] = {"tp", "tokens", "fwd", "bwd", "lm_head_fwd",
					   "lm_head_bwd", NULL};
	json_t *a = bp_json_get_array(root, "linear", "profile", err);
	if (!a)
		return -1;
	size_t n = json_array_size(a);
	p->linear = bp_calloc(n, sizeof(*p->linear), err);
	if (!p->linear)
		return -1;
	p->nlinear = n;
	for (size_t i = 0; i < n; i++) {
		struct bp_linear_table *t = &p->linear[i];
		json_t *o = json_array_get(a, i);
		char w[64];
		snprintf(w, sizeof(w), "profile.linear[%zu]", i);
		if (bp_json_check_keys(o, keys, w, err) < 0 ||
		    bp_json_get_int32(o, "tp", 1, 1, MAX_DEGREE, &t->tp, w, err) < 0)
			return -1;
		snprintf(w, sizeof(w), "profile.linear[tp=%d]", t->tp);
		if (read_axis(o, "tokens", 1, &t->tokens, &t->n, w, err) < 0 ||
		    read_curve(o, "fwd", t->n, "token count", &t->fwd, w, err) < 0 ||
		    read_curve(o, "bwd", t->n, "token count", &t->bwd, w, err) < 0)
			return -1;
		int hl = json_object_get(o, "lm_head_fwd") != NULL;
		if (hl != (json_object_get(o, "lm_head_bwd") != NULL))
			return bp_errorf(err, "%s has one of lm_head_fwd and lm_head_bwd: both or "
					 "neither", w);
		if (hl && (read_curve(o, "lm_head_fwd", t->n, "token count", &t->lm_fwd, w, err) < 0 ||
			   read_curve(o, "lm_head_bwd", t->n, "token count", &t->lm_bwd, w, err) < 0))
			return -1;
	}
	qsort(p->linear, n, sizeof(*p->linear), cmp_linear);
	for (size_t i = 1; i < n; i++)
		if (p->linear[i].tp == p->linear[i - 1].tp)
			return bp_errorf(err, "profile.linear has two tables for tp %d",
					 p->linear[i].tp);
	return 0;
}

/* sparse_attention[] (v2): M[x,k] of SparseBalance Eq. 10, one table per (tp, block). */
static int read_sparse(struct bp_profile *p, json_t *root, struct bp_error *err)
{
	static const char *const keys[] = {"tp", "block", "x", "k", "fwd", "bwd", NULL};
	json_t *a = bp_json_get_array(root, "sparse_attention", "profile", err);
	if (!a)
		return -1;
	size_t n = json_array_size(a);
	p->sparse = bp_calloc(n, sizeof(*p->sparse), err);
	if (!p->sparse)
		return -1;
	p->nsparse = n;
	for (size_t i = 0; i < n; i++) {
		struct bp_sparse_table *t = &p->sparse[i];
		json_t *o = json_array_get(a, i);
		char w[80];
		snprintf(w, sizeof(w), "profile.sparse_attention[%zu]", i);
		if (bp_json_check_keys(o, keys, w, err) < 0 ||
		    bp_json_get_int32(o, "tp", 1, 1, MAX_DEGREE, &t->tp, w, err) < 0 ||
		    bp_json_get_int32(o, "block", 1, 1, 1 << 24, &t->block, w, err) < 0)
			return -1;
		snprintf(w, sizeof(w), "profile.sparse_attention[tp=%d,block=%d]", t->tp, t->block);
		if (read_axis(o, "x", 1, &t->x, &t->nx, w, err) < 0 ||
		    read_int_axis(o, "k", &t->k, &t->nk, w, err) < 0 ||
		    read_matrix(o, "fwd", t->nx, t->nk, "x", "k", &t->fwd, w, err) < 0 ||
		    read_matrix(o, "bwd", t->nx, t->nk, "x", "k", &t->bwd, w, err) < 0)
			return -1;
	}
	qsort(p->sparse, n, sizeof(*p->sparse), cmp_sparse);
	for (size_t i = 1; i < n; i++)
		if (!cmp_sparse(&p->sparse[i], &p->sparse[i - 1]))
			return bp_errorf(err, "profile.sparse_attention has two tables for tp %d "
					 "block %d", p->sparse[i].tp, p->sparse[i].block);
	return 0;
}

static int read_collectives(struct bp_profile *p, json_t *root, struct bp_error *err)
{
	static const char *const keys[] = {"op", "inter", "ranks", "bytes", "us", NULL};
	json_t *a = bp_json_get_array(root, "collectives", "profile", err);
	if (!a)
		return -1;
	size_t n = json_array_size(a);
	p->coll = bp_calloc(n, sizeof(*p->coll), err);
	if (!p->coll)
		return -1;
	p->ncoll = n;
	for (size_t i = 0; i < n; i++) {
		struct bp_coll_table *t = &p->coll[i];
		json_t *o = json_array_get(a, i);
		char w[96], op[32];
		snprintf(w, sizeof(w), "profile.collectives[%zu]", i);
		if (bp_json_check_keys(o, keys, w, err) < 0 ||
		    bp_json_get_str(o, "op", 1, op, sizeof(op), w, err) < 0)
			return -1;
		if (bp_coll_op_parse(op, &t->op) < 0)
			return bp_errorf(err,
					 "%s.op \"%s\" is not one of all_reduce, all_gather, "
					 "reduce_scatter, all_to_all, send_recv",
					 w, op);
		json_t *inter = json_object_get(o, "inter");
		if (!inter)
			return bp_errorf(err, "missing key \"inter\" in %s", w);
		if (!json_is_boolean(inter))
			return bp_errorf(err, "%s.inter is not a boolean", w);
		t->inter = json_is_true(inter);
		if (bp_json_get_int32(o, "ranks", 1, 2, MAX_DEGREE, &t->ranks, w, err) < 0)
			return -1;
		snprintf(w, sizeof(w), "profile.collectives[%s,%s,%d]", op,
			 t->inter ? "inter" : "intra", t->ranks);
		if (read_axis(o, "bytes", 0, &t->bytes, &t->n, w, err) < 0 ||
		    read_curve(o, "us", t->n, "message size", &t->us, w, err) < 0)
			return -1;
	}
	qsort(p->coll, n, sizeof(*p->coll), cmp_coll);
	for (size_t i = 1; i < n; i++)
		if (!cmp_coll(&p->coll[i], &p->coll[i - 1]))
			return bp_errorf(err, "profile.collectives has two tables for %s %s %d ranks",
					 bp_coll_op_name(p->coll[i].op),
					 p->coll[i].inter ? "inter" : "intra", p->coll[i].ranks);
	return 0;
}

static int read_fits(struct bp_profile *p, json_t *root, struct bp_error *err)
{
	static const char *const keys[] = {"tp", "cp", "pp", "a", "b", "c", NULL};
	json_t *a = bp_json_get_array(root, "fits", "profile", err);
	if (!a)
		return -1;
	size_t n = json_array_size(a);
	p->fits = bp_calloc(n, sizeof(*p->fits), err);
	if (!p->fits)
		return -1;
	p->nfits = n;
	for (size_t i = 0; i < n; i++) {
		struct bp_fit *f = &p->fits[i];
		json_t *o = json_array_get(a, i);
		char w[64];
		snprintf(w, sizeof(w), "profile.fits[%zu]", i);
		/* a, b, c are least-squares coefficients: any sign is legitimate, no magnitude
		 * above the largest time a cell may hold. */
		if (read_degrees(o, keys, &f->tp, &f->cp, &f->pp, w, err) < 0 ||
		    bp_json_get_real(o, "a", 1, -BP_PROFILE_MAX_US, BP_PROFILE_MAX_US, &f->a, w,
				     err) < 0 ||
		    bp_json_get_real(o, "b", 1, -BP_PROFILE_MAX_US, BP_PROFILE_MAX_US, &f->b, w,
				     err) < 0 ||
		    bp_json_get_real(o, "c", 1, -BP_PROFILE_MAX_US, BP_PROFILE_MAX_US, &f->c, w,
				     err) < 0)
			return -1;
	}
	qsort(p->fits, n, sizeof(*p->fits), cmp_fit);
	for (size_t i = 1; i < n; i++)
		if (!cmp_fit(&p->fits[i], &p->fits[i - 1]))
			return bp_errorf(err, "profile.fits has tp %d cp %d pp %d twice",
					 p->fits[i].tp, p->fits[i].cp, p->fits[i].pp);
	return 0;
}

/* Every scheme the profile was made for must be answerable: tables for its TP degree. */
static int check_schemes(const struct bp_profile *p, struct bp_error *err)
{
	for (size_t i = 0; i < p->nschemes; i++) {
		const struct bp_scheme *s = &p->schemes[i];
		const char *miss = !bp_profile_attn(p, s->tp)	? "attention"
				   : !bp_profile_linear(p, s->tp) ? "linear"
								  : NULL;
		if (miss)
			return bp_errorf(err, "profile.schemes: tp %d cp %d pp %d has no %s table "
					 "for tp %d", s->tp, s->cp, s->pp, miss, s->tp);
	}
	return 0;
}

static int read_profile(struct bp_profile *p, json_t *root, struct bp_error *err)
{
	static const char *const keys_v2[] = {"format",  "kind",	"name",	 "hardware",
					      "model",   "schemes",	"attention", "linear",
					      "sparse_attention", "collectives", "fits", "memory",
					      "provenance", NULL};
	const char *const *keys = keys_v2;
	char fmt[64];
	if (!json_is_object(root))
		return bp_errorf(err, "profile is not a JSON object");
	if (bp_json_get_str(root, "format", 1, fmt, sizeof(fmt), "profile", err) < 0)
		return -1;
	int v1 = !strcmp(fmt, BP_PROFILE_FORMAT_V1);
	if (!v1 && strcmp(fmt, BP_PROFILE_FORMAT))
		return bp_errorf(err, "unsupported format \"%s\" (expected \"%s\" or \"%s\")", fmt,
				 BP_PROFILE_FORMAT, BP_PROFILE_FORMAT_V1);
	if (v1) { /* the same keys less sparse_attention, which v1 does not know */
		static const char *const keys_v1[] = {"format",	"kind",	 "name", "hardware",
						      "model",	"schemes", "attention", "linear",
						      "collectives", "fits", "memory", NULL};
		keys = keys_v1;
	}
	if (bp_json_check_keys(root, keys, "profile", err) < 0 ||
	    bp_json_get_str(root, "kind", 1, p->kind, sizeof(p->kind), "profile", err) < 0)
		return -1;
	if (strcmp(p->kind, "measured") && strcmp(p->kind, "analytic"))
		return bp_errorf(err, "profile.kind \"%s\" is not \"measured\" or \"analytic\"",
				 p->kind);
	json_t *model = bp_json_get_object(root, "model", "profile", err);
	if (bp_json_get_str(root, "name", 1, p->name, sizeof(p->name), "profile", err) < 0 ||
	    read_hardware(&p->hw, root, err) < 0 || !model ||
	    bp_model_from_json(&p->model, model, "profile.model", err) < 0 ||
	    read_schemes(p, root, err) < 0 || read_attention(p, root, err) < 0 ||
	    read_linear(p, root, err) < 0 || (!v1 && read_sparse(p, root, err) < 0) ||
	    read_collectives(p, root, err) < 0 || read_fits(p, root, err) < 0 ||
	    read_memory(&p->mem, &p->hw, root, err) < 0 || check_schemes(p, err) < 0 ||
	    (!v1 && read_provenance(&p->prov, root, err) < 0))
		return -1;
	/* Which kernels' blocks the launch model deals (attn_geom.h). */
	int geom = BP_ATTN_GEOM_WMMA;
	if (!strcmp(p->prov.attn_kernels, BP_ATTN_GEOM_NAME))
		geom = BP_ATTN_GEOM_MMA;
	else if (p->prov.attn_kernels[0])
		return bp_errorf(err, "profile.provenance.attn_kernels \"%s\" is not \"%s\" (or "
				 "absent: the kernels before it)", p->prov.attn_kernels,
				 BP_ATTN_GEOM_NAME);
	for (size_t i = 0; i < p->nattn; i++) { /* the launch model of measured tables */
		p->attn[i].geom = geom;
		bp_attn_fit_launch(&p->attn[i], p->model.heads / p->attn[i].tp,
				   p->model.kv_heads / p->attn[i].tp);
	}
	return 0;
}

int bp_profile_from_json(struct bp_profile *p, json_t *root, struct bp_error *err)
{
	struct bp_profile tmp;
	bp_profile_init(&tmp);
	if (read_profile(&tmp, root, err) < 0) {
		bp_profile_release(&tmp);
		return -1;
	}
	bp_profile_release(p);
	*p = tmp;
	return 0;
}

/* ---- writing --------------------------------------------------------------------------- */

/* v rounded to 9 significant digits, so fit coefficients of any magnitude print stably. */
static json_t *sig_real(double v)
{
	if (!isfinite(v))
		return NULL;
	if (v == 0.0)
		return json_real(0.0);
	int k = 8 - (int)floor(log10(fabs(v))); /* decimal places that keep 9 digits */
	if (k > 22 || k < -22)
		return json_real(v);
	double p10 = 1.0;
	for (int i = 0; i < abs(k); i++)
		p10 *= 10.0; /* exact up to 1e22 */
	double r = k >= 0 ? round(v * p10) / p10 : round(v / p10) * p10;
	return json_real(r == 0.0 ? 0.0 : r);
}

static json_t *matrix_to_json(const double *v, size_t nq, size_t nkv)
{
	json_t *a = json_array();
	int ok = a != NULL;
	for (size_t i = 0; ok && i < nq; i++)
		bp_json_append(a, bp_json_real_array(v + i * nkv, nkv), &ok);
	if (!ok) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *degrees_to_json(int tp, int cp, int pp)
{
	json_t *o = json_object();
	int ok = o != NULL;
	bp_json_set(o, "tp", json_integer(tp), &ok);
	bp_json_set(o, "cp", json_integer(cp), &ok);
	bp_json_set(o, "pp", json_integer(pp), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* A new object holding the table's fields of base, or NULL. */
static json_t *fields_to_json(const struct bp_field *f, size_t n, const void *base)
{
	json_t *o = json_object();
	if (bp_json_write_fields(o, f, n, base) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *attn_to_json(const struct bp_attn_table *t)
{
	json_t *o = json_object();
	int ok = o != NULL;
	bp_json_set(o, "tp", json_integer(t->tp), &ok);
	bp_json_set(o, "q", bp_json_real_array(t->q, t->nq), &ok);
	bp_json_set(o, "kv", bp_json_real_array(t->kv, t->nkv), &ok);
	bp_json_set(o, "fwd", matrix_to_json(t->fwd, t->nq, t->nkv), &ok);
	bp_json_set(o, "bwd", matrix_to_json(t->bwd, t->nq, t->nkv), &ok);
	if (t->fwd_alone && t->bwd_alone) {
		bp_json_set(o, "fwd_alone", matrix_to_json(t->fwd_alone, t->nq, t->nkv), &ok);
		bp_json_set(o, "bwd_alone", matrix_to_json(t->bwd_alone, t->nq, t->nkv), &ok);
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *linear_to_json(const struct bp_linear_table *t)
{
	json_t *o = json_object();
	int ok = o != NULL;
	bp_json_set(o, "tp", json_integer(t->tp), &ok);
	bp_json_set(o, "tokens", bp_json_real_array(t->tokens, t->n), &ok);
	bp_json_set(o, "fwd", bp_json_real_array(t->fwd, t->n), &ok);
	bp_json_set(o, "bwd", bp_json_real_array(t->bwd, t->n), &ok);
	if (t->lm_fwd && t->lm_bwd) {
		bp_json_set(o, "lm_head_fwd", bp_json_real_array(t->lm_fwd, t->n), &ok);
		bp_json_set(o, "lm_head_bwd", bp_json_real_array(t->lm_bwd, t->n), &ok);
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *sparse_to_json(const struct bp_sparse_table *t)
{
	json_t *o = json_object(), *k = json_array();
	int ok = o != NULL && k != NULL;
	for (size_t i = 0; ok && i < t->nk; i++)
		bp_json_append(k, json_integer(t->k[i]), &ok);
	bp_json_set(o, "tp", json_integer(t->tp), &ok);
	bp_json_set(o, "block", json_integer(t->block), &ok);
	bp_json_set(o, "x", bp_json_real_array(t->x, t->nx), &ok);
	bp_json_set(o, "k", k, &ok);
	bp_json_set(o, "fwd", matrix_to_json(t->fwd, t->nx, t->nk), &ok);
	bp_json_set(o, "bwd", matrix_to_json(t->bwd, t->nx, t->nk), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *coll_to_json(const struct bp_coll_table *t)
{
	json_t *o = json_object();
	int ok = o != NULL;
	bp_json_set(o, "op", json_string(bp_coll_op_name(t->op)), &ok);
	bp_json_set(o, "inter", json_boolean(t->inter), &ok);
	bp_json_set(o, "ranks", json_integer(t->ranks), &ok);
	bp_json_set(o, "bytes", bp_json_real_array(t->bytes, t->n), &ok);
	bp_json_set(o, "us", bp_json_real_array(t->us, t->n), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *fit_to_json(const struct bp_fit *f)
{
	json_t *o = degrees_to_json(f->tp, f->cp, f->pp);
	int ok = o != NULL;
	bp_json_set(o, "a", sig_real(f->a), &ok);
	bp_json_set(o, "b", sig_real(f->b), &ok);
	bp_json_set(o, "c", sig_real(f->c), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Copies n elements of size sz and sorts the copy; the caller frees. */
static void *sorted_copy(const void *v, size_t n, size_t sz,
			 int (*cmp)(const void *, const void *))
{
	void *c = malloc(n ? n * sz : 1);
	if (!c)
		return NULL;
	if (n) {
		memcpy(c, v, n * sz);
		qsort(c, n, sz, cmp);
	}
	return c;
}

json_t *bp_profile_to_json(const struct bp_profile *p)
{
	json_t *o = json_object(), *sch = json_array(), *att = json_array(), *lin = json_array();
	json_t *col = json_array(), *fit = json_array(), *spa = json_array();
	struct bp_scheme *ss = sorted_copy(p->schemes, p->nschemes, sizeof(*ss), cmp_scheme);
	struct bp_attn_table *sa = sorted_copy(p->attn, p->nattn, sizeof(*sa), cmp_attn);
	struct bp_linear_table *sl = sorted_copy(p->linear, p->nlinear, sizeof(*sl), cmp_linear);
	struct bp_sparse_table *sp = sorted_copy(p->sparse, p->nsparse, sizeof(*sp), cmp_sparse);
	struct bp_coll_table *sc = sorted_copy(p->coll, p->ncoll, sizeof(*sc), cmp_coll);
	struct bp_fit *sf = sorted_copy(p->fits, p->nfits, sizeof(*sf), cmp_fit);
	int ok = o && sch && att && lin && col && fit && spa && ss && sa && sl && sp && sc && sf;
	for (size_t i = 0; ok && i < p->nschemes; i++)
		bp_json_append(sch, degrees_to_json(ss[i].tp, ss[i].cp, ss[i].pp), &ok);
	for (size_t i = 0; ok && i < p->nattn; i++)
		bp_json_append(att, attn_to_json(&sa[i]), &ok);
	for (size_t i = 0; ok && i < p->nlinear; i++)
		bp_json_append(lin, linear_to_json(&sl[i]), &ok);
	for (size_t i = 0; ok && i < p->nsparse; i++)
		bp_json_append(spa, sparse_to_json(&sp[i]), &ok);
	for (size_t i = 0; ok && i < p->ncoll; i++)
		bp_json_append(col, coll_to_json(&sc[i]), &ok);
	for (size_t i = 0; ok && i < p->nfits; i++)
		bp_json_append(fit, fit_to_json(&sf[i]), &ok);
	/* bp_json_set steals each value, also on failure, so one decref of o frees them all. */
	bp_json_set(o, "schemes", sch, &ok);
	bp_json_set(o, "attention", att, &ok);
	bp_json_set(o, "linear", lin, &ok);
	bp_json_set(o, "sparse_attention", spa, &ok);
	bp_json_set(o, "collectives", col, &ok);
	bp_json_set(o, "fits", fit, &ok);
	bp_json_set(o, "format", json_string(BP_PROFILE_FORMAT), &ok);
	bp_json_set(o, "kind", json_string(p->kind), &ok);
	bp_json_set(o, "name", json_string(p->name), &ok);
	bp_json_set(o, "hardware",
		    fields_to_json(hardware_fields, BP_ARRAY_LEN(hardware_fields), &p->hw), &ok);
	bp_json_set(o, "model", bp_model_to_json(&p->model), &ok);
	bp_json_set(o, "memory",
		    fields_to_json(memory_fields, BP_ARRAY_LEN(memory_fields), &p->mem), &ok);
	if (p->prov.present)
		bp_json_set(o, "provenance",
			    fields_to_json(prov_fields, BP_ARRAY_LEN(prov_fields), &p->prov), &ok);
	free(ss);
	free(sa);
	free(sl);
	free(sp);
	free(sc);
	free(sf);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}
