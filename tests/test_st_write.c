// ctest-labels: unit
/* st_write: the streaming writer round-trips through the reader (bytes, dtypes, shapes,
 * metadata, alignment), refuses misuse, and never leaves a partial file; st_weight recognises
 * plain, Q8 and Q4 matrices written in the documented layout. */
#include "core/alloc.h"
#include "core/fp16.h"
#include "io/safetensors.h"
#include "ops/st_weight.h"
#include "io/st_write.h"
#include "kernels/quant.h"
#include "t.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[256];

/* Number of entries in dir besides . and .. */
static int n_entries(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void fill_bytes(uint8_t *b, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)((i * 131u + seed * 7u) ^ (i >> 5));
}

static void test_round_trip(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    qhx_stw *w = NULL;
    qhx_error err = {0};
    CHECK_EQ(qhx_stw_create(path, &w, &err), QHX_OK);
    /* element sizes mixed on purpose: the writer reorders so each starts aligned */
    struct { const char *name; qhx_dtype dt; int nd; int64_t shape[3]; } T[] = {
        {"odd.i8", QHX_DTYPE_I8, 2, {3, 5}},
        {"h.bf16", QHX_DTYPE_BF16, 1, {7}},
        {"f.f32", QHX_DTYPE_F32, 3, {2, 3, 4}},
        {"empty", QHX_DTYPE_F32, 2, {0, 4}},
        {"u.u8", QHX_DTYPE_U8, 2, {4, 16}},
        {"scalar", QHX_DTYPE_F32, 0, {0}},
        {"g.f16", QHX_DTYPE_F16, 1, {1}},
    };
    const int nt = (int)(sizeof T / sizeof T[0]);
    for (int i = 0; i < nt; i++) CHECK_EQ(qhx_stw_declare(w, T[i].name, T[i].dt, T[i].nd, T[i].shape, &err), QHX_OK);
    CHECK_EQ(qhx_stw_meta(w, "qhexrt.format", "qhexrt/1", &err), QHX_OK);
    CHECK(qhx_stw_meta(w, "qhexrt.format", "x", &err) == QHX_E_ARG);
    CHECK(qhx_stw_declare(w, "f.f32", QHX_DTYPE_F32, 1, (int64_t[]){1}, &err) == QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "declared twice");
    CHECK(qhx_stw_declare(w, "neg", QHX_DTYPE_F32, 1, (int64_t[]){-1}, &err) == QHX_E_ARG);
    CHECK(qhx_stw_declare(w, "huge", QHX_DTYPE_F32, 2, (int64_t[]){INT64_MAX / 2, 4}, &err) == QHX_E_LIMIT);
    CHECK(qhx_stw_declare(w, "bad\xff", QHX_DTYPE_F32, 1, (int64_t[]){1}, &err) == QHX_E_ARG);
    CHECK_EQ(qhx_stw_begin(w, &err), QHX_OK);
    CHECK(qhx_stw_declare(w, "late", QHX_DTYPE_F32, 1, (int64_t[]){1}, &err) == QHX_E_ARG);

    /* write in the writer's order, each tensor in pieces of 3 bytes */
    uint8_t buf[4096];
    int order_ok = 1, written = 0;
    const char *name;
    while ((name = qhx_stw_next(w))) {
        int i = 0;
        while (i < nt && strcmp(T[i].name, name)) i++;
        if (i == nt) { order_ok = 0; break; }
        size_t size = qhx_dtype_size(T[i].dt);
        for (int d = 0; d < T[i].nd; d++) size *= (size_t)T[i].shape[d];
        fill_bytes(buf, size, (unsigned)i);
        if (written == 0) {
            CHECK(qhx_stw_write(w, "u.u8", buf, 1, &err) == QHX_E_ARG);
            CHECK_CONTAINS(err.msg, "out of order");
            CHECK(qhx_stw_write(w, name, buf, size + 1, &err) == QHX_E_ARG);
        }
        for (size_t off = 0; off < size; off += 3)
            CHECK_EQ(qhx_stw_write(w, name, buf + off, size - off < 3 ? size - off : 3, &err), QHX_OK);
        written++;
    }
    CHECK(order_ok);
    CHECK_EQ(written, nt - 1); /* "empty" completes by itself */
    CHECK(qhx_stw_write(w, "f.f32", buf, 1, &err) == QHX_E_ARG);
    uint64_t expect_bytes = qhx_stw_file_bytes(w);
    CHECK_EQ(n_entries(), 1); /* the temporary file only */
    CHECK_EQ(qhx_stw_finish(w, &err), QHX_OK);
    qhx_stw_free(w);
    CHECK_EQ(n_entries(), 1);

    qhx_st_set *s = NULL;
    CHECK_EQ(qhx_st_open(path, &s, &err), QHX_OK);
    if (!s) { fprintf(stderr, "%s\n", err.msg); return; }
    CHECK_EQ(qhx_st_n_tensors(s), nt);
    for (int i = 0; i < nt; i++) {
        const qhx_st_tensor *t = qhx_st_find(s, T[i].name);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_EQ(t->dtype, T[i].dt);
        CHECK_EQ(t->n_dims, T[i].nd);
        for (int d = 0; d < T[i].nd; d++) CHECK_EQ(t->shape[d], T[i].shape[d]);
        fill_bytes(buf, t->size, (unsigned)i);
        CHECK(t->size == 0 || !memcmp(t->data, buf, t->size));
        CHECK_EQ((uintptr_t)t->data % qhx_dtype_size(t->dtype), 0); /* mapping is page-aligned */
    }
    /* larger elements come first */
    size_t prev = 8;
    int sorted = 1;
    for (int64_t i = 0; i < qhx_st_n_tensors(s); i++) {
        size_t es = qhx_dtype_size(qhx_st_tensor_at(s, i)->dtype);
        if (es > prev) sorted = 0;
        prev = es;
    }
    CHECK(sorted);
    CHECK_EQ(qhx_st_n_metadata(s), 1);
    const char *k, *v;
    qhx_st_metadata_at(s, 0, &k, &v);
    CHECK_STR(k, "qhexrt.format");
    CHECK_STR(v, "qhexrt/1");
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    CHECK_EQ((uint64_t)ftell(f), expect_bytes);
    uint8_t h8[8];
    fseek(f, 0, SEEK_SET);
    CHECK_EQ(fread(h8, 1, 8, f), 8);
    fclose(f);
    CHECK_EQ(h8[0] % 8, 0);
    qhx_st_free(s);
    unlink(path);
}

static void test_no_partial_file(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/b.safetensors", dir);
    qhx_error err;
    /* incomplete: finish refuses, nothing remains */
    qhx_stw *w;
    CHECK_EQ(qhx_stw_create(path, &w, &err), QHX_OK);
    CHECK_EQ(qhx_stw_declare(w, "x", QHX_DTYPE_F32, 1, (int64_t[]){4}, &err), QHX_OK);
    CHECK_EQ(qhx_stw_begin(w, &err), QHX_OK);
    float x[4] = {1, 2, 3, 4};
    CHECK_EQ(qhx_stw_write(w, "x", x, 8, &err), QHX_OK);
    CHECK(qhx_stw_finish(w, &err) == QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "incomplete: 8 of 16 bytes");
    qhx_stw_free(w);
    CHECK_EQ(n_entries(), 0);
    /* freed midway */
    CHECK_EQ(qhx_stw_create(path, &w, &err), QHX_OK);
    CHECK_EQ(qhx_stw_declare(w, "x", QHX_DTYPE_F32, 1, (int64_t[]){4}, &err), QHX_OK);
    CHECK_EQ(qhx_stw_begin(w, &err), QHX_OK);
    qhx_stw_free(w);
    CHECK_EQ(n_entries(), 0);
    /* an unwritable folder names the path */
    CHECK_EQ(qhx_stw_create("/nonexistent-dir/c.safetensors", &w, &err), QHX_OK);
    CHECK(qhx_stw_begin(w, &err) == QHX_E_IO);
    CHECK_CONTAINS(err.msg, "/nonexistent-dir/c.safetensors");
    qhx_stw_free(w);
}

/* A matrix stored plain (bf16), as Q8 and as Q4, read back through qhx_st_get_weight; the
 * reference matvec over the mapped view equals the one over the in-memory arrays. */
static void test_weights(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    enum { R = 6, C = 64 };
    float W[R * C], x[C];
    for (int i = 0; i < R * C; i++) W[i] = sinf((float)i * 0.37f) * (1.0f + (float)(i % 7));
    for (int i = 0; i < C; i++) x[i] = cosf((float)i);
    int8_t q8[R * C];
    float s8[R];
    uint8_t q4[R * C / 2];
    uint16_t s4[R * C / 32], s_bad[R * 3] = {0};
    uint16_t bf[R * C];
    for (int r = 0; r < R; r++) {
        qhx_quant_q8_row(W + r * C, C, q8 + r * C, s8 + r);
        qhx_quant_q4_row(W + r * C, C, 32, q4 + r * C / 2, s4 + r * 2);
    }
    qhx_f32_to_bf16_row(W, bf, R * C);
    qhx_error err;
    qhx_stw *w;
    CHECK_EQ(qhx_stw_create(path, &w, &err), QHX_OK);
    qhx_stw_declare(w, "a.q8", QHX_DTYPE_I8, 2, (int64_t[]){R, C}, &err);
    qhx_stw_declare(w, "a.q8.qscale", QHX_DTYPE_F32, 1, (int64_t[]){R}, &err);
    qhx_stw_declare(w, "a.q4", QHX_DTYPE_U8, 2, (int64_t[]){R, C / 2}, &err);
    qhx_stw_declare(w, "a.q4.qscale", QHX_DTYPE_F16, 2, (int64_t[]){R, C / 32}, &err);
    qhx_stw_declare(w, "a.bf16", QHX_DTYPE_BF16, 2, (int64_t[]){R, C}, &err);
    qhx_stw_declare(w, "orphan", QHX_DTYPE_I8, 2, (int64_t[]){R, C}, &err);
    qhx_stw_declare(w, "bad.q4", QHX_DTYPE_U8, 2, (int64_t[]){R, C / 2}, &err);
    qhx_stw_declare(w, "bad.q4.qscale", QHX_DTYPE_F16, 2, (int64_t[]){R, 3}, &err);
    CHECK_EQ(qhx_stw_begin(w, &err), QHX_OK);
    const char *name;
    while ((name = qhx_stw_next(w))) {
        const void *p = NULL;
        size_t n = 0;
        if (!strcmp(name, "a.q8") || !strcmp(name, "orphan")) p = q8, n = sizeof q8;
        else if (!strcmp(name, "a.q8.qscale")) p = s8, n = sizeof s8;
        else if (!strcmp(name, "a.q4") || !strcmp(name, "bad.q4")) p = q4, n = sizeof q4;
        else if (!strcmp(name, "a.q4.qscale")) p = s4, n = sizeof s4;
        else if (!strcmp(name, "a.bf16")) p = bf, n = sizeof bf;
        else if (!strcmp(name, "bad.q4.qscale")) p = s_bad, n = sizeof s_bad;
        if (qhx_stw_write(w, name, p, n, &err) != QHX_OK) break;
    }
    CHECK_EQ(qhx_stw_finish(w, &err), QHX_OK);
    qhx_stw_free(w);

    qhx_st_set *s;
    CHECK_EQ(qhx_st_open(path, &s, &err), QHX_OK);
    qhx_weight v;
    float y[R], yr[R];
    CHECK_EQ(qhx_st_get_weight(s, "a.q8", R, C, &v, &err), QHX_OK);
    CHECK(v.fmt == QHX_W_Q8 && v.rows == R && v.cols == C && v.group == 0);
    qhx_k_matvec_q8_ref(&v, x, y, 0, R);
    qhx_weight m8 = {.fmt = QHX_W_Q8, .rows = R, .cols = C, .data = q8, .scales = s8};
    qhx_k_matvec_q8_ref(&m8, x, yr, 0, R);
    CHECK(!memcmp(y, yr, sizeof y));
    CHECK_EQ(qhx_st_get_weight(s, "a.q4", -1, -1, &v, &err), QHX_OK);
    CHECK(v.fmt == QHX_W_Q4 && v.rows == R && v.cols == C && v.group == 32);
    qhx_k_matvec_q4_ref(&v, x, y, 0, R);
    qhx_weight m4 = {.fmt = QHX_W_Q4, .rows = R, .cols = C, .data = q4, .gscales = s4, .group = 32};
    qhx_k_matvec_q4_ref(&m4, x, yr, 0, R);
    CHECK(!memcmp(y, yr, sizeof y));
    CHECK_EQ(qhx_st_get_weight(s, "a.bf16", R, C, &v, &err), QHX_OK);
    CHECK(v.fmt == QHX_W_BF16 && v.scales == NULL && v.gscales == NULL);
    CHECK(qhx_st_get_weight(s, "a.bf16", R, C + 1, &v, &err) == QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "expected 65 columns");
    CHECK(qhx_st_get_weight(s, "orphan", R, C, &v, &err) == QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "orphan.qscale' is missing");
    CHECK(qhx_st_get_weight(s, "bad.q4", R, C, &v, &err) == QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "groups of an even size");
    CHECK(qhx_st_get_weight(s, "a.q8.qscale", -1, -1, &v, &err) != QHX_OK);
    CHECK(qhx_st_is_side_tensor("a.q8.qscale") && qhx_st_is_side_tensor("x.qmin") && !qhx_st_is_side_tensor("a.q8"));
    qhx_st_free(s);
    unlink(path);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/qhx-test-stw-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_no_partial_file();
    test_weights();
    rmdir(dir);
    return t_done("test_st_write");
}
