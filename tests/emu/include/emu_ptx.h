/* emu_ptx.h: the emulator's side (sched.cpp) of the sm_80 instructions the attention tile
 * issues through executor/attn_ptx.cuh, whose emulated twin (tests/emu/attn_ptx.cuh) calls
 * these; tests/emu/README.md. The arguments are those of the attn_ptx functions, with the
 * register layouts that header documents. Each takes the site emu_prep marked before the call
 * (cuemu::at), so a fault names the kernel's file and line. */
#ifndef BP_EMU_PTX_H
#define BP_EMU_PTX_H

#include <stdint.h>

namespace cuemu {

/* mma.m16n8k16.row.col.f32.bf16.bf16.f32, a warp collective: d may be c. */
void ptx_mma16816(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);

/* ldmatrix.m8n8.x4[.trans].b16, a warp collective: p is this lane's row address. */
void ptx_ldsm(uint32_t r[4], const void *p, bool trans);

/* cp.async.cg.shared.global, 16 bytes of which the first n (0 or 16) come from src; per
 * thread, like commit_group and wait_group n. */
void ptx_cp_async(void *dst, const void *src, int n);
void ptx_cp_commit();
void ptx_cp_wait(int n);

} /* namespace cuemu */

#endif
