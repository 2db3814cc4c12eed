// Table-driven --flag VALUE parsing for the longctx subcommands.
#ifndef LC_ARGS_H
#define LC_ARGS_H

#include "core/status.h"

// LC_ARG_BOOL: a switch (--pack sets 1; --pack=0 / --pack=1 also accepted).
typedef enum { LC_ARG_INT, LC_ARG_LONG, LC_ARG_FLOAT, LC_ARG_STR, LC_ARG_BOOL } lc_arg_type;

typedef struct {
  const char *name; // without the leading --
  lc_arg_type type;
  void *dst;        // int* (INT, BOOL), long*, float*, const char**
  const char *help;
  int seen;         // set by the parser
} lc_flag;

// Parses argv[0..argc) as "--name value" or "--name=value" pairs. Errors: unknown flag,
// missing value, malformed or out-of-range number, repeated flag.
lc_status lc_args_parse(int argc, char **argv, lc_flag *flags, int n);
void lc_args_help(const char *cmd, const lc_flag *flags, int n);
// 1 if any argument is --help or -h.
int lc_args_wants_help(int argc, char **argv);
const lc_flag *lc_args_find(const lc_flag *flags, int n, const char *name);

#endif
