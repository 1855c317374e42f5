/* plan_same.h: whether two plans write the same canonical JSON (the determinism checks of
 * the unit tests: same inputs, byte-identical plan). */
#ifndef BP_PLAN_SAME_H
#define BP_PLAN_SAME_H
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "plan.h"

static int plans_same(const struct bp_plan *a, const struct bp_plan *b)
{
	json_t *ja = bp_plan_to_json(a), *jb = bp_plan_to_json(b);
	char *x = ja ? bp_json_dump_canonical(ja) : NULL;
	char *y = jb ? bp_json_dump_canonical(jb) : NULL;
	int same = x && y && !strcmp(x, y);
	free(x);
	free(y);
	json_decref(ja);
	json_decref(jb);
	return same;
}

#endif
