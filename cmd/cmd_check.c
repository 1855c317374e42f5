/* cmd_check.c: `balplan check PLAN`: decode a plan, check its invariants and that its profile
 * predicts the numbers it carries. */
#include <getopt.h>
#include <string.h>

#include "cmdutil.h"
#include "commands.h"
#include "solve.h"

static void check_usage(FILE *f)
{
	fprintf(f, "usage: balplan check [--profile FILE] PLAN\n\n"
		   "Checks a plan: the format, every document trained exactly once (or delayed to a\n"
		   "named step), spans inside documents, the token and memory caps, the cluster, and\n"
		   "that the profile it names predicts the times it carries. Plans made with an\n"
		   "analytic profile are checked against a regenerated one; others need --profile.\n\n"
		   "exit status: 0 valid, 1 invalid or unreadable, 2 usage error\n");
}

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{"profile", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *profile = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': profile = optarg; break;
		case 'h': check_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("check", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
	}
	if (argc - optind != 1)
		return cmd_usage("check", "expected one plan file");
	const char *path = argv[optind];
	if (profile && !strcmp(profile, "-") && !strcmp(path, "-"))
		return cmd_usage("check", "the plan and --profile cannot both be standard input "
				 "('-')");
	struct bp_plan plan;
	struct bp_profile prof;
	struct bp_error err;
	int rc = EXIT_DATA;
	bp_plan_init(&plan);
	bp_profile_init(&prof);
	if (cmd_load_plan(path, &plan, &err) < 0) {
		cmd_error("%s", err.text);
		goto out;
	}
	if (cmd_plan_profile(&plan, profile, 1, &prof, &err) < 0) {
		cmd_error("plan '%s': %s", path, err.text);
		goto out;
	}
	if (bp_plan_check(&plan, &prof, &err) < 0) {
		cmd_error("plan '%s' is invalid: %s", path, err.text);
		goto out;
	}
	size_t mbs = 0;
	for (size_t i = 0; i < plan.nsteps; i++)
		for (size_t k = 0; k < plan.steps[i].npipes; k++)
			mbs += plan.steps[i].pipes[k].nmbs;
	printf("plan '%s' is valid: method %s, %zu steps, %zu micro-batches, %lld documents\n",
	       path, plan.method, plan.nsteps, mbs, (long long)plan.summary.docs);
	rc = EXIT_OK;
out:
	bp_plan_release(&plan);
	bp_profile_release(&prof);
	return rc;
}
