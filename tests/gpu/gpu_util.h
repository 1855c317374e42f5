/* gpu_util.h: what the GPU kernel tests share (test_attention.cu, test_sparse_attention.cu):
 * a CUDA error check that ends the program, seeded N(0, 1) inputs, bf16 conversions, an
 * owning device buffer and the relative error every check uses. Define GPU_TEST_NAME (the
 * program's name, for messages) before including it. */
#ifndef BP_GPU_UTIL_H
#define BP_GPU_UTIL_H

#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#define CUDA_OK(x)                                                                          \
	do {                                                                                \
		cudaError_t e_ = (x);                                                       \
		if (e_ != cudaSuccess) {                                                    \
			fprintf(stderr, "%s: %s:%d: %s: %s\n", GPU_TEST_NAME, __FILE__,       \
				__LINE__, #x, cudaGetErrorString(e_));                      \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline double uniform01(uint64_t *s) /* in (0, 1) */
{
	return ((double)(splitmix(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Box-Muller over two uniforms. */
static inline double normal(uint64_t *s)
{
	double u = uniform01(s), v = uniform01(s);
	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* bf16 round to nearest even, and back (inputs are finite). */
static inline uint16_t to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* Device memory freed at the end of its scope. */
struct buf {
	void *p = nullptr;
	explicit buf(size_t bytes) { CUDA_OK(cudaMalloc(&p, bytes > 0 ? bytes : 16)); }
	~buf() { cudaFree(p); }
	buf(const buf &) = delete;
	buf &operator=(const buf &) = delete;
};

/* max |g - r| / max(max |r|, 1e-6); NaN in g gives NaN. (A NaN must end the scan: kept as
 * the running maximum, the next finite error would replace it, since e <= NaN is false.) */
static inline double rel_err(const std::vector<double> &g, const std::vector<double> &r)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < r.size(); i++) {
		double e = fabs(g[i] - r[i]);
		if (isnan(e))
			return e;
		if (e > num)
			num = e;
		den = fmax(den, fabs(r[i]));
	}
	return num / fmax(den, 1e-6);
}

#endif
