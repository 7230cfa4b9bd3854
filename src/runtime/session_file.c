/* runtime/session_file.c: saving and restoring a session (qhx_session_save / _restore).
 *
 * Layout (little-endian, this host's float format), then a SHA-256 of everything before it:
 *   "QHXSTATE" | u32 version | i32 last stop reason | u64 model fingerprint | i64 n_ctx | i64 n_past |
 *   i32 pending | i32 has_logits | i64 n_vocab | u32 n_regions | u32 sampler bytes |
 *   u32 KV element type (qhx_kv_type: 1 f32, 2 f16, 3 q8) | u32 zero |
 *   per region: u64 bytes, bytes of data (per-token regions: only rows [0, n_past)) |
 *   sampler state | logits (n_vocab f32) | sha256 (32 bytes)
 * The fingerprint (the first 8 bytes of a SHA-256) covers the family, the configuration, every
 * tensor's name, dtype, shape and sampled data, and the tokenizer, so a file made with another
 * model (even one of the same shapes), precision or tokenizer is refused; a file whose KV
 * element type is not the session's is refused by name (the cache rows differ). Files of
 * versions 1 and 2 (fingerprints without the data, or no KV element type) are refused with a
 * line saying to save the session again. Saving writes a
 * temporary file beside the target and renames it, so a crash never leaves half a file; the file
 * holds the conversation, so it is made readable by its owner only (mode 0600, from mkstemp). */
#include "core/alloc.h"
#include "core/file.h"
#include "core/sha256.h"
#include "runtime/model.h"
#include "runtime/sample.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define STATE_MAGIC "QHXSTATE"
#define STATE_VERSION 3u /* 3: KV element type in the header; fingerprint over data and tokenizer */
#define HEADER_BYTES 72

/* Bytes of one tensor's data the fingerprint reads: its first and last SAMPLE_EDGE bytes and
 * SAMPLE_WINDOWS windows of SAMPLE_WINDOW bytes spread evenly between (about 1.5 KB a tensor, a
 * fraction of a millisecond per model). Sampled rather than full: hashing every weight would
 * cost a pass over gigabytes at every save and restore. */
#define SAMPLE_EDGE 256
#define SAMPLE_WINDOWS 16
#define SAMPLE_WINDOW 64

static void hash_tensor_data(qhx_sha256 *h, const qhx_st_tensor *t) {
    size_t n = t->size;
    if (n <= 2 * SAMPLE_EDGE + SAMPLE_WINDOWS * SAMPLE_WINDOW) {
        qhx_sha256_update(h, t->data, n);
        return;
    }
    qhx_sha256_update(h, t->data, SAMPLE_EDGE);
    size_t span = n - 2 * SAMPLE_EDGE - SAMPLE_WINDOW;
    for (size_t w = 0; w < SAMPLE_WINDOWS; w++)
        qhx_sha256_update(h, t->data + SAMPLE_EDGE + span * w / (SAMPLE_WINDOWS - 1), SAMPLE_WINDOW);
    qhx_sha256_update(h, t->data + n - SAMPLE_EDGE, SAMPLE_EDGE);
}

/* The multi-token-prediction block's tensors: the model holds them only when it was opened for
 * speculative decoding (qhx_model_params.mtp), which changes no state the file carries (the
 * block's own cache is not saved), so they stay out of the fingerprint. */
#define MTP_PREFIX "mtp."

/* What a session file must have been saved with (docs/robustness.md, "Session files"): the
 * family, the configuration's dimensions, every tensor's name, dtype, shape and sampled data
 * (so another checkpoint of the same shapes is told apart), and the tokenizer's identity; not
 * the speculation setting. The KV element type and the context are fields of the header. */
static uint64_t model_fingerprint(const qhx_model *m) {
    qhx_sha256 h;
    qhx_sha256_init(&h);
    qhx_sha256_update(&h, m->family->name, strlen(m->family->name) + 1);
    const qhx_model_config *c = &m->cfg;
    int64_t dims[] = {c->vocab_size, c->hidden_size, c->intermediate_size, c->num_hidden_layers,
                      c->num_attention_heads, c->num_key_value_heads, c->head_dim, c->linear_num_key_heads,
                      c->linear_num_value_heads, c->linear_key_head_dim, c->linear_value_head_dim,
                      c->linear_conv_kernel_dim};
    qhx_sha256_update(&h, dims, sizeof dims);
    const qhx_st_set *set = qhx_model_tensors(m);
    for (int64_t i = 0; set && i < qhx_st_n_tensors(set); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        if (!strncmp(t->name, MTP_PREFIX, sizeof MTP_PREFIX - 1)) continue; /* loaded only for --spec mtp */
        qhx_sha256_update(&h, t->name, strlen(t->name) + 1);
        int32_t dt = (int32_t)t->dtype;
        qhx_sha256_update(&h, &dt, sizeof dt);
        qhx_sha256_update(&h, t->shape, (size_t)t->n_dims * sizeof t->shape[0]);
        hash_tensor_data(&h, t);
    }
    uint64_t tok = qhx_tok_identity(m->tok);
    qhx_sha256_update(&h, &tok, sizeof tok);
    uint8_t d[32];
    qhx_sha256_final(&h, d);
    uint64_t fp;
    memcpy(&fp, d, sizeof fp);
    return fp;
}

static const char *kv_name(uint32_t t) { return t == QHX_KV_F16 ? "f16" : t == QHX_KV_Q8 ? "q8" : "f32"; }

/* Bytes of region r that a state with n_past tokens carries. */
static size_t region_bytes(const qhx_state_region *r, int64_t n_past) {
    int64_t rows = r->per_token ? (n_past < r->n_rows ? n_past : r->n_rows) : r->n_rows;
    return (size_t)rows * r->row_bytes;
}

typedef struct writer {
    FILE *f;
    qhx_sha256 sha;
    int ok;
} writer;

static void put(writer *w, const void *p, size_t n) {
    if (!w->ok || !n) return;
    qhx_sha256_update(&w->sha, p, n);
    w->ok = fwrite(p, 1, n, w->f) == n;
}

/* The first b bytes of region r, read through its device in pieces. */
static void put_region(writer *w, const qhx_state_region *r, size_t b) {
    uint8_t buf[1 << 16];
    for (size_t at = 0; at < b && w->ok; at += sizeof buf) {
        size_t n = b - at < sizeof buf ? b - at : sizeof buf;
        qhx_state_read(r, at, buf, n);
        put(w, buf, n);
    }
}

static qhx_status save(qhx_session *s, const char *path, qhx_error *err);

qhx_status qhx_session_save(const qhx_session *s_const, const char *path, qhx_error *err) {
    qhx_session *s = (qhx_session *)s_const; /* accessors are not const; only the busy mark changes */
    qhx_status rc = qhx_session_guard_enter(s, "session save", err);
    if (rc) return rc;
    if (!path) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_ARG, "session save: path is NULL"));
    return qhx_session_guard_leave(s, save(s, path, err));
}

static qhx_status save(qhx_session *s, const char *path, qhx_error *err) {
    const qhx_model *m = qhx_session_model(s);
    qhx_seq *st = qhx_session_state(s);
    qhx_state_region regions[QHX_STATE_MAX_REGIONS];
    int nr = qhx_model_state_regions(st, regions, QHX_STATE_MAX_REGIONS);
    if (nr <= 0) return qhx_fail(err, QHX_E_UNSUPPORTED, "session save: this model family has no state description");
    qhx_out_file out;
    qhx_status rc = qhx_out_open(&out, path, 0600, err);
    if (rc) return rc;
    writer w = {.f = out.f, .ok = 1};
    qhx_sha256_init(&w.sha);
    qhx_session_snapshot snap;
    qhx_session_get_snapshot(s, &snap);
    struct qhx_sampler *smp = qhx_session_sampler(s);
    size_t sb = qhx_sampler_state_bytes(smp);
    uint8_t hdr[HEADER_BYTES] = {0};
    uint32_t ver = STATE_VERSION, n_regions = (uint32_t)nr, sbytes = (uint32_t)sb;
    uint64_t fp = model_fingerprint(m);
    int64_t n_ctx = qhx_session_n_ctx(s), n_past = qhx_session_n_past(s), n_vocab = qhx_session_n_vocab(s);
    memcpy(hdr, STATE_MAGIC, 8);
    memcpy(hdr + 8, &ver, 4);
    memcpy(hdr + 12, &snap.last_stop, 4);
    memcpy(hdr + 16, &fp, 8);
    memcpy(hdr + 24, &n_ctx, 8);
    memcpy(hdr + 32, &n_past, 8);
    memcpy(hdr + 40, &snap.pending, 4);
    memcpy(hdr + 44, &snap.has_logits, 4);
    memcpy(hdr + 48, &n_vocab, 8);
    memcpy(hdr + 56, &n_regions, 4);
    memcpy(hdr + 60, &sbytes, 4);
    uint32_t kv_type = (uint32_t)qhx_model_state_kv_type(st);
    memcpy(hdr + 64, &kv_type, 4);
    put(&w, hdr, sizeof hdr);
    for (int i = 0; i < nr; i++) {
        uint64_t b = region_bytes(&regions[i], n_past);
        put(&w, &b, 8);
        put_region(&w, &regions[i], (size_t)b);
    }
    uint8_t *sbuf = qhx_malloc(sb);
    if (!sbuf) w.ok = 0;
    else {
        qhx_sampler_state_write(smp, sbuf);
        put(&w, sbuf, sb);
        qhx_free(sbuf);
    }
    put(&w, qhx_session_logits(s), (size_t)n_vocab * sizeof(float));
    if ((rc = qhx_state_sync(regions, nr, err))) { /* the regions' bytes are not to be trusted */
        qhx_out_abort(&out);
        return rc;
    }
    uint8_t digest[32];
    qhx_sha256_final(&w.sha, digest);
    if (w.ok) w.ok = fwrite(digest, 1, 32, w.f) == 32;
    if (!w.ok) {
        rc = qhx_fail(err, QHX_E_IO, "%s: write failed: %s", path, strerror(errno));
        qhx_out_abort(&out);
        return rc;
    }
    return qhx_out_commit(&out, err);
}

/* ---- restore ------------------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p, *end;
} reader;

static const uint8_t *take(reader *r, size_t n) {
    if ((size_t)(r->end - r->p) < n) return NULL;
    const uint8_t *q = r->p;
    r->p += n;
    return q;
}

qhx_status qhx_session_restore(qhx_session *s, const char *path, qhx_error *err) {
    qhx_status rc = qhx_session_guard_enter(s, "session restore", err);
    if (rc) return rc;
    if (!path) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_ARG, "session restore: path is NULL"));
    qhx_file_map map;
    rc = qhx_file_map_open(path, &map, err);
    if (rc == QHX_OK) {
        rc = qhx_session_restore_buf(s, map.data, map.size, path, err);
        qhx_file_map_close(&map);
    }
    return qhx_session_guard_leave(s, rc);
}

qhx_status qhx_session_restore_buf(qhx_session *s, const uint8_t *data, size_t size, const char *path,
                                   qhx_error *err) {
    const qhx_model *m = qhx_session_model(s);
    qhx_seq *st = qhx_session_state(s);
    qhx_state_region regions[QHX_STATE_MAX_REGIONS];
    int nr = qhx_model_state_regions(st, regions, QHX_STATE_MAX_REGIONS);
    if (nr <= 0) return qhx_fail(err, QHX_E_UNSUPPORTED, "session restore: this model family has no state description");
    int64_t n_ctx = qhx_session_n_ctx(s), n_vocab = qhx_session_n_vocab(s);
    struct qhx_sampler *smp = qhx_session_sampler(s);
    size_t sb = qhx_sampler_state_bytes(smp);
    /* the largest file this session can have: every region full */
    size_t cap = HEADER_BYTES + 32 + sb + (size_t)n_vocab * sizeof(float);
    for (int i = 0; i < nr; i++) cap += 8 + region_bytes(&regions[i], regions[i].n_rows);
    qhx_status rc = QHX_OK;
#define BAD(...) do { rc = qhx_fail(err, QHX_E_FORMAT, __VA_ARGS__); goto done; } while (0)
    if (size < HEADER_BYTES + 32) BAD("%s: %zu bytes, too short for a session file", path, size);
    if (size > cap) BAD("%s: %zu bytes, more than a session of this model can hold (%zu)", path, size, cap);
    if (memcmp(data, STATE_MAGIC, 8)) BAD("%s: not a qhexrt session file", path);
    uint32_t ver, n_regions, sbytes;
    uint64_t fp;
    int64_t f_ctx, f_past, f_vocab;
    int32_t pending, has_logits, last_stop;
    memcpy(&ver, data + 8, 4);
    memcpy(&last_stop, data + 12, 4);
    memcpy(&fp, data + 16, 8);
    memcpy(&f_ctx, data + 24, 8);
    memcpy(&f_past, data + 32, 8);
    memcpy(&pending, data + 40, 4);
    memcpy(&has_logits, data + 44, 4);
    memcpy(&f_vocab, data + 48, 8);
    memcpy(&n_regions, data + 56, 4);
    memcpy(&sbytes, data + 60, 4);
    if (ver == 1u || ver == 2u)
        BAD("%s: session file version %u was saved by an earlier qhexrt, whose model check this build cannot "
            "verify: save the session again", path, ver);
    if (ver != STATE_VERSION) BAD("%s: session file version %u, this build reads version %u", path, ver, STATE_VERSION);
    const size_t hdr_bytes = HEADER_BYTES;
    uint32_t f_kv;
    memcpy(&f_kv, data + 64, 4);
    qhx_sha256 sha;
    uint8_t digest[32];
    qhx_sha256_init(&sha);
    qhx_sha256_update(&sha, data, size - 32);
    qhx_sha256_final(&sha, digest);
    if (memcmp(digest, data + size - 32, 32)) BAD("%s: checksum mismatch (corrupt or truncated file)", path);
    if (fp != model_fingerprint(m)) BAD("%s: the session was saved with a different model or precision", path);
    const qhx_kv_type kv = qhx_model_state_kv_type(st);
    if (f_kv != QHX_KV_F32 && f_kv != QHX_KV_F16 && f_kv != QHX_KV_Q8) BAD("%s: KV element type %u is unknown", path, f_kv);
    if (f_kv != (uint32_t)kv)
        BAD("%s: saved with a%s %s KV cache, this session's is %s (create it with kv_cache %s, qhx --kv %s)", path,
            f_kv == QHX_KV_Q8 ? "" : "n", kv_name(f_kv), kv_name(kv), kv_name(f_kv), kv_name(f_kv));
    if (f_ctx != n_ctx) BAD("%s: saved with a context of %lld tokens, this session has %lld", path, (long long)f_ctx, (long long)n_ctx);
    if (f_vocab != n_vocab || (int)n_regions != nr || sbytes != sb) BAD("%s: the state layout does not match this session", path);
    if (f_past < 0 || f_past > n_ctx) BAD("%s: position %lld is outside [0, %lld]", path, (long long)f_past, (long long)n_ctx);
    if (pending < -1 || pending >= n_vocab) BAD("%s: pending token %d is outside the vocabulary", path, pending);
    if (pending >= 0 && f_past >= n_ctx)
        BAD("%s: position %lld and a pending token pass the context of %lld", path, (long long)f_past, (long long)n_ctx);
    if (last_stop < QHX_STOP_LENGTH || last_stop > QHX_STOP_STRING) BAD("%s: stop reason %d is unknown", path, last_stop);
    /* validate every size before touching the session */
    reader r = {data + hdr_bytes, data + size - 32};
    for (int i = 0; i < nr; i++) {
        const uint8_t *b = take(&r, 8);
        uint64_t len;
        if (!b) BAD("%s: truncated in region %d", path, i);
        memcpy(&len, b, 8);
        if (len != region_bytes(&regions[i], f_past) || !take(&r, (size_t)len))
            BAD("%s: region %d has %llu bytes, expected %zu", path, i, (unsigned long long)len,
                region_bytes(&regions[i], f_past));
    }
    const uint8_t *sstate = take(&r, sb), *logits = take(&r, (size_t)n_vocab * sizeof(float));
    if (!sstate || !logits || r.p != r.end) BAD("%s: the sampler state or logits do not fit the file", path);
    if ((rc = qhx_sampler_state_read(smp, sstate, sb, err))) goto done;
    /* commit: all checks passed */
    qhx_session_reset(s);
    qhx_sampler_state_read(smp, sstate, sb, NULL);
    r.p = data + hdr_bytes;
    for (int i = 0; i < nr; i++) {
        uint64_t len;
        memcpy(&len, take(&r, 8), 8);
        qhx_state_write(&regions[i], 0, take(&r, (size_t)len), (size_t)len);
    }
    if ((rc = qhx_state_sync(regions, nr, err))) goto done;
    memcpy(qhx_session_logits_mut(s), logits, (size_t)n_vocab * sizeof(float));
    qhx_model_state_set_n_past(st, f_past);
    qhx_session_spec_forget(s); /* the multi-token-prediction block's cache is not in the file */
    qhx_session_snapshot snap = {.pending = pending, .has_logits = has_logits, .last_stop = last_stop};
    qhx_session_set_snapshot(s, &snap);
#undef BAD
done:
    return rc;
}
