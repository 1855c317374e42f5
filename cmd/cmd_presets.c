/* cmd_presets.c: `balplan presets`: the built-in models, GPUs, datasets and methods. */
#include <getopt.h>
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

int cmd_presets(int argc, char **argv)
{
	static const struct option opts[] = {
		{"names", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *names = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			printf("usage: balplan presets [--names "
			       "models|gpus|datasets|profiles|methods]\n\n"
			       "Lists the built-in models, GPUs, datasets, shipped measured profiles\n"
			       "(--profile NAME) and methods; with --names, only the names of one\n"
			       "kind, one per line (for scripts).\n\n"
			       "exit status: 0 ok, 2 usage error\n");
			return EXIT_OK;
		}
		if (c == 'n') {
			names = optarg;
			continue;
		}
		return cmd_usage("presets", "unknown or incomplete option '%s'",
				 cmd_cut(argv[optind - 1]));
	}
	if (optind < argc)
		return cmd_usage("presets", "unexpected argument '%s'",
					 cmd_cut(argv[optind]));
	if (names) {
		if (!strcmp(names, "models"))
			for (size_t i = 0; i < bp_model_preset_count(); i++)
				printf("%s\n", bp_model_preset_at(i)->name);
		else if (!strcmp(names, "gpus"))
			for (size_t i = 0; i < bp_gpu_preset_count(); i++)
				printf("%s\n", bp_gpu_preset_at(i)->name);
		else if (!strcmp(names, "datasets"))
			for (size_t i = 0; i < bp_dataset_preset_count(); i++)
				printf("%s\n", bp_dataset_preset_name(i));
		else if (!strcmp(names, "profiles"))
			for (size_t i = 0; i < bp_embedded_profiles_count; i++)
				printf("%s\n", bp_embedded_profiles[i].name);
		else if (!strcmp(names, "methods"))
			for (size_t i = 0; i < bp_method_count(); i++)
				printf("%s\n", bp_method_at(i)->name);
		else
			return cmd_usage("presets", "--names '%s' is not models, gpus, datasets, "
					 "profiles or methods", names);
		return EXIT_OK;
	}
	printf("models:\n  %-14s %7s %7s %6s %4s %4s %7s %7s\n", "name", "params", "layers",
	       "hidden", "q", "kv", "ffn", "vocab");
	for (size_t i = 0; i < bp_model_preset_count(); i++) {
		const struct bp_model *m = bp_model_preset_at(i);
		printf("  %-14s %6.2fB %7d %6d %4d %4d %7d %7d\n", m->name,
		       bp_model_params(m) / 1e9, m->layers, m->hidden, m->heads, m->kv_heads,
		       m->ffn, m->vocab);
	}
	printf("gpus:\n  %-8s %10s %8s %9s %9s %9s %5s\n", "name", "bf16", "HBM", "HBM bw",
	       "NVLink", "network", "/node");
	for (size_t i = 0; i < bp_gpu_preset_count(); i++) {
		const struct bp_gpu *g = bp_gpu_preset_at(i);
		printf("  %-8s %5.0f TF/s %4.0f GiB %4.0f GB/s %4.0f GB/s %4.0f GB/s %5d\n", g->name,
		       g->bf16_tflops, g->hbm_bytes / 1073741824.0, g->hbm_gbps, g->nvlink_gbps,
		       g->net_gbps, g->gpus_per_node);
	}
	printf("datasets:\n");
	for (size_t i = 0; i < bp_dataset_preset_count(); i++)
		printf("  %s\n", bp_dataset_preset_name(i));
	printf("profiles (measured, shipped; --profile NAME):\n");
	for (size_t i = 0; i < bp_embedded_profiles_count; i++) {
		struct bp_profile p;
		struct bp_error err = {{0}};
		char sha[65];
		bp_profile_init(&p);
		if (cmd_load_profile(bp_embedded_profiles[i].name, &p, sha, &err) == 0)
			printf("  %-26s %s, %s; tp %s\n", bp_embedded_profiles[i].name,
			       p.prov.device, p.prov.date, profile_tps(&p));
		else /* cannot happen: the build reads them (tests/cli) */
			printf("  %-26s (unreadable: %s)\n", bp_embedded_profiles[i].name, err.text);
		bp_profile_release(&p);
	}
	printf("methods:\n");
	for (size_t i = 0; i < bp_method_count(); i++) {
		const struct bp_method *m = bp_method_at(i);
		printf("  %-10s %s\n  %-10s (%s)\n", m->name, m->summary, "", m->paper);
		if (m->params) {
			printf("  %-10s params:", "");
			for (size_t k = 0; m->params[k]; k++)
				printf(" %s", m->params[k]);
			printf("\n");
		}
	}
	return EXIT_OK;
}
