/* The hub client's pure parts (tools/qhx/hub): references, paths from a listing, the choice of
 * a repository's files, URL escaping, the settings from the environment. The transfers, the
 * cache and ollama's store are tested against a mock hub (tests/cli/hub.sh). */
#include "t.h"

#include "hub/hub_internal.h"

#include <stdlib.h>
#include <unistd.h>

static void test_refs(void) {
    hub_ref r;
    hub_err e = {0};
    CHECK_EQ(hub_ref_parse("Qwen/Qwen3-VL-2B-Instruct-GGUF:Q4_K_M", &r, &e), 0);
    CHECK_STR(r.repo, "Qwen/Qwen3-VL-2B-Instruct-GGUF");
    CHECK_STR(r.quant, "Q4_K_M");
    CHECK_STR(r.revision, "main");
    CHECK_EQ(hub_ref_parse("a/b:q8_0@refs/pr/1", &r, &e), 0);
    CHECK_STR(r.quant, "q8_0");
    CHECK_STR(r.revision, "refs/pr/1");
    CHECK_EQ(hub_ref_parse("org/model.v1_2@0123456789abcdef0123456789abcdef01234567", &r, &e), 0);
    static const char *const bad[] = {"", "a", "/a", "a/", "a/b/c", "../a", "a/..", "a/b@", "a/b:", "a/b@../x",
                                      "a/b@x/../y", "a/b@/x", "a/b@x//y", "a/b:Q4 K", "a/b:Q4/K", "a--b/c", "a/b..c",
                                      ".a/b", "a/b-", "a b/c", "a/b\n", "a/b@x\ny", "ollama:x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.msg[0] = '\0';
        CHECK(hub_ref_parse(bad[i], &r, &e) == -1);
        CHECK(e.msg[0] != '\0' && !strchr(e.msg, '\n'));
    }
    char longname[400];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    longname[5] = '/';
    CHECK(hub_ref_parse(longname, &r, &e) == -1);
    CHECK(hub_is_repo_id("a/b"));
    CHECK(!hub_is_repo_id("a/b:Q4"));
    CHECK(!hub_is_repo_id("./b"));
}

static void test_paths(void) {
    static const char *const ok[] = {"config.json", "a/b/c.safetensors", "x..y", ".hidden"};
    static const char *const bad[] = {"", "/etc/passwd", "../x", "a/../b", "a/..", "./a", "a//b", "a/", "a\\b", "a\nb", ".."};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) CHECK(hub_safe_relpath(ok[i]));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(!hub_safe_relpath(bad[i]));
    CHECK(hub_is_hex("0123456789abcdef0123456789abcdef01234567", 40));
    CHECK(!hub_is_hex("0123456789ABCDEF0123456789abcdef01234567", 40));
    CHECK(!hub_is_hex("0123", 40));
    char out[256];
    hub_url_escape("a b/c+d%e?f#g.h~i_j-k", true, out, sizeof out);
    CHECK_STR(out, "a%20b/c%2Bd%25e%3Ff%23g.h~i_j-k");
    hub_url_escape("refs/pr/1", false, out, sizeof out);
    CHECK_STR(out, "refs%2Fpr%2F1");
}

static int pick(const char *const *names, size_t n, const char *quant, const char *const *inc, const char *const *exc,
                hub_pick *p) {
    hub_err e = {0};
    return hub_pick_files(names, n, "o/r", quant, inc, exc, p, &e);
}

static void test_pick(void) {
    static const char *const gguf[] = {"README.md", "M-Q4_K.gguf", "M-Q4_K_M.gguf", "M-Q8_0.gguf", "mmproj-M-f16.gguf",
                                       "mmproj-M-Q8_0.gguf", "M-Q2_K-00001-of-00002.gguf", "M-Q2_K-00002-of-00002.gguf",
                                       "M-IQ4_XS.gguf"};
    size_t n = sizeof gguf / sizeof gguf[0];
    hub_pick p;
    CHECK_EQ(pick(gguf, n, "", NULL, NULL, &p), 0);
    CHECK_EQ(p.kind, HUB_KIND_GGUF);
    CHECK_STR(p.gguf, "M-Q4_K_M.gguf");
    CHECK_STR(p.mmproj, "mmproj-M-f16.gguf");
    CHECK_EQ(p.n, 2);
    hub_pick_free(&p);
    CHECK_EQ(pick(gguf, n, "q4_k", NULL, NULL, &p), 0); /* the whole word: not Q4_K_M */
    CHECK_STR(p.gguf, "M-Q4_K.gguf");
    hub_pick_free(&p);
    CHECK_EQ(pick(gguf, n, "Q8_0", NULL, NULL, &p), 0);
    CHECK_STR(p.mmproj, "mmproj-M-Q8_0.gguf");
    hub_pick_free(&p);
    CHECK_EQ(pick(gguf, n, "Q2_K", NULL, NULL, &p), 0);
    CHECK_EQ(p.n, 3);
    CHECK(hub_pick_has(&p, "M-Q2_K-00002-of-00002.gguf"));
    hub_pick_free(&p);
    CHECK_EQ(pick(gguf, n, "Q5_K_M", NULL, NULL, &p), -1);
    CHECK_EQ(pick(gguf, n, "XS", NULL, NULL, &p), -1); /* IQ4_XS holds XS only after '_' */
    static const char *const noq4[] = {"b-F16.gguf", "a-Q8_0.gguf", "mmproj.gguf"};
    CHECK_EQ(pick(noq4, 3, "", NULL, NULL, &p), 0);
    CHECK_STR(p.gguf, "a-Q8_0.gguf"); /* no Q4_K_M: the first by name */
    CHECK_STR(p.mmproj, "mmproj.gguf");
    hub_pick_free(&p);
    static const char *const st[] = {"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                     "model.safetensors.index.json", "tokenizer.json", "README.md", "sub/config.json",
                                     "preprocessor_config.json", "merges.txt", "onnx/model.onnx"};
    CHECK_EQ(pick(st, 10, "", NULL, NULL, &p), 0);
    CHECK_EQ(p.kind, HUB_KIND_SAFETENSORS);
    CHECK_EQ(p.n, 5); /* config, index, tokenizer, preprocessor, merges; the shards come from the index */
    CHECK(hub_pick_has(&p, "model.safetensors.index.json") && !hub_pick_has(&p, "README.md"));
    CHECK(!hub_pick_has(&p, "sub/config.json") && !hub_pick_has(&p, "model-00001-of-00002.safetensors"));
    hub_pick_free(&p);
    static const char *const exc[] = {"merges.txt", NULL}, *const inc[] = {"*.md", "onnx/*", NULL};
    CHECK_EQ(pick(st, 10, "", NULL, exc, &p), 0);
    CHECK(!hub_pick_has(&p, "merges.txt"));
    hub_pick_free(&p);
    CHECK_EQ(pick(st, 10, "", inc, NULL, &p), 0);
    CHECK_EQ(p.n, 2);
    hub_pick_free(&p);
    CHECK_EQ(pick(st, 10, "Q4_K_M", NULL, NULL, &p), -1); /* a quantization of a repository without GGUF */
    static const char *const none[] = {"README.md", "model.onnx"};
    CHECK_EQ(pick(none, 2, "", NULL, NULL, &p), -1);
    /* both kinds: the safetensors unless a quantization is asked */
    static const char *const both[] = {"config.json", "model.safetensors", "m-Q4_K_M.gguf"};
    CHECK_EQ(pick(both, 3, "", NULL, NULL, &p), 0);
    CHECK_EQ(p.kind, HUB_KIND_SAFETENSORS);
    hub_pick_free(&p);
    CHECK_EQ(pick(both, 3, "Q4_K_M", NULL, NULL, &p), 0);
    CHECK_EQ(p.kind, HUB_KIND_GGUF);
    hub_pick_free(&p);
}

static void test_env(void) {
    char dir[] = "/tmp/qhx_test_hub.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    hub_env env;
    hub_err e = {0};
    unsetenv("HF_HUB_CACHE");
    unsetenv("HUGGINGFACE_HUB_CACHE");
    unsetenv("HF_TOKEN");
    unsetenv("HUGGING_FACE_HUB_TOKEN");
    unsetenv("HF_TOKEN_PATH");
    unsetenv("HF_ENDPOINT");
    unsetenv("HF_HUB_OFFLINE");
    unsetenv("TRANSFORMERS_OFFLINE");
    setenv("HF_HOME", dir, 1);
    CHECK_EQ(hub_env_load(&env, NULL, &e), 0);
    CHECK_STR(env.endpoint, "https://huggingface.co");
    char want[600];
    snprintf(want, sizeof want, "%s/hub", dir);
    CHECK_STR(env.cache, want);
    CHECK_STR(env.token, "");
    CHECK(!env.offline);
    /* the token file huggingface_hub writes, trimmed */
    char tok[600];
    snprintf(tok, sizeof tok, "%s/token", dir);
    FILE *f = fopen(tok, "w");
    fputs("hf_abc\n", f);
    fclose(f);
    CHECK_EQ(hub_env_load(&env, NULL, &e), 0);
    CHECK_STR(env.token, "hf_abc");
    setenv("HF_TOKEN", "hf_env", 1);
    CHECK_EQ(hub_env_load(&env, NULL, &e), 0);
    CHECK_STR(env.token, "hf_env");
    CHECK_EQ(hub_env_load(&env, "hf_arg", &e), 0);
    CHECK_STR(env.token, "hf_arg");
    setenv("HF_TOKEN", "bad\r\nX-Injected: 1", 1); /* never a header of its own */
    CHECK_EQ(hub_env_load(&env, NULL, &e), 0);
    CHECK_STR(env.token, "");
    unsetenv("HF_TOKEN");
    unlink(tok);
    setenv("HF_ENDPOINT", "http://127.0.0.1:9///", 1);
    setenv("HF_HUB_CACHE", "/x/y", 1);
    setenv("HF_HUB_OFFLINE", "1", 1);
    CHECK_EQ(hub_env_load(&env, NULL, &e), 0);
    CHECK_STR(env.endpoint, "http://127.0.0.1:9");
    CHECK_STR(env.cache, "/x/y");
    CHECK(env.offline);
    char repo_dir[HUB_PATH_MAX];
    hub_repo_dir(&env, "Qwen/Qwen3.5-2B", repo_dir);
    CHECK_STR(repo_dir, "/x/y/models--Qwen--Qwen3.5-2B");
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_HOME");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    CHECK_EQ(hub_env_load(&env, NULL, &e), 0);
    CHECK_STR(env.cache, "/xdg/huggingface/hub");
    rmdir(dir);
}

int main(void) {
    test_refs();
    test_paths();
    test_pick();
    test_env();
    return t_done("test_hub");
}
