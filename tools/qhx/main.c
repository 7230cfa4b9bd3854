/* qhx: the command-line front end. One file per subcommand; this file dispatches. */
#include "cli.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
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
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, COMMANDS[i].name)) return qhx_cli_stdout_close(cmd, COMMANDS[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "qhx: unknown command '%s' (try 'qhx --help')\n", cmd);
    return QHX_EXIT_USAGE;
}
