/* engine.h: balexec's backend-agnostic replay engine (DESIGN.md "Executor", issue 4).
 *
 * The engine reads a plan (through the planner's codec), finds its rank's role in each of
 * the plan's layouts (pipeline, stage, CP and TP position; layout.h), builds every
 * communication group once per layout (groups of unequal size across pipelines of a
 * heterogeneous layout), and replays steps on the step's layout: the rank's micro-batches in the
 * 1F1B order of planner/sim.c (stage s: min(pp-s-1, m) warm-up forwards, then one forward
 * and one backward, then the drain), with PP send/recv of activations, a TP all-reduce and a
 * CP all-gather per operation, then the gradient synchronisation (reduce-scatter and
 * all-gather over the dp*cp replicas of the stage). Every phase is timed.
 *
 * A backend is a table of operations (struct bp_backend); the engine never calls MPI, NCCL or
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

/* A collective inside an operation (a TP all-reduce, a CP all-gather or reduce-scatter):
 * the backend runs it as part of the op, overlapped with the compute where it can. */
enum bp_coll_kind { BP_EXEC_ALLREDUCE, BP_EXEC_ALLGATHER, BP_EXEC_REDUCESCATTER };
struct bp_op_coll {
	enum bp_coll_kind kind;
	void *group;       /* a group handle; NULL: no collective */
	const void *in;    /* allreduce works in place on out */
	void *out;
	size_t bytes;      /* per rank, as for the blocking collectives */
	const char *what;  /* for timeout messages */
};

/* One compute operation as the engine sees it. A backend that really computes (CUDA) builds
 * the synthetic layers from spans, layers and the model; an emulating one (host) sleeps until
 * start_us + predicted_us. */
struct bp_op {
	int bwd;                    /* 0 forward, 1 backward */
	int stage, layers;          /* pipeline stage and its transformer layers */
	int64_t step, mb;           /* plan step index, micro-batch index in the pipeline */
	const struct bp_mb *mbp;    /* the plan's micro-batch (spans, shard, tokens); borrowed */
	const struct bp_model *model; /* borrowed */
	double start_us;            /* when the op started (now_us clock), collectives included */
	double predicted_us;        /* the plan's time for the op, already times --time-scale */
	struct bp_op_coll colls[2]; /* TP then CP; done when compute returns */
	struct bp_wait wait;        /* names the op for timeouts */
};

/* What the front end knows before a backend starts (balexec.c). */
struct bp_backend_args {
	int rank, world;   /* the launcher's (SLURM_PROCID/SLURM_NTASKS or flags); -1: unknown */
	int local_rank;    /* SLURM_LOCALID: the GPU of this node to use; -1: unknown (use 0) */
	double timeout_s;  /* every blocking wait, initialisation included */
	const void *uid;   /* what rank 0's make_uid made, after the rendezvous gave it to
			    * every rank (CUDA: the ncclUniqueId); NULL when there is none */
	size_t uid_len;
};

/* A backend: one file per backend (backend_host.c: MPI, compute emulated; backend_cuda.c:
 * cuBLAS, own attention kernels, NCCL). st is the backend's state, made by init and freed by
 * finalize. Groups are backend handles made once by group_create: every world rank calls it
 * the same number of times in the same order (engine.c's groups of a kind have equal size, so
 * every rank makes one of each kind or none does; NCCL's ncclCommSplit needs the whole world,
 * MPI_Comm_create_group only the members). Every wait returns 0, -1 (error) or
 * BP_EXEC_TIMEOUT (deadline timeout_s passed; err says who for). */
struct bp_backend {
	const char *name;
	const char *summary;
	/* Rank 0 only, before the rendezvous (executor/rendezvous.h): fills blob (cap bytes)
	 * with what every rank's init needs, *len its size. NULL when the backend needs none. */
	int (*make_uid)(void *blob, size_t cap, size_t *len, struct bp_error *err);
	/* Starts the backend (MPI_Init; or the GPU, NCCL communicator); rank and world get what
	 * the runtime says (the CUDA backend: a's), host the processor name. */
	int (*init)(void **st, const struct bp_backend_args *a, int *rank, int *world, char *host,
		    size_t hostn, struct bp_error *err);
	/* Ends it cleanly (MPI_Finalize); st is freed. */
	int (*finalize)(void *st, struct bp_error *err);
	/* Ends every rank now with this exit code (MPI_Abort); does not return. */
	void (*abort)(void *st, int code);
	void (*set_timeout)(void *st, double seconds);
	double (*now_us)(void *st); /* a monotonic clock in microseconds */
	/* Sleeps until t (now_us clock): emulated time. NULL when the backend does not emulate
	 * (then the engine issues no emulated delays). */
	int (*idle_until)(void *st, double t_us, struct bp_error *err);
	/* Runs an op and its collectives (all members start them in the same order); 0, -1 or
	 * BP_EXEC_TIMEOUT. */
	int (*compute)(void *st, const struct bp_op *op, struct bp_error *err);
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
	 * writes bytes to out; allgather reads bytes from in and writes n*bytes to out. */
	int (*allreduce)(void *st, void *group, void *buf, size_t bytes, const struct bp_wait *w,
			 struct bp_error *err);
	int (*allgather)(void *st, void *group, const void *in, void *out, size_t bytes,
			 const struct bp_wait *w, struct bp_error *err);
	int (*reducescatter)(void *st, void *group, const void *in, void *out, size_t bytes,
			     const struct bp_wait *w, struct bp_error *err);
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

struct bp_engine;

/* Makes an engine for this rank: checks the world against the plan, finds the rank's role
 * in every layout (layout.h), builds each layout's groups (a collective over every rank).
 * plan, costs and the backend state are borrowed and must outlive the engine; costs serves
 * the plan's layouts (p2p times, stage layers, per-stage gradient sync). Returns NULL with
 * err; the caller frees with bp_engine_free. */
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

#endif
