/* cli_model.c: token-id list parsing for the model-running commands. */
#include "cli_model.h"

#include "core/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IDS ((int64_t)1 << 24)

static int is_sep(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int qhx_cli_parse_ids(const char *s, int32_t **ids, int64_t *n, char *why, size_t why_size) {
    *ids = NULL;
    *n = 0;
    int64_t count = 0;
    for (const char *p = s ? s : ""; *p;) { /* count the ids: runs of non-separators */
        while (*p && is_sep(*p)) p++;
        if (*p) count++;
        while (*p && !is_sep(*p)) p++;
    }
    if (count == 0) {
        snprintf(why, why_size, "empty id list");
        return -1;
    }
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
        while (is_sep(*p)) p++;
        char *end;
        errno = 0;
        long long v = *p >= '0' && *p <= '9' ? strtoll(p, &end, 10) : -1;
        if (v < 0 || errno || v > INT32_MAX || (*end && !is_sep(*end))) {
            snprintf(why, why_size, "id %lld of '%.60s' is not an integer in [0, %d]", (long long)i + 1, s, INT32_MAX);
            qhx_free(out);
            return -1;
        }
        out[i] = (int32_t)v;
        p = end;
    }
    *ids = out;
    *n = count;
    return 0;
}

qhx_status qhx_cli_attach_image(const qhx_model *m, qhx_session *s, const char *image_path,
                                const int32_t *ids, int64_t n, qhx_vl_image *im, qhx_error *err) {
    memset(im, 0, sizeof *im);
    const qhx_qwen3vl *vl = qhx_qwen3vl_of(m);
    if (!vl) {
        if (image_path) return qhx_fail(err, QHX_E_UNSUPPORTED, "--image needs a Qwen3-VL checkpoint");
        return QHX_OK;
    }
    if (image_path) {
        qhx_status rc = qhx_qwen3vl_image_load(vl, image_path, im, err);
        if (rc) return rc;
    }
    return qhx_qwen3vl_attach(qhx_session_state(s), image_path ? im : NULL, ids, n, err);
}
