/* engine.h: balexec's backend-agnostic replay engine (executor/README.md "What a rank does";
 * issues 4 and 9).
 *
 * The engine reads a plan (through the planner's codec), finds its rank's role in each of
 * the plan's layouts (pipeline, stage, CP and TP position, attention server; layout.h),
 * builds every communication group once per layout (groups of unequal size across pipelines
 * of a heterogeneous layout), and replays steps on the step's layout. It owns the layer
 * loop: per operation (the forward or backward of a micro-batch on a stage) it walks the
 * stage's transformer layers and calls the backend's primitives (QKV GEMM, the CP
 * collective, attention of the micro-batch's kind, O GEMM, TP all-reduce, FFN GEMMs, TP
 * all-reduce; the LM head on the last stage), with PP send/recv between stages. The schedule
 * is the layout's: "1f1b" in the order of planner/sim/sim.c, or "distca-ticks" in the tick
 * order of planner/sim/ticks.h, where attention runs on the attention servers between two
 * all-to-alls per layer. Then the gradient synchronisation. Every phase is timed.
 *
 * A backend is a table of primitives (struct bp_backend); the engine never calls MPI, NCCL or
 * CUDA itself. Every blocking wait takes a struct bp_wait naming what it waits for, so a
 * backend's timeout can say who waited for whom. The engine never prints and never exits:
 * errors come back as -1 with struct bp_error, and a timeout as BP_EXEC_TIMEOUT. */
#ifndef BP_ENGINE_H
#define BP_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"
#include "costmodel.h"
#include "plan.h"
#include "trace.h"

/* Returned by a backend wait (and passed up by the engine) when the deadline passed. */
#define BP_EXEC_TIMEOUT (-4)
/* Returned by bp_engine_run on the rank opts.exit_rank names (a debug crash). */
#define BP_EXEC_EXIT (-5)

/* What a blocking wait is for: the timeout message reads "timed out after S s waiting for
 * <peer or group> (<what>, step <step>, micro-batch <mb>)". */
struct bp_wait {
	const char *what; /* "pp recv", "tp all-reduce", ...; static text */
	int peer;         /* world rank waited for, or -1 for a group */
	int64_t step;     /* plan step index, -1: not in a step */
	int64_t mb;       /* micro-batch index, -1: none */
};

/* The GEMMs of one transformer layer, by where they sit around attention, and the LM head.
 * Forward Y = X W; backward the two GEMMs of each forward one (dX and dW). Weights are
 * Megatron's TP shards: QKV and FFN-up column-parallel, O and FFN-down row-parallel. */
enum bp_gemm_kind {
	BP_GEMM_QKV,     /* hidden -> (heads + 2 kv_heads) * head_dim / tp */
	BP_GEMM_O,       /* heads * head_dim / tp -> hidden */
	BP_GEMM_FFN,     /* up (gated: 2 x ffn / tp) and down, one call */
	BP_GEMM_LM_HEAD, /* hidden -> vocab / tp (the last stage) */
};

/* A compute primitive's emulated end: on an emulating backend (one with idle_until) the
 * work ends at until_us (now_us clock; the engine's deadline for the primitive, predicted x
 * time scale from the op's start), and the rank's next wait (idle_until, sync, recv,
 * barrier, gather, wait_sends) is not over before it; a real backend ignores it. */
struct bp_gemm {
	enum bp_gemm_kind kind;
	int bwd;
	int64_t tokens;                /* rows: this rank's tokens */
	int tp;                        /* the TP degree the weights are split over */
	const struct bp_model *model;  /* borrowed */
	double until_us;
	const struct bp_wait *wait;
};

/* Attention over segments: segment i has seg[i][0] query tokens, the last ones of a causal
 * prefix of seg[i][1] keys (bottom-right causal mask; a CP shard, a CA-task). Heads are the
 * model's over tp. block and k: attn_sparse only (MoBA top-k: block tokens per block, k
 * blocks per query tile in this layer, the own block included). */
struct bp_attn {
	int bwd;
	const int64_t (*seg)[2]; /* borrowed for the call */
	size_t nseg;
	int tp;
	const struct bp_model *model;
	int block, k;
	double until_us;
	const struct bp_wait *wait;
};

/* A variable all-to-all over a group (group order: the ascending world ranks group_create
 * was given): this rank sends send[i] bytes from in + sdispl[i] to member i and receives
 * recv[i] bytes into out + rdispl[i] from it. Every member's send[j] to i is i's recv[j]. */
struct bp_a2a {
	void *group;
	const void *in;
	void *out;
	const size_t *send, *sdispl, *recv, *rdispl; /* [group size] each */
	const struct bp_wait *wait;
};

/* What the front end knows before a backend starts (balexec.c). */
struct bp_backend_args {
	int rank, world;   /* the launcher's (SLURM_PROCID/SLURM_NTASKS or flags); -1: unknown */
	int local_rank;    /* SLURM_LOCALID: the GPU of this node to use; -1: unknown (use 0) */
	double timeout_s;  /* every blocking wait, initialisation included */
	const void *uid;   /* what rank 0's make_uid made, after the rendezvous gave it to
			    * every rank (CUDA: the ncclUniqueId); NULL when there is none */
	size_t uid_len;
	const char *gpu_times; /* CUDA: --gpu-times FILE (gpu_times.h), or NULL */
};

/* A backend: one file per backend (backend_host.c: MPI, compute emulated; backend_cuda.c:
 * cuBLAS, own attention kernels, NCCL). st is the backend's state, made by init and freed by
 * finalize. Groups are backend handles made once by group_create: every world rank calls it
 * the same number of times in the same order (a rank outside a kind's groups makes a group
 * of itself; NCCL's ncclCommSplit needs the whole world, MPI_Comm_create_group only the
 * members). Every call returns 0, -1 (error) or BP_EXEC_TIMEOUT (deadline timeout_s passed;
 * err says who for).
 *
 * Ordering: the compute primitives (gemm, attn_dense, attn_sparse) and the collectives
 * (allreduce, allgather, reducescatter, alltoallv) are stream-ordered: a backend may return
 * once the work is queued (CUDA) and runs it in call order; sync returns when all of it has
 * finished; buffers a call reads or writes stay the caller's to keep until then. recv,
 * barrier and gather block; send is non-blocking until wait_sends. The host backend keeps
 * collectives in flight too and defers the sleep of compute primitives to the next wait.
 * Every member of a group calls its collectives in the same order. */
struct bp_backend {
	const char *name;
	const char *summary;
	/* Rank 0 only, before the rendezvous (executor/rendezvous.h): fills blob (cap bytes)
	 * with what every rank's init needs, *len its size. NULL when the backend needs none. */
	int (*make_uid)(void *blob, size_t cap, size_t *len, struct bp_error *err);
	/* NULL when the backend replays every attention kind; else a static reason when it
	 * cannot replay kind, NULL when it can. Asked before the backend starts. */
	const char *(*unsupported)(enum bp_attn_kind kind);
	/* Starts the backend (MPI_Init; or the GPU, NCCL communicator); rank and world get what
	 * the runtime says (the CUDA backend: a's), host the processor name. */
	int (*init)(void **st, const struct bp_backend_args *a, int *rank, int *world, char *host,
		    size_t hostn, struct bp_error *err);
	/* Ends it cleanly (MPI_Finalize); st is freed. */
	int (*finalize)(void *st, struct bp_error *err);
	/* Ends every rank now with this exit code (MPI_Abort); does not return. */
	void (*abort)(void *st, int code);
	void (*set_timeout)(void *st, double seconds);
	double (*now_us)(void *st); /* the timer: a monotonic clock in microseconds */
	/* Sleeps until t (now_us clock), and at least until the latest until_us of the compute
	 * primitives so far (an emulating backend may defer their sleep to here, to sync or to
	 * a blocking call: until_us is when the work ends, not when the call returns): emulated
	 * time. NULL when the backend does not emulate (then the engine issues no emulated
	 * delays and until_us means nothing). */
	int (*idle_until)(void *st, double t_us, struct bp_error *err);
	/* Compute primitives. attn_sparse may fail with "not supported" (see unsupported). */
	int (*gemm)(void *st, const struct bp_gemm *g, struct bp_error *err);
	int (*attn_dense)(void *st, const struct bp_attn *a, struct bp_error *err);
	int (*attn_sparse)(void *st, const struct bp_attn *a, struct bp_error *err);
	/* Waits until every stream-ordered call so far has finished. */
	int (*sync)(void *st, const struct bp_wait *w, struct bp_error *err);
	/* ranks: world ranks of the group, ascending, including the caller. */
	int (*group_create)(void *st, const int *ranks, int n, void **group,
			    struct bp_error *err);
	void (*group_free)(void *st, void *group);
	/* Point to point. send is non-blocking: it returns a request completed by wait_sends
	 * (all of them, in any order); buf must stay unchanged until then. recv blocks. */
	int (*send)(void *st, const void *buf, size_t bytes, int peer, int tag,
		    struct bp_error *err);
	int (*wait_sends)(void *st, const struct bp_wait *w, struct bp_error *err);
	int (*recv)(void *st, void *buf, size_t bytes, int peer, int tag, const struct bp_wait *w,
		    struct bp_error *err);
	/* Collectives over a group; bytes per rank. reducescatter reads n*bytes from in and
	 * writes bytes to out; allgather reads bytes from in and writes n*bytes to out;
	 * allreduce works in place on buf. out, buf and an all-to-all's out may be NULL: the
	 * caller wants no result (the engine never reads one), the bytes still move (an
	 * all-reduce then contributes what the backend has). */
	int (*allreduce)(void *st, void *group, void *buf, size_t bytes, const struct bp_wait *w,
			 struct bp_error *err);
	int (*allgather)(void *st, void *group, const void *in, void *out, size_t bytes,
			 const struct bp_wait *w, struct bp_error *err);
	int (*reducescatter)(void *st, void *group, const void *in, void *out, size_t bytes,
			     const struct bp_wait *w, struct bp_error *err);
	int (*alltoallv)(void *st, const struct bp_a2a *a, struct bp_error *err);
	int (*barrier)(void *st, void *group, const struct bp_wait *w, struct bp_error *err);
	/* Gathers bytes from every world rank into out (world * bytes) on rank 0. */
	int (*gather)(void *st, const void *in, void *out, size_t bytes, const struct bp_wait *w,
		      struct bp_error *err);
};

/* The backends built into this binary; NULL when name is unknown or not built. */
const struct bp_backend *bp_backend_find(const char *name);
/* Names of the backends built in, for --help ("host" or "" when none). Static. */
const char *bp_backend_names(void);

struct bp_engine_opts {
	double time_scale;  /* emulated compute = predicted x time_scale (> 0) */
	double timeout_s;   /* every blocking wait (> 0) */
	int64_t max_bytes;  /* cap on any one message or collective buffer, per rank (>= 64) */
	size_t step_lo, step_hi; /* plan steps [lo, hi) */
	int warmup;         /* untimed replays of step_lo before the timed steps */
	int hang_rank;      /* debug: this rank sleeps forever at the first step; -1: none */
	int exit_rank;      /* debug: bp_engine_run returns BP_EXEC_EXIT on this rank at the
			     * first step (the front end then exits at once); -1: none */
};

/* Whether backend be can replay steps [lo, hi) of plan: every layout's schedule is one the
 * engine knows and every micro-batch's attention kind one the backend runs. Needs no
 * backend state, so front ends call it before starting one; bp_engine_new calls it too.
 * 0, or -1 with err naming the first step, pipeline and micro-batch that cannot run. */
int bp_engine_check(const struct bp_plan *plan, const struct bp_backend *be, size_t lo,
		    size_t hi, struct bp_error *err);

struct bp_engine;

/* Makes an engine for this rank: checks the world against the plan, finds the rank's role
 * in every layout (layout.h), builds each layout's groups (a collective over every rank).
 * plan, costs and the backend state are borrowed and must outlive the engine; costs serves
 * the plan's layouts (the decomposed op times, p2p times, stage layers, per-stage gradient
 * sync, the ticks of a distca-ticks layout). Returns NULL with err; the caller frees with
 * bp_engine_free. */
struct bp_engine *bp_engine_new(const struct bp_plan *plan, struct bp_costs *costs,
				const struct bp_backend *be, void *st, int rank, int world,
				const struct bp_engine_opts *o, struct bp_error *err);
void bp_engine_free(struct bp_engine *e);

/* Runs the warm-up and the timed steps. 0, -1 or BP_EXEC_TIMEOUT. */
int bp_engine_run(struct bp_engine *e, struct bp_error *err);

/* Gathers every rank's measured times to rank 0 and, there, fills tr (initialised by the
 * caller; other ranks leave it empty). A collective over every rank. 0, -1 or timeout. */
int bp_engine_gather(struct bp_engine *e, const char *plan_sha, struct bp_trace *tr,
		     struct bp_error *err);

/* What the timed steps moved, summed over every rank (rank 0, after bp_engine_gather; zeros
 * elsewhere): per kind the calls and the bytes each rank gave them (as capped by
 * max_bytes): PP sends (payload), TP all-reduces, CP all-gathers and reduce-scatters, the
 * DistCA all-to-alls (bytes sent to other ranks) and the gradient synchronisation. */
enum { BP_EXEC_PP, BP_EXEC_TP, BP_EXEC_CP, BP_EXEC_A2A, BP_EXEC_SYNC, BP_EXEC_NKINDS };
struct bp_exec_stats {
	double calls[BP_EXEC_NKINDS], bytes[BP_EXEC_NKINDS];
};
void bp_engine_stats(const struct bp_engine *e, struct bp_exec_stats *out);
/* "pp send", "tp all-reduce", ...: static. */
const char *bp_exec_kind_name(int kind);

#endif
