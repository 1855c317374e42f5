/* bench_pack_batch.c: the length-only packers on one global batch at a time, the size they
 * see inside `balplan solve` (issue 10, item 6): WLB-LLM Table 1's 7B-128K layout, a global
 * batch of 4 x 131072 tokens (pp 4 x dp 1 micro-batches of L = 131072), documents drawn by
 * the sampler from each named dataset, over-long ones truncated to L, about 100 per batch.
 * Times bp_pack_bfd, bp_pack_ffd and a reference "multipack-style" FFD written here: a
 * comparison sort (qsort on length descending, index ascending) and a first-fit scan over
 * the open bins, O(n log n + n * bins), what multipack's numba ffd does. The reference's
 * packing is checked equal to bp_pack_ffd's on every batch. Not a test: run by hand, pinned
 * to one core (taskset). One warm-up pass, then the median of R passes over S batches; a
 * pass times every batch once per packer, and the per-batch time is the pass over S.
 * usage: bench_pack_batch [STEPS [RUNS [DATASET...]]]
 *        defaults 1000 7 synthetic-longtail prolong-512k */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataset.h"
#include "pack.h"
#include "bench_util.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

struct item {
	int64_t len;
	size_t i;
};

static int cmp_item(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	if (x->len != y->len)
		return x->len < y->len ? 1 : -1;
	return (x->i > y->i) - (x->i < y->i);
}

/* The reference: sort, then the first open bin with room (bp_packer_fn's contract). */
static int ref_ffd(const int64_t *len, size_t n, int64_t cap, int *bin_of, size_t *nbins,
		   struct bp_error *err)
{
	struct item *it = malloc((n ? n : 1) * sizeof(*it));
	int64_t *room = malloc((n ? n : 1) * sizeof(*room));
	size_t nb = 0;
	if (!it || !room) {
		free(it);
		free(room);
		return bp_errorf(err, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		it[i] = (struct item){len[i], i};
	qsort(it, n, sizeof(*it), cmp_item);
	for (size_t q = 0; q < n; q++) {
		size_t b = 0;
		while (b < nb && room[b] < it[q].len)
			b++;
		if (b == nb)
			room[nb++] = cap;
		room[b] -= it[q].len;
		bin_of[it[q].i] = (int)b;
	}
	*nbins = nb;
	free(it);
	free(room);
	return 0;
}

int main(int argc, char **argv)
{
	const int64_t L = 131072, steps_default = 1000, runs_default = 7;
	int64_t steps = steps_default, runs = runs_default;
	const char *defaults[2] = {"synthetic-longtail", "prolong-512k"};
	struct bp_error err;
	if ((argc > 1 && (bp_parse_int64(argv[1], &steps, "STEPS", &err) < 0 || steps < 1)) ||
	    (argc > 2 && (bp_parse_int64(argv[2], &runs, "RUNS", &err) < 0 || runs < 1))) {
		fprintf(stderr, "usage: bench_pack_batch [STEPS [RUNS [DATASET...]]]\n");
		return 2;
	}
	const char *const *names = argc > 3 ? (const char *const *)argv + 3 : defaults;
	int nnames = argc > 3 ? argc - 3 : 2;
	const char *packers[3] = {"bfd", "ffd", "ref-ffd"};
	bp_packer_fn fns[3] = {bp_pack_bfd, bp_pack_ffd, ref_ffd};
	printf("7B-128K global batches (4 x %lld tokens, L = %lld), %lld per dataset, median of "
	       "%lld passes; us per batch\n", (long long)L, (long long)L, (long long)steps,
	       (long long)runs);
	printf("%-22s %9s %9s %9s %9s %12s %12s\n", "dataset", "docs", "bfd", "ffd", "ref-ffd",
	       "ref/bfd", "ref/ffd");
	for (int d = 0; d < nnames; d++) {
		struct bp_dataset ds;
		struct bp_batches b = {0};
		bp_dataset_init(&ds);
		struct bp_sampler_opts so = {.steps = steps, .tokens_per_step = 4 * L,
					     .docs_per_step = 0, .max_len = L,
					     .overlen = BP_OVERLEN_TRUNCATE, .seed = 1};
		if (bp_dataset_preset(&ds, names[d], &err) < 0 || bp_sample(&ds, &so, &b, &err) < 0) {
			fprintf(stderr, "bench_pack_batch: error: '%s': %s\n", names[d], err.text);
			return 1;
		}
		size_t maxn = 1, docs = 0;
		for (size_t s = 0; s < b.n; s++) {
			docs += b.b[s].ndocs;
			if (b.b[s].ndocs > maxn)
				maxn = b.b[s].ndocs;
		}
		int64_t *len = malloc(maxn * sizeof(int64_t));
		int *bin = malloc(maxn * sizeof(int)), *ref = malloc(maxn * sizeof(int));
		double *t = malloc((size_t)runs * sizeof(double)), med[3];
		if (!len || !bin || !ref || !t) {
			fprintf(stderr, "bench_pack_batch: error: out of memory\n");
			return 1;
		}
		/* Correctness first, untimed: ffd and the reference agree on every batch. */
		for (size_t s = 0; s < b.n; s++) {
			size_t n = b.b[s].ndocs, nb = 0, nr = 0;
			for (size_t i = 0; i < n; i++)
				len[i] = b.b[s].docs[i].len;
			if (bp_pack_ffd(len, n, L, bin, &nb, &err) < 0 ||
			    ref_ffd(len, n, L, ref, &nr, &err) < 0) {
				fprintf(stderr, "bench_pack_batch: error: %s\n", err.text);
				return 1;
			}
			if (nb != nr || (n && memcmp(bin, ref, n * sizeof(int)))) {
				fprintf(stderr, "bench_pack_batch: error: '%s' batch %zu: ffd differs "
					"from the reference\n", names[d], s);
				return 1;
			}
		}
		for (int a = 0; a < 3; a++) {
			for (int64_t r = -1; r < runs; r++) { /* r = -1: warm-up */
				double el = 0.0;
				for (size_t s = 0; s < b.n; s++) {
					size_t n = b.b[s].ndocs, nb = 0;
					for (size_t i = 0; i < n; i++)
						len[i] = b.b[s].docs[i].len;
					double t0 = now_us();
					int rc = fns[a](len, n, L, bin, &nb, &err);
					el += now_us() - t0;
					if (rc < 0) {
						fprintf(stderr, "bench_pack_batch: error: %s: %s\n",
							packers[a], err.text);
						return 1;
					}
				}
				if (r >= 0)
					t[r] = el / (double)b.n;
			}
			qsort(t, (size_t)runs, sizeof(double), cmp_double);
			med[a] = t[(runs - 1) / 2];
		}
		printf("%-22s %9.1f %9.2f %9.2f %9.2f %11.2fx %11.2fx\n", names[d],
		       (double)docs / (double)b.n, med[0], med[1], med[2], med[2] / med[0],
		       med[2] / med[1]);
		free(len);
		free(bin);
		free(ref);
		free(t);
		bp_batches_release(&b);
		bp_dataset_release(&ds);
	}
	return 0;
}
