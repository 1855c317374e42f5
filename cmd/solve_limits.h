/* solve_limits.h: what a `balplan solve` request costs, priced from its inputs alone before
 * anything is drawn or planned (cmd_solve_limits.c): the planning limits (cmdutil.h
 * LIMIT_TIME_S, LIMIT_MEM_GIB) are checked against this price, one method at a time. */
#ifndef BP_SOLVE_LIMITS_H
#define BP_SOLVE_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "method.h"
#include "plan.h"

/* A request as solve reads it. */
struct solve_request {
	const struct bp_dataset *ds;
	int64_t max_tokens;
	int64_t tokens_per_step, docs_per_step; /* one of them: docs_per_step 0 = by tokens */
	int64_t gpus, tp, cp, pp, dp;
	int layers; /* the model's; 0: not known before the profile is read */
	const struct bp_param *params; /* every --param given (a method reads the ones it takes) */
	size_t nparams;
	int64_t inputs; /* items of the method's input known up front (plan/method.h
			 * bp_price_req): the strategies in --strategies or proposed; 0: none
			 * or not made yet */
	int inputs_made; /* the front end makes the inputs (hydraulis's proposal): its work is
			  * priced with them */
	int64_t profile_bytes; /* --profile's size in bytes; 0: the analytic profile */
};

/* A method's price for the request. Seconds are instructions over SOLVE_INSTR_PER_S. */
struct solve_price {
	double docs, mbs;  /* per step: documents drawn, micro-batches (at least pp x dp) */
	double s_step;     /* planning time per step: s_common + s_own */
	double s_common;   /* per step, what every method pays: draw, plan, predict */
	double s_own;      /* per step, the method's own work (its search, trials, solver) */
	double s_once;     /* once per run: the method's setup and the request's profile */
	double mem_step;   /* bytes per step the plan holds */
	double mem_once;   /* bytes the method holds for the run (its scratch, tables) */
	int pipes_dominate; /* the empty-pipeline terms are the largest of s_common, mem_step */
	int64_t trials;    /* hydraulis: dispatch trials per candidate and step */
	int64_t candidates; /* hydraulis: candidate strategies priced */
	enum bp_price_grows grows; /* what the method's own work grows with (its message) */
};

/* The machine constant: instructions (valgrind's Ir) per second of planning. */
#define SOLVE_INSTR_PER_S 4.0e9

/* Prices one method m for request r: every method's terms here, its own by its row's price
 * hook (plan/method.h). */
void solve_price(const struct bp_method *m, const struct solve_request *r,
		 struct solve_price *p);

/* The strategies in a strategies file, for the price of a method whose input they are
 * (BP_INPUT_STRATEGIES); 0 when it cannot be read here
 * (standard input, or an error the reader reports later). */
int64_t solve_count_strategies(const char *path);

#endif
