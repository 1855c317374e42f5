/* presets.c: the built-in model and GPU descriptions (presets.h) and the parameter count.
 *
 * Called by `balplan presets`, `balplan profile --analytic` (profiler/analytic.c) and by the
 * cost model (bp_model_layer_params for the LM head and model-state memory). Invariant: every
 * number below carries its source, published configurations where they exist and a stated
 * assumption where a paper is silent; lookups are case-insensitive and return static storage.
 * Models come from the four papers' evaluation sections: DistCA Table 2 (Llama-3-8B,
 * Llama-34B), Hydraulis Sec. 8.1 (LLaMA2 7B/13B/32B on A800), WLB-LLM Table 1 and Sec. 6.1
 * (550M, 7B, 30B, 70B). */
#include "presets.h"

#include <stddef.h>

#include "bp.h"

struct model_preset {
	struct bp_model m;
	const char *source;
};

struct gpu_preset {
	struct bp_gpu g;
	const char *source;
};

/* Fields: name, layers, hidden, heads, kv_heads, ffn, vocab, gated. */
static const struct model_preset models[] = {
	{{"llama2-7b", 32, 4096, 32, 32, 11008, 32000, 1},
	 "Touvron et al. 2023, Llama 2 (Table 1) and meta-llama/Llama-2-7b-hf config.json; "
	 "Hydraulis Sec. 8.1 and WLB-LLM Sec. 6.1 (7B)"},
	{{"llama2-13b", 40, 5120, 40, 40, 13824, 32000, 1},
	 "meta-llama/Llama-2-13b-hf config.json; Hydraulis Sec. 8.1 (13B)"},
	/* Hydraulis Sec. 8.1 trains a "LLaMA2 32B" but states no configuration (Llama 2 has no
	 * 32B); Qwen2.5-32B is the public Llama-style model of that size. QKV biases ignored. */
	{{"qwen2.5-32b", 64, 5120, 40, 8, 27648, 152064, 1},
	 "Qwen/Qwen2.5-32B config.json (untied embeddings); stands in for Hydraulis Sec. 8.1's "
	 "unspecified 32B"},
	/* The paper's own 32B shape, from its repository: LLaMA-style (SwiGLU, MHA), 60 layers
	 * (hence PP 3 and 6 in its scheme space), GPT-2 BPE vocabulary. */
	/* The paper's 7B and 13B as its repository builds them (hydraulis_llama.py: LLaMA2
	 * shapes with the GPT-2 BPE vocabulary of its datasets, SwiGLU, MHA). */
	{{"hydraulis-7b", 32, 4096, 32, 32, 11008, 30592, 1},
	 "github.com/lhy101/Hydraulis @4489487: hydraulis_llama.py and "
	 "examples/strategy/build_parallel_scheme_space_7b.py (Hydraulis Sec. 8.1's 7B)"},
	{{"hydraulis-13b", 40, 5120, 40, 40, 13824, 30592, 1},
	 "github.com/lhy101/Hydraulis @4489487: hydraulis_llama.py and "
	 "examples/strategy/build_parallel_scheme_space_13b.py (Hydraulis Sec. 8.1's 13B)"},
	{{"hydraulis-32b", 60, 6656, 64, 64, 17920, 30592, 1},
	 "github.com/lhy101/Hydraulis @4489487: hydraulis_llama.py and "
	 "examples/strategy/build_parallel_scheme_space_32b.py (Hydraulis Sec. 8.1's 32B)"},
	{{"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 1},
	 "Llama 3 herd paper (Dubey et al. 2024, Table 3) and meta-llama/Meta-Llama-3-8B "
	 "config.json; DistCA Table 2"},
	/* DistCA Table 2 gives layers 48, hidden 8192, 64 heads of 128, GQA 16 (16 KV heads, as
	 * its Llama-3-8B row's 8 is Llama 3's KV head count). FFN and vocab are not stated: the
	 * FFN size of CodeLlama-34B (same layers/hidden/heads) and the Llama 3 vocabulary (DistCA
	 * Sec. 3.3 calls it "Llama-3-34B"). */
	{{"llama-34b", 48, 8192, 64, 16, 22016, 128256, 1},
	 "DistCA Table 2 (layers, hidden, heads, GQA 16); ffn from CodeLlama-34B config.json, "
	 "vocab from Llama 3 (assumed)"},
	/* Qwen2.5 0.5B and 3B tie input and output embeddings; bp_model_params counts both
	 * (untied), so it reports more than the published total. */
	{{"qwen2.5-0.5b", 24, 896, 14, 2, 4864, 151936, 1},
	 "Qwen/Qwen2.5-0.5B config.json (tied embeddings counted twice)"},
	{{"qwen2.5-3b", 36, 2048, 16, 2, 11008, 151936, 1},
	 "Qwen/Qwen2.5-3B config.json (tied embeddings counted twice)"},
	/* WLB-LLM Sec. 6.1: internal LLaMA-like models, the 7B one shaped as LLaMA2-7B, the others
	 * "proportionally adjusting the number of layers and model dimension"; Table 1 lists only
	 * sizes and parallel configs. 550M: no Llama exists, so 16 layers of hidden 1536 (12 heads
	 * of 128, SwiGLU 4096 = 8/3 h) with the Llama 2 vocabulary, which gives 0.55B. */
	{{"wlb-550m", 16, 1536, 12, 12, 4096, 32000, 1},
	 "WLB-LLM Table 1 (550M); shape assumed: LLaMA2-7B scaled to 16 layers x 1536"},
	{{"wlb-7b", 32, 4096, 32, 32, 11008, 32000, 1},
	 "WLB-LLM Sec. 6.1: same architecture as LLaMA2-7B"},
	/* 30B: the nearest Llama is LLaMA-1 "30B" (32.5B parameters). */
	{{"wlb-30b", 60, 6656, 52, 52, 17920, 32000, 1},
	 "WLB-LLM Table 1 (30B); shape assumed: LLaMA-1 30B (Touvron et al. 2023a, Table 2)"},
	/* 70B: the nearest Llama is Llama-2-70B (GQA with 8 KV heads). */
	{{"wlb-70b", 80, 8192, 64, 8, 28672, 32000, 1},
	 "WLB-LLM Table 1 (70B); shape assumed: meta-llama/Llama-2-70b-hf config.json"},
	/* The models long-context teams train beyond the papers' (issue 26). */
	{{"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 1},
	 "Llama 3 herd paper (Dubey et al. 2024, Table 3: 80 layers, model dimension 8192, FFN "
	 "28672, 64 heads, 8 KV heads, vocabulary 128K) and meta-llama/Meta-Llama-3-70B "
	 "config.json"},
	{{"llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 1},
	 "Llama 3 herd paper (Dubey et al. 2024, Table 3: 126 layers, model dimension 16384, FFN "
	 "53248, 128 heads, 8 KV heads) and meta-llama/Llama-3.1-405B config.json"},
	{{"qwen2.5-72b", 80, 8192, 64, 8, 29568, 152064, 1},
	 "Qwen/Qwen2.5-72B config.json (Qwen2.5 technical report, Table 1: 80 layers, 64 / 8 "
	 "heads); QKV biases ignored"},
};

/* GPU numbers from the vendor datasheets. Dense BF16 is half the datasheet's "with sparsity"
 * figure. NVLink is per GPU and per direction (the datasheets give the bidirectional total).
 * HBM sizes: NVIDIA's "GB" for HBM is close to GiB (an H100 80GB shows 81559 MiB in
 * nvidia-smi), so the sizes are taken in GiB; the profile's 4 GiB reserve covers the
 * difference. Network: one NIC per GPU as in DGX/HGX nodes. */
#define GIB ((int64_t)1 << 30)
static const struct gpu_preset gpus[] = {
	{{"H100", 989.4, 80 * GIB, 3350.0, 450.0, 50.0, 8},
	 "NVIDIA H100 Tensor Core GPU datasheet (SXM5): BF16 1979 TFLOPS sparse, 80GB HBM3 at "
	 "3.35 TB/s, NVLink 900 GB/s; DGX H100 user guide: 8x ConnectX-7 400 Gb/s"},
	{{"H200", 989.4, 140 * GIB, 4800.0, 450.0, 50.0, 8},
	 "NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 1979 TFLOPS sparse, 141GB HBM3e at "
	 "4.8 TB/s, NVLink 900 GB/s; DistCA Sec. 6.1 (DGX H200, 140GB usable); DGX H200: 8x "
	 "ConnectX-7 400 Gb/s"},
	/* The A100 the FlashAttention-2 paper (Sec. 4.1) and the NCCL and GEMM measurements in
	 * profiler/README.md "Calibration" were taken on; the A800 below is the same chip with
	 * NVLink capped at 400 GB/s. */
	{{"A100", 312.0, 80 * GIB, 2039.0, 300.0, 25.0, 8},
	 "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): BF16 624 TFLOPS sparse, 80GB HBM2e at "
	 "2039 GB/s, NVLink 600 GB/s; DGX A100 user guide: 8x ConnectX-6 200 Gb/s HDR"},
	{{"A800", 312.0, 80 * GIB, 2039.0, 200.0, 25.0, 8},
	 "NVIDIA A800 40GB/80GB datasheet (SXM): BF16 624 TFLOPS sparse, 80GB HBM2e at 2039 "
	 "GB/s, NVLink 400 GB/s; Hydraulis Sec. 8.1: InfiniBand 200 GB/s per node (8 GPUs)"},
	{{"H20", 148.0, 96 * GIB, 4000.0, 450.0, 50.0, 8},
	 "NVIDIA HGX H20 product brief: BF16 296 TFLOPS sparse, 96GB HBM3 at 4.0 TB/s, NVLink "
	 "900 GB/s; network assumed 400 Gb/s per GPU (a later H20 with 141GB HBM3e exists: "
	 "H20-141G)"},
	/* The later H20 with 141GB of HBM3e, SparseBalance's second testbed (Sec. V-A: "8 x H20
	 * GPUs with 141GB of HBM3e memory"). NVIDIA publishes no datasheet for it: the compute,
	 * NVLink and network are the H20's (same GH100 part, only the memory changes), and the
	 * HBM3e stacks are the H200's (141GB), so its bandwidth and usable bytes are taken as the
	 * H200 row's: both assumptions. */
	{{"H20-141G", 148.0, 140 * GIB, 4800.0, 450.0, 50.0, 8},
	 "SparseBalance Sec. V-A (H20 with 141GB HBM3e); no NVIDIA datasheet: BF16 296 TFLOPS "
	 "sparse and NVLink 900 GB/s as the HGX H20 product brief (assumed unchanged), HBM3e "
	 "4.8 TB/s and 140GB usable as the H200 row (assumed), network assumed 400 Gb/s per GPU"},
	/* Blackwell. The dense BF16 figure: NVIDIA's HGX B200 specification gives 36 PFLOPS FP16/
	 * BF16 per 8 GPUs with sparsity, 4.5 PF per GPU, so 2250 TFLOPS dense. */
	{{"B200", 2250.0, 180 * GIB, 8000.0, 900.0, 50.0, 8},
	 "NVIDIA HGX B200 specification: 36 PFLOPS FP16/BF16 (sparse) and 1.4 TB HBM3e per 8 "
	 "GPUs (180GB each) at 8 TB/s per GPU, fifth-generation NVLink 1.8 TB/s per GPU; "
	 "network assumed 400 Gb/s per GPU (ConnectX-7, as DGX B200)"},
};

static int lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int same_name(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (lower((unsigned char)*a) != lower((unsigned char)*b))
			return 0;
	return *a == *b;
}

int64_t bp_model_layer_params(const struct bp_model *m)
{
	int64_t h = m->hidden, hd = m->heads > 0 ? m->hidden / m->heads : 0;
	int64_t attn = h * (h + 2 * (int64_t)m->kv_heads * hd) + h * h; /* QKV and O */
	int64_t ffn = (m->gated ? 3 : 2) * h * (int64_t)m->ffn;
	return attn + ffn + 2 * h; /* two RMSNorm weights */
}

int64_t bp_model_params(const struct bp_model *m)
{
	int64_t emb = (int64_t)m->vocab * m->hidden;
	return 2 * emb + (int64_t)m->layers * bp_model_layer_params(m) + m->hidden;
}

size_t bp_model_preset_count(void)
{
	return BP_ARRAY_LEN(models);
}

const struct bp_model *bp_model_preset_at(size_t i)
{
	return i < BP_ARRAY_LEN(models) ? &models[i].m : NULL;
}

const struct bp_model *bp_model_preset(const char *name)
{
	for (size_t i = 0; name && i < BP_ARRAY_LEN(models); i++)
		if (same_name(name, models[i].m.name))
			return &models[i].m;
	return NULL;
}

const char *bp_model_preset_source(size_t i)
{
	return i < BP_ARRAY_LEN(models) ? models[i].source : NULL;
}

size_t bp_gpu_preset_count(void)
{
	return BP_ARRAY_LEN(gpus);
}

const struct bp_gpu *bp_gpu_preset_at(size_t i)
{
	return i < BP_ARRAY_LEN(gpus) ? &gpus[i].g : NULL;
}

const struct bp_gpu *bp_gpu_preset(const char *name)
{
	for (size_t i = 0; name && i < BP_ARRAY_LEN(gpus); i++)
		if (same_name(name, gpus[i].g.name))
			return &gpus[i].g;
	return NULL;
}

const char *bp_gpu_preset_source(size_t i)
{
	return i < BP_ARRAY_LEN(gpus) ? gpus[i].source : NULL;
}
