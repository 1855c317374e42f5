/* gpu_times.c: per-operation, per-family kernel times of a CUDA replay (gpu_times.h).
 *
 * A ring of cap event pairs: begin records the pair's start event and remembers the key, end
 * records its end event; harvest walks the ring from its oldest pair while cudaEventQuery
 * says the end event has passed, and adds cudaEventElapsedTime(start, end) to the key's
 * record. Start and end offsets are taken against one reference event recorded at the first
 * begin, so a family's span inside an operation is its last end minus its first start.
 *
 * Records are appended in queue order; a key equal to the last record's accumulates there,
 * any other key opens a new record. At close, a record whose key comes again later is an
 * earlier replay of the same operation (warm-up) and is not written. */
#include "gpu_times.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const FAMILY[BP_KT_NFAM] = {"qkv", "o", "ffn", "lm_head", "attn", "sparse"};

struct kt_pair {
	int fam, bwd;
	int64_t step, mb;
};

struct kt_fam {
	int64_t calls;
	double us, max, first, last; /* summed, largest call (us); first start, last end (ms
				      * after the reference event) */
};

struct kt_rec {
	int64_t step, mb;
	int bwd;
	struct kt_fam fam[BP_KT_NFAM];
};

struct bp_gpu_times {
	char *path;
	int rank, world;
	cudaEvent_t *start, *end, ref;
	struct kt_pair *pair;
	size_t cap, head, n, made; /* ring: oldest at head, n in flight; events made */
	int open, has_ref, ref_made; /* a begin without its end; reference recorded, made */
	int64_t dropped;       /* begins with the ring full */
	int64_t bad;           /* pairs whose times could not be read */
	struct kt_rec *rec;
	size_t nrec, rec_cap;
	int oom;
};

void bp_kt_free(struct bp_gpu_times *kt)
{
	if (!kt)
		return;
	for (size_t i = 0; i < kt->made; i++) {
		cudaEventDestroy(kt->start[i]);
		cudaEventDestroy(kt->end[i]);
	}
	if (kt->ref_made)
		cudaEventDestroy(kt->ref);
	free(kt->start);
	free(kt->end);
	free(kt->pair);
	free(kt->rec);
	free(kt->path);
	free(kt);
}

int bp_kt_open(struct bp_gpu_times **out, const char *path, int rank, int world, size_t cap,
	       struct bp_error *err)
{
	struct bp_gpu_times *kt;
	*out = NULL;
	if (cap < 2)
		cap = 2;
	kt = bp_calloc(1, sizeof(*kt), err);
	if (!kt)
		return -1;
	size_t n = strlen(path) + 24;
	kt->path = bp_calloc(n, 1, err);
	kt->start = bp_calloc(cap, sizeof(*kt->start), err);
	kt->end = bp_calloc(cap, sizeof(*kt->end), err);
	kt->pair = bp_calloc(cap, sizeof(*kt->pair), err);
	if (!kt->path || !kt->start || !kt->end || !kt->pair) {
		bp_kt_free(kt);
		return -1;
	}
	if (world > 1)
		snprintf(kt->path, n, "%s.rank%d", path, rank);
	else
		snprintf(kt->path, n, "%s", path);
	kt->rank = rank;
	kt->world = world;
	kt->cap = cap;
	/* The file must be writable: found now, not after the replay. */
	FILE *f = fopen(kt->path, "w");
	if (!f) {
		bp_errorf(err, "cannot write --gpu-times '%s': %s", kt->path, strerror(errno));
		bp_kt_free(kt);
		return -1;
	}
	fclose(f);
	cudaError_t e = cudaEventCreate(&kt->ref);
	kt->ref_made = e == cudaSuccess;
	for (size_t i = 0; e == cudaSuccess && i < cap; i++) {
		e = cudaEventCreate(&kt->start[i]);
		if (e == cudaSuccess && (e = cudaEventCreate(&kt->end[i])) != cudaSuccess)
			cudaEventDestroy(kt->start[i]);
		if (e == cudaSuccess)
			kt->made++;
	}
	if (e != cudaSuccess) {
		bp_errorf(err, "--gpu-times: cudaEventCreate failed: %s", cudaGetErrorString(e));
		bp_kt_free(kt);
		return -1;
	}
	*out = kt;
	return 0;
}

static struct kt_rec *record_for(struct bp_gpu_times *kt, const struct kt_pair *p)
{
	if (kt->nrec) {
		struct kt_rec *r = &kt->rec[kt->nrec - 1];
		if (r->step == p->step && r->mb == p->mb && r->bwd == p->bwd)
			return r;
	}
	if (kt->nrec == kt->rec_cap) {
		size_t nc = kt->rec_cap ? 2 * kt->rec_cap : 256;
		struct kt_rec *g = realloc(kt->rec, nc * sizeof(*g));
		if (!g) {
			kt->oom = 1;
			return NULL;
		}
		kt->rec = g;
		kt->rec_cap = nc;
	}
	struct kt_rec *r = &kt->rec[kt->nrec++];
	memset(r, 0, sizeof(*r));
	r->step = p->step;
	r->mb = p->mb;
	r->bwd = p->bwd;
	return r;
}

void bp_kt_harvest(struct bp_gpu_times *kt)
{
	if (!kt)
		return;
	/* The pair being opened (begin without end) is the newest: never harvested here. */
	while (kt->n > (size_t)kt->open) {
		size_t i = kt->head;
		if (cudaEventQuery(kt->end[i]) != cudaSuccess)
			break; /* not yet run (or an error the backend reports on its own) */
		float a = 0, b = 0, d = 0;
		if (cudaEventElapsedTime(&a, kt->ref, kt->start[i]) != cudaSuccess ||
		    cudaEventElapsedTime(&b, kt->ref, kt->end[i]) != cudaSuccess ||
		    cudaEventElapsedTime(&d, kt->start[i], kt->end[i]) != cudaSuccess) {
			kt->bad++;
		} else {
			struct kt_rec *r = record_for(kt, &kt->pair[i]);
			if (r) {
				struct kt_fam *f = &r->fam[kt->pair[i].fam];
				if (!f->calls || a < f->first)
					f->first = a;
				if (!f->calls || b > f->last)
					f->last = b;
				f->calls++;
				f->us += 1000.0 * d;
				if (1000.0 * d > f->max)
					f->max = 1000.0 * d;
			}
		}
		kt->head = (kt->head + 1) % kt->cap;
		kt->n--;
	}
}

void bp_kt_begin(struct bp_gpu_times *kt, cudaStream_t stream, enum bp_kt_family fam,
		 int64_t step, int64_t mb, int bwd)
{
	if (!kt || kt->open)
		return;
	if (!kt->has_ref) {
		if (cudaEventRecord(kt->ref, stream) != cudaSuccess)
			return;
		kt->has_ref = 1;
	}
	if (kt->n == kt->cap)
		bp_kt_harvest(kt);
	if (kt->n == kt->cap) {
		kt->dropped++;
		return;
	}
	size_t i = (kt->head + kt->n) % kt->cap;
	if (cudaEventRecord(kt->start[i], stream) != cudaSuccess) {
		kt->bad++;
		return;
	}
	kt->pair[i] = (struct kt_pair){.fam = (int)fam, .bwd = bwd, .step = step, .mb = mb};
	kt->n++;
	kt->open = 1;
}

void bp_kt_end(struct bp_gpu_times *kt, cudaStream_t stream)
{
	if (!kt || !kt->open)
		return;
	size_t i = (kt->head + kt->n - 1) % kt->cap;
	kt->open = 0;
	if (cudaEventRecord(kt->end[i], stream) != cudaSuccess) {
		/* Unreadable: its start stays the newest; drop the pair. */
		kt->n--;
		kt->bad++;
	}
}

static void fam_line(FILE *f, const struct kt_rec *r, const char *name, const struct kt_fam *x)
{
	fprintf(f, "%lld\t%lld\t%s\t%s\t%lld\t%.3f\t%.3f\t%.3f\n", (long long)r->step,
		(long long)r->mb, r->bwd ? "bwd" : "fwd", name, (long long)x->calls, x->us, x->max,
		1000.0 * (x->last - x->first));
}

int bp_kt_close(struct bp_gpu_times *kt, struct bp_error *err)
{
	int rc = 0;
	if (!kt)
		return 0;
	if (kt->open) { /* a begin left open by an error: its end never comes */
		kt->open = 0;
		kt->n--;
		kt->bad++;
	}
	bp_kt_harvest(kt);
	FILE *f = fopen(kt->path, "w");
	if (!f) {
		rc = bp_errorf(err, "cannot write --gpu-times '%s': %s", kt->path, strerror(errno));
		bp_kt_free(kt);
		return rc;
	}
	fprintf(f, "# balexec --gpu-times: rank %d of %d; CUDA events around every compute "
		   "primitive; times in microseconds\n", kt->rank, kt->world);
	fprintf(f, "# per operation (step, micro-batch, pass) and kernel family: calls, summed "
		   "time (gpu_us), the largest call (max_us), first start to last end (span_us); "
		   "family all: every family of the operation. A call's time runs from the event "
		   "before its first kernel to the one after its last: a host that falls behind "
		   "(a kernel loaded at first use) shows in it\n");
	if (kt->dropped || kt->bad || kt->n || kt->oom)
		fprintf(f, "# incomplete: %lld primitives untimed (ring full), %lld unreadable, "
			   "%zu unfinished%s\n", (long long)kt->dropped, (long long)kt->bad, kt->n,
			kt->oom ? ", records lost (out of memory)" : "");
	fprintf(f, "step\tmb\tpass\tfamily\tcalls\tgpu_us\tmax_us\tspan_us\n");
	for (size_t i = 0; i < kt->nrec; i++) {
		const struct kt_rec *r = &kt->rec[i];
		int later = 0;
		for (size_t j = i + 1; j < kt->nrec && !later; j++)
			later = kt->rec[j].step == r->step && kt->rec[j].mb == r->mb &&
				kt->rec[j].bwd == r->bwd;
		if (later)
			continue;
		struct kt_fam all = {0, 0, 0, 0, 0};
		for (int k = 0; k < BP_KT_NFAM; k++) {
			const struct kt_fam *x = &r->fam[k];
			if (!x->calls)
				continue;
			fam_line(f, r, FAMILY[k], x);
			if (!all.calls || x->first < all.first)
				all.first = x->first;
			if (!all.calls || x->last > all.last)
				all.last = x->last;
			all.calls += x->calls;
			all.us += x->us;
			if (x->max > all.max)
				all.max = x->max;
		}
		if (all.calls)
			fam_line(f, r, "all", &all);
	}
	if (ferror(f) | (fclose(f) != 0))
		rc = bp_errorf(err, "cannot write --gpu-times '%s': %s", kt->path,
			       strerror(errno));
	bp_kt_free(kt);
	return rc;
}
