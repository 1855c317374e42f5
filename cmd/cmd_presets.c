/* cmd_presets.c: `balplan presets`: the built-in models, GPUs, datasets and methods, as text
 * or, for scripts, one kind's names, or the lists as csv / json (cmdutil.h cmd_table). */
#include <getopt.h>
#include <math.h>
#include <string.h>

#include "cmdutil.h"
#include "commands.h"
#include "method.h"
#include "presets.h"

/* The TP degrees of a profile's attention tables, "4,8". */
static const char *profile_tps(const struct bp_profile *p)
{
	static char buf[96];
	size_t k = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < p->nattn && k + 12 < sizeof(buf); i++)
		k += (size_t)snprintf(buf + k, sizeof(buf) - k, "%s%d", i ? "," : "", p->attn[i].tp);
	return buf;
}

static const char *const kinds[] = {"models", "gpus", "datasets", "profiles", "methods"};
enum { K_MODELS, K_GPUS, K_DATASETS, K_PROFILES, K_METHODS, K_ALL };

static int kind_of(const char *s)
{
	for (int k = 0; k < K_ALL; k++)
		if (!strcmp(s, kinds[k]))
			return k;
	return -1;
}

static void names_of(int kind, enum cmd_format fmt)
{
	static const char *const cols[] = {"name"};
	struct cmd_table t;
	size_t n = kind == K_MODELS ? bp_model_preset_count()
		 : kind == K_GPUS ? bp_gpu_preset_count()
		 : kind == K_DATASETS ? bp_dataset_preset_count()
		 : kind == K_PROFILES ? bp_embedded_profiles_count : bp_method_count();
	if (fmt == CMD_FORMAT_CSV)
		cmd_table_begin(&t, stdout, fmt, cols, 1);
	else if (fmt == CMD_FORMAT_JSON)
		printf("[");
	for (size_t i = 0; i < n; i++) {
		const char *name = kind == K_MODELS ? bp_model_preset_at(i)->name
				 : kind == K_GPUS ? bp_gpu_preset_at(i)->name
				 : kind == K_DATASETS ? bp_dataset_preset_name(i)
				 : kind == K_PROFILES ? bp_embedded_profiles[i].name
				 : bp_method_at(i)->name;
		if (fmt == CMD_FORMAT_CSV) {
			cmd_table_str(&t, name);
		} else if (fmt == CMD_FORMAT_JSON) {
			printf("%s", i ? ", " : "");
			cmd_json_str(stdout, name);
		} else {
			printf("%s\n", name);
		}
	}
	if (fmt == CMD_FORMAT_JSON)
		printf("]\n");
}

/* One kind's list: the text section, or a csv table / json array (without its newline). */
static void list_models(enum cmd_format fmt)
{
	static const char *const cols[] = {"name", "params", "layers", "hidden", "q_heads",
					   "kv_heads", "ffn", "vocab"};
	struct cmd_table t;
	if (fmt == CMD_FORMAT_TEXT)
		printf("models:\n  %-14s %7s %7s %6s %4s %4s %7s %7s\n", "name", "params",
		       "layers", "hidden", "q", "kv", "ffn", "vocab");
	else
		cmd_table_begin(&t, stdout, fmt, cols, BP_ARRAY_LEN(cols));
	for (size_t i = 0; i < bp_model_preset_count(); i++) {
		const struct bp_model *m = bp_model_preset_at(i);
		if (fmt == CMD_FORMAT_TEXT) {
			printf("  %-14s %6.2fB %7d %6d %4d %4d %7d %7d\n", m->name,
			       bp_model_params(m) / 1e9, m->layers, m->hidden, m->heads,
			       m->kv_heads, m->ffn, m->vocab);
			continue;
		}
		cmd_table_str(&t, m->name);
		cmd_table_int(&t, (long long)bp_model_params(m));
		cmd_table_int(&t, m->layers);
		cmd_table_int(&t, m->hidden);
		cmd_table_int(&t, m->heads);
		cmd_table_int(&t, m->kv_heads);
		cmd_table_int(&t, m->ffn);
		cmd_table_int(&t, m->vocab);
	}
	if (fmt != CMD_FORMAT_TEXT)
		cmd_table_end(&t);
}

static void list_gpus(enum cmd_format fmt)
{
	static const char *const cols[] = {"name", "bf16_tflops", "hbm_gib", "hbm_gbps",
					   "nvlink_gbps", "net_gbps", "gpus_per_node"};
	struct cmd_table t;
	if (fmt == CMD_FORMAT_TEXT)
		printf("gpus:\n  %-8s %10s %8s %9s %9s %9s %5s\n", "name", "bf16", "HBM",
		       "HBM bw", "NVLink", "network", "/node");
	else
		cmd_table_begin(&t, stdout, fmt, cols, BP_ARRAY_LEN(cols));
	for (size_t i = 0; i < bp_gpu_preset_count(); i++) {
		const struct bp_gpu *g = bp_gpu_preset_at(i);
		if (fmt == CMD_FORMAT_TEXT) {
			printf("  %-8s %5.0f TF/s %4.0f GiB %4.0f GB/s %4.0f GB/s %4.0f GB/s %5d\n",
			       g->name, g->bf16_tflops, g->hbm_bytes / 1073741824.0, g->hbm_gbps,
			       g->nvlink_gbps, g->net_gbps, g->gpus_per_node);
			continue;
		}
		cmd_table_str(&t, g->name);
		cmd_table_num(&t, g->bf16_tflops);
		cmd_table_num(&t, g->hbm_bytes / 1073741824.0);
		cmd_table_num(&t, g->hbm_gbps);
		cmd_table_num(&t, g->nvlink_gbps);
		cmd_table_num(&t, g->net_gbps);
		cmd_table_int(&t, g->gpus_per_node);
	}
	if (fmt != CMD_FORMAT_TEXT)
		cmd_table_end(&t);
}

static void list_datasets(enum cmd_format fmt)
{
	static const char *const cols[] = {"name"};
	struct cmd_table t;
	if (fmt == CMD_FORMAT_TEXT)
		printf("datasets:\n");
	else
		cmd_table_begin(&t, stdout, fmt, cols, BP_ARRAY_LEN(cols));
	for (size_t i = 0; i < bp_dataset_preset_count(); i++)
		if (fmt == CMD_FORMAT_TEXT)
			printf("  %s\n", bp_dataset_preset_name(i));
		else
			cmd_table_str(&t, bp_dataset_preset_name(i));
	if (fmt != CMD_FORMAT_TEXT)
		cmd_table_end(&t);
}

static void list_profiles(enum cmd_format fmt)
{
	static const char *const cols[] = {"name", "device", "date", "tp"};
	struct cmd_table t;
	if (fmt == CMD_FORMAT_TEXT)
		printf("profiles (measured, shipped; --profile NAME):\n");
	else
		cmd_table_begin(&t, stdout, fmt, cols, BP_ARRAY_LEN(cols));
	for (size_t i = 0; i < bp_embedded_profiles_count; i++) {
		struct bp_profile p;
		struct bp_error err = {{0}};
		char sha[65];
		const char *name = bp_embedded_profiles[i].name;
		bp_profile_init(&p);
		int ok = cmd_load_profile(name, &p, sha, &err) == 0;
		if (fmt != CMD_FORMAT_TEXT) {
			cmd_table_str(&t, name);
			cmd_table_str(&t, ok ? p.prov.device : NULL);
			cmd_table_str(&t, ok ? p.prov.date : NULL);
			cmd_table_str(&t, ok ? profile_tps(&p) : NULL);
		} else if (ok) {
			printf("  %-26s %s, %s; tp %s\n", name, p.prov.device, p.prov.date,
			       profile_tps(&p));
		} else { /* cannot happen: the build reads them (tests/cli) */
			printf("  %-26s (unreadable: %s)\n", name, err.text);
		}
		bp_profile_release(&p);
	}
	if (fmt != CMD_FORMAT_TEXT)
		cmd_table_end(&t);
}

static void list_methods(enum cmd_format fmt)
{
	static const char *const cols[] = {"name", "summary", "paper", "params"};
	struct cmd_table t;
	if (fmt == CMD_FORMAT_TEXT)
		printf("methods:\n");
	else
		cmd_table_begin(&t, stdout, fmt, cols, BP_ARRAY_LEN(cols));
	for (size_t i = 0; i < bp_method_count(); i++) {
		const struct bp_method *m = bp_method_at(i);
		if (fmt != CMD_FORMAT_TEXT) {
			char params[512];
			size_t k = 0;
			params[0] = '\0';
			for (size_t j = 0; m->params && m->params[j] && k < sizeof(params); j++)
				k += (size_t)snprintf(params + k, sizeof(params) - k, "%s%s",
						      j ? " " : "", m->params[j]);
			cmd_table_str(&t, m->name);
			cmd_table_str(&t, m->summary);
			cmd_table_str(&t, m->paper);
			cmd_table_str(&t, params);
			continue;
		}
		printf("  %-10s %s\n  %-10s (%s)\n", m->name, m->summary, "", m->paper);
		if (m->params) {
			printf("  %-10s params:", "");
			for (size_t k = 0; m->params[k]; k++)
				printf(" %s", m->params[k]);
			printf("\n");
		}
	}
	if (fmt != CMD_FORMAT_TEXT)
		cmd_table_end(&t);
}

/* A number as a parameter's range shows it: integers exactly, reals with %g, infinities. */
static void real_text(double x, char *buf, size_t n)
{
	if (isinf(x))
		snprintf(buf, n, "%sinf", x < 0 ? "-" : "");
	else
		snprintf(buf, n, "%g", x);
}

/* One method's parameters from its row (plan/method.h bp_method_param_spec): name, type,
 * default and range or choices, what it is. A parameter without a spec has a default or
 * range that depends on the request (plans/README.md describes it). */
static int list_params(const char *name, enum cmd_format fmt)
{
	const struct bp_method *m = bp_method_find(name);
	if (!m)
		return cmd_usage("presets", "--params '%s' is not a method ('balplan presets "
				 "--names methods' lists them)", cmd_cut(name));
	static const char *const cols[] = {"name", "type", "default", "range", "about"};
	struct cmd_table t;
	if (fmt == CMD_FORMAT_TEXT)
		printf("%s parameters (--param NAME=VALUE):\n  %-18s %-7s %-12s %-25s %s\n",
		       m->name, "name", "type", "default", "range", "about");
	else
		cmd_table_begin(&t, stdout, fmt, cols, BP_ARRAY_LEN(cols));
	for (size_t i = 0; m->params && m->params[i]; i++) {
		const char *key = m->params[i];
		const struct bp_param_spec *sp = bp_method_param_spec(m, key);
		char def[64] = "-", range[256] = "-", lo[32], hi[32];
		const char *type = "text", *about = "read by the method itself (a default or range "
						    "that may depend on the request): plans/README.md";
		const char *const *choices = NULL;
		if (sp && sp->type == BP_PARAM_INT) {
			type = "int";
			snprintf(def, sizeof(def), "%lld", (long long)sp->idef);
			snprintf(range, sizeof(range), "[%lld, %lld]", (long long)sp->imin,
				 (long long)sp->imax);
		} else if (sp && sp->type == BP_PARAM_REAL) {
			type = "real";
			real_text(sp->rdef, def, sizeof(def));
			real_text(sp->rmin, lo, sizeof(lo));
			real_text(sp->rmax, hi, sizeof(hi));
			/* unbounded: the method checks the value itself (its about says how) */
			if (!isinf(sp->rmin) || !isinf(sp->rmax))
				snprintf(range, sizeof(range), "[%s, %s]", lo, hi);
		} else if (sp && sp->type == BP_PARAM_CHOICE) {
			type = "choice";
			choices = sp->choices;
		}
		if (choices) {
			snprintf(def, sizeof(def), "%s", choices[0]);
			size_t k = 0;
			range[0] = '\0';
			for (size_t c = 0; choices[c] && k < sizeof(range); c++)
				k += (size_t)snprintf(range + k, sizeof(range) - k, "%s%s",
						      c ? "|" : "", choices[c]);
		}
		if (sp)
			about = sp->about ? sp->about : "";
		if (fmt != CMD_FORMAT_TEXT) {
			cmd_table_str(&t, key);
			cmd_table_str(&t, type);
			cmd_table_str(&t, def);
			cmd_table_str(&t, range);
			cmd_table_str(&t, about);
			continue;
		}
		printf("  %-18s %-7s %-12s %-25s %s\n", key, type, def, range, about);
	}
	if (!m->params && fmt == CMD_FORMAT_TEXT)
		printf("  (none)\n");
	if (fmt != CMD_FORMAT_TEXT) {
		cmd_table_end(&t);
		if (fmt == CMD_FORMAT_JSON)
			printf("\n");
	}
	return EXIT_OK;
}

static void (*const lists[])(enum cmd_format) = {list_models, list_gpus, list_datasets,
						 list_profiles, list_methods};

int cmd_presets(int argc, char **argv)
{
	static const struct option opts[] = {
		{"names", required_argument, NULL, 'n'},
		{"list", required_argument, NULL, 'l'},
		{"format", required_argument, NULL, 'f'},
		{"params", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *names = NULL, *list = NULL, *params = NULL;
	enum cmd_format fmt = CMD_FORMAT_TEXT;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			printf("usage: balplan presets [--names KIND | --list KIND | --params METHOD]\n"
			       "                       [--format F]\n\n"
			       "Lists the built-in models, GPUs, datasets, shipped measured profiles\n"
			       "(--profile NAME) and methods; with --names, only the names of one\n"
			       "kind, one per line (for scripts); with --list, only the list of one\n"
			       "kind. KIND: models, gpus, datasets, profiles or methods. --params\n"
			       "METHOD lists one method's --param names with their type, default,\n"
			       "range or choices, and what each is, from the method's table row\n"
			       "(columns name, type, default, range, about).\n\n"
			       "  --format F   text, csv or json [text]: csv is one list (--list or\n"
			       "               --names KIND) with a header row; json is an object of\n"
			       "               the five lists (arrays of objects), one list's array\n"
			       "               with --list, or an array of names with --names\n\n"
			       "columns (csv/json): models: name, params (a count), layers, hidden,\n"
			       "  q_heads, kv_heads, ffn, vocab; gpus: name, bf16_tflops (dense peak),\n"
			       "  hbm_gib, hbm_gbps, nvlink_gbps, net_gbps, gpus_per_node; datasets:\n"
			       "  name; profiles: name, device, date, tp (the attention tables' TP\n"
			       "  degrees, comma-separated); methods: name, summary, paper, params\n"
			       "  (space-separated)\n\n"
			       "exit status: 0 ok, 2 usage error\n");
			return EXIT_OK;
		}
		if (c == 'n') {
			names = optarg;
			continue;
		}
		if (c == 'l') {
			list = optarg;
			continue;
		}
		if (c == 'p') {
			params = optarg;
			continue;
		}
		if (c == 'f') {
			if (cmd_opt_format("presets", optarg, &fmt) < 0)
				return EXIT_USAGE;
			continue;
		}
		return cmd_usage("presets", "unknown or incomplete option '%s'",
				 cmd_cut(argv[optind - 1]));
	}
	if (optind < argc)
		return cmd_usage("presets", "unexpected argument '%s'",
					 cmd_cut(argv[optind]));
	if (!!names + !!list + !!params > 1)
		return cmd_usage("presets", "--names, --list and --params exclude each other");
	if (params)
		return list_params(params, fmt);
	int kind = K_ALL;
	if (names && (kind = kind_of(names)) < 0)
		return cmd_usage("presets", "--names '%s' is not models, gpus, datasets, "
				 "profiles or methods", names);
	if (list && (kind = kind_of(list)) < 0)
		return cmd_usage("presets", "--list '%s' is not models, gpus, datasets, "
				 "profiles or methods", cmd_cut(list));
	if (names) {
		names_of(kind, fmt);
		return EXIT_OK;
	}
	if (fmt == CMD_FORMAT_CSV && kind == K_ALL)
		return cmd_usage("presets", "--format csv holds one list: name it with --list "
				 "KIND (models, gpus, datasets, profiles or methods)");
	if (kind != K_ALL) {
		lists[kind](fmt);
		if (fmt == CMD_FORMAT_JSON)
			printf("\n");
		return EXIT_OK;
	}
	if (fmt == CMD_FORMAT_JSON)
		printf("{");
	for (int k = 0; k < K_ALL; k++) {
		if (fmt == CMD_FORMAT_JSON) {
			printf("%s", k ? ",\n" : "");
			cmd_json_str(stdout, kinds[k]);
			printf(": ");
		}
		lists[k](fmt);
	}
	if (fmt == CMD_FORMAT_JSON)
		printf("}\n");
	return EXIT_OK;
}
