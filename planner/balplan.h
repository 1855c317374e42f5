/* balplan.h: libbalplan's public interface, the one header an installed balplan gives a C
 * (or C++) program:
 *
 *     cc prog.c $(pkg-config --cflags --libs balplan)
 *
 * A small facade over the planner (implemented in planner/api.c): read a dataset or take a
 * list of document lengths, make a cost model from a GPU and a model preset (an analytic
 * profile, profiler/analytic.c) or from a profile's text, and run one of the packing
 * methods in-process, on one batch of documents (balplan_pack) or on global batches drawn
 * from a dataset (balplan_solve, what `balplan solve` does for one method). Every plan is
 * predicted and validated as `balplan solve` does it, and balplan_plan_json gives the same
 * balplan.plan/v2 text, which `balplan check`, `simulate` and balexec take.
 *
 * Stability: only what this header declares is the interface; the library's other symbols
 * (bp_*) are internal and change without notice. Types here are opaque, except the option
 * and result structs, which only ever grow at their end (initialise them with designated
 * initializers; a zero field means the default named beside it). BALPLAN_API_VERSION counts
 * changes to this header.
 *
 * Conventions, as in the planner: lengths in tokens, times in microseconds, memory in bytes.
 * A failing call returns NULL or -1 (BALPLAN_INFEASIBLE where a request cannot be met) and
 * fills *err (when err is not NULL) with one lowercase line. The library never prints,
 * exits or reads the environment. Calls from several threads at once are not supported
 * (the ILP methods run GLPK). */
#ifndef BALPLAN_H
#define BALPLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BALPLAN_API_VERSION 1

/* A request no plan can meet (a document longer than a GPU holds, an ILP without a
 * solution): what `balplan solve` reports with exit status 3. */
#define BALPLAN_INFEASIBLE (-3)

struct balplan_error {
	char text[256];
};

/* The library's version ("0.1.0"); static. */
const char *balplan_version(void);

/* The built-in names: methods (with a one-line summary), model and GPU presets, embedded
 * datasets. Index i from 0; NULL past the end. Static strings. */
size_t balplan_method_count(void);
const char *balplan_method_name(size_t i);
const char *balplan_method_summary(size_t i);
size_t balplan_model_count(void);
const char *balplan_model_name(size_t i);
size_t balplan_gpu_count(void);
const char *balplan_gpu_name(size_t i);
size_t balplan_dataset_preset_count(void);
const char *balplan_dataset_preset_name(size_t i);

/* Datasets (datasets/README.md): a length distribution or a sample index. */
typedef struct balplan_dataset balplan_dataset;

/* An embedded dataset by name ("synthetic-longtail"). */
balplan_dataset *balplan_dataset_preset(const char *name, struct balplan_error *err);
/* Any input `balplan solve --dataset FILE` reads, from len bytes of text (v1 JSON; a sample
 * index as text, JSONL or a Megatron-LM .idx). name is used when the input names no
 * dataset (NULL: "unnamed"). */
balplan_dataset *balplan_dataset_parse(const char *text, size_t len, const char *name,
				       struct balplan_error *err);
/* A sample index of n document lengths (each >= 1), sample i of length lengths[i]: the
 * same dataset as a text file of those lengths, one per line. */
balplan_dataset *balplan_dataset_from_lengths(const int64_t *lengths, size_t n,
					      const char *name, struct balplan_error *err);
void balplan_dataset_free(balplan_dataset *ds); /* NULL is a no-op */

struct balplan_dataset_stats {
	int64_t count, tokens; /* documents, their tokens */
	double mean;
	int64_t p50, p90, p99, max;
};
void balplan_dataset_get_stats(const balplan_dataset *ds, struct balplan_dataset_stats *out);

/* What things cost on a cluster: a profile (analytic or measured) and the request's layout,
 * tp * cp * pp * dp GPUs in Megatron-LM's placement. */
struct balplan_cluster {
	const char *gpu;       /* GPU preset for an analytic profile [H100] */
	const char *model;     /* model preset for an analytic profile [llama3-8b] */
	int tp, cp, pp, dp;    /* parallel degrees [1 each] */
	int64_t max_tokens;    /* the context cap: the longest document, a micro-batch's
				* tokens [131072] */
	const char *recompute; /* activation recomputation: "none", "selective", "full"
				* [none] */
};
typedef struct balplan_costmodel balplan_costmodel;

/* The analytic profile of c->gpu and c->model for c's scheme (what `balplan solve` makes
 * without --profile). */
balplan_costmodel *balplan_costmodel_analytic(const struct balplan_cluster *c,
					      struct balplan_error *err);
/* A balplan.profile/v2 (or v1) of len bytes of text, a measured one say (`balplan profile`);
 * the profile names the GPU and the model, so c->gpu and c->model are not used. */
balplan_costmodel *balplan_costmodel_profile(const char *text, size_t len,
					     const struct balplan_cluster *c,
					     struct balplan_error *err);
void balplan_costmodel_free(balplan_costmodel *cm); /* NULL is a no-op */

/* The forward and backward time of one document of len tokens alone in a micro-batch, on
 * the busiest pipeline stage (the weight the packers balance), into *us. 0 or -1. */
int balplan_cost_doc_us(const balplan_costmodel *cm, int64_t len, double *us,
			struct balplan_error *err);
/* The forward and backward time of a micro-batch of n documents (each its own causal
 * sequence, sequence-sharded over cp) on the busiest stage, into *us. 0 or -1. */
int balplan_cost_microbatch_us(const balplan_costmodel *cm, const int64_t *lengths, size_t n,
			       double *us, struct balplan_error *err);

/* How to plan. method is required; the other fields may be left zero. */
struct balplan_solve_opts {
	const char *method;        /* one name of balplan_method_name (not "hydraulis", whose
				    * candidate strategies `balplan solve` makes) */
	int64_t steps;             /* balplan_solve: global batches [20] */
	int64_t tokens_per_step;   /* balplan_solve: tokens per global batch
				    * [pp * dp * max_tokens] */
	int64_t docs_per_step;     /* balplan_solve: documents per global batch instead */
	uint64_t seed;             /* of every random choice [0] */
	const char *order;         /* balplan_solve: "file", "shuffle" or "draw" [file for a
				    * sample index, draw for a distribution] */
	const char *cp_shard;      /* "sequence", "document", "adaptive", "ulysses"
				    * [sequence] */
	const char *over_length;   /* a document over max_tokens: "truncate", "drop",
				    * "error" [balplan_solve: truncate; balplan_pack: error] */
	const char *const *params; /* method parameters as "key=value" (`balplan presets`
				    * lists each method's), nparams of them */
	size_t nparams;
};

typedef struct balplan_plan balplan_plan;

/* Plans one global batch: the n documents of lengths (each >= 1), in that order, packed by
 * o->method into the micro-batches of the cost model's dp pipelines. Document i of the batch
 * has id i (balplan_span.doc), so every span names the document it trains. A method that
 * delays documents (wlb) trains them in later steps of the plan. 0 with *out (free it with
 * balplan_plan_free), -1 or BALPLAN_INFEASIBLE. The plan names its dataset "batch" with the
 * sha256 of the lengths as text, one per line, so `balplan check --index FILE` of such a
 * file checks its samples. */
int balplan_pack(const balplan_costmodel *cm, const int64_t *lengths, size_t n,
		 const struct balplan_solve_opts *o, balplan_plan **out,
		 struct balplan_error *err);
/* Draws o->steps global batches from ds and plans them with o->method: `balplan solve`
 * for one method. 0 with *out, -1 or BALPLAN_INFEASIBLE. */
int balplan_solve(const balplan_costmodel *cm, const balplan_dataset *ds,
		  const struct balplan_solve_opts *o, balplan_plan **out,
		  struct balplan_error *err);
void balplan_plan_free(balplan_plan *p); /* NULL is a no-op */

/* A plan's decisions. Indices from 0; counts are 0 and the getters -1 out of range. Every
 * step runs on pipelines (the layout's), each a list of micro-batches in execution order,
 * each a list of spans: tokens [offset, offset + len) of document doc. */
size_t balplan_plan_steps(const balplan_plan *p);
size_t balplan_plan_pipelines(const balplan_plan *p, size_t step);
size_t balplan_plan_microbatches(const balplan_plan *p, size_t step, size_t pipe);
size_t balplan_plan_spans(const balplan_plan *p, size_t step, size_t pipe, size_t mb);

struct balplan_span {
	int64_t doc, offset, len;
};
int balplan_plan_span(const balplan_plan *p, size_t step, size_t pipe, size_t mb, size_t k,
		      struct balplan_span *out);

/* The documents drawn for a step (draw order), and where each trains: its own step, or a
 * later one when the method delayed it. */
size_t balplan_plan_docs(const balplan_plan *p, size_t step);
struct balplan_doc {
	int64_t id, len;
	int64_t sample;     /* file, shuffle order: the sample index's id; draw: -1 */
	int64_t train_step; /* the step whose spans train it */
};
int balplan_plan_doc(const balplan_plan *p, size_t step, size_t i, struct balplan_doc *out);

/* Predicted per step (plans/README.md names each metric). */
struct balplan_step_metrics {
	double step_us;         /* the slowest pipeline and the gradient synchronisation */
	double imbalance_wlb;   /* slowest micro-batch forward over the mean */
	double bubble;          /* idle fraction of the pipeline ranks */
	int64_t peak_mem_bytes; /* the fullest GPU */
	int64_t tokens, microbatches;
};
int balplan_plan_step_metrics(const balplan_plan *p, size_t step,
			      struct balplan_step_metrics *out);

/* Predicted over the plan. */
struct balplan_summary {
	int64_t steps, docs, tokens, delayed;
	double step_mean_us, step_p95_us, step_max_us, total_us;
	double tokens_per_s;
	double imbalance_wlb_mean, bubble_mean, pack_gap_mean;
	double model_tflops_per_gpu, mfu;
	int64_t peak_mem_bytes;
};
void balplan_plan_get_summary(const balplan_plan *p, struct balplan_summary *out);

/* The method's warning about the finished plan (an ILP step not proven optimal), as
 * `balplan solve` prints it, into buf (n bytes, "" when none). Returns its length. */
size_t balplan_plan_warning(const balplan_plan *p, char *buf, size_t n);

/* The plan as balplan.plan/v2 text (what `balplan solve -o FILE` writes), NUL-terminated;
 * the caller frees it with free(). NULL with err. */
char *balplan_plan_json(const balplan_plan *p, struct balplan_error *err);

#ifdef __cplusplus
}
#endif

#endif
