/* hub.h: models fetched from the Hugging Face hub into its cache (the layout huggingface_hub
 * writes and reads), models read in place from ollama's store, and what both hold (qhx list).
 * The only part of qhexrt that talks HTTP: it links libcurl, the library (libqhx) does not.
 * docs/hub.md describes the cache, the environment variables and the errors. */
#ifndef QHX_HUB_H
#define QHX_HUB_H

/* qhx pull REPO[:QUANT][@REVISION] [--include GLOB]... [--exclude GLOB]... [--token T] */
int qhx_cmd_pull(int argc, char **argv);
/* qhx list: what the Hugging Face cache and ollama's store hold, runnable or not (and why). */
int qhx_cmd_list(int argc, char **argv);

/* The model references of a command line, as paths: "-hf REPO[:QUANT][@REV]" (fetched when the
 * cache lacks it, then "-m SNAPSHOT"), "-m ORG/NAME" where no such path exists (the cached
 * snapshot), "-m ollama:NAME[:TAG]" (the model blob in ollama's store); only for the commands
 * that take -m, never in the value of a text option (-p "-hf" is a prompt). cmd names the
 * command for messages. Returns -1 with *argv_out (free with qhx_hub_args_free, before argv's
 * own strings) and *argc_out set, or an exit code after one line on stderr (1 runtime,
 * 2 usage, 130 interrupted). argv is not modified. */
int qhx_hub_resolve_args(const char *cmd, int argc, char **argv, int *argc_out, char ***argv_out);
/* Free what qhx_hub_resolve_args returned. */
void qhx_hub_args_free(int argc, char **argv);

#endif
