/* presets.h: built-in model and GPU descriptions (sources in presets.c). */
#ifndef BP_PRESETS_H
#define BP_PRESETS_H

#include <stddef.h>
#include <stdint.h>

struct bp_model {
	char name[64];
	int layers;
	int hidden;
	int heads;
	int kv_heads;
	int ffn;     /* FFN intermediate size */
	int vocab;
	int gated;   /* 1: SwiGLU (3 FFN matrices), 0: 2 matrices */
};

struct bp_gpu {
	char name[64];
	double bf16_tflops;     /* dense peak */
	int64_t hbm_bytes;
	double hbm_gbps;        /* GB/s */
	double nvlink_gbps;     /* per-GPU unidirectional GB/s */
	double net_gbps;        /* per-GPU network GB/s (e.g. 400 Gb/s NIC = 50) */
	int gpus_per_node;
};

/* Parameter count of the model (embedding and LM head untied). */
int64_t bp_model_params(const struct bp_model *m);
/* Parameters of one transformer layer. */
int64_t bp_model_layer_params(const struct bp_model *m);

size_t bp_model_preset_count(void);
const struct bp_model *bp_model_preset_at(size_t i);     /* static, NULL past the end */
const struct bp_model *bp_model_preset(const char *name); /* static, NULL when unknown */
const char *bp_model_preset_source(size_t i);

size_t bp_gpu_preset_count(void);
const struct bp_gpu *bp_gpu_preset_at(size_t i);
const struct bp_gpu *bp_gpu_preset(const char *name); /* case-insensitive; NULL when unknown */
const char *bp_gpu_preset_source(size_t i);

#endif
