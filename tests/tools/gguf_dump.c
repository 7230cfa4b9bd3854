/* gguf_dump FILE.gguf OUT_DIR: every tensor of a GGUF file through the reader (io/gguf.h) and the
 * reference dequantization (kernels/gguf_quant.h), written as OUT_DIR/<index>.f32 (file order,
 * float32 little-endian), with one line per tensor on stdout: index, name, type, elements, and
 * "skipped" for a type without a reference. The GGUF test compares the files with the `gguf`
 * Python package's dequantization (tests/cli/gguf.sh). */
#include "core/alloc.h"
#include "io/gguf.h"
#include "kernels/gguf_quant.h"

#include <stdio.h>
#include <stdlib.h>

static int dump_tensor(const qhx_gguf_tensor *t, const char *dir, int64_t index) {
    if (!qhx_gguf_can_dequant(t->type)) {
        printf("%lld %s %s %lld skipped\n", (long long)index, t->name, qhx_ggml_type_name(t->type),
               (long long)t->n_elements);
        return 0;
    }
    float *v = qhx_malloc((size_t)(t->n_elements ? t->n_elements : 1) * sizeof *v);
    if (!v) return fprintf(stderr, "gguf_dump: out of memory\n"), 1;
    int rc = qhx_gguf_dequant_row(t->type, t->data, t->n_elements, v);
    char path[4096];
    snprintf(path, sizeof path, "%s/%lld.f32", dir, (long long)index);
    FILE *f = rc ? NULL : fopen(path, "wb");
    if (f && fwrite(v, sizeof *v, (size_t)t->n_elements, f) == (size_t)t->n_elements && !fclose(f)) {
        printf("%lld %s %s %lld\n", (long long)index, t->name, qhx_ggml_type_name(t->type), (long long)t->n_elements);
        qhx_free(v);
        return 0;
    }
    fprintf(stderr, "gguf_dump: tensor '%s': %s\n", t->name, rc ? "cannot dequantize" : "cannot write");
    qhx_free(v);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) return fprintf(stderr, "usage: gguf_dump FILE.gguf OUT_DIR\n"), 2;
    qhx_error err = {0};
    qhx_gguf *g = NULL;
    if (qhx_gguf_open(argv[1], QHX_FILE_MAP, &g, &err)) return fprintf(stderr, "gguf_dump: %s\n", err.msg), 1;
    int rc = 0;
    for (int64_t i = 0; !rc && i < qhx_gguf_n_tensors(g); i++) rc = dump_tensor(qhx_gguf_tensor_at(g, i), argv[2], i);
    qhx_gguf_free(g);
    return rc;
}
