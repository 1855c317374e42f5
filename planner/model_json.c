/* model_json.c: the model description codec (model_json.h), used by profile_json.c and
 * plan_json.c so both formats spell a model the same way. */
#include "model_json.h"

#include "jsonutil.h"

int bp_model_from_json(struct bp_model *m, json_t *obj, const char *where,
		       struct bp_error *err)
{
	static const char *const keys[] = {"name",  "layers", "hidden", "heads", "kv_heads",
					   "ffn",   "vocab",  "gated",  NULL};
	int gated = 1;
	if (bp_json_check_keys(obj, keys, where, err) < 0 ||
	    bp_json_get_str(obj, "name", 1, m->name, sizeof(m->name), where, err) < 0 ||
	    bp_json_get_int32(obj, "layers", 1, 1, 100000, &m->layers, where, err) < 0 ||
	    bp_json_get_int32(obj, "hidden", 1, 1, 1 << 20, &m->hidden, where, err) < 0 ||
	    bp_json_get_int32(obj, "heads", 1, 1, 1 << 16, &m->heads, where, err) < 0 ||
	    bp_json_get_int32(obj, "kv_heads", 1, 1, 1 << 16, &m->kv_heads, where, err) < 0 ||
	    bp_json_get_int32(obj, "ffn", 1, 1, 1 << 22, &m->ffn, where, err) < 0 ||
	    bp_json_get_int32(obj, "vocab", 1, 1, 1 << 24, &m->vocab, where, err) < 0 ||
	    bp_json_get_int32(obj, "gated", 0, 0, 1, &gated, where, err) < 0)
		return -1;
	m->gated = gated;
	if (m->heads % m->kv_heads)
		return bp_errorf(err, "%s: kv_heads %d does not divide heads %d", where,
				 m->kv_heads, m->heads);
	if (m->hidden % m->heads)
		return bp_errorf(err, "%s: heads %d does not divide hidden %d", where, m->heads,
				 m->hidden);
	return 0;
}

json_t *bp_model_to_json(const struct bp_model *m)
{
	json_t *o = json_object();
	int ok = o != NULL;
	bp_json_set(o, "name", json_string(m->name), &ok);
	bp_json_set(o, "layers", json_integer(m->layers), &ok);
	bp_json_set(o, "hidden", json_integer(m->hidden), &ok);
	bp_json_set(o, "heads", json_integer(m->heads), &ok);
	bp_json_set(o, "kv_heads", json_integer(m->kv_heads), &ok);
	bp_json_set(o, "ffn", json_integer(m->ffn), &ok);
	bp_json_set(o, "vocab", json_integer(m->vocab), &ok);
	bp_json_set(o, "gated", json_integer(m->gated), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}
