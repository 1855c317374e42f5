/* cmd_solve_limits.c: the price of a `balplan solve` request, one method at a time
 * (solve_limits.h), from its inputs alone: the dataset's mean drawn length, the tokens or
 * documents per step, the layout, the GPUs, --max-tokens and the method's parameters.
 *
 * Planning time is counted in instructions (valgrind's Ir: `valgrind --tool=callgrind
 * --callgrind-out-file=/dev/null balplan solve -q ...` prints "Collected : N") and turned into
 * seconds by one machine constant, SOLVE_INSTR_PER_S. Every cost below is a fit to such
 * counts of `balplan solve -q -m METHOD -n 1` and `-n 3` (the difference a step, the rest
 * once) over 64 to 4,096 GPUs, tp/cp/pp 8/2/4, 8/1/4 and 8/1/1, 0.5M to 33M tokens or 20,000
 * documents per step, synthetic-longtail, slimpajama-c4 and tiny-uniform (RelWithDebInfo,
 * 2026-11-27), rounded up: a price is meant to be at most a few times above the count and
 * never far below it (tests/scripts/test-cost-guard checks it over every method and sizes).
 * D is the documents per step, M the micro-batches (at least pp x dp), mb0 = ceil(tokens /
 * max-tokens), W an ILP's work budget (ilp_work_limit million units). Per step:
 *   every method: 8,000 D + 2,000 M pp + 5,000 dp (draw, plan, predict), memory 2 KiB a
 *     document, 1 KiB a micro-batch stage and 2 KiB a pipeline; once: 28 M (the analytic
 *     profile), 4,000 dp + 20 dp^2 (a cost model per pipeline, each counting its peers)
 *   fixed: 4,500 D + 35 D mb0 window (costliest first into the least loaded window)
 *   wlb: 5,000 D; ffd, bfd, multipack: 100 D log2 D; plain: nothing more
 *   kk: 40 D k log2 k (k = mb0 bins) times the Karmarkar-Karp runs: one more each time its
 *     repair finds no room and a micro-batch is added, 2 + 100 x the share of documents of
 *     at least max-tokens / 2, at most 9 (5-6 at 4K context)
 *   fixed-ilp, wlb-ilp: fixed's or wlb's greedy, and where D mb0 window^2 <= 2 ilp_max_vars
 *     GLPK's budget: 30 instructions a work unit (14-24 measured), W per window; at most
 *     ilp_time_limit_s, which ends the run
 *   hydraulis: C D (150 trials + 25,000) over the C candidates (--strategies, or 32 when
 *     proposed: 30 at solve's default tokens per step, up to 98 in our scans), their
 *     dispatch ILP (30 W, W 5 M) where D max(2, GPUs/8) <= 2 ilp_max_vars (a candidate holds GPUs/8
 *     pipelines or more, a short document fits them all); once 1e8 + 2e6 C
 *     and, proposed, the proposal's DP, 3e8 + 2,500 N_u^2 L_b (units and length buckets of
 *     bp_hyd_default_steps; 0.2-11.6 G measured at 16-4,096 GPUs); memory 4 bytes a trial
 *     and document (its shuffles, up to 2^24)
 *   flexsp: W (60 + 1.5 u) + 1e5 u^2 + 5,000 D over u = dp units (its MILP: 62 a work unit
 *     at 8 units, 149 at 64), at most ilp_time_limit_s; once 2e8
 *   distca: D pp (40,000 + 10,000 log2 S) over S = dp pp servers (its scheduler per tick
 *     and nano-batch); once 3 S^2 (servers matched to ranks)
 *   sparsebalance, sb-lbb: layers (3,500 D + 200 pp B) + 4 D^2, B = tokens / sb_block + D
 *     blocks (the per-layer tuning and the batching, quadratic in D: 393 M a step at 4,096
 *     one-token documents, 2.3 G at 16,384), and the packing of a method named by
 *     sb_batching.
 * The machine constant: the same runs natively take 6.3e9 (fixed's scan) to 1.3e10
 * (hydraulis's proposal) instructions per second of user CPU on this 2-core machine when
 * idle, and about a third of that in wall time under its usual load; SOLVE_INSTR_PER_S is
 * 4e9. Memory beyond the per-step terms was measured as peak RSS: only hydraulis's trials
 * hold much. */
#include "solve_limits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmdutil.h"
#include "hyd.h"
#include "hyd_json.h"
#include "jsonutil.h"

#define MEM_PER_DOC 2048.0
#define MEM_PER_MB_STAGE 1024.0
#define MEM_PER_PIPE 2048.0

/* every method, in instructions */
#define I_START 28e6
#define I_PIPE_ONCE 4e3
#define I_PIPE_PAIR 20.0
#define I_DOC 8e3
#define I_MB_STAGE 2e3
#define I_PIPE 5e3
/* the methods' own */
#define I_FIXED_DOC 4.5e3
#define I_FIXED_DOC_MB 35.0
#define I_WLB_DOC 5e3
#define I_SORT_DOC 100.0
#define I_KK_MERGE 40.0
#define I_ILP_WORK 30.0
#define I_HYD_TRIAL 150.0
#define I_HYD_DOC 25e3
#define I_HYD_ONCE 1e8
#define I_HYD_STRATEGY 2e6
#define I_HYD_PROPOSE 3e8
#define I_HYD_PROPOSE_CELL 2.5e3
#define HYD_PROPOSED 32 /* candidates assumed when proposed */
#define I_FSP_WORK 60.0
#define I_FSP_WORK_UNIT 1.5
#define I_FSP_UNIT_PAIR 1e5
#define I_FSP_DOC 5e3
#define I_FSP_ONCE 2e8
#define I_CA_DOC_STAGE 40e3
#define I_CA_DOC_STAGE_LOG 10e3
#define I_CA_SERVER_PAIR 3.0
#define I_SB_DOC_LAYER 3.5e3
#define I_SB_BLOCK_STAGE_LAYER 200.0
#define I_SB_DOC_PAIR 4.0

/* Mean drawn length with documents cut at max_tokens (truncation; what a draw spends), and
 * the share of documents at least half of max_tokens long once cut (*long_share). */
static double mean_drawn(const struct bp_dataset *ds, int64_t max_tokens, double *long_share)
{
	double n = 0, t = 0, nl = 0, half = (double)max_tokens / 2.0;
	if (ds->bins)
		for (size_t i = 0; i < ds->nbins; i++) {
			const struct bp_bin *b = &ds->bins[i];
			if (b->count <= 0)
				continue;
			n += (double)b->count;
			t += (double)b->count * fmin((double)b->tokens / (double)b->count,
						      (double)max_tokens);
			double lo = (double)b->lo, hi = (double)b->hi;
			if (lo >= half)
				nl += (double)b->count;
			else if (hi >= half)
				nl += (double)b->count * (hi - half + 1.0) / (hi - lo + 1.0);
		}
	else
		for (size_t i = 0; i < ds->nlengths; i++) {
			int64_t l = ds->lengths[i] < max_tokens ? ds->lengths[i] : max_tokens;
			n += 1;
			t += (double)l;
			nl += (double)l >= half;
		}
	*long_share = n > 0 ? nl / n : 0.0;
	return n > 0 && t > 0 ? t / n : 1.0;
}

/* A --param's value as a number, or def when absent or not a number (the method's own
 * reader reports a bad value before anything runs). */
static double param(const struct solve_request *r, const char *key, double def)
{
	for (size_t i = 0; i < r->nparams; i++)
		if (!strcmp(r->params[i].key, key)) {
			double v;
			if (bp_parse_double(r->params[i].value, &v, key, NULL) == 0 && isfinite(v))
				return v;
		}
	return def;
}

static const char *param_text(const struct solve_request *r, const char *key)
{
	for (size_t i = 0; i < r->nparams; i++)
		if (!strcmp(r->params[i].key, key))
			return r->params[i].value;
	return NULL;
}

/* One GLPK search within the method's budget: instructions. */
static double ilp_search(const struct solve_request *r, double work_m_default,
			 double time_default)
{
	double w = param(r, "ilp_work_limit", work_m_default) * 1e6;
	double tl = param(r, "ilp_time_limit_s", time_default);
	return fmin(I_ILP_WORK * w, tl * SOLVE_INSTR_PER_S);
}

/* The packing ILP of fixed-ilp and wlb-ilp where the step's binaries fit ilp_max_vars
 * (doubled: a step may draw fewer documents than the mean says), per step. */
static double ilp_pack(const struct solve_request *r, double d, double mb0, double window)
{
	double mv = param(r, "ilp_max_vars", 10000);
	if (mv > 0 && d * window * mb0 * window > 2.0 * mv)
		return 0.0;
	return ilp_search(r, BP_ILP_WORK_LIMIT_M, 300.0) / window;
}

/* Instructions per step of a packing method's own work (fixed, wlb, kk, ...; 0 for one
 * without). */
static double packing_own(const char *name, const struct solve_request *r, double d,
			  double mb0, double long_share)
{
	double window = fmax(1.0, param(r, "window", 1));
	if (!strcmp(name, "fixed") || !strcmp(name, "fixed-ilp"))
		return I_FIXED_DOC * d + I_FIXED_DOC_MB * d * mb0 * window;
	if (!strcmp(name, "wlb") || !strcmp(name, "wlb-ilp"))
		return I_WLB_DOC * d;
	if (!strcmp(name, "ffd") || !strcmp(name, "bfd") || !strcmp(name, "multipack"))
		return I_SORT_DOC * d * log2(d + 2.0);
	if (!strcmp(name, "kk")) {
		double dp = (double)r->dp, k = dp * ceil(mb0 / dp);
		double runs = 2.0 + fmin(7.0, 100.0 * long_share);
		return I_KK_MERGE * d * k * log2(k + 1.0) * runs;
	}
	return 0.0;
}

void solve_price(const struct bp_method *m, const struct solve_request *r,
		 struct solve_price *p)
{
	memset(p, 0, sizeof(*p));
	const char *name = m->name;
	double pp = (double)r->pp, dp = (double)r->dp, gpus = (double)r->gpus;
	double long_share;
	double mean = mean_drawn(r->ds, r->max_tokens, &long_share);
	double tokens = r->docs_per_step ? (double)r->docs_per_step * mean
					 : (double)r->tokens_per_step;
	double d = r->docs_per_step ? (double)r->docs_per_step
				    : ceil((double)r->tokens_per_step / mean) + 1;
	double mb0 = ceil(tokens / (double)r->max_tokens);
	p->docs = d;
	p->mbs = mb0 + pp * dp;
	double md = MEM_PER_DOC * d, mm = MEM_PER_MB_STAGE * p->mbs * pp, mp = MEM_PER_PIPE * dp;
	double id = I_DOC * d, im = I_MB_STAGE * p->mbs * pp, ip = I_PIPE * dp;
	p->mem_step = md + mm + mp;
	p->pipes_dominate = mp > md && mp > mm && ip > id && ip > im;
	double once = I_START + I_PIPE_ONCE * dp + I_PIPE_PAIR * dp * dp;
	double own = packing_own(name, r, d, mb0, long_share);
	if (!strcmp(name, "fixed-ilp"))
		own += ilp_pack(r, d, mb0, fmax(1.0, param(r, "window", 1)));
	else if (!strcmp(name, "wlb-ilp"))
		own += ilp_pack(r, d, mb0, 1.0);
	else if (!strcmp(name, "hydraulis")) {
		double c = r->strategies > 0 ? (double)r->strategies : HYD_PROPOSED;
		double trials = param(r, "trials", 100);
		double mv = param(r, "ilp_max_vars", 400);
		p->trials = (int64_t)trials;
		p->candidates = (int64_t)c;
		own = c * d * (I_HYD_TRIAL * trials + I_HYD_DOC);
		if (mv > 0 && d * fmax(2.0, gpus / 8.0) <= 2.0 * mv)
			own += c * ilp_search(r, 5, 300.0);
		once += I_HYD_ONCE + I_HYD_STRATEGY * c + c * I_PIPE_PAIR * (gpus / 8) * (gpus / 8);
		if (r->strategies <= 0) {
			int gs = 1;
			int64_t ls = 1;
			bp_hyd_default_steps((int)r->gpus, r->max_tokens, &gs, &ls);
			double nu = floor(gpus / (double)gs), lb = ceil((double)r->max_tokens / ls);
			once += I_HYD_PROPOSE + I_HYD_PROPOSE_CELL * nu * nu * lb;
		}
		p->mem_once = 4.0 * fmin(trials * d, 16777216.0) + 128.0 * d * c;
	} else if (!strcmp(name, "flexsp")) {
		double w = param(r, "ilp_work_limit", BP_ILP_WORK_LIMIT_M) * 1e6;
		double tl = param(r, "ilp_time_limit_s", 300.0);
		own = fmin(w * (I_FSP_WORK + I_FSP_WORK_UNIT * dp), tl * SOLVE_INSTR_PER_S) +
		      I_FSP_UNIT_PAIR * dp * dp + I_FSP_DOC * d;
		once += I_FSP_ONCE;
	} else if (!strcmp(name, "distca")) {
		double servers = dp * pp;
		own = d * pp * (I_CA_DOC_STAGE + I_CA_DOC_STAGE_LOG * log2(servers + 1.0));
		once += I_CA_SERVER_PAIR * servers * servers;
	} else if (!strcmp(name, "sparsebalance") || !strcmp(name, "sb-lbb")) {
		double layers = r->layers > 0 ? (double)r->layers : 128.0;
		double blocks = tokens / fmax(1.0, param(r, "sb_block", 256)) + d;
		own = layers * (I_SB_DOC_LAYER * d + I_SB_BLOCK_STAGE_LAYER * pp * blocks) +
		      I_SB_DOC_PAIR * d * d;
		const char *b = param_text(r, "sb_batching");
		if (b)
			own += packing_own(b, r, d, mb0, long_share);
	}
	p->s_common = (id + im + ip) / SOLVE_INSTR_PER_S;
	p->s_own = own / SOLVE_INSTR_PER_S;
	p->s_step = p->s_common + p->s_own;
	p->s_once = once / SOLVE_INSTR_PER_S;
}

static int count_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_hyd_set_from_json(out, root, err);
}

int64_t solve_count_strategies(const char *path)
{
	struct bp_error err = {""};
	struct bp_hyd_set set;
	char *buf = NULL;
	size_t len = 0;
	int64_t n = 0;
	if (!path || !strcmp(path, "-"))
		return 0;
	bp_hyd_set_init(&set);
	if (cmd_read_file(path, &buf, &len, &err) == 0 &&
	    bp_json_parse_text(buf, len, count_cb, &set, &err) == 0)
		n = (int64_t)set.n;
	free(buf);
	bp_hyd_set_release(&set);
	return n;
}
