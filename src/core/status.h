// Status codes and the last error message. Library code returns an lc_status;
// only the CLI prints and exits.
#ifndef LC_STATUS_H
#define LC_STATUS_H

typedef enum {
  LC_OK = 0,
  LC_EINVAL,  // bad argument, flag, layout or config
  LC_ENOMEM,  // allocation failed or the arena cap was reached
  LC_EIO,     // file could not be opened/read/written
  LC_EFORMAT, // file contents malformed
  LC_ECOMM,   // communication failure
} lc_status;

// Records a one-line message (printf-style) for the calling thread and returns st (control
// characters, newlines included, become '?': a message stays one line whatever input it
// quotes). The
// arguments may include lc_errmsg() (the message is formatted before it is replaced), but
// prefer to build on it in words of your own rather than nesting whole messages.
lc_status lc_fail(lc_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// The message of the last lc_fail on this thread ("" if none).
const char *lc_errmsg(void);
const char *lc_status_name(lc_status st);

#define LC_TRY(expr)                  \
  do {                                \
    lc_status lc_st_ = (expr);        \
    if (lc_st_ != LC_OK) return lc_st_; \
  } while (0)

#endif
