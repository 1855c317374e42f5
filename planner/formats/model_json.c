/* model_json.c: the model description codec (model_json.h), used by profile_json.c and
 * plan_json.c so both formats spell a model the same way. */
#include "model_json.h"

#include <stddef.h>

#include "jsonutil.h"

/* Every field named once, for the reader and the writer. */
static const struct bp_field model_fields[] = {
	BP_FIELD_STR(struct bp_model, name, "name"),
	BP_FIELD_INT(struct bp_model, layers, "layers", 1, 100000),
	BP_FIELD_INT(struct bp_model, hidden, "hidden", 1, 1 << 20),
	BP_FIELD_INT(struct bp_model, heads, "heads", 1, 1 << 16),
	BP_FIELD_INT(struct bp_model, kv_heads, "kv_heads", 1, 1 << 16),
	BP_FIELD_INT(struct bp_model, ffn, "ffn", 1, 1 << 22),
	BP_FIELD_INT(struct bp_model, vocab, "vocab", 1, 1 << 24),
	{"gated", BP_FT_INT, offsetof(struct bp_model, gated), 0, 0, 1, BP_FF_OPT},
};

int bp_model_from_json(struct bp_model *m, json_t *obj, const char *where,
		       struct bp_error *err)
{
	m->gated = 1; /* absent: SwiGLU */
	if (bp_json_read_fields(obj, model_fields, BP_ARRAY_LEN(model_fields), m, NULL, 1, where,
				err) < 0)
		return -1;
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
	if (bp_json_write_fields(o, model_fields, BP_ARRAY_LEN(model_fields), m) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}
