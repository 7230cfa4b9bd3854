/* io/plan_open.c: opening a run plan from a path: a manifest file, a bundle folder with one
 * manifest, or a Hugging Face checkpoint folder. */
#include "io/plan_internal.h"

#include "core/alloc.h"
#include "core/file.h"
#include "core/sha256.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ==== opening: manifest file, bundle folder, checkpoint folder ============================= */

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return qhx_strdup(".");
    if (slash == path) return qhx_strdup("/");
    return qhx_strndup(path, (size_t)(slash - path));
}

static qhx_status open_manifest_file(const char *path, qhx_plan **out, qhx_error *err) {
    char *buf = NULL;
    size_t len = 0;
    qhx_status rc = qhx_file_read_all(path, QHX_PLAN_MAX_BYTES, &buf, &len, err);
    if (rc) return rc;
    char *dir = dir_of(path);
    if (!dir) {
        qhx_free(buf);
        return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
    }
    rc = qhx_plan_parse(buf, len, dir, path, out, err);
    qhx_free(dir);
    qhx_free(buf);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Whether `path` is a qhexrt manifest: a .json file of at most QHX_PLAN_MAX_BYTES whose top
 * level has "format": "qhexrt/...". Files that never mention "qhexrt/ are not parsed at all. A
 * file that mentions it but does not parse counts, so that opening it reports the JSON error
 * rather than "no manifest". Returns 1, 0, or -1 when memory ran out (err set). */
static int is_manifest(const char *path, qhx_error *err) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > QHX_PLAN_MAX_BYTES) return 0;
    char *buf;
    size_t len;
    qhx_error e;
    if (qhx_file_read_all(path, QHX_PLAN_MAX_BYTES, &buf, &len, &e) != QHX_OK) {
        if (e.code != QHX_E_NOMEM) return 0;
        qhx_fail(err, QHX_E_NOMEM, "%s", e.msg);
        return -1;
    }
    int yes = memmem(buf, len, "\"qhexrt/", 8) != NULL;
    if (yes) {
        json_t *root = qhx_json_parse(buf, len, path, &e);
        if (root) {
            const char *f = json_is_object(root) ? json_string_value(json_object_get(root, "format")) : NULL;
            yes = f && !strncmp(f, "qhexrt/", 7);
            json_decref(root);
        } else if (e.code == QHX_E_NOMEM) {
            qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
            yes = -1;
        }
    }
    qhx_free(buf);
    return yes;
}

/* The manifests in dir, sorted (owned array of owned names). */
static qhx_status find_manifests(const char *dir, char ***names_out, int *n_out, qhx_error *err) {
    *names_out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) return qhx_fail(err, QHX_E_IO, "%s: cannot open folder: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, scanned = 0;
    qhx_status rc = QHX_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !plan_has_suffix(de->d_name, ".json")) continue;
        if (++scanned > QHX_PLAN_MAX_SCAN) {
            rc = qhx_fail(err, QHX_E_LIMIT, "%s: more than %d .json files; name the manifest", dir, QHX_PLAN_MAX_SCAN);
            break;
        }
        char *p = qhx_path_join(dir, de->d_name);
        if (!p) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); break; }
        int yes = is_manifest(p, err);
        qhx_free(p);
        if (yes < 0) { rc = QHX_E_NOMEM; break; }
        if (!yes) continue;
        char **nn = qhx_realloc(names, (size_t)(n + 1) * sizeof *nn);
        if (!nn) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); break; }
        names = nn;
        if (!(names[n] = qhx_strdup(de->d_name))) { rc = qhx_fail(err, QHX_E_NOMEM, "out of memory"); break; }
        n++;
    }
    closedir(d);
    if (rc) {
        for (int i = 0; i < n; i++) qhx_free(names[i]);
        qhx_free(names);
        return rc;
    }
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *names_out = names;
    *n_out = n;
    return QHX_OK;
}

qhx_status qhx_plan_open(const char *path, qhx_plan **out, qhx_error *err) {
    *out = NULL;
    if (!path || !path[0]) return qhx_fail(err, QHX_E_ARG, "no path given");
    if (!qhx_path_is_dir(path)) return open_manifest_file(path, out, err);

    char **names;
    int n;
    qhx_status rc = find_manifests(path, &names, &n, err);
    if (rc) return rc;
    if (n == 1) {
        char *p = qhx_path_join(path, names[0]);
        rc = p ? open_manifest_file(p, out, err) : qhx_fail(err, QHX_E_NOMEM, "out of memory");
        qhx_free(p);
    } else if (n > 1) {
        char list[300] = "";
        size_t k = 0;
        for (int i = 0; i < n && k < sizeof list; i++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", names[i]);
        rc = qhx_fail(err, QHX_E_ARG, "%s: %d manifests in this folder (%s): name one", path, n, list);
    } else {
        char *cfg = qhx_path_join(path, "config.json");
        if (!cfg) rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
        else if (qhx_path_is_file(cfg)) rc = qhx_plan_from_checkpoint(path, out, err);
        else rc = qhx_fail(err, QHX_E_IO, "%s: no qhexrt manifest and no config.json in this folder", path);
        qhx_free(cfg);
    }
    for (int i = 0; i < n; i++) qhx_free(names[i]);
    qhx_free(names);
    return rc;
}
