/* cuda_runtime.h, emulated: the part of the CUDA language and runtime API that balplan's
 * kernels (executor/attn.cu, executor/attn_sparse.cu) and their tests (tests/gpu) use, for
 * running them on the CPU (tests/emu/README.md). The emulated builds put tests/emu/include
 * first on the include path, so this shadows the toolkit's header. Sources get here through
 * tests/emu/emu_prep.c, which rewrites kernel launches and dynamic shared memory into the
 * calls below and marks every synchronisation site; the rest compiles as plain C++17.
 *
 * Only what is used is here: anything else fails to compile, which is the point (a kernel
 * that starts using a new feature needs the emulator taught it, not guessed). */
#ifndef BP_EMU_CUDA_RUNTIME_H
#define BP_EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

/* Function and variable qualifiers: device code is host code here. __shared__ is left
 * undefined on purpose: emu_prep rewrites `extern __shared__` arrays and refuses static ones,
 * so a leftover is a compile error rather than a silently per-thread array. */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __restrict__ __restrict

/* Vector types, aligned as CUDA's so that UBSan's alignment check sees a misaligned
 * 16-byte access as the GPU would fault on it. */
struct uint3 {
	unsigned x, y, z;
};
struct dim3 {
	unsigned x, y, z;
	constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct alignas(8) uint2 {
	unsigned x, y;
};
struct alignas(16) uint4 {
	unsigned x, y, z, w;
};
struct alignas(8) int2 {
	int x, y;
};
struct alignas(16) int4 {
	int x, y, z, w;
};
struct alignas(8) float2 {
	float x, y;
};
struct alignas(16) float4 {
	float x, y, z, w;
};
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
	return uint4{x, y, z, w};
}
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

/* ---- runtime API types ---- */

typedef enum cudaError {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorInvalidDevicePointer = 17,
	cudaErrorInvalidMemcpyDirection = 21,
	cudaErrorInvalidResourceHandle = 400,
	cudaErrorNotReady = 600,
} cudaError_t;

typedef struct cuemu_stream *cudaStream_t;
typedef struct cuemu_event *cudaEvent_t;

enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
	cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01

/* ---- the emulator's side of the device language ---- */

namespace cuemu {

/* The running thread's coordinates (sched.cpp). */
extern uint3 cur_thread, cur_block;
extern dim3 cur_block_dim, cur_grid_dim;
extern unsigned cur_lane; /* linear thread index mod 32 */

/* Marks the source site of the synchronisation or WMMA call that follows (emu_prep inserts
 * these): file and line for messages; func and nth (the nth __syncthreads or __syncwarp of
 * that function, from 1) name a barrier for EMU_DROP. */
void at(const char *file, int line, const char *func, int nth);

void block_barrier();
void warp_barrier(unsigned mask);

enum shuffle_mode { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };
void shuffle(unsigned mask, const void *in, void *out, size_t bytes, shuffle_mode mode, int arg,
	     int width);

/* Base of the running block's dynamic shared memory (exactly the launch's bytes). */
unsigned char *dynamic_shared();

/* A kernel did what the GPU would not allow: prints where (kernel, block, thread, last marked
 * site) and aborts. */
[[noreturn]] void fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct launch_config {
	dim3 grid, block;
	size_t shared;
	cudaStream_t stream;
	const char *name;   /* as written at the launch */
	const void *kernel; /* identity, for cudaFuncSetAttribute's limit */
};

/* Runs a whole grid now: every thread calls body(arg). Refused configurations set the last
 * error and run nothing, as cudaLaunchKernel does. */
void run_launch(const launch_config &cfg, void (*body)(void *), void *arg);

/* kernel<<<grid, block, shared, stream>>>(args) becomes configure(kernel, "kernel", grid, block,
 * shared, stream)(args): the arguments are converted to the parameter types once, as CUDA
 * copies them into parameter space, and every thread calls the kernel on that copy. */
template <class... P> class kernel_call {
public:
	kernel_call(void (*k)(P...), const launch_config &c) : kernel_(k), cfg_(c) {}
	template <class... A> void operator()(A &&...args)
	{
		static_assert(sizeof...(A) == sizeof...(P),
			      "kernel launched with a wrong argument count");
		std::tuple<typename std::decay<P>::type...> params(std::forward<A>(args)...);
		call c{kernel_, &params};
		run_launch(cfg_, &call::run, &c);
	}

private:
	struct call {
		void (*kernel)(P...);
		std::tuple<typename std::decay<P>::type...> *params;
		static void run(void *p)
		{
			call *c = static_cast<call *>(p);
			std::apply(c->kernel, *c->params);
		}
	};
	void (*kernel_)(P...);
	launch_config cfg_;
};

template <class... P>
kernel_call<P...> configure(void (*kernel)(P...), const char *name, dim3 grid, dim3 block,
		      size_t shared = 0, cudaStream_t stream = nullptr)
{
	launch_config c{grid, block, shared, stream, name, reinterpret_cast<const void *>(kernel)};
	return kernel_call<P...>(kernel, c);
}

cudaError_t set_shared_limit(const void *kernel, int bytes);

} /* namespace cuemu */

/* Built-in variables, read-only as in CUDA. */
#define threadIdx (static_cast<const uint3 &>(::cuemu::cur_thread))
#define blockIdx (static_cast<const uint3 &>(::cuemu::cur_block))
#define blockDim (static_cast<const dim3 &>(::cuemu::cur_block_dim))
#define gridDim (static_cast<const dim3 &>(::cuemu::cur_grid_dim))
static constexpr int warpSize = 32;

static inline void __syncthreads() { cuemu::block_barrier(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { cuemu::warp_barrier(mask); }

template <class T>
static inline T emu_shuffle(unsigned mask, T v, cuemu::shuffle_mode m, int arg, int width)
{
	static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
		      "shuffles move up to 8 bytes of a trivially copyable type");
	T r;
	cuemu::shuffle(mask, &v, &r, sizeof v, m, arg, width);
	return r;
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
	return emu_shuffle(mask, v, cuemu::SHFL_IDX, src, width);
}
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32)
{
	return emu_shuffle(mask, v, cuemu::SHFL_UP, (int)d, width);
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32)
{
	return emu_shuffle(mask, v, cuemu::SHFL_DOWN, (int)d, width);
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
	return emu_shuffle(mask, v, cuemu::SHFL_XOR, lane_mask, width);
}

/* Threads never run concurrently (a fiber runs until it synchronises), so an atomic is a
 * plain read-modify-write; the order of atomics between threads still follows the schedule. */
template <class T> static inline T emu_atomic_add(T *p, T v)
{
	T old = *p;
	*p = old + v;
	return old;
}
static inline float atomicAdd(float *p, float v) { return emu_atomic_add(p, v); }
static inline double atomicAdd(double *p, double v) { return emu_atomic_add(p, v); }
static inline int atomicAdd(int *p, int v) { return emu_atomic_add(p, v); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { return emu_atomic_add(p, v); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
	return emu_atomic_add(p, v);
}

template <class T> static inline T __ldg(const T *p) { return *p; }

static inline unsigned __float_as_uint(float f)
{
	unsigned u;
	memcpy(&u, &f, sizeof u);
	return u;
}
static inline float __uint_as_float(unsigned u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}
static inline int __float_as_int(float f)
{
	int u;
	memcpy(&u, &f, sizeof u);
	return u;
}
static inline float __int_as_float(int u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* CUDA's integer min and max overloads (device code calls them unqualified). Mixed types
 * are ambiguous here, where CUDA would promote: a compile error to look at, not a guess. */
#define EMU_MINMAX(T)                                                                       \
	static inline T min(T a, T b) { return a < b ? a : b; }                             \
	static inline T max(T a, T b) { return a > b ? a : b; }
EMU_MINMAX(int)
EMU_MINMAX(unsigned)
EMU_MINMAX(long)
EMU_MINMAX(unsigned long)
EMU_MINMAX(long long)
EMU_MINMAX(unsigned long long)
#undef EMU_MINMAX

/* ---- runtime API ---- */

cudaError_t cudaMalloc(void **p, size_t bytes);
template <class T> static inline cudaError_t cudaMalloc(T **p, size_t bytes)
{
	return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
			    cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

template <class... P>
static inline cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr,
					       int value)
{
	if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
		return cudaErrorInvalidValue;
	return cuemu::set_shared_limit(reinterpret_cast<const void *>(kernel), value);
}

#endif
