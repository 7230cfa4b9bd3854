/* test_grammar: the GBNF parser and its errors, the matcher (bytes, UTF-8, ends, ambiguity
 * caps), token masks against a brute-force check of every token, and the JSON Schema
 * compiler (sentences it must and must not accept, keywords outside the subset named). */
#include "core/alloc.h"
#include "core/rng.h"
#include "grammar/grammar.h"
#include "t.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static qhx_gm *parse(const char *text) {
    qhx_error err = {0};
    qhx_gm *g = NULL;
    qhx_status rc = qhx_gm_parse(text, strlen(text), NULL, &g, &err);
    if (rc) fprintf(stderr, "parse failed: %s\n", err.msg);
    return g;
}

/* 1: text is a whole sentence of g; 0: a prefix only; -1: rejected. */
static int judge(const qhx_gm *g, const char *text) {
    qhx_gm_match *m = NULL;
    if (qhx_gm_match_new(g, &m, NULL)) return -2;
    int r = qhx_gm_match_bytes(m, (const uint8_t *)text, strlen(text), NULL);
    int out = r != 1 ? -1 : qhx_gm_match_can_end(m) ? 1 : 0;
    qhx_gm_match_free(m);
    return out;
}

static void expect_error(const char *text, qhx_status code, const char *needle) {
    qhx_error err = {0};
    qhx_gm *g = NULL;
    qhx_status rc = qhx_gm_parse(text, strlen(text), NULL, &g, &err);
    CHECK_EQ(rc, code);
    CHECK(g == NULL);
    CHECK_CONTAINS(err.msg, needle);
    qhx_gm_free(g);
}

static void test_parse_and_match(void) {
    qhx_gm *g = parse("root ::= \"a\" b* | \"x\" [0-9]{2,3}\nb ::= \"b\" | \"c\"  # comment\n");
    CHECK(g != NULL);
    CHECK_EQ(judge(g, "a"), 1);
    CHECK_EQ(judge(g, "abcb"), 1);
    CHECK_EQ(judge(g, "ad"), -1);
    CHECK_EQ(judge(g, "x1"), 0);
    CHECK_EQ(judge(g, "x12"), 1);
    CHECK_EQ(judge(g, "x123"), 1);
    CHECK_EQ(judge(g, "x1234"), -1);
    CHECK_EQ(judge(g, ""), 0);
    qhx_gm_free(g);

    /* negated classes and '.' are well-formed UTF-8, byte by byte */
    g = parse("root ::= [^a]+ \".\" .\n");
    CHECK_EQ(judge(g, "\xC3\xA9."), 0);
    CHECK_EQ(judge(g, "\xC3\xA9.\xE2\x82\xAC"), 1);
    CHECK_EQ(judge(g, "\xC3"), 0);           /* half a character: a prefix */
    CHECK_EQ(judge(g, "\xC3\x28"), -1);     /* not UTF-8 */
    CHECK_EQ(judge(g, "\xED\xA0\x80"), -1); /* a surrogate */
    CHECK_EQ(judge(g, "a"), -1);
    CHECK_EQ(judge(g, "b.\xF0\x9F\x98\x80"), 1);
    qhx_gm_free(g);

    /* multi-line rules, nested groups, escapes, continuation lines */
    g = parse("root ::= (\n  \"\\\"\" [\\x41-\\u0043]? \"\\n\"\n)\n  | \"\\u00e9\"\n");
    CHECK_EQ(judge(g, "\"B\n"), 1);
    CHECK_EQ(judge(g, "\"\n"), 1);
    CHECK_EQ(judge(g, "\"D\n"), -1);
    CHECK_EQ(judge(g, "\xC3\xA9"), 1);
    qhx_gm_free(g);

    /* right recursion nests; a rule used before it is defined */
    g = parse("root ::= p\np ::= \"(\" p \")\" | \"\"\n");
    CHECK_EQ(judge(g, "((()))"), 1);
    CHECK_EQ(judge(g, "(()"), 0);
    CHECK_EQ(judge(g, "())"), -1);
    qhx_gm_free(g);

    expect_error("root ::= a\n", QHX_E_FORMAT, "'a' is used but never defined");
    expect_error("root ::= root \"x\" | \"y\"\n", QHX_E_FORMAT, "left-recursive");
    expect_error("root ::= a\na ::= b? root \"x\"\nb ::= \"b\"\n", QHX_E_FORMAT, "left-recursive");
    expect_error("root ::= \"abc\n", QHX_E_FORMAT, "grammar:1:");
    expect_error("root := \"a\"\n", QHX_E_FORMAT, "expected '::='");
    expect_error("root ::= [z-a]\n", QHX_E_FORMAT, "reversed");
    expect_error("root ::= \"a\"{5000}\n", QHX_E_LIMIT, "repetition count");
    expect_error("x ::= \"a\"\n", QHX_E_FORMAT, "no rule 'root'");
    expect_error("root ::= \"a\"\nroot ::= \"b\"\n", QHX_E_FORMAT, "defined twice");
    expect_error("root ::= <tok>\n", QHX_E_FORMAT, "token references");
    char deep[2000];
    size_t n = (size_t)snprintf(deep, sizeof deep, "root ::= ");
    for (int i = 0; i < 300; i++) deep[n++] = '(';
    deep[n++] = '"', deep[n++] = 'a', deep[n++] = '"';
    for (int i = 0; i < 300; i++) deep[n++] = ')';
    deep[n++] = '\n', deep[n] = '\0';
    expect_error(deep, QHX_E_LIMIT, "nest deeper");
}

/* An exponentially ambiguous grammar hits the stack cap with an error, not a hang. */
static void test_ambiguity_cap(void) {
    qhx_gm *g = parse("root ::= a\na ::= \"x\" a \"y\" | \"x\" a \"z\" | \"\"\n");
    qhx_gm_match *m = NULL;
    CHECK(qhx_gm_match_new(g, &m, NULL) == QHX_OK);
    qhx_error err = {0};
    int r = 1;
    for (int i = 0; i < 40 && r == 1; i++) r = qhx_gm_match_bytes(m, (const uint8_t *)"x", 1, &err);
    CHECK_EQ(r, -1);
    CHECK_EQ(err.code, QHX_E_LIMIT);
    CHECK_CONTAINS(err.msg, "ambiguous");
    qhx_gm_match_free(m);
    qhx_gm_free(g);
    /* the same language written unambiguously runs deep */
    g = parse("root ::= a\na ::= \"x\" a [yz] | \"\"\n");
    CHECK(qhx_gm_match_new(g, &m, NULL) == QHX_OK);
    for (int i = 0; i < 3000 && r != 0; i++) r = qhx_gm_match_bytes(m, (const uint8_t *)"x", 1, NULL);
    CHECK_EQ(r, 1);
    CHECK_EQ(qhx_gm_match_bytes(m, (const uint8_t *)"yz", 2, NULL), 1);
    CHECK(!qhx_gm_match_can_end(m));
    qhx_gm_match_free(m);
    qhx_gm_free(g);
}

/* Masks equal the brute-force answer (each token's bytes tried alone) at every step of random
 * walks, over a vocabulary of random byte strings (multi-byte, partial UTF-8, shared prefixes). */
static void test_masks(void) {
    static const char *grammars[] = {
        "root ::= \"{\" ws (kv (\",\" ws kv)*)? \"}\"\nkv ::= \"\\\"\" [a-z\\u00e9]{1,4} \"\\\"\" ws \":\" ws [0-9]+ ws\nws ::= \" \"?\n",
        "root ::= ([^\"\\\\] | \"\\\\\" [nt])* \"\\\"\"\n",
        "root ::= \"ab\" | \"abc\" | \"a\" [b-d]* \"e\"\n",
    };
    const char alphabet[] = "{}\",: abcdez019\\nt\xC3\xA9";
    qhx_rng rng;
    qhx_rng_seed(&rng, 7);
    enum { NV = 600 };
    uint8_t *bytes[NV];
    const uint8_t *cb[NV];
    uint32_t lens[NV];
    uint8_t kind[NV];
    for (int i = 0; i < NV; i++) {
        lens[i] = 1 + (uint32_t)(qhx_rng_u64(&rng) % 4);
        bytes[i] = malloc(lens[i]);
        for (uint32_t k = 0; k < lens[i]; k++) bytes[i][k] = (uint8_t)alphabet[qhx_rng_u64(&rng) % (sizeof alphabet - 1)];
        cb[i] = bytes[i];
        kind[i] = i == 0 ? QHX_GM_TOK_END : i == 1 ? QHX_GM_TOK_NEVER : QHX_GM_TOK_TEXT;
    }
    qhx_gm_vocab *v = NULL;
    CHECK(qhx_gm_vocab_new(NV, cb, lens, kind, &v, NULL) == QHX_OK);
    uint64_t words[(NV + 63) / 64];
    int mismatches = 0, steps = 0;
    for (size_t gi = 0; gi < sizeof grammars / sizeof grammars[0]; gi++) {
        qhx_gm *g = parse(grammars[gi]);
        CHECK(g != NULL);
        for (int walk = 0; walk < 20 && g; walk++) {
            qhx_gm_match *m = NULL;
            qhx_gm_match_new(g, &m, NULL);
            for (int step = 0; step < 30; step++) {
                CHECK_EQ(qhx_gm_mask(m, v, words, NULL), 0);
                int allowed[NV], n_allowed = 0;
                for (int i = 0; i < NV; i++) {
                    int want = qhx_gm_allows(m, v, i, NULL);
                    int got = (int)((words[i / 64] >> (i % 64)) & 1);
                    if (want != got) mismatches++;
                    if (got && kind[i] == QHX_GM_TOK_TEXT) allowed[n_allowed++] = i;
                }
                steps++;
                if (!n_allowed) break;
                int pick = allowed[qhx_rng_u64(&rng) % (uint64_t)n_allowed];
                CHECK_EQ(qhx_gm_accept(m, v, pick, NULL), 1);
            }
            qhx_gm_match_free(m);
        }
        qhx_gm_free(g);
    }
    CHECK_EQ(mismatches, 0);
    CHECK(steps > 100);
    qhx_gm_vocab_free(v);
    for (int i = 0; i < NV; i++) free(bytes[i]);
}

/* ---- JSON Schema ---------------------------------------------------------------------------- */

static qhx_gm *schema(const char *json) {
    qhx_error err = {0};
    qhx_gm *g = NULL;
    if (qhx_gm_from_schema(json, strlen(json), &g, &err)) fprintf(stderr, "schema failed: %s\n", err.msg);
    return g;
}

static void expect_schema_error(const char *json, qhx_status code, const char *needle) {
    qhx_error err = {0};
    qhx_gm *g = NULL;
    CHECK_EQ(qhx_gm_from_schema(json, strlen(json), &g, &err), code);
    CHECK(g == NULL);
    CHECK_CONTAINS(err.msg, needle);
}

static void test_schema(void) {
    qhx_gm *g = schema("{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 3},"
                       " \"age\": {\"type\": \"integer\", \"minimum\": 18, \"maximum\": 130}, \"tags\": {\"type\": \"array\","
                       " \"items\": {\"enum\": [\"a\", 2, null]}, \"maxItems\": 2}}, \"required\": [\"age\"],"
                       " \"additionalProperties\": false}");
    CHECK(g != NULL);
    CHECK_EQ(judge(g, "{\"age\": 18}"), 1);
    CHECK_EQ(judge(g, "{\"age\":130,\"name\":\"abc\"}"), 1);
    CHECK_EQ(judge(g, "{\"age\":131}"), -1);
    CHECK_EQ(judge(g, "{\"age\":17}"), -1);
    CHECK_EQ(judge(g, "{\"age\":99,\"name\":\"abcd\"}"), -1);
    CHECK_EQ(judge(g, "{\"age\":99,\"tags\":[2,null]}"), 1);
    CHECK_EQ(judge(g, "{\"age\":99,\"tags\":[2,null,\"a\"]}"), -1);
    CHECK_EQ(judge(g, "{\"name\":\"x\"}"), -1);
    CHECK_EQ(judge(g, "{\"age\":20,\"other\":1}"), -1);
    qhx_gm_free(g);

    /* extra keys never equal a declared one */
    g = schema("{\"properties\": {\"ab\": {\"type\": \"integer\"}}, \"additionalProperties\": {\"type\": \"boolean\"}}");
    CHECK_EQ(judge(g, "{\"a\": true}"), 1);
    CHECK_EQ(judge(g, "{\"abc\": false}"), 1);
    CHECK_EQ(judge(g, "{\"ab\": 3, \"b\": true}"), 1);
    CHECK_EQ(judge(g, "{\"ab\": true}"), -1);
    qhx_gm_free(g);

    /* numbers with bounds, negative ranges, fractions below the maximum */
    g = schema("{\"type\": \"number\", \"minimum\": -12, \"exclusiveMaximum\": 7.5}");
    CHECK_EQ(judge(g, "-12"), 1);
    CHECK_EQ(judge(g, "-13"), -1);
    CHECK_EQ(judge(g, "7"), 1);
    CHECK_EQ(judge(g, "8"), -1);
    CHECK_EQ(judge(g, "6.25"), 1);
    CHECK_EQ(judge(g, "0"), 1);
    qhx_gm_free(g);
    g = schema("{\"type\": \"integer\", \"minimum\": 95, \"maximum\": 1234}");
    const char *in[] = {"95", "99", "100", "999", "1000", "1234"}, *out[] = {"94", "1235", "2000", "9", "01"};
    for (int i = 0; i < 6; i++) CHECK_EQ(judge(g, in[i]), 1);
    for (int i = 0; i < 5; i++) CHECK(judge(g, out[i]) != 1);
    qhx_gm_free(g);

    /* $ref and $defs, recursion, anyOf, const, formats, patterns, prefixItems */
    g = schema("{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"kids\": {\"type\": \"array\","
               " \"items\": {\"$ref\": \"#/$defs/node\"}}}, \"additionalProperties\": false}},"
               " \"anyOf\": [{\"$ref\": \"#/$defs/node\"}, {\"const\": 5}]}");
    CHECK_EQ(judge(g, "{\"kids\":[{},{\"kids\":[]}]}"), 1);
    CHECK_EQ(judge(g, "5"), 1);
    CHECK_EQ(judge(g, "6"), -1);
    qhx_gm_free(g);
    g = schema("{\"type\": \"string\", \"format\": \"date\"}");
    CHECK_EQ(judge(g, "\"2024-02-28\""), 1);
    CHECK_EQ(judge(g, "\"2024-13-01\""), -1);
    qhx_gm_free(g);
    g = schema("{\"type\": \"string\", \"pattern\": \"^[A-Z]{2}-\\\\d+(x|\\\"y)?$\"}");
    CHECK_EQ(judge(g, "\"AB-12\""), 1);
    CHECK_EQ(judge(g, "\"AB-12\\\"y\""), 1);
    CHECK_EQ(judge(g, "\"A-12\""), -1);
    qhx_gm_free(g);
    g = schema("{\"type\": \"array\", \"prefixItems\": [{\"type\": \"boolean\"}, {\"type\": \"null\"}], \"items\": false,"
               " \"minItems\": 1}");
    CHECK_EQ(judge(g, "[true]"), 1);
    CHECK_EQ(judge(g, "[true, null]"), 1);
    CHECK_EQ(judge(g, "[]"), -1);
    CHECK_EQ(judge(g, "[true, null, 1]"), -1);
    qhx_gm_free(g);
    g = schema("{\"allOf\": [{\"properties\": {\"a\": {\"type\": \"null\"}}, \"required\": [\"a\"]},"
               " {\"properties\": {\"b\": {\"type\": \"null\"}}, \"required\": [\"b\"]}]}");
    CHECK_EQ(judge(g, "{\"a\": null, \"b\": null}"), 1);
    CHECK_EQ(judge(g, "{\"a\": null}"), -1);
    qhx_gm_free(g);
    g = NULL;
    CHECK(qhx_gm_json_object(&g, NULL) == QHX_OK);
    CHECK_EQ(judge(g, "{\"x\": [1, {\"y\": \"z\"}], \"q\": -1.5e3}"), 1);
    CHECK_EQ(judge(g, "[1]"), -1);
    qhx_gm_free(g);

    expect_schema_error("{\"type\": \"integer\", \"multipleOf\": 3}", QHX_E_UNSUPPORTED, "'multipleOf'");
    expect_schema_error("{\"properties\": {\"a\": {\"not\": {}}}}", QHX_E_UNSUPPORTED, "#/properties/a: 'not'");
    expect_schema_error("{\"$ref\": \"http://x/y\"}", QHX_E_UNSUPPORTED, "only local references");
    expect_schema_error("{\"$ref\": \"#/$defs/missing\"}", QHX_E_FORMAT, "names nothing");
    expect_schema_error("{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"$ref\": \"#/$defs/a\"}}, \"$ref\": \"#/$defs/a\"}",
                        QHX_E_FORMAT, "#/$defs/b: no finite value satisfies it (its '$ref's lead back");
    expect_schema_error("{\"type\": \"string\", \"format\": \"uri\"}", QHX_E_UNSUPPORTED, "'format' 'uri'");
    expect_schema_error("{\"type\": \"string\", \"pattern\": \"(?=a)\"}", QHX_E_UNSUPPORTED, "lookarounds");
    expect_schema_error("{\"type\": \"string\", \"maxLength\": 100000}", QHX_E_LIMIT, "'maxLength'");
    expect_schema_error("{\"type\": \"array\", \"uniqueItems\": true}", QHX_E_UNSUPPORTED, "'uniqueItems'");
    expect_schema_error("{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", QHX_E_FORMAT, "no integer");
    expect_schema_error("{\"allOf\": [{\"properties\": {\"a\": {}}, \"additionalProperties\": false}, {\"properties\": {\"b\": {}}}]}",
                        QHX_E_UNSUPPORTED, "inside 'allOf'");
    expect_schema_error("{\"type\": \"objekt\"}", QHX_E_UNSUPPORTED, "'objekt'");
    expect_schema_error("{\"type\": ", QHX_E_FORMAT, "invalid JSON");
    /* deep nesting: an error, not a stack overflow */
    size_t cap = 64 * 1024, n = 0;
    char *deep = malloc(cap);
    for (int i = 0; i < 2000; i++) n += (size_t)snprintf(deep + n, cap - n, "{\"items\":");
    n += (size_t)snprintf(deep + n, cap - n, "{}");
    for (int i = 0; i < 2000; i++) deep[n++] = '}';
    deep[n] = '\0';
    expect_schema_error(deep, QHX_E_LIMIT, "nests deeper than 256");
    free(deep);
    /* a huge enum is refused past the cap, a large one works */
    size_t ecap = 1 << 20;
    char *en = malloc(ecap);
    n = (size_t)snprintf(en, ecap, "{\"enum\": [");
    for (int i = 0; i < 5000; i++) n += (size_t)snprintf(en + n, ecap - n, "%s\"v%d\"", i ? "," : "", i);
    snprintf(en + n, ecap - n, "]}");
    expect_schema_error(en, QHX_E_LIMIT, "'enum' has 5000 values");
    n = (size_t)snprintf(en, ecap, "{\"enum\": [");
    for (int i = 0; i < 3000; i++) n += (size_t)snprintf(en + n, ecap - n, "%s\"v%d\"", i ? "," : "", i);
    snprintf(en + n, ecap - n, "]}");
    g = schema(en);
    CHECK(g != NULL);
    CHECK_EQ(judge(g, "\"v2999\""), 1);
    CHECK_EQ(judge(g, "\"v3000\""), -1);
    qhx_gm_free(g);
    free(en);
}

/* The two call forms of this build's families' chat formats (src/families/<name>/chat.c). */
static const qhx_gm_call_syntax BLOCKS = {.named = ">\n", .param_open = "<parameter=", .param_open_end = ">\n",
                                          .param_close = "</parameter>", .call_end = "</function>\n</tool_call>"};
static const qhx_gm_call_syntax JSON_CALL = {.json = true, .named = "\", \"arguments\": ", .call_end = "}\n</tool_call>"};

/* The rest of a forced Qwen3.5 tool call: parameters in order, strings as raw text that never
 * reads back as another JSON value, other types as JSON. */
static void test_tool_call(void) {
    const char *tools[] = {"{\"type\": \"function\", \"function\": {\"name\": \"w\", \"parameters\": {\"type\": \"object\","
                           " \"properties\": {\"city\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\", \"minimum\": 1,"
                           " \"maximum\": 3}}, \"required\": [\"city\"]}}}",
                           "{\"type\": \"function\", \"function\": {\"name\": \"z\"}}"};
    char *text = NULL;
    qhx_error err = {0};
    CHECK_EQ(qhx_gm_tool_call_gbnf(tools, 2, "w", &BLOCKS, &text, &err), QHX_OK);
    qhx_gm *g = text ? parse(text) : NULL;
    CHECK(g != NULL);
    static const char tail[] = "</function>\n</tool_call>";
    char buf[256];
    const char *ok[] = {"Paris", "", "true story", "N", "_x <", "Nonesuch"}, *bad_v[] = {"true", "None", "12", "{\"a\":1}", "\"q\"", "a<b"};
    for (int i = 0; i < 6; i++) {
        snprintf(buf, sizeof buf, "<parameter=city>\n%s\n</parameter>\n%s", ok[i], tail);
        CHECK_EQ(judge(g, buf), i == 4 ? -1 : 1); /* '<' never: it could start </parameter> */
        snprintf(buf, sizeof buf, "<parameter=city>\n%s\n</parameter>\n%s", bad_v[i], tail);
        CHECK(judge(g, buf) != 1);
    }
    CHECK_EQ(judge(g, "<parameter=city>\nX\n</parameter>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>"), 1);
    CHECK_EQ(judge(g, "<parameter=city>\nX\n</parameter>\n<parameter=n>\n4\n</parameter>\n</function>\n</tool_call>"), -1);
    CHECK_EQ(judge(g, "<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>"), -1); /* city is required */
    qhx_gm_free(g);
    qhx_free(text);
    CHECK_EQ(qhx_gm_tool_call_gbnf(tools, 2, NULL, &BLOCKS, &text, &err), QHX_OK); /* any function, name first */
    g = text ? parse(text) : NULL;
    CHECK_EQ(judge(g, "z>\n</function>\n</tool_call>"), 1);
    CHECK_EQ(judge(g, "w>\n</function>\n</tool_call>"), -1);
    qhx_gm_free(g);
    qhx_free(text);
    const char *bad_tool[] = {"{\"type\": \"function\", \"function\": {\"name\": \"w\", \"parameters\": {\"properties\":"
                              " {\"s\": {\"type\": \"string\", \"pattern\": \"a\"}}}}}"};
    CHECK_EQ(qhx_gm_tool_call_gbnf(bad_tool, 1, NULL, &BLOCKS, &text, &err), QHX_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "'pattern'");
    CHECK_EQ(qhx_gm_tool_call_gbnf(tools, 2, "nope", &BLOCKS, &text, &err), QHX_E_ARG);
    char long_tool[1200]; /* a parameter name that cannot be written whole is refused, not cut */
    snprintf(long_tool, sizeof long_tool, "{\"type\": \"function\", \"function\": {\"name\": \"w\", \"parameters\": "
             "{\"properties\": {\"%0700d\": {\"type\": \"integer\"}}}}}", 0);
    const char *long_tools[] = {long_tool};
    CHECK_EQ(qhx_gm_tool_call_gbnf(long_tools, 1, NULL, &BLOCKS, &text, &err), QHX_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "is too long for a tool call");
    const qhx_gm_call_syntax half = {.named = ">\n", .call_end = "</x>"}; /* blocks without their markers */
    CHECK_EQ(qhx_gm_tool_call_gbnf(tools, 2, NULL, &half, &text, &err), QHX_E_ARG);
    CHECK(text == NULL);
}

/* The rest of a forced Qwen3-VL call: the arguments one JSON object under the schema, then the
 * object's close and the end tag; with any function, the name and the "arguments" key first. */
static void test_tool_call_json(void) {
    const char *tools[] = {"{\"type\": \"function\", \"function\": {\"name\": \"w\", \"parameters\": {\"type\": \"object\","
                           " \"properties\": {\"city\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\", \"minimum\": 1,"
                           " \"maximum\": 3}}, \"required\": [\"city\"], \"additionalProperties\": false}}}",
                           "{\"type\": \"function\", \"function\": {\"name\": \"z\"}}"};
    char *text = NULL;
    qhx_error err = {0};
    CHECK_EQ(qhx_gm_tool_call_gbnf(tools, 2, "w", &JSON_CALL, &text, &err), QHX_OK);
    qhx_gm *g = text ? parse(text) : NULL;
    CHECK(g != NULL);
    CHECK_EQ(judge(g, "{\"city\": \"Paris\"}}\n</tool_call>"), 1);
    CHECK_EQ(judge(g, "{\"city\": \"Paris\", \"n\": 2}}\n</tool_call>"), 1);
    CHECK_EQ(judge(g, "{\"city\": \"Paris\", \"n\": 4}}\n</tool_call>"), -1); /* maximum 3 */
    CHECK_EQ(judge(g, "{\"n\": 2}}\n</tool_call>"), -1);                           /* city is required */
    CHECK_EQ(judge(g, "{\"city\": 1}}\n</tool_call>"), -1);
    CHECK_EQ(judge(g, "{\"city\": \"Paris\"}\n</tool_call>"), -1); /* the call object's close */
    qhx_gm_free(g);
    qhx_free(text);
    CHECK_EQ(qhx_gm_tool_call_gbnf(tools, 2, NULL, &JSON_CALL, &text, &err), QHX_OK);
    g = text ? parse(text) : NULL;
    CHECK(g != NULL);
    CHECK_EQ(judge(g, "z\", \"arguments\": {}}\n</tool_call>"), 1);
    CHECK_EQ(judge(g, "w\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>"), 1);
    CHECK_EQ(judge(g, "w\", \"arguments\": {}}\n</tool_call>"), -1);
    CHECK_EQ(judge(g, "q\", \"arguments\": {}}\n</tool_call>"), -1);
    qhx_gm_free(g);
    qhx_free(text);
    const char *quoted[] = {"{\"type\": \"function\", \"function\": {\"name\": \"a\\\"b\"}}"};
    CHECK_EQ(qhx_gm_tool_call_gbnf(quoted, 1, NULL, &JSON_CALL, &text, &err), QHX_E_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "JSON tool call");
}


/* ---- languages with no sentence, tail-call cycles, scale -------------------------------------- */

static void test_empty_language(void) {
    expect_error("root ::= [^\\x00-\\U0010FFFF]\n", QHX_E_FORMAT, "an empty character class");
    expect_error("root ::= []\n", QHX_E_FORMAT, "no text matches the grammar: rule 'root'");
    expect_error("root ::= \"a\" [^\\x00-\\x7F\\x80-\\U0010FFFF] \"b\"\n", QHX_E_FORMAT, "empty character class");
    /* a rule that never ends: every alternative needs itself again */
    expect_error("root ::= \"<\" item \">\"\nitem ::= \"x\" item | \"y\" item\n", QHX_E_FORMAT,
                 "rule 'root' -> rule 'item': every way on leads back");
    expect_error("root ::= a | b\na ::= b \"x\"\nb ::= \"y\" a\n", QHX_E_FORMAT, "no way to finish");
    /* a long chain is named from the start to where it dies, the middle left out */
    char *chain = malloc(64 * 1024);
    size_t n = (size_t)sprintf(chain, "root ::= r0\n");
    for (int i = 0; i < 100; i++) n += (size_t)sprintf(chain + n, "r%d ::= \"a\" r%d\n", i, i + 1);
    sprintf(chain + n, "r100 ::= [^\\x00-\\U0010FFFF]\n");
    expect_error(chain, QHX_E_FORMAT, "-> ... -> rule 'r99' -> rule 'r100': an empty character class");
    free(chain);
    /* an empty language inside one alternative only: the rest works, the dead branch is gone */
    qhx_gm *g = parse("root ::= \"a\" dead | \"ab\" | [] \"c\"\ndead ::= \"q\" dead\n");
    CHECK(g != NULL);
    CHECK_EQ(judge(g, "ab"), 1);
    CHECK_EQ(judge(g, "a"), 0);
    CHECK_EQ(judge(g, "aq"), -1); /* the branch that could never finish is not followed */
    CHECK_EQ(judge(g, "c"), -1);
    qhx_gm_free(g);
    /* empty literals (a zero-length copy), the empty sentence */
    g = parse("root ::= \"\" | \"\" \"a\" \"\"\n");
    CHECK_EQ(judge(g, ""), 1);
    CHECK_EQ(judge(g, "a"), 1);
    qhx_gm_free(g);
    g = parse("root ::= \"\"\n");
    CHECK_EQ(judge(g, ""), 1);
    CHECK_EQ(judge(g, "x"), -1);
    qhx_gm_match *m = NULL;
    CHECK(qhx_gm_match_new(g, &m, NULL) == QHX_OK);
    CHECK_EQ(qhx_gm_match_bytes(m, (const uint8_t *)"", 0, NULL), 1);
    CHECK(qhx_gm_match_can_end(m) && !qhx_gm_match_can_continue(m));
    qhx_gm_match_free(m);
    qhx_gm_free(g);
}

static void test_tail_cycles(void) {
    /* a repetition of something that can be empty, nested as deep as one likes */
    qhx_gm *g = parse("root ::= (\"a\"*)* \"b\"\n");
    CHECK(g != NULL);
    CHECK_EQ(judge(g, "b"), 1);
    CHECK_EQ(judge(g, "aaab"), 1);
    CHECK_EQ(judge(g, "ba"), -1);
    qhx_gm_free(g);
    g = parse("root ::= ((\"a\"? \"b\"?)+)* \"c\" (\"\"*)+\n");
    CHECK(g != NULL);
    CHECK_EQ(judge(g, "c"), 1);
    CHECK_EQ(judge(g, "abbac"), 1);
    CHECK_EQ(judge(g, "abca"), -1);
    qhx_gm_free(g);
    g = parse("root ::= a\na ::= b | \"x\"\nb ::= a\n"); /* rules calling each other last */
    CHECK_EQ(judge(g, "x"), 1);
    CHECK_EQ(judge(g, "xx"), -1);
    qhx_gm_free(g);
    /* a reference with something after it, back to the start: refused with the user's names */
    expect_error("root ::= a\na ::= b \"y\" | \"x\"\nb ::= a\n", QHX_E_FORMAT, "left-recursive");
    expect_error("root ::= (root \"a\")? \"b\"\n", QHX_E_FORMAT, "rule 'root' is left-recursive");
    expect_error("root ::= x\nx ::= (\"a\"* x \"b\")*\n", QHX_E_FORMAT, "rule 'x' is left-recursive");
    /* the user's rule named like a generated one is the user's */
    g = parse("root ::= \"(\" root-5 \")\"\nroot-5 ::= \"q\"\n");
    CHECK_EQ(judge(g, "(q)"), 1);
    qhx_gm_free(g);
}

static void test_scale(void) {
    /* 10000 alternatives, one parse each: the first byte ends all but one */
    size_t cap = 1 << 20, n = 0;
    char *t = malloc(cap);
    n += (size_t)snprintf(t + n, cap - n, "root ::= ");
    for (int i = 0; i < 10000; i++) n += (size_t)snprintf(t + n, cap - n, "%s\"w%05d\"", i ? " | " : "", i);
    snprintf(t + n, cap - n, "\n");
    qhx_gm *g = parse(t);
    CHECK(g != NULL);
    CHECK_EQ(judge(g, "w09999"), 1);
    CHECK_EQ(judge(g, "w0999"), 0);
    CHECK_EQ(judge(g, "w10000"), -1);
    qhx_gm_free(g);
    /* the same through 10000 rules of their own */
    n = (size_t)snprintf(t, cap, "root ::= ");
    for (int i = 0; i < 10000; i++) n += (size_t)snprintf(t + n, cap - n, "%sk%d", i ? " | " : "", i);
    n += (size_t)snprintf(t + n, cap - n, "\n");
    for (int i = 0; i < 10000; i++) n += (size_t)snprintf(t + n, cap - n, "k%d ::= \"%d\" \";\"\n", i, i);
    g = parse(t);
    CHECK(g != NULL);
    CHECK_EQ(judge(g, "4321;"), 1);
    CHECK_EQ(judge(g, "43210;"), -1);
    qhx_gm_free(g);
    /* a chain of 32000 rules compiles (docs/grammar.md has the times) */
    n = 0;
    n += (size_t)snprintf(t + n, cap - n, "root ::= \"a\" r1\n");
    for (int i = 1; i < 32000; i++) n += (size_t)snprintf(t + n, cap - n, "r%d ::= \"a\" r%d\n", i, i + 1);
    snprintf(t + n, cap - n, "r32000 ::= \"b\"\n");
    g = parse(t);
    CHECK(g != NULL);
    qhx_gm_free(g);
    /* over the rule cap: refused by the count before anything is built */
    n = 0;
    for (int i = 0; i <= QHX_GM_MAX_RULES && n + 32 < cap; i++) n += (size_t)snprintf(t + n, cap - n, "r%d ::= \"a\"\n", i);
    expect_error(t, QHX_E_LIMIT, "rule definitions, the limit is");
    free(t);
}

/* ---- JSON Schema: contradictions, references, booleans, decimal bounds ------------------------ */

static void test_schema_contradictions(void) {
    expect_schema_error("{\"type\": \"string\", \"const\": 5}", QHX_E_FORMAT, "#: 'const' 5 is not of 'type' \"string\"");
    expect_schema_error("{\"type\": [\"string\", \"null\"], \"enum\": [1, 2]}", QHX_E_FORMAT, "no value of 'enum' is of 'type'");
    expect_schema_error("{\"type\": \"object\", \"required\": [\"x\"], \"additionalProperties\": false}", QHX_E_FORMAT,
                        "'required' names 'x', which is not in 'properties'");
    expect_schema_error("{\"properties\": {\"a\": false}, \"required\": [\"a\"]}", QHX_E_FORMAT,
                        "#/properties/a: the schema is false");
    expect_schema_error("false", QHX_E_FORMAT, "#: the schema is false");
    expect_schema_error("{\"minLength\": 3, \"maxLength\": 2}", QHX_E_FORMAT, "'maxLength' 2 is below 'minLength' 3");
    expect_schema_error("{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 1}", QHX_E_FORMAT, "'maxItems' 1 is below");
    expect_schema_error("{\"prefixItems\": [{}], \"items\": false, \"minItems\": 2}", QHX_E_FORMAT, "'items' is false");
    expect_schema_error("{\"type\": \"array\", \"items\": false, \"minItems\": 1}", QHX_E_FORMAT, "'items' is false");
    expect_schema_error("{\"type\": \"number\", \"minimum\": 2, \"maximum\": 1.5}", QHX_E_FORMAT, "no number lies between 'minimum' 2");
    expect_schema_error("{\"type\": \"number\", \"exclusiveMinimum\": 1, \"maximum\": 1}", QHX_E_FORMAT, "no number lies");
    expect_schema_error("{\"type\": \"integer\", \"minimum\": 0.5, \"maximum\": 0.7}", QHX_E_FORMAT, "no integer lies between 'minimum' 0.5");
    expect_schema_error("{\"type\": \"number\", \"minimum\": 0.1234561, \"maximum\": 0.1234562}", QHX_E_FORMAT, "at most 6 decimals");
    expect_schema_error("{\"$ref\": \"#\"}", QHX_E_FORMAT, "no finite value");
    expect_schema_error("{\"properties\": {\"a\": {\"$ref\": \"#/properties/a\"}}, \"required\": [\"a\"]}", QHX_E_FORMAT,
                        "#/properties/a: no finite value");
    expect_schema_error("{\"type\": \"object\", \"properties\": {\"p\": {\"type\": \"array\", \"items\": {\"enum\": [1], \"type\": \"string\"}, \"minItems\": 1}}, \"required\": [\"p\"]}",
                        QHX_E_FORMAT, "#/properties/p/items: no value of 'enum'");
    /* a contradiction where the schema has a way around it: compiles, the way around only */
    qhx_gm *g = schema("{\"anyOf\": [{\"minLength\": 3, \"maxLength\": 2}, {\"type\": \"null\"}]}");
    CHECK_EQ(judge(g, "null"), 1);
    CHECK_EQ(judge(g, "\"\""), -1);
    qhx_gm_free(g);
    g = schema("{\"properties\": {\"a\": false, \"b\": {\"type\": \"null\"}}}");
    CHECK_EQ(judge(g, "{\"b\": null}"), 1);
    CHECK_EQ(judge(g, "{}"), 1);
    CHECK_EQ(judge(g, "{\"a\": null}"), -1);
    qhx_gm_free(g);
    g = schema("{\"type\": \"integer\", \"enum\": [1.5, 2, \"x\", 3.0]}");
    CHECK_EQ(judge(g, "2"), 1);
    CHECK_EQ(judge(g, "3.0"), 1);
    CHECK_EQ(judge(g, "1.5"), -1);
    CHECK_EQ(judge(g, "\"x\""), -1);
    qhx_gm_free(g);
    g = schema("{\"required\": [\"x\"], \"additionalProperties\": {\"type\": \"integer\"}}");
    CHECK_EQ(judge(g, "{\"x\": 1}"), 1);
    CHECK_EQ(judge(g, "{\"x\": \"s\"}"), -1);
    qhx_gm_free(g);
    g = schema("{\"anyOf\": [{\"$ref\": \"#\"}, {\"type\": \"null\"}]}");
    CHECK_EQ(judge(g, "null"), 1);
    qhx_gm_free(g);
    g = schema("{\"type\": \"array\", \"items\": {\"type\": \"array\", \"items\": false}, \"maxItems\": 2}");
    CHECK_EQ(judge(g, "[[], []]"), 1);
    CHECK_EQ(judge(g, "[[1]]"), -1);
    qhx_gm_free(g);
}

static void test_schema_refs_and_booleans(void) {
    qhx_gm *g = schema("{\"$ref\": \"#/$defs/my%20def\", \"$defs\": {\"my def\": {\"type\": \"integer\"}}}");
    CHECK_EQ(judge(g, "42"), 1);
    qhx_gm_free(g);
    g = schema("{\"$ref\": \"#/$defs/a~1b/properties/t~0\", \"$defs\": {\"a/b\": {\"properties\": {\"t~\": {\"type\": \"null\"}}}}}");
    CHECK_EQ(judge(g, "null"), 1);
    CHECK_EQ(judge(g, "1"), -1);
    qhx_gm_free(g);
    g = schema("{\"$ref\": \"#/$defs/%25%7e1\", \"$defs\": {\"%~1\": {\"type\": \"boolean\"}, \"%/\": {\"type\": \"null\"}}}");
    CHECK_EQ(judge(g, "null"), 1); /* percent first, then the pointer's own ~1: "%/", not "%~1" */
    qhx_gm_free(g);
    g = schema("{\"prefixItems\": [{\"type\": \"null\"}], \"items\": {\"$ref\": \"#/prefixItems/0\"}}");
    CHECK_EQ(judge(g, "[null, null]"), 1);
    CHECK_EQ(judge(g, "[null, 1]"), -1);
    qhx_gm_free(g);
    expect_schema_error("{\"$ref\": \"#/$defs/a%2\", \"$defs\": {}}", QHX_E_FORMAT, "two-digit hex");
    expect_schema_error("{\"$ref\": \"#/$defs/a~2\", \"$defs\": {}}", QHX_E_FORMAT, "'~' must be followed by 0 or 1");
    expect_schema_error("{\"$ref\": \"#/$defs/l/01\", \"$defs\": {\"l\": [{}, {}]}}", QHX_E_FORMAT, "names nothing");
    /* boolean schemas, at the top and nested */
    g = schema("true");
    CHECK_EQ(judge(g, "[1, {\"a\": null}]"), 1);
    CHECK_EQ(judge(g, "\"s\""), 1);
    qhx_gm_free(g);
    g = schema(" true\n");
    CHECK(g != NULL);
    qhx_gm_free(g);
    g = schema("{\"properties\": {\"a\": true}, \"required\": [\"a\"], \"additionalProperties\": false}");
    CHECK_EQ(judge(g, "{\"a\": [true]}"), 1);
    qhx_gm_free(g);
    expect_schema_error("null", QHX_E_FORMAT, "a schema must be an object or a boolean");
    expect_schema_error("5", QHX_E_FORMAT, "a schema must be an object or a boolean");
}

/* Decimal bounds against the arithmetic: every candidate the grammar accepts lies inside, and
 * every candidate inside (up to 6 decimals) is accepted. */
static void test_schema_decimal_bounds(void) {
    static const double B[] = {-2.5, -1, -0.75, 0, 0.1, 0.5, 1, 1.25, 3};
    int nb = (int)(sizeof B / sizeof B[0]);
    char js[200], num[40];
    for (int i = 0; i < nb; i++)
        for (int j = i; j < nb; j++)
            for (int ex = 0; ex < 4; ex++) {
                bool xlo = ex & 1, xhi = ex & 2;
                if (B[i] == B[j] && (xlo || xhi)) continue;
                snprintf(js, sizeof js, "{\"type\": \"number\", \"%s\": %g, \"%s\": %g}", xlo ? "exclusiveMinimum" : "minimum",
                         B[i], xhi ? "exclusiveMaximum" : "maximum", B[j]);
                qhx_gm *g = schema(js);
                CHECK(g != NULL);
                if (!g) continue;
                for (int k = -80; k <= 80; k++)
                    for (int d = 0; d <= 3; d++) {
                        double v = k * 0.05;
                        snprintf(num, sizeof num, "%.*f", d, v);
                        double x = atof(num);
                        if (num[0] == '-' && x == 0) continue; /* "-0": a valid spelling of 0 the grammar may leave out */
                        bool inside = (xlo ? x > B[i] : x >= B[i] - 1e-12) && (xhi ? x < B[j] : x <= B[j] + 1e-12);
                        if (xlo && fabs(x - B[i]) < 1e-12) inside = false;
                        if (xhi && fabs(x - B[j]) < 1e-12) inside = false;
                        int r = judge(g, num);
                        if ((r == 1) != inside) fprintf(stderr, "%s: '%s' judged %d\n", js, num, r);
                        CHECK_EQ(r == 1, inside);
                    }
                qhx_gm_free(g);
            }
    /* one side only, and far from zero */
    qhx_gm *g = schema("{\"type\": \"number\", \"minimum\": -2.5}");
    CHECK_EQ(judge(g, "-2.5"), 1);
    CHECK_EQ(judge(g, "-2.51"), -1);
    CHECK_EQ(judge(g, "1234567.125"), 1);
    qhx_gm_free(g);
    g = schema("{\"type\": \"number\", \"exclusiveMaximum\": -1000000.5}");
    CHECK(judge(g, "-1000000.5") != 1); /* a prefix of -1000000.51 */
    CHECK_EQ(judge(g, "-1000000.500001"), 1);
    CHECK_EQ(judge(g, "-1000001"), 1);
    CHECK(judge(g, "-999999") != 1);
    CHECK_EQ(judge(g, "-999999.9"), -1);
    qhx_gm_free(g);
}

int main(void) {
    test_parse_and_match();
    test_ambiguity_cap();
    test_masks();
    test_schema();
    test_tool_call();
    test_tool_call_json();
    test_empty_language();
    test_tail_cycles();
    test_scale();
    test_schema_contradictions();
    test_schema_refs_and_booleans();
    test_schema_decimal_bounds();
    return t_done("test_grammar");
}
