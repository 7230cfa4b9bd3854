/* backends/cpu.h: what the CPU backend shows beyond the backend table, for tests that check
 * which kernels a model's options put in (tests/test_kernels_i8gemm.c). */
#ifndef QHX_BACKENDS_CPU_H
#define QHX_BACKENDS_CPU_H

#include "backends/backend.h"

/* The kernel table of graphs the CPU backend loaded (g from it). */
const qhx_kernels *qhx_backend_cpu_kernels(const qhx_graphs *g);

#endif
