/* methods.c: the method table (method.h). Adding a method: one file and one line here. */
#include "method.h"

#include <stdlib.h>
#include <string.h>

static const struct bp_method methods[] = {
	{"plain", bp_method_plain,
	 "documents in loader order cut into fixed context windows, dealt round-robin",
	 "Megatron-LM baseline (WLB-LLM Sec. 3, 'Plain-4D')"},
	{"fixed", bp_method_fixed,
	 "fixed-length packing: costliest document first into the least-loaded window that fits",
	 "WLB-LLM Sec. 3.2 'Fixed-Len Greedy' (Table 2)"},
};

size_t bp_method_count(void)
{
	return BP_ARRAY_LEN(methods);
}

const struct bp_method *bp_method_at(size_t i)
{
	return i < BP_ARRAY_LEN(methods) ? &methods[i] : NULL;
}

const struct bp_method *bp_method_find(const char *name)
{
	for (size_t i = 0; i < BP_ARRAY_LEN(methods); i++)
		if (!strcmp(methods[i].name, name))
			return &methods[i];
	return NULL;
}

int bp_method_alloc_steps(struct bp_plan *out, const struct bp_batches *in, size_t n,
			  struct bp_error *err)
{
	out->steps = bp_calloc(n, sizeof(*out->steps), err);
	if (!out->steps)
		return -1;
	out->nsteps = n;
	for (size_t i = 0; i < n; i++) {
		struct bp_step *st = &out->steps[i];
		st->index = (int64_t)i;
		st->npipes = (size_t)out->cluster.dp;
		st->pipes = bp_calloc(st->npipes, sizeof(*st->pipes), err);
		if (!st->pipes)
			return -1;
		if (i < in->n && in->b[i].ndocs) {
			st->docs = bp_calloc(in->b[i].ndocs, sizeof(*st->docs), err);
			if (!st->docs)
				return -1;
			memcpy(st->docs, in->b[i].docs, in->b[i].ndocs * sizeof(*st->docs));
			st->ndocs = in->b[i].ndocs;
		}
	}
	return 0;
}
