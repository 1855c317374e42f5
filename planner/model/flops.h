/* flops.h: the model FLOPs a micro-batch trains, for work-normalised throughput and MFU
 * (issue 10 item 1): what the model computes, independent of how a kernel or a method
 * arranges it, so methods that train different attention work can be compared by FLOP/s.
 *
 * A span is its own causal sequence (costmodel.h: document masking; a span cut from a
 * document does not attend to the document's earlier tokens), so a micro-batch's FLOPs are
 * the sum over its spans. For a sequence of s tokens, per layer forward:
 *   GEMMs      2 s W, W = h (h + 2 kv) + h h + f_m h f   (QKV, O, FFN; f_m = 3 gated, 2 not)
 *   attention  4 h P(s), P = the query-key pairs the mask lets through: s (s + 1) / 2 causal,
 *              costkinds.h's bp_moba_pairs for block-sparse layers (2 h FLOPs per pair for
 *              Q K^T, 2 h for the weighted sum of V)
 * plus the LM head 2 s h V once, and backward = 2 x forward for every GEMM (dgrad and wgrad):
 *   FLOPs(s) = 3 [layers (2 s W + 4 h P(s)) + 2 s h V].
 * This is Megatron-LM's model FLOPs formula (megatron/training/training.py,
 * num_floating_point_operations: 3 x 2 x (GEMMs + causal attention "seq_length / 2" +
 * logits)) and PaLM's (Chowdhery et al. 2022, App. B: 6N + 12 L H Q T per token, halved for
 * the causal mask), applied per sequence rather than to one packed sequence, with the mask's
 * exact pair count s (s + 1) / 2 where Megatron writes s^2 / 2. Norms, softmax, rotary and the
 * embedding lookup are not counted (as in both); nor is activation recomputation (model
 * FLOPs, not hardware FLOPs). Disaggregated attention computes the same pairs elsewhere. */
#ifndef BP_FLOPS_H
#define BP_FLOPS_H

#include <stdint.h>

#include "costmodel.h"
#include "presets.h"

/* Training FLOPs (forward + backward) of one dense causal sequence of len tokens, split into
 * the layers' GEMMs, their attention and the LM head (each may be NULL). Returns the sum;
 * 0 for len <= 0. */
double bp_flops_seq(const struct bp_model *m, int64_t len, double *gemm, double *attn,
		    double *head);

/* Training FLOPs of a described micro-batch: its spans as sequences; SPARSE layers count the
 * pairs their budget k[l] lets through, DENSE and DISAGG the causal mask's. */
double bp_flops_mb(const struct bp_model *m, const struct bp_mb_desc *d);

#endif
