/* refit.h: the profile-correction loop (planner/README.md "Data flow": `balplan report`
 * compares measured with predicted times and refits the profile): a replay's measured
 * micro-batch times (balplan.trace/v1) are regressed on the cost model's prediction split into
 * its attention, linear and collective parts, and the profile's tables are rescaled by the
 * fitted factors, so the next plan is made with times closer to the cluster's.
 *
 * The model, per micro-batch operation (one forward or backward of one micro-batch on one
 * rank's stage), in the plan's time units (measured / time_scale):
 *     measured ~ alpha * attention + beta * linear + collectives
 * fitted by weighted least squares (weights 1 / predicted^2, so every operation counts by its
 * relative error, as bp_fit_scheme does). Collectives are held at their predicted value: their
 * tables are not rescaled, so a profile whose attention tables are multiplied by alpha and
 * linear tables by beta predicts alpha * attention + beta * linear + collectives exactly
 * (table lookups are linear in the table values), up to a change of which CP rank is the
 * slowest. Called by cmd/cmd_report.c; no printing. */
#ifndef BP_REFIT_H
#define BP_REFIT_H

#include <stddef.h>

#include "bp.h"
#include "costmodel.h"
#include "profile.h"

/* Factors are clamped to this range: a profile scaled by more is a broken measurement. */
#define BP_REFIT_MIN 0.01
#define BP_REFIT_MAX 100.0

/* A predicted micro-batch time split the way bp_cost_microbatch composes it, in us: for the
 * slowest CP rank (the one whose layer time the TP/CP group waits for), its attention kernels
 * over all the stage's layers; its GEMMs over those layers plus the LM head on the last stage;
 * its TP all-reduces plus the CP all-gather (forward) or reduce-scatter (backward). */
struct bp_refit_parts {
	double attn, linear, coll;
};

/* Splits the forward and backward time of a micro-batch on one stage (0 <= stage < pp) into
 * its parts; attn + linear + coll equals bp_cost_microbatch's fwd[stage] / bwd[stage] to
 * rounding. mode must be SEQUENCE or DOCUMENT (a plan's resolved shard). Returns 0 or -1. */
int bp_refit_split(const struct bp_costmodel *cm, const struct bp_span *spans, size_t n,
		   enum bp_shard mode, int stage, struct bp_refit_parts *fwd,
		   struct bp_refit_parts *bwd, struct bp_error *err);

/* One observation: the predicted parts (plan units) and the measured time divided by the
 * trace's time_scale. Observations with a zero prediction carry no information and are
 * skipped. */
struct bp_refit_obs {
	struct bp_refit_parts pred;
	double measured;
};

struct bp_refit {
	double alpha;   /* attention tables are multiplied by it */
	double beta;    /* linear tables are multiplied by it */
	int common;     /* 1: attention and linear could not be told apart (no op with
			 * attention, none with linear time, or every op with the same ratio of
			 * the two): one common factor alpha = beta was fitted */
	int clamped;    /* 1: a factor hit [BP_REFIT_MIN, BP_REFIT_MAX] (the other refitted) */
	size_t nused;   /* observations with a nonzero prediction */
};

/* Fits alpha and beta over n observations. Fails (-1) when no observation has a predicted
 * attention or linear time. */
int bp_refit_fit(const struct bp_refit_obs *obs, size_t n, struct bp_refit *out,
		 struct bp_error *err);

/* alpha * attn + beta * linear + coll: what the refit profile predicts for these parts. */
double bp_refit_predict(const struct bp_refit *f, const struct bp_refit_parts *p);

/* Makes the refit profile: a copy of in (through the profile codec, so it is what in's
 * canonical file holds) with every attention table x alpha, every linear table x beta,
 * collective tables and memory constants unchanged, the T(l,P) fits recomputed on the new
 * tables (bp_fit_scheme up to the largest q of the scheme's attention grid), kind "measured"
 * (the codec knows only measured and analytic; a refit profile is derived from measurements)
 * and name "refit-<in's name>" (kept as it is when it already starts so; never "analytic...",
 * which would make front ends regenerate the analytic profile instead of reading it). out
 * must be initialised; it is replaced on success and released on failure. The tables of out
 * are rounded as its canonical file holds them. */
int bp_refit_profile(const struct bp_profile *in, const struct bp_refit *f,
		     struct bp_profile *out, struct bp_error *err);

#endif
