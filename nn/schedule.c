/* schedule.c — learning-rate schedules; see schedule.h. */
#include "nn/schedule.h"

#include <math.h>
#include <string.h>

static const char *const schedule_names[] = {"const", "step", "cosine"};

double lr_at(lr_schedule sched, double base_lr, int epoch, int epochs, long step,
             long steps_per_epoch)
{
    if (epochs < 1)
        epochs = 1;
    switch (sched) {
    case LR_STEP:
        if (4 * epoch >= 3 * epochs)
            return base_lr * 0.01;
        if (2 * epoch >= epochs)
            return base_lr * 0.1;
        return base_lr;
    case LR_COSINE: {
        const double pi = 3.14159265358979323846;
        if (steps_per_epoch < 1)
            steps_per_epoch = 1;
        double t = ((double)epoch * steps_per_epoch + step) / ((double)epochs * steps_per_epoch);
        if (t > 1.0)
            t = 1.0;
        return base_lr * 0.5 * (1.0 + cos(pi * t));
    }
    case LR_CONST:
    default: return base_lr;
    }
}

int lr_schedule_parse(const char *s, lr_schedule *out)
{
    for (int i = 0; i < (int)(sizeof schedule_names / sizeof *schedule_names); i++)
        if (strcmp(s, schedule_names[i]) == 0) {
            *out = (lr_schedule)i;
            return 0;
        }
    return -1;
}

const char *lr_schedule_name(lr_schedule s)
{
    return s == LR_STEP || s == LR_COSINE ? schedule_names[s] : schedule_names[LR_CONST];
}
