#include "cli/args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const lc_flag *lc_args_find(const lc_flag *flags, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(flags[i].name, name)) return &flags[i];
  return NULL;
}

static lc_status set_value(lc_flag *f, const char *v) {
  char *end = NULL;
  errno = 0;
  switch (f->type) {
    case LC_ARG_INT:
    case LC_ARG_LONG: {
      long long x = strtoll(v, &end, 10);
      if (!*v || *end || errno)
        return lc_fail(LC_EINVAL, "--%s '%s' is not an integer", f->name, v);
      if (f->type == LC_ARG_INT) {
        if (x < INT_MIN || x > INT_MAX) return lc_fail(LC_EINVAL, "--%s %s is out of range", f->name, v);
        *(int *)f->dst = (int)x;
      } else {
        *(long *)f->dst = (long)x;
      }
      return LC_OK;
    }
    case LC_ARG_FLOAT: {
      double x = strtod(v, &end);
      if (!*v || *end || errno || !isfinite(x))
        return lc_fail(LC_EINVAL, "--%s '%s' is not a finite number", f->name, v);
      *(float *)f->dst = (float)x;
      return LC_OK;
    }
    case LC_ARG_STR:
      if (!*v) return lc_fail(LC_EINVAL, "--%s needs a non-empty value", f->name);
      *(const char **)f->dst = v;
      return LC_OK;
    case LC_ARG_BOOL:
      if (!strcmp(v, "1") || !strcmp(v, "true")) *(int *)f->dst = 1;
      else if (!strcmp(v, "0") || !strcmp(v, "false")) *(int *)f->dst = 0;
      else return lc_fail(LC_EINVAL, "--%s is a switch: give it alone, or --%s=0 / --%s=1", f->name, f->name, f->name);
      return LC_OK;
  }
  return LC_EINVAL;
}

lc_status lc_args_parse(int argc, char **argv, lc_flag *flags, int n) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--", 2) != 0)
      return lc_fail(LC_EINVAL, "unexpected argument '%s': flags look like --name VALUE (see --help)", a);
    char name[64];
    const char *eq = strchr(a + 2, '=');
    size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
    if (len >= sizeof name) return lc_fail(LC_EINVAL, "unknown flag '%s' (see --help)", a);
    memcpy(name, a + 2, len);
    name[len] = 0;
    lc_flag *f = (lc_flag *)lc_args_find(flags, n, name);
    if (!f) return lc_fail(LC_EINVAL, "unknown flag '--%s' (see --help for the flags of this command)", name);
    if (f->seen) return lc_fail(LC_EINVAL, "--%s given twice", name);
    const char *v = eq ? eq + 1 : NULL;
    if (!v && f->type == LC_ARG_BOOL) v = "1";
    if (!v) {
      if (i + 1 >= argc) return lc_fail(LC_EINVAL, "--%s needs a value", name);
      v = argv[++i];
    }
    LC_TRY(set_value(f, v));
    f->seen = 1;
  }
  return LC_OK;
}

void lc_args_help(const char *cmd, const lc_flag *flags, int n) {
  printf("usage: longctx %s [flags]\n", cmd);
  for (int i = 0; i < n; i++) printf("  --%-14s %s\n", flags[i].name, flags[i].help);
}

int lc_args_wants_help(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
  return 0;
}
