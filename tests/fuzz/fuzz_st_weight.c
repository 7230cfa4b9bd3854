/* Fuzz target: the quantized-layout reader (io/st_weight.c). The input is parsed as one
 * safetensors file; every tensor that is not a side tensor is then viewed as a weight with
 * qhx_st_get_weight, with any shape and with its own. An accepted view must be one the kernels
 * can use: the reference row and matvec kernels read its first and last rows (ASan sees any
 * byte they touch outside the input), and the scales must be finite. */
#include "core/alloc.h"
#include "ops/st_weight.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_COLS ((int64_t)1 << 16) /* kernels are run only on narrower matrices */

static void use(const qhx_kernels *k, const qhx_weight *w) {
    if (w->rows <= 0 || w->cols <= 0 || w->cols > MAX_COLS || !k->row[w->fmt] || !k->matvec[w->fmt]) return;
    float *x = qhx_malloc((size_t)w->cols * sizeof *x), *out = qhx_malloc((size_t)w->cols * sizeof *out);
    float *y = qhx_malloc((size_t)w->rows * sizeof *y);
    if (x && out && y) {
        for (int64_t c = 0; c < w->cols; c++) x[c] = 1.0f;
        int64_t last = w->rows - 1;
        k->row[w->fmt](w, 0, out);
        k->row[w->fmt](w, last, out);
        k->matvec[w->fmt](w, x, y, 0, 1);
        k->matvec[w->fmt](w, x, y, last, w->rows);
    }
    qhx_free(x);
    qhx_free(out);
    qhx_free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static qhx_kernels k;
    static int ready;
    if (!ready) {
        qhx_kern_select(QHX_ISA_REF, &k);
        ready = 1;
    }
    qhx_st_set *s = NULL;
    qhx_error err;
    if (qhx_st_parse(data, size, "fuzz", &s, &err) != QHX_OK) return 0;
    for (int64_t i = 0; i < qhx_st_n_tensors(s); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(s, i);
        if (qhx_st_is_side_tensor(t->name)) continue;
        qhx_weight w;
        err.msg[0] = '\0';
        if (qhx_st_get_weight(s, t->name, -1, -1, &w, &err) == QHX_OK) {
            if (w.fmt == QHX_W_Q4 && (w.group < 2 || w.group % 2 || w.cols % w.group)) __builtin_trap();
            if (w.fmt == QHX_W_Q6 && (w.group < 4 || w.group % 4 || w.cols % w.group || !w.high)) __builtin_trap();
            if ((w.fmt == QHX_W_Q8 && !w.scales) || ((w.fmt == QHX_W_Q4 || w.fmt == QHX_W_Q6) && !w.gscales))
                __builtin_trap();
            use(&k, &w);
            /* the same with the shape stated, and with a wrong column count */
            if (qhx_st_get_weight(s, t->name, w.rows, w.cols, &w, &err) != QHX_OK) __builtin_trap();
            if (qhx_st_get_weight(s, t->name, w.rows, w.cols + 1, &w, &err) == QHX_OK) __builtin_trap();
        } else if (!err.msg[0]) {
            __builtin_trap(); /* every refusal says why */
        }
    }
    qhx_st_free(s);
    return 0;
}
