#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

// Per-thread message buffer: the only mutable global, and it is per thread.
static _Thread_local char lc_msg[1024];

// Formatted into a scratch buffer first, then copied: a caller may pass the current
// message (lc_errmsg()) as an argument, and vsnprintf into the buffer it reads from is
// undefined behaviour (it printed the message nested into itself with characters lost).
lc_status lc_fail(lc_status st, const char *fmt, ...) {
  char buf[sizeof lc_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  // One line whatever it quotes: a control character of an input (a newline in a JSON
  // string, a byte of a binary file) is shown as '?' (found by bench/fuzz/fuzz_config).
  for (char *c = buf; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  memcpy(lc_msg, buf, sizeof lc_msg);
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
