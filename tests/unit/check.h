/* check.h: the unit-test harness. CHECK prints file:line and the failed expression and counts
 * the failure; a test binary returns nonzero when any check failed. */
#ifndef BP_CHECK_H
#define BP_CHECK_H
#include <math.h>
#include <stdio.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                     \
	do {                                                                            \
		check_count++;                                                          \
		if (!(cond)) {                                                          \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			check_failures++;                                               \
		}                                                                       \
	} while (0)

#define CHECK_NEAR(a, b, tol)                                                           \
	do {                                                                            \
		double check_a_ = (a), check_b_ = (b);                                  \
		check_count++;                                                          \
		if (!(fabs(check_a_ - check_b_) <= (tol))) {                            \
			fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.9g, %s = %.9g\n", \
				__FILE__, __LINE__, #a, check_a_, #b, check_b_);        \
			check_failures++;                                               \
		}                                                                       \
	} while (0)

/* Call at the end of main. */
#define CHECK_DONE()                                                                    \
	(fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures),        \
	 check_failures ? 1 : 0)

#endif
