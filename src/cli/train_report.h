// longctx train's output: the settings table, progress lines and the --log-json records.
#ifndef LC_TRAIN_REPORT_H
#define LC_TRAIN_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "plan/timemodel.h"
#include "train/trainer.h"

// The settings table (rank 0): model, data, layout, memory, model states, FLOP formula.
// extra: more lines about the job (robustness settings), printed as they are (may be NULL).
void lc_train_print_settings(const lc_train_opts *o, const lc_trainer *t, int threads, const char *ckpt_src,
                             int mlp_auto, int loss_auto, const char *extra);

// Progress: on a terminal one status line rewritten in place (with ETA); otherwise (a
// file, a pipe, CI) one line every --log-every steps.
// masked (the data has a loss mask): the line shows the step's counted tokens beside all.
typedef struct {
  int tty, open; // open: the in-place line is on screen without its newline
  int masked;
  double t0;
  long first_step;
} lc_progress;
void lc_progress_line(lc_progress *p, const lc_step_metrics *m, long total);
void lc_progress_break(lc_progress *p);
int lc_stdout_is_terminal(void);

// A step's time by term: the backend's op classes, the communication the step waited for,
// and the rest (step time less the others: host work, launches, synchronisation).
typedef enum {
  LC_TERM_GEMM = 0, LC_TERM_ATTN, LC_TERM_LOSS, LC_TERM_ELEM, LC_TERM_OPTIM, LC_TERM_COMM, LC_TERM_OTHER, LC_TERM_N
} lc_term;
typedef struct {
  double s[LC_TERM_N];
} lc_step_terms;
const char *lc_term_name(lc_term t);
// Measured (the backend's op timers, m->op_timed; 0 where the backend does not time its ops)
// and predicted (the time model's estimate of the step).
int lc_terms_measured(const lc_step_metrics *m, lc_step_terms *t);
void lc_terms_predicted(const lc_time_estimate *e, lc_step_terms *t);
// The end of train: each term's mean per step, predicted beside measured (pred NULL: none).
void lc_terms_print(const lc_step_terms *meas, const lc_step_terms *pred, int steps);

// --profile: each backend op's calls and seconds per step between two snapshots of
// lc_backend_op_totals (n steps of `step_s` seconds on average), slowest first.
void lc_train_print_profile(const double *s0, const uint64_t *c0, const double *s1, const uint64_t *c1, int nops, int n,
                            double step_s, int timed);

// One JSON object for the step (the keys README.md lists): with the measured terms and,
// when pred is given, the predicted ones.
void lc_train_log_json(FILE *f, const lc_step_metrics *m, double peak_gflops, const lc_step_terms *pred);
// The time model's step time for the trainer's layout (plan/timemodel.h); with_sample: the
// attention bounds of the batch's first sequence just processed (documents, window), else
// plain causal (or the window). e (may be NULL) gets the breakdown. 0 if it cannot predict.
double lc_train_predict(const lc_train_opts *o, const lc_trainer *t, const lc_rates *r, lc_time_estimate *e,
                        int with_sample);
// The settings table's "time model" line.
void lc_train_print_prediction(const lc_train_opts *o, const lc_trainer *t, const lc_rates *r);

#endif
