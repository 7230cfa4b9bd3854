/* core/time: CLOCK_MONOTONIC. */
#include "core/time.h"

#include <time.h>

uint64_t qhx_time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double qhx_time_s(void) { return (double)qhx_time_ns() * 1e-9; }
