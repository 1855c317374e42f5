/* methods.c: the method table (method.h): every file's BP_METHOD_ROW, and what asks it.
 * Adding a method: its file (with its row) and its test; nothing here. */
#include "method.h"

#include "ilp_pack.h"

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

int bp_method_takes(const struct bp_method *m, const char *key, const char *batching)
{
	int known = 0;
	for (size_t k = 0; m->params && m->params[k] && !known; k++)
		known = !strcmp(m->params[k], key);
	/* sparsebalance and sb-lbb packing with another method (sb_batching=NAME) take that
	 * method's parameters too */
	const struct bp_method *in = NULL;
	if (!known && batching &&
	    (m->solve == bp_method_sparsebalance || m->solve == bp_method_sb_lbb))
		in = bp_method_find(batching);
	return known || (in && in != m && bp_method_takes(in, key, NULL));
}

/* Keys a method records beyond its parameters: wlb's N, hydraulis's fits. */
static int recorded_key(const struct bp_method *m, const char *key)
{
	return !strcmp(key, "cp_shard") ||
	       (!strcmp(key, "microbatches_per_step") &&
		(m->solve == bp_method_wlb || m->solve == bp_method_wlb_ilp)) ||
	       (!strncmp(key, "fit_", 4) && m->solve == bp_method_hydraulis);
}

int bp_method_check_params(const struct bp_method *m, const struct bp_plan *p,
			   struct bp_error *err)
{
	struct bp_plan sc;
	int rc = -1;
	const char *batching = bp_plan_param(p, "sb_batching");
	const struct bp_method *in = batching && bp_method_takes(m, "sb_batching", NULL)
					     ? bp_method_find(batching) : NULL;
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

const struct bp_method *bp_method_find(const char *name)
{
	for (size_t i = 0; i < BP_ARRAY_LEN(rows); i++)
		if (!strcmp(rows[i]->name, name))
			return rows[i];
	return NULL;
}
