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
 * max-tokens), W an ILP's work budget (ilp_work_limit million units). Per step, every method:
 * 8,000 D + 2,000 M pp + 5,000 dp (draw, plan, predict), memory 2 KiB a document, 1 KiB a
 * micro-batch stage and 2 KiB a pipeline; once: 28 M (the analytic profile), 4,000 dp + 20
 * dp^2 (a cost model per pipeline, each counting its peers). A method's own work is its
 * row's price hook (plan/method.h struct bp_method `price`), beside its fit in its file under
 * planner/methods/: fixed (4,500 D + 35 D mb0 window), wlb (5,000 D), ffd, bfd and multipack
 * (100 D log2 D, methods/methods.c), kk, fixed-ilp and wlb-ilp (GLPK's budget at 30
 * instructions a work unit), hydraulis, flexsp, distca, sparsebalance and sb-lbb; plain has
 * none.
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

/* A profile file (--profile) instead of the analytic one: reading it and fitting its launch
 * model (planner/model/costmodel.c) take about 2,000-2,300 instructions a byte (measured:
 * 120 KB llama3-8b and 73 KB wlb-550m H100 profiles, 0.27 G and 0.13 G over the analytic
 * profile's start), and a measured profile's attention tables make every cost model call
 * dearer: the per-step terms every method pays grew 2.0-2.5x (plain, wlb, kk at 64-1,024
 * GPUs, 2026-11-27 callgrind counts of `-n 1` and `-n 3`). A file is priced as measured. */
#define I_PROFILE_BYTE 2.5e3
#define PROFILE_STEP_FACTOR 2.5

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

void solve_price(const struct bp_method *m, const struct solve_request *r,
		 struct solve_price *p)
{
	memset(p, 0, sizeof(*p));
	double pp = (double)r->pp, dp = (double)r->dp;
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
	double f = r->profile_bytes > 0 ? PROFILE_STEP_FACTOR : 1.0;
	double id = f * I_DOC * d, im = f * I_MB_STAGE * p->mbs * pp, ip = f * I_PIPE * dp;
	p->mem_step = md + mm + mp;
	p->pipes_dominate = mp > md && mp > mm && ip > id && ip > im;
	/* the method's own (its row's price hook) on top of every method's setup */
	struct bp_price own = {.once = I_START + I_PROFILE_BYTE * (double)r->profile_bytes +
				       I_PIPE_ONCE * dp + I_PIPE_PAIR * dp * dp};
	if (m->price) {
		struct bp_price_req q = {
			.docs = d, .tokens = tokens, .mb0 = mb0, .long_share = long_share,
			.max_tokens = r->max_tokens, .gpus = r->gpus, .tp = r->tp, .cp = r->cp,
			.pp = r->pp, .dp = r->dp, .layers = r->layers, .params = r->params,
			.nparams = r->nparams, .inputs = r->inputs,
			.inputs_made = r->inputs_made,
			.instr_per_s = SOLVE_INSTR_PER_S,
		};
		m->price(&q, &own);
	}
	p->trials = own.trials;
	p->candidates = own.candidates;
	p->mem_once = own.mem_once;
	p->grows = own.grows;
	p->s_common = (id + im + ip) / SOLVE_INSTR_PER_S;
	p->s_own = own.own / SOLVE_INSTR_PER_S;
	p->s_step = p->s_common + p->s_own;
	p->s_once = own.once / SOLVE_INSTR_PER_S;
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
