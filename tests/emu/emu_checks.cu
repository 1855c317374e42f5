/* emu_checks.cu: the CUDA emulator's own test (tests/emu/README.md; label emu), built like
 * the kernels through emu_prep.
 *
 * First, that it computes what CUDA defines: a shared-memory block reduction under every
 * schedule, shuffles of each kind, atomics, wmma products in all four operand layouts and
 * both store layouts with an ldm wider than the tile (small integers, so every order of
 * summation gives the exact result), bf16 rounding, device memory that reads as NaN until
 * written. Then that each check the README claims fires: every such case runs in a child
 * process that must end with the emulator's message (or the sanitizers'), or must get the
 * error code the CUDA call would return. The reduction with its barrier removed must give a
 * wrong sum. Cases for AddressSanitizer and UBSan run in the sanitizer build only (EMU_SANITIZE)
 * and say so elsewhere. With EMU_PREP (emu_prep's path), also that emu_prep refuses a static
 * __shared__ variable.
 * usage: emu_checks [EMU_PREP]. Exit status: 0 all passed, 1 a failure. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <type_traits>
#include <vector>

using namespace nvcuda;

namespace {

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> frag_b;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			printf("emu_checks: %s:%d: %s does not hold\n", __FILE__, __LINE__,  \
			       #cond);                                                      \
			return 1;                                                           \
		}                                                                           \
	} while (0)

const cudaMemcpyKind H2D = cudaMemcpyHostToDevice, D2H = cudaMemcpyDeviceToHost;

/* ---- kernels ---- */

__global__ void reduce_kernel(const float *in, float *out)
{
	extern __shared__ float part[];
	const unsigned t = threadIdx.x;
	part[t] = in[blockIdx.x * blockDim.x + t];
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s)
			part[t] += part[t + s];
		__syncthreads();
	}
	if (t == 0)
		out[blockIdx.x] = part[0];
}

__global__ void shuffle_kernel(int *out)
{
	const int lane = (int)(threadIdx.x & 31);
	const int v = 3 * lane + 1;
	float f = (float)v;
	for (int w = 16; w > 0; w >>= 1)
		f += __shfl_xor_sync(0xffffffffu, f, w);
	int *o = out + threadIdx.x * 5;
	o[0] = __shfl_xor_sync(0xffffffffu, v, 5);
	o[1] = __shfl_sync(0xffffffffu, v, 7);
	o[2] = __shfl_up_sync(0xffffffffu, v, 3);
	o[3] = __shfl_down_sync(0xffffffffu, v, 2);
	o[4] = (int)f;
}

__global__ void atomic_kernel(unsigned *count, float *sum)
{
	atomicAdd(count, 1u);
	atomicAdd(sum, 0.5f);
}

template <class LA, class LB>
__global__ void mma_kernel(const __nv_bfloat16 *a, const __nv_bfloat16 *b, const float *c, float *d,
			   unsigned ld, int store_col)
{
	wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, LA> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LB> fb;
	frag_c fc;
	wmma::load_matrix_sync(fa, a, ld);
	wmma::load_matrix_sync(fb, b, ld);
	wmma::load_matrix_sync(fc, c, ld, wmma::mem_row_major);
	wmma::mma_sync(fc, fa, fb, fc);
	wmma::store_matrix_sync(d, fc, ld, store_col ? wmma::mem_col_major : wmma::mem_row_major);
}

__global__ void copy_kernel(const float *in, float *out)
{
	out[threadIdx.x] = in[threadIdx.x];
}

__global__ void early_return_kernel(float *p)
{
	if (threadIdx.x >= 32)
		return;
	__syncthreads();
	p[threadIdx.x] = 1.f;
}

__global__ void two_barriers_kernel(float *p)
{
	if (threadIdx.x < 32)
		__syncthreads();
	else
		__syncthreads();
	p[threadIdx.x] = 1.f;
}

__global__ void split_warp_kernel(float *p)
{
	if ((threadIdx.x & 31) < 16)
		__syncwarp();
	else
		__syncwarp();
	p[threadIdx.x] = 1.f;
}

__global__ void shuffle_returned_kernel(float *p)
{
	if ((threadIdx.x & 31) >= 16)
		return;
	p[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.f, 16);
}

__global__ void deadlock_kernel(float *p)
{
	if (threadIdx.x == 0)
		__syncwarp();
	__syncthreads();
	p[threadIdx.x] = 1.f;
}

__global__ void partial_mask_kernel(float *p)
{
	if ((threadIdx.x & 31) < 16)
		__syncwarp(0x0000ffffu);
	p[threadIdx.x] = 1.f;
}

__global__ void wmma_load_kernel(const __nv_bfloat16 *a, unsigned offset, unsigned ldm)
{
	frag_a f;
	wmma::load_matrix_sync(f, a + offset, ldm);
}

__global__ void wmma_lanes_kernel(const __nv_bfloat16 *a, float *d, int lane_dependent, int load_a)
{
	frag_a fa;
	frag_b fb;
	frag_c fc;
	if (load_a)
		wmma::load_matrix_sync(fa, a + (lane_dependent ? (threadIdx.x & 1) * 256 : 0), 16);
	wmma::load_matrix_sync(fb, a, 16);
	wmma::fill_fragment(fc, 0.f);
	wmma::mma_sync(fc, fa, fb, fc);
	wmma::store_matrix_sync(d, fc, 16, wmma::mem_row_major);
}

__global__ void big_shared_kernel(float *p)
{
	extern __shared__ float big[];
	big[threadIdx.x] = 2.f;
	__syncthreads();
	p[threadIdx.x] = big[threadIdx.x];
}

__global__ void global_overflow_kernel(float *p, int n)
{
	if (threadIdx.x == 0)
		p[n] = 1.f;
}

__global__ void shared_overflow_kernel(float *p)
{
	extern __shared__ float small[];
	small[threadIdx.x] = 1.f; /* launched with 32 threads and 31 floats */
	__syncthreads();
	p[threadIdx.x] = small[0];
}

__global__ void misaligned_kernel(const float *p, float *q)
{
	const uint4 v = *reinterpret_cast<const uint4 *>(p + 1);
	q[threadIdx.x] = (float)v.x;
}

/* ---- cases: each returns 0 when it holds ---- */

/* Device memory of n floats; dies with the error (the cases below run in children). */
float *dev_floats(size_t n)
{
	void *p = nullptr;
	if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) {
		printf("emu_checks: cudaMalloc failed\n");
		exit(1);
	}
	return static_cast<float *>(p);
}

int reduce_case()
{
	const int nb = 3, nt = 128;
	std::vector<float> h(nb * nt), out(nb);
	for (int i = 0; i < nb * nt; i++)
		h[i] = (float)(i % 17);
	float *in = dev_floats(h.size()), *o = dev_floats(nb);
	CHECK(cudaMemcpy(in, h.data(), h.size() * 4, H2D) == cudaSuccess);
	reduce_kernel<<<nb, nt, nt * sizeof(float)>>>(in, o);
	CHECK(cudaGetLastError() == cudaSuccess);
	CHECK(cudaMemcpy(out.data(), o, nb * 4, D2H) == cudaSuccess);
	for (int b = 0; b < nb; b++) {
		float want = 0;
		for (int t = 0; t < nt; t++)
			want += h[b * nt + t];
		CHECK(out[b] == want);
	}
	cudaFree(in);
	cudaFree(o);
	return 0;
}

/* The same with its first barrier removed: the sum must come out wrong. */
int reduce_wrong_case()
{
	return reduce_case() == 0;
}

int shuffle_case()
{
	int *d = nullptr;
	CHECK(cudaMalloc(&d, 64 * 5 * sizeof(int)) == cudaSuccess);
	shuffle_kernel<<<1, 64>>>(d);
	CHECK(cudaGetLastError() == cudaSuccess);
	std::vector<int> h(64 * 5);
	CHECK(cudaMemcpy(h.data(), d, h.size() * 4, D2H) == cudaSuccess);
	for (int t = 0; t < 64; t++) {
		const int l = t & 31, v = 3 * l + 1;
		const int *o = &h[t * 5];
		CHECK(o[0] == 3 * (l ^ 5) + 1);
		CHECK(o[1] == 3 * 7 + 1);
		CHECK(o[2] == (l >= 3 ? v - 9 : v));
		CHECK(o[3] == (l + 2 < 32 ? v + 6 : v));
		CHECK(o[4] == 3 * 496 + 32);
	}
	cudaFree(d);
	return 0;
}

int atomic_case()
{
	unsigned *c = nullptr;
	float *s = dev_floats(1);
	CHECK(cudaMalloc(&c, sizeof(unsigned)) == cudaSuccess);
	CHECK(cudaMemset(c, 0, sizeof(unsigned)) == cudaSuccess);
	CHECK(cudaMemset(s, 0, sizeof(float)) == cudaSuccess);
	atomic_kernel<<<4, 256>>>(c, s);
	unsigned hc = 0;
	float hs = 0;
	CHECK(cudaMemcpy(&hc, c, sizeof hc, D2H) == cudaSuccess);
	CHECK(cudaMemcpy(&hs, s, sizeof hs, D2H) == cudaSuccess);
	CHECK(hc == 1024 && hs == 512.f);
	cudaFree(c);
	cudaFree(s);
	return 0;
}

/* D = A B + C for one layout combination, every value checked, the padding untouched. */
template <class LA, class LB> int mma_layout(int store_col)
{
	const unsigned ld = 24; /* wider than the tile: the padding must stay NaN */
	const bool acol = std::is_same<LA, wmma::col_major>::value;
	const bool bcol = std::is_same<LB, wmma::col_major>::value;
	std::vector<__nv_bfloat16> ha(16 * ld), hb(16 * ld);
	std::vector<float> hc(16 * ld), hd(16 * ld);
	float A[16][16], B[16][16];
	for (int r = 0; r < 16; r++)
		for (int c = 0; c < 16; c++) {
			A[r][c] = (float)((r * 7 + c * 3) % 9 - 4);
			B[r][c] = (float)((r * 5 + c * 11) % 7 - 3);
			ha[acol ? c * ld + r : r * ld + c] = __float2bfloat16_rn(A[r][c]);
			hb[bcol ? c * ld + r : r * ld + c] = __float2bfloat16_rn(B[r][c]);
			hc[r * ld + c] = (float)(r - c);
		}
	void *a = nullptr, *b = nullptr;
	float *c = dev_floats(hc.size()), *d = dev_floats(hd.size());
	CHECK(cudaMalloc(&a, ha.size() * 2) == cudaSuccess);
	CHECK(cudaMalloc(&b, hb.size() * 2) == cudaSuccess);
	CHECK(cudaMemcpy(a, ha.data(), ha.size() * 2, H2D) == cudaSuccess);
	CHECK(cudaMemcpy(b, hb.data(), hb.size() * 2, H2D) == cudaSuccess);
	CHECK(cudaMemcpy(c, hc.data(), hc.size() * 4, H2D) == cudaSuccess);
	mma_kernel<LA, LB><<<1, 32>>>((const __nv_bfloat16 *)a, (const __nv_bfloat16 *)b, c, d, ld,
				     store_col);
	CHECK(cudaGetLastError() == cudaSuccess);
	CHECK(cudaMemcpy(hd.data(), d, hd.size() * 4, D2H) == cudaSuccess);
	for (int r = 0; r < 16; r++)
		for (int n = 0; n < 16; n++) {
			float want = hc[r * ld + n];
			for (int k = 0; k < 16; k++)
				want += A[r][k] * B[k][n];
			CHECK(hd[store_col ? n * ld + r : r * ld + n] == want);
		}
	for (int r = 0; r < 16; r++)
		for (unsigned n = 16; n < ld; n++)
			CHECK(isnan(hd[r * ld + n]));
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	cudaFree(d);
	return 0;
}

int mma_case()
{
	typedef wmma::row_major R;
	typedef wmma::col_major C;
	int bad = 0;
	for (int sc = 0; sc < 2; sc++)
		bad += mma_layout<R, R>(sc) + mma_layout<R, C>(sc) + mma_layout<C, R>(sc) +
		       mma_layout<C, C>(sc);
	return bad;
}

uint16_t bits(float f)
{
	return __float2bfloat16_rn(f).bits;
}

int bf16_case()
{
	CHECK(bits(1.0f) == 0x3f80);
	CHECK(bits(1.0f + 1.0f / 256) == 0x3f80);     /* tie, to even (down) */
	CHECK(bits(1.0f + 3.0f / 256) == 0x3f82);     /* tie, to even (up) */
	CHECK(bits(1.0f + 1.0f / 256 + 1.0f / 65536) == 0x3f81);
	CHECK(bits(-2.5f) == 0xc020);
	CHECK(bits(INFINITY) == 0x7f80 && bits(-INFINITY) == 0xff80);
	CHECK(bits(3.4e38f) == 0x7f80);               /* rounds past the largest bf16 */
	CHECK(bits(NAN) == 0x7fff);
	CHECK(bits(1e-40f) == 0x0001);                /* subnormals kept */
	__nv_bfloat16 h;
	h.bits = 0x4049;
	CHECK(__bfloat162float(h) == 3.140625f);
	return 0;
}

int fresh_memory_case()
{
	float *in = dev_floats(32), *out = dev_floats(32);
	std::vector<float> h(32, 0.f);
	copy_kernel<<<1, 32>>>(in, out);
	CHECK(cudaMemcpy(h.data(), out, 32 * 4, D2H) == cudaSuccess);
	for (float x : h)
		CHECK(isnan(x));
	return 0;
}

/* Launches a fault case on 64 threads (or 32); returns only if the emulator let it pass. */
template <class K> int launch_fault(K kernel, unsigned threads)
{
	float *p = dev_floats(64);
	kernel<<<1, threads>>>(p);
	return 0;
}

int early_return_case() { return launch_fault(early_return_kernel, 64); }
int two_barriers_case() { return launch_fault(two_barriers_kernel, 64); }
int split_warp_case() { return launch_fault(split_warp_kernel, 32); }
int shuffle_returned_case() { return launch_fault(shuffle_returned_kernel, 32); }
int deadlock_case() { return launch_fault(deadlock_kernel, 32); }
int partial_mask_case() { return launch_fault(partial_mask_kernel, 32); }

int wmma_misaligned_case()
{
	void *a = nullptr;
	CHECK(cudaMalloc(&a, 4096) == cudaSuccess);
	wmma_load_kernel<<<1, 32>>>((const __nv_bfloat16 *)a, 8, 16);
	return 0;
}

int wmma_ldm_case()
{
	void *a = nullptr;
	CHECK(cudaMalloc(&a, 4096) == cudaSuccess);
	wmma_load_kernel<<<1, 32>>>((const __nv_bfloat16 *)a, 0, 12);
	return 0;
}

int wmma_lanes_case(int lane_dependent, int load_a)
{
	void *a = nullptr;
	float *d = dev_floats(256);
	CHECK(cudaMalloc(&a, 1024) == cudaSuccess);
	CHECK(cudaMemset(a, 0, 1024) == cudaSuccess);
	wmma_lanes_kernel<<<1, 32>>>((const __nv_bfloat16 *)a, d, lane_dependent, load_a);
	return 0;
}
int wmma_lane_pointer_case() { return wmma_lanes_case(1, 1); }
int wmma_unset_case() { return wmma_lanes_case(0, 0); }

int launch_limits_case()
{
	float *p = dev_floats(64);
	std::vector<float> h(64, 0.f);
	/* 64 KiB of dynamic shared memory: refused until the kernel is allowed it. */
	CHECK(cudaMemset(p, 0, 64 * 4) == cudaSuccess);
	big_shared_kernel<<<1, 64, 65536>>>(p);
	CHECK(cudaGetLastError() == cudaErrorInvalidValue);
	CHECK(cudaMemcpy(h.data(), p, 64 * 4, D2H) == cudaSuccess && h[0] == 0.f);
	const cudaFuncAttribute max_shared = cudaFuncAttributeMaxDynamicSharedMemorySize;
	CHECK(cudaFuncSetAttribute(big_shared_kernel, max_shared, 65536) == cudaSuccess);
	big_shared_kernel<<<1, 64, 65536>>>(p);
	CHECK(cudaGetLastError() == cudaSuccess);
	CHECK(cudaMemcpy(h.data(), p, 64 * 4, D2H) == cudaSuccess && h[0] == 2.f);
	CHECK(cudaFuncSetAttribute(big_shared_kernel, max_shared, 228 * 1024) ==
	      cudaErrorInvalidValue);
	copy_kernel<<<1, 2048>>>(p, p);
	CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
	copy_kernel<<<dim3(1, 70000), 32>>>(p, p);
	CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
	cudaStream_t st;
	CHECK(cudaStreamCreate(&st) == cudaSuccess && cudaStreamDestroy(st) == cudaSuccess);
	copy_kernel<<<1, 32, 0, st>>>(p, p); /* a destroyed stream */
	CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
	return 0;
}

int memcpy_case()
{
	float *d = dev_floats(25);
	std::vector<float> h(32, 1.f);
	const cudaError_t bad = cudaErrorInvalidValue;
	CHECK(cudaMemcpy(d, h.data(), 25 * 4, H2D) == cudaSuccess);
	CHECK(cudaMemcpy(d, h.data(), 25 * 4 + 1, H2D) == bad);     /* one byte past */
	CHECK(cudaMemcpy(d + 1, h.data(), 25 * 4, H2D) == bad);     /* from an offset */
	CHECK(cudaMemcpy(h.data(), d, 4, H2D) == bad);              /* the wrong way */
	CHECK(cudaMemcpy(h.data(), h.data() + 1, 4, D2H) == bad);   /* host as device */
	CHECK(cudaMemset(d, 0, 25 * 4 + 4) == bad);
	CHECK(cudaFree(d) == cudaSuccess);
	CHECK(cudaFree(d) == cudaErrorInvalidDevicePointer);
	return 0;
}

int global_overflow_case()
{
	float *p = dev_floats(25);
	global_overflow_kernel<<<1, 32>>>(p, 25);
	return 0;
}

int shared_overflow_case()
{
	float *p = dev_floats(32);
	shared_overflow_kernel<<<1, 32, 31 * sizeof(float)>>>(p);
	return 0;
}

int misaligned_case()
{
	float *p = dev_floats(64);
	CHECK(cudaMemset(p, 0, 64 * 4) == cudaSuccess);
	misaligned_kernel<<<1, 32>>>(p, p + 32);
	return 0;
}

/* ---- the harness ---- */

enum expect { PASSES, DIES };

struct test_case {
	const char *name;
	int (*fn)();
	expect want;
	const char *needle;   /* DIES: text the output must hold */
	const char *schedule; /* EMU_SCHEDULE for the child, or null */
	const char *drop;     /* EMU_DROP for the child, or null */
	bool sanitizer;       /* needs the ASan + UBSan build */
};

/* Runs fn in a child with the environment given; returns its wait status and output. */
int in_child(const test_case &c, std::string *out)
{
	int fd[2];
	if (pipe(fd) != 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	const pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(fd[1], 1);
		dup2(fd[1], 2);
		close(fd[0]);
		close(fd[1]);
		if (c.schedule)
			setenv("EMU_SCHEDULE", c.schedule, 1);
		if (c.drop)
			setenv("EMU_DROP", c.drop, 1);
		const int rc = c.fn();
		fflush(stdout);
		fflush(stderr);
		_exit(rc);
	}
	close(fd[1]);
	char buf[4096];
	ssize_t n;
	while ((n = read(fd[0], buf, sizeof buf)) > 0)
		out->append(buf, (size_t)n);
	close(fd[0]);
	int status = 0;
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

/* emu_prep must refuse a static __shared__ array, naming the line. */
int prep_case(const char *prep)
{
	char dir[] = "/tmp/emu_checks.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	const std::string in = std::string(dir) + "/bad.cu", out = std::string(dir) + "/bad.cc",
			  log = std::string(dir) + "/log";
	FILE *f = fopen(in.c_str(), "w");
	if (!f)
		return 1;
	fputs("__global__ void k(float *p)\n{\n\t__shared__ float tile[64];\n"
	      "\tp[0] = tile[0];\n}\n", f);
	fclose(f);
	const std::string cmd = std::string("'") + prep + "' " + in + " " + out + " 2>" + log;
	const int st = system(cmd.c_str());
	std::string text;
	if ((f = fopen(log.c_str(), "r"))) {
		char b[512];
		while (fgets(b, sizeof b, f))
			text += b;
		fclose(f);
	}
	remove(in.c_str());
	remove(out.c_str());
	remove(log.c_str());
	rmdir(dir);
	const char *want = "bad.cu:3: error: a static __shared__ variable";
	const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 1 && text.find(want) != std::string::npos;
	printf("emu_checks: emu_prep refuses static __shared__: %s", ok ? "ok\n" : "FAIL: ");
	if (!ok)
		printf("status %d, '%s'\n", st, text.c_str());
	return ok ? 0 : 1;
}

} /* namespace */

int main(int argc, char **argv)
{
	if (argc > 2) {
		fprintf(stderr, "usage: emu_checks [EMU_PREP]\n");
		return 2;
	}
#ifdef EMU_SANITIZE
	const bool sanitized = true;
#else
	const bool sanitized = false;
#endif
	/* name, function, expectation, text the output must hold, EMU_SCHEDULE, EMU_DROP,
	 * whether it needs the sanitizer build */
	const test_case cases[] = {
		{"reduce (round)", reduce_case, PASSES, nullptr, "round", nullptr, false},
		{"reduce (warp)", reduce_case, PASSES, nullptr, "warp", nullptr, false},
		{"reduce (first)", reduce_case, PASSES, nullptr, "first", nullptr, false},
		{"reduce (round-rev)", reduce_case, PASSES, nullptr, "round-rev", nullptr, false},
		{"reduce (warp-rev)", reduce_case, PASSES, nullptr, "warp-rev", nullptr, false},
		{"reduce (last)", reduce_case, PASSES, nullptr, "last", nullptr, false},
		{"reduce (random)", reduce_case, PASSES, nullptr, "random", nullptr, false},
		{"reduce, first barrier removed, wrong", reduce_wrong_case, PASSES, nullptr,
		 "round", "reduce_kernel:syncthreads:1", false},
		{"shuffles", shuffle_case, PASSES, nullptr, "first", nullptr, false},
		{"atomics", atomic_case, PASSES, nullptr, nullptr, nullptr, false},
		{"wmma layouts", mma_case, PASSES, nullptr, nullptr, nullptr, false},
		{"bf16 rounding", bf16_case, PASSES, nullptr, nullptr, nullptr, false},
		{"fresh device memory is NaN", fresh_memory_case, PASSES, nullptr, nullptr, nullptr,
		 false},
		{"launch limits", launch_limits_case, PASSES, nullptr, nullptr, nullptr, false},
		{"cudaMemcpy and cudaMemset ranges", memcpy_case, PASSES, nullptr, nullptr, nullptr,
		 false},
		{"barrier after an early return", early_return_case, DIES,
		 "reached by 32 of 64 threads", nullptr, nullptr, false},
		{"two barriers", two_barriers_case, DIES, "at different __syncthreads", nullptr,
		 nullptr, false},
		{"split warp", split_warp_case, DIES, "diverged", nullptr, nullptr, false},
		{"shuffle from a returned lane", shuffle_returned_case, DIES, "which returned",
		 nullptr, nullptr, false},
		{"deadlock", deadlock_case, DIES, "deadlock", nullptr, nullptr, false},
		{"partial mask", partial_mask_case, DIES, "only whole-warp masks", nullptr, nullptr,
		 false},
		{"wmma misaligned", wmma_misaligned_case, DIES, "not 32-byte aligned", nullptr,
		 nullptr, false},
		{"wmma ldm", wmma_ldm_case, DIES, "not a multiple of 16 bytes", nullptr, nullptr,
		 false},
		{"wmma lane-dependent pointer", wmma_lane_pointer_case, DIES, "different addresses",
		 nullptr, nullptr, false},
		{"wmma fragment never loaded", wmma_unset_case, DIES, "never loaded", nullptr,
		 nullptr, false},
		{"global memory overflow", global_overflow_case, DIES, "heap-buffer-overflow",
		 nullptr, nullptr, true},
		{"shared memory overflow", shared_overflow_case, DIES, "heap-buffer-overflow",
		 nullptr, nullptr, true},
		{"misaligned 16-byte load", misaligned_case, DIES, "misaligned address", nullptr,
		 nullptr, true},
	};
	int bad = 0;
	for (const test_case &c : cases) {
		if (c.sanitizer && !sanitized) {
			printf("emu_checks: %s: skipped (needs the ASan + UBSan build)\n", c.name);
			continue;
		}
		std::string out;
		const int st = in_child(c, &out);
		bool ok;
		if (c.want == PASSES)
			ok = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
		else /* the emulator aborts; a sanitizer aborts or exits non-zero */
			ok = st >= 0 && ((WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT) ||
					 (WIFEXITED(st) && WEXITSTATUS(st) != 0)) &&
			     out.find(c.needle) != std::string::npos;
		printf("emu_checks: %s: %s\n", c.name, ok ? "ok" : "FAIL");
		if (!ok) {
			printf("    status %d, output:\n%s\n", st, out.c_str());
			bad++;
		}
	}
	if (argc == 2)
		bad += prep_case(argv[1]);
	printf("emu_checks: %s\n", bad ? "FAILED" : "all passed");
	if (fflush(stdout) != 0 || ferror(stdout))
		return 1;
	return bad ? 1 : 0;
}
