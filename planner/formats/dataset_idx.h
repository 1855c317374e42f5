/* dataset_idx.h: the Megatron-LM indexed dataset's index (.idx) as a sample index; private
 * to formats/ (bp_dataset_read in dataset_read.c is the one caller). dataset_idx.c has the
 * layout. */
#ifndef BP_DATASET_IDX_H
#define BP_DATASET_IDX_H

#include <stddef.h>

#include "dataset.h"

/* Whether buf starts like an index: Megatron-LM's magic "MMIDIDX", or the legacy "TNTIDX"
 * that the reader names in its refusal. No text input starts so. */
int bp_idx_detect(const char *buf, size_t len);

/* Reads an index into an initialised ds: lengths (one per document, its sequences summed),
 * nlengths and sequences (the .idx's sequence count); ids stay NULL. source (cap bytes) gets
 * the provenance text; the caller fills the rest. Every field is validated; a message names
 * the byte offset. Returns 0 or -1 (ds is the caller's to release). */
int bp_idx_read(struct bp_dataset *ds, const char *buf, size_t len, int skip_empty,
		char *source, size_t cap, struct bp_error *err);

#endif
