/* embedded.h: files compiled into the binary (tools/embed.cmake generates the tables from the
 * .json files in datasets/ and profiler/profiles/), so an installed balplan needs no data
 * files. Sorted by name. */
#ifndef BP_EMBEDDED_H
#define BP_EMBEDDED_H
#include <stddef.h>

struct bp_embedded_file {
	const char *name;          /* file name without ".json" */
	const unsigned char *data; /* NUL-terminated, static */
	size_t len;                /* bytes, without the NUL */
};

extern const struct bp_embedded_file bp_embedded_datasets[];
extern const size_t bp_embedded_datasets_count;
/* The shipped measured profiles (the .json files of profiler/profiles), by file name. */
extern const struct bp_embedded_file bp_embedded_profiles[];
extern const size_t bp_embedded_profiles_count;

#endif
