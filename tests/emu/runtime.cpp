/* runtime.cpp: the CUDA runtime API of the emulator (tests/emu/README.md), the calls the
 * kernels' host code and the GPU tests make.
 *
 * Device memory is host memory holding exactly the bytes asked for, so AddressSanitizer
 * reports the first byte past a buffer as compute-sanitizer's memcheck would; 256-byte
 * aligned like cudaMalloc's; and filled with 0xff bytes, NaN in bf16 and fp32, so that a value
 * read before anything wrote it shows in the results. Copies and memsets are checked against
 * the table of live allocations: a device range must lie inside one allocation, a host
 * pointer must not point into one, so a wrong size or direction is an error here, not a
 * silent overrun.
 *
 * A kernel runs to completion at its launch, so streams only exist to be checked (created,
 * not destroyed twice, valid at a launch) and every operation is ordered already: missing
 * stream synchronisation cannot show here (a limit, README). Events read the wall clock. */
#include "emu_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <map>
#include <set>

struct cuemu_stream {
	unsigned flags;
};

struct cuemu_event {
	double ms;
	bool recorded;
};

namespace cuemu {
namespace {

std::map<uintptr_t, size_t> allocs; /* base -> bytes */
std::set<const cuemu_stream *> streams;
std::set<const cuemu_event *> events;
std::map<const void *, size_t> shared_limits;
cudaError_t last_error = cudaSuccess;

/* The live allocation holding p, or allocs.end(). */
std::map<uintptr_t, size_t>::const_iterator owner(const void *p)
{
	const uintptr_t a = (uintptr_t)p;
	auto it = allocs.upper_bound(a);
	if (it == allocs.begin())
		return allocs.end();
	--it;
	return a < it->first + it->second ? it : allocs.end();
}

/* [p, p + n) inside one allocation; prints why not for `what`. */
bool device_span(const void *p, size_t n, const char *what, const char *side)
{
	auto it = owner(p);
	if (it == allocs.end()) {
		fprintf(stderr, "emu: %s: %s pointer %p is not device memory\n", what, side, p);
		return false;
	}
	if ((uintptr_t)p + n > it->first + it->second) {
		fprintf(stderr, "emu: %s: %zu bytes at %s offset %zu run past its %zu-byte "
			"allocation\n", what, n, side, (size_t)((uintptr_t)p - it->first),
			it->second);
		return false;
	}
	return true;
}

bool host_span(const void *p, size_t n, const char *what, const char *side)
{
	(void)n;
	if (owner(p) != allocs.end()) {
		fprintf(stderr, "emu: %s: %s pointer %p is device memory, the direction says "
			"host\n", what, side, p);
		return false;
	}
	return true;
}

cudaError_t fail(cudaError_t e)
{
	last_error = e;
	return e;
}

double now_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

} /* namespace */

cudaError_t set_error(cudaError_t e)
{
	return fail(e);
}

size_t shared_limit(const void *kernel)
{
	auto it = shared_limits.find(kernel);
	return it == shared_limits.end() ? 0 : it->second;
}

cudaError_t set_shared_limit(const void *kernel, int bytes)
{
	/* An H100's opt-in maximum per block: 227 KiB. */
	if (bytes < 0 || bytes > 227 * 1024) {
		fprintf(stderr, "emu: cudaFuncSetAttribute: %d bytes of dynamic shared memory, "
			"above the 227 KiB an H100 block may have\n", bytes);
		return fail(cudaErrorInvalidValue);
	}
	shared_limits[kernel] = (size_t)bytes;
	return cudaSuccess;
}

bool stream_valid(cudaStream_t s)
{
	return !s || streams.count(s);
}

} /* namespace cuemu */

using cuemu::fail;

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	if (!p)
		return fail(cudaErrorInvalidValue);
	*p = nullptr;
	if (bytes == 0)
		return cudaSuccess;
	void *m = nullptr;
	if (posix_memalign(&m, 256, bytes) != 0)
		return fail(cudaErrorMemoryAllocation);
	memset(m, 0xff, bytes);
	cuemu::allocs[(uintptr_t)m] = bytes;
	*p = m;
	return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	if (!p)
		return cudaSuccess;
	auto it = cuemu::allocs.find((uintptr_t)p);
	if (it == cuemu::allocs.end()) {
		fprintf(stderr, "emu: cudaFree(%p): not an allocation's start (freed twice, or not "
			"from cudaMalloc)\n", p);
		return fail(cudaErrorInvalidDevicePointer);
	}
	cuemu::allocs.erase(it);
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
	const char *what = "cudaMemcpy";
	if (bytes == 0)
		return cudaSuccess;
	if (!dst || !src)
		return fail(cudaErrorInvalidValue);
	bool ok = true;
	switch (kind) {
	case cudaMemcpyHostToHost:
		ok = cuemu::host_span(dst, bytes, what, "destination") &&
		     cuemu::host_span(src, bytes, what, "source");
		break;
	case cudaMemcpyHostToDevice:
		ok = cuemu::device_span(dst, bytes, what, "destination") &&
		     cuemu::host_span(src, bytes, what, "source");
		break;
	case cudaMemcpyDeviceToHost:
		ok = cuemu::host_span(dst, bytes, what, "destination") &&
		     cuemu::device_span(src, bytes, what, "source");
		break;
	case cudaMemcpyDeviceToDevice:
		ok = cuemu::device_span(dst, bytes, what, "destination") &&
		     cuemu::device_span(src, bytes, what, "source");
		break;
	case cudaMemcpyDefault:
		ok = (cuemu::owner(dst) == cuemu::allocs.end() ||
		      cuemu::device_span(dst, bytes, what, "destination")) &&
		     (cuemu::owner(src) == cuemu::allocs.end() ||
		      cuemu::device_span(src, bytes, what, "source"));
		break;
	default:
		return fail(cudaErrorInvalidMemcpyDirection);
	}
	if (!ok)
		return fail(cudaErrorInvalidValue);
	memmove(dst, src, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
			    cudaStream_t stream)
{
	if (!cuemu::stream_valid(stream))
		return fail(cudaErrorInvalidResourceHandle);
	return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
	if (bytes == 0)
		return cudaSuccess;
	if (!cuemu::device_span(p, bytes, "cudaMemset", "destination"))
		return fail(cudaErrorInvalidValue);
	memset(p, value, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream)
{
	if (!cuemu::stream_valid(stream))
		return fail(cudaErrorInvalidResourceHandle);
	return cudaMemset(p, value, bytes);
}

cudaError_t cudaGetLastError()
{
	const cudaError_t e = cuemu::last_error;
	cuemu::last_error = cudaSuccess;
	return e;
}

cudaError_t cudaPeekAtLastError()
{
	return cuemu::last_error;
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "no error";
	case cudaErrorInvalidValue:
		return "invalid argument";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	case cudaErrorInvalidConfiguration:
		return "invalid configuration argument";
	case cudaErrorInvalidDevicePointer:
		return "invalid device pointer";
	case cudaErrorInvalidMemcpyDirection:
		return "invalid copy direction for memcpy";
	case cudaErrorInvalidResourceHandle:
		return "invalid resource handle";
	case cudaErrorNotReady:
		return "device not ready";
	}
	return "unrecognized error code";
}

cudaError_t cudaGetDeviceCount(int *n)
{
	if (!n)
		return fail(cudaErrorInvalidValue);
	*n = 1;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	return device == 0 ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaGetDevice(int *device)
{
	if (!device)
		return fail(cudaErrorInvalidValue);
	*device = 0;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize()
{
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
	if (!s || (flags & ~(unsigned)cudaStreamNonBlocking))
		return fail(cudaErrorInvalidValue);
	*s = new cuemu_stream{flags};
	cuemu::streams.insert(*s);
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	if (!s || !cuemu::streams.erase(s))
		return fail(cudaErrorInvalidResourceHandle);
	delete s;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	return cuemu::stream_valid(s) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	if (!e)
		return fail(cudaErrorInvalidValue);
	*e = new cuemu_event{0, false};
	cuemu::events.insert(*e);
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	if (!e || !cuemu::events.erase(e))
		return fail(cudaErrorInvalidResourceHandle);
	delete e;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	if (!e || !cuemu::events.count(e) || !cuemu::stream_valid(s))
		return fail(cudaErrorInvalidResourceHandle);
	e->ms = cuemu::now_ms();
	e->recorded = true;
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	if (!e || !cuemu::events.count(e))
		return fail(cudaErrorInvalidResourceHandle);
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	if (!ms || !start || !end || !cuemu::events.count(start) || !cuemu::events.count(end))
		return fail(cudaErrorInvalidResourceHandle);
	if (!start->recorded || !end->recorded)
		return fail(cudaErrorNotReady);
	*ms = (float)(end->ms - start->ms);
	return cudaSuccess;
}
