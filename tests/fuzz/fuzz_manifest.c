/* Fuzz target: manifest parsing from a buffer (no filesystem access: base_dir NULL). Every
 * refusal must carry a message; every accepted manifest must survive write -> parse -> write
 * unchanged (the writer emits only what the parser accepts, and nothing is lost). */
#include "core/alloc.h"
#include "io/manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qhx_plan *p = NULL;
    qhx_error err = {0};
    if (qhx_plan_parse((const char *)data, size, NULL, "fuzz.json", &p, &err) != QHX_OK) {
        if (p || !err.msg[0]) abort();
        return 0;
    }
    char *a = NULL, *b = NULL;
    size_t na, nb;
    if (qhx_plan_write_json(p, &a, &na, &err) != QHX_OK) abort();
    qhx_plan *q = NULL;
    if (qhx_plan_parse(a, na, NULL, "rewritten.json", &q, &err) != QHX_OK) {
        fprintf(stderr, "the written manifest does not parse: %s\n%s", err.msg, a);
        abort();
    }
    if (qhx_plan_write_json(q, &b, &nb, &err) != QHX_OK) abort();
    if (na != nb || memcmp(a, b, na) != 0) {
        fprintf(stderr, "write -> parse -> write changed the manifest:\n%s\n---\n%s", a, b);
        abort();
    }
    qhx_free(a);
    qhx_free(b);
    qhx_plan_free(q);
    qhx_plan_free(p);
    return 0;
}
