/* http_parse.c: HTTP/1.1 request framing for qhx serve (RFC 9112), written for hostile input.
 *
 * Pure functions over bytes, no I/O (tests/fuzz/fuzz_serve_request.c drives them):
 *   srv_http_head_end   where the header section ends (or which cap it broke)
 *   srv_http_parse_head the request line and the field lines -> method, target, framing
 *   srv_http_decode_path the request target -> the decoded path (origin- or absolute-form)
 *   srv_chunked_feed    a chunked body, incrementally, into a buffer
 * Anything the grammar does not allow is refused rather than repaired: a request the server
 * reads one way and a proxy in front reads another is how requests get smuggled. */
#include "serve.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* tchar (RFC 9110 §5.6.2): the characters of a token. */
static bool is_tchar(unsigned char ch) {
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) return true;
    return ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static bool is_ows(unsigned char ch) { return ch == ' ' || ch == '\t'; }

static int hexval(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int fail(const char **why, int status, const char *msg) {
    *why = msg;
    return status;
}

/* ---- the end of the header section ----------------------------------------------------------- */

/* Empty lines before the request line are skipped (RFC 9112 §2.2); a line ends at LF, with an
 * optional CR before it. Returns 0 with *end = the bytes of the whole section (the blank line
 * included) once it is complete, 1 when more bytes are needed, or a status (414: the request
 * line is longer than SRV_HTTP_MAX_LINE; 431: the section is longer than SRV_HTTP_MAX_HEAD). */
int srv_http_head_end(const char *buf, size_t n, size_t *end, const char **why) {
    size_t i = 0;
    while (i < n && (buf[i] == '\r' || buf[i] == '\n')) i++;
    const char *lf = memchr(buf + i, '\n', n - i);
    size_t line_end = lf ? (size_t)(lf - buf) : n;
    if (line_end - i > SRV_HTTP_MAX_LINE) return fail(why, 414, "the request line (its target) is longer than 8 KiB");
    if (!lf) return n > SRV_HTTP_MAX_HEAD ? fail(why, 431, "the request header section is larger than 64 KiB") : 1;
    for (size_t j = line_end + 1; j < n && j <= SRV_HTTP_MAX_HEAD; j++) {
        if (buf[j - 1] != '\n') continue;
        if (buf[j] == '\n') {
            *end = j + 1;
            return 0;
        }
        if (buf[j] == '\r' && j + 1 < n && buf[j + 1] == '\n') {
            if (j + 2 > SRV_HTTP_MAX_HEAD) break;
            *end = j + 2;
            return 0;
        }
    }
    return n > SRV_HTTP_MAX_HEAD ? fail(why, 431, "the request header section is larger than 64 KiB") : 1;
}

/* ---- the request line and the fields ------------------------------------------------------------ */

/* Next line of [*p, end): NUL-terminated in place, CR before the LF removed. A bare CR is a
 * framing error (-1). Returns the line, or NULL at the end. */
static char *next_line(char **p, char *end, int *bad) {
    if (*p >= end) return NULL;
    char *s = *p, *lf = memchr(s, '\n', (size_t)(end - s));
    if (!lf) return NULL;
    *p = lf + 1;
    *lf = 0;
    if (lf > s && lf[-1] == '\r') lf[-1] = 0;
    if (memchr(s, '\r', strlen(s))) *bad = 1;
    return s;
}

static int parse_request_line(char *line, srv_http_head *h, const char **why) {
    char *sp1 = strchr(line, ' ');
    if (!sp1 || sp1 == line) return fail(why, 400, "a malformed request line");
    size_t ml = (size_t)(sp1 - line);
    if (ml >= sizeof h->method) return fail(why, 501, "an unknown method");
    for (size_t i = 0; i < ml; i++)
        if (!is_tchar((unsigned char)line[i])) return fail(why, 400, "a malformed request line (the method)");
    memcpy(h->method, line, ml);
    h->method[ml] = 0;
    char *target = sp1 + 1, *sp2 = strchr(target, ' ');
    if (!sp2) return fail(why, 400, "a request line without an HTTP version");
    *sp2 = 0;
    if (!*target) return fail(why, 400, "a request line without a target");
    for (char *t = target; *t; t++)
        if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f) return fail(why, 400, "a byte the request target cannot hold");
    const char *v = sp2 + 1;
    if (strncmp(v, "HTTP/", 5) || !(v[5] >= '0' && v[5] <= '9') || v[6] != '.' || !(v[7] >= '0' && v[7] <= '9') || v[8])
        return fail(why, 400, "a malformed HTTP version");
    if (v[5] != '1') return fail(why, 505, "only HTTP/1.0 and HTTP/1.1 are served");
    h->minor = v[7] - '0';
    h->target = target;
    return 0;
}

/* A field's name and value: the name a token right before the colon, the value without its
 * surrounding whitespace, no control byte but HTAB in it. */
static int parse_field(char *line, char **name, char **value, const char **why) {
    if (is_ows((unsigned char)line[0])) return fail(why, 400, "a folded header line (obsolete line folding is refused)");
    char *colon = strchr(line, ':');
    if (!colon || colon == line) return fail(why, 400, "a header line without a name and a colon");
    for (char *c = line; c < colon; c++)
        if (!is_tchar((unsigned char)*c)) return fail(why, 400, "a malformed header name");
    *colon = 0;
    char *v = colon + 1;
    while (is_ows((unsigned char)*v)) v++;
    char *e = v + strlen(v);
    while (e > v && is_ows((unsigned char)e[-1])) e--;
    *e = 0;
    for (char *c = v; *c; c++)
        if (((unsigned char)*c < 0x20 && *c != '\t') || (unsigned char)*c == 0x7f)
            return fail(why, 400, "a control byte in a header value");
    *name = line;
    *value = v;
    return 0;
}

/* Content-Length: 1*DIGIT, or a list of equal values (RFC 9112 §6.3 allows a recipient to take
 * "5, 5" as 5); every occurrence must agree. */
static int add_content_length(srv_http_head *h, const char *v, const char **why) {
    const char *p = v;
    for (;;) {
        const char *d = p;
        while (*p >= '0' && *p <= '9') p++;
        if (p == d) return fail(why, 400, "an invalid Content-Length");
        if (p - d > 18) return fail(why, 413, "the Content-Length is larger than the body cap");
        int64_t x = 0;
        for (const char *q = d; q < p; q++) x = x * 10 + (*q - '0');
        if (h->content_length >= 0 && h->content_length != x) return fail(why, 400, "conflicting Content-Length values");
        h->content_length = x;
        while (is_ows((unsigned char)*p)) p++;
        if (!*p) return 0;
        if (*p != ',') return fail(why, 400, "an invalid Content-Length");
        p++;
        while (is_ows((unsigned char)*p)) p++;
    }
}

/* Transfer-Encoding: a list of codings; only chunked is known, and it must come last. */
static int add_transfer_encoding(srv_http_head *h, const char *v, const char **why) {
    const char *p = v;
    while (*p) {
        while (is_ows((unsigned char)*p) || *p == ',') p++;
        if (!*p) break;
        const char *s = p;
        while (*p && *p != ',' && !is_ows((unsigned char)*p) && *p != ';') p++;
        size_t n = (size_t)(p - s);
        if (h->chunked) return fail(why, 400, "a transfer coding after chunked");
        if (n == 7 && !strncasecmp(s, "chunked", 7)) h->chunked = true;
        else h->other_coding = true;
        while (*p && *p != ',') p++; /* parameters of a coding we refuse anyway */
    }
    h->has_te = true;
    return 0;
}

static bool has_token(const char *v, const char *tok) {
    size_t n = strlen(tok);
    for (const char *p = v; *p;) {
        while (is_ows((unsigned char)*p) || *p == ',') p++;
        const char *s = p;
        while (*p && *p != ',' && !is_ows((unsigned char)*p)) p++;
        if ((size_t)(p - s) == n && !strncasecmp(s, tok, n)) return true;
    }
    return false;
}

static int add_field(srv_http_head *h, char *name, char *value, const char **why) {
    if (h->n_fields == SRV_HTTP_MAX_FIELDS) return fail(why, 431, "more than 128 header fields");
    h->fields[h->n_fields].name = name;
    h->fields[h->n_fields].value = value;
    h->n_fields++;
    if (!strcasecmp(name, "Content-Length")) return add_content_length(h, value, why);
    if (!strcasecmp(name, "Transfer-Encoding")) return add_transfer_encoding(h, value, why);
    if (!strcasecmp(name, "Host")) h->n_host++;
    else if (!strcasecmp(name, "Connection")) {
        if (has_token(value, "close")) h->close = true;
        if (has_token(value, "keep-alive")) h->keep_alive = true;
    } else if (!strcasecmp(name, "Expect")) {
        if (strcasecmp(value, "100-continue")) return fail(why, 417, "the only expectation served is 100-continue");
        h->expect_continue = true;
    }
    return 0;
}

/* The framing rules once every field is in (RFC 9112 §3.2, §6.1, §6.3). */
static int check_framing(srv_http_head *h, const char **why) {
    if (h->minor >= 1 && h->n_host != 1)
        return fail(why, 400, h->n_host ? "more than one Host header" : "an HTTP/1.1 request without a Host header");
    if (h->has_te && h->content_length >= 0) return fail(why, 400, "both Content-Length and Transfer-Encoding");
    if (h->has_te && h->minor == 0) return fail(why, 400, "Transfer-Encoding on an HTTP/1.0 request");
    if (h->has_te && !h->chunked) return fail(why, 400, "a Transfer-Encoding that does not end with chunked");
    if (h->other_coding) return fail(why, 501, "a transfer coding other than chunked");
    return 0;
}

int srv_http_parse_head(char *buf, size_t n, srv_http_head *h, const char **why) {
    memset(h, 0, sizeof *h);
    h->content_length = -1;
    *why = "";
    char *p = buf, *end = buf + n;
    if (memchr(buf, 0, n)) return fail(why, 400, "a NUL byte in the request header section");
    while (p < end && (*p == '\r' || *p == '\n')) p++;
    int bad = 0;
    char *line = next_line(&p, end, &bad);
    if (!line) return fail(why, 400, "an empty request");
    if (bad) return fail(why, 400, "a bare CR in the request line");
    int st = parse_request_line(line, h, why);
    if (st) return st;
    while ((line = next_line(&p, end, &bad)) && *line) {
        if (bad) return fail(why, 400, "a bare CR in a header line");
        char *name, *value;
        if ((st = parse_field(line, &name, &value, why)) || (st = add_field(h, name, value, why))) return st;
    }
    if (bad) return fail(why, 400, "a bare CR in a header line");
    if (!line) return fail(why, 400, "an unterminated header section");
    if ((st = check_framing(h, why))) return st;
    h->persistent = h->minor >= 1 ? !h->close : (h->keep_alive && !h->close);
    return 0;
}

const char *srv_http_field(const srv_http_head *h, const char *name) {
    for (int i = 0; i < h->n_fields; i++)
        if (!strcasecmp(h->fields[i].name, name)) return h->fields[i].value;
    return NULL;
}

/* ---- the target --------------------------------------------------------------------------------- */

/* origin-form ("/path?query") or absolute-form ("http://authority/path?query", RFC 9112
 * §3.2.2: a server must accept it); the path percent-decoded into out (out_n bytes), refused
 * when an escape is malformed or decodes to a control byte (a NUL would cut the path short). */
int srv_http_decode_path(const char *target, char *out, size_t out_n, const char **why) {
    const char *p = target;
    if (!strncasecmp(p, "http://", 7) || !strncasecmp(p, "https://", 8)) {
        p += p[4] == ':' ? 7 : 8;
        while (*p && *p != '/' && *p != '?') p++;
        if (*p == '?' || !*p) p = "/";
    } else if (*p != '/') return fail(why, 400, "the request target is neither a path nor an absolute URL");
    size_t o = 0;
    for (; *p && *p != '?'; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '#') return fail(why, 400, "a fragment in the request target");
        if (ch == '%') {
            int a = hexval((unsigned char)p[1]), b = a < 0 ? -1 : hexval((unsigned char)p[2]);
            if (b < 0) return fail(why, 400, "a malformed percent escape in the path");
            ch = (unsigned char)(a * 16 + b);
            p += 2;
            if (ch < 0x20 || ch == 0x7f) return fail(why, 400, "a control byte (e.g. %00) in the path");
        }
        if (o + 1 >= out_n) return fail(why, 414, "the request target is too long");
        out[o++] = (char)ch;
    }
    out[o] = 0;
    return 0;
}

/* ---- chunked bodies ----------------------------------------------------------------------------- */

enum { CH_SIZE, CH_BWS, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_TRAILER_LF, CH_DONE };

/* chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF; last-chunk = "0" [ chunk-ext ] CRLF,
 * then trailer fields and an empty line (RFC 9112 §7.1). The size is hex digits only (no sign,
 * no 0x, at most 15 of them); extensions are skipped, bounded; a LF without its CR is taken as
 * the line end, a CR without LF is an error. Data goes to out while out stays within max. */
int srv_chunked_feed(srv_chunked *c, const char *in, size_t n, size_t *used, srv_buf *out, size_t max) {
    size_t i = 0;
    while (i < n && c->state != CH_DONE) {
        unsigned char ch = (unsigned char)in[i];
        switch (c->state) {
        case CH_SIZE: {
            int v = hexval(ch);
            if (v >= 0) {
                if (++c->digits > 15) return SRV_CHUNK_BAD;
                c->left = c->left * 16 + (uint64_t)v;
                i++;
                break;
            }
            if (!c->digits) return SRV_CHUNK_BAD;
            if (ch == ';' || is_ows(ch)) c->state = CH_BWS;
            else if (ch == '\r') c->state = CH_SIZE_LF, i++;
            else if (ch == '\n') c->state = c->left ? CH_DATA : CH_TRAILER, c->line = 0, i++;
            else return SRV_CHUNK_BAD;
            if (c->left > max || out->n + c->left > max) return SRV_CHUNK_TOO_BIG;
            break;
        }
        case CH_BWS: /* whitespace, then ';' and an extension, or the line end */
            if (ch == ';') c->state = CH_EXT;
            else if (ch == '\r') c->state = CH_SIZE_LF;
            else if (ch == '\n') c->state = c->left ? CH_DATA : CH_TRAILER, c->line = 0;
            else if (!is_ows(ch)) return SRV_CHUNK_BAD;
            i++;
            break;
        case CH_EXT:
            if (ch == '\r') c->state = CH_SIZE_LF;
            else if (ch == '\n') c->state = c->left ? CH_DATA : CH_TRAILER, c->line = 0;
            else if ((ch < 0x20 && ch != '\t') || ch == 0x7f || ++c->line > 4096) return SRV_CHUNK_BAD;
            i++;
            break;
        case CH_SIZE_LF:
            if (ch != '\n') return SRV_CHUNK_BAD;
            c->state = c->left ? CH_DATA : CH_TRAILER;
            c->line = 0;
            i++;
            break;
        case CH_DATA: {
            size_t k = n - i < c->left ? n - i : (size_t)c->left;
            if (srv_buf_put(out, in + i, k)) return SRV_CHUNK_NOMEM;
            c->left -= k;
            i += k;
            if (!c->left) c->state = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            if (ch == '\n') c->state = CH_SIZE, c->digits = 0;
            else if (ch == '\r') c->state = CH_DATA_LF;
            else return SRV_CHUNK_BAD;
            i++;
            break;
        case CH_DATA_LF:
            if (ch != '\n') return SRV_CHUNK_BAD;
            c->state = CH_SIZE;
            c->digits = 0;
            i++;
            break;
        case CH_TRAILER: /* a field line, or the empty line that ends the body */
            if (ch == '\r') c->state = CH_TRAILER_LF;
            else if (ch == '\n') c->state = c->line ? CH_TRAILER : CH_DONE, c->line = 0;
            else if ((ch < 0x20 && ch != '\t') || ch == 0x7f || ++c->line > 4096 || ++c->trailer > 65536)
                return SRV_CHUNK_BAD;
            i++;
            break;
        case CH_TRAILER_LF:
            if (ch != '\n') return SRV_CHUNK_BAD;
            c->state = c->line ? CH_TRAILER : CH_DONE;
            c->line = 0;
            i++;
            break;
        }
    }
    *used = i;
    return c->state == CH_DONE ? SRV_CHUNK_DONE : SRV_CHUNK_MORE;
}
