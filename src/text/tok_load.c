/* text/tok_load: qhx_tok_load, the one entry point that picks a loader for a path: a folder,
 * a tokenizer.json (or the binary form made from exactly its bytes), or a binary file. The
 * call graph of the tokenizer files stays a DAG: this file calls the loaders (tok_json.c,
 * tok_binary.c), which call the builder (tok_build.c), which calls neither. */
#include "text/tok_internal.h"

#include "core/alloc.h"
#include "core/file.h"

#include <string.h>

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* X.json -> X.qhxtok (owned), or NULL. */
static char *binary_twin(const char *json_path) {
    size_t n = strlen(json_path);
    if (!has_suffix(json_path, ".json")) return NULL;
    char *b = qhx_malloc(n - 5 + sizeof ".qhxtok");
    if (!b) return NULL;
    memcpy(b, json_path, n - 5);
    memcpy(b + n - 5, ".qhxtok", 8);
    return b;
}

qhx_status qhx_tok_load(const char *path, qhx_tok **out, qhx_error *err) {
    *out = NULL;
    if (!path || !*path) return qhx_fail(err, QHX_E_ARG, "tokenizer: no path given");
    char *file = NULL, *twin = NULL;
    qhx_status rc;
    if (qhx_path_is_dir(path)) {
        file = qhx_path_join(path, "tokenizer.json");
        if (!file) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        if (!qhx_path_is_file(file)) { /* a bundle may ship only the binary form */
            char *bin = qhx_path_join(path, "tokenizer.qhxtok");
            if (bin && qhx_path_is_file(bin)) rc = qhx_tok_load_binary(bin, out, err);
            else rc = bin ? qhx_fail(err, QHX_E_IO, "%s: folder has no tokenizer.json", path)
                          : qhx_fail(err, QHX_E_NOMEM, "out of memory");
            qhx_free(bin);
            qhx_free(file);
            return rc;
        }
        path = file;
    }
    qhx_file_map map;
    rc = qhx_file_map_open(path, &map, err);
    if (rc == QHX_OK) {
        if (qhx_tok_is_binary(map.data, map.size)) {
            qhx_file_map_close(&map);
            rc = qhx_tok_load_binary(path, out, err);
        } else if (map.size > QHX_TOK_MAX_FILE_BYTES) {
            rc = qhx_fail(err, QHX_E_LIMIT, "%s: %zu bytes, the limit is %zu", path, map.size,
                          QHX_TOK_MAX_FILE_BYTES);
        } else {
            /* the binary form beside it, if it was made from these very bytes */
            twin = binary_twin(path);
            rc = QHX_E_IO;
            if (twin && qhx_path_is_file(twin) && qhx_tok_binary_matches(twin, map.data, map.size))
                rc = qhx_tok_load_binary(twin, out, NULL); /* damaged: fall back to the JSON */
            if (rc != QHX_OK) rc = qhx_tok_load_buffer(map.data, map.size, path, out, err);
        }
        qhx_file_map_close(&map);
    }
    qhx_free(twin);
    qhx_free(file);
    return rc;
}
