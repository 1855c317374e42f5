/* kat_sparse.h: the hand-made latency table M[x, k] named KAT-2 (M = MoBA's pair count
 * P(x, 256, k) / 1e6: block 256, x in 4K..32K, k in 8..64; forward in ms, backward twice the
 * forward), shared by
 * test_costkinds.c (Perf.predict on it) and test_sparse.c (Alg. 1 on it). */
#ifndef BP_KAT_SPARSE_H
#define BP_KAT_SPARSE_H
#include <stddef.h>

#include "profile.h"

static double kat_x[] = {4096, 8192, 16384, 32768};
static int kat_k[] = {8, 16, 24, 32, 48, 64};
static double kat_fwd[] = {
	6.031,	8.391,	 8.391,	  8.391,   8.391,   8.391,  /* 4096 */
	13.898, 24.646,	 31.199,  33.559,  33.559,  33.559, /* 8192 */
	29.630, 57.156,	 80.486,  99.623,  125.313, 134.226, /* 16384 */
	61.096, 122.175, 179.061, 231.752, 324.551, 400.572, /* 32768 */
};
static double kat_bwd[24];

static struct bp_sparse_table kat_table(void)
{
	struct bp_sparse_table t = {.tp = 1, .block = 256, .nx = 4, .nk = 6, .x = kat_x,
				    .k = kat_k, .fwd = kat_fwd, .bwd = kat_bwd};
	for (size_t i = 0; i < 24; i++)
		kat_bwd[i] = 2.0 * kat_fwd[i];
	return t;
}

#endif
