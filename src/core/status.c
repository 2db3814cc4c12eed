#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>

// Per-thread message buffer: the only mutable global, and it is per thread.
static _Thread_local char lc_msg[1024];

lc_status lc_fail(lc_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(lc_msg, sizeof lc_msg, fmt, ap);
  va_end(ap);
  return st;
}

const char *lc_errmsg(void) { return lc_msg; }

const char *lc_status_name(lc_status st) {
  switch (st) {
    case LC_OK: return "ok";
    case LC_EINVAL: return "invalid argument";
    case LC_ENOMEM: return "out of memory";
    case LC_EIO: return "i/o error";
    case LC_EFORMAT: return "bad format";
    case LC_ECOMM: return "communication error";
  }
  return "unknown";
}
