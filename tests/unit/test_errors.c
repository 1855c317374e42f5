/* test_errors.c: error records (bp.h bp_errorf, bp_error_prefix, bp_infeasiblef): a message
 * that fits is kept whole; one that does not is cut at the record's size and ends in "...",
 * so a cut never passes for the whole message. */
#include <string.h>

#include "bp.h"
#include "check.h"

int main(void)
{
	struct bp_error err = {{0}};
	char long_name[600];
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;

	/* fits: whole, no mark */
	CHECK(bp_errorf(&err, "plan '%s' is invalid", "a.json") == -1);
	CHECK(!strcmp(err.text, "plan 'a.json' is invalid"));
	/* exactly the record's 255 characters: whole */
	CHECK(bp_errorf(&err, "%.255s", long_name) == -1);
	CHECK(strlen(err.text) == 255 && err.text[254] == 'x');
	/* one more: cut, marked */
	CHECK(bp_errorf(&err, "%.256s", long_name) == -1);
	CHECK(strlen(err.text) == 255 && !strcmp(err.text + 252, "..."));
	CHECK(bp_infeasiblef(&err, "no room for '%s'", long_name) == BP_INFEASIBLE);
	CHECK(strlen(err.text) == 255 && !strcmp(err.text + 252, "..."));
	CHECK(!strncmp(err.text, "no room for 'xxx", 16));

	/* a prefix: kept whole when both fit, and the old text's cut marked */
	bp_errorf(&err, "step 3 is bad");
	CHECK(bp_error_prefix(&err, "plan '%s'", "a.json") == -1);
	CHECK(!strcmp(err.text, "plan 'a.json': step 3 is bad"));
	bp_errorf(&err, "%.200s", long_name);
	bp_error_prefix(&err, "plan '%.60s'", long_name);
	CHECK(strlen(err.text) == 255 && !strcmp(err.text + 252, "..."));
	CHECK(!strncmp(err.text, "plan 'xxx", 9));
	/* a prefix longer than the record alone */
	bp_errorf(&err, "step 3 is bad");
	bp_error_prefix(&err, "%s", long_name);
	CHECK(strlen(err.text) == 255 && !strcmp(err.text + 252, "..."));
	/* a prefix that leaves the old text exactly room: whole */
	bp_errorf(&err, "%.100s", long_name);
	bp_error_prefix(&err, "%.153s", long_name);
	CHECK(strlen(err.text) == 255 && err.text[254] == 'x' && err.text[153] == ':');
	return CHECK_DONE();
}
