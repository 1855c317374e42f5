/* cmd_check.c: `balplan check PLAN`: decode a plan, check its invariants and that its profile
 * predicts the numbers it carries. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cmdutil.h"
#include "commands.h"
#include "solve.h"

static void check_usage(FILE *f)
{
	fprintf(f, "usage: balplan check [--profile FILE] [--index FILE [field options]] PLAN\n\n"
		   "Checks a plan: the format, every document trained exactly once (or delayed to a\n"
		   "named step), spans inside documents, the token and memory caps, the cluster, and\n"
		   "that the profile it names predicts the times it carries. Plans made with an\n"
		   "analytic profile are checked against a regenerated one; others need --profile.\n\n"
		   "  -p, --profile FILE     the profile the plan was made with\n"
		   "      --index FILE       the sample index a plan of samples was made from\n"
		   "                         (its sha256 must match): every sample of the planned\n"
		   "                         range must be trained exactly once, in the step the\n"
		   "                         plan's order puts it in or a recorded later one\n"
		   "      --length-field KEY, --tokens-field KEY, --id-field KEY, --skip-empty\n"
		   "                         the reader's options, as given to solve\n\n"
		   "exit status: 0 valid, 1 invalid or unreadable, 2 usage error\n");
}

/* Whether the file is a plan of lines (plan.h bp_plan_text_is_lines, on its first line). */
static int is_plan_of_lines(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = f ? getline(&line, &cap, f) : -1;
	int yes = n > 0 && bp_plan_text_is_lines(line, (size_t)n);
	free(line);
	if (f)
		fclose(f);
	return yes;
}

#define CHECK_WINDOW_STEPS 64

static int check_lines(const char *path, const char *profile)
{
	struct bp_plan_lines r;
	struct bp_plan header;
	struct bp_profile prof;
	struct bp_error err;
	int rc = EXIT_DATA;
	FILE *f = fopen(path, "rb");
	bp_plan_init(&header);
	bp_profile_init(&prof);
	memset(&r, 0, sizeof(r));
	if (!f)
		return cmd_error("cannot read plan '%s': %s", path, strerror(errno));
	if (bp_plan_lines_open(&r, f, &header, &err) < 0) {
		cmd_error("cannot read plan '%s': %s", path, err.text);
		goto out;
	}
	if (cmd_plan_profile(&header, profile, 1, &prof, &err) < 0) {
		cmd_error("plan '%s': %s", path, err.text);
		goto out;
	}
	struct bp_summary s;
	if (bp_plan_check_lines(&r, &header, &prof, CHECK_WINDOW_STEPS, &s, &err) < 0) {
		cmd_error("plan '%s' is invalid: %s", path, err.text);
		goto out;
	}
	printf("plan '%s' is valid: method %s, %lld steps, %lld documents (a plan of lines, "
	       "checked %d steps at a time)\n", path, header.method, (long long)s.steps,
	       (long long)s.docs, CHECK_WINDOW_STEPS);
	rc = EXIT_OK;
out:
	bp_plan_lines_close(&r);
	fclose(f);
	bp_plan_release(&header);
	bp_profile_release(&prof);
	return rc;
}

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{"profile", required_argument, NULL, 'p'},
		{"index", required_argument, NULL, 'x'},
		{"length-field", required_argument, NULL, 'J'},
		{"jsonl-field", required_argument, NULL, 'J'},
		{"tokens-field", required_argument, NULL, 'j'},
		{"id-field", required_argument, NULL, 'I'},
		{"skip-empty", no_argument, NULL, 'e'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *profile = NULL, *index = NULL;
	struct bp_read_opts ro = {.length_field = NULL, .tokens_field = NULL, .id_field = NULL};
	int c;
	while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': profile = optarg; break;
		case 'x': index = optarg; break;
		case 'J': ro.length_field = optarg; break;
		case 'j': ro.tokens_field = optarg; break;
		case 'I': ro.id_field = optarg; break;
		case 'e': ro.skip_empty = 1; break;
		case 'h': check_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("check", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
	}
	if (argc - optind != 1)
		return cmd_usage("check", "expected one plan file");
	const char *path = argv[optind];
	{
		const char *names[] = {"the plan", "--profile", "--index"};
		const char *paths[] = {path, profile, index};
		int r = cmd_one_stdin("check", 3, names, paths);
		if (r)
			return r;
	}
	if (!index && (ro.length_field || ro.tokens_field || ro.id_field || ro.skip_empty))
		return cmd_usage("check", "the field options belong to --index");
	struct bp_plan plan;
	struct bp_profile prof;
	struct bp_dataset ds;
	struct bp_error err;
	char ds_sha[65];
	int rc = EXIT_DATA;
	bp_plan_init(&plan);
	bp_profile_init(&prof);
	bp_dataset_init(&ds);
	/* A plan of lines is checked a window of steps at a time (memory for a window, not the
	 * run), except against an index, which re-takes the whole run's samples. */
	if (!index && strcmp(path, "-") && is_plan_of_lines(path)) {
		rc = check_lines(path, profile);
		goto out;
	}
	if (cmd_load_plan(path, &plan, &err) < 0) {
		cmd_error("%s", err.text);
		goto out;
	}
	/* the samples first: a plan edited consistently still names the wrong ones */
	if (index) {
		if (cmd_load_dataset(index, &ro, &ds, ds_sha, &err) < 0) {
			cmd_error("%s", err.text);
			goto out;
		}
		if (bp_plan_check_samples(&plan, &ds, ds_sha, &err) < 0) {
			cmd_error("plan '%s' does not train index '%s' as planned: %s", path, index,
				  err.text);
			goto out;
		}
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
	if (index)
		printf("index '%s': positions %lld to %lld of its order (%lld samples per epoch), "
		       "each trained exactly once as planned; %lld truncated, %lld dropped over "
		       "the cap, %lld left by the last-batch rule\n", index,
		       (long long)plan.source.first_pos, (long long)plan.source.end_pos - 1,
		       (long long)plan.source.samples, (long long)plan.summary.truncated,
		       (long long)plan.summary.dropped, (long long)plan.source.left);
	rc = EXIT_OK;
out:
	bp_plan_release(&plan);
	bp_profile_release(&prof);
	bp_dataset_release(&ds);
	return rc;
}
