/* balplan.c: main and the table of subcommands. Each subcommand lives in cmd/cmd_<name>.c as
 * cmd_<name>(argc, argv), parses its own options with getopt_long and returns the exit
 * status: 0 ok, 1 data or runtime error, 2 usage error, 3 infeasible. The top level stops at
 * the first operand ('+'), so a subcommand's options reach it; subcommands permute (GNU
 * style: options may follow operands, "--" ends them). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmdutil.h"
#include "commands.h"

struct subcommand {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct subcommand subcommands[] = {
	{"solve", cmd_solve, "plan packing, dispatch and sharding for a dataset and profile"},
	{"simulate", cmd_simulate, "predict what a plan costs, step by step and rank by rank"},
	{"check", cmd_check, "validate a plan's invariants and predicted numbers"},
	{"report", cmd_report, "compare a replay's measured trace with the plan; refit a profile"},
	{"diff", cmd_diff, "explain what differs between two plans (exit 0 same, 1 different)"},
	{"dataset", cmd_dataset, "show a dataset's statistics and length histogram"},
	{"profile", cmd_profile, "make a profile (--analytic from GPU specifications)"},
	{"presets", cmd_presets, "list built-in models, GPUs, datasets and methods"},
	{"propose", cmd_propose, "propose Hydraulis's candidate strategies for a dataset"},
	{"view", cmd_view, "print what one rank trains in a step (rankview JSON lines)"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: balplan [--version] [--help] <command> [<args>]\n\n"
		   "Plans load-balanced long-context LLM training.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\n'balplan <command> --help' describes a command.\n"
		   "exit status: 0 ok, 1 data or runtime error, 2 usage error, 3 infeasible\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hV", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return cmd_finish(EXIT_OK);
		case 'V':
			printf("balplan %s\n", BALPLAN_VERSION);
			return cmd_finish(EXIT_OK);
		default:
			return cmd_usage(NULL, "unknown option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *name = argv[optind];
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (!strcmp(subcommands[i].name, name)) {
			int sub_argc = argc - optind;
			char **sub_argv = argv + optind;
			optind = 0; /* full reset for the subcommand's getopt_long */
			opterr = 0;
			return cmd_finish(subcommands[i].fn(sub_argc, sub_argv));
		}
	return cmd_usage(NULL, "unknown command '%s'", cmd_cut(name));
}
