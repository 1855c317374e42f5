/* model_json.h: codec of a model description (struct bp_model), shared by the profile and
 * plan codecs: {"name","layers","hidden","heads","kv_heads","ffn","vocab","gated"}. */
#ifndef BP_MODEL_JSON_H
#define BP_MODEL_JSON_H

#include <jansson.h>

#include "bp.h"
#include "presets.h"

/* Reads and checks (positive sizes, heads divisible by kv_heads, hidden by heads). where
 * names the object in messages. */
int bp_model_from_json(struct bp_model *m, json_t *obj, const char *where,
		       struct bp_error *err);
/* New reference or NULL. */
json_t *bp_model_to_json(const struct bp_model *m);

/* A model from a Hugging Face Transformers config.json (text, len bytes), named name
 * (truncated to the struct's size): Llama-style or GPT-2 field names; mixtures of experts,
 * sliding-window attention and a head_dim other than hidden / heads refused with the reason
 * (hf_config.c). Returns 0, or -1 with err. */
int bp_model_from_hf_config(const char *text, size_t len, const char *name,
			    struct bp_model *m, struct bp_error *err);

#endif
