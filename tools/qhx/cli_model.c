/* cli_model.c: token-id list parsing for the model-running commands. */
#include "cli_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IDS ((int64_t)1 << 24)

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* One pass over "1, 2 3": ids separated by whitespace or by one comma (with whitespace around
 * it allowed); an empty id (",,", a comma first or last) is an error. Writes the ids to out
 * when it is not NULL. Returns the count, or -1 - (index of the bad id). */
static int64_t scan_ids(const char *s, int32_t *out) {
    int64_t n = 0;
    const char *p = s;
    while (is_space(*p)) p++;
    while (*p) {
        char *end;
        errno = 0;
        long long v = *p >= '0' && *p <= '9' ? strtoll(p, &end, 10) : -1;
        if (v < 0 || errno || v > INT32_MAX || (*end && *end != ',' && !is_space(*end))) return -1 - n;
        if (out) out[n] = (int32_t)v;
        n++;
        p = end;
        while (is_space(*p)) p++;
        if (*p == ',') {
            p++;
            while (is_space(*p)) p++;
            if (!*p) return -1 - n; /* a comma with no id after it */
        }
        if (n > MAX_IDS) return -1 - n;
    }
    return n;
}

int qhx_cli_parse_ids(const char *s, int32_t **ids, int64_t *n, char *why, size_t why_size) {
    *ids = NULL;
    *n = 0;
    int64_t count = scan_ids(s ? s : "", NULL);
    if (count == 0) {
        snprintf(why, why_size, "empty id list");
        return -1;
    }
    if (count < 0) {
        int64_t bad = -count;
        if (bad > MAX_IDS) snprintf(why, why_size, "more than %lld ids", (long long)MAX_IDS);
        else snprintf(why, why_size, "id %lld of '%.60s' is not an integer in [0, %d]", (long long)bad, s, INT32_MAX);
        return -1;
    }
    int32_t *out = malloc((size_t)count * sizeof *out);
    if (!out) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    scan_ids(s, out);
    *ids = out;
    *n = count;
    return 0;
}
