/* cmd_propose.h: Hydraulis's candidate strategies for the front ends: `balplan propose` and
 * `balplan solve -m hydraulis [--strategies FILE]` share the proposal and the profile rule
 * (cmd_propose.c). */
#ifndef BP_CMD_PROPOSE_H
#define BP_CMD_PROPOSE_H

#include <stdint.h>

#include "dataset.h"
#include "hyd.h"
#include "profile.h"

/* What solve knows when it needs hydraulis's candidates. */
struct cmd_hyd_req {
	const char *strategies;  /* a strategies file, or NULL: propose from the dataset */
	const struct bp_dataset *ds;
	const char *ds_sha;
	const char *profile;     /* a profile file, or NULL: analytic from gpu and model */
	const char *gpu, *model;
	int gpus;
	struct bp_scheme request; /* the request's layout (plan layout 0) */
	int64_t max_tokens, tokens_per_step, docs_per_step;
	enum bp_overlen overlen;
};

/* Fills set (initialised) with the candidates, from the file or proposed with the default
 * proposal options, and prof/sha with the profile hydraulis plans with: the file, or the
 * analytic profile of the request's scheme and every candidate's schemes (what `check`
 * regenerates from the plan's layouts). Returns an exit status (cmdutil.h), having printed
 * the error. */
int cmd_hyd_candidates(const struct cmd_hyd_req *r, struct bp_hyd_set *set,
		       struct bp_profile *prof, char sha[65]);

#endif
