/* profile.c: the profile's lifetime (init/release/free), collective names and table lookups
 * (profile.h), and the scheme check that a profile prices every collective a scheme uses.
 *
 * Called by the profile codec (profile_json.c), the analytic generator (profiler/analytic.c)
 * and the cost model (costmodel.c looks its attention and linear tables up by TP degree).
 * Invariant: a released profile is an initialised one, so release is idempotent and
 * bp_profile_free(NULL) is a no-op. The tables it owns are the grids of DistCA Sec. 4.2
 * ("Profiler"), the sparse M[x,k] tables of SparseBalance Sec. IV-B (Eq. 10) and the
 * per-scheme fits of Hydraulis App. B.2. */
#include "profile.h"

#include <stdio.h>
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

static const char *const recompute_names[] = {"none", "selective", "full"};

const char *bp_recompute_name(enum bp_recompute r)
{
	return (unsigned)r < 3 ? recompute_names[r] : "?";
}

int bp_recompute_parse(const char *s, enum bp_recompute *out)
{
	for (int i = 0; i < 3; i++)
		if (s && !strcmp(s, recompute_names[i])) {
			*out = (enum bp_recompute)i;
			return 0;
		}
	return -1;
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
		free(p->attn[i].fwd_alone);
		free(p->attn[i].bwd_alone);
		free(p->attn[i].unit[0]);
		free(p->attn[i].unit[1]);
	}
	for (size_t i = 0; i < p->nlinear; i++) {
		free(p->linear[i].tokens);
		free(p->linear[i].fwd);
		free(p->linear[i].bwd);
		free(p->linear[i].lm_fwd);
		free(p->linear[i].lm_bwd);
	}
	for (size_t i = 0; i < p->nsparse; i++) {
		free(p->sparse[i].x);
		free(p->sparse[i].k);
		free(p->sparse[i].fwd);
		free(p->sparse[i].bwd);
	}
	for (size_t i = 0; i < p->ncoll; i++) {
		free(p->coll[i].bytes);
		free(p->coll[i].us);
	}
	free(p->attn);
	free(p->linear);
	free(p->sparse);
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

const struct bp_sparse_table *bp_profile_sparse(const struct bp_profile *p, int tp,
						int block)
{
	for (size_t i = 0; i < p->nsparse; i++)
		if (p->sparse[i].tp == tp && p->sparse[i].block == block)
			return &p->sparse[i];
	return NULL;
}

int bp_profile_has_coll(const struct bp_profile *p, enum bp_coll_op op, int inter)
{
	int any_inter = 0;
	for (size_t i = 0; i < p->ncoll; i++) {
		if (p->coll[i].op != op)
			continue;
		if (p->coll[i].inter == (inter != 0))
			return 1;
		any_inter |= p->coll[i].inter;
	}
	return !inter && any_inter; /* the cost model prices an intra group on network tables */
}

/* Fails when (op, inter) has no table; who says which group needs it. */
static int need_coll(const struct bp_profile *p, enum bp_coll_op op, int inter,
		     const char *who, struct bp_error *err)
{
	if (bp_profile_has_coll(p, op, inter))
		return 0;
	return bp_errorf(err, "profile '%s' has no %s table %s, needed for %s (it would cost "
			 "nothing)", p->name, bp_coll_op_name(op),
			 inter ? "across nodes" : "within a node", who);
}

int bp_profile_check_scheme(const struct bp_profile *p, int tp, int cp, int pp, int dp,
			    int gpus_per_node, struct bp_error *err)
{
	char who[128];
	if (tp < 1 || cp < 1 || pp < 1 || dp < 1)
		return bp_errorf(err, "parallel degrees must be >= 1");
	int64_t gpn = gpus_per_node > 0 ? gpus_per_node : p->hw.gpus_per_node;
	if (gpn < 1)
		gpn = 1;
	if (!bp_profile_attn(p, tp) || !bp_profile_linear(p, tp))
		return bp_errorf(err, "profile '%s' has no %s table for tp %d", p->name,
				 bp_profile_attn(p, tp) ? "linear" : "attention", tp);
	/* Spans of consecutive ranks, as costmodel.c places the groups (Megatron order). */
	int64_t tcs = (int64_t)tp * cp, tcds = tcs * dp, all = tcds * pp;
	if (tp > 1) {
		snprintf(who, sizeof(who), "the tp %d group", tp);
		if (need_coll(p, BP_COLL_ALLREDUCE, tp > gpn, who, err) < 0)
			return -1;
	}
	if (cp > 1) {
		snprintf(who, sizeof(who), "the cp %d group", cp);
		if (need_coll(p, BP_COLL_ALLGATHER, tcs > gpn, who, err) < 0 ||
		    need_coll(p, BP_COLL_REDUCESCATTER, tcs > gpn, who, err) < 0)
			return -1;
	}
	if (pp > 1) {
		snprintf(who, sizeof(who), "the stages of pp %d", pp);
		if (need_coll(p, BP_COLL_SENDRECV, all > gpn, who, err) < 0)
			return -1;
	}
	if ((int64_t)dp * cp > 1) {
		int inter = dp > 1 ? tcds > gpn : tcs > gpn;
		snprintf(who, sizeof(who), "the gradient sync over dp %d x cp %d replicas", dp, cp);
		if (need_coll(p, BP_COLL_REDUCESCATTER, inter, who, err) < 0 ||
		    need_coll(p, BP_COLL_ALLGATHER, inter, who, err) < 0)
			return -1;
	}
	return 0;
}
