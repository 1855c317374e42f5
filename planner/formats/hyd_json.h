/* hyd_json.h: the strategies file, balplan.strategies/v1 (plans/README.md "Strategies
 * files"): Hydraulis's candidate set S^ (Sec. 7) as `balplan propose` writes it and
 * `balplan solve -m hydraulis --strategies FILE` reads it, or as a person writes it by hand
 * (only "format" and "strategies[].pipelines" are required). */
#ifndef BP_HYD_JSON_H
#define BP_HYD_JSON_H

#include <jansson.h>

#include "hyd.h"

#define BP_HYD_SET_FORMAT "balplan.strategies/v1"

/* Fills an initialised set (release it after a failure too). Strict: unknown keys, wrong
 * types and out-of-range numbers are errors naming the JSON path; strategies are
 * canonicalised (groups sorted, equal schemes merged) and must be distinct. Cluster and
 * model checks are the caller's (bp_hyd_strategy_check). */
int bp_hyd_set_from_json(struct bp_hyd_set *s, json_t *root, struct bp_error *err);
/* A new reference, or NULL. Keys sorted by the canonical dump; a, b, c written exactly. */
json_t *bp_hyd_set_to_json(const struct bp_hyd_set *s);

#endif
