/* cmd_dataset.c: `balplan dataset show NAME|FILE [--svg FILE]` and `balplan dataset list`:
 * statistics and a histogram of a length distribution, as text and optionally as a
 * self-contained SVG drawing (no scripts, no external fonts or styles), so a reviewer can see
 * a dataset's shape in a pull request. Both views use the same log2 buckets; the SVG is
 * written with fixed precision, so the same dataset always gives the same bytes. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmdutil.h"
#include "commands.h"
#include "strbuf.h"

static void dataset_usage(FILE *f)
{
	fprintf(f, "usage: balplan dataset show [--jsonl-field KEY | --tokens-field KEY]\n"
		   "                            [--id-field KEY] [--skip-empty] [--svg FILE]\n"
		   "                            [--format F] NAME|FILE|-\n"
		   "       balplan dataset list\n\n"
		   "Shows a dataset's provenance, statistics (count, tokens, mean, p50, p90, p99,\n"
		   "max) and a histogram of document counts and token shares over log2 length bins.\n"
		   "NAME is a built-in preset; FILE is v1 JSON or a sample index: text (a length,\n"
		   "or 'id length', per line), JSONL or a Megatron-LM .idx (a sample is a document,\n"
		   "its sequences summed; the .bin is not read) ('-': standard input). The format\n"
		   "line names the reader, the samples (and the .idx's sequences) and their ids.\n"
		   "Options may come before or after NAME|FILE.\n"
		   "--jsonl-field KEY (or --length-field KEY) names JSONL's integer token count\n"
		   "(default: the first of tokens, num_tokens, length, len in the first line);\n"
		   "--tokens-field KEY a token array whose size is the count instead (default:\n"
		   "input_ids, then tokens, when no count field is there); --id-field KEY the\n"
		   "integer sample id every line must carry (default: id when the first line has\n"
		   "an integer id, else a sample's id is its position). --skip-empty leaves an\n"
		   ".idx's documents of 0 tokens out (with a warning) instead of refusing them.\n"
		   "--svg FILE also draws the histogram as an SVG image; with FILE '-' the\n"
		   "image is written to standard output instead of the text.\n"
		   "--format F prints text, csv (the histogram: a header row, then a row per\n"
		   "bin) or json (an object: name, kind, source, tokenizer, license, sha256,\n"
		   "format, samples, sequences, ids, stats, histogram) [text]. Columns\n"
		   "(csv/json): length_lo, length_hi (the bin's lengths in tokens), docs (its\n"
		   "documents, a histogram's spread over the bins it overlaps), tokens,\n"
		   "token_share (a fraction of all tokens); stats: documents, tokens, mean, p50,\n"
		   "p90, p99, max (tokens).\n\n"
		   "exit status: 0 ok, 1 data error, 2 usage error\n");
}

#define NBUCKETS 63 /* [2^b, 2^(b+1) - 1] for b = 0..62: every positive int64 length */

/* A dataset's documents and tokens per log2 bucket [2^b, 2^(b+1) - 1]. */
struct buckets {
	double cnt[NBUCKETS], tok[NBUCKETS];
	double cmax;       /* largest document count of a bucket */
	int first, last;   /* non-empty range; first > last when empty */
};

/* The bucket of a length v >= 1: floor(log2 v). */
static int bucket_of(int64_t v)
{
	int b = 0;
	while (v >>= 1)
		b++;
	return b;
}

/* Adds count documents with total tokens over [lo, hi] to log2 buckets, spreading them in
 * proportion to the overlap (uniform inside the bin). A single length goes straight to its
 * bucket: raw lengths (10^7 of them) must not cost a pass over every bucket each. */
static void bucket_add(double *cnt, double *tok, int64_t lo, int64_t hi, double count,
		       double tokens)
{
	if (lo == hi) {
		int b = bucket_of(lo);
		cnt[b] += count;
		tok[b] += tokens;
		return;
	}
	double span = (double)(hi - lo + 1);
	for (int b = bucket_of(lo); b <= bucket_of(hi); b++) {
		double blo = ldexp(1.0, b), bhi = ldexp(1.0, b + 1) - 1;
		double x = fmax(blo, (double)lo), y = fmin(bhi, (double)hi);
		if (x > y)
			continue;
		double f = (y - x + 1) / span;
		cnt[b] += count * f;
		tok[b] += tokens * f;
	}
}

/* A bucket's bounds as exact integers (the top one ends at INT64_MAX). */
static unsigned long long bucket_lo(int b)
{
	return 1ULL << b;
}

static unsigned long long bucket_hi(int b)
{
	return (1ULL << b) - 1 + (1ULL << b);
}

static void fill_buckets(const struct bp_dataset *ds, struct buckets *bk)
{
	memset(bk, 0, sizeof(*bk));
	if (ds->bins)
		for (size_t i = 0; i < ds->nbins; i++)
			bucket_add(bk->cnt, bk->tok, ds->bins[i].lo, ds->bins[i].hi,
				   (double)ds->bins[i].count, (double)ds->bins[i].tokens);
	else
		for (size_t i = 0; i < ds->nlengths; i++)
			bucket_add(bk->cnt, bk->tok, ds->lengths[i], ds->lengths[i], 1.0,
				   (double)ds->lengths[i]);
	bk->first = NBUCKETS;
	bk->last = -1;
	for (int b = 0; b < NBUCKETS; b++)
		if (bk->cnt[b] > 0) {
			bk->cmax = fmax(bk->cmax, bk->cnt[b]);
			if (b < bk->first)
				bk->first = b;
			bk->last = b;
		}
}

/* The reader, and for a list of lengths what the sampler's file order sees: the samples, the
 * .idx's sequences, and whether ids are the file's or the positions. */
static void print_format(const struct bp_dataset *ds)
{
	printf("  format:    %s", !strcmp(ds->format, "balplan") ? BP_DATASET_FORMAT
			       : ds->format[0] ? ds->format : "-");
	if (!ds->lengths) {
		printf(", a histogram of %zu bins (not a sample index)\n", ds->nbins);
		return;
	}
	printf(", %zu samples", ds->nlengths);
	if (ds->sequences)
		printf(" (documents) of %lld sequences", (long long)ds->sequences);
	if (ds->ids) {
		int64_t lo = ds->ids[0], hi = ds->ids[0];
		for (size_t i = 1; i < ds->nlengths; i++) {
			lo = ds->ids[i] < lo ? ds->ids[i] : lo;
			hi = ds->ids[i] > hi ? ds->ids[i] : hi;
		}
		printf(", sample ids: explicit, %lld to %lld\n", (long long)lo, (long long)hi);
	} else {
		printf(", sample ids: their positions, 0 to %zu\n", ds->nlengths - 1);
	}
}

static void print_text(const struct bp_dataset *ds, const struct buckets *bk, const char *sha)
{
	const struct bp_dataset_stats *s = &ds->stats;
	printf("dataset %s (%s)\n", ds->name, bp_dataset_kind_name(ds->kind));
	printf("  source:    %s\n  tokenizer: %s\n  license:   %s\n  sha256:    %s\n",
	       ds->source ? ds->source : "-", ds->tokenizer ? ds->tokenizer : "-",
	       ds->license ? ds->license : "-", sha);
	print_format(ds);
	printf("  documents %lld, tokens %lld, mean %.1f, p50 %lld, p90 %lld, p99 %lld, max %lld\n",
	       (long long)s->count, (long long)s->tokens, s->mean, (long long)s->p50,
	       (long long)s->p90, (long long)s->p99, (long long)s->max);
	int wid = 17; /* the length column widens for lengths past 2^26 */
	for (int b = bk->first; b <= bk->last; b++) {
		char range[48];
		int n = snprintf(range, sizeof(range), "%llu-%llu", bucket_lo(b), bucket_hi(b));
		if (n > wid)
			wid = n;
	}
	printf("\n  %-*s %9s %7s  %s\n", wid, "length", "docs", "tokens", "documents");
	for (int b = bk->first; b <= bk->last; b++) {
		char range[48], bar[41];
		snprintf(range, sizeof(range), "%llu-%llu", bucket_lo(b), bucket_hi(b));
		int w = bk->cmax > 0 ? (int)lround(40.0 * bk->cnt[b] / bk->cmax) : 0;
		memset(bar, '#', (size_t)w);
		bar[w] = 0;
		printf("  %-*s %9.0f %6.1f%%  %s\n", wid, range, bk->cnt[b],
		       s->tokens ? 100.0 * bk->tok[b] / (double)s->tokens : 0.0, bar);
	}
}

/* --format csv|json: the histogram (both) and the provenance and statistics (json). */
static void print_data(const struct bp_dataset *ds, const struct buckets *bk, const char *sha,
		       enum cmd_format fmt)
{
	static const char *const cols[] = {"length_lo", "length_hi", "docs", "tokens",
					   "token_share"};
	const struct bp_dataset_stats *s = &ds->stats;
	struct cmd_table t;
	int first = 1;
	if (fmt == CMD_FORMAT_JSON) {
		printf("{");
		cmd_json_key(stdout, &first, "name");
		cmd_json_str(stdout, ds->name);
		cmd_json_key(stdout, &first, "kind");
		cmd_json_str(stdout, bp_dataset_kind_name(ds->kind));
		cmd_json_key(stdout, &first, "source");
		cmd_json_str(stdout, ds->source);
		cmd_json_key(stdout, &first, "tokenizer");
		cmd_json_str(stdout, ds->tokenizer);
		cmd_json_key(stdout, &first, "license");
		cmd_json_str(stdout, ds->license);
		cmd_json_key(stdout, &first, "sha256");
		cmd_json_str(stdout, sha);
		/* print_format's facts: the reader, the samples of a sample index (null for a
		 * histogram), the .idx's sequences, and whose ids they are */
		cmd_json_key(stdout, &first, "format");
		cmd_json_str(stdout, !strcmp(ds->format, "balplan") ? BP_DATASET_FORMAT
				     : ds->format[0] ? ds->format : NULL);
		cmd_json_key(stdout, &first, "samples");
		if (ds->lengths)
			printf("%zu", ds->nlengths);
		else
			printf("null");
		cmd_json_key(stdout, &first, "sequences");
		if (ds->lengths && ds->sequences)
			printf("%lld", (long long)ds->sequences);
		else
			printf("null");
		cmd_json_key(stdout, &first, "ids");
		cmd_json_str(stdout, !ds->lengths ? NULL : ds->ids ? "explicit" : "positions");
		cmd_json_key(stdout, &first, "stats");
		printf("{\"documents\": %lld, \"tokens\": %lld, \"mean\": ", (long long)s->count,
		       (long long)s->tokens);
		cmd_json_num(stdout, s->mean);
		printf(", \"p50\": %lld, \"p90\": %lld, \"p99\": %lld, \"max\": %lld}",
		       (long long)s->p50, (long long)s->p90, (long long)s->p99, (long long)s->max);
		cmd_json_key(stdout, &first, "histogram");
	}
	cmd_table_begin(&t, stdout, fmt, cols, BP_ARRAY_LEN(cols));
	for (int b = bk->first; b <= bk->last; b++) {
		cmd_table_int(&t, (long long)bucket_lo(b));
		cmd_table_int(&t, (long long)bucket_hi(b));
		cmd_table_num(&t, bk->cnt[b]);
		cmd_table_num(&t, bk->tok[b]);
		cmd_table_num(&t, s->tokens ? bk->tok[b] / (double)s->tokens : 0.0);
	}
	cmd_table_end(&t);
	if (fmt == CMD_FORMAT_JSON)
		printf("}\n");
}

/* ---- SVG ---- */

/* Appends s escaped for XML (cmdutil.h cmd_xml_escape). */
static void sb_xml(struct bp_sb *sb, const char *s)
{
	char *e = cmd_xml_escape(s);
	if (!e)
		sb->oom = 1;
	else
		bp_sb_adds(sb, e);
	free(e);
}

/* A power of two as a short label: 512, 4K, 128K, 1M. */
static void pow2_label(int b, char *buf, size_t n)
{
	if (b >= 60)
		snprintf(buf, n, "%dE", 1 << (b - 60));
	else if (b >= 50)
		snprintf(buf, n, "%dP", 1 << (b - 50));
	else if (b >= 40)
		snprintf(buf, n, "%dT", 1 << (b - 40));
	else if (b >= 30)
		snprintf(buf, n, "%dG", 1 << (b - 30));
	else if (b >= 20)
		snprintf(buf, n, "%dM", 1 << (b - 20));
	else if (b >= 10)
		snprintf(buf, n, "%dK", 1 << (b - 10));
	else
		snprintf(buf, n, "%d", 1 << b);
}

/* The smallest "nice" axis top (1, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten) at or above
 * v; each divides into five grid steps that print short. */
static double nice_top(double v)
{
	static const double m[] = {1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0};
	if (v <= 0)
		return 1.0;
	double p = pow(10.0, floor(log10(v)));
	for (int i = 0; i < 9; i++)
		if (m[i] * p >= v * (1.0 - 1e-12))
			return m[i] * p;
	return 10.0 * p;
}

/* Draws the histogram: per log2 bucket, the share of documents and the share of tokens, side
 * by side on one percentage axis; title with name, kind and statistics. */
static void svg_histogram(struct bp_sb *sb, const struct bp_dataset *ds, const struct buckets *bk)
{
	const struct bp_dataset_stats *s = &ds->stats;
	const double W = 800, H = 440, L = 70, R = 20, T = 78, B = 70;
	const double pw = W - L - R, ph = H - T - B;
	int nb = bk->last - bk->first + 1;
	double top = 0;
	for (int b = bk->first; b <= bk->last; b++) {
		top = fmax(top, s->count ? 100.0 * bk->cnt[b] / (double)s->count : 0.0);
		top = fmax(top, s->tokens ? 100.0 * bk->tok[b] / (double)s->tokens : 0.0);
	}
	top = nice_top(top);

	bp_sb_addf(sb, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
		  W, H, W, H);
	bp_sb_adds(sb, "<title>");
	sb_xml(sb, ds->name);
	bp_sb_addf(sb, " (%s): document length histogram</title>\n",
		   bp_dataset_kind_name(ds->kind));
	bp_sb_addf(sb, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n",
		  W, H);
	bp_sb_addf(sb, "<text x=\"%.0f\" y=\"24\" font-size=\"16\" font-weight=\"bold\">", L);
	sb_xml(sb, ds->name);
	bp_sb_addf(sb, " (%s)</text>\n", bp_dataset_kind_name(ds->kind));
	bp_sb_addf(sb, "<text x=\"%.0f\" y=\"44\">documents %lld, tokens %lld, mean %.1f, "
		      "p50 %lld, p90 %lld, p99 %lld, max %lld</text>\n", L, (long long)s->count,
		  (long long)s->tokens, s->mean, (long long)s->p50, (long long)s->p90,
		  (long long)s->p99, (long long)s->max);
	/* legend */
	bp_sb_addf(sb, "<rect x=\"%.0f\" y=\"54\" width=\"12\" height=\"12\" fill=\"#4477aa\"/>"
		      "<text x=\"%.0f\" y=\"65\">documents (%% of count)</text>\n", L, L + 18);
	bp_sb_addf(sb, "<rect x=\"%.0f\" y=\"54\" width=\"12\" height=\"12\" fill=\"#ee7733\"/>"
		      "<text x=\"%.0f\" y=\"65\">tokens (%% of total)</text>\n", L + 190, L + 208);
	/* grid and y axis: five steps */
	for (int i = 0; i <= 5; i++) {
		double y = T + ph - ph * i / 5.0;
		bp_sb_addf(sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			      "stroke=\"#dddddd\"/>\n", L, y, L + pw, y);
		bp_sb_addf(sb, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
			  L - 6, y + 4, top * i / 5.0);
	}
	/* bars */
	double slot = nb > 0 ? pw / nb : pw, bw = slot * 0.38;
	for (int b = bk->first; b <= bk->last; b++) {
		double x = L + slot * (b - bk->first) + slot * 0.1;
		double dc = s->count ? 100.0 * bk->cnt[b] / (double)s->count : 0.0;
		double dt = s->tokens ? 100.0 * bk->tok[b] / (double)s->tokens : 0.0;
		double hc = ph * dc / top, ht = ph * dt / top;
		bp_sb_addf(sb, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
			      "fill=\"#4477aa\"><title>%llu-%llu tokens: %.2f%% of documents"
			      "</title></rect>\n", x, T + ph - hc, bw, hc, bucket_lo(b),
			  bucket_hi(b), dc);
		bp_sb_addf(sb, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
			      "fill=\"#ee7733\"><title>%llu-%llu tokens: %.2f%% of tokens"
			      "</title></rect>\n", x + bw, T + ph - ht, bw, ht, bucket_lo(b),
			  bucket_hi(b), dt);
	}
	/* x axis: a tick at each bucket's lower edge, labelled every k-th so labels never touch */
	int every = nb > 24 ? 4 : nb > 12 ? 2 : 1;
	bp_sb_addf(sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		      "stroke=\"#000000\"/>\n", L, T + ph, L + pw, T + ph);
	bp_sb_addf(sb, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		      "stroke=\"#000000\"/>\n", L, T, L, T + ph);
	for (int b = bk->first; b <= bk->last + 1; b++) {
		double x = L + slot * (b - bk->first);
		char lab[16];
		bp_sb_addf(sb, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" "
			      "stroke=\"#000000\"/>\n", x, T + ph, x, T + ph + 5);
		if ((b - bk->first) % every)
			continue;
		pow2_label(b, lab, sizeof(lab));
		bp_sb_addf(sb, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x,
			  T + ph + 19, lab);
	}
	bp_sb_addf(sb, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">document length "
		      "(tokens; log2 bins, each from the label to the next)</text>\n",
		  L + pw / 2, H - 22);
	bp_sb_addf(sb, "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
		      "transform=\"rotate(-90 18 %.1f)\">share (%%)</text>\n", T + ph / 2,
		  T + ph / 2);
	bp_sb_adds(sb, "</svg>\n");
}

static int show(const char *spec, const struct bp_read_opts *ro, const char *svg,
		enum cmd_format fmt)
{
	struct bp_dataset ds;
	struct bp_error err;
	struct buckets bk;
	struct bp_sb sb = BP_SB_INIT;
	char sha[65];
	int rc = EXIT_OK;

	bp_dataset_init(&ds);
	if (cmd_load_dataset(spec, ro, &ds, sha, &err) < 0) {
		rc = cmd_error("%s", err.text);
		goto out;
	}
	fill_buckets(&ds, &bk);
	if (fmt != CMD_FORMAT_TEXT)
		print_data(&ds, &bk, sha, fmt);
	else if (!svg || strcmp(svg, "-"))
		print_text(&ds, &bk, sha);
	if (svg) {
		svg_histogram(&sb, &ds, &bk);
		if (sb.oom) {
			rc = cmd_error("cannot draw '%s': out of memory", svg);
			goto out;
		}
		if (cmd_write_file(svg, sb.buf, sb.len, &err) < 0)
			rc = cmd_error("cannot write '%s': %s", svg, err.text);
	}
out:
	bp_sb_release(&sb);
	bp_dataset_release(&ds);
	return rc;
}

int cmd_dataset(int argc, char **argv)
{
	static const struct option opts[] = {
		{"jsonl-field", required_argument, NULL, 'J'},
		{"length-field", required_argument, NULL, 'J'},
		{"tokens-field", required_argument, NULL, 'T'},
		{"id-field", required_argument, NULL, 'I'},
		{"skip-empty", no_argument, NULL, 'e'},
		{"svg", required_argument, NULL, 'S'},
		{"format", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct bp_read_opts ro = {.length_field = NULL, .tokens_field = NULL, .id_field = NULL};
	const char *svg = NULL, *field_opt = "jsonl-field";
	enum cmd_format fmt = CMD_FORMAT_TEXT;
	int c, li = 0, fmt_set = 0;
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		switch (c) {
		case 'J':
			ro.length_field = optarg;
			field_opt = opts[li].name; /* the alias the user wrote */
			break;
		case 'T': ro.tokens_field = optarg; break;
		case 'I': ro.id_field = optarg; break;
		case 'e': ro.skip_empty = 1; break;
		case 'S': svg = optarg; break;
		case 'f':
			if (cmd_opt_format("dataset", optarg, &fmt) < 0)
				return EXIT_USAGE;
			fmt_set = 1;
			break;
		case 'h': dataset_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("dataset", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
	}
	if (optind >= argc)
		return cmd_usage("dataset", "expected 'show NAME|FILE' or 'list'");
	const char *verb = argv[optind++]; /* getopt_long permuted options before operands */
	if (!strcmp(verb, "list")) {
		if (svg || fmt_set || ro.length_field || ro.tokens_field || ro.id_field ||
		    ro.skip_empty)
			return cmd_usage("dataset", "'--%s' applies to 'show' only",
					 svg ? "svg" : fmt_set ? "format"
					 : ro.length_field ? field_opt
					 : ro.tokens_field ? "tokens-field"
					 : ro.id_field ? "id-field" : "skip-empty");
		if (optind < argc)
			return cmd_usage("dataset", "unexpected argument '%s'",
					 cmd_cut(argv[optind]));
		for (size_t i = 0; i < bp_dataset_preset_count(); i++)
			printf("%s\n", bp_dataset_preset_name(i));
		return EXIT_OK;
	}
	if (!strcmp(verb, "show")) {
		if (argc - optind != 1)
			return cmd_usage("dataset", "'show' takes one dataset name or file");
		if (svg && cmd_refuse_overwrite("dataset", "--svg", svg, "dataset",
						bp_dataset_preset_text(argv[optind], &(size_t){0})
							? NULL
							: argv[optind]))
			return EXIT_USAGE;
		if (ro.length_field && ro.tokens_field)
			return cmd_usage("dataset", "--%s and --tokens-field exclude each other: a "
					 "sample's length is a count or a token array's size",
					 field_opt);
		if (fmt != CMD_FORMAT_TEXT && svg && !strcmp(svg, "-"))
			return cmd_usage("dataset", "--format %s and --svg '-' cannot both write to "
					 "standard output", fmt == CMD_FORMAT_CSV ? "csv" : "json");
		return show(argv[optind], &ro, svg, fmt);
	}
	return cmd_usage("dataset", "unknown verb '%s' (show or list)", cmd_cut(verb));
}
