/* bench_pack.c: timing of the length-only packers of issue 3 (bp_pack_bfd, bp_pack_ffd, and
 * for reference bp_pack_lpt_tokens) over N documents drawn from an embedded dataset preset
 * (synthetic-longtail by default), lengths capped at L. Not a test: a benchmark, run by hand.
 * One warm-up, then the median of R runs (wall clock, CLOCK_MONOTONIC); pin it to one core
 * with taskset. Target (issue 3): BFD over 1M documents under 1 s.
 * usage: bench_pack [N [L [R [DATASET [SEED]]]]]   defaults 1000000 131072 5 synthetic-longtail 1 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataset.h"
#include "pack.h"
#include "bench_util.h"

static int parse_pos(const char *s, int64_t *out, const char *what)
{
	struct bp_error err;
	if (bp_parse_int64(s, out, what, &err) < 0 || *out < 1) {
		fprintf(stderr, "bench_pack: error: %s must be a positive integer (got '%s')\n",
			what, s);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int64_t n = 1000000, cap = 131072, runs = 5, seed = 1;
	const char *name = argc > 4 ? argv[4] : "synthetic-longtail";
	if ((argc > 1 && parse_pos(argv[1], &n, "N") < 0) ||
	    (argc > 2 && parse_pos(argv[2], &cap, "L") < 0) ||
	    (argc > 3 && parse_pos(argv[3], &runs, "R") < 0) ||
	    (argc > 5 && parse_pos(argv[5], &seed, "SEED") < 0) || argc > 6)
		return 2;
	struct bp_dataset ds;
	struct bp_error err;
	struct bp_rng rng;
	bp_dataset_init(&ds);
	if (bp_dataset_preset(&ds, name, &err) < 0) {
		fprintf(stderr, "bench_pack: error: %s\n", err.text);
		return 1;
	}
	int64_t *len = malloc((size_t)n * sizeof(int64_t)), tokens = 0;
	int *bin = malloc((size_t)n * sizeof(int));
	double *t = malloc((size_t)runs * sizeof(double));
	if (!len || !bin || !t) {
		fprintf(stderr, "bench_pack: error: out of memory\n");
		return 1;
	}
	bp_rng_seed(&rng, (uint64_t)seed);
	for (int64_t i = 0; i < n; i++) {
		int64_t l = bp_dataset_draw(&ds, &rng);
		len[i] = l > cap ? cap : l; /* the sampler's truncate rule */
		tokens += len[i];
	}
	printf("%lld documents from %s (seed %lld), %lld tokens, L = %lld, lower bound %lld "
	       "bins; median of %lld runs\n", (long long)n, name, (long long)seed,
	       (long long)tokens, (long long)cap, (long long)((tokens + cap - 1) / cap),
	       (long long)runs);
	const char *names[3] = {"bfd", "ffd", "lpt-tokens"};
	for (int a = 0; a < 3; a++) {
		size_t nbins = 0;
		for (int64_t r = -1; r < runs; r++) { /* r = -1: warm-up */
			double t0 = now_ms();
			int rc;
			if (a == 2) {
				/* multipack's packer with the bins FFD needed, a few more if short */
				size_t k = (size_t)((tokens + cap - 1) / cap);
				int64_t *fill = malloc((k + 64) * sizeof(int64_t));
				rc = fill ? 1 : -1;
				while (rc == 1 && k < (size_t)n) {
					t0 = now_ms();
					rc = bp_pack_lpt_tokens(len, (size_t)n, k, cap, bin, fill, &err);
					if (rc == 1) {
						k += k / 64 + 1;
						int64_t *nf = realloc(fill, (k + 64) * sizeof(int64_t));
						if (!nf) {
							rc = -1;
							break;
						}
						fill = nf;
					}
				}
				free(fill);
				nbins = k;
			} else {
				rc = (a ? bp_pack_ffd : bp_pack_bfd)(len, (size_t)n, cap, bin, &nbins,
								     &err);
			}
			double t1 = now_ms();
			if (rc != 0) {
				fprintf(stderr, "bench_pack: error: %s: %s\n", names[a],
					rc < 0 ? err.text : "did not fit");
				return 1;
			}
			if (r >= 0)
				t[r] = t1 - t0;
		}
		qsort(t, (size_t)runs, sizeof(double), cmp_double);
		printf("%-10s %10.1f ms  (min %.1f, max %.1f)  %zu bins\n", names[a],
		       t[(runs - 1) / 2], t[0], t[runs - 1], nbins);
	}
	free(len);
	free(bin);
	free(t);
	bp_dataset_release(&ds);
	return 0;
}
