/* core/time: a monotonic clock for timing and progress (never for results). */
#ifndef QHX_CORE_TIME_H
#define QHX_CORE_TIME_H

#include <stdint.h>

/* Nanoseconds on a monotonic clock with an arbitrary origin (CLOCK_MONOTONIC).
 * Thread-safe; never goes backwards. */
uint64_t qhx_time_ns(void);

/* Seconds as a double, same clock: convenient for rates (tokens / second). */
double qhx_time_s(void);

#endif
