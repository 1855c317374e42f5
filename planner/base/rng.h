/* rng.h: the seeded generator every random choice in the planner draws from.
 * xoshiro256** seeded through splitmix64: fast, reproducible on every platform, owned by the
 * caller (never global), so a plan depends only on --seed. */
#ifndef BP_RNG_H
#define BP_RNG_H
#include <stdint.h>

struct bp_rng {
	uint64_t s[4];
};

void bp_rng_seed(struct bp_rng *r, uint64_t seed);
uint64_t bp_rng_next(struct bp_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double bp_rng_uniform(struct bp_rng *r);
/* Uniform integer in [0, n); n > 0. Unbiased (rejection). */
uint64_t bp_rng_below(struct bp_rng *r, uint64_t n);

#endif
