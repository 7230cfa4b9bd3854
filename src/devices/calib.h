/* devices/calib.h: a device that watches the inputs of another's linear layers (the activation
 * statistics behind importance-weighted quantization: qhx forge --calibrate, docs/bundle.md).
 *
 * qhx_calib_wrap gives a device whose ops all forward to `inner`; before a linear op (linear,
 * linears, swiglu_linear, linears_multi; the lm-head is a linear too) it adds, for each weight
 * the op multiplies with, the square of every input value to that weight's per-column sum and
 * counts the input rows. A weight is known by its data pointer (qhx_weight.data): the tied
 * lm-head, a copy of the embedding's qhx_weight, lands on the embedding's entry, and the caller
 * can find the checkpoint tensor each entry came from (forge/forge_calib.c does).
 *
 * The statistics are plain sums in f64 (qhx_calib_stats), kept apart from the wrapper so the
 * caller owns them beyond the model's life. Not thread-safe: one sequence at a time through the
 * wrapped device (the inner device's own threads are fine: the sums are taken before the op, on
 * the calling thread). Inputs must be host memory (the CPU device); an op over memory the host
 * cannot read is forwarded and counted in qhx_calib_stats_missed. */
#ifndef QHX_DEVICES_CALIB_H
#define QHX_DEVICES_CALIB_H

#include "devices/device.h"

#include <stdint.h>

typedef struct qhx_calib_stats qhx_calib_stats;

/* One weight's sums: sum_x2[c] = sum over every input row of x[c]^2, c in [0, cols). */
typedef struct qhx_calib_entry {
    const void *key;  /* the weight's data pointer */
    qhx_wfmt fmt;
    int64_t rows, cols;
    int64_t n_rows;   /* input rows seen */
    double *sum_x2;   /* (cols) */
} qhx_calib_entry;

/* Empty statistics (QHX_E_NOMEM). Free with qhx_calib_stats_free (NULL allowed). */
qhx_status qhx_calib_stats_create(qhx_calib_stats **out /* OUT */, qhx_error *err);
void qhx_calib_stats_free(qhx_calib_stats *s);

/* Add n input rows X (n, w->cols), row stride ldx floats, of weight w. Returns 0, or -1 when out
 * of memory (the rows are then not counted; later calls may succeed). */
int qhx_calib_stats_add(qhx_calib_stats *s, const qhx_weight *w, const float *X, int64_t ldx, int64_t n);

/* The weights seen, in the order they were first seen: i in [0, qhx_calib_stats_count). Borrowed:
 * valid until the next add or the free. */
int64_t qhx_calib_stats_count(const qhx_calib_stats *s);
const qhx_calib_entry *qhx_calib_stats_at(const qhx_calib_stats *s, int64_t i);
/* The entry of data pointer key, or NULL. */
const qhx_calib_entry *qhx_calib_stats_find(const qhx_calib_stats *s, const void *key);
/* Linear ops whose input the wrapper could not read (device memory), or rows it could not count
 * (out of memory). 0 after a complete pass. */
int64_t qhx_calib_stats_missed(const qhx_calib_stats *s);

/* The importance vector of an entry: imp[c] = mean x[c]^2 + floor, floor = floor_frac * the mean
 * over the columns of mean x^2 (so no column weighs 0 and a column never seen lit still counts
 * a little). Returns 0, or -1 when the entry saw no rows or only zeros (imp untouched: quantize
 * unweighted). */
int qhx_calib_importance(const qhx_calib_entry *e, double floor_frac, float *imp /* OUT (cols) */);

/* A device forwarding to inner and adding the inputs of its linear ops to stats (borrowed: it
 * must outlive the wrapper). *out->op->destroy frees the wrapper only, not inner nor stats. */
qhx_status qhx_calib_wrap(qhx_device *inner, qhx_calib_stats *stats, qhx_device **out, qhx_error *err);

#endif
