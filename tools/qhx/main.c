/* qhx: the command-line front end. One file per subcommand; this file dispatches. */
#include "cli.h"
#include "hub/hub.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct qhx_cli_cmd COMMANDS[] = {
#define QHX_CLI_ENTRY(name, fn, help) {name, fn, help},
#include "commands.def"
#undef QHX_CLI_ENTRY
};
static const size_t N_COMMANDS = sizeof COMMANDS / sizeof COMMANDS[0];

static void print_usage(FILE *f) {
    fprintf(f, "usage: qhx COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-12s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "\nqhx COMMAND --help shows a command's options; qhx --version the version.\n");
}

/* SIGBUS: a file we map (weights with --weights mmap, a checkpoint being forged or inspected) was
 * truncated by another process, so a page we need no longer exists. The access cannot be
 * resumed; say so in one line, remove a half-written output file, and exit 1 instead of dumping
 * core. Only async-signal-safe calls here; several threads may fault at once, one reports. */
static void on_sigbus(int sig) {
    static const char msg[] = "qhx: an input file shrank while it was mapped (SIGBUS); stopped, nothing written\n";
    static atomic_flag reported = ATOMIC_FLAG_INIT;
    (void)sig;
    if (atomic_flag_test_and_set(&reported)) /* another thread faulted too: it prints and exits */
        for (;;) pause();
    qhx_cli_out_unlink_live();
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(QHX_EXIT_RUNTIME);
}

static void catch_sigbus(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

/* Options whose value is free text: "--name=value" right after one of them is that text, not
 * an option (a prompt may well read "--x=1"). */
static int takes_text(const char *a) {
    static const char *const text_opts[] = {"-p", "--prompt", "--system", "--system-prompt", "-sys",
                                            "--stop", "-r", "--reverse-prompt", "--ids"};
    for (size_t k = 0; k < sizeof text_opts / sizeof text_opts[0]; k++)
        if (!strcmp(a, text_opts[k])) return 1;
    return 0;
}

/* "--name=value" as two arguments, as llama.cpp and most GNU tools take them, for every
 * subcommand at once. Nothing is split after "--" or in the value of a text option. Returns a
 * new argv (owned: free; its strings point into argv or into the same block), or NULL when
 * out of memory. */
static char **split_eq_forms(int argc, char **argv, int *argc_out) {
    size_t bytes = sizeof(char *) * (2 * (size_t)argc + 1);
    for (int i = 0; i < argc; i++) bytes += strlen(argv[i]) + 1;
    char **out = malloc(bytes);
    if (!out) return NULL;
    char *pool = (char *)(out + 2 * (size_t)argc + 1);
    int n = 0, raw = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        int split = !raw && i > 0 && !strncmp(a, "--", 2) && a[2] && eq && eq > a + 2 && !takes_text(argv[i - 1]);
        if (!strcmp(a, "--")) raw = 1;
        if (!split) {
            out[n++] = argv[i];
            continue;
        }
        size_t k = (size_t)(eq - a);
        memcpy(pool, a, k);
        pool[k] = '\0';
        out[n++] = pool;
        pool += k + 1;
        out[n++] = (char *)eq + 1;
    }
    out[n] = NULL;
    *argc_out = n;
    return out;
}

static int unknown_command(const char *cmd) {
    const char *names[sizeof COMMANDS / sizeof COMMANDS[0]];
    for (size_t i = 0; i < N_COMMANDS; i++) names[i] = COMMANDS[i].name;
    const char *near = qhx_cli_closest(cmd, names, N_COMMANDS);
    if (near) fprintf(stderr, "qhx: unknown command '%s' (did you mean '%s'? try 'qhx --help')\n", cmd, near);
    else fprintf(stderr, "qhx: unknown command '%s' (try 'qhx --help')\n", cmd);
    return QHX_EXIT_USAGE;
}

int main(int argc, char **argv) {
    catch_sigbus();
    if (argc < 2) {
        fprintf(stderr, "qhx: missing command (try 'qhx --help')\n");
        return QHX_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        print_usage(stdout);
        return qhx_cli_stdout_close("help", 0);
    }
    if (!strcmp(cmd, "--version")) {
        printf("qhx %s\n", qhx_version());
        return qhx_cli_stdout_close("--version", 0);
    }
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(cmd, COMMANDS[i].name)) continue;
        int n;
        char **args = split_eq_forms(argc - 1, argv + 1, &n);
        if (!args) {
            fprintf(stderr, "qhx: out of memory\n");
            return QHX_EXIT_RUNTIME;
        }
        /* -hf REPO, -m ORG/NAME and -m ollama:NAME become -m PATH here, for every command */
        int m;
        char **resolved;
        int early = qhx_hub_resolve_args(cmd, n, args, &m, &resolved);
        if (early != -1) {
            free(args);
            return early;
        }
        int rc = qhx_cli_stdout_close(cmd, COMMANDS[i].fn(m, resolved));
        qhx_hub_args_free(m, resolved); /* before args: its strings point into args */
        free(args);
        return rc;
    }
    return unknown_command(cmd);
}
