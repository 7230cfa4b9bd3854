/* cli_model.c: token-id list parsing for the model-running commands. */
#include "cli_model.h"

#include "core/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_IDS ((int64_t)1 << 24)

int qhx_cli_parse_ids(const char *s, int32_t **ids, int64_t *n, char *why, size_t why_size) {
    *ids = NULL;
    *n = 0;
    if (!s || !*s) {
        snprintf(why, why_size, "empty id list");
        return -1;
    }
    int64_t count = 1;
    for (const char *p = s; *p; p++) count += *p == ',';
    if (count > MAX_IDS) {
        snprintf(why, why_size, "more than %lld ids", (long long)MAX_IDS);
        return -1;
    }
    int32_t *out = qhx_malloc((size_t)count * sizeof *out);
    if (!out) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    const char *p = s;
    for (int64_t i = 0; i < count; i++) {
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9') goto bad;
        long long v = strtoll(p, &end, 10);
        if (errno || v > INT32_MAX || (*end != ',' && *end != '\0')) goto bad;
        out[i] = (int32_t)v;
        p = *end ? end + 1 : end;
        continue;
    bad:
        snprintf(why, why_size, "id %lld of '%s' is not an integer in [0, %d]", (long long)i + 1, s, INT32_MAX);
        qhx_free(out);
        return -1;
    }
    *ids = out;
    *n = count;
    return 0;
}
