/* methods.c: the method table (method.h): every file's BP_METHOD_ROW, and what asks it.
 * Adding a method: its file (with its row) and its test; nothing here. */
#include "method.h"

#include "ilp_pack.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every method's row (BP_METHOD_ROW in its file), as CMakeLists.txt collected them from
 * the files of planner/methods/; bp_method_at orders them by rank. */
#include "method_rows.h"

static const struct bp_method *const rows[] = {BP_METHOD_ROWS};

int bp_method_check_request(const struct bp_method *m, struct bp_scheme sc,
			    const struct bp_model *mdl, enum bp_shard shard, struct bp_error *err)
{
	return m->check_request ? m->check_request(sc, mdl, shard, err) : 0;
}

int bp_method_in_all(const struct bp_method *m)
{
	return m->in_all;
}

int bp_method_own_memory(const struct bp_method *m)
{
	return m->own_memory;
}

/* The price hooks' shared terms, in instructions (cmd/cmd_solve_limits.c says how they were
 * counted): a GLPK work unit; a sorting packer's document and log2 step. */
#define I_ILP_WORK 30.0
#define I_SORT_DOC 100.0

double bp_price_param(const struct bp_price_req *r, const char *key, double def)
{
	for (size_t i = 0; i < r->nparams; i++)
		if (!strcmp(r->params[i].key, key)) {
			double v;
			if (bp_parse_double(r->params[i].value, &v, key, NULL) == 0 && isfinite(v))
				return v;
		}
	return def;
}

const char *bp_price_param_text(const struct bp_price_req *r, const char *key)
{
	for (size_t i = 0; i < r->nparams; i++)
		if (!strcmp(r->params[i].key, key))
			return r->params[i].value;
	return NULL;
}

double bp_price_ilp_search(const struct bp_price_req *r, double work_m, double time_s)
{
	double w = bp_price_param(r, "ilp_work_limit", work_m) * 1e6;
	double tl = bp_price_param(r, "ilp_time_limit_s", time_s);
	return fmin(I_ILP_WORK * w, tl * r->instr_per_s);
}

double bp_price_ilp_pack(const struct bp_price_req *r, double window)
{
	double mv = bp_price_param(r, "ilp_max_vars", 10000);
	if (mv > 0 && r->docs * window * r->mb0 * window > 2.0 * mv)
		return 0.0;
	return bp_price_ilp_search(r, BP_ILP_WORK_LIMIT_M, 300.0) / window;
}

void bp_price_sort_packer(const struct bp_price_req *r, struct bp_price *p)
{
	double d = r->docs;
	p->own = p->pack = I_SORT_DOC * d * log2(d + 2.0);
}

int bp_method_takes(const struct bp_method *m, const char *key, const char *batching)
{
	int known = 0;
	for (size_t k = 0; m->params && m->params[k] && !known; k++)
		known = !strcmp(m->params[k], key);
	/* a method packing with another (its packer_param names it) takes that method's
	 * parameters too */
	const struct bp_method *in = NULL;
	if (!known && batching && m->packer_param)
		in = bp_method_find(batching);
	return known || (in && in != m && bp_method_takes(in, key, NULL));
}

/* Keys a method records beyond its parameters: every method's cp_shard, and its row's
 * recorded keys ('*' at the end: a prefix). */
static int recorded_key(const struct bp_method *m, const char *key)
{
	if (!strcmp(key, "cp_shard"))
		return 1;
	for (size_t k = 0; m->recorded && m->recorded[k]; k++) {
		const char *r = m->recorded[k];
		size_t n = strlen(r);
		if (n && r[n - 1] == '*' ? !strncmp(key, r, n - 1) : !strcmp(key, r))
			return 1;
	}
	return 0;
}

int bp_method_check_params(const struct bp_method *m, const struct bp_plan *p,
			   struct bp_error *err)
{
	struct bp_plan sc;
	int rc = -1;
	const char *batching = m->packer_param ? bp_plan_param(p, m->packer_param) : NULL;
	const struct bp_method *in = batching ? bp_method_find(batching) : NULL;
	for (size_t i = 0; i < p->nparams; i++) {
		const char *key = p->params[i].key;
		int known = recorded_key(m, key) || (in && recorded_key(in, key)) ||
			    bp_method_takes(m, key, batching);
		if (!known)
			return bp_errorf(err, "method '%s' has no parameter '%.64s'", m->name, key);
	}
	if (!m->check_params)
		return 0;
	bp_plan_init(&sc);
	sc.cluster = p->cluster;
	sc.model = p->model;
	sc.max_tokens = p->max_tokens;
	for (size_t i = 0; i < p->nparams; i++)
		if (bp_plan_set_param(&sc, p->params[i].key, p->params[i].value, err) < 0)
			goto out;
	if (p->nlayouts) {
		struct bp_layout l;
		if (bp_layout_copy(&l, &p->layouts[0], err) < 0)
			goto out;
		if (bp_plan_add_layout(&sc, &l, err) < 0) {
			bp_layout_release(&l);
			goto out;
		}
	}
	rc = m->check_params(p, &sc, err);
out:
	bp_plan_release(&sc);
	return rc;
}

size_t bp_method_count(void)
{
	return BP_ARRAY_LEN(rows);
}

const struct bp_method *bp_method_at(size_t i)
{
	/* the i-th row by rank (a handful of rows: a selection each call) */
	for (size_t k = 0; k < BP_ARRAY_LEN(rows); k++) {
		size_t before = 0;
		for (size_t q = 0; q < BP_ARRAY_LEN(rows); q++)
			before += rows[q]->rank < rows[k]->rank ||
				  (rows[q]->rank == rows[k]->rank && q < k);
		if (before == i)
			return rows[k];
	}
	return NULL;
}

const struct bp_record_ops *bp_record_find(const char *kind)
{
	for (size_t i = 0; i < BP_ARRAY_LEN(rows); i++)
		if (rows[i]->record && !strcmp(rows[i]->record->name, kind))
			return rows[i]->record;
	return NULL;
}

const struct bp_method *bp_method_baseline(void)
{
	for (size_t i = 0; i < BP_ARRAY_LEN(rows); i++)
		if (rows[i]->baseline)
			return rows[i];
	return NULL;
}

const struct bp_method *bp_method_find(const char *name)
{
	for (size_t i = 0; i < BP_ARRAY_LEN(rows); i++)
		if (!strcmp(rows[i]->name, name))
			return rows[i];
	return NULL;
}
