/* methods.c: the method table (method.h). Adding a method: one file and one line here. */
#include "method.h"

#include "ilp_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const wlb_params[] = {"queues", "thresholds", "max_len_factor",
					 "max_delay", "release", NULL};
static const char *const fixed_params[] = {"window", NULL};
static const char *const plain_params[] = {"deal", NULL};
static const char *const ilp_params[] = {"ilp_time_limit_s", "ilp_gap", "ilp_node_limit",
					 "ilp_work_limit", "ilp_max_vars", "window", NULL};
static const char *const hyd_params[] = {"trials", "hyd_c", "prune", "v_tries", "align",
					 "util_threshold", "ilp_max_vars", "pack_ilp_vars",
					 "ilp_node_limit", "ilp_work_limit", "ilp_time_limit_s",
					 "ilp_gap", "sync", NULL};
static const char *const wlb_ilp_params[] = {"ilp_time_limit_s", "ilp_gap", "ilp_node_limit",
					     "ilp_work_limit", "ilp_max_vars", "queues",
					     "thresholds", "max_len_factor", "max_delay",
					     "release", NULL};
static const char *const sb_params[] = {"sb_block", "sb_k_base", "sb_k_set", "sb_anchor",
					"sb_p", "sb_coverage", "sb_k90", "sb_cov_layer_slope",
					"sb_ema", "sb_batching", "sb_dst", "sb_mbs",
					"sb_cardinality", "sb_time", "sb_refresh", "sb_packer",
					NULL};

static const char *const distca_params[] = {"tolerance", "ca_block", "ca_comm", "pingpong",
					    "escalate", "ca_buffer_bytes", "rank_tokens", "two_sided",
					    "max_shards", "resend", NULL};

static const char *const flexsp_params[] = {"buckets", "max_group", "ilp_time_limit_s", "ilp_gap",
					    "ilp_node_limit", "ilp_work_limit", "ilp_max_vars",
					    NULL};

static const struct bp_method methods[] = {
	{"plain", bp_method_plain,
	 "documents in loader order cut into fixed context windows, dealt round-robin",
	 "Megatron-LM baseline (WLB-LLM Sec. 3, 'Plain-4D'; deal=balanced: DistCA Sec. 6.1)",
	 plain_params, NULL, NULL, bp_plain_check_params, NULL, 0},
	{"fixed", bp_method_fixed,
	 "fixed-length packing: costliest document first into the least-loaded window that fits",
	 "WLB-LLM Sec. 3.2 'Fixed-Len Greedy' (Table 2)", fixed_params, NULL, NULL,
	 bp_fixed_check_params, NULL, 0},
	{"wlb", bp_method_wlb,
	 "variable-length packing with outlier delay queues (Alg. 1)",
	 "WLB-LLM Sec. 4.1-4.2, Eq. 2, Alg. 1", wlb_params, NULL, NULL, bp_wlb_check_params,
	 NULL, 1},
	{"fixed-ilp", bp_method_fixed_ilp,
	 "fixed-length packing solved exactly by GLPK, warm-started from fixed",
	 "WLB-LLM Sec. 3.2, Eq. 1", ilp_params, &bp_record_ilp, bp_ilp_warn,
	 bp_fixed_ilp_check_params, NULL, 0},
	{"wlb-ilp", bp_method_wlb_ilp,
	 "wlb's outlier queues, each step's packing solved by GLPK from the greedy",
	 "WLB-LLM Sec. 4.1-4.2, Eq. 2", wlb_ilp_params, &bp_record_ilp, bp_ilp_warn,
	 bp_wlb_ilp_check_params, NULL, 1},
	{"ffd", bp_method_ffd,
	 "first-fit-decreasing to the context length, bins dealt round-robin",
	 "NeMo's sequence packing (first-fit-decreasing)", NULL, NULL, NULL, NULL, NULL, 0},
	{"bfd", bp_method_bfd,
	 "best-fit-decreasing with a segment tree, O(n log n)",
	 "TRL's packing (best-fit-decreasing)", NULL, NULL, NULL, NULL, NULL, 0},
	{"multipack", bp_method_multipack,
	 "LPT packing that balances tokens across DP ranks",
	 "multipack sampler (longest-processing-time over ranks)", NULL, NULL, NULL, NULL, NULL, 0},
	{"kk", bp_method_kk,
	 "Karmarkar-Karp balanced partition on a workload proxy, with a token cap",
	 "verl's seqlen balancing (Karmarkar-Karp)", NULL, NULL, NULL, NULL, NULL, 0},
	{"hydraulis", bp_method_hydraulis,
	 "per-step heterogeneous strategy: dispatch (Alg. 1), packing (Eq. 1), selection",
	 "Hydraulis Sec. 5-7, Eq. 1-4, Alg. 1", hyd_params, &bp_record_hydraulis, bp_hyd_warn,
	 bp_hyd_check_params, NULL, 1},
	{"sparsebalance", bp_method_sparsebalance,
	 "MoBA sparse attention: sparsity-aware batching and per-layer dynamic sparsity tuning",
	 "SparseBalance Sec. IV, Eq. 3-10, Alg. 1-2", sb_params, &bp_record_sparsebalance,
	 bp_sb_warn, NULL, bp_sb_check_request, 1},
	{"sb-lbb", bp_method_sb_lbb,
	 "MoBA sparse attention: length-balanced batching with dynamic sparsity tuning",
	 "SparseBalance Sec. V-B3 (LBB) with Sec. IV-A, Alg. 1", sb_params,
	 &bp_record_sparsebalance, bp_sb_warn, NULL, bp_sb_check_request, 1},
	{"distca", bp_method_distca,
	 "core attention disaggregated onto in-place servers, greedy comm-aware CA-task moves",
	 "DistCA Sec. 3-4, 6.1, App. A, B, E", distca_params, &bp_record_distca,
	 bp_distca_warn, bp_distca_check_params, bp_distca_check_request, 0},
	{"flexsp", bp_method_flexsp,
	 "per-step power-of-two Ulysses SP groups of TP groups, documents assigned by a MILP",
	 "FlexSP (arXiv 2412.01523) as DistCA Sec. 6's FlexSP+", flexsp_params,
	 &bp_record_flexsp, bp_flexsp_warn, bp_flexsp_check_params, bp_flexsp_check_request, 0},
};

int bp_method_check_request(const struct bp_method *m, struct bp_scheme sc,
			    const struct bp_model *mdl, enum bp_shard shard, struct bp_error *err)
{
	return m->check_request ? m->check_request(sc, mdl, shard, err) : 0;
}

int bp_method_in_all(const struct bp_method *m)
{
	/* sparsebalance and sb-lbb need cp 1 and a profile's sparse table; distca brings its own
	 * schedule (distca-ticks) and needs cp 1; flexsp brings its own layouts and needs cp 1
	 * and pp 1 */
	return m->solve != bp_method_hydraulis && m->solve != bp_method_sparsebalance &&
	       m->solve != bp_method_sb_lbb && m->solve != bp_method_distca &&
	       m->solve != bp_method_flexsp;
}

int bp_method_own_memory(const struct bp_method *m)
{
	return m->solve == bp_method_flexsp;
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
	return BP_ARRAY_LEN(methods);
}

const struct bp_method *bp_method_at(size_t i)
{
	return i < BP_ARRAY_LEN(methods) ? &methods[i] : NULL;
}

const struct bp_record_ops *bp_record_find(const char *kind)
{
	for (size_t i = 0; i < BP_ARRAY_LEN(methods); i++)
		if (methods[i].record && !strcmp(methods[i].record->name, kind))
			return methods[i].record;
	return NULL;
}

const struct bp_method *bp_method_find(const char *name)
{
	for (size_t i = 0; i < BP_ARRAY_LEN(methods); i++)
		if (!strcmp(methods[i].name, name))
			return &methods[i];
	return NULL;
}
