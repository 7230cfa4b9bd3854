/* core/status: status strings and error-message formatting. */
#include "core/status.h"

#include <stdio.h>
#include <string.h>

const char *qhx_status_str(qhx_status code) {
    switch (code) {
    case QHX_OK: return "ok";
    case QHX_E_ARG: return "invalid argument";
    case QHX_E_IO: return "i/o error";
    case QHX_E_FORMAT: return "malformed input";
    case QHX_E_UNSUPPORTED: return "unsupported";
    case QHX_E_NOMEM: return "out of memory";
    case QHX_E_LIMIT: return "limit exceeded";
    case QHX_E_ABORTED: return "aborted";
    case QHX_E_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *qhx_version(void) { return QHX_VERSION; }

int qhx_version_number(void) { return QHX_VERSION_NUMBER; }

qhx_status qhx_fail(qhx_error *err, qhx_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

qhx_status qhx_fail_prefix(qhx_error *err, const char *fmt, ...) {
    if (!err) return QHX_E_INTERNAL;
    char prefix[QHX_ERROR_MSG_SIZE], old[QHX_ERROR_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* "<prefix>: <old>", cut to fit: the beginning names the file, so it is kept */
    size_t k = 0;
    const char *parts[3] = {prefix, ": ", old};
    for (int i = 0; i < 3; i++)
        for (const char *s = parts[i]; *s && k + 1 < sizeof err->msg; s++) err->msg[k++] = *s;
    err->msg[k] = '\0';
    if (err->code == QHX_OK) err->code = QHX_E_INTERNAL;
    return err->code;
}

void qhx_error_clear(qhx_error *err) {
    if (!err) return;
    err->code = QHX_OK;
    err->msg[0] = '\0';
}
