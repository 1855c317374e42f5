/* hyd_json.c: the strategies file codec (hyd_json.h, balplan.strategies/v1), the one place
 * that reads and writes Hydraulis's candidate sets. Used by `balplan propose` (write) and
 * `balplan solve --strategies` (read). Every field named once in a field table. */
#include "hyd_json.h"

#include <stddef.h>
#include <string.h>

#include "jsonutil.h"

static const struct bp_field group_fields[] = {
	BP_FIELD_INT(struct bp_hyd_group, tp, "tp", 1, 1 << 20),
	BP_FIELD_INT(struct bp_hyd_group, pp, "pp", 1, 1 << 20),
	BP_FIELD_INT(struct bp_hyd_group, count, "count", 1, 1 << 20),
};

static const struct bp_field strategy_fields[] = {
	{"origin", BP_FT_STR, offsetof(struct bp_hyd_strategy, origin),
	 sizeof(((struct bp_hyd_strategy *)0)->origin), 0, 0, BP_FF_OPT},
	BP_FIELD_I64F(struct bp_hyd_strategy, len_lo, "len_lo", 0, 1e15, BP_FF_OPT),
	BP_FIELD_I64F(struct bp_hyd_strategy, len_hi, "len_hi", 0, 1e15, BP_FF_OPT),
	BP_FIELD_REALF(struct bp_hyd_strategy, expected_us, "expected_us", 0, 1e300,
		       BP_FF_OPT | BP_FF_NONNEG),
	BP_FIELD_I64F(struct bp_hyd_strategy, max_len, "max_len", 0, 1e15, BP_FF_OPT),
};

static const struct bp_field sinfo_fields[] = {
	BP_FIELD_INT(struct bp_hyd_sinfo, tp, "tp", 1, 1 << 20),
	BP_FIELD_INT(struct bp_hyd_sinfo, pp, "pp", 1, 1 << 20),
	BP_FIELD_I64(struct bp_hyd_sinfo, max_len, "max_len", 0, 1e15),
	BP_FIELD_I64(struct bp_hyd_sinfo, max_len_full, "max_len_full", 0, 1e15),
	BP_FIELD_I64(struct bp_hyd_sinfo, util_len, "util_len", 0, 1e15),
	BP_FIELD_REALF(struct bp_hyd_sinfo, a, "a", 0, 1e300, BP_FF_EXACT),
	BP_FIELD_REALF(struct bp_hyd_sinfo, b, "b", 0, 1e300, BP_FF_EXACT),
	BP_FIELD_REALF(struct bp_hyd_sinfo, c, "c", -1e300, 1e300, BP_FF_EXACT),
	BP_FIELD_REALF(struct bp_hyd_sinfo, fit_err, "fit_err", 0, 1e300, BP_FF_EXACT),
};

static const struct bp_field proposal_fields[] = {
	BP_FIELD_STR(struct bp_hyd_set, dataset, "dataset"),
	BP_FIELD_STR(struct bp_hyd_set, dataset_sha, "dataset_sha256"),
	BP_FIELD_STR(struct bp_hyd_set, profile, "profile"),
	BP_FIELD_I64(struct bp_hyd_set, max_tokens, "max_tokens", 1, 1e15),
	BP_FIELD_I64(struct bp_hyd_set, tokens_per_step, "tokens_per_step", 0, 1e15),
	BP_FIELD_I64(struct bp_hyd_set, len_step, "len_step", 1, 1e15),
	BP_FIELD_INT(struct bp_hyd_set, gpu_step, "gpu_step", 1, 1 << 20),
	BP_FIELD_STR(struct bp_hyd_set, optimizer, "optimizer"),
};

int bp_hyd_set_from_json(struct bp_hyd_set *s, json_t *root, struct bp_error *err)
{
	static const char *const keys[] = {"format", "gpus", "model", "proposal", "schemes",
					   "strategies", NULL};
	char where[96];
	if (!json_is_object(root))
		return bp_errorf(err, "strategies is not an object");
	if (bp_json_check_keys(root, keys, "strategies", err) < 0 ||
	    bp_json_check_format(root, BP_HYD_SET_FORMAT, "strategies", err) < 0 ||
	    bp_json_get_int32(root, "gpus", 0, 1, 1 << 20, &s->gpus, "strategies", err) < 0 ||
	    bp_json_get_str(root, "model", 0, s->model, sizeof(s->model), "strategies", err) < 0)
		return -1;
	json_t *p = json_object_get(root, "proposal");
	if (p && bp_json_read_fields(p, proposal_fields, BP_ARRAY_LEN(proposal_fields), s, NULL,
				     1, "strategies.proposal", err) < 0)
		return -1;
	if (p && strcmp(s->optimizer, "replica") && strcmp(s->optimizer, "full"))
		return bp_errorf(err, "strategies.proposal.optimizer \"%s\" is not replica or full",
				 s->optimizer);
	json_t *sch = json_object_get(root, "schemes");
	if (sch) {
		if (!json_is_array(sch))
			return bp_errorf(err, "strategies.schemes is not an array");
		s->schemes = bp_calloc(json_array_size(sch) + 1, sizeof(*s->schemes), err);
		if (!s->schemes)
			return -1;
		size_t i;
		json_t *v;
		json_array_foreach(sch, i, v) {
			snprintf(where, sizeof(where), "strategies.schemes[%zu]", i);
			if (bp_json_read_fields(v, sinfo_fields, BP_ARRAY_LEN(sinfo_fields),
						&s->schemes[i], NULL, 1, where, err) < 0)
				return -1;
			s->nschemes = i + 1;
		}
	}
	json_t *arr = bp_json_get_array(root, "strategies", "strategies", err);
	if (!arr)
		return -1;
	if (!json_array_size(arr))
		return bp_errorf(err, "strategies.strategies is empty");
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v) {
		static const char *const extra[] = {"pipelines", NULL};
		struct bp_hyd_strategy st;
		memset(&st, 0, sizeof(st));
		snprintf(where, sizeof(where), "strategies.strategies[%zu]", i);
		if (bp_json_read_fields(v, strategy_fields, BP_ARRAY_LEN(strategy_fields), &st,
					extra, 1, where, err) < 0)
			return -1;
		json_t *pl = bp_json_get_array(v, "pipelines", where, err);
		if (!pl)
			return -1;
		if (!json_array_size(pl))
			return bp_errorf(err, "%s.pipelines is empty", where);
		if (json_array_size(pl) > BP_HYD_MAX_GROUPS)
			return bp_errorf(err, "%s.pipelines has more than %d schemes", where,
					 BP_HYD_MAX_GROUPS);
		size_t k;
		json_t *g;
		json_array_foreach(pl, k, g) {
			char w2[128];
			snprintf(w2, sizeof(w2), "%s.pipelines[%zu]", where, k);
			if (bp_json_read_fields(g, group_fields, BP_ARRAY_LEN(group_fields),
						&st.g[k], NULL, 1, w2, err) < 0)
				return -1;
			st.ng = k + 1;
		}
		bp_hyd_strategy_canon(&st);
		if (bp_hyd_set_find(s, &st) >= 0) {
			char d[256];
			bp_hyd_strategy_describe(&st, d, sizeof(d));
			return bp_errorf(err, "%s repeats strategy %s", where, d);
		}
		if (bp_hyd_set_add(s, &st, err) < 0)
			return -1;
	}
	return 0;
}

json_t *bp_hyd_set_to_json(const struct bp_hyd_set *s)
{
	json_t *o = json_object(), *arr = json_array(), *sch = json_array();
	int ok = o && arr && sch;
	bp_json_set(o, "format", json_string(BP_HYD_SET_FORMAT), &ok);
	if (s->gpus)
		bp_json_set(o, "gpus", json_integer(s->gpus), &ok);
	if (s->model[0])
		bp_json_set(o, "model", json_string(s->model), &ok);
	if (s->max_tokens) {
		json_t *p = json_object();
		ok &= bp_json_write_fields(p, proposal_fields, BP_ARRAY_LEN(proposal_fields), s) ==
		      0;
		bp_json_set(o, "proposal", p, &ok);
	}
	for (size_t i = 0; i < s->nschemes; i++) {
		json_t *x = json_object();
		ok &= bp_json_write_fields(x, sinfo_fields, BP_ARRAY_LEN(sinfo_fields),
					   &s->schemes[i]) == 0;
		bp_json_append(sch, x, &ok);
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct bp_hyd_strategy *st = &s->s[i];
		json_t *x = json_object(), *pl = json_array();
		ok &= x && pl;
		ok &= bp_json_write_fields(x, strategy_fields, BP_ARRAY_LEN(strategy_fields), st) ==
		      0;
		for (size_t k = 0; k < st->ng; k++) {
			json_t *g = json_object();
			ok &= bp_json_write_fields(g, group_fields, BP_ARRAY_LEN(group_fields),
						   &st->g[k]) == 0;
			bp_json_append(pl, g, &ok);
		}
		bp_json_set(x, "pipelines", pl, &ok);
		bp_json_append(arr, x, &ok);
	}
	if (s->nschemes)
		bp_json_set(o, "schemes", sch, &ok);
	else
		json_decref(sch);
	bp_json_set(o, "strategies", arr, &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}
