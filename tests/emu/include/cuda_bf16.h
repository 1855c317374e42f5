/* cuda_bf16.h, emulated (tests/emu/README.md): bfloat16 as the kernels use it, bit for bit.
 * A bf16 is the high half of an fp32; conversion from fp32 rounds to nearest, ties to even,
 * as cvt.rn.bf16.f32 does: overflow rounds to infinity, subnormals are kept, and a NaN stays
 * a NaN (the canonical 0x7fff, as the GPU returns; the plain rounding trick could carry a NaN
 * payload into the exponent and give infinity). */
#ifndef BP_EMU_CUDA_BF16_H
#define BP_EMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
	uint16_t bits;
};
struct alignas(4) __nv_bfloat162 {
	__nv_bfloat16 x, y;
};
static_assert(sizeof(__nv_bfloat16) == 2 && sizeof(__nv_bfloat162) == 4, "bf16 layout");

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	__nv_bfloat16 h;
	if ((u & 0x7fffffffu) > 0x7f800000u) {
		h.bits = 0x7fff;
		return h;
	}
	u += 0x7fffu + ((u >> 16) & 1u);
	h.bits = (uint16_t)(u >> 16);
	return h;
}

static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }

static inline float __bfloat162float(__nv_bfloat16 h)
{
	const uint32_t u = (uint32_t)h.bits << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b)
{
	__nv_bfloat162 r;
	r.x = __float2bfloat16_rn(a);
	r.y = __float2bfloat16_rn(b);
	return r;
}

static inline float __low2float(__nv_bfloat162 h) { return __bfloat162float(h.x); }
static inline float __high2float(__nv_bfloat162 h) { return __bfloat162float(h.y); }

#endif
