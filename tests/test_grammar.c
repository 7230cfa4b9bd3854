/* test_grammar: the GBNF parser and its errors, the matcher (bytes, UTF-8, ends, ambiguity
 * caps), token masks against a brute-force check of every token, and the JSON Schema
 * compiler (sentences it must and must not accept, keywords outside the subset named). */
#include "core/alloc.h"
#include "core/rng.h"
#include "grammar/grammar.h"
#include "t.h"

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

int main(void) {
    test_parse_and_match();
    test_ambiguity_cap();
    test_masks();
    test_schema();
    test_tool_call();
    test_tool_call_json();
    return t_done("test_grammar");
}
