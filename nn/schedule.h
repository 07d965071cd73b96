/* schedule.h — learning-rate schedules (`--lr-schedule`): the rate of every
 * step from (schedule, base rate, epoch, step) only, so a resumed run
 * continues on the same curve. */
#ifndef TRAIN_SCHEDULE_H
#define TRAIN_SCHEDULE_H

typedef enum lr_schedule {
    LR_CONST = 0,
    LR_STEP = 1,   /* x0.1 at 50% and again at 75% of the epochs */
    LR_COSINE = 2, /* per step from lr down to 0 over all epochs */
} lr_schedule;

/* The learning rate of step `step` (0-based, within the epoch) of epoch
 * `epoch` (0-based) out of `epochs`, each of steps_per_epoch steps. */
double lr_at(lr_schedule sched, double base_lr, int epoch, int epochs, long step,
             long steps_per_epoch);
/* "const" | "step" | "cosine" -> schedule; -1 for anything else */
int lr_schedule_parse(const char *s, lr_schedule *out);
const char *lr_schedule_name(lr_schedule s);

#endif
