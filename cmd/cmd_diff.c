/* cmd_diff.c: `balplan diff A B`: exit 0 when the plans are equivalent, 1 when they differ,
 * 2 on error, printing what differs in human terms. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cmdutil.h"
#include "commands.h"
#include "diff.h"
#include "validate.h"

static void diff_usage(FILE *f)
{
	fprintf(f, "usage: balplan diff [--max-lines N] [--format F] PLAN_A PLAN_B\n\n"
		   "Explains what differs between two plans: inputs, configuration, per step the\n"
		   "micro-batches and documents that moved and the predicted step-time change, and\n"
		   "the summary. Spans inside a micro-batch compare as a set.\n\n"
		   "  --max-lines N   per-step lines to print at most [40; 0: all]\n"
		   "  --format F      text, csv or json [text]: csv has the columns equivalent\n"
		   "                  (1 or 0), step (the step a line is about, else empty) and\n"
		   "                  text (the text's lines, one a row); json is an object:\n"
		   "                  plan_a, plan_b, equivalent, lines (objects: step or null,\n"
		   "                  text), omitted (lines left out by --max-lines) and summary\n"
		   "                  (a and b: method, steps, step_mean_ms, imb_wlb,\n"
		   "                  tflops_per_gpu, mfu)\n\n"
		   "exit status: 0 equivalent, 1 different, 2 error\n");
}

/* The step a change line is about ("step N: ..."), or -1. */
static long long line_step(const char *line)
{
	long long n;
	int end = 0;
	if (sscanf(line, "step %lld:%n", &n, &end) == 1 && end > 0)
		return n;
	return -1;
}

/* One plan's summary in the json: what the text's last lines compare. */
static void json_summary(const struct bp_plan *p)
{
	const struct bp_summary *s = &p->summary;
	int first = 1;
	printf("{");
	cmd_json_key(stdout, &first, "method");
	cmd_json_str(stdout, p->method);
	cmd_json_key(stdout, &first, "steps");
	printf("%zu", p->nsteps);
	cmd_json_key(stdout, &first, "step_mean_ms");
	cmd_json_num(stdout, s->step_mean_us / 1e3);
	cmd_json_key(stdout, &first, "imb_wlb");
	cmd_json_num(stdout, s->imb_wlb_mean);
	cmd_json_key(stdout, &first, "tflops_per_gpu");
	cmd_json_num(stdout, s->model_tflops_per_gpu);
	cmd_json_key(stdout, &first, "mfu");
	cmd_json_num(stdout, s->mfu);
	printf("}");
}

/* --format csv|json (diff_usage names the fields). */
static void print_diff_data(const struct bp_diff *d, const struct bp_plan *a,
			    const struct bp_plan *b, const char *pa, const char *pb,
			    enum cmd_format fmt)
{
	char more[96];
	snprintf(more, sizeof(more), "... %zu more lines (--max-lines 0 shows all)", d->omitted);
	if (fmt == CMD_FORMAT_CSV) {
		static const char *const cols[] = {"equivalent", "step", "text"};
		struct cmd_table t;
		cmd_table_begin(&t, stdout, fmt, cols, BP_ARRAY_LEN(cols));
		if (d->equivalent) {
			cmd_table_int(&t, 1);
			cmd_table_str(&t, "");
			cmd_table_str(&t, "plans are equivalent");
		}
		for (size_t i = 0; i < d->nlines + (d->omitted ? 1 : 0); i++) {
			const char *line = i < d->nlines ? d->lines[i] : more;
			long long st = line_step(line);
			cmd_table_int(&t, 0);
			if (st >= 0)
				cmd_table_int(&t, st);
			else
				cmd_table_str(&t, "");
			cmd_table_str(&t, line);
		}
		cmd_table_end(&t);
		return;
	}
	static const char *const cols[] = {"step", "text"};
	struct cmd_table t;
	int first = 1;
	printf("{");
	cmd_json_key(stdout, &first, "plan_a");
	cmd_json_str(stdout, pa);
	cmd_json_key(stdout, &first, "plan_b");
	cmd_json_str(stdout, pb);
	cmd_json_key(stdout, &first, "equivalent");
	printf(d->equivalent ? "true" : "false");
	cmd_json_key(stdout, &first, "lines");
	cmd_table_begin(&t, stdout, fmt, cols, BP_ARRAY_LEN(cols));
	for (size_t i = 0; i < d->nlines; i++) {
		long long st = line_step(d->lines[i]);
		if (st >= 0)
			cmd_table_int(&t, st);
		else
			cmd_table_num(&t, NAN); /* null */
		cmd_table_str(&t, d->lines[i]);
	}
	cmd_table_end(&t);
	cmd_json_key(stdout, &first, "omitted");
	printf("%zu", d->omitted);
	cmd_json_key(stdout, &first, "summary");
	printf("{\"a\": ");
	json_summary(a);
	printf(", \"b\": ");
	json_summary(b);
	printf("}}\n");
}

int cmd_diff(int argc, char **argv)
{
	static const struct option opts[] = {
		{"max-lines", required_argument, NULL, 'l'},
		{"format", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int64_t max_lines = 40;
	enum cmd_format fmt = CMD_FORMAT_TEXT;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (cmd_opt_int("diff", "--max-lines", optarg, 0, 1 << 30, &max_lines) < 0)
				return EXIT_USAGE;
			break;
		case 'f':
			if (cmd_opt_format("diff", optarg, &fmt) < 0)
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
	if (fmt != CMD_FORMAT_TEXT) {
		print_diff_data(&d, &a, &b, argv[optind], argv[optind + 1], fmt);
		rc = d.equivalent ? EXIT_OK : 1;
	} else if (d.equivalent) {
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
