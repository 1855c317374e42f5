/* cmd_propose.c: `balplan propose`: Hydraulis's data-distribution-aware strategy proposal
 * (Sec. 7, Eq. 4): reads a dataset, a profile (or makes the analytic one), a GPU count and a
 * model; prints the scheme space (MaxLen, UtilLen, the fitted T(l, P) and its error) and the
 * candidate strategies with their MaxLen and expected time; writes a strategies file
 * (balplan.strategies/v1). Also the candidates `balplan solve -m hydraulis` uses
 * (cmd_hyd_candidates: a file, or the same proposal on the fly). */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd_propose.h"
#include "cmd_workload.h"
#include "cmdutil.h"
#include "commands.h"
#include "costmodel.h"
#include "hyd_json.h"
#include "jsonutil.h"
#include "strbuf.h"

/* bp_sb_fill's writer: bp_hyd_strategy_describe, whole however many groups. */
static void fill_strategy(const void *st, char *buf, size_t n)
{
	bp_hyd_strategy_describe(st, buf, n);
}

struct prop_opts {
	int gpu_step;       /* 0: the default for the cluster */
	int64_t len_step;   /* 0: the default */
	int max_pp;
	int64_t align;
	double theta;
	int relaxed, warmup, keep_dominated;
	double min_prob, relax_slack;
	int indivisible;
	const char *schemes; /* restrict the space ("8x1,4x2"), or NULL */
};

static const struct prop_opts prop_defaults = {0, 0, 8, 128, 0.85, 1, 0, 0, 1e-3, 0.1, 1, NULL};

/* Parses "8x1,4x2" into schemes; -1 with err. */
static int parse_schemes(const char *s, struct bp_scheme *out, size_t cap, size_t *n,
			 struct bp_error *err)
{
	*n = 0;
	for (const char *p = s; *p;) {
		size_t len = strcspn(p, ",");
		char part[32], *x;
		int64_t tp = 0, pp = 0;
		if (!len || len >= sizeof(part))
			return bp_errorf(err, "--schemes '%s': '%s' is not TPxPP", cmd_cut(s),
					 cmd_cut_n(p, len));
		memcpy(part, p, len);
		part[len] = 0;
		/* TP and PP each by bp_parse_int64 (the one number grammar, overflow checked) */
		x = strchr(part, 'x');
		if (x)
			*x = 0;
		if (!x || bp_parse_int64(part, &tp, "tp", NULL) < 0 ||
		    bp_parse_int64(x + 1, &pp, "pp", NULL) < 0) {
			if (x)
				*x = 'x';
			return bp_errorf(err, "--schemes '%s': '%s' is not TPxPP", cmd_cut(s), part);
		}
		if (tp < 1 || pp < 1 || tp > (1 << 20) || pp > (1 << 20))
			return bp_errorf(err, "--schemes '%s': '%lldx%lld' has a degree outside "
					 "[1, 1048576]", cmd_cut(s), (long long)tp, (long long)pp);
		if (*n == cap)
			return bp_errorf(err, "--schemes lists more than %zu schemes", cap);
		out[(*n)++] = (struct bp_scheme){(int)tp, 1, (int)pp};
		p += len + (p[len] == ',');
	}
	if (!*n)
		return bp_errorf(err, "--schemes names no scheme");
	return 0;
}

/* A proposal's request: the schemes on a profile, the dataset, the GPUs and the step. */
struct prop_req {
	const struct bp_profile *prof;
	const struct bp_scheme *sc;
	size_t nsc;
	const struct bp_dataset *ds;
	const char *ds_sha;
	int gpus;
	int64_t max_tokens, tps, dps;
	enum bp_overlen ov;
	const struct prop_opts *po;
};

/* The DP's options (planner/blocks/hyd.h) of a request. */
static struct bp_hyd_space_opts space_opts(const struct prop_req *q)
{
	const struct prop_opts *po = q->po;
	return (struct bp_hyd_space_opts){
		{q->gpus, po->gpu_step, po->relaxed, po->warmup, po->keep_dominated, po->min_prob,
		 po->relax_slack, po->indivisible},
		po->len_step, po->align, po->theta};
}

/* The proposal: S^ on the request's profile with its options, and the dataset's names. */
static int propose(const struct prop_req *q, struct bp_hyd_set *set, struct bp_error *err)
{
	struct bp_hyd_space_opts o = space_opts(q);
	if (bp_hyd_propose_profile(q->prof, q->sc, q->nsc, q->ds, q->max_tokens, q->ov, q->tps,
				   q->dps, &o, set, err) < 0)
		return -1;
	snprintf(set->dataset, sizeof(set->dataset), "%s", q->ds->name);
	snprintf(set->dataset_sha, sizeof(set->dataset_sha), "%s", q->ds_sha);
	return 0;
}

/* The distinct schemes of the request and of every candidate (the plan's layouts). */
static size_t plan_schemes(const struct bp_scheme *req, const struct bp_hyd_set *set,
			   struct bp_scheme *out, size_t cap)
{
	size_t n = 0;
	out[n++] = *req;
	for (size_t i = 0; i < set->n; i++)
		for (size_t g = 0; g < set->s[i].ng; g++) {
			struct bp_scheme x = {set->s[i].g[g].tp, 1, set->s[i].g[g].pp};
			size_t j = 0;
			while (j < n && memcmp(&out[j], &x, sizeof(x)))
				j++;
			if (j == n && n < cap)
				out[n++] = x;
		}
	return n;
}

static int set_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_hyd_set_from_json(out, root, err);
}

/* The candidates of a strategies file, each checked to fit the cluster and the model
 * (Sec. 5.1's D_T, D_P) where they are known: the profile's, else the presets'. sp is the
 * profile read, if any. An exit status, printed. */
static int cands_read(const struct cmd_hyd_req *r, struct bp_hyd_set *set,
		      struct bp_profile *sp, char sha[65])
{
	struct bp_error err;
	char *buf = NULL;
	size_t len = 0;
	if (cmd_read_file(r->strategies, &buf, &len, &err) < 0 ||
	    bp_json_parse_text(buf, len, set_cb, set, &err) < 0) {
		free(buf);
		return cmd_error("cannot read strategies '%s': %s", r->strategies, err.text);
	}
	free(buf);
	const struct bp_model *m = NULL;
	struct bp_model rm;
	int gpn = 0;
	if (r->profile) {
		if (cmd_load_profile(r->profile, sp, sha, &err) < 0)
			return cmd_error("%s", err.text);
		m = &sp->model;
		gpn = sp->hw.gpus_per_node;
	} else if (cmd_resolve_model(r->model, &rm, &err) == 0 && bp_gpu_preset(r->gpu)) {
		m = &rm;
		gpn = bp_gpu_preset(r->gpu)->gpus_per_node;
	}
	for (size_t i = 0; m && i < set->n; i++)
		if (bp_hyd_strategy_check(&set->s[i], r->gpus, gpn, m, &err) < 0) {
			bp_error_prefix(&err, "strategies '%s'", r->strategies);
			return cmd_error("%s", err.text);
		}
	return EXIT_OK;
}

/* The candidates proposed on the fly with the default options, on the profile given or the
 * analytic one of the space (sp). An exit status, printed. */
static int cands_propose(const struct cmd_hyd_req *r, struct bp_hyd_set *set,
			 struct bp_profile *sp, char sha[65])
{
	struct bp_error err;
	struct bp_scheme sc[64];
	size_t nsc;
	if (r->profile) {
		if (cmd_load_profile(r->profile, sp, sha, &err) < 0)
			return cmd_error("%s", err.text);
		nsc = bp_hyd_space(&sp->model, sp->hw.gpus_per_node, r->gpus, prop_defaults.max_pp,
				   sc, 64);
	} else {
		struct bp_model rm;
		const struct bp_gpu *g = bp_gpu_preset(r->gpu);
		if (cmd_resolve_model(r->model, &rm, &err) < 0)
			return cmd_error("%s", err.text);
		if (!g)
			return cmd_error("unknown GPU '%s' (see 'balplan presets')", r->gpu);
		nsc = bp_hyd_space(&rm, g->gpus_per_node, r->gpus, prop_defaults.max_pp, sc, 64);
		if (cmd_analytic_profile(r->gpu, r->model, sc, nsc, r->max_tokens, sp, sha,
					 &err) < 0)
			return cmd_error("%s", err.text);
	}
	size_t k = 0;
	for (size_t i = 0; i < nsc; i++) /* what the profile can price */
		if (!bp_profile_check_scheme(sp, sc[i].tp, 1, sc[i].pp, 1, sp->hw.gpus_per_node,
					     NULL))
			sc[k++] = sc[i];
	const struct prop_req q = {sp, sc, k, r->ds, r->ds_sha, r->gpus, r->max_tokens,
				   r->tokens_per_step, r->docs_per_step, r->overlen,
				   &prop_defaults};
	if (propose(&q, set, &err) < 0) {
		bp_error_prefix(&err, "cannot propose strategies");
		return cmd_error("%s", err.text);
	}
	return EXIT_OK;
}

/* The profile hydraulis plans with: the file, or the analytic profile of the request's
 * scheme and every candidate's schemes. An exit status, printed. */
static int cands_profile(const struct cmd_hyd_req *r, const struct bp_hyd_set *set,
			 struct bp_profile *prof, char sha[65])
{
	struct bp_error err;
	if (r->profile) {
		if (cmd_load_profile(r->profile, prof, sha, &err) < 0)
			return cmd_error("%s", err.text);
		return EXIT_OK;
	}
	/* one more than the limit, to tell a set that passes it */
	struct bp_scheme sc[CMD_PLAN_MAX_SCHEMES + 1];
	size_t n = plan_schemes(&r->request, set, sc, BP_ARRAY_LEN(sc));
	if (n > CMD_PLAN_MAX_SCHEMES)
		return cmd_error("the plan's layouts use more than %d schemes (the request's and "
				 "the candidate strategies'), which check, simulate and balexec "
				 "cannot price with the analytic profile; give fewer strategies "
				 "or --profile", CMD_PLAN_MAX_SCHEMES);
	if (cmd_analytic_profile(r->gpu, r->model, sc, n, r->max_tokens, prof, sha, &err) < 0)
		return cmd_error("%s", err.text);
	return EXIT_OK;
}

int cmd_hyd_candidates(const struct cmd_hyd_req *r, struct bp_hyd_set *set,
		       struct bp_profile *prof, char sha[65])
{
	struct bp_profile sp;
	bp_profile_init(&sp);
	int rc = r->strategies ? cands_read(r, set, &sp, sha) : cands_propose(r, set, &sp, sha);
	if (rc == EXIT_OK)
		rc = cands_profile(r, set, prof, sha);
	bp_profile_release(&sp);
	return rc;
}

/* ---- balplan propose ---- */

/* Planning limits of the proposal, checked before any of its tables is made (issue 27):
 * bp_hyd_propose_cost counts the DP's loops and bytes from the request's sizes (GPU units
 * N_u = gpus / gpu-step, length buckets L_b = max-tokens / len-step, the K schemes that hold
 * --align tokens, each scheme's MaxLen by pipelines) and an estimate over the limits is a
 * usage error naming the flag that asked for it. The limits are a quarter of solve's
 * (cmd/cmd_solve.c LIMIT_TIME_S, LIMIT_MEM_GIB): the proposal is the prelude of a plan
 * (`solve -m hydraulis` runs it on the fly) and its default steps cost under 2 s and 2 MB at
 * any cluster size (at most 256 buckets and 512 units).
 *
 * Time = S_PER_ITER iters + S_PER_EVAL evals + S_PER_WALK walk + S_PER_HIST hist, the counts
 * of struct bp_hyd_cost (planner/blocks/hyd.h; for each scheme and run, iters = L_b
 * sum_n floor(n / mstep) plus N_u L_b heads, evals = sum_m F(m) (N_u - m + 1), walk <= sum_m
 * F(m)^2 / 2 with F(m) the buckets MaxLen(P, d(m)) holds; so O(K L_b N_u^2) + O(K N_u F^2)).
 * Fitted by least squares on the relative error of ten runs of `balplan propose -q --timing`
 * (Release build, synthetic-longtail, llama3-8b on H100, 16 schemes; user CPU seconds,
 * 2026-11-27, this 2-core machine shared with two other builds); the fit gives 4.4, 7.7 and
 * 1.5 ns and is within -15% .. +17% of every run, rounded up here by about 15-35%:
 *   --gpus 512 --gpu-step 1                         1.19 s  (iters 1.6e8, evals 6.7e7)
 *   --gpus 128 --len-step 256 -L 1M                 3.41 s  (iters 6.7e8, walk 1.7e8)
 *   --len-step 32 -L 256k                          10.01 s  (walk 4.6e9, iters 3.5e8)
 *   --no-relax --len-step 64 -L 256k                0.80 s  (walk 4.3e8)
 *   --len-step 64 -L 1M                             4.91 s  (iters 6.9e8, walk 1.1e9)
 *   --gpus 512 --gpu-step 1 -L 16k --len-step 64    8.78 s  (iters 6.6e8, evals 6.0e8)
 *   --gpus 256 --gpu-step 1 -L 64k --len-step 128   4.49 s  (walk 5.7e8, iters 3.3e8)
 *   --no-relax --len-step 16 -L 128k                8.58 s  (walk 6.6e9)
 *   --gpus 128 --len-step 64 -L 128k                7.18 s  (walk 2.5e9, iters 3.4e8)
 *   --gpus 2048 --gpu-step 2 -L 8k --len-step 128   8.11 s  (iters 7.4e8, evals 7.3e8)
 * and, beyond the limit, --len-step 16 -L 1M: 45.2 s (iters 2.7e9, walk 1.6e10 counted in
 * the DP itself; estimated 52 s). The histogram's visits were never measurable (a few ms at
 * most): 30 ns each, a log and three sums. Memory: the estimated bytes were 3-18% above the
 * peak RSS less the 4.4 MB of a small proposal in the same runs. */
#ifndef PROPOSE_LIMIT_S /* the fuzz targets set less: the sanitizers run the DP ~70x slower */
#define PROPOSE_LIMIT_S (LIMIT_TIME_S / 4)
#endif
#define PROPOSE_LIMIT_GIB (LIMIT_MEM_GIB / 4)
#define S_PER_ITER 5e-9
#define S_PER_EVAL 9e-9
#define S_PER_WALK 2e-9
#define S_PER_HIST 30e-9

/* Refuses a proposal whose estimated memory or time is over the limits (EXIT_USAGE); the
 * estimated seconds in *est_s. */
static int propose_guard(const struct prop_req *q, double *est_s)
{
	const struct prop_opts *po = q->po;
	struct bp_hyd_space_opts so = space_opts(q);
	struct bp_hyd_cost c;
	struct bp_error err;
	int gpus = q->gpus;
	int64_t max_tokens = q->max_tokens;
	if (bp_hyd_propose_cost(q->prof, q->sc, q->nsc, q->ds, max_tokens, &so, &c, &err) < 0)
		return cmd_error("cannot propose strategies: %s", err.text);
	const double gib = 1073741824.0;
	double secs = S_PER_ITER * c.iters + S_PER_EVAL * c.evals + S_PER_WALK * c.walk +
		      S_PER_HIST * c.hist;
	*est_s = secs;
	char subject[96], per[256];
	if (po->gpu_step && po->len_step)
		snprintf(subject, sizeof(subject), "--gpu-step %d with --len-step %lld",
			 po->gpu_step, (long long)po->len_step);
	else if (po->len_step)
		snprintf(subject, sizeof(subject), "--len-step %lld", (long long)po->len_step);
	else if (po->gpu_step)
		snprintf(subject, sizeof(subject), "--gpu-step %d", po->gpu_step);
	else
		snprintf(subject, sizeof(subject), "--gpus %d", gpus);
	snprintf(per, sizeof(per), "%zu GPU unit%s of %d GPU%s x %zu length bucket%s of %lld "
		 "token%s up to %lld x %zu scheme%s; raise --gpu-step or --len-step", c.units,
		 c.units == 1 ? "" : "s", c.gpu_step, c.gpu_step == 1 ? "" : "s", c.buckets,
		 c.buckets == 1 ? "" : "s", (long long)c.len_step, c.len_step == 1 ? "" : "s",
		 (long long)max_tokens, c.schemes, c.schemes == 1 ? "" : "s");
	if (c.bytes > PROPOSE_LIMIT_GIB * gib)
		return cmd_usage("propose", "%s is beyond the planning limits: an estimated %.1f GiB "
				 "of memory (limit %.0f GiB) for the proposal's tables of %s", subject,
				 c.bytes / gib, PROPOSE_LIMIT_GIB, per);
	if (secs > PROPOSE_LIMIT_S)
		return cmd_usage("propose", "%s is beyond the planning limits: an estimated %.0f s "
				 "of proposal (limit %.0f s) for %s", subject, secs, PROPOSE_LIMIT_S,
				 per);
	return EXIT_OK;
}

static void propose_usage(FILE *f)
{
	fprintf(f,
		"usage: balplan propose [options]\n\n"
		"Proposes Hydraulis's candidate strategies (Sec. 7, Eq. 4) for a dataset, a GPU\n"
		"count and a model: the DP over GPU counts and length intervals, its continuous\n"
		"relaxation and the rounding rule (plans/README.md \"Strategies files\"). Prints\n"
		"the scheme space (MaxLen, UtilLen, fitted T(l) = a l^2 + b l + c and its error)\n"
		"and the candidates; writes them for 'balplan solve -m hydraulis --strategies'.\n\n"
		"inputs:\n"
		"  -d, --dataset NAME|FILE  dataset preset or file [synthetic-longtail]\n"
		"      --jsonl-field KEY    token-count field of JSONL input [auto]\n"
		"  -p, --profile FILE       profile; without it an analytic one of the scheme\n"
		"                           space is made from --gpu and --model\n"
		CMD_WORKLOAD_HELP_GPU
		CMD_WORKLOAD_HELP_MODEL
		CMD_WORKLOAD_HELP_GPUS
		"  -L, --max-tokens N       context cap: the longest sequence [131072]\n"
		"      --tokens-per-step N  tokens per step, scales the expected times\n"
		"                           [3125 per GPU: Table 2's 200K on 64 GPUs]\n"
		CMD_WORKLOAD_HELP_UNITS
		"      --docs-per-step N    documents per step instead\n"
		"      --over-length MODE   truncate|drop documents over the cap [truncate]\n"
		"proposal:\n"
		"      --gpu-step N         the DP's GPU unit [1; gpus/256 above 256 GPUs]\n"
		"      --len-step N         the DP's length bucket [128 per 32K of context,\n"
		"                           times gpus/128 above 128 GPUs]\n"
		"      --max-pp N           largest PP in the space [8]\n"
		"      --schemes LIST       only these schemes, e.g. 8x1,4x1,8x3 (TPxPP)\n"
		"      --align N            MaxLen aligned down to N tokens [128]\n"
		"      --util-threshold X   UtilLen: efficiency X of the peak [0.85]\n"
		"      --no-relax           the integer DP only\n"
		"      --warmup             the code's interval cost (+ T(longest)(PP - 1), all\n"
		"                           over d) instead of Eq. 4's\n"
		"      --keep-dominated     keep strategies inside another candidate\n"
		"      --eq4                Eq. 4 as printed: an interval costs only W / d (by\n"
		"                           default at least PP T(longest), which one pipeline\n"
		"                           runs whole)\n"
		"      --min-prob P         skip lengths L with P(a step's longest <= L) < P\n"
		"                           [0.001; 0: every L, as the paper]\n"
		"      --relax-slack X      keep roundings within 1 + X of the best [0.1]\n"
		"output:\n"
		"  -o, --out FILE           write the strategies file ('-': standard output,\n"
		"                           and no tables)\n"
		"      --timing             print the proposal's planning time\n"
		"  -q, --quiet              print no tables\n\n"
		"limits: a proposal whose DP is estimated, from its GPU units, length buckets and\n"
		"schemes, to take over %.0f s or %.0f GiB is refused before it starts (exit 2).\n\n"
		"exit status: 0 ok, 1 data or runtime error, 2 usage error, 3 infeasible\n",
		PROPOSE_LIMIT_S, PROPOSE_LIMIT_GIB);
}

static void print_tables(const struct bp_hyd_set *set, const struct bp_profile *prof,
			 int gpus, const char *ds_name)
{
	printf("dataset %s, %d x %s, model %s, max %lld tokens, %lld tokens per step, GPU step "
	       "%d, length step %lld\n", ds_name, gpus, prof->hw.gpu, prof->model.name,
	       (long long)set->max_tokens, (long long)set->tokens_per_step, set->gpu_step,
	       (long long)set->len_step);
	printf("schemes: T(l) = a l^2 + b l + c, us per stage; MaxLen of one pipeline, the\n"
	       "optimizer sharded over the scheme's pipelines (replica) or over all GPUs (full)\n");
	printf("  %-8s %5s %9s %9s %8s %12s %10s %9s %8s\n", "scheme", "gpus", "MaxLen",
	       "full", "UtilLen", "a", "b", "c", "fit err");
	for (size_t i = 0; i < set->nschemes; i++) {
		const struct bp_hyd_sinfo *s = &set->schemes[i];
		char name[24];
		snprintf(name, sizeof(name), "<%d,%d>", s->tp, s->pp);
		printf("  %-8s %5d %9lld %9lld %8lld %12.4e %10.5f %9.2f %7.2f%%\n", name,
		       s->tp * s->pp, (long long)s->max_len, (long long)s->max_len_full,
		       (long long)s->util_len, s->a, s->b, s->c, 100.0 * s->fit_err);
	}
	printf("candidates: expected propagation time per step (Eq. 4; rounded relaxation)\n");
	printf("  %3s  %-34s %5s %8s %15s %12s  %s\n", "#", "strategy", "gpus", "MaxLen",
	       "for L", "expected", "origin");
	for (size_t i = 0; i < set->n; i++) {
		const struct bp_hyd_strategy *st = &set->s[i];
		struct bp_sb d = BP_SB_INIT;
		char range[32];
		int64_t ml = st->max_len;
		bp_sb_fill(&d, fill_strategy, st);
		snprintf(range, sizeof(range), "%lld-%lld", (long long)st->len_lo,
			 (long long)st->len_hi);
		printf("  %3zu  %-34s %5lld %8lld %15s %9.3f ms  %s\n", i, d.buf,
		       (long long)bp_hyd_strategy_gpus(st), (long long)ml, range,
		       st->expected_us / 1e3, st->origin);
		bp_sb_release(&d);
	}
}

/* The command line of `balplan propose`. */
struct prop_args {
	struct cmd_workload w;
	struct prop_opts po;
	const char *out;
	int quiet, timing;
};

/* What a proposal reads and makes. */
struct prop_run {
	struct bp_dataset ds;
	struct bp_profile prof;
	struct bp_hyd_set set;
	char ds_sha[65], prof_sha[65];
	struct bp_scheme sc[128];
	size_t nsc;
	struct bp_model rm;
	const struct bp_model *m; /* the profile's model or rm */
	int gpn;                  /* GPUs per node */
};

#define PROP_GO (-1)  /* propose's steps: go on, else the exit status */
#define PROP_OTHER (-2) /* prop_opt: not a proposal option */

static const struct cmd_workload_spec prop_workload = {
	.cmd = "propose", .gpus_max = 1 << 16, .tokens_min = 384, .tokens_max = 1 << 24};

/* --util-threshold, --min-prob, --relax-slack: c names which. */
static int prop_fraction(struct prop_opts *po, int c, const char *arg)
{
	struct bp_error e;
	double x;
	if (c == 'U') {
		if (bp_parse_double(arg, &x, "--util-threshold", &e) < 0 || !(x > 0) || x > 1)
			return cmd_usage("propose", "--util-threshold '%s' is not a number in "
					 "(0, 1]", cmd_cut(arg));
		po->theta = x;
		return PROP_GO;
	}
	const char *name = c == 'b' ? "--min-prob" : "--relax-slack";
	if (bp_parse_double(arg, &x, name, &e) < 0 || x < 0 || (c == 'b' && x >= 1) || x > 1e6)
		return cmd_usage("propose", "%s '%s' is not a number in %s", name, cmd_cut(arg),
				 c == 'b' ? "[0, 1)" : "[0, 1e6]");
	*(c == 'b' ? &po->min_prob : &po->relax_slack) = x;
	return PROP_GO;
}

/* One option of the proposal's (the group "proposal:" of --help). */
static int prop_opt(struct prop_opts *po, int c, const char *arg)
{
	int64_t v = 0;
	int bad = 0;
	switch (c) {
	case 'u': bad = cmd_opt_int("propose", "--gpu-step", arg, 1, 1 << 16, &v);
		po->gpu_step = (int)v;
		break;
	case 'l': bad = cmd_opt_tokens("propose", "--len-step", arg, 1, 1 << 24, &po->len_step);
		break;
	case 'P': bad = cmd_opt_int("propose", "--max-pp", arg, 1, 1 << 10, &v);
		po->max_pp = (int)v;
		break;
	case 'S': po->schemes = arg; break;
	case 'a': bad = cmd_opt_int("propose", "--align", arg, 1, 1 << 20, &po->align); break;
	case 'U':
	case 'b':
	case 'x': return prop_fraction(po, c, arg);
	case 'r': po->relaxed = 0; break;
	case 'e': po->indivisible = 0; break;
	case 'w': po->warmup = 1; break;
	case 'k': po->keep_dominated = 1; break;
	default: return PROP_OTHER;
	}
	return bad ? EXIT_USAGE : PROP_GO;
}

static int prop_parse(int argc, char **argv, struct prop_args *a)
{
	static const struct option opts[] = {
		CMD_WORKLOAD_OPTIONS,
		{"gpu-step", required_argument, NULL, 'u'},
		{"len-step", required_argument, NULL, 'l'},
		{"max-pp", required_argument, NULL, 'P'},
		{"schemes", required_argument, NULL, 'S'},
		{"align", required_argument, NULL, 'a'},
		{"util-threshold", required_argument, NULL, 'U'},
		{"no-relax", no_argument, NULL, 'r'},
		{"warmup", no_argument, NULL, 'w'},
		{"keep-dominated", no_argument, NULL, 'k'},
		{"eq4", no_argument, NULL, 'e'},
		{"min-prob", required_argument, NULL, 'b'},
		{"relax-slack", required_argument, NULL, 'x'},
		{"out", required_argument, NULL, 'o'},
		{"timing", no_argument, NULL, 't'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;
	memset(a, 0, sizeof(*a));
	cmd_workload_defaults(&a->w);
	a->po = prop_defaults;
	while ((c = getopt_long(argc, argv, "d:p:g:L:o:qh", opts, NULL)) != -1) {
		int r = cmd_workload_opt(&a->w, &prop_workload, c, optarg);
		if (r == CMD_WORKLOAD_OTHER)
			r = prop_opt(&a->po, c, optarg);
		else if (r == 0)
			r = PROP_GO;
		if (r != PROP_OTHER) {
			if (r != PROP_GO)
				return r;
			continue;
		}
		switch (c) {
		case 'o': a->out = optarg; break;
		case 't': a->timing = 1; break;
		case 'q': a->quiet = 1; break;
		case 'h': propose_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("propose", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
	}
	if (optind < argc)
		return cmd_usage("propose", "unexpected argument '%s'", cmd_cut(argv[optind]));
	return PROP_GO;
}

/* The options against each other, before any input is read. */
static int prop_check(struct prop_args *a)
{
	struct cmd_workload *w = &a->w;
	int r;
	if ((r = cmd_workload_check_inputs(w, "propose")) ||
	    (r = cmd_workload_check_step(w, "propose")))
		return r;
	if (a->po.gpu_step > w->gpus)
		return cmd_usage("propose", "--gpu-step %d is more than --gpus %lld",
				 a->po.gpu_step, (long long)w->gpus);
	const char *names[] = {"--dataset", "--profile"}, *paths[] = {w->dataset, w->profile};
	if ((r = cmd_one_stdin("propose", 2, names, paths)))
		return r;
	if (a->out) {
		if (cmd_refuse_overwrite("propose", "--out", a->out, "profile", w->profile))
			return EXIT_USAGE;
		if (!bp_dataset_preset_text(w->dataset, &(size_t){0}) &&
		    cmd_refuse_overwrite("propose", "--out", a->out, "dataset", w->dataset))
			return EXIT_USAGE;
		if (!strcmp(a->out, "-"))
			a->quiet = 1;
	}
	if (w->tps < 0 && !w->dps)
		w->tps = 3125 * w->gpus;
	if (w->tps < 0)
		w->tps = 0;
	return PROP_GO;
}

/* Reads the listed schemes, the dataset and the profile (or the analytic profile's GPU
 * and model), and checks the GPUs against the node size. */
static int prop_load(const struct prop_args *a, struct prop_run *r)
{
	const struct cmd_workload *w = &a->w;
	struct bp_error err;
	int rc;
	if (a->po.schemes && parse_schemes(a->po.schemes, r->sc, 128, &r->nsc, &err) < 0)
		return cmd_usage("propose", "%s", err.text);
	if (cmd_load_dataset(w->dataset, &(struct bp_read_opts){.length_field = w->jsonl_field},
			     &r->ds, r->ds_sha, &err) < 0)
		return cmd_error("%s", err.text);
	if (w->profile) {
		if (cmd_load_profile(w->profile, &r->prof, r->prof_sha, &err) < 0)
			return cmd_error("%s", err.text);
		r->m = &r->prof.model;
		r->gpn = r->prof.hw.gpus_per_node;
	} else {
		if ((rc = cmd_workload_hardware(w, "propose", &r->rm, &r->gpn)))
			return rc;
		r->m = &r->rm;
	}
	if ((rc = cmd_check_nodes("propose", w->gpus, 1, r->gpn)) != EXIT_OK)
		return rc;
	return PROP_GO;
}

/* The scheme space: the listed schemes (each one balplan can place for the model) or
 * Hydraulis's; the analytic profile of it; and of it, what the profile can price. */
static int prop_space(const struct prop_args *a, struct prop_run *r)
{
	const struct cmd_workload *w = &a->w;
	struct bp_error err;
	if (a->po.schemes) {
		for (size_t i = 0; i < r->nsc; i++) {
			struct bp_hyd_strategy st;
			memset(&st, 0, sizeof(st));
			st.g[0] = (struct bp_hyd_group){r->sc[i].tp, r->sc[i].pp, 1};
			st.ng = 1;
			if (bp_hyd_strategy_check(&st, (int)w->gpus, r->gpn, r->m, &err) < 0)
				return cmd_error("--schemes: %s", err.text);
		}
	} else {
		r->nsc = bp_hyd_space(r->m, r->gpn, (int)w->gpus, a->po.max_pp, r->sc, 128);
	}
	if (!w->profile && cmd_analytic_profile(w->gpu, w->model, r->sc, r->nsc, w->max_tokens,
						&r->prof, r->prof_sha, &err) < 0)
		return cmd_error("%s", err.text);
	size_t k = 0;
	for (size_t i = 0; i < r->nsc; i++) {
		struct bp_error e2;
		const struct bp_scheme *s = &r->sc[i];
		if (!bp_profile_check_scheme(&r->prof, s->tp, 1, s->pp, 1, r->gpn, &e2))
			r->sc[k++] = *s;
		else if (a->po.schemes)
			return cmd_error("--schemes: profile '%s' cannot price <%d,%d>: %s",
					 r->prof.name, s->tp, s->pp, e2.text);
	}
	r->nsc = k;
	return PROP_GO;
}

static int prop_write(const struct bp_hyd_set *set, const char *out)
{
	struct bp_error err;
	json_t *j = bp_hyd_set_to_json(set);
	char *text = j ? bp_json_dump_lines(j) : NULL;
	json_decref(j);
	if (!text)
		return cmd_error("cannot encode strategies '%s': out of memory", out);
	int wr = cmd_write_file(out, text, strlen(text), &err);
	free(text);
	if (wr < 0)
		return cmd_error("cannot write strategies '%s': %s", out, err.text);
	return PROP_GO;
}

/* The proposal within the limits, its tables and its file. */
static int prop_run(const struct prop_args *a, struct prop_run *r)
{
	const struct cmd_workload *w = &a->w;
	const struct prop_req q = {&r->prof, r->sc, r->nsc, &r->ds, r->ds_sha, (int)w->gpus,
				   w->max_tokens, w->tps, w->dps, w->overlen, &a->po};
	struct bp_error err;
	double est_s = 0.0;
	int rc;
	if ((rc = propose_guard(&q, &est_s)) != EXIT_OK)
		return rc;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int pr = propose(&q, &r->set, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (pr < 0)
		return cmd_error("cannot propose strategies: %s", err.text);
	if (!a->quiet)
		print_tables(&r->set, &r->prof, (int)w->gpus, r->ds.name);
	if (a->timing)
		fprintf(stderr, "balplan: proposal took %.1f ms (%zu schemes, %zu candidates; "
			"estimated %.1f ms, limit %.0f s)\n",
			(t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6, r->nsc,
			r->set.n, est_s * 1e3, PROPOSE_LIMIT_S);
	if (a->out && (rc = prop_write(&r->set, a->out)) != PROP_GO)
		return rc;
	return EXIT_OK;
}

int cmd_propose(int argc, char **argv)
{
	struct prop_args a;
	struct prop_run r;
	int rc = prop_parse(argc, argv, &a);
	if (rc == PROP_GO)
		rc = prop_check(&a);
	if (rc != PROP_GO)
		return rc;
	memset(&r, 0, sizeof(r));
	bp_dataset_init(&r.ds);
	bp_profile_init(&r.prof);
	bp_hyd_set_init(&r.set);
	rc = prop_load(&a, &r);
	if (rc == PROP_GO)
		rc = prop_space(&a, &r);
	if (rc == PROP_GO)
		rc = prop_run(&a, &r);
	bp_hyd_set_release(&r.set);
	bp_dataset_release(&r.ds);
	bp_profile_release(&r.prof);
	return rc;
}
