/* ca_sched.h: DistCA's building blocks: the linear-layer
 * placement with head-tail splits (Sec. 3, Sec. 6.1), CA-task Items (Sec. 4.1), the
 * communication-aware greedy scheduler (Sec. 4.2, App. E), its communication costs (App. B,
 * with the corrected boundary root) and the shard bound of App. A. Called by the distca
 * method (methods/distca.c) once per tick, phase and nano-batch, and by the unit tests
 * (tests/unit/test_distca.c: known answers K1-K6, what DistCA's public planner gives on small
 * inputs, and the invariants).
 *
 * Units are attended (query, key) pairs, diagonal included (the public code's FLOPs): a
 * query at position p of a causal unit attends p + 1 keys, so tokens [a, b) cost
 * (b - a)(a + b + 1) / 2 and a whole unit of L tokens L (L + 1) / 2.
 *
 * Invariants kept: the chunks of every unit tile [0, L) once and each chunk's context is
 * its whole causal prefix; a split moves exactly m (h1 + t0 + 1) pairs (m (L + 1) for a
 * symmetric head-tail Item); the total load never changes; everything is deterministic
 * (ties: the largest deficit first, then the lowest server; among Items the lowest
 * V/dF, then the earliest in list order). */
#ifndef BP_CA_SCHED_H
#define BP_CA_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"
#include "presets.h"

/* One Item = one CA-task group (Sec. 4.2 "Scheduling units"; head and tail as in the public
 * code): queries [h0, h1) and [t0, t1) of a causal
 * unit of len tokens (document doc from token base on: base 0 for a whole document), with
 * their whole prefix [0, t1) (or [0, h1) without a tail) as context. A complete Item (the
 * whole unit, never split) is kept as head [0, L/2) and tail [L/2, L) and emits one chunk. */
struct bp_ca_item {
	int64_t doc, base, len;
	int64_t h0, h1, t0, t1;
	int complete;
	size_t unit; /* index of its unit in the placement's input order */
	int src;    /* linear rank holding the queries (stays when the Item moves) */
	int server; /* attention server computing it */
};

/* Pairs attended by query tokens [a, b) of a causal unit. */
static inline int64_t bp_ca_pairs(int64_t a, int64_t b)
{
	return b > a ? (b - a) * (a + b + 1) / 2 : 0;
}
static inline int64_t bp_ca_item_units(const struct bp_ca_item *it)
{
	return bp_ca_pairs(it->h0, it->h1) + bp_ca_pairs(it->t0, it->t1);
}

/* A linear piece: tokens [offset, offset + len) of document doc on linear rank `rank`. */
struct bp_ca_piece {
	int64_t doc, offset, len;
	int rank;
};

/* The placement of one batch of causal units over nranks linear ranks (Sec. 6.1; the
 * public code's batch_to_items_general): units in order fill rank 0's budget,
 * then rank 1's, ...; a unit that fits what is left of the current rank is one complete
 * Item, otherwise the rank takes chunk = min(left of the unit, rank budget) tokens as a
 * head-tail Item, floor(chunk / 2) from the front and the rest from the back, and the unit
 * continues on the next rank. Items and pieces are in placement order; pieces carry the
 * unit's base. */
struct bp_ca_placement {
	struct bp_ca_item *items; /* owned; capacity cap */
	size_t nitems, cap;
	struct bp_ca_piece *pieces; /* owned */
	size_t npieces;
};
void bp_ca_placement_release(struct bp_ca_placement *pl);
/* doc[i], base[i] (NULL: 0), len[i] >= 1 for n units; budget >= 1 tokens per rank. Fails
 * when the units hold more than nranks * budget tokens. pl is initialised here. */
int bp_ca_place(const int64_t *doc, const int64_t *base, const int64_t *len, size_t n,
		int nranks, int64_t budget, struct bp_ca_placement *pl, struct bp_error *err);

/* How the scheduler prices a candidate move (V_comm of Sec. 4.2: the public code's formula,
 * App. B's, or the exact bytes, our default). */
enum bp_ca_comm {
	BP_CA_COMM_CODE,  /* the public code: dF/(L+1) Q tokens + (L+1) KV tokens */
	BP_CA_COMM_APPB,  /* App. B's head-tail closed form */
	BP_CA_COMM_EXACT, /* the bytes of the concrete split: 2m Q tokens and the KV prefix
			   * [0, t0 + m) less what the destination already holds */
	BP_CA_COMM_NMODES
};
const char *bp_ca_comm_name(enum bp_ca_comm c);
int bp_ca_comm_parse(const char *s, enum bp_ca_comm *out); /* 0 or -1 */

struct bp_ca_opts {
	double eps;      /* tolerance: a recipient stops at a deficit <= eps * mean */
	int block;       /* shard granularity in tokens: moved pairs are multiples of
			  * max(1, block / 2) (128 the paper, 1 the code) */
	enum bp_ca_comm comm;
	double q_bytes;  /* per query token (Q) */
	double kv_bytes; /* per KV token, K and V together */
	int two_sided;   /* 0: the code's one-sided tolerance; 1: then also the paper's
			  * two-sided band (every server within eps * mean where whole
			  * granules allow) */
	int max_shards;  /* App. A: no split makes a unit more chunks than this (or than the
			  * placement gave it); 0: no bound */
};

/* The outcome of one scheduler call. */
struct bp_ca_result {
	double mean;                 /* target F: total units / servers */
	double max_before, max_after; /* the largest server load */
	int64_t moved_pairs;         /* units moved off their linear rank */
	size_t moves;
};

/* The greedy scheduler (Sec. 4.2, App. E; as the public code's Planner.plan_items runs it)
 * over pl->items on nservers servers (each Item's server must be in range): deficit servers
 * in order of their deficit take from surplus servers, each move the candidate with the
 * lowest V/dF (the paper's highest E = dF/V), split at the innermost pairs when only part
 * is wanted; split-off Items are appended. Tolerance is one-sided, as in the public code (a
 * donor may stay above (1 + eps) mean, so no two-sided bound holds)
 * unless o->two_sided, which then moves from the most to the least loaded server while the
 * most loaded is above (1 + eps) mean (the paper's stop rule).
 * load (nservers entries, may be NULL) gets the loads after. Returns 0 or -1. */
int bp_ca_schedule(struct bp_ca_placement *pl, int nservers, const struct bp_ca_opts *o,
		   struct bp_ca_result *res, double *load, struct bp_error *err);

/* Scratch that bp_ca_schedule_in and bp_ca_emit_in grow and reuse, kept by a caller that
 * makes many calls (the distca method: one per tick and nano-batch, 80 a step at PP 4), so
 * that a call allocates nothing once the buffers fit it (per-call malloc, calloc and free
 * were 11% of the method's time at 256 GPUs). Zero-initialise it; one call at a time;
 * bp_ca_work_release frees it. */
#define BP_CA_WORK_BUFS 16
struct bp_ca_work {
	void *buf[BP_CA_WORK_BUFS];
	size_t cap[BP_CA_WORK_BUFS]; /* bytes */
};
void bp_ca_work_release(struct bp_ca_work *w);
/* bp_ca_schedule with its scratch in w. */
int bp_ca_schedule_in(struct bp_ca_work *w, struct bp_ca_placement *pl, int nservers,
		      const struct bp_ca_opts *o, struct bp_ca_result *res, double *load,
		      struct bp_error *err);

/* A scheduled chunk: queries [q0, q1) of doc with context [kv0, q1), kv0 the unit's base,
 * on server, its queries from linear rank src. */
struct bp_ca_chunk {
	int64_t doc, q0, q1, kv0;
	int server, src;
};
/* The Items' chunks (complete Items one chunk, others head and tail, empty ones dropped),
 * sorted by (doc, q0). *out is owned by the caller (free). */
int bp_ca_chunks(const struct bp_ca_placement *pl, struct bp_ca_chunk **out, size_t *n,
		 struct bp_error *err);

/* Bytes one call moves, per TP slice and layer, forward in: linear rank i -> server j gets the
 * chunk's queries (q_bytes each) and, once per (document, piece's rank, server), the KV tokens
 * of that rank's pieces inside the longest prefix the server needs (KV deduplicated per server,
 * as the public code sends it; self traffic excluded). send/recv (nranks entries each) are
 * filled; returns the largest send + recv of any rank (the buffer a call needs), or -1. This
 * and bp_ca_chunks state the model directly, over chunks and pieces, for hand-made cases; the
 * method runs bp_ca_emit, which the unit tests hold to them. */
double bp_ca_bytes(const struct bp_ca_placement *pl, const struct bp_ca_chunk *ch, size_t n,
		   int nranks, double q_bytes, double kv_bytes, double *send, double *recv,
		   struct bp_error *err);

/* bp_ca_chunks and bp_ca_bytes in one pass, as the distca method needs them: the chunks
 * ordered by (server, doc, q0) instead of (doc, q0), send/recv and the return value as
 * bp_ca_bytes's for the same Items (their pieces being the placement's), over nservers
 * ranks (Items' src and server must be below it). Linear in the Items but for sorting
 * the units by document (a merge of the sorted runs they come in). *out is owned by the
 * caller (free); -1 on error. */
double bp_ca_emit(const struct bp_ca_placement *pl, int nservers, double q_bytes,
		  double kv_bytes, struct bp_ca_chunk **out, size_t *n, double *send,
		  double *recv, struct bp_error *err);
/* bp_ca_emit with its scratch in w, the chunks into the caller's *out of room for *cap
 * (NULL and 0 at first; grown here, kept on error; the caller frees it). */
double bp_ca_emit_in(struct bp_ca_work *w, const struct bp_ca_placement *pl, int nservers,
		     double q_bytes, double kv_bytes, struct bp_ca_chunk **out, size_t *cap,
		     size_t *n, double *send, double *recv, struct bp_error *err);

/* App. B, one shard: the fewest bytes a sub-shard of alpha of an Item's work (L_q queries
 * ending at L_kv) can move, min n_q size_q + n_kv size_kv over real n_q; the boundary
 * case with the corrected root n_q = (L_q - L_kv) + sqrt((L_q - L_kv)^2 + alpha X)
 * (App. B prints sqrt((L_q - L_kv)^2 + alpha X) alone, which only holds at L_q = L_kv; the
 * root above solves n_q (n_q + 2 (L_kv - L_q)) = alpha X). */
double bp_ca_appb_shard(double alpha, double lq, double lkv, double size_q, double size_kv);
/* App. B, head-tail: the smallest feasible n_q, v = L_doc size_kv + size_q (n_q (2 + beta)
 * - alpha beta X / n_q) / 2. */
double bp_ca_appb_headtail(double alpha, double lq, double lkv, double ldoc, double size_q,
			   double size_kv);

/* App. A: the most shards s a document can take while its CA traffic hides under the
 * token-wise compute, s <= 2 (t B - h_q) / h_kv - 1 (t seconds per token, B bytes per
 * second, h_q and h_kv bytes per token, h_kv counting K and V). */
double bp_ca_max_shards(double t_per_token, double bw, double h_q, double h_kv);

/* Bytes one TP slice moves per query token (Q, padded to 16 bytes) and per KV token (K and
 * V) into a server, bf16 (the public code's forward-in rule, sim/ticks.h). */
void bp_ca_token_bytes(const struct bp_model *md, int tp, double *q_bytes, double *kv_bytes);
/* The same for a backward call's all-to-all in, resend mode (sim/ticks.h's bytes): Q, O, dO
 * and the log-sum-exp padded to 16 bytes per query token; K and V per KV token. */
void bp_ca_token_bytes_bwd(const struct bp_model *md, int tp, double *q_bytes,
			   double *kv_bytes);

/* Non-resend mode (the public code's default without PP): what a server keeps
 * per layer and TP slice from a CA-task's forward until its backward, bf16 with an fp32
 * log-sum-exp: per query token the received Q (padded as received, 16 bytes), its output O
 * and the log-sum-exp (Llama-3-8B at tp 8: 1024 + 1024 + 16 = 2064); per KV token K and V
 * (512). */
void bp_ca_kept_token_bytes(const struct bp_model *md, int tp, double *q_bytes,
			    double *kv_bytes);

struct bp_ca_task; /* plan/plan.h */
/* The bytes the server of each of the n CA-tasks ca (plan order: by tick, server, document,
 * q0) keeps per layer and TP slice for it in non-resend mode: its queries at q_bytes, and
 * the KV prefix [kv0, longest kv1) of each run of consecutive tasks with the same tick,
 * server, document and kv0 once at kv_bytes (deduplicated as the all-to-all sends it),
 * charged to the run's first task. Self traffic counts: the local copy
 * lands in the same buffer. kept[n] is filled. */
void bp_ca_kept_bytes(const struct bp_ca_task *ca, size_t n, double q_bytes, double kv_bytes,
		      double *kept);

/* The distca method's per-step record (plan steps[i].record, kind "distca"; codec in
 * methods/distca.c), read by the tick simulator for the nano-batches and the mode:
 *   resend      1: the backward sends Q, O, dO, LSE, K and V to the servers again, which
 *               keep nothing (mandatory with pp > 1); 0: non-resend, the servers keep the
 *               received Q, KV, O and LSE until the backward (the public code at pp 1); plans
 *               without it read as resend;
 *   ping_spans  per micro-batch (pipeline-major, in execution order) how many of its first
 *               spans form the ping nano-batch (the rest are pong), NULL without ping-pong
 *               (Sec. 4.1 "Ping-Pong execution", Fig. 7);
 *   max_shards  App. A's bound on chunks per document and tick the calls kept (a document the
 *               placement cut into more pieces keeps their count);
 *   calls       one entry per scheduler call (forward tick, nano-batch): the tolerance used
 *               (after escalation), mean and largest server load before and after (pairs),
 *               pairs moved and the largest per-rank bytes of one layer's all-to-all in. */
struct bp_ca_record {
	int resend;         /* 1 resend, 0 non-resend (the servers keep Q, KV, O, LSE) */
	int max_shards;     /* App. A's bound the calls kept (0: none) */
	double *ping_spans; /* [nmbs] or NULL; owned */
	size_t nmbs;
	double *tick, *nano, *eps, *mean, *max_before, *max_after, *moved, *bytes; /* [ncalls] */
	size_t ncalls;
};
void bp_ca_record_release(struct bp_ca_record *r);

/* DistCA Fig. 8's tick order in closed form (Sec. 4.1; the tick simulator,
 * sim/ticks.h, and the distca method's memory check use it). */
/* Ticks in a step of m micro-batches per pipeline on pp stages: 2 (m + pp - 1), 0 for m 0. */
size_t bp_ticks_count(int pp, size_t m);

/* The phase of timeline position tick: *bwd 0 forward, 1 backward; *phase_tick the forward
 * tick t or backward tick j. */
void bp_tick_phase(int pp, size_t m, size_t tick, int *bwd, size_t *phase_tick);

/* What stage s runs at timeline position tick (0 <= tick < bp_ticks_count): sets *bwd (0
 * forward, 1 backward) and *phase_tick (the forward tick t or backward tick j) and returns the
 * micro-batch, or -1 for a dummy. */
int64_t bp_tick_op(int pp, size_t m, size_t tick, int s, int *bwd, size_t *phase_tick);

/* The forward tick of micro-batch mb on stage s (CA-tasks name it), and the timeline position
 * of its backward. */
static inline size_t bp_tick_fwd(size_t mb, int s)
{
	return mb + (size_t)s;
}
size_t bp_tick_bwd_position(int pp, size_t m, size_t mb, int s);

/* A CA-task's tick (plan.h struct bp_ca_task) in a step of m micro-batches per pipeline on
 * pp stages, F = m + pp - 1 forward ticks: tick t < F is forward tick t, where micro-batch mb
 * runs on stage t - mb; tick t >= F is backward tick j = t - F with a placement of its own
 * (DistCA Sec. 4.2: "For PP, the scheduler is called for each logical tick"), where mb runs
 * on stage mb - j + pp - 1. own_bwd: the step has such backward tasks (bp_ca_own_bwd), so a
 * forward task runs at its forward position only; without them the backward tick reuses
 * the forward placement and a forward task runs at both. Sets *stage and the timeline
 * positions *pf and *pb (SIZE_MAX where the task does not run); returns 0, or -1 where mb
 * does not run at that tick. */
int bp_ca_task_place(int pp, size_t m, int64_t tick, size_t mb, int own_bwd, int *stage,
		     size_t *pf, size_t *pb);

/* Whether a step whose CA-tasks are sorted by tick, the last at last_tick, has backward
 * ticks' own placements (0 for a step without tasks: pass -1). */
static inline int bp_ca_own_bwd(int64_t last_tick, int pp, size_t m)
{
	return last_tick >= (int64_t)m + pp - 1;
}

#endif
