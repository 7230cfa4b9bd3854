/* Fuzz target: the shard index (model.safetensors.index.json) through qhx_st_open. A temporary
 * folder made once holds two small shards, a.safetensors (tensors "x", "y") and b.safetensors
 * ("z"), a sub-folder and a non-safetensors file; each input is written there as the index, and
 * the folder and the index file are opened. An accepted set must point every tensor inside its
 * mapped file; a refusal must carry a message. */
#include "core/alloc.h"
#include "core/file.h"
#include "io/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], index_path[128];

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(p, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* A safetensors file from its JSON header and data bytes. */
static int write_st(const char *name, const char *json, size_t data_bytes) {
    char path[192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t hl = strlen(json), n = 8 + hl + data_bytes;
    uint8_t *b = calloc(1, n);
    if (!b) return -1;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, json, hl);
    int rc = write_file(path, b, n);
    free(b);
    return rc;
}

static void cleanup(void) {
    const char *names[] = {"a.safetensors", "b.safetensors", "notes.txt", "model.safetensors.index.json"};
    char path[192];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/sub", dir);
    rmdir(path);
    rmdir(dir);
}

static int setup(void) {
    snprintf(dir, sizeof dir, "/tmp/qhx-fuzz-index-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    atexit(cleanup);
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", dir);
    char sub[192];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    if (mkdir(sub, 0700) ||
        write_st("a.safetensors",
                 "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                 "\"y\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[16,24]}}",
                 24) ||
        write_st("b.safetensors", "{\"z\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3))
        return -1;
    snprintf(sub, sizeof sub, "%s/notes.txt", dir);
    return write_file(sub, "not a safetensors file\n", 23);
}

static void check(const qhx_st_set *s) {
    for (int64_t i = 0; i < qhx_st_n_tensors(s); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(s, i);
        if (t->file_index < 0 || t->file_index >= qhx_st_n_files(s)) __builtin_trap();
        volatile uint8_t sink = t->size ? t->data[t->size - 1] : 0; /* inside the mapping */
        (void)sink;
        if (qhx_st_find(s, t->name) != t) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) {
        if (setup()) {
            fprintf(stderr, "fuzz_st_index: cannot make a temporary folder\n");
            __builtin_trap();
        }
        ready = 1;
    }
    if (write_file(index_path, data, size)) return 0;
    const char *paths[2] = {dir, index_path};
    for (int k = 0; k < 2; k++) {
        qhx_st_set *s = NULL;
        qhx_error err = {0};
        if (qhx_st_open(paths[k], &s, &err) == QHX_OK) {
            check(s);
            qhx_st_free(s);
        } else if (!err.msg[0]) {
            __builtin_trap();
        }
    }
    return 0;
}
