/* hf_config.c: a model from a Hugging Face Transformers `config.json` (issue 26 item 1;
 * model_json.h declares it). The cost model prices a dense decoder-only transformer with full
 * causal attention: layers x (QKV, attention, O, MLP), head_dim = hidden / heads, GQA, a gated
 * (SwiGLU) or plain MLP, an LM head of hidden x vocab. A config is read into that shape by the
 * field names of the Transformers configuration classes:
 *   Llama family (LlamaConfig; Mistral, Qwen2, Qwen2.5, Yi and others use the same names):
 *     num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads (default:
 *     num_attention_heads, as LlamaConfig), intermediate_size, vocab_size; the MLP is gated
 *     (gate_proj, up_proj, down_proj: LlamaMLP);
 *   GPT-2 (GPT2Config): n_layer, n_embd, n_head, n_inner (null: 4 x n_embd), vocab_size; a
 *     plain two-matrix MLP, multi-head attention.
 * What the cost model cannot price is refused with the reason, not approximated: mixtures of
 * experts (num_local_experts, num_experts, n_routed_experts or moe_intermediate_size), an
 * explicit head_dim other than hidden / heads, and sliding-window attention in use
 * (use_sliding_window true, or Mistral's sliding_window below max_position_embeddings).
 * Biases, tied embeddings (the LM head GEMM runs either way), rope and norm settings do not
 * change the time and are ignored. */
#include <stdio.h>
#include <string.h>

#include "jsonutil.h"
#include "model_json.h"

/* An integer field, or -1 when absent or null; -2 with err when present but not a positive
 * integer. */
static int64_t field(json_t *root, const char *key, struct bp_error *err)
{
	json_t *v = json_object_get(root, key);
	if (!v || json_is_null(v))
		return -1;
	if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
	    json_integer_value(v) > (int64_t)1 << 30) {
		bp_errorf(err, "config.json: \"%s\" is not a positive integer", key);
		return -2;
	}
	return json_integer_value(v);
}

static int need(int64_t v, const char *key, struct bp_error *err)
{
	if (v == -1)
		return bp_errorf(err, "config.json: \"%s\" is missing (a Llama-style or GPT-2 "
				 "configuration is expected)", key);
	return v < 0 ? -1 : 0;
}

static int refuse_moe(json_t *root, struct bp_error *err)
{
	static const char *const keys[] = {"num_local_experts", "num_experts", "n_routed_experts",
					   "moe_intermediate_size", NULL};
	for (size_t i = 0; keys[i]; i++) {
		json_t *v = json_object_get(root, keys[i]);
		if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) <= 1))
			return bp_errorf(err, "config.json: a mixture of experts (\"%s\"): the cost "
					 "model prices dense layers only", keys[i]);
	}
	return 0;
}

static int refuse_window(json_t *root, struct bp_error *err)
{
	json_t *use = json_object_get(root, "use_sliding_window");
	json_t *win = json_object_get(root, "sliding_window");
	json_t *maxp = json_object_get(root, "max_position_embeddings");
	if (use && json_is_true(use))
		return bp_errorf(err, "config.json: sliding-window attention (\"use_sliding_window\": "
				 "true): the cost model prices full causal attention");
	if (!use && win && json_is_integer(win) &&
	    (!maxp || !json_is_integer(maxp) || json_integer_value(win) < json_integer_value(maxp)))
		return bp_errorf(err, "config.json: sliding-window attention (\"sliding_window\": "
				 "%lld): the cost model prices full causal attention",
				 (long long)json_integer_value(win));
	return 0;
}

static int from_root(struct bp_model *m, json_t *root, const char *name,
		     struct bp_error *err)
{
	if (!json_is_object(root))
		return bp_errorf(err, "config.json: not a JSON object");
	if (refuse_moe(root, err) < 0 || refuse_window(root, err) < 0)
		return -1;
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	int64_t layers, hidden, heads, kv, ffn, vocab;
	int gpt2 = json_object_get(root, "n_embd") != NULL;
	if (gpt2) {
		layers = field(root, "n_layer", err);
		hidden = field(root, "n_embd", err);
		heads = field(root, "n_head", err);
		if (need(layers, "n_layer", err) < 0 || need(hidden, "n_embd", err) < 0 ||
		    need(heads, "n_head", err) < 0)
			return -1;
		kv = heads;
		ffn = field(root, "n_inner", err);
		if (ffn == -2)
			return -1;
		if (ffn == -1)
			ffn = 4 * hidden;
	} else {
		layers = field(root, "num_hidden_layers", err);
		hidden = field(root, "hidden_size", err);
		heads = field(root, "num_attention_heads", err);
		ffn = field(root, "intermediate_size", err);
		if (need(layers, "num_hidden_layers", err) < 0 || need(hidden, "hidden_size", err) < 0 ||
		    need(heads, "num_attention_heads", err) < 0 ||
		    need(ffn, "intermediate_size", err) < 0)
			return -1;
		kv = field(root, "num_key_value_heads", err);
		if (kv == -2)
			return -1;
		if (kv == -1)
			kv = heads;
	}
	vocab = field(root, "vocab_size", err);
	if (need(vocab, "vocab_size", err) < 0)
		return -1;
	if (hidden % heads)
		return bp_errorf(err, "config.json: hidden size %lld is not a multiple of %lld heads",
				 (long long)hidden, (long long)heads);
	int64_t hd = field(root, "head_dim", err);
	if (hd == -2)
		return -1;
	if (hd > 0 && hd != hidden / heads)
		return bp_errorf(err, "config.json: \"head_dim\" %lld is not hidden size / heads "
				 "(%lld): the cost model assumes the two agree",
				 (long long)hd, (long long)(hidden / heads));
	m->layers = (int)layers;
	m->hidden = (int)hidden;
	m->heads = (int)heads;
	m->kv_heads = (int)kv;
	m->ffn = (int)ffn;
	m->vocab = (int)vocab;
	m->gated = !gpt2;
	/* the same checks as a model object in a plan or profile */
	json_t *o = bp_model_to_json(m);
	if (!o)
		return bp_errorf(err, "out of memory");
	int rc = bp_model_from_json(m, o, "config.json", err);
	json_decref(o);
	return rc;
}

struct hf_ctx {
	struct bp_model *m;
	const char *name;
};

static int hf_cb(void *p, json_t *root, struct bp_error *err)
{
	struct hf_ctx *c = p;
	return from_root(c->m, root, c->name, err);
}

int bp_model_from_hf_config(const char *text, size_t len, const char *name,
			    struct bp_model *m, struct bp_error *err)
{
	struct hf_ctx c = {m, name};
	return bp_json_parse_text(text, len, hf_cb, &c, err);
}
