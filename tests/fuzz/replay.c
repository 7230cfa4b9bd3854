/* replay: run a fuzz target over every file of a corpus folder (argv[1]), so CTest replays the
 * corpus under ASan/UBSan without libFuzzer. Passes when no input crashes. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 0) { fclose(f); return -1; }
    uint8_t *buf = malloc(n ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); fclose(f); return -1; }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]); return 2; }
    DIR *d = opendir(argv[1]);
    if (!d) { fprintf(stderr, "replay: cannot open %s\n", argv[1]); return 1; }
    int n = 0, bad = 0;
    struct dirent *de;
    char path[4096];
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", argv[1], de->d_name);
        struct stat st;
        if (stat(path, &st) || !S_ISREG(st.st_mode)) continue;
        if (run_file(path)) { fprintf(stderr, "replay: cannot read %s\n", path); bad++; }
        n++;
    }
    closedir(d);
    printf("replay %s: %d inputs, %d unreadable\n", argv[1], n, bad);
    return (bad || n == 0) ? 1 : 0;
}
