/* cmd_view.c: `balplan view PLAN --rank R [--step S]`: one rank's view of a step, or of every
 * step, as balplan.rankview/v1 JSON lines (planner/solve/view.h): what a training process
 * of that global rank trains. The Python package executor/python/balplan computes the
 * same view; tests/python/test-plan-package holds the two against each other. The plan's
 * invariants are checked first (validate.h), so a view is never of a plan `check` refuses
 * for its decisions. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cmdutil.h"
#include "commands.h"
#include "validate.h"
#include "view.h"

static void view_usage(FILE *f)
{
	fprintf(f, "usage: balplan view --rank R [--step S] [--world-size N] PLAN\n\n"
		   "Prints what global rank R trains in step S of a plan (every step without\n"
		   "--step), one balplan.rankview/v1 JSON object per line: its role in the step's\n"
		   "layout (pipeline, stage, tp and cp position; null when it holds no pipeline\n"
		   "rank), the step's trained tokens (the loss normaliser), and its pipeline's\n"
		   "micro-batches in execution order, each with spans [doc, offset, len, sample,\n"
		   "sample_offset] (sample -1 in a what-if plan of draws), cu_seqlens of the packed\n"
		   "micro-batch and the packed-token ranges [start, end) its CP position holds\n"
		   "under the micro-batch's shard mode (plans/README.md \"A rank's view\").\n\n"
		   "  -r, --rank R         global rank, 0 <= R < the plan's GPUs\n"
		   "  -s, --step S         one step (default: every step)\n"
		   "  -w, --world-size N   refuse a plan made for another number of GPUs\n\n"
		   "exit status: 0 ok, 1 unreadable plan or a step past its end, 2 usage error\n");
}

int cmd_view(int argc, char **argv)
{
	static const struct option opts[] = {
		{"rank", required_argument, NULL, 'r'},
		{"step", required_argument, NULL, 's'},
		{"world-size", required_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int64_t rank = -1, step = -1, world = 0;
	int c;
	while ((c = getopt_long(argc, argv, "r:s:w:h", opts, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case 'r': bad = cmd_opt_int("view", "--rank", optarg, 0, 1 << 24, &rank); break;
		case 's': bad = cmd_opt_int("view", "--step", optarg, 0, INT64_MAX, &step); break;
		case 'w': bad = cmd_opt_int("view", "--world-size", optarg, 1, 1 << 24, &world);
			break;
		case 'h': view_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("view", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
		if (bad)
			return EXIT_USAGE;
	}
	if (argc - optind != 1)
		return cmd_usage("view", "expected one plan file");
	if (rank < 0)
		return cmd_usage("view", "--rank is required");
	const char *path = argv[optind];
	struct bp_plan plan;
	struct bp_doc_index docs = {NULL, 0};
	struct bp_error err;
	int rc = EXIT_DATA;
	bp_plan_init(&plan);
	if (cmd_load_plan(path, &plan, &err) < 0) {
		cmd_error("%s", err.text);
		goto out;
	}
	if (world && world != plan.cluster.gpus) {
		cmd_error("plan '%s' is for %d GPUs, not a world of %lld", path, plan.cluster.gpus,
			  (long long)world);
		goto out;
	}
	if (bp_plan_validate(&plan, NULL, &err) < 0) {
		cmd_error("plan '%s' is invalid: %s", path, err.text);
		goto out;
	}
	if (bp_doc_index_build(&docs, &plan, &err) < 0) {
		cmd_error("%s", err.text);
		goto out;
	}
	/* steps by the run's numbers: a window of a run (plan.h) starts at its first_step */
	int64_t first = step >= 0 ? step : plan.first_step,
		last = step >= 0 ? step : plan.first_step + (int64_t)plan.nsteps - 1;
	for (int64_t s = first; s <= last; s++) {
		json_t *v = bp_rank_view(&plan, &docs, s, (int)rank, &err);
		char *text = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(v);
		if (!text) {
			cmd_error("plan '%s': %s", path, v ? "out of memory" : err.text);
			goto out;
		}
		puts(text);
		free(text);
	}
	rc = EXIT_OK;
out:
	free(docs.d);
	bp_plan_release(&plan);
	return rc;
}
