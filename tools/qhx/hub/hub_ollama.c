/* hub_ollama.c: ollama's store, read in place. A model NAME[:TAG] is the manifest
 * manifests/HOST/NAMESPACE/MODEL/TAG under OLLAMA_MODELS (default ~/.ollama/models; HOST
 * registry.ollama.ai, NAMESPACE library and TAG latest when not written), a JSON object whose
 * "layers" name blobs by digest ("sha256:HEX", stored as blobs/sha256-HEX) and media type:
 * application/vnd.ollama.image.model (the GGUF) and application/vnd.ollama.image.projector. */
#include "hub_internal.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MEDIA_MODEL "application/vnd.ollama.image.model"
#define MEDIA_PROJECTOR "application/vnd.ollama.image.projector"

void hub_ollama_root(char out[HUB_PATH_MAX]) {
    const char *v = getenv("OLLAMA_MODELS"), *home = getenv("HOME");
    if (v && *v) snprintf(out, HUB_PATH_MAX, "%s", v);
    else snprintf(out, HUB_PATH_MAX, "%s/.ollama/models", home && *home ? home : ".");
}

static bool name_part_ok(const char *s, size_t n) {
    if (n == 0 || n > 128 || s[0] == '.') return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.')) return false;
    return !(n == 2 && s[0] == '.' && s[1] == '.');
}

/* "NAME[:TAG]" -> "HOST/NAMESPACE/MODEL/TAG" (the manifest's path under manifests/). */
static int manifest_rel(const char *ref, char *out, size_t cap, hub_err *e) {
    char buf[512];
    if (snprintf(buf, sizeof buf, "%s", ref) >= (int)sizeof buf) return hub_fail(e, "ollama:%.60s...: name too long", ref);
    const char *tag = "latest";
    char *colon = strrchr(buf, ':');
    if (colon && !strchr(colon, '/')) {
        *colon = '\0';
        tag = colon + 1;
    }
    const char *parts[3];
    size_t lens[3];
    int n = 0;
    for (char *p = buf; n < 4;) {
        char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 3 || !name_part_ok(p, len))
            return hub_fail(e, "ollama:%s: not a model name: expected [HOST/][NAMESPACE/]MODEL[:TAG] (e.g. ollama:qwen3.5:2b)", ref);
        parts[n] = p, lens[n] = len, n++;
        if (!slash) break;
        p = slash + 1;
    }
    if (!name_part_ok(tag, strlen(tag))) return hub_fail(e, "ollama:%s: bad tag '%s'", ref, tag);
    const char *host = "registry.ollama.ai", *ns = "library";
    size_t hl = strlen(host), nl = strlen(ns);
    const char *model = parts[n - 1];
    size_t ml = lens[n - 1];
    if (n >= 2) ns = parts[n - 2], nl = lens[n - 2];
    if (n == 3) host = parts[0], hl = lens[0];
    snprintf(out, cap, "%.*s/%.*s/%.*s/%s", (int)hl, host, (int)nl, ns, (int)ml, model, tag);
    return 0;
}

static int blob_of(const char *root, const char *digest, char out[HUB_PATH_MAX], const char *manifest, hub_err *e) {
    if (!digest || strncmp(digest, "sha256:", 7) || !hub_is_hex(digest + 7, 64))
        return hub_fail(e, "%s: a layer's digest is not sha256:HEX", manifest);
    snprintf(out, HUB_PATH_MAX, "%s/blobs/sha256-%s", root, digest + 7);
    struct stat st;
    if (stat(out, &st) || !S_ISREG(st.st_mode))
        return hub_fail(e, "%s: its blob %s is missing (run `ollama pull` again)", manifest, out);
    return 0;
}

int hub_ollama_resolve(const char *ref, char model[HUB_PATH_MAX], char projector[HUB_PATH_MAX], hub_err *e) {
    char root[HUB_PATH_MAX], rel[700], path[HUB_PATH_MAX + 800];
    hub_ollama_root(root);
    if (manifest_rel(ref, rel, sizeof rel, e)) return -1;
    snprintf(path, sizeof path, "%s/manifests/%s", root, rel);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    model[0] = projector[0] = '\0';
    if (!j) {
        struct stat st;
        if (stat(path, &st))
            return hub_fail(e, "ollama:%s: not in ollama's store (no manifest %s; OLLAMA_MODELS sets the store)", ref, path);
        return hub_fail(e, "%s: not a JSON manifest: %s (line %d)", path, je.text, je.line);
    }
    json_t *layers = json_object_get(j, "layers");
    size_t i;
    json_t *l;
    int rc = 0;
    json_array_foreach(layers, i, l) {
        const char *media = json_string_value(json_object_get(l, "mediaType"));
        const char *digest = json_string_value(json_object_get(l, "digest"));
        if (!media) continue;
        if (!strcmp(media, MEDIA_MODEL) && !model[0]) rc = blob_of(root, digest, model, path, e);
        else if (!strcmp(media, MEDIA_PROJECTOR) && !projector[0]) rc = blob_of(root, digest, projector, path, e);
        if (rc) break;
    }
    json_decref(j);
    if (!rc && !model[0]) rc = hub_fail(e, "%s: no layer of type %s (a model qhexrt can open)", path, MEDIA_MODEL);
    return rc;
}
