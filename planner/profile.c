/* profile.c: the profile's lifetime (init/release/free), collective names and table lookups
 * (profile.h).
 *
 * Called by the profile codec (profile_json.c), the analytic generator (profiler/analytic.c)
 * and the cost model (costmodel.c looks its attention and linear tables up by TP degree).
 * Invariant: a released profile is an initialised one, so release is idempotent and
 * bp_profile_free(NULL) is a no-op. The tables it owns are the grids of DistCA Sec. 4.2
 * ("Profiler") and the per-scheme fits of Hydraulis App. B.2. */
#include "profile.h"

#include <stdlib.h>
#include <string.h>

static const char *const coll_names[BP_COLL_NOPS] = {
	"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv",
};

const char *bp_coll_op_name(enum bp_coll_op op)
{
	return (unsigned)op < BP_COLL_NOPS ? coll_names[op] : "?";
}

int bp_coll_op_parse(const char *s, enum bp_coll_op *op)
{
	for (int i = 0; s && i < BP_COLL_NOPS; i++)
		if (!strcmp(s, coll_names[i])) {
			*op = (enum bp_coll_op)i;
			return 0;
		}
	return -1;
}

void bp_profile_init(struct bp_profile *p)
{
	memset(p, 0, sizeof(*p));
}

void bp_profile_release(struct bp_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nattn; i++) {
		free(p->attn[i].q);
		free(p->attn[i].kv);
		free(p->attn[i].fwd);
		free(p->attn[i].bwd);
	}
	for (size_t i = 0; i < p->nlinear; i++) {
		free(p->linear[i].tokens);
		free(p->linear[i].fwd);
		free(p->linear[i].bwd);
	}
	for (size_t i = 0; i < p->ncoll; i++) {
		free(p->coll[i].bytes);
		free(p->coll[i].us);
	}
	free(p->attn);
	free(p->linear);
	free(p->coll);
	free(p->fits);
	free(p->schemes);
	bp_profile_init(p);
}

void bp_profile_free(struct bp_profile *p)
{
	if (!p)
		return;
	bp_profile_release(p);
	free(p);
}

const struct bp_attn_table *bp_profile_attn(const struct bp_profile *p, int tp)
{
	for (size_t i = 0; i < p->nattn; i++)
		if (p->attn[i].tp == tp)
			return &p->attn[i];
	return NULL;
}

const struct bp_linear_table *bp_profile_linear(const struct bp_profile *p, int tp)
{
	for (size_t i = 0; i < p->nlinear; i++)
		if (p->linear[i].tp == tp)
			return &p->linear[i];
	return NULL;
}
