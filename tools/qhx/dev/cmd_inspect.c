/* qhx inspect: show what a path holds without running anything.
 *   - a manifest, a bundle folder or a Hugging Face checkpoint folder: the run plan, then every
 *     tensor of its artifacts;
 *   - a .safetensors file or a *.safetensors.index.json: every tensor and the __metadata__;
 *   - a GGUF file: its header, metadata and tensors (inspect_gguf.c).
 * --json prints one JSON document instead (built with jansson). This command reads internal
 * headers (io/manifest.h, io/safetensors.h): the public API has no inspection call yet. */
#include "cli_dev.h"
#include "cli_dev_args.h"

#include "core/alloc.h"
#include "io/gguf.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "runtime/model.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx inspect PATH [--json] [--verify]\n"
            "\n"
            "Show a run plan and its tensors, or the tensors of a safetensors file.\n"
            "\n"
            "PATH is one of:\n"
            "  a manifest (.json, \"format\": \"qhexrt/1\")\n"
            "  a bundle folder holding exactly one manifest\n"
            "  a Hugging Face checkpoint folder (config.json, *.safetensors, tokenizer.json)\n"
            "  a .safetensors file or a model.safetensors.index.json\n"
            "  a GGUF file (.gguf): header, metadata (long arrays by their first elements), tensors\n"
            "\n"
            "options:\n"
            "  --json     print one JSON document (plan, tensors, totals) instead of text\n"
            "  --verify   also hash every file that has a sha256 in the manifest\n"
            "  -h, --help show this help\n"
            "\n"
            "exit status: 0 ok, 1 bad or unreadable input (one line on stderr), 2 usage error\n");
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* ---- tensors ---------------------------------------------------------------------------- */

/* One listing row: a safetensors tensor, or a raw artifact as a single tensor. */
struct row {
    const char *artifact; /* role name, or NULL for a bare safetensors listing */
    const char *name;
    qhx_dtype dtype;
    int n_dims;
    const int64_t *shape;
    int64_t n_elements;
    uint64_t bytes, offset;
    const char *file;
};

struct totals {
    int64_t tensors, parameters;
    uint64_t bytes;
    int64_t n_by_dtype[QHX_DTYPE_COUNT];
    uint64_t bytes_by_dtype[QHX_DTYPE_COUNT];
};

static void add_total(struct totals *t, const struct row *r) {
    t->tensors++;
    t->parameters += r->n_elements;
    t->bytes += r->bytes;
    t->n_by_dtype[r->dtype]++;
    t->bytes_by_dtype[r->dtype] += r->bytes;
}

/* Length of the UTF-8 sequence at p (0 if it is not one) and its code point. */
static int utf8_at(const unsigned char *p, uint32_t *cp) {
    int n = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : p[0] >= 0xe0 && p[0] < 0xf0 ? 3
          : p[0] >= 0xf0 && p[0] < 0xf5 ? 4 : 0;
    if (!n) return 0;
    uint32_t v = n == 1 ? p[0] : p[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0; /* the NUL terminator stops here too */
        v = v << 6 | (p[i] & 0x3f);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < least[n] || v > 0x10ffff || (v >= 0xd800 && v < 0xe000)) return 0;
    *cp = v;
    return n;
}

/* Text from a file (tensor names, metadata, manifest strings) as it may go to a terminal:
 * control characters (C0, DEL, C1 as UTF-8) and bytes that are not UTF-8 become \xHH, so a
 * name cannot change the title or clear the screen; a backslash becomes \\. Returns one of a
 * few rotating buffers, so several may appear in one printf. */
static const char *shown_n(const char *s, size_t n) {
    static char ring[8][4 * QHX_ST_MAX_NAME + 8];
    static int next;
    char *out = ring[next], *end = out + sizeof ring[0] - 5;
    next = (next + 1) % 8;
    char *o = out;
    const unsigned char *p = (const unsigned char *)(s ? s : ""), *pe = p + (s ? n : 0);
    while (p < pe && o < end) { /* a NUL inside (a metadata value's) shows as \x00 */
        uint32_t cp;
        int k = utf8_at(p, &cp);
        int control = !k || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0);
        if (control) {
            for (int i = 0; i < (k ? k : 1) && o < end; i++) o += snprintf(o, 5, "\\x%02X", p[i]);
            p += k ? k : 1;
        } else if (*p == '\\') {
            *o++ = '\\', *o++ = '\\';
            p++;
        } else {
            memcpy(o, p, (size_t)k);
            o += k;
            p += k;
        }
    }
    *o = '\0';
    return out;
}

static const char *shown(const char *s) { return shown_n(s, s ? strlen(s) : 0); }

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void shape_text(char *buf, size_t cap, int n_dims, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < n_dims && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

static void print_row_text(const struct row *r, int with_artifact) {
    char shape[160];
    shape_text(shape, sizeof shape, r->n_dims, r->shape);
    if (with_artifact)
        printf("  %-10s %-56s %-5s %-22s %12llu\n", r->artifact, shown(r->name), qhx_dtype_name(r->dtype), shape,
               (unsigned long long)r->bytes);
    else
        printf("  %-60s %-5s %-22s %12llu\n", shown(r->name), qhx_dtype_name(r->dtype), shape,
               (unsigned long long)r->bytes);
}

static json_t *row_json(const struct row *r) {
    json_t *o = json_object(), *shape = json_array();
    for (int d = 0; d < r->n_dims; d++) json_array_append_new(shape, json_integer(r->shape[d]));
    if (r->artifact) json_object_set_new(o, "artifact", json_string(r->artifact));
    json_object_set_new(o, "name", json_string(r->name));
    json_object_set_new(o, "dtype", json_string(qhx_dtype_name(r->dtype)));
    json_object_set_new(o, "shape", shape);
    json_object_set_new(o, "bytes", json_integer((json_int_t)r->bytes));
    json_object_set_new(o, "offset", json_integer((json_int_t)r->offset));
    json_object_set_new(o, "file", json_string(r->file));
    return o;
}

static json_t *totals_json(const struct totals *t) {
    json_t *o = json_object(), *by = json_object();
    json_object_set_new(o, "tensors", json_integer(t->tensors));
    json_object_set_new(o, "parameters", json_integer(t->parameters));
    json_object_set_new(o, "bytes", json_integer((json_int_t)t->bytes));
    for (int d = 0; d < QHX_DTYPE_COUNT; d++) {
        if (!t->n_by_dtype[d]) continue;
        json_object_set_new(by, qhx_dtype_name((qhx_dtype)d),
                            json_pack("{s:I, s:I}", "tensors", (json_int_t)t->n_by_dtype[d], "bytes",
                                      (json_int_t)t->bytes_by_dtype[d]));
    }
    json_object_set_new(o, "by_dtype", by);
    return o;
}

static void print_totals_text(const struct totals *t) {
    printf("total        %lld tensors, %lld parameters, %llu bytes", (long long)t->tensors,
           (long long)t->parameters, (unsigned long long)t->bytes);
    const char *sep = " (";
    for (int d = 0; d < QHX_DTYPE_COUNT; d++) {
        if (!t->n_by_dtype[d]) continue;
        printf("%s%s: %lld tensors, %llu bytes", sep, qhx_dtype_name((qhx_dtype)d), (long long)t->n_by_dtype[d],
               (unsigned long long)t->bytes_by_dtype[d]);
        sep = "; ";
    }
    printf("%s\n", t->tensors ? ")" : "");
}

/* Rows of one safetensors set, in file and header order. */
static void set_rows(const qhx_st_set *set, const char *artifact, json_t *jtensors, struct totals *tot) {
    for (int64_t i = 0; i < qhx_st_n_tensors(set); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        struct row r = {artifact, t->name, t->dtype, t->n_dims, t->shape, t->n_elements, t->size, t->offset,
                        base_name(qhx_st_file_path(set, t->file_index))};
        add_total(tot, &r);
        if (jtensors) json_array_append_new(jtensors, row_json(&r));
        else print_row_text(&r, artifact != NULL);
    }
}

static int print_json_doc(json_t *doc) {
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(doc);
    if (rc != 0) return QHX_EXIT_RUNTIME;
    fputc('\n', stdout);
    return QHX_EXIT_OK;
}

/* ---- a safetensors file or index ---------------------------------------------------- */

static int inspect_safetensors(const char *path, int as_json) {
    qhx_st_set *set;
    qhx_error err = {0};
    if (qhx_st_open(path, &set, &err) != QHX_OK) return qhx_cli_runtime_error("inspect", &err);
    struct totals tot = {0};
    if (as_json) {
        json_t *doc = json_object(), *files = json_array(), *meta = json_object(), *tensors = json_array();
        for (int i = 0; i < qhx_st_n_files(set); i++) json_array_append_new(files, json_string(qhx_st_file_path(set, i)));
        for (int i = 0; i < qhx_st_n_metadata(set); i++) {
            const char *k, *v;
            qhx_st_metadata_at(set, i, &k, &v);
            json_object_set_new(meta, k, json_stringn(v, qhx_st_metadata_len(set, i))); /* a NUL: \u0000 */
        }
        set_rows(set, NULL, tensors, &tot);
        json_object_set_new(doc, "kind", json_string("safetensors"));
        json_object_set_new(doc, "path", json_string(path));
        json_object_set_new(doc, "files", files);
        json_object_set_new(doc, "metadata", meta);
        json_object_set_new(doc, "tensors", tensors);
        json_object_set_new(doc, "totals", totals_json(&tot));
        qhx_st_free(set);
        return print_json_doc(doc);
    }
    printf("safetensors  %s\n", shown(path));
    for (int i = 0; i < qhx_st_n_files(set); i++) printf("file         %s\n", shown(qhx_st_file_path(set, i)));
    for (int i = 0; i < qhx_st_n_metadata(set); i++) {
        const char *k, *v;
        qhx_st_metadata_at(set, i, &k, &v);
        printf("metadata     %s = %s\n", shown(k), shown_n(v, qhx_st_metadata_len(set, i)));
    }
    printf("\ntensors\n  %-60s %-5s %-22s %12s\n", "NAME", "DTYPE", "SHAPE", "BYTES");
    set_rows(set, NULL, NULL, &tot);
    printf("\n");
    print_totals_text(&tot);
    qhx_st_free(set);
    return QHX_EXIT_OK;
}

/* ---- a run plan ------------------------------------------------------------------------- */

/* The model's dimensions as its family reads them (qhx_plan_resolve). */
static json_t *dims_json(const qhx_plan *plan, const qhx_model_config *d) {
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:b}",
                          "model_type", plan->model_type,
                          "vocab_size", (json_int_t)d->vocab_size, "hidden_size", (json_int_t)d->hidden_size,
                          "intermediate_size", (json_int_t)d->intermediate_size,
                          "num_hidden_layers", (json_int_t)d->num_hidden_layers,
                          "num_attention_heads", (json_int_t)d->num_attention_heads,
                          "num_key_value_heads", (json_int_t)d->num_key_value_heads,
                          "head_dim", (json_int_t)d->head_dim,
                          "max_position_embeddings", (json_int_t)d->max_position_embeddings,
                          "rms_norm_eps", d->rms_norm_eps, "rope_theta", d->rope_theta,
                          "tie_word_embeddings", d->tie_word_embeddings);
    int64_t n_full = 0;
    for (int64_t l = 0; l < d->num_hidden_layers; l++) n_full += d->layer_types[l] == QHX_LAYER_FULL_ATTENTION;
    if (o && d->linear_num_key_heads)
        json_object_set_new(o, "linear_attention",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "n_linear_layers",
                                      (json_int_t)(d->num_hidden_layers - n_full), "n_full_layers", (json_int_t)n_full,
                                      "linear_num_key_heads", (json_int_t)d->linear_num_key_heads,
                                      "linear_num_value_heads", (json_int_t)d->linear_num_value_heads,
                                      "linear_key_head_dim", (json_int_t)d->linear_key_head_dim,
                                      "linear_value_head_dim", (json_int_t)d->linear_value_head_dim,
                                      "linear_conv_kernel_dim", (json_int_t)d->linear_conv_kernel_dim));
    const qhx_vit_config *v = &d->vision;
    if (o && d->has_vision)
        json_object_set_new(o, "vision",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "depth", (json_int_t)v->depth,
                                      "hidden_size", (json_int_t)v->hidden_size,
                                      "intermediate_size", (json_int_t)v->intermediate_size,
                                      "num_heads", (json_int_t)v->num_heads, "patch_size", (json_int_t)v->patch_size,
                                      "temporal_patch_size", (json_int_t)v->temporal_patch_size,
                                      "spatial_merge_size", (json_int_t)v->spatial_merge_size,
                                      "out_hidden_size", (json_int_t)v->out_hidden_size));
    return o;
}

static void print_file_line(const char *label, const qhx_plan_file *f) {
    printf("%-12s %s", label, shown(f->file));
    if (f->bytes >= 0) printf(" (%lld bytes)", (long long)f->bytes);
    if (f->sha256[0]) printf(" sha256 %s", f->sha256);
    printf("\n");
}

static void print_plan_text(const qhx_plan *p, const qhx_model_config *d) {
    printf("plan         %s\n", shown(p->name));
    if (p->description) printf("description  %s\n", shown(p->description));
    printf("source       %s %s\n", p->source == QHX_PLAN_FROM_CHECKPOINT ? "checkpoint folder" : "manifest",
           shown(p->label));
    printf("family       %s\n", shown(p->family));
    printf("host_op      %s\n", shown(p->host_op));
    printf("precision    %s\n", qhx_precision_name(p->precision));
    printf("max_context  %lld\n", (long long)p->max_context);
    if (d) {
        int64_t n_full = 0;
        for (int64_t l = 0; l < d->num_hidden_layers; l++) n_full += d->layer_types[l] == QHX_LAYER_FULL_ATTENTION;
        printf("model        %s: vocab %lld, hidden %lld, intermediate %lld, layers %lld, heads %lld/%lld kv, "
               "head_dim %lld, max_position %lld, %s embeddings\n",
               shown(p->model_type), (long long)d->vocab_size, (long long)d->hidden_size,
               (long long)d->intermediate_size, (long long)d->num_hidden_layers, (long long)d->num_attention_heads,
               (long long)d->num_key_value_heads, (long long)d->head_dim, (long long)d->max_position_embeddings,
               d->tie_word_embeddings ? "tied" : "separate");
        if (d->linear_num_key_heads)
            printf("             linear attention: %lld linear + %lld full layers, %lld k-heads x %lld, %lld v-heads x %lld, conv %lld\n",
                   (long long)(d->num_hidden_layers - n_full), (long long)n_full, (long long)d->linear_num_key_heads,
                   (long long)d->linear_key_head_dim, (long long)d->linear_num_value_heads,
                   (long long)d->linear_value_head_dim, (long long)d->linear_conv_kernel_dim);
        if (d->has_vision)
            printf("             vision: depth %lld, hidden %lld, heads %lld, patch %lld, merge %lld, out %lld\n",
                   (long long)d->vision.depth, (long long)d->vision.hidden_size, (long long)d->vision.num_heads,
                   (long long)d->vision.patch_size, (long long)d->vision.spatial_merge_size,
                   (long long)d->vision.out_hidden_size);
    }
    if (p->model_config.present) print_file_line("config", &p->model_config);
    printf("artifacts\n");
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        const qhx_plan_file *f = &p->artifacts[r];
        if (!f->present) continue;
        printf("  %-10s %s  %s", qhx_art_role_name((qhx_art_role)r), shown(f->file), qhx_art_format_name(f->format));
        if (f->has_dtype) printf("  %s", qhx_dtype_name(f->dtype));
        if (f->tensor_count >= 0) printf("  %lld tensors", (long long)f->tensor_count);
        if (f->bytes >= 0) printf("  %lld bytes", (long long)f->bytes);
        if (f->sha256[0]) printf("  sha256 %s", f->sha256);
        printf("\n");
    }
    print_file_line("tokenizer", &p->tokenizer);
    if (p->preprocessor.present) print_file_line("preprocessor", &p->preprocessor);
    const qhx_plan_tokens *t = &p->special;
    printf("special      stop [");
    for (int i = 0; i < t->n_stop_ids; i++) printf(i ? ", %d" : "%d", t->stop_ids[i]);
    printf("]");
    const struct { const char *n; int32_t v; } ids[] = {
        {"bos", t->bos}, {"eos", t->eos}, {"pad", t->pad}, {"im_start", t->im_start}, {"im_end", t->im_end},
        {"vision_start", t->vision_start}, {"vision_end", t->vision_end}, {"image_pad", t->image_pad},
        {"video_pad", t->video_pad}, {"think_start", t->think_start}, {"think_end", t->think_end}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (ids[i].v >= 0) printf(", %s %d", ids[i].n, ids[i].v);
    printf("\n");
    const qhx_plan_generation *g = &p->generation;
    printf("generation   temperature %g%s, top_k %lld, top_p %g, min_p %g, repetition_penalty %g, "
           "max_new_tokens %lld, thinking %s\n",
           g->temperature, g->temperature == 0 ? " (greedy)" : "", (long long)g->top_k, g->top_p, g->min_p,
           g->repetition_penalty, (long long)g->max_new_tokens, g->thinking ? "on" : "off");
}

static int inspect_plan(const char *path, int as_json, int verify) {
    qhx_plan *plan;
    qhx_error err = {0};
    if (qhx_plan_open(path, &plan, &err) != QHX_OK) return qhx_cli_runtime_error("inspect", &err);
    if (qhx_family_name_plan_tokens(plan, &err) != QHX_OK) {
        qhx_plan_free(plan);
        return qhx_cli_runtime_error("inspect", &err);
    }
    unsigned flags = QHX_PLAN_VERIFY_HEADERS | (verify ? QHX_PLAN_VERIFY_SHA256 : 0);
    qhx_plan_resolved *res = plan->config ? malloc(sizeof *res) : NULL;
    if (plan->config && !res) qhx_fail(&err, QHX_E_NOMEM, "out of memory");
    if ((plan->config && (!res || qhx_plan_resolve(plan, res, &err) != QHX_OK)) ||
        qhx_plan_verify(plan, flags, &err) != QHX_OK) {
        free(res);
        qhx_plan_free(plan);
        return qhx_cli_runtime_error("inspect", &err);
    }
    const qhx_model_config *cfg = res ? &res->cfg : NULL;
    if (res) { /* a checkpoint folder names neither: show what the runtime would run */
        snprintf(plan->family, sizeof plan->family, "%s", res->family->name);
        snprintf(plan->host_op, sizeof plan->host_op, "%s", res->host_op->name);
    }
    /* open every safetensors artifact before printing anything: errors stay one line */
    qhx_st_set *sets[QHX_ART_ROLE_COUNT] = {0};
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        const qhx_plan_file *f = &plan->artifacts[r];
        if (!f->present || f->format != QHX_ART_SAFETENSORS) continue;
        if (qhx_st_open(f->path, &sets[r], &err) != QHX_OK) {
            for (int k = 0; k < r; k++) qhx_st_free(sets[k]);
            free(res);
            qhx_plan_free(plan);
            return qhx_cli_runtime_error("inspect", &err);
        }
    }
    struct totals tot = {0};
    json_t *doc = NULL, *tensors = NULL;
    if (as_json) {
        json_t *pj = qhx_plan_to_json(plan, &err);
        doc = json_object();
        tensors = json_array();
        json_object_set_new(doc, "kind", json_string("plan"));
        json_object_set_new(doc, "path", json_string(path));
        json_object_set_new(doc, "source", json_string(plan->source == QHX_PLAN_FROM_CHECKPOINT ? "checkpoint" : "manifest"));
        json_object_set_new(doc, "base_dir", json_string(plan->base_dir));
        json_object_set_new(doc, "plan", pj ? pj : json_null());
        json_object_set_new(doc, "dims", cfg ? dims_json(plan, cfg) : json_null());
    } else {
        print_plan_text(plan, cfg);
    }
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        const qhx_plan_file *f = &plan->artifacts[r];
        if (!f->present) continue;
        const char *role = qhx_art_role_name((qhx_art_role)r);
        if (!as_json) {
            printf("\ntensors (%s: %s)\n  %-10s %-56s %-5s %-22s %12s\n", role, shown(f->file), "ARTIFACT", "NAME", "DTYPE",
                   "SHAPE", "BYTES");
        }
        if (sets[r]) {
            set_rows(sets[r], role, tensors, &tot);
        } else { /* raw: one tensor */
            int64_t n_el = 1;
            for (int d = 0; d < f->n_dims; d++) n_el *= f->shape[d];
            struct row row = {role, role, f->dtype, f->n_dims, f->shape, n_el, (uint64_t)f->bytes, 0, f->file};
            add_total(&tot, &row);
            if (tensors) json_array_append_new(tensors, row_json(&row));
            else print_row_text(&row, 1);
        }
    }
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) qhx_st_free(sets[r]);
    free(res);
    qhx_plan_free(plan);
    if (as_json) {
        json_object_set_new(doc, "tensors", tensors);
        json_object_set_new(doc, "totals", totals_json(&tot));
        return print_json_doc(doc);
    }
    printf("\n");
    print_totals_text(&tot);
    return QHX_EXIT_OK;
}

/* ---- entry ---------------------------------------------------------------------------- */

int qhx_inspect_parse_args(int argc, char **argv, qhx_inspect_args *x) {
    memset(x, 0, sizeof *x);
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (!strcmp(a, "--json")) x->as_json = true;
        else if (!strcmp(a, "--verify")) x->verify = true;
        else if (!strcmp(a, "--")) {
            if (i + 1 < argc && !path) path = argv[++i];
            if (i + 1 < argc) return qhx_cli_usage_error("inspect", "more than one PATH given");
        } else if (a[0] == '-' && a[1]) return qhx_cli_usage_error("inspect", "unknown option '%s'", a);
        else if (path) return qhx_cli_usage_error("inspect", "more than one PATH given ('%s' and '%s')", path, a);
        else path = a;
    }
    if (!path) return qhx_cli_usage_error("inspect", "missing PATH");
    if (!path[0]) return qhx_cli_usage_error("inspect", "empty PATH");
    x->path = path;
    return -1;
}

int qhx_cmd_inspect(int argc, char **argv) {
    qhx_inspect_args x;
    int prc = qhx_inspect_parse_args(argc, argv, &x);
    if (prc >= 0) return prc;
    const char *path = x.path;
    int as_json = x.as_json, verify = x.verify;
    if (has_suffix(path, ".safetensors") || has_suffix(path, ".safetensors.index.json"))
        return inspect_safetensors(path, as_json);
    if (has_suffix(path, ".gguf") || qhx_gguf_path_has_magic(path)) return qhx_inspect_gguf(path, as_json);
    return inspect_plan(path, as_json, verify);
}
