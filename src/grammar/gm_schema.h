/* grammar/gm_schema.h: what the JSON Schema compiler (schema.c) and its pattern translator
 * (regex.c) share. Not for other layers. */
#ifndef QHX_GRAMMAR_SCHEMA_H
#define QHX_GRAMMAR_SCHEMA_H

#include "grammar/grammar.h"

#include <stdbool.h>

/* Growing GBNF text. failed: 1 out of memory, 2 past the size cap. */
typedef struct sb {
    char *p;
    size_t n, cap;
    int failed;
} sb;

int sb_put(sb *b, const char *s, size_t n);
int sb_printf(sb *b, const char *fmt, ...) QHX_PRINTF(2, 3);
/* bytes as a GBNF literal "..." */
void sb_lit(sb *b, const char *s, size_t n);

/* A pattern (the regex subset of docs/grammar.md, as the content of a JSON string) appended as
 * one GBNF expression. 0, or -1 with why (naming the construct) set. */
int gm_regex_to_gbnf(const char *pattern, sb *out, char *why, size_t why_size);

#endif
