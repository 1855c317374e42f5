/* work.h: the work a plan trains and its work-normalised throughput (issue 10 item 1): each
 * step's model FLOPs (model/flops.h: GEMMs, attention over the spans the method actually
 * trains, LM head; forward and backward), and the summary's model TFLOP/s per GPU and MFU
 * against the GPU's dense bf16 peak. Tokens per second compare methods only when they train
 * the same attention; FLOP/s compare them when they do not. Called by bp_plan_predict after
 * the summary (total_us) is known. */
#ifndef BP_WORK_H
#define BP_WORK_H

#include "plan.h"
#include "profile.h"

/* The two halves of bp_plan_predict_work, for a plan predicted a window at a time: every
 * step's model_tflop, its FLOPs added to *total in step order; and the summary's work from
 * the total FLOPs of all steps (p->summary.total_us set). */
void bp_plan_step_work(struct bp_plan *p, double *total);
void bp_plan_work_summary(struct bp_plan *p, double total, const struct bp_profile *prof);
/* Fills every step's model_tflop and the summary's model_tflop, model_tflops_per_gpu
 * (model_tflop / total seconds / cluster GPUs) and mfu (that over prof's bf16_tflops; 0 when
 * the profile gives no peak). */
void bp_plan_predict_work(struct bp_plan *p, const struct bp_profile *prof);

#endif
