/* core/status: building error messages. Status codes themselves live in qhx.h. */
#ifndef QHX_CORE_STATUS_H
#define QHX_CORE_STATUS_H

#include "qhx.h"

#include <stdarg.h>

#if defined(__GNUC__)
#define QHX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define QHX_NODISCARD __attribute__((warn_unused_result))
#else
#define QHX_PRINTF(a, b)
#define QHX_NODISCARD
#endif

/* Record `code` and a formatted message in err (may be NULL); return code.
 * Use as: return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': ...", path, name); */
qhx_status qhx_fail(qhx_error *err, qhx_status code, const char *fmt, ...) QHX_PRINTF(3, 4);

/* Prefix an already-set message: "<prefix>: <old message>". Returns err->code (or QHX_E_INTERNAL). */
qhx_status qhx_fail_prefix(qhx_error *err, const char *fmt, ...) QHX_PRINTF(2, 3);

/* Clear err (code QHX_OK, empty message). NULL allowed. */
void qhx_error_clear(qhx_error *err);

#endif
