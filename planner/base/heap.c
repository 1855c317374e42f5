/* heap.c: bp_heap's storage (heap.h; the sifts are inline there). */
#include "heap.h"

#include <stdlib.h>

int bp_heap_reserve(struct bp_heap *hp, size_t cap, int with_pos, struct bp_error *err)
{
	if (!cap)
		cap = 1;
	if (cap <= hp->cap && (!with_pos || hp->pos))
		return 0;
	if (cap < hp->cap)
		cap = hp->cap;
	int *nh = bp_realloc_array(hp->h, cap, sizeof(int), err);
	if (!nh)
		return -1;
	hp->h = nh;
	if (with_pos || hp->pos) {
		int *np = bp_realloc_array(hp->pos, cap, sizeof(int), err);
		if (!np)
			return -1;
		if (!hp->pos) /* pos added to a heap that had none */
			for (size_t i = 0; i < hp->n; i++)
				np[hp->h[i]] = (int)i;
		hp->pos = np;
	}
	hp->cap = cap;
	return 0;
}

void bp_heap_free(struct bp_heap *hp)
{
	free(hp->h);
	free(hp->pos);
	*hp = (struct bp_heap){0};
}

void bp_heap_iota(struct bp_heap *hp, size_t n)
{
	for (size_t i = 0; i < n; i++)
		bp_heap_put_(hp, i, (int)i);
	hp->n = n;
}
