/* bench_util.h: what every planner benchmark in tools/bench needs: a monotonic clock in
 * milliseconds and a qsort comparator for medians of doubles. */
#ifndef BP_BENCH_UTIL_H
#define BP_BENCH_UTIL_H
#include <time.h>

static inline double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

#endif
