/* profile.h: balplan.profile/v2 (profiler/README.md): what the cost model knows about one
 * cluster running one model. Tables are per layer, in microseconds:
 *   attention fwd/bwd over a (q, kv) grid per TP degree: q query tokens that are the last q
 *     positions of a causal kv-token prefix (kv >= q; cells with kv < q hold the kv = q value);
 *   linear layers (QKV, O, FFN GEMMs of one layer) over token counts per TP degree;
 *   block-sparse (MoBA) attention fwd/bwd over (document length x, top-k budget k) per TP
 *     degree and block size (SparseBalance Sec. IV-B, Eq. 10: the profiled table M[x,k]);
 *   collectives over message bytes per (op, intra/inter node, group size);
 * plus memory constants and fitted T(l,P) = a l^2 + b l + c per scheme (Hydraulis App. B.2).
 * A measured profile (balplan profile on GPUs) and an analytic one (from GPU specs) fill the
 * same tables. Version 1 is version 2 without the sparse tables; the reader takes both, the
 * writer writes version 2. */
#ifndef BP_PROFILE_H
#define BP_PROFILE_H

#include <jansson.h>
#include <stdint.h>

#include "bp.h"
#include "presets.h"

#define BP_PROFILE_FORMAT "balplan.profile/v2"
#define BP_PROFILE_FORMAT_V1 "balplan.profile/v1"

/* The largest time a table cell may hold, us per layer or per call. Above it a profile is
 * absurd (11.6 days per layer), and this is also the largest magnitude whose 1e-3 rounding the
 * writer prints exactly in 15 significant digits. With it, a plan made from the profile stays
 * far below the plan reader's 1e300 bound even after extrapolation beyond the grids. */
#define BP_PROFILE_MAX_US 1e12
/* Physical-sense bounds on a profile's scalars, checked when it is read (issue 27): a GPU's
 * memory (16 TiB), bandwidths in GB/s (1 PB/s), dense bf16 peak in TFLOP/s (0.1 to 100,000:
 * an MFU against 1e-300 is 4e302), activation bytes per token and layer at tp 1 (100 MB: 45 x
 * the largest hidden size a model may have, 2^20, is 47 MB) and model-state bytes per
 * parameter (1 KiB; mixed-precision Adam keeps 18). */
#define BP_PROFILE_MAX_HBM_BYTES 17592186044416.0
#define BP_PROFILE_MAX_GBPS 1e6
#define BP_PROFILE_MIN_TFLOPS 0.1
#define BP_PROFILE_MAX_TFLOPS 1e5
#define BP_PROFILE_MAX_ACT_BYTES 1e8
#define BP_PROFILE_MAX_STATE_BYTES 1024.0

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
	/* Optional, both or neither (measured profiles): the cell's document alone in a
	 * launch, us per layer. fwd/bwd price a document packed among others, the launch full
	 * (profiler/README.md "Caveat"); a document alone cannot fill the GPU when its
	 * longest chain of tiles is the critical path, so a micro-batch's attention costs at
	 * least its longest document alone (bp_cost_attn_launch). NULL: not measured. */
	double *fwd_alone, *bwd_alone;
	/* Derived when a profile with alone cells is read (bp_attn_fit_launch), not written:
	 * the heads of one TP rank, and per pass (0 forward, 1 backward) the launch's
	 * effective concurrent blocks that make the launch model reproduce the alone cells
	 * (costmodel.h bp_cost_attn_launch); 0: no launch model (the table has no alone cells,
	 * or none of them runs slower than packed). */
	int heads, kv_heads;
	int geom; /* the kernels whose blocks the launch model deals (attn_geom.h), from the
		   * profile's provenance.attn_kernels */
	double slots[2];
	double *unit[2]; /* per pass, time per tile visited [iq * nkv + ikv]; owned; or NULL */
};

/* balprof's packed attention cells: n copies of the cell's segment in one launch, n the
 * fewest that make this many blocks (one copy at least); the launch model reads the cells
 * as such (costmodel.h bp_cost_attn_launch). */
#define BP_PROF_TARGET_BLOCKS 2048

/* Block-sparse attention of one causal document of x tokens (q = kv = x), MoBA top-k block
 * selection with k counting the token's own block: SparseBalance's M[x,k] (Sec. IV-B, Eq. 10)
 * as balexec's kernels run it (profiler/README.md), including the selection kernels (block
 * means, scoring, top-k), whose cost FLOP counts miss (the paper's Fig. 6). */
struct bp_sparse_table {
	int tp;
	int block;          /* MoBA block size B, tokens */
	size_t nx, nk;
	double *x;          /* document lengths, tokens, strictly increasing; owned */
	int *k;             /* budgets in blocks, >= 1, strictly increasing; owned */
	double *fwd, *bwd;  /* [ix * nk + ik], us per layer; owned */
};

struct bp_linear_table {
	int tp;
	size_t n;
	double *tokens;     /* strictly increasing; owned */
	double *fwd, *bwd;  /* us per layer; owned */
	/* Optional, both or neither (measured profiles): the LM head's GEMMs over that many
	 * tokens, us. NULL: priced as a layer's GEMMs scaled by hidden x vocab over the
	 * layer's parameters (costmodel.c lm_head_ratio). */
	double *lm_fwd, *lm_bwd;
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

/* Where a measured profile came from (profiler/README.md "provenance"): optional in the
 * file, absent from analytic ones. Strings, so nothing here needs freeing. */
struct bp_provenance {
	int present;         /* 0: the file has no "provenance" object */
	char tool[32];       /* "balprof 0.1.0" */
	char date[32];       /* UTC, ISO 8601, when the measurement ended */
	char device[128];    /* the device's own name (cudaGetDeviceProperties) */
	char driver[32];     /* NVIDIA driver version (NVML), "unknown" without NVML */
	char cuda_driver[16], cuda_runtime[16], cublas[16], nccl[16]; /* "13.0", "2.27.3" */
	char measured[128];  /* the tables measured, e.g. "attention linear memory" */
	char analytic[128];  /* the tables kept from the analytic profile, and why */
	int ranks, reps, warmup; /* processes measuring; timed runs and warm-ups per cell */
	/* The attention kernels that timed the attention cells (attn_geom.h): "mma16816", or
	 * "" (the key absent: the WMMA kernels before it). Sets every table's geom. */
	char attn_kernels[32];
};

/* Activation recomputation, as Megatron-LM's --recompute-granularity names it (Korthikanti et
 * al., "Reducing Activation Recomputation in Large Transformer Models", Sec. 4-5):
 * NONE keeps every layer's activations for the backward; SELECTIVE recomputes the core
 * attention (softmax and dropout), whose 5as/h term FlashAttention never stores and always
 * recomputes, so here it costs and saves what NONE does; FULL keeps only each layer's input
 * (2h bytes per token, sharded over TP with sequence parallelism) and runs the layer's
 * forward again before its backward. A training setting, not a measurement: a profile file
 * never holds it; solve sets it from --recompute and the plan records it
 * (bp_plan.recompute). */
enum bp_recompute { BP_RECOMPUTE_NONE, BP_RECOMPUTE_SELECTIVE, BP_RECOMPUTE_FULL };
const char *bp_recompute_name(enum bp_recompute r); /* "none", "selective", "full" */
int bp_recompute_parse(const char *s, enum bp_recompute *out); /* 0 or -1 */

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
	struct bp_sparse_table *sparse; /* sorted by (tp, block); owned; none in a v1 file */
	size_t nsparse;
	struct bp_coll_table *coll; /* sorted by (op, inter, ranks); owned */
	size_t ncoll;
	struct bp_fit *fits; /* sorted by (tp, cp, pp); owned */
	size_t nfits;
	struct bp_memory mem;
	struct bp_provenance prov; /* optional (prov.present) */
	/* The run's setting the cost model applies (not in the file; see enum bp_recompute):
	 * set after reading or making the profile. */
	enum bp_recompute recompute;
	/* 1: every data-parallel replica holds the whole optimizer state (Megatron-LM without
	 * --use-distributed-optimizer); 0: the optimizer's 12 bytes per parameter sharded over
	 * the replicas (the distributed optimizer, the default). A run setting like recompute:
	 * solve sets it from --optimizer and the plan records it (bp_plan.optimizer_replicated). */
	int optimizer_replicated;
};

void bp_profile_init(struct bp_profile *p);
void bp_profile_release(struct bp_profile *p);
void bp_profile_free(struct bp_profile *p);

/* Codec. from_json reads balplan.profile/v1 and v2 and validates everything: finite values,
 * strictly increasing axes, tables non-decreasing along every axis, every time cell > 0 (a
 * kernel or a call takes time) and <= BP_PROFILE_MAX_US, no duplicate (tp), (tp, block) or
 * (op, inter, ranks) entries. Errors name the table ("attention[tp=8].fwd[3][4]",
 * "sparse_attention[tp=8,block=256].fwd[3][4]"). to_json writes v2. */
int bp_profile_from_json(struct bp_profile *p, json_t *root, struct bp_error *err);
json_t *bp_profile_to_json(const struct bp_profile *p);

/* Lookups (NULL when absent). */
const struct bp_attn_table *bp_profile_attn(const struct bp_profile *p, int tp);
const struct bp_linear_table *bp_profile_linear(const struct bp_profile *p, int tp);
const struct bp_sparse_table *bp_profile_sparse(const struct bp_profile *p, int tp,
						int block);

/* 1 when bp_cost_coll finds a table for (op, inter): one of that op with that placement, or,
 * for a group inside a node, one across nodes (the cost model falls back to it). 0 when the
 * collective would silently cost nothing. */
int bp_profile_has_coll(const struct bp_profile *p, enum bp_coll_op op, int inter);

/* Whether p can price scheme (tp, cp, pp) with dp pipelines on nodes of gpus_per_node GPUs
 * (<= 0: the profile's own): attention and linear tables for tp, and every collective table
 * the cost model reads (costmodel.c; Megatron rank order tp, cp, dp, pp, a group crossing
 * nodes when its span of consecutive ranks exceeds the node):
 *   tp > 1: all_reduce (intra unless tp > node);
 *   cp > 1: all_gather and reduce_scatter (across nodes when tp*cp > node);
 *   pp > 1: send_recv (across nodes when tp*cp*dp*pp > node);
 *   dp*cp > 1: reduce_scatter and all_gather for the gradient sync (across nodes when
 *     tp*cp*dp > node, or tp*cp > node when dp = 1).
 * Returns 0, or -1 with a message naming the missing table and the group needing it. */
int bp_profile_check_scheme(const struct bp_profile *p, int tp, int cp, int pp, int dp,
			    int gpus_per_node, struct bp_error *err);

#endif
