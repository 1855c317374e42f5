/* cmd_dataset.c: `balplan dataset show NAME|FILE` and `balplan dataset list`: statistics and
 * a text histogram of a length distribution. */
#include <getopt.h>
#include <math.h>
#include <string.h>

#include "cmdutil.h"
#include "commands.h"

static void dataset_usage(FILE *f)
{
	fprintf(f, "usage: balplan dataset show [--jsonl-field KEY] NAME|FILE\n"
		   "       balplan dataset list\n\n"
		   "Shows a dataset's provenance, statistics (count, tokens, mean, p50, p90, p99,\n"
		   "max) and a histogram of document counts and token shares over log2 length bins.\n"
		   "NAME is a built-in preset; FILE is v1 JSON, text (one length per line) or JSONL.\n\n"
		   "exit status: 0 ok, 1 data error, 2 usage error\n");
}

/* Adds count documents with total tokens over [lo, hi] to log2 buckets, spreading them in
 * proportion to the overlap (uniform inside the bin). */
static void bucket_add(double *cnt, double *tok, int64_t lo, int64_t hi, double count,
		       double tokens)
{
	double span = (double)(hi - lo + 1);
	for (int b = 0; b < 48; b++) {
		double blo = ldexp(1.0, b), bhi = ldexp(1.0, b + 1) - 1;
		double x = fmax(blo, (double)lo), y = fmin(bhi, (double)hi);
		if (x > y)
			continue;
		double f = (y - x + 1) / span;
		cnt[b] += count * f;
		tok[b] += tokens * f;
	}
}

static int show(const char *spec, const char *field)
{
	struct bp_dataset ds;
	struct bp_error err;
	char sha[65];
	bp_dataset_init(&ds);
	if (cmd_load_dataset(spec, field, &ds, sha, &err) < 0) {
		bp_dataset_release(&ds);
		return cmd_error("%s", err.text);
	}
	const struct bp_dataset_stats *s = &ds.stats;
	printf("dataset %s (%s)\n", ds.name, bp_dataset_kind_name(ds.kind));
	printf("  source:    %s\n  tokenizer: %s\n  license:   %s\n  sha256:    %s\n",
	       ds.source ? ds.source : "-", ds.tokenizer ? ds.tokenizer : "-",
	       ds.license ? ds.license : "-", sha);
	printf("  documents %lld, tokens %lld, mean %.1f, p50 %lld, p90 %lld, p99 %lld, max %lld\n",
	       (long long)s->count, (long long)s->tokens, s->mean, (long long)s->p50,
	       (long long)s->p90, (long long)s->p99, (long long)s->max);
	double cnt[48] = {0}, tok[48] = {0};
	if (ds.bins)
		for (size_t i = 0; i < ds.nbins; i++)
			bucket_add(cnt, tok, ds.bins[i].lo, ds.bins[i].hi, (double)ds.bins[i].count,
				   (double)ds.bins[i].tokens);
	else
		for (size_t i = 0; i < ds.nlengths; i++)
			bucket_add(cnt, tok, ds.lengths[i], ds.lengths[i], 1.0,
				   (double)ds.lengths[i]);
	double cmax = 0;
	int first = 48, last = -1;
	for (int b = 0; b < 48; b++)
		if (cnt[b] > 0) {
			cmax = fmax(cmax, cnt[b]);
			if (b < first)
				first = b;
			last = b;
		}
	printf("\n  %-17s %9s %7s  %s\n", "length", "docs", "tokens", "documents");
	for (int b = first; b <= last; b++) {
		char range[32], bar[41];
		snprintf(range, sizeof(range), "%.0f-%.0f", ldexp(1.0, b), ldexp(1.0, b + 1) - 1);
		int w = cmax > 0 ? (int)lround(40.0 * cnt[b] / cmax) : 0;
		memset(bar, '#', (size_t)w);
		bar[w] = 0;
		printf("  %-17s %9.0f %6.1f%%  %s\n", range, cnt[b],
		       s->tokens ? 100.0 * tok[b] / (double)s->tokens : 0.0, bar);
	}
	bp_dataset_release(&ds);
	return EXIT_OK;
}

int cmd_dataset(int argc, char **argv)
{
	static const struct option opts[] = {
		{"jsonl-field", required_argument, NULL, 'J'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *field = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'J': field = optarg; break;
		case 'h': dataset_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("dataset", "unknown or incomplete option '%s'",
					 argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cmd_usage("dataset", "expected 'show NAME|FILE' or 'list'");
	const char *verb = argv[optind++];
	/* options may also follow the verb */
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'J': field = optarg; break;
		case 'h': dataset_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("dataset", "unknown or incomplete option '%s'",
					 argv[optind - 1]);
		}
	}
	if (!strcmp(verb, "list")) {
		if (optind < argc)
			return cmd_usage("dataset", "unexpected argument '%s'", argv[optind]);
		for (size_t i = 0; i < bp_dataset_preset_count(); i++)
			printf("%s\n", bp_dataset_preset_name(i));
		return EXIT_OK;
	}
	if (!strcmp(verb, "show")) {
		if (argc - optind != 1)
			return cmd_usage("dataset", "'show' takes one dataset name or file");
		return show(argv[optind], field);
	}
	return cmd_usage("dataset", "unknown verb '%s' (show or list)", verb);
}
