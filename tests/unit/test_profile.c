/* test_profile.c: presets, the profile codec and the analytic profile.
 *
 * Checks the published parameter counts of two presets, that an analytic profile passes the
 * codec's own validation and survives encode -> decode -> encode byte for byte, that it is
 * deterministic, and that every validation rule of bp_profile_from_json fires with its exact
 * message (the JSON is mutated in memory). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "codec.h"
#include "costmodel.h"
#include "jsonutil.h"
#include "presets.h"
#include "profile.h"

static const struct bp_scheme test_schemes[] = {{8, 2, 4}, {4, 1, 2}};

static void test_presets(void)
{
	const struct bp_model *l3 = bp_model_preset("llama3-8b");
	const struct bp_model *l2 = bp_model_preset("LLaMA2-7B");
	CHECK(l3 && l2);
	if (!l3 || !l2)
		return;
	CHECK(!strcmp(l2->name, "llama2-7b"));
	CHECK(fabs(bp_model_params(l3) / 8.03e9 - 1.0) < 0.02);
	CHECK(fabs(bp_model_params(l2) / 6.74e9 - 1.0) < 0.02);
	CHECK(bp_model_preset("no-such-model") == NULL);
	CHECK(bp_model_preset("llama3-8") == NULL);
	CHECK(bp_gpu_preset("h100") == bp_gpu_preset("H100"));
	CHECK(bp_gpu_preset("H100") && bp_gpu_preset("h200") && bp_gpu_preset("A800") &&
	      bp_gpu_preset("H20"));
	CHECK(bp_gpu_preset("H2") == NULL);
	CHECK(bp_gpu_preset_at(bp_gpu_preset_count()) == NULL);
	CHECK(bp_model_preset_at(bp_model_preset_count()) == NULL);
	const char *want[] = {"llama2-7b",    "llama2-13b", "qwen2.5-32b", "llama3-8b",
			      "llama-34b",    "qwen2.5-0.5b", "qwen2.5-3b", "wlb-550m",
			      "wlb-7b",	      "wlb-30b",    "wlb-70b"};
	for (size_t i = 0; i < BP_ARRAY_LEN(want); i++)
		CHECK(bp_model_preset(want[i]) != NULL);
	for (size_t i = 0; i < bp_model_preset_count(); i++) {
		const struct bp_model *m = bp_model_preset_at(i);
		CHECK(bp_model_preset_source(i) != NULL);
		CHECK(m->hidden % m->heads == 0 && m->heads % m->kv_heads == 0);
	}
	for (size_t i = 0; i < bp_gpu_preset_count(); i++) {
		const struct bp_gpu *g = bp_gpu_preset_at(i);
		CHECK(bp_gpu_preset_source(i) != NULL);
		CHECK(g->bf16_tflops > 0 && g->hbm_bytes > 0 && g->gpus_per_node == 8);
	}
	/* Published sizes within 3% (Qwen's tied embeddings are counted twice). */
	CHECK(fabs(bp_model_params(bp_model_preset("llama2-13b")) / 13.0e9 - 1.0) < 0.03);
	CHECK(fabs(bp_model_params(bp_model_preset("wlb-70b")) / 69.0e9 - 1.0) < 0.03);
	CHECK(fabs(bp_model_params(bp_model_preset("wlb-550m")) / 0.55e9 - 1.0) < 0.03);
	CHECK(fabs(bp_model_params(bp_model_preset("qwen2.5-32b")) / 32.5e9 - 1.0) < 0.03);
	CHECK(bp_coll_op_name(BP_COLL_ALLTOALL) && !strcmp(bp_coll_op_name(BP_COLL_ALLTOALL),
							    "all_to_all"));
	enum bp_coll_op op;
	CHECK(bp_coll_op_parse("send_recv", &op) == 0 && op == BP_COLL_SENDRECV);
	CHECK(bp_coll_op_parse("broadcast", &op) < 0);
}

/* Decodes mutated JSON and expects the error text want (exactly). */
static void expect_error(json_t *root, const char *want, int line)
{
	struct bp_profile p;
	struct bp_error err = {{0}};
	bp_profile_init(&p);
	int rc = bp_profile_from_json(&p, root, &err);
	if (rc == 0 || strcmp(err.text, want))
		fprintf(stderr, "line %d: want error '%s', got rc %d '%s'\n", line, want, rc,
			err.text);
	CHECK(rc < 0 && !strcmp(err.text, want));
	CHECK(p.nattn == 0 && p.attn == NULL); /* left as it was */
	bp_profile_release(&p);
}

#define EXPECT(root, want) expect_error(root, want, __LINE__)

static json_t *attn8(json_t *root)
{
	return json_array_get(json_object_get(root, "attention"), 1); /* sorted: tp 4, tp 8 */
}

static json_t *fwd_row(json_t *root, size_t i)
{
	return json_array_get(json_object_get(attn8(root), "fwd"), i);
}

static void test_errors(json_t *good)
{
	json_t *r;

	r = json_deep_copy(good);
	json_array_set_new(fwd_row(r, 2), 3, json_real(-1.0));
	EXPECT(r, "profile.attention[tp=8].fwd[2][3] is negative");
	json_decref(r);

	r = json_deep_copy(good);
	json_array_set_new(fwd_row(r, 2), 3, json_real(0.5));
	EXPECT(r, "profile.attention[tp=8].fwd is not monotonic: [2][3] < [2][2]");
	json_decref(r);

	r = json_deep_copy(good); /* a cell equal to its left neighbour, below its upper one */
	{
		double left = json_number_value(json_array_get(fwd_row(r, 5), 7));
		double up = json_number_value(json_array_get(fwd_row(r, 4), 8));
		CHECK(up > left);
		json_array_set_new(fwd_row(r, 5), 8, json_real(left));
		if (up > left)
			EXPECT(r, "profile.attention[tp=8].fwd is not monotonic: [5][8] < [4][8]");
	}
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *q = json_object_get(attn8(r), "q");
		json_array_set(q, 3, json_array_get(q, 2));
	}
	EXPECT(r, "profile.attention[tp=8].q is not strictly increasing at index 3");
	json_decref(r);

	r = json_deep_copy(good);
	json_array_remove(fwd_row(r, 4), 0);
	EXPECT(r, "profile.attention[tp=8].fwd[4] has 17 values, expected 18 (one per kv)");
	json_decref(r);

	r = json_deep_copy(good);
	json_array_remove(json_object_get(attn8(r), "bwd"), 0);
	EXPECT(r, "profile.attention[tp=8].bwd has 17 rows, expected 18 (one per q)");
	json_decref(r);

	r = json_deep_copy(good);
	json_array_append(json_object_get(r, "attention"), attn8(r));
	EXPECT(r, "profile.attention has two tables for tp 8");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(json_object_get(r, "hardware"), "foo", json_integer(1));
	EXPECT(r, "unknown key \"foo\" in profile.hardware");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(attn8(r), "bar", json_integer(1));
	EXPECT(r, "unknown key \"bar\" in profile.attention[1]");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_del(json_object_get(r, "memory"), "reserved_bytes");
	EXPECT(r, "missing key \"reserved_bytes\" in profile.memory");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_del(r, "fits");
	EXPECT(r, "missing key \"fits\" in profile");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(json_object_get(r, "hardware"), "hbm_bytes", json_integer(0));
	EXPECT(r, "profile.hardware.hbm_bytes is zero");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(json_object_get(r, "hardware"), "net_gbps", json_real(-50.0));
	EXPECT(r, "profile.hardware.net_gbps is negative");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(json_object_get(r, "memory"), "reserved_bytes",
			    json_integer((json_int_t)200 << 30));
	EXPECT(r, "profile.memory.reserved_bytes 214748364800 is not below "
		  "profile.hardware.hbm_bytes 85899345920");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(r, "kind", json_string("guessed"));
	EXPECT(r, "profile.kind \"guessed\" is not \"measured\" or \"analytic\"");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(r, "format", json_string("balplan.profile/v0"));
	EXPECT(r, "unsupported format \"balplan.profile/v0\" (expected \"balplan.profile/v2\" or "
		  "\"balplan.profile/v1\")");
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *lin = json_array_get(json_object_get(r, "linear"), 0);
		json_array_set_new(json_object_get(lin, "bwd"), 5, json_real(0.0));
	}
	EXPECT(r, "profile.linear[tp=4].bwd is not monotonic: [5] < [4]");
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *lin = json_array_get(json_object_get(r, "linear"), 1);
		json_array_remove(json_object_get(lin, "fwd"), 0);
	}
	EXPECT(r, "profile.linear[tp=8].fwd has 31 values, expected 32 (one per token count)");
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *c = json_object_get(r, "collectives");
		json_array_append(c, json_array_get(c, 3));
	}
	EXPECT(r, "profile.collectives has two tables for all_reduce inter 2 ranks");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(json_array_get(json_object_get(r, "collectives"), 0), "op",
			    json_string("broadcast"));
	EXPECT(r, "profile.collectives[0].op \"broadcast\" is not one of all_reduce, all_gather, "
		  "reduce_scatter, all_to_all, send_recv");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(json_array_get(json_object_get(r, "collectives"), 0), "inter",
			    json_integer(0));
	EXPECT(r, "profile.collectives[0].inter is not a boolean");
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *c = json_array_get(json_object_get(r, "collectives"), 0);
		json_array_set_new(json_object_get(c, "bytes"), 0, json_real(-1.0));
	}
	EXPECT(r, "profile.collectives[all_reduce,intra,2].bytes[0] is negative");
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *s = json_object_get(r, "schemes"), *x = json_object();
		json_object_set_new(x, "tp", json_integer(2));
		json_object_set_new(x, "cp", json_integer(1));
		json_object_set_new(x, "pp", json_integer(1));
		json_array_append_new(s, x);
	}
	EXPECT(r, "profile.schemes: tp 2 cp 1 pp 1 has no attention table for tp 2");
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *s = json_object_get(r, "schemes");
		json_array_append(s, json_array_get(s, 0));
	}
	EXPECT(r, "profile.schemes has tp 4 cp 1 pp 2 twice");
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *f = json_object_get(r, "fits");
		json_array_append(f, json_array_get(f, 1));
	}
	EXPECT(r, "profile.fits has tp 8 cp 2 pp 4 twice");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(json_object_get(r, "model"), "heads", json_integer(0));
	EXPECT(r, "profile.model.heads is 0, outside [1, 65536]");
	json_decref(r);
}

static json_t *sparse8(json_t *root)
{
	return json_array_get(json_object_get(root, "sparse_attention"), 1); /* tp 4, tp 8 */
}

static json_t *sparse_row(json_t *root, const char *key, size_t i)
{
	return json_array_get(json_object_get(sparse8(root), key), i);
}

/* Reader rules of sparse_attention (as for attention) and of physical sense (> 0, not
 * absurd) on every kind of table. */
static void test_sparse_and_sense_errors(json_t *good)
{
	json_t *r;
	const char *w = "profile.sparse_attention[tp=8,block=256]";
	char want[256];

	r = json_deep_copy(good);
	json_array_set_new(sparse_row(r, "fwd", 3), 4, json_real(-2.0));
	snprintf(want, sizeof(want), "%s.fwd[3][4] is negative", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good); /* along k */
	json_array_set_new(sparse_row(r, "fwd", 10), 4, json_real(0.001));
	snprintf(want, sizeof(want), "%s.fwd is not monotonic: [10][4] < [10][3]", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good); /* along x: the first column, where k does not climb */
	json_array_set_new(sparse_row(r, "bwd", 12), 0,
			   json_real(json_number_value(json_array_get(sparse_row(r, "bwd", 11), 0)) -
				     1));
	snprintf(want, sizeof(want), "%s.bwd is not monotonic: [12][0] < [11][0]", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good);
	json_array_set_new(json_object_get(sparse8(r), "k"), 3, json_integer(2));
	snprintf(want, sizeof(want), "%s.k is not strictly increasing at index 3", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good);
	json_array_set_new(json_object_get(sparse8(r), "k"), 0, json_integer(0));
	snprintf(want, sizeof(want), "%s.k[0] is zero", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good);
	json_array_set_new(json_object_get(sparse8(r), "k"), 2, json_real(4.5));
	snprintf(want, sizeof(want), "%s.k[2] is not an integer", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *x = json_object_get(sparse8(r), "x");
		json_array_set(x, 5, json_array_get(x, 4));
	}
	snprintf(want, sizeof(want), "%s.x is not strictly increasing at index 5", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good);
	json_array_remove(json_object_get(sparse8(r), "bwd"), 0);
	snprintf(want, sizeof(want), "%s.bwd has 15 rows, expected 16 (one per x)", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good);
	json_array_remove(sparse_row(r, "fwd", 2), 0);
	snprintf(want, sizeof(want), "%s.fwd[2] has 13 values, expected 14 (one per k)", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good);
	json_array_append(json_object_get(r, "sparse_attention"), sparse8(r));
	EXPECT(r, "profile.sparse_attention has two tables for tp 8 block 256");
	json_decref(r);

	r = json_deep_copy(good); /* another block size for the same tp is a different table */
	{
		json_t *t = json_deep_copy(sparse8(r));
		json_object_set_new(t, "block", json_integer(128));
		json_array_append_new(json_object_get(r, "sparse_attention"), t);
		struct bp_profile p;
		struct bp_error err = {{0}};
		bp_profile_init(&p);
		CHECK(bp_profile_from_json(&p, r, &err) == 0);
		CHECK(p.nsparse == 3 && p.sparse[1].tp == 8 && p.sparse[1].block == 128 &&
		      bp_profile_sparse(&p, 8, 128) == &p.sparse[1]);
		bp_profile_release(&p);
	}
	json_decref(r);

	r = json_deep_copy(good);
	json_object_set_new(sparse8(r), "shape", json_string("moba"));
	EXPECT(r, "unknown key \"shape\" in profile.sparse_attention[1]");
	json_decref(r);

	r = json_deep_copy(good);
	json_object_del(sparse8(r), "block");
	EXPECT(r, "missing key \"block\" in profile.sparse_attention[1]");
	json_decref(r);

	/* Physical sense: a kernel takes time, and not days. */
	r = json_deep_copy(good);
	json_array_set_new(fwd_row(r, 0), 0, json_real(0.0));
	EXPECT(r, "profile.attention[tp=8].fwd[0][0] is zero (a kernel or a call takes time)");
	json_decref(r);

	r = json_deep_copy(good);
	json_array_set_new(sparse_row(r, "fwd", 0), 0, json_real(0.0));
	snprintf(want, sizeof(want), "%s.fwd[0][0] is zero (a kernel or a call takes time)", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *lin = json_array_get(json_object_get(r, "linear"), 0);
		json_array_set_new(json_object_get(lin, "fwd"), 0, json_real(0.0));
	}
	EXPECT(r, "profile.linear[tp=4].fwd[0] is zero (a kernel or a call takes time)");
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *c = json_array_get(json_object_get(r, "collectives"), 0);
		json_array_set_new(json_object_get(c, "us"), 0, json_real(0.0));
	}
	EXPECT(r, "profile.collectives[all_reduce,intra,2].us[0] is zero (a kernel or a call "
		  "takes time)");
	json_decref(r);

	r = json_deep_copy(good); /* the last cell is the largest: monotone, but absurd */
	{
		json_t *row = fwd_row(r, 17);
		json_array_set_new(row, 17, json_real(2e12));
	}
	EXPECT(r, "profile.attention[tp=8].fwd[17][17] is 2e+12 us, above the 1e+12 us limit");
	json_decref(r);

	r = json_deep_copy(good);
	json_array_set_new(sparse_row(r, "bwd", 15), 13, json_real(1.5e13));
	snprintf(want, sizeof(want), "%s.bwd[15][13] is 1.5e+13 us, above the 1e+12 us limit", w);
	EXPECT(r, want);
	json_decref(r);

	r = json_deep_copy(good);
	{
		json_t *lin = json_array_get(json_object_get(r, "linear"), 1);
		json_t *f = json_object_get(lin, "bwd");
		json_array_set_new(f, json_array_size(f) - 1, json_real(1e300));
	}
	EXPECT(r, "profile.linear[tp=8].bwd[31] is 1e+300 us, above the 1e+12 us limit");
	json_decref(r);

	r = json_deep_copy(good); /* exactly the limit is allowed */
	{
		json_t *row = fwd_row(r, 17);
		json_array_set_new(row, 17, json_real(1e12));
		struct bp_profile p;
		struct bp_error err = {{0}};
		bp_profile_init(&p);
		CHECK(bp_profile_from_json(&p, r, &err) == 0);
		bp_profile_release(&p);
	}
	json_decref(r);
}

/* Errors that only text can carry: line and column from the decoder or the key locator. */
static void test_text_errors(const char *good)
{
	struct bp_profile p;
	struct bp_error err = {{0}};
	bp_profile_init(&p);

	/* A NaN literal is not JSON: the decoder's error, with its position. */
	size_t n = strlen(good);
	char *bad = malloc(n + 16);
	CHECK(bad != NULL);
	if (!bad)
		return;
	const char *at = strstr(good, "\"hbm_gbps\": ");
	CHECK(at != NULL);
	if (at) {
		size_t off = (size_t)(at - good) + strlen("\"hbm_gbps\": ");
		size_t end = off;
		while (good[end] != ',' && good[end] != '\n')
			end++;
		memcpy(bad, good, off);
		memcpy(bad + off, "NaN", 3);
		strcpy(bad + off + 3, good + end);
		CHECK(bp_json_parse_text(bad, strlen(bad), profile_cb, &p, &err) < 0);
		CHECK(!strncmp(err.text, "line ", 5) && strstr(err.text, "column") != NULL);
	}

	/* An unknown key gets the key's own line and column. */
	const char *hw = strstr(good, "\"hardware\": {");
	CHECK(hw != NULL);
	if (hw) {
		size_t off = (size_t)(hw - good) + strlen("\"hardware\": {");
		memcpy(bad, good, off);
		strcpy(bad + off, "\"foo\": 1,");
		strcpy(bad + off + 9, good + off);
		CHECK(bp_json_parse_text(bad, strlen(bad), profile_cb, &p, &err) < 0);
		CHECK(strstr(err.text, "line ") == err.text);
		CHECK(strstr(err.text, ": unknown key \"foo\" in profile.hardware") != NULL);
	}
	free(bad);
	CHECK(p.nattn == 0);
	bp_profile_release(&p);
}

/* The analytic tables follow their formulas: spot values and their physics. */
static void test_analytic_values(const struct bp_profile *p)
{
	const struct bp_attn_table *a8 = bp_profile_attn(p, 8), *a4 = bp_profile_attn(p, 4);
	const struct bp_linear_table *l4 = bp_profile_linear(p, 4);
	CHECK(a8 && a4 && l4 && !bp_profile_attn(p, 2));
	if (!a8 || !a4 || !l4)
		return;
	CHECK(a8->q[0] == 128 && a8->q[a8->nq - 1] == 65536 && a8->nq == 18);
	/* Tile padding: 1 to 128 query tokens cost the same. */
	CHECK(bp_cost_attn(a8, 16, 16, 0) == bp_cost_attn(a8, 128, 128, 0));
	/* Long sequences are attention-bound: doubling the length ~quadruples the time. */
	double t32 = bp_cost_attn(a8, 32768, 32768, 0), t64 = bp_cost_attn(a8, 65536, 65536, 0);
	CHECK(t64 / t32 > 3.8 && t64 / t32 < 4.1);
	/* Half the heads per GPU at tp 8 than at tp 4. */
	CHECK(fabs(bp_cost_attn(a4, 65536, 65536, 0) / t64 - 2.0) < 0.01);
	/* Llama-3-8B at 64K on H100 with 4 heads: 4*128*4*64K^2/2 FLOPs at ~64% of 989 TF
	 * (profiler/README.md "Calibration"; test_analytic.c pins the published points). */
	CHECK(t64 > 6000 && t64 < 8000);
	double b64 = bp_cost_attn(a8, 65536, 65536, 1);
	CHECK(b64 / t64 > 2.5 && b64 / t64 < 3.5);
	/* GEMMs: at 8K tokens, 2*8K*218M/4 FLOPs at ~75% of peak, about 1.2 ms. */
	double g8k = bp_cost_linear(l4, 8192, 0);
	CHECK(g8k > 1000 && g8k < 1400);
	CHECK(bp_cost_linear(l4, 8192, 1) == 2 * g8k);
	/* A handful of tokens costs reading the weights: 2*218M/4 bytes at 3.35 TB/s. */
	double g1 = bp_cost_linear(l4, 1, 0);
	CHECK(g1 > 30 && g1 < 50);
	/* Collectives: a 1 GiB all-reduce over 8 GPUs on NVLink, 2*7/8 GiB at 369 GB/s. */
	double ar = bp_cost_coll(p, BP_COLL_ALLREDUCE, 8, 0, 1073741824.0);
	CHECK(ar > 5000 && ar < 5500);
	CHECK(bp_cost_coll(p, BP_COLL_SENDRECV, 2, 1, 1024.0) > 10.0);
	CHECK(bp_cost_coll(p, BP_COLL_ALLGATHER, 512, 1, 1e6) >
	      bp_cost_coll(p, BP_COLL_ALLGATHER, 2, 1, 1e6));
	/* Memory: 34 h bytes per token and layer for Llama-3-8B (+ softmax statistics). */
	CHECK(p->mem.act_bytes_per_token_layer == 34.0 * 4096 + 4 * 32);
	CHECK(p->mem.state_bytes_per_param == 18.0);
	CHECK(p->mem.reserved_bytes == (int64_t)4 << 30);
	/* Fits: quadratic and positive, and they reproduce the cost model at the fit range. */
	CHECK(p->nfits == 2);
	for (size_t i = 0; i < p->nfits; i++) {
		const struct bp_fit *f = &p->fits[i];
		CHECK(f->a > 0 && f->b > 0);
		struct bp_costmodel cm;
		struct bp_error err;
		struct bp_scheme sc = {f->tp, f->cp, f->pp};
		CHECK(bp_costmodel_init(&cm, p, sc, 1, &err) == 0);
		double l = 65536, t = 0.0;
		CHECK(bp_cost_doc(&cm, 65536, &t, &err) == 0);
		double fit = f->a * l * l + f->b * l + f->c;
		CHECK(fabs(fit / t - 1.0) < 0.05);
		bp_costmodel_release(&cm);
	}
	CHECK(!strcmp(p->name, "analytic-H100-llama3-8b") && !strcmp(p->kind, "analytic"));
}

static void test_analytic_errors(void)
{
	struct bp_profile p;
	struct bp_error err = {{0}};
	const struct bp_gpu *g = bp_gpu_preset("H100");
	const struct bp_model *m = bp_model_preset("llama3-8b");
	struct bp_scheme bad_tp = {3, 1, 1}, bad_pp = {1, 1, 64};
	bp_profile_init(&p);
	CHECK(bp_profile_analytic(&p, g, m, &bad_tp, 1, 4096, &err) < 0);
	CHECK(!strcmp(err.text, "scheme tp 3 cp 1 pp 1: tp does not divide the 32 heads of "
				"model \"llama3-8b\""));
	CHECK(bp_profile_analytic(&p, g, m, &bad_pp, 1, 4096, &err) < 0);
	CHECK(!strcmp(err.text, "scheme tp 1 cp 1 pp 64: pp exceeds the 32 layers of model "
				"\"llama3-8b\""));
	CHECK(bp_profile_analytic(&p, g, m, test_schemes, 2, 100, &err) < 0);
	CHECK(!strcmp(err.text, "max length 100 is outside [256, 16777216]"));
	CHECK(bp_profile_analytic(&p, g, m, test_schemes, 0, 4096, &err) < 0);
	CHECK(!strcmp(err.text, "no parallel scheme to profile"));
	CHECK(p.nattn == 0);
	/* Every preset pair with a non-power-of-two length gives a valid profile. */
	for (size_t i = 0; i < bp_gpu_preset_count(); i++)
		for (size_t k = 0; k < bp_model_preset_count(); k++) {
			const struct bp_model *mm = bp_model_preset_at(k);
			struct bp_scheme s[2] = {{1, 1, 1}, {2, 2, 2}};
			size_t ns = mm->heads % 2 ? 1 : 2;
			int rc = bp_profile_analytic(&p, bp_gpu_preset_at(i), mm, s, ns, 20000,
						     &err);
			CHECK(rc == 0);
			if (rc < 0) {
				fprintf(stderr, "%s on %s: %s\n", mm->name, bp_gpu_preset_at(i)->name,
					err.text);
				continue;
			}
			json_t *j = bp_profile_to_json(&p);
			struct bp_profile q;
			bp_profile_init(&q);
			rc = bp_profile_from_json(&q, j, &err);
			CHECK(rc == 0);
			if (rc < 0)
				fprintf(stderr, "%s on %s: %s\n", mm->name, bp_gpu_preset_at(i)->name,
					err.text);
			json_decref(j);
			bp_profile_release(&q);
		}
	bp_profile_release(&p);
}

int main(void)
{
	struct bp_profile p, q, r;
	struct bp_error err = {{0}};
	char *s1 = NULL, *s2 = NULL, *s3 = NULL;
	json_t *root = NULL;
	test_presets();
	bp_profile_init(&p);
	bp_profile_init(&q);
	bp_profile_init(&r);
	int rc = bp_profile_analytic(&p, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"),
				     test_schemes, 2, 65536, &err);
	CHECK(rc == 0);
	if (rc < 0) {
		fprintf(stderr, "analytic: %s\n", err.text);
		goto out;
	}
	test_analytic_values(&p);
	s1 = profile_text(&p);
	CHECK(s1 != NULL);
	if (!s1)
		goto out;
	root = bp_json_loadb(s1, strlen(s1), &err);
	CHECK(root != NULL);
	if (!root)
		goto out;
	rc = bp_profile_from_json(&q, root, &err);
	CHECK(rc == 0);
	if (rc < 0) {
		fprintf(stderr, "from_json: %s\n", err.text);
		goto out;
	}
	s2 = profile_text(&q);
	CHECK(s2 && !strcmp(s1, s2));
	/* Deterministic: a second generation gives the same bytes. */
	CHECK(bp_profile_analytic(&r, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"),
				  test_schemes, 2, 65536, &err) == 0);
	s3 = profile_text(&r);
	CHECK(s3 && !strcmp(s1, s3));
	test_errors(root);
	test_sparse_and_sense_errors(root);
	test_text_errors(s1);
	test_analytic_errors();
out:
	json_decref(root);
	free(s1);
	free(s2);
	free(s3);
	bp_profile_release(&p);
	bp_profile_release(&q);
	bp_profile_release(&r);
	return CHECK_DONE();
}
