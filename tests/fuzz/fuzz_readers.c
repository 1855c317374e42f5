/* fuzz_readers.c: libFuzzer harness for every text reader: the first input byte picks the
 * reader (dataset in any format, profile, plan, trace, and balexec's Slurm hostlist and port
 * list parsers), the rest is the text. A reader must return
 * 0 or -1 with a message, never crash, leak or read out of bounds (ASan+UBSan). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "jsonutil.h"
#include "plan.h"
#include "profile.h"
#include "rendezvous.h"
#include "trace.h"

static int profile_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_profile_from_json(out, root, err);
}

static int plan_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_plan_from_json(out, root, err);
}

static int trace_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_trace_from_json(out, root, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct bp_error err;
	const char *text = (const char *)data + 1;
	size_t len = size - 1;
	switch (data[0] % 5) {
	case 0: {
		struct bp_dataset ds;
		bp_dataset_init(&ds);
		if (bp_dataset_parse(&ds, text, len, "fuzz", NULL, &err) < 0 && !err.text[0])
			abort();
		bp_dataset_release(&ds);
		break;
	}
	case 1: {
		struct bp_profile p;
		bp_profile_init(&p);
		if (bp_json_parse_text(text, len, profile_cb, &p, &err) < 0 && !err.text[0])
			abort();
		bp_profile_release(&p);
		break;
	}
	case 3: {
		struct bp_trace t;
		bp_trace_init(&t);
		if (bp_json_parse_text(text, len, trace_cb, &t, &err) < 0 && !err.text[0])
			abort();
		bp_trace_release(&t);
		break;
	}
	case 4: {
		/* The environment strings balexec parses: NUL-terminated copies. */
		char *z = malloc(len + 1), host[256];
		int port = 0;
		if (!z)
			abort();
		memcpy(z, text, len);
		z[len] = 0;
		if (bp_slurm_first_host(z, host, sizeof(host), &err) < 0 && !err.text[0])
			abort();
		if (bp_slurm_first_port(z, &port, &err) == 0 && (port < 1 || port > 65535))
			abort();
		free(z);
		break;
	}
	case 2: {
		struct bp_plan p;
		bp_plan_init(&p);
		if (bp_json_parse_text(text, len, plan_cb, &p, &err) < 0 && !err.text[0])
			abort();
		bp_plan_release(&p);
		break;
	}
	}
	return 0;
}
