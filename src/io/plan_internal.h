/* io/plan_internal.h: what the io/ files that build, parse, open, verify and write run plans
 * share: the parse context and the message and field helpers (io/plan.c). Not for other
 * layers: they use io/manifest.h. */
#ifndef QHX_IO_PLAN_INTERNAL_H
#define QHX_IO_PLAN_INTERNAL_H

#include "io/manifest.h"

#include <stdbool.h>
#include <stddef.h>

/* Who is being parsed: the file named in messages, and where errors go. */
typedef struct pctx {
    const char *label;
    qhx_error *err;
} pctx;

/* "<label>: <jpath>: <formatted problem>" (jpath "" gives "<label>: <problem>"). */
qhx_status plan_bad(const pctx *c, qhx_status code, const char *jpath, const char *fmt, ...)
    QHX_PRINTF(4, 5);

const char *plan_jp(char *buf, size_t cap, const char *parent, const char *key);
qhx_status plan_check_keys(const pctx *c, const json_t *obj, const char *jpath, const char *const *allowed);
qhx_status plan_need_object(const pctx *c, const json_t *obj, const char *parent, const char *key, bool required, json_t **out);
qhx_status plan_get_string(const pctx *c, const json_t *obj, const char *parent, const char *key, bool required, size_t max_len, const char **out);
qhx_status plan_get_ident(const pctx *c, const json_t *obj, const char *key, char *out, size_t cap);
qhx_status plan_get_num_range(const pctx *c, const json_t *obj, const char *parent, const char *key, double lo, bool lo_open, double hi, double *out);
qhx_status plan_check_rel_path(const pctx *c, const char *jpath, const char *s);
void plan_file_clear(qhx_plan_file *f);
qhx_status plan_file_set_name(const qhx_plan *plan, qhx_plan_file *f, const char *file, qhx_error *err);
int plan_kv_cache_from_name(const char *s, qhx_kv_type *out);
qhx_status plan_read_config_head(const pctx *c, qhx_plan *plan, const json_t *config, const char *prefix);
qhx_status plan_check_file(const pctx *c, const qhx_plan_file *f, const char *jpath);
qhx_status plan_check_inside(const pctx *c, const qhx_plan *plan, const qhx_plan_file *f, const char *jpath);
qhx_status plan_file_set_size(qhx_plan_file *f);
qhx_status plan_parse_file_entry(const pctx *c, qhx_plan *plan, const json_t *obj, const char *jpath, int kind, qhx_plan_file *f);
int plan_has_suffix(const char *s, const char *suf);
qhx_plan *plan_new(const char *label, const char *base_dir);


/* Spellings (plan.c) */
extern const char *const PLAN_ROLE_NAMES[QHX_ART_ROLE_COUNT];
extern const char *const PLAN_FORMAT_NAMES[QHX_ART_FORMAT_COUNT];
extern const char *const PLAN_TOKEN_KEYS[]; /* "stop_ids", then the single ids in qhx_plan_tokens order; NULL ends */
int plan_name_index(const char *const *names, int n, const char *s);
int plan_is_hex64(const char *s);
/* 1 when path resolves to something outside base_dir (manifest_parse.c) */
int plan_leads_outside(const char *base_dir, const char *path);
int32_t *plan_token_slot(qhx_plan_tokens *t, int i); /* PLAN_TOKEN_KEYS[i], i >= 1 */

/* An artifact entry (format, dtype, shape...) or a plain file entry (tokenizer, preprocessor). */
enum { ENTRY_ARTIFACT, ENTRY_PLAIN };

#endif
