/* costmodel.h: the one interface every method and the simulator ask for times and memory.
 *
 * Behind it: the profile's tables (bilinear interpolation on the (q, kv) attention grid,
 * DistCA Sec. 4.2 "Profiler"; linear interpolation over tokens and bytes), extrapolation
 * outside a grid by the quadratic (attention) or linear (GEMM, collective) law, and the
 * activation memory model of Hydraulis App. B.1. A micro-batch is a list of document spans;
 * each span is its own causal sequence (document masking: no attention across spans). */
#ifndef BP_COSTMODEL_H
#define BP_COSTMODEL_H

#include <stdint.h>

#include "bp.h"
#include "layout.h"
#include "profile.h"

struct bp_span {
	int64_t doc;    /* document id */
	int64_t offset; /* first token of the span inside the document */
	int64_t len;    /* tokens, >= 1 */
};

/* How a micro-batch is split over the cp ranks of a context-parallel group (WLB-LLM Sec. 5).
 * SEQUENCE: the packed micro-batch cut into 2*cp chunks, rank i gets chunks i and 2cp-1-i
 * (Megatron's load-balanced ring). DOCUMENT: each document cut that way, remainder tokens
 * round-robin (WLB-LLM Sec. 5.1). ADAPTIVE is a request, never stored in a plan: per
 * micro-batch, whichever of the two the cost model predicts faster (WLB-LLM Sec. 5.2-5.3).
 * ULYSSES: DeepSpeed-Ulysses sequence parallelism (the SP baseline of Hydraulis Table 3):
 * tokens split as DOCUMENT for the token-wise layers, then an all-to-all per Q, K, V and O
 * so each rank attends over whole documents with heads / cp of the heads (attention time
 * the full documents' over cp on every rank); the executor replays it as DOCUMENT, whose
 * per-rank attention work is the same to within a chunk. */
enum bp_shard { BP_SHARD_SEQUENCE, BP_SHARD_DOCUMENT, BP_SHARD_ADAPTIVE, BP_SHARD_ULYSSES,
		BP_SHARD_NMODES };
const char *bp_shard_name(enum bp_shard s);
int bp_shard_parse(const char *s, enum bp_shard *out);

/* How a micro-batch's core attention runs (plan.h "attention"). */
enum bp_attn_kind { BP_ATTN_DENSE, BP_ATTN_SPARSE, BP_ATTN_DISAGG, BP_ATTN_NKINDS };
const char *bp_attn_kind_name(enum bp_attn_kind k);
int bp_attn_kind_parse(const char *s, enum bp_attn_kind *out);

/* bp_cost_coll's choice of tables for one (op, group size, placement), made once. Searching
 * the profile's collective tables was a third of `balplan solve`'s time (each micro-batch and
 * each document's cost pays a TP all-reduce per direction and CP rank, and the CP
 * collectives), so a cost model picks the tables of the collectives it prices when it is
 * built. bp_coll_cost(&k, bytes) equals bp_cost_coll(p, op, ranks, inter, bytes) bit for bit:
 * it does the same arithmetic on the same tables. */
struct bp_coll_pick {
	const struct bp_coll_table *lo; /* borrowed from the profile; NULL: the collective is free */
	const struct bp_coll_table *hi; /* NULL: lo alone, scaled; else interpolate lo..hi */
	double scale; /* lo alone: ring-factor scaling from lo's group size (1 when none) */
	double t;     /* lo..hi: the weight of hi in log2(ranks) */
};
void bp_coll_pick(struct bp_coll_pick *k, const struct bp_profile *p, enum bp_coll_op op,
		  int ranks, int inter);
double bp_coll_cost(const struct bp_coll_pick *k, double bytes);

struct bp_costmodel {
	const struct bp_profile *prof; /* borrowed; outlives the cost model, unchanged */
	struct bp_scheme sc;
	int dp; /* the layout's pipelines of this scheme */
	/* Ranks that hold the same (stage, TP shard) parameters: cp summed over the layout's
	 * pipelines of this tp and pp, whatever their cp (a CP or Ulysses group holds whole
	 * layers, so every such pipeline is a data-parallel replica; FlexSP's SP groups of
	 * different sizes, arXiv 2412.01523 Sec. 3, are one gradient-sync group). dp * cp in a
	 * homogeneous layout. The gradient sync and the optimizer's sharding use it. */
	int sync_ranks;
	const struct bp_attn_table *attn;     /* borrowed from prof, for sc.tp */
	const struct bp_linear_table *linear; /* borrowed from prof, for sc.tp */
	int *stage_layers; /* transformer layers per stage (first stages take the remainder) */
	int tp_inter, cp_inter, pp_inter, dp_inter; /* does the group cross a node boundary */
	double token_bytes; /* bytes of one token's hidden state (bf16) */
	double kv_token_bytes; /* bytes of one token's K and V (bf16) */
	double lm_ratio;       /* LM head GEMMs as a multiple of one layer's (same tokens) */
	int64_t mb_cap;        /* the pipeline's largest micro-batch, tokens (the layout's) */
	/* Tables of the collectives this pipeline pays, picked at init (struct bp_coll_pick):
	 * TP all-reduce, CP all-gather and reduce-scatter, PP send/recv, and the gradient
	 * sync's reduce-scatter and all-gather over the dp*cp replicas. */
	struct bp_coll_pick tp_allreduce, cp_allgather, cp_reducescatter, pp_sendrecv;
	struct bp_coll_pick sync_reducescatter, sync_allgather;
};

/* Prepares a cost model for pipeline k of layout l: its scheme, its stage layers, and the
 * node boundaries its TP, CP, PP and gradient-sync groups cross (from the layout's ranks and
 * the profile's gpus_per_node); dp counts the layout's pipelines of the same scheme (the
 * gradient-sync replicas). Fails when the profile has no attention or linear table for the
 * scheme's tp, or pp exceeds the model's layers. Release after success or failure. */
int bp_costmodel_init_pipe(struct bp_costmodel *cm, const struct bp_profile *p,
			   const struct bp_layout *l, size_t k, struct bp_error *err);
/* The same for dp pipelines of scheme sc in Megatron's placement (bp_layout_megatron). */
int bp_costmodel_init(struct bp_costmodel *cm, const struct bp_profile *p,
		      struct bp_scheme sc, int dp, struct bp_error *err);
void bp_costmodel_release(struct bp_costmodel *cm);

/* Cost models per (layout, pipeline), built on first use and kept: the one thing prediction,
 * validation and the executor ask for a pipeline's times. Layouts are identified by
 * address, so a cache serves one plan (or one solve) and is released with it. */
struct bp_costs_entry {
	const struct bp_layout *layout;
	size_t pipe;
	struct bp_costmodel cm;
};
struct bp_costs {
	const struct bp_profile *prof; /* borrowed */
	struct bp_costs_entry **e;     /* owned, each entry too (pointers to them stay valid) */
	size_t n, cap;
	size_t *slot;                  /* open addressing over (layout, pipe): entry index + 1,
					* 0 empty; nslot a power of two, at least 2 (n + 1) */
	size_t nslot;
};
void bp_costs_init(struct bp_costs *c, const struct bp_profile *p);
void bp_costs_release(struct bp_costs *c);
/* The cost model of pipeline k of layout l (borrowed from the cache; lives until release).
 * NULL with err when the profile cannot serve the pipeline's scheme. */
const struct bp_costmodel *bp_costs_pipe(struct bp_costs *c, const struct bp_layout *l,
					 size_t k, struct bp_error *err);

/* Index i with axis[i] <= x < axis[i+1], clamped to [0, n-2], for a strictly increasing
 * axis of n >= 2 entries (binary search): the interpolation cell every table lookup uses. */
size_t bp_bracket(const double *axis, size_t n, double x);

/* Table lookups (us per layer). q, kv in tokens (kv is clamped to >= q), bytes >= 0. */
double bp_cost_attn(const struct bp_attn_table *t, double q, double kv, int bwd);
/* The segment alone in a launch (the table's fwd_alone / bwd_alone); 0 when the table has
 * none (analytic profiles). */
double bp_cost_attn_alone(const struct bp_attn_table *t, double q, double kv, int bwd);
/* One varlen launch over n (q, kv) segments. Without a fitted launch model (analytic
 * profiles; tables without alone cells): the larger of the sum of their packed costs and the
 * longest segment alone. With one: balexec's kernels' blocks, of the generation that
 * measured the table (t->geom, attn_geom.h; forward: 64- or 128-row query blocks x heads, a
 * document's last blocks first; backward: 64-key tiles x KV heads, each walking its GQA
 * group, or its share of that walk when the launch is short) dealt in launch order to
 * `slots` places, each taking its segment's time per 64 x 64 tile (`unit`, from the packed
 * cell read as balprof measured it: n copies in one launch) times the tiles it visits; the
 * launch ends with its last block. profiler/README.md
 * "Packed and alone". */
double bp_cost_attn_launch(const struct bp_attn_table *t, const int64_t (*seg)[2], size_t n,
			   int bwd);
/* Fits t's launch model (heads, slots and unit above) from its alone cells: per pass, the
 * median over the diagonal cells that run at least 5% slower alone than packed of the
 * places that make one copy against n copies cost the alone cell against the packed one;
 * then the time per tile of every cell. Called by the profile reader (and again by refit,
 * which scales the cells). */
void bp_attn_fit_launch(struct bp_attn_table *t, int heads, int kv_heads);
double bp_cost_linear(const struct bp_linear_table *t, double tokens, int bwd);
/* The LM head over tokens (us, one pass): the linear table's lm_head curve when measured,
 * else lm_ratio x a layer's GEMMs. */
double bp_cost_lm_head(const struct bp_costmodel *cm, double tokens, int bwd);
double bp_cost_coll(const struct bp_profile *p, enum bp_coll_op op, int ranks, int inter,
		    double bytes);

/* The query segments one CP rank gets from a micro-batch: (q, kv) pairs in document
 * coordinates (q query tokens ending at position kv of their document). Fills up to cap
 * entries of seg and returns how many were needed (call again with more room if larger).
 * tokens gets the rank's token count. */
size_t bp_shard_segments(const struct bp_span *spans, size_t n, enum bp_shard mode, int cp,
			 int rank, int64_t (*seg)[2], size_t cap, int64_t *tokens);

/* The tokens one CP rank holds of a micro-batch, as ranges [start, end) of the packed
 * micro-batch (its spans concatenated in order), ascending, touching ranges merged: what a
 * trainer slices from the packed input ids (SEQUENCE: chunks rank and 2cp-1-rank of the
 * packed sequence; DOCUMENT and ULYSSES's token-wise layers: those chunks of every span).
 * Same contract as bp_shard_segments: fills up to cap, returns how many were needed. */
size_t bp_shard_ranges(const struct bp_span *spans, size_t n, enum bp_shard mode, int cp,
		       int rank, int64_t (*r)[2], size_t cap, int64_t *tokens);

/* Resolves ADAPTIVE for a micro-batch (WLB-LLM Sec. 5.3): the mode with the lower predicted
 * fwd+bwd time summed over stages, SEQUENCE on a tie or when cp = 1. Other modes are returned
 * as they are. -1 on error. */
int bp_shard_resolve(const struct bp_costmodel *cm, const struct bp_span *spans, size_t n,
		     enum bp_shard mode, enum bp_shard *out, struct bp_error *err);

/* A micro-batch as the cost model sees it: spans, CP sharding, attention kind. */
struct bp_mb_desc {
	const struct bp_span *spans;
	size_t n;
	enum bp_shard shard;
	enum bp_attn_kind attn;
	int sparse_block;     /* SPARSE */
	const int *sparse_k;  /* SPARSE: [model layers] */
};

/* The decomposed time of one micro-batch on one stage in one direction, us (bp_cost_mb; each
 * consumer, the simulator, the engine and refit, sums the parts it needs):
 * attention on the slowest CP rank (0 for DISAGG: it runs on the servers), its GEMMs, its TP
 * all-reduces, the CP collectives, the LM head (last stage). attn + linear + tp_coll +
 * cp_coll + lm equals the stage time to rounding. */
struct bp_mb_part {
	double attn, linear, tp_coll, cp_coll, lm;
};

/* Per stage fwd/bwd times of a described micro-batch (each pp entries) and, when pf/pb are
 * not NULL, their parts (pp entries each). */
int bp_cost_mb(const struct bp_costmodel *cm, const struct bp_mb_desc *d, double *fwd,
	       double *bwd, struct bp_mb_part *pf, struct bp_mb_part *pb, struct bp_error *err);

/* Forward and backward time of one micro-batch on every stage of the pipeline: the slowest
 * CP rank's attention + linear layers + TP/CP collectives (WLB-LLM Sec. 3.1: a TP/CP group
 * waits for its slowest member). fwd and bwd have sc.pp entries. cp_attn, when not NULL, gets
 * per CP rank the attention forward time of one layer (sc.cp entries). Returns 0 or -1. */
int bp_cost_microbatch(const struct bp_costmodel *cm, const struct bp_span *spans, size_t n,
		       enum bp_shard mode, double *fwd, double *bwd, double *cp_attn,
		       struct bp_error *err);

/* The fwd+bwd time of a single document of len tokens on the busiest stage, alone in a
 * micro-batch: the per-item cost the packing heuristics balance, in *cost. 0, or -1 with err
 * where the model cannot price it (no table reaches the length, out of memory). */
int bp_cost_doc(const struct bp_costmodel *cm, int64_t len, double *cost, struct bp_error *err);

/* Point-to-point time to hand a micro-batch of tokens to the next stage (activations). */
double bp_cost_p2p(const struct bp_costmodel *cm, int64_t tokens);
/* Parameters a stage holds before TP division: its layers, plus the embedding on the first
 * stage and the LM head on the last. */
double bp_cost_stage_params(const struct bp_costmodel *cm, int stage);
/* Gradient synchronisation at the end of a step over the sync_ranks replicas of a stage: a
 * reduce-scatter and an all-gather of the stage's bf16 gradients (distributed optimizer). */
double bp_cost_grad_sync(const struct bp_costmodel *cm, int stage);
/* With Megatron-LM's --overlap-grad-reduce (plan parameter grad_sync=overlap, sim/predict.c):
 * the parameters per gradient bucket of a stage's rank, its default bucket_size (Megatron-LM
 * megatron/core/distributed, DistributedDataParallel: max(40M, 1M x the data-parallel
 * replicas) parameters, here the sync_ranks replicas), on the first stage only; every later
 * stage keeps its gradients in one bucket (its sync is off the critical path: Megatron-LM turns
 * bucketing off there), as without the overlap. */
double bp_cost_grad_bucket_params(const struct bp_costmodel *cm, int stage);
/* Hydraulis's LNK operator (Sec. 5.2, Fig. 7): batched send/receive of mutual slices
 * between the optimizer shards on all `world` GPUs and the propagation layout, priced as an
 * all-to-all over the world in which the busiest GPU moves `bytes` (in or out, whichever is
 * more); the profile's send/recv table when it has no all-to-all one. 0 for world < 2. */
double bp_cost_lnk(const struct bp_profile *p, int world, int gpus_per_node, double bytes);
/* The optimizer step of one shard of `params` parameters (Sec. 5.2 step 6: fp32 master,
 * Adam m and v, the bf16 gradient in and the bf16 parameter out, 28 bytes per parameter of
 * HBM traffic at the profile's bandwidth): memory-bound. */
double bp_cost_adam_shard(const struct bp_profile *p, double params);
/* Activation bytes one micro-batch keeps alive on a rank of a stage until its backward:
 * tokens_on_rank * layers * act_bytes_per_token_layer / tp (Hydraulis App. B.1 (a)). */
int64_t bp_cost_act_bytes(const struct bp_costmodel *cm, int stage, int64_t tokens_on_rank);
/* Model-state bytes on a rank of a stage (Hydraulis App. B.1 (b)). */
int64_t bp_cost_state_bytes(const struct bp_costmodel *cm, int stage);
/* The same with the optimizer's share (fp32 master and Adam, alpha = 2/3 of the bytes per
 * parameter) sharded over all `gpus` GPUs of the cluster, as Hydraulis Sec. 5.2 and App. B.1
 * keep it (footnote 3), the bf16 weights and gradients per TP shard of the stage. */
int64_t bp_cost_state_bytes_full(const struct bp_costmodel *cm, int stage, int gpus);
/* Usable memory per GPU: HBM minus the reserve. */
int64_t bp_cost_mem_cap(const struct bp_costmodel *cm);

/* Fits T(l,P) = a l^2 + b l + c (Hydraulis App. B.2) to the cost model's fwd+bwd time of one
 * sequence of length l on the busiest stage of scheme sc, by least squares over lengths
 * geometrically spaced in [128, max_len]. */
int bp_fit_scheme(const struct bp_profile *p, struct bp_scheme sc, int64_t max_len,
		  struct bp_fit *out, struct bp_error *err);

#endif
