/* profile.h: balplan.profile/v1 (profiler/README.md): what the cost model knows about one
 * cluster running one model. Tables are per layer, in microseconds:
 *   attention fwd/bwd over a (q, kv) grid per TP degree: q query tokens that are the last q
 *     positions of a causal kv-token prefix (kv >= q; cells with kv < q hold the kv = q value);
 *   linear layers (QKV, O, FFN GEMMs of one layer) over token counts per TP degree;
 *   collectives over message bytes per (op, intra/inter node, group size);
 * plus memory constants and fitted T(l,P) = a l^2 + b l + c per scheme (Hydraulis App. B.2).
 * A measured profile (balplan profile on GPUs) and an analytic one (from GPU specs) fill the
 * same tables. */
#ifndef BP_PROFILE_H
#define BP_PROFILE_H

#include <jansson.h>
#include <stdint.h>

#include "bp.h"
#include "presets.h"

#define BP_PROFILE_FORMAT "balplan.profile/v1"

enum bp_coll_op {
	BP_COLL_ALLREDUCE,
	BP_COLL_ALLGATHER,
	BP_COLL_REDUCESCATTER,
	BP_COLL_ALLTOALL,
	BP_COLL_SENDRECV,
	BP_COLL_NOPS
};
const char *bp_coll_op_name(enum bp_coll_op op); /* "all_reduce", ... */
int bp_coll_op_parse(const char *s, enum bp_coll_op *op);

struct bp_attn_table {
	int tp;
	size_t nq, nkv;
	double *q, *kv;     /* strictly increasing grid axes, tokens; owned */
	double *fwd, *bwd;  /* [iq * nkv + ikv], us per layer; owned */
};

struct bp_linear_table {
	int tp;
	size_t n;
	double *tokens;     /* strictly increasing; owned */
	double *fwd, *bwd;  /* us per layer; owned */
};

struct bp_coll_table {
	enum bp_coll_op op;
	int inter;          /* 0: within a node (NVLink), 1: across nodes */
	int ranks;          /* group size >= 2 */
	size_t n;
	double *bytes;      /* strictly increasing message sizes; owned */
	double *us;         /* owned */
};

struct bp_fit {
	int tp, cp, pp;
	double a, b, c;     /* T(l) = a l^2 + b l + c, us, fwd+bwd of one stage (App. B.2) */
};

struct bp_scheme {
	int tp, cp, pp;
};

struct bp_hardware {
	char gpu[64];
	int gpus_per_node;
	int64_t hbm_bytes;
	double hbm_gbps, nvlink_gbps, net_gbps, bf16_tflops;
};

struct bp_memory {
	double act_bytes_per_token_layer; /* activation bytes kept per token per layer, tp=cp=1 */
	double state_bytes_per_param;     /* bf16 weights + fp32 grads + Adam (mixed precision) */
	int64_t reserved_bytes;           /* runtime, workspace, fragmentation margin */
};

struct bp_profile {
	char kind[16];       /* "measured" or "analytic" */
	char name[64];
	struct bp_hardware hw;
	struct bp_model model;
	struct bp_scheme *schemes; /* parallel configs the profile was made for; owned */
	size_t nschemes;
	struct bp_attn_table *attn; /* sorted by tp; owned */
	size_t nattn;
	struct bp_linear_table *linear; /* sorted by tp; owned */
	size_t nlinear;
	struct bp_coll_table *coll; /* sorted by (op, inter, ranks); owned */
	size_t ncoll;
	struct bp_fit *fits; /* sorted by (tp, cp, pp); owned */
	size_t nfits;
	struct bp_memory mem;
};

void bp_profile_init(struct bp_profile *p);
void bp_profile_release(struct bp_profile *p);
void bp_profile_free(struct bp_profile *p);

/* Codec. from_json validates everything: finite non-negative values, strictly increasing
 * axes, tables non-decreasing along every axis, no duplicate (tp) or (op, inter, ranks)
 * entries. Errors name the table ("attention[tp=8].fwd[3][4]"). */
int bp_profile_from_json(struct bp_profile *p, json_t *root, struct bp_error *err);
json_t *bp_profile_to_json(const struct bp_profile *p);

/* Lookups (NULL when absent). */
const struct bp_attn_table *bp_profile_attn(const struct bp_profile *p, int tp);
const struct bp_linear_table *bp_profile_linear(const struct bp_profile *p, int tp);

#endif
