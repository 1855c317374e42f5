/* engine_int.h: what engine.c (set-up, 1F1B, the layer loop, the trace) and engine_ticks.c
 * (the distca-ticks schedule) share. Not an interface: only those two files include it. */
#ifndef BP_ENGINE_INT_H
#define BP_ENGINE_INT_H

#include "engine.h"
#include "shares.h"

/* Per rank and timed step, the record gathered to rank 0: step, pipeline and grad sync
 * times, calls and bytes per kind of communication (BP_EXEC_NKINDS each), then per
 * micro-batch slot (mmax of them) fwd start, fwd, bwd start, bwd. */
#define REC_STATS 3
#define REC_HEAD (3 + 2 * BP_EXEC_NKINDS)
#define REC_MB 4

/* This rank's role in one layout of the plan, and the groups that role needs. */
struct lrole {
	struct bp_place pl;             /* pipe and stage -1: in no pipeline of this layout */
	const struct bp_costmodel *cm;  /* the pipeline's (NULL outside pipelines); borrowed */
	void *g_tp, *g_cp, *g_sync, *g_a2a; /* backend handles; used only when n_* > 1 */
	int n_tp, n_cp, n_sync, n_a2a;
	int *a2a_ranks;                 /* [n_a2a]: the all-to-all group's world ranks */
	int prev, next;                 /* neighbour stages' world ranks, -1 at the ends */
	/* With model chunks (v > 1): the last stage's rank for stage 0 (where chunk c - 1's
	 * forward comes from) and stage 0's for the last stage (where chunk c + 1 starts);
	 * -1 otherwise */
	int wrap_prev, wrap_next;
	const struct bp_schedule *sched; /* the layout's row (schedule.h) */
	int v;                          /* the layout's model chunks per rank */
	int ticks;                      /* the schedule is world-synchronous ticks */
	int active;                     /* in a pipeline, or an attention server (ticks) */
};

struct bp_engine {
	const struct bp_plan *plan;
	struct bp_costs *costs;     /* borrowed */
	const struct bp_backend *be;
	void *st;
	struct bp_engine_opts o;
	int rank, world;
	struct lrole *lr;           /* [plan->nlayouts] */
	size_t nl;
	size_t mmax;                /* most micro-batches of a pipeline in the timed steps */
	int vmax;                   /* most model chunks per rank over the layouts */
	int lmax;                   /* most layers of a stage, over every layout */
	char *payload;              /* what sends carry; never written after setup */
	char *cin, *cout;           /* collective buffers, max_bytes each */
	char *tp_buf;               /* the TP all-reduce's buffer, max_bytes / 2 */
	double *hdr;                /* [2 * mmax] send headers: the sender's wall clock */
	double *rec;                /* [nsteps][rec_len] */
	size_t rec_len, nsteps;
	int hung;
	double *cur;                /* the record of the step being run */
	struct bp_exec_stats stats; /* rank 0, after the gather: all ranks' */
	double *arrive;             /* [world + 1]: end times at a tick's end (ticks) */
	/* Hydraulis's pull and push (plan sync hydraulis-pullpush[-serial], Sec. 5.2): an
	 * all-to-all over the world, made when a timed step needs it; per peer send, sdispl,
	 * recv, rdispl (world each). */
	void *g_world;
	size_t *lnk;
};

/* 1 when the step synchronises by Hydraulis's pull and push. */
int bp_eng_pullpush(const struct bp_step *st);
/* The step's pull (push 0: bf16 parameter slices from the optimizer shards into the
 * pipelines) or push (1: gradient slices back), as one all-to-all over the world with
 * every peer's byte count (engine.c lnk_counts). Every world rank calls it, in a pipeline
 * of the step's layout or not. */
int bp_eng_lnk(struct bp_engine *e, const struct bp_step *st, int push, struct bp_error *err);

/* One operation's layer loop (engine.c bp_eng_op): what to run and its emulated clock. */
struct op_run {
	const struct lrole *r;
	int bwd, stage, tp, last;   /* last: the pipeline's last stage (LM head) */
	int64_t tokens;             /* this rank's tokens; 0: a dummy (ticks), no own work */
	const struct bp_mb *mb;     /* NULL for a dummy */
	struct bp_op_shares sh;     /* sh.l is the engine's ls */
	const int64_t (*seg)[2];    /* local attention segments (dense, sparse) */
	size_t nseg;
	double kv_bytes, tp_bytes;  /* per rank: the CP collective's and the TP all-reduce's */
	double t0, acc;             /* emulated: the next deadline is t0 + acc (from the op's
				     * start; a tick's) */
	struct bp_wait w;
	/* Ticks: the per-layer all-to-alls and served attention, run between the local
	 * attention and the O GEMM (the backward mirrored); NULL for 1F1B. */
	int (*middle)(struct bp_engine *e, struct op_run *o, int layer, struct bp_error *err);
	void *mid;
	double compute_us;          /* measured with middle: wall time of the own-work phases */
};

/* Counts one call of a kind of communication that moves bytes (per rank). */
static inline void bp_eng_count(struct bp_engine *e, int kind, double bytes)
{
	e->cur[REC_STATS + kind] += 1;
	e->cur[REC_STATS + BP_EXEC_NKINDS + kind] += bytes;
}
/* The wall clock (CLOCK_REALTIME, comparable across the ranks of a host), us. */
double bp_eng_wall_us(void);
/* A buffer size capped at max_bytes / n (and at least 1). */
size_t bp_eng_cap(const struct bp_engine *e, double bytes, int n);
/* The emulated clock: advances o by share (us, unscaled, x time scale) and returns the new
 * deadline. Compute primitives carry it (until_us); a communication's share only moves the
 * clock, the next deadline including it; the rank sleeps where it has to be on time (an
 * op's end, a tick phase's edges). */
double bp_eng_advance(const struct bp_engine *e, struct op_run *o, double share);
/* An emulating backend idles until t_us; a real one does nothing. */
int bp_eng_idle(struct bp_engine *e, double t_us, struct bp_error *err);
/* The time now, once o's work so far has ended: an emulating backend sleeps to o's
 * deadline (t0 + acc), a real one syncs. */
int bp_eng_stamp(struct bp_engine *e, struct op_run *o, double *t, struct bp_error *err);
/* What this rank's ops of one step need, worked out before the step barrier (not timed):
 * per micro-batch of its pipeline its tokens and attention segments on this CP rank
 * (bp_shard_segments: the planner's own sharding), and per (micro-batch, direction) the
 * shares of the op on this stage (shares.h), scaled to the plan's op time; zeros for a
 * dummy (ticks). */
struct step_ops {
	size_t m;
	int layers;
	int64_t *tokens;            /* [m] */
	int64_t (*seg)[2];          /* all micro-batches' segments */
	size_t *seg_at;             /* [m + 1]: micro-batch j's are seg[seg_at[j] ..) */
	struct bp_op_shares *sh;    /* [2 m]: forward, backward of each */
	struct bp_layer_share *ls;  /* [(2 m + 1) layers]: the last layers are the dummy's */
};
int bp_eng_step_ops(const struct bp_step *st, const struct lrole *r, struct step_ops *out,
		    struct bp_error *err);
void bp_eng_step_ops_release(struct step_ops *o);
/* Fills op o from the prepared ops of micro-batch j (-1: a dummy) in direction bwd. */
void bp_eng_op_from(struct op_run *o, const struct step_ops *so, int64_t j, int bwd);
/* Runs o's layers (and the LM head on the last stage) in the engine's order. */
int bp_eng_op(struct bp_engine *e, struct op_run *o, struct bp_error *err);
/* PP point to point of micro-batch j's activation (dir 0) or gradient (dir 1). recv idles
 * (emulating) until p2p_us x scale after the sender's end, at most that long from now. */
int bp_eng_recv_p2p(struct bp_engine *e, int peer, size_t j, int dir, double bytes,
		    double p2p_us, struct bp_wait *w, struct bp_error *err);
int bp_eng_send_p2p(struct bp_engine *e, int peer, size_t j, int dir, double bytes,
		    struct bp_error *err);
/* The end of a step after the schedule: the gradient synchronisation of the rank's stage
 * and the pending sends; fills rec's head from t0 (step start) and t_pipe. */
int bp_eng_finish_step(struct bp_engine *e, const struct bp_step *st, const struct lrole *r,
		       double t0, double t_pipe, double *rec, struct bp_error *err);

/* engine_ticks.c: step si on a distca-ticks layout. prepare (before the step barrier: not
 * timed) evaluates the step's ticks (planner/sim/ticks.h) and this rank's share of them;
 * run replays them from the step start t0 with the prepared ops (so; NULL on a server in
 * no pipeline); free takes NULL. */
struct ticks_run;
int bp_eng_ticks_prepare(struct bp_engine *e, size_t si, struct ticks_run **out,
			 struct bp_error *err);
int bp_eng_ticks_run(struct bp_engine *e, size_t si, struct ticks_run *t,
		     const struct step_ops *so, double t0, double *rec, struct bp_error *err);
void bp_eng_ticks_free(struct ticks_run *t);

#endif
