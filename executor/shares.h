/* shares.h: how the engine spreads an operation's predicted time over the primitives of its
 * layer loop (executor/README.md "Primitives"). Called by engine.c per op (1F1B and ticks) and by
 * tests/unit/test_exec_shares.c.
 *
 * bp_cost_mb (planner/model/costmodel.h) prices a micro-batch on a stage in parts: attention,
 * GEMMs, TP all-reduces, CP collectives, LM head. The engine's layer loop runs, per layer,
 * the QKV GEMM, the CP all-gather (backward: reduce-scatter), attention, the O GEMM, a TP
 * all-reduce, the FFN GEMMs and a second TP all-reduce; the LM head once on the last stage.
 * The shares give each of those primitives its part: GEMMs split by their FLOPs per token
 * (QKV h (h + 2 kv_heads d), O h^2, FFN (2 or 3) h ffn), the TP part halved, attention per
 * layer (sparse attention per layer's budget k[l], dense evenly). Invariant: the shares of an
 * op add up to the target time the caller gives (the plan's op time), whatever profile the
 * parts came from: the parts only say how to split it. */
#ifndef BP_EXEC_SHARES_H
#define BP_EXEC_SHARES_H

#include "bp.h"
#include "costmodel.h"
#include "plan.h"

/* One layer's primitives, us (unscaled): in forward order. tp_a follows the O GEMM forward
 * (the QKV input gradient backward), tp_b the FFN (the FFN input gradient backward). */
struct bp_layer_share {
	double qkv, cp, attn, o, tp_a, ffn, tp_b;
};

struct bp_op_shares {
	int layers;        /* the stage's */
	int first_layer;   /* the model layer index of the stage's first layer */
	double lm;         /* the LM head (last stage), 0 elsewhere */
	double total;      /* everything above and below: = the target */
	struct bp_layer_share *l; /* [layers]; caller-owned storage */
};

/* The shares of micro-batch mb on stage `stage` of the pipeline cm prices, forward (bwd 0)
 * or backward, scaled to add up to target_us. out->l must hold cm->stage_layers[stage]
 * entries (the caller's). A target with no parts to split (all zero) goes to the GEMMs
 * evenly. 0, or -1 with err when the cost model fails. */
int bp_op_shares(const struct bp_costmodel *cm, const struct bp_mb *mb, int stage, int bwd,
		 double target_us, struct bp_op_shares *out, struct bp_error *err);

/* The fractions of a layer's GEMM time that go to QKV, O and FFN (their FLOPs per token on
 * one TP shard: the shards divide all three by tp alike). f has three entries. */
void bp_gemm_fractions(const struct bp_model *m, double f[3]);

#endif
