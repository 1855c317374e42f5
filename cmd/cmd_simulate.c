/* cmd_simulate.c: `balplan simulate PLAN`: predict a plan on a profile (its own or another)
 * and print step by step, or rank by rank for one step. */
#include <getopt.h>
#include <string.h>

#include "cmdutil.h"
#include "commands.h"
#include "solve.h"

static void simulate_usage(FILE *f)
{
	fprintf(f, "usage: balplan simulate [--profile FILE] [--step N] PLAN\n\n"
		   "Re-predicts a plan with the shared cost model and 1F1B simulator: on the profile\n"
		   "it was made with (regenerated when analytic), or on another --profile to see\n"
		   "what the same plan costs elsewhere. Prints a table per step, or with --step the\n"
		   "busy and idle time of every (pipeline, stage) rank and each micro-batch's times.\n\n"
		   "exit status: 0 ok, 1 data or runtime error, 2 usage error\n");
}

static void print_step_detail(const struct bp_plan *p, const struct bp_step *st)
{
	int pp = p->cluster.pp;
	printf("step %lld: %.3f ms (slowest pipeline %.3f ms + gradient sync %.3f ms)\n",
	       (long long)st->index, st->m.step_us / 1e3, st->m.pipe_max_us / 1e3,
	       st->m.grad_sync_us / 1e3);
	printf("%-8s %-6s %12s %12s %7s %10s\n", "pipeline", "stage", "busy", "idle", "busy%",
	       "peak mem");
	for (size_t k = 0; k < st->npipes; k++)
		for (int s = 0; s < pp; s++) {
			const struct bp_pipe *pi = &st->pipes[k];
			double busy = pi->busy_us[s], idle = st->m.step_us - busy;
			printf("%-8zu %-6d %9.3f ms %9.3f ms %6.1f%% %6.2f GiB\n", k, s, busy / 1e3,
			       idle / 1e3, st->m.step_us > 0 ? 100.0 * busy / st->m.step_us : 0.0,
			       pi->peak_mem[s] / 1073741824.0);
		}
	printf("\n%-8s %-5s %8s %6s %-9s %12s %12s\n", "pipeline", "mb", "tokens", "spans",
	       "shard", "fwd (all)", "bwd (all)");
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
			const struct bp_mb *mb = &st->pipes[k].mbs[j];
			double f = 0, b = 0;
			for (int s = 0; s < pp; s++) {
				f += mb->fwd[s];
				b += mb->bwd[s];
			}
			printf("%-8zu %-5zu %8lld %6zu %-9s %9.3f ms %9.3f ms\n", k, j,
			       (long long)mb->tokens, mb->nspans, bp_shard_name(mb->shard), f / 1e3,
			       b / 1e3);
		}
}

int cmd_simulate(int argc, char **argv)
{
	static const struct option opts[] = {
		{"profile", required_argument, NULL, 'p'},
		{"step", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *profile = NULL;
	int64_t step = -1;
	int c;
	while ((c = getopt_long(argc, argv, "+p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': profile = optarg; break;
		case 's':
			if (cmd_opt_int("simulate", "--step", optarg, 0, INT64_MAX, &step) < 0)
				return EXIT_USAGE;
			break;
		case 'h': simulate_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("simulate", "unknown or incomplete option '%s'",
					 argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		return cmd_usage("simulate", "expected one plan file");
	const char *path = argv[optind];
	struct bp_plan plan;
	struct bp_profile prof;
	struct bp_costmodel cm = {0};
	struct bp_error err;
	int rc = EXIT_DATA;
	bp_plan_init(&plan);
	bp_profile_init(&prof);
	if (cmd_load_plan(path, &plan, &err) < 0) {
		cmd_error("%s", err.text);
		goto out;
	}
	if (step >= (int64_t)plan.nsteps) {
		rc = cmd_usage("simulate", "--step %lld is past the plan's %zu steps",
			       (long long)step, plan.nsteps);
		goto out;
	}
	if (cmd_plan_profile(&plan, profile, 0, &prof, &err) < 0 ||
	    bp_plan_costmodel(&plan, &prof, &cm, &err) < 0 ||
	    bp_plan_validate(&plan, NULL, &err) < 0 || bp_plan_predict(&plan, &cm, &err) < 0) {
		cmd_error("cannot simulate plan '%s': %s", path, err.text);
		goto out;
	}
	printf("plan %s: method %s on profile %s, %d x %s (tp %d cp %d pp %d dp %d)\n", path,
	       plan.method, prof.name, plan.cluster.gpus, plan.cluster.gpu, plan.cluster.tp,
	       plan.cluster.cp, plan.cluster.pp, plan.cluster.dp);
	if (step >= 0) {
		print_step_detail(&plan, &plan.steps[step]);
		rc = EXIT_OK;
		goto out;
	}
	printf("%5s %6s %5s %9s %11s %10s %7s %8s %8s %8s %9s\n", "step", "docs", "mbs",
	       "tokens", "step", "grad sync", "bubble", "imb(WLB)", "imb(SB)", "gap(Hyd)",
	       "peak mem");
	for (size_t i = 0; i < plan.nsteps; i++) {
		const struct bp_step *st = &plan.steps[i];
		printf("%5zu %6zu %5lld %9lld %8.2f ms %7.2f ms %6.1f%% %8.3f %8.3f %8.3f %5.1f GiB\n",
		       i, st->ndocs, (long long)st->m.nmbs, (long long)st->m.tokens,
		       st->m.step_us / 1e3, st->m.grad_sync_us / 1e3, 100.0 * st->m.bubble,
		       st->m.imb_wlb, st->m.imb_sb, st->m.gap_hyd, st->m.peak_mem / 1073741824.0);
	}
	const struct bp_summary *s = &plan.summary;
	printf("total %.3f s, mean step %.2f ms (p50 %.2f, p95 %.2f, max %.2f), %.0f tokens/s\n",
	       s->total_us / 1e6, s->step_mean_us / 1e3, s->step_p50_us / 1e3,
	       s->step_p95_us / 1e3, s->step_max_us / 1e3, s->tokens_per_s);
	rc = EXIT_OK;
out:
	bp_costmodel_release(&cm);
	bp_plan_release(&plan);
	bp_profile_release(&prof);
	return rc;
}
