/* multipack.c: placeholder while the method is being written (replaced in this change). */
#include "method.h"

int bp_method_multipack(const struct bp_method_ctx *ctx, const struct bp_batches *in, struct bp_plan *out,
	struct bp_error *err)
{
	(void)ctx;
	(void)in;
	(void)out;
	return bp_errorf(err, "method not written yet");
}
