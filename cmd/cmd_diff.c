/* cmd_diff.c: `balplan diff A B`: exit 0 when the plans are equivalent, 1 when they differ,
 * 2 on error, printing what differs in human terms. */
#include <getopt.h>
#include <string.h>

#include "cmdutil.h"
#include "commands.h"
#include "diff.h"
#include "validate.h"

static void diff_usage(FILE *f)
{
	fprintf(f, "usage: balplan diff [--max-lines N] PLAN_A PLAN_B\n\n"
		   "Explains what differs between two plans: inputs, configuration, per step the\n"
		   "micro-batches and documents that moved and the predicted step-time change, and\n"
		   "the summary. Spans inside a micro-batch compare as a set.\n\n"
		   "  --max-lines N   per-step lines to print at most [40; 0: all]\n\n"
		   "exit status: 0 equivalent, 1 different, 2 error\n");
}

int cmd_diff(int argc, char **argv)
{
	static const struct option opts[] = {
		{"max-lines", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int64_t max_lines = 40;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (cmd_opt_int("diff", "--max-lines", optarg, 0, 1 << 30, &max_lines) < 0)
				return EXIT_USAGE;
			break;
		case 'h': diff_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("diff", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
	}
	if (argc - optind != 2)
		return cmd_usage("diff", "expected two plan files");
	if (!strcmp(argv[optind], "-") && !strcmp(argv[optind + 1], "-"))
		return cmd_usage("diff", "the two plans cannot both be standard input ('-')");
	struct bp_plan a, b;
	struct bp_diff d;
	struct bp_error err;
	int rc = EXIT_USAGE; /* diff's error status is 2 */
	bp_plan_init(&a);
	bp_plan_init(&b);
	bp_diff_init(&d);
	if (cmd_load_plan(argv[optind], &a, &err) < 0 ||
	    cmd_load_plan(argv[optind + 1], &b, &err) < 0) {
		cmd_error("%s", err.text);
		goto out;
	}
	/* the invariants every consumer checks (validate.h), as report does */
	for (int i = 0; i < 2; i++)
		if (bp_plan_validate(i ? &b : &a, NULL, &err) < 0) {
			cmd_error("invalid plan '%s': %s", argv[optind + i], err.text);
			goto out;
		}
	if (bp_plan_diff(&a, &b, (size_t)max_lines, &d, &err) < 0) {
		cmd_error("cannot compare plans: %s", err.text);
		goto out;
	}
	if (d.equivalent) {
		printf("plans are equivalent\n");
		rc = EXIT_OK;
	} else {
		for (size_t i = 0; i < d.nlines; i++)
			printf("%s\n", d.lines[i]);
		if (d.omitted)
			printf("... %zu more lines (--max-lines 0 shows all)\n", d.omitted);
		rc = 1;
	}
out:
	bp_diff_release(&d);
	bp_plan_release(&a);
	bp_plan_release(&b);
	return rc;
}
