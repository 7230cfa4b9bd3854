/* qhx.h: the public C API of qhexrt, a runtime for small hybrid and vision LLMs.
 *
 * This is the only public header. Everything not declared here is internal.
 * Conventions:
 *   - fallible calls return qhx_status (QHX_OK == 0) and fill a caller-owned qhx_error
 *     (may be NULL) with one line naming the file, field and byte offset at fault;
 *   - objects come back through OUT parameters, set to NULL on failure;
 *   - every *_free / *_close accepts NULL.
 */
#ifndef QHX_H
#define QHX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(QHX_BUILDING_LIBRARY)
#define QHX_API __attribute__((visibility("default")))
#else
#define QHX_API
#endif

/* ---- status codes ------------------------------------------------------ */
typedef enum qhx_status {
    QHX_OK = 0,
    QHX_E_ARG = 1,         /* invalid argument from the caller */
    QHX_E_IO = 2,          /* a file could not be opened, read, mapped or written */
    QHX_E_FORMAT = 3,      /* malformed input: JSON, safetensors, image, state file */
    QHX_E_UNSUPPORTED = 4, /* well-formed, but a feature this build does not support */
    QHX_E_NOMEM = 5,       /* allocation failed */
    QHX_E_LIMIT = 6,       /* a size cap or the context length would be exceeded */
    QHX_E_ABORTED = 7,     /* cancelled by the caller's callback */
    QHX_E_INTERNAL = 8     /* a bug: please report */
} qhx_status;

#define QHX_ERROR_MSG_SIZE 512

/* Caller-owned error detail. msg is always NUL-terminated (empty on success). */
typedef struct qhx_error {
    qhx_status code;
    char msg[QHX_ERROR_MSG_SIZE];
} qhx_error;

/* Static text for a status code ("ok", "invalid argument", ...). Never NULL. */
QHX_API const char *qhx_status_str(qhx_status code);

/* Library version, e.g. "0.1.0". */
QHX_API const char *qhx_version(void);

#ifdef __cplusplus
}
#endif
#endif /* QHX_H */
