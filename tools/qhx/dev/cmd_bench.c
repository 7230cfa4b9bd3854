/* qhx bench: benchmark programs that print figures (never tests).
 *   qhx bench -m MODEL [--pp N] [--tg N] [--ctx N] ...   (cmd_bench_model.c)
 *   qhx bench tokenizer --tokenizer PATH [--input FILE] [--mb N] [--runs N]
 * tokenizer: load time (tokenizer.json and the binary form) and single-thread encode
 * throughput in 64 KiB chunks over ~10 MB of mixed English, code and CJK text. */
#include "cli_dev.h"

#include "core/alloc.h"
#include "core/file.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- input text ------------------------------------------------------------------------ */

typedef struct text {
    char *p;
    size_t n, cap;
} text;

static int text_put(text *t, const char *s, size_t n) {
    if (t->n + n > t->cap) {
        size_t cap = t->cap ? t->cap : 1 << 20;
        while (cap < t->n + n) cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) return -1;
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    return 0;
}

/* Append the given files, over and over, until `want` bytes were added. */
static size_t add_files(text *t, const char *const *files, size_t want) {
    size_t added = 0;
    int any = 1;
    while (added < want && any) {
        any = 0;
        for (size_t k = 0; files[k] && added < want; k++) {
            qhx_file_map m;
            if (qhx_file_map_open(files[k], &m, NULL) != QHX_OK) continue;
            size_t n = m.size < want - added ? m.size : want - added;
            while (n > 0 && n < m.size && (m.data[n] & 0xC0) == 0x80) n--; /* whole characters */
            if (n && !text_put(t, (const char *)m.data, n)) {
                added += n;
                any = 1;
            }
            qhx_file_map_close(&m);
        }
    }
    return added;
}

/* Deterministic CJK prose: common Chinese, Japanese and Korean characters and punctuation. */
static size_t add_cjk(text *t, size_t want) {
    static const char *const zh =
        "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严";
    static const char *const ja =
        "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲン日本語東京学校先生時間今日明日電車会社仕事";
    static const char *const ko =
        "가나다라마바사아자차카타파하고노도로모보소오조초코토포호구누두루무부수우주추쿠투푸후그느드르므브스으즈츠크트프흐기니디리미비시이지치키티피히한국어서울학교선생님시간오늘내일";
    static const char *const punct[] = {"，", "。", "！", "？", "、", "「", "」", "：", "；", "（", "）", " "};
    const char *sets[3] = {zh, ja, ko};
    uint64_t x = 0x2545f4914f6cdd1dull;
    size_t added = 0;
    char buf[8];
    while (added < want) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *set = sets[x % 3];
        size_t chars = strlen(set) / 3; /* all of them are 3-byte characters */
        int len = 8 + (int)(x >> 8) % 40;
        for (int k = 0; k < len && added < want; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const char *c = set + 3 * (x % chars);
            if (added + 3 > want) return added;
            memcpy(buf, c, 3);
            if (text_put(t, buf, 3)) return added;
            added += 3;
        }
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *p = punct[x % 12];
        size_t pl = strlen(p);
        if (added + pl > want) break;
        if (text_put(t, p, pl)) break;
        added += pl;
        if (x % 7 == 0 && added + 1 <= want && !text_put(t, "\n", 1)) added++;
    }
    return added;
}

static const char *const ENGLISH[] = {
    "/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0",
    "/usr/share/common-licenses/LGPL-2.1", "/usr/share/common-licenses/GPL-2",
    "/usr/share/common-licenses/MPL-2.0", "/usr/share/common-licenses/Artistic", NULL};
static const char *const CODE[] = {
    "/usr/include/stdio.h", "/usr/include/stdlib.h", "/usr/include/string.h", "/usr/include/unistd.h",
    "/usr/include/jansson.h", "/usr/include/pcre2.h", "/usr/include/utf8proc.h", "/usr/include/math.h",
    "/usr/include/pthread.h", "/usr/include/signal.h", "/usr/include/fcntl.h", "/usr/include/time.h", NULL};

/* ---- the tokenizer bench ----------------------------------------------------------------- */

static void tok_usage(FILE *f) {
    fprintf(f,
            "usage: qhx bench tokenizer --tokenizer PATH [--input FILE] [--mb N] [--runs N]\n"
            "  Load time of tokenizer.json and of the binary form (min / median of --runs, default 5),\n"
            "  then encode throughput, one thread, in 64 KiB chunks, over --input or over N MB\n"
            "  (default 10) of English (/usr/share/common-licenses), C headers (/usr/include) and\n"
            "  generated CJK text, mixed 45/35/20. Times are wall clock; CPU time in parentheses.\n");
}

static const char *CMD = "bench tokenizer";

static int bench_tokenizer(int argc, char **argv) {
    const char *path = NULL, *input = NULL;
    int64_t mb = 10, runs = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            tok_usage(stdout);
            return QHX_EXIT_OK;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "unknown argument or missing value: '%s'", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--tokenizer")) path = v;
        else if (!strcmp(a, "--input")) input = v;
        else if (!strcmp(a, "--mb")) {
            if (qhx_cli_parse_i64(v, 1, 4096, &mb)) return qhx_cli_usage_error(CMD, "--mb: '%s' is not in [1, 4096]", v);
        } else if (!strcmp(a, "--runs")) {
            if (qhx_cli_parse_i64(v, 1, 100, &runs)) return qhx_cli_usage_error(CMD, "--runs: '%s' is not in [1, 100]", v);
        } else
            return qhx_cli_usage_error(CMD, "unknown argument '%s'", a);
    }
    if (!path) return qhx_cli_usage_error(CMD, "missing --tokenizer PATH");

    qhx_error err = {0};
    char *json = qhx_path_is_dir(path) ? qhx_path_join(path, "tokenizer.json") : qhx_strdup(path);
    char tmp[] = "/tmp/qhx_bench_XXXXXX";
    const char *bin = tmp;
    int is_json = 0;
    int fd = mkstemp(tmp);
    if (!json || fd < 0) {
        fprintf(stderr, "qhx %s: cannot create a temporary file\n", CMD);
        qhx_free(json);
        return QHX_EXIT_RUNTIME;
    }
    close(fd);
    double wall[100], cpu[100];
    qhx_tok *tok = NULL;
    int rc = QHX_EXIT_OK;

    FILE *la = fopen("/proc/loadavg", "r");
    char loadavg[64] = "?";
    if (la) {
        if (fgets(loadavg, sizeof loadavg, la)) loadavg[strcspn(loadavg, " ")] = '\0';
        fclose(la);
    }
    printf("tokenizer: %s (machine load average %s, %ld CPUs)\n", json, loadavg, sysconf(_SC_NPROCESSORS_ONLN));

    /* load: the JSON (parsed from a mapped file, never its binary twin) */
    qhx_file_map m;
    if (qhx_file_map_open(json, &m, &err) != QHX_OK) {
        rc = qhx_cli_runtime_error(CMD, &err);
        goto out;
    }
    is_json = m.size && m.data[0] != 'q';
    qhx_file_map_close(&m);
    for (int64_t r = 0; r < runs && is_json; r++) {
        double w = wall_ms(), c = cpu_ms();
        qhx_file_map mm;
        qhx_status st = qhx_file_map_open(json, &mm, &err);
        if (st == QHX_OK) st = qhx_tok_load_buffer(mm.data, mm.size, json, &tok, &err);
        qhx_file_map_close(&mm);
        wall[r] = wall_ms() - w;
        cpu[r] = cpu_ms() - c;
        if (st != QHX_OK) {
            rc = qhx_cli_runtime_error(CMD, &err);
            goto out;
        }
        if (r + 1 < runs) {
            qhx_tok_free(tok);
            tok = NULL;
        }
    }
    if (is_json) {
        double c0 = cpu[0];
        qsort(wall, (size_t)runs, sizeof *wall, cmp_double);
        qsort(cpu, (size_t)runs, sizeof *cpu, cmp_double);
        printf("load tokenizer.json: min %.1f ms, median %.1f ms (CPU min %.1f ms, first %.1f ms), %lld runs\n",
               wall[0], wall[runs / 2], cpu[0], c0, (long long)runs);
        if (qhx_tok_save(tok, bin, &err) != QHX_OK) {
            rc = qhx_cli_runtime_error(CMD, &err);
            goto out;
        }
        qhx_tok_free(tok);
        tok = NULL;
    } else {
        bin = json; /* given a binary form: time that */
    }
    for (int64_t r = 0; r < runs; r++) {
        double w = wall_ms(), c = cpu_ms();
        qhx_status st = qhx_tok_load_binary(bin, &tok, &err);
        wall[r] = wall_ms() - w;
        cpu[r] = cpu_ms() - c;
        if (st != QHX_OK) {
            rc = qhx_cli_runtime_error(CMD, &err);
            goto out;
        }
        if (r + 1 < runs) {
            qhx_tok_free(tok);
            tok = NULL;
        }
    }
    qsort(wall, (size_t)runs, sizeof *wall, cmp_double);
    qsort(cpu, (size_t)runs, sizeof *cpu, cmp_double);
    if (qhx_file_map_open(bin, &m, NULL) == QHX_OK) {
        printf("load binary form (%.1f MB): min %.1f ms, median %.1f ms (CPU min %.1f ms), %lld runs\n",
               m.size / 1e6, wall[0], wall[runs / 2], cpu[0], (long long)runs);
        qhx_file_map_close(&m);
    }

    /* input */
    text t = {0};
    size_t want = (size_t)mb << 20, en = 0, code = 0, cjk = 0;
    if (input) {
        const char *one[] = {input, NULL};
        qhx_file_map im;
        if (qhx_file_map_open(input, &im, &err) != QHX_OK) {
            rc = qhx_cli_runtime_error(CMD, &err);
            goto out;
        }
        size_t n = im.size;
        qhx_file_map_close(&im);
        add_files(&t, one, n);
        printf("input: %s, %.2f MB\n", input, t.n / 1048576.0);
    } else {
        en = add_files(&t, ENGLISH, want * 45 / 100);
        code = add_files(&t, CODE, want * 35 / 100);
        cjk = add_cjk(&t, want - t.n);
        printf("input: %.2f MB generated: English %.2f MB, C code %.2f MB, CJK %.2f MB\n", t.n / 1048576.0,
               en / 1048576.0, code / 1048576.0, cjk / 1048576.0);
    }

    /* encode in 64 KiB chunks, cut at character boundaries; a second pass has a warm cache */
    for (int pass = 0; pass < 2 && t.n; pass++) {
        size_t tokens = 0;
        double w = wall_ms(), c = cpu_ms();
        for (size_t at = 0; at < t.n;) {
            size_t n = t.n - at < 65536 ? t.n - at : 65536;
            while (at + n < t.n && n > 1 && (t.p[at + n] & 0xC0) == 0x80) n--;
            int32_t *ids = NULL;
            size_t k = 0;
            if (qhx_tok_encode_alloc(tok, t.p + at, n, &ids, &k, &err) != QHX_OK) {
                rc = qhx_cli_runtime_error(CMD, &err);
                free(t.p);
                goto out;
            }
            tokens += k;
            qhx_free(ids);
            at += n;
        }
        w = wall_ms() - w;
        c = cpu_ms() - c;
        printf("encode (%s): %.2f MB in %.3f s = %.1f MB/s (CPU %.3f s = %.1f MB/s), %zu tokens, %.2f bytes/token\n",
               pass ? "second pass" : "first pass", t.n / 1048576.0, w / 1e3, t.n / 1048576.0 / (w / 1e3),
               c / 1e3, t.n / 1048576.0 / (c / 1e3), tokens, (double)t.n / (double)(tokens ? tokens : 1));
    }
    free(t.p);
out:
    qhx_tok_free(tok);
    remove(tmp);
    qhx_free(json);
    return rc;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} BENCHES[] = {
    {"tokenizer", bench_tokenizer, "tokenizer load time and encode throughput"},
};

int qhx_bench_model(int argc, char **argv); /* cmd_bench_model.c */

int qhx_cmd_bench(int argc, char **argv) {
    if (argc >= 2 && argv[1][0] == '-' && strcmp(argv[1], "-h") && strcmp(argv[1], "--help"))
        return qhx_bench_model(argc, argv);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: qhx bench -m MODEL [--pp N] [--tg N] [--ctx N] [--threads N] [--reps N]\n"
                   "                 [--weights mmap|read] [--isa X] [--json]   (qhx bench -m x --help)\n"
                   "       qhx bench NAME [ARGS...]\n");
        for (size_t k = 0; k < sizeof BENCHES / sizeof BENCHES[0]; k++)
            fprintf(f, "  %-12s %s\n", BENCHES[k].name, BENCHES[k].help);
        return argc < 2 ? QHX_EXIT_USAGE : QHX_EXIT_OK;
    }
    for (size_t k = 0; k < sizeof BENCHES / sizeof BENCHES[0]; k++)
        if (!strcmp(argv[1], BENCHES[k].name)) return BENCHES[k].fn(argc - 1, argv + 1);
    return qhx_cli_usage_error("bench", "unknown benchmark '%s'", argv[1]);
}
