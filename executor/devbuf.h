/* devbuf.h: device buffers that only grow, with the checks of every CUDA call, shared by the
 * CUDA backend (executor/backend_cuda.c) and the measuring profiler (profiler/gpu/balprof.c).
 * A buffer grows either in stream order (cudaFreeAsync, cudaMallocAsync: the backend, whose
 * sends may wait for their receiver, so nothing may synchronise the device) or after
 * synchronising the stream (cudaFree, cudaMalloc: the profiler, one process timing one
 * thing at a time). New memory is filled on the stream: with seeded bf16 values (attention
 * sees ordinary softmax inputs, GEMMs no denormals) or a plausible log-sum-exp. Header only,
 * so each program compiles it with its own CUDA runtime. */
#ifndef BP_DEVBUF_H
#define BP_DEVBUF_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bp.h"

#define BP_DEV_FILL_CHUNK (256 * 1024) /* bytes of seeded values copied up, then replicated */

struct bp_dbuf {
	void *p;
	size_t cap;
};

enum { BP_FILL_NONE, BP_FILL_BF16, BP_FILL_LSE };

/* Where and how buffers grow. */
struct bp_dev {
	cudaStream_t stream;
	const uint16_t *fill; /* BP_DEV_FILL_CHUNK bytes of seeded bf16 (bp_dev_make_fill) */
	int async;            /* stream-ordered, with 1/8 headroom when it fits; else exact */
};

static inline int bp_dev_fail(struct bp_error *err, cudaError_t e, const char *call, int line)
{
	return bp_errorf(err, "%s failed (devbuf.h:%d): %s", call, line, cudaGetErrorString(e));
}

#define BP_DEV_CHECK(call)                                                             \
	do {                                                                           \
		cudaError_t e_ = (call);                                               \
		if (e_ != cudaSuccess)                                                 \
			return bp_dev_fail(err, e_, #call, __LINE__);                  \
	} while (0)

/* n seeded values in [-1/16, 1/16] as bf16 (round to nearest even of the fp32 bits). */
static inline void bp_dev_make_fill(uint16_t *v, size_t n, uint64_t seed)
{
	uint64_t x = seed;
	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		float f = ((float)(x >> 40) / 16777216.0f - 0.5f) * 0.125f;
		uint32_t b;
		memcpy(&b, &f, 4);
		b += 0x7fffu + ((b >> 16) & 1u);
		v[i] = (uint16_t)(b >> 16);
	}
}

/* Fills n bytes at p on the stream as fill says: the seeded chunk, then doubling device
 * copies; or 0x40404040 (3.004f, a log-sum-exp). */
static inline int bp_dev_fill(const struct bp_dev *d, void *p, size_t n, int fill,
			      struct bp_error *err)
{
	if (fill == BP_FILL_LSE)
		BP_DEV_CHECK(cudaMemsetAsync(p, 0x40, n, d->stream));
	if (fill != BP_FILL_BF16)
		return 0;
	size_t first = n < BP_DEV_FILL_CHUNK ? n : BP_DEV_FILL_CHUNK;
	char *c = p;
	BP_DEV_CHECK(cudaMemcpyAsync(c, d->fill, first, cudaMemcpyHostToDevice, d->stream));
	for (size_t done = first; done < n;) {
		size_t k = done < n - done ? done : n - done;
		BP_DEV_CHECK(cudaMemcpyAsync(c + done, c, k, cudaMemcpyDeviceToDevice, d->stream));
		done += k;
	}
	return 0;
}

/* Makes b hold at least bytes (grow only, its old contents lost), the new memory filled;
 * name says what for in the error (NULL: nothing). */
static inline int bp_dbuf_ensure(const struct bp_dev *d, struct bp_dbuf *b, size_t bytes,
				 int fill, const char *name, struct bp_error *err)
{
	if (bytes <= b->cap)
		return 0;
	if (!d->async)
		BP_DEV_CHECK(cudaStreamSynchronize(d->stream));
	if (b->p && d->async)
		BP_DEV_CHECK(cudaFreeAsync(b->p, d->stream));
	else if (b->p)
		BP_DEV_CHECK(cudaFree(b->p));
	b->p = NULL;
	b->cap = 0;
	size_t exact = (bytes + 255) & ~(size_t)255, want = exact;
	cudaError_t e;
	if (d->async) {
		want = (bytes + bytes / 8 + 255) & ~(size_t)255;
		e = cudaMallocAsync(&b->p, want, d->stream);
		if (e == cudaErrorMemoryAllocation) {
			(void)cudaGetLastError(); /* clear it and try without the headroom */
			want = exact;
			e = cudaMallocAsync(&b->p, want, d->stream);
		}
	} else {
		e = cudaMalloc(&b->p, want);
	}
	if (e != cudaSuccess) {
		b->p = NULL;
		(void)cudaGetLastError();
		return bp_errorf(err, "%s of %zu bytes%s%s failed (devbuf.h:%d): %s",
				 d->async ? "cudaMallocAsync" : "cudaMalloc", want,
				 name ? " for " : "", name ? name : "", __LINE__,
				 cudaGetErrorString(e));
	}
	b->cap = want;
	return bp_dev_fill(d, b->p, want, fill, err);
}

static inline void bp_dbuf_free(struct bp_dbuf *b)
{
	if (b->p)
		cudaFree(b->p);
	b->p = NULL;
	b->cap = 0;
}

#endif
