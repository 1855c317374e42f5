/* ticks.h: DistCA's world-synchronous tick schedule ("distca-ticks", DistCA Sec. 4.1, Fig. 7
 * and 8), shared by the step simulator (predict.c) and balexec's engine.
 *
 * Every pipeline of a ticks layout has the same pp, tp, cp = 1 and equal layers per stage
 * (bp_layout_check). A step of M micro-batches per pipeline (M = the most any pipeline of
 * the step has; the others run dummies) takes 2 (M + pp - 1) ticks, all stages of all
 * pipelines in the same phase per tick: forward ticks F_0 .. F_{pp-2}, then (F_{pp-1+i}, B_i)
 * for i < M, then B_M .. B_{M+pp-2}. Forward tick t: stage r runs micro-batch t - r; backward
 * tick j: stage r runs micro-batch j - (pp - 1) + r; out of [0, M) it is a dummy, which does
 * no token-wise work here (a dummy only serves attention, DistCA Fig. 8).
 *
 * Per layer of a tick, every rank does its token-wise work for its micro-batch (its
 * stage's fwd or bwd time without attention, spread evenly over the stage's layers), the
 * per-layer all-to-all sends each CA-task's queries and its (deduplicated) causal KV prefix
 * to its server, the server runs its tasks' attention, and a second all-to-all brings the
 * outputs back. Without ping-pong a layer is single-stream: max over ranks of (token-wise +
 * attention served) + all-to-all in + all-to-all out. With ping-pong (the distca method's
 * record names each micro-batch's ping spans, Sec. 4.1, Fig. 7) the two nano-batches take
 * Fig. 7's four slots per layer, each slot the longer of its compute (the slowest rank's
 * token-wise work or served attention of one nano-batch) and the other nano-batch's
 * all-to-all: 0 lin_P | out_Q(l-1), 1 lin_Q | in_P, 2 CA_P | in_Q, 3 CA_Q | out_P. A
 * backward tick runs the CA-tasks the step names for it (plan.h struct bp_ca_task: its own,
 * the distca method's default with pipeline stages, or the forward tick's of each
 * micro-batch, reused): in resend mode Q, O, dO and the log-sum-exp go to the server with K and V again; in
 * non-resend mode (pp 1 only, as the public code) the server kept Q, K, V, O and the LSE
 * since the forward (its memory, bp_ticks.kept) and gets dO alone; dQ, dK, dV come back in
 * both.
 *
 * A server (plan "servers", an index into the layout's server ranks) is the TP group of its
 * rank: TP rank i of the owner's group sends its head slice to TP rank i of the server's
 * group, so each TP slice runs its own all-to-all over the slice's ranks. */
#ifndef BP_TICKS_H
#define BP_TICKS_H

#include <stddef.h>
#include <stdint.h>

#include "ca_sched.h"
#include "costmodel.h"
#include "plan.h"


/* Bytes per query token (q_*) and per deduplicated KV token (kv_*) that one TP slice moves
 * for a CA-task, per layer, bf16, as DistCA's public code moves them (the paper gives no byte
 * counts). Forward in (dir 0): Q padded to 16
 * bytes and K, V, in both modes. resend 1 (mandatory with PP): forward out (dir 1) O with
 * its fp32 log-sum-exp, padded; backward in Q, O, dO and the log-sum-exp, padded, and K, V
 * again; backward out dQ, dK, dV. resend 0 (non-resend, the 3D default; the servers kept Q,
 * K, V, O and the LSE): forward out O alone; backward in dO alone; backward out dQ, dK, dV
 * (dK, dV summed on the server, per deduplicated KV token). Llama-3-8B at tp 8: resend
 * 1024 + 512, 1040, 3088 + 512, 1024 + 512; non-resend 1024 + 512, 1024, 1024, 1024 + 512. */
struct bp_ca_bytes {
	double q_in, kv_in, q_out, kv_out;
};
struct bp_ca_bytes bp_ca_bytes_per_token(const struct bp_model *md, int tp, int bwd, int dir,
					 int resend);

/* Whether step st runs DistCA's resend mode: its "distca" record's resend, 1 without one
 * (hand-written plans and plans written before non-resend). */
int bp_ticks_resend(const struct bp_step *st);

/* One step's ticks, evaluated (all times us, for all of a stage's layers). */
struct bp_ticks {
	int pp, world;      /* world: the cluster's GPUs */
	size_t m, nticks;
	int layers;         /* layers per stage: per-layer all-to-alls per tick, each way */
	double *tick_us;    /* [nticks]: the tick's time */
	double *compute;    /* [nticks * world]: token-wise work per rank */
	double *attn;       /* [nticks * world]: attention each rank serves */
	double *a2a_us;     /* [nticks]: all-to-all in + out, all layers */
	double *exposed_us; /* [nticks]: the tick's time beyond its slowest ranks' compute and
			     * attention: the all-to-all ping-pong does not hide */
	double *slow_lin, *slow_ca; /* [nticks]: the tick's time its slowest ranks' token-wise
				     * work and served attention fill (ping-pong: Fig. 7's slots,
				     * the slowest rank of each nano-batch; single stream: the
				     * slowest rank's two parts), so tick_us = slow_lin + slow_ca
				     * + exposed_us */
	int *stage;         /* [world]: each rank's pipeline stage */
	int *slow_stage;    /* [nticks]: the stage of the rank with the most token-wise work
			     * (the first such rank), the stage that holds the tick's linear
			     * slots */
	double *send, *recv; /* [nticks * world]: per-layer bytes each rank sends and receives,
			      * in and out all-to-alls together, self traffic excluded */
	double *kept;       /* [nticks * world]: non-resend mode, the bytes each server rank
			     * keeps during the tick for the CA-tasks it served forward and has
			     * not yet served backward (all of the stage's layers,
			     * bp_ca_kept_bytes); 0 in resend mode */
	int resend;         /* the step's mode (bp_ticks_resend) */
};

void bp_ticks_release(struct bp_ticks *t);

/* Evaluates step st of p (a distca-ticks layout) from its micro-batches' predicted fwd/bwd
 * (bp_cost_mb's times, attention excluded for disaggregated micro-batches), its CA-tasks and
 * costs (CA-task times from each server's attention table, bp_cost_ca_task; all-to-all from
 * the profile, bp_cost_alltoallv). out is initialised here; release after success or
 * failure. */
int bp_ticks_eval(const struct bp_plan *p, const struct bp_step *st, struct bp_costs *costs,
		  struct bp_ticks *out, struct bp_error *err);

/* The per-layer byte matrix of one all-to-all at timeline position tick: dir 0 the all-to-all
 * in (queries and KV, or in the backward Q, O, dO, LSE, K, V), 1 the all-to-all out (O and
 * LSE, or dQ, dK, dV); bytes[src * world + dst] (world * world entries, caller-owned,
 * zeroed here; the diagonal stays 0: self traffic is a local copy). */
int bp_ticks_bytes(const struct bp_plan *p, const struct bp_step *st, size_t tick, int dir,
		   double *bytes, struct bp_error *err);

#endif
