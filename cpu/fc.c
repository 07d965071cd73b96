/* fc.c — fully connected layers on the CPU: OpenBLAS sgemm in blocks.
 *
 *   forward   out (B x N) = in (B x M) . w^T + bias          column blocks of out
 *   backward  dw  (N x M) = dout^T (N x B) . in (B x M)      row blocks of dw
 *             dbias[n]    = sum over b of dout[b][n]         with the dw rows
 *             din (B x M) = dout (B x N) . w (N x M)         column blocks of din
 *
 * Every block is one single-threaded sgemm over the full inner dimension,
 * and the blocks are fixed sizes (not a share per thread), so each output
 * element comes from the same call whatever the thread count: no
 * cross-thread reduction at all. Small layers are one block.
 *
 * With groups (backend_ops.batch_groups) every call sees one group: out
 * and din of a sample come from calls over its group alone (OpenBLAS picks
 * other kernels for other row counts, and they round differently, so a
 * whole-batch call would not give a sample the same bits in a batch cut
 * otherwise), and a block of dw is each group's sgemm over its samples,
 * the groups' blocks added as a balanced tree on a stack of levels (level
 * 0 is dw itself; the others in cpu_ctx.fc_scratch, per thread). The
 * blocks then depend on the group sizes, never on B. The price is the
 * weight matrix packed once per group rather than once per batch
 * (docs/BENCH-DISTRIBUTED.md).
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>

#include "cpu/internal.h"

#define FC_OUT_BLOCK 128 /* forward: columns of out per task */
#define FC_DW_BLOCK 64   /* backward: rows of dw per task */
#define FC_DIN_BLOCK 256 /* backward: columns of din per task */
/* below this many multiply-adds a layer is not worth splitting */
#define FC_SPLIT_MIN (1L << 18)
/* with groups, a layer is split as if a group held this many samples */
#define FC_GROUP_SPLIT 8
#define FC_MAX_LEVELS 7 /* log2(BACKEND_GROUPS_MAX) + 1 */

typedef struct fc_job {
    float *out, *din, *dw, *dbias;
    const float *in, *w, *bias, *dout;
    int B, M, N;
    int ob, dwb, dinb; /* block sizes */
    int nob, ndinb;    /* blocks of out and of din per group */
    int n_dw_tasks;
    int ngroups;
    int size[BACKEND_GROUPS_MAX], at[BACKEND_GROUPS_MAX]; /* samples, first sample */
    float *levels;  /* per thread: FC_MAX_LEVELS - 1 levels of dwb x (M + 1) floats */
    size_t level_n; /* floats of one level */
} fc_job;

/* the groups of a batch and the split: one group of B without batch_groups */
static int fc_split(backend *be, fc_job *j, const char *op)
{
    j->ngroups = cpu_groups(be, j->B, j->size, op);
    for (int g = 0, at = 0; g < j->ngroups; at += j->size[g], g++)
        j->at[g] = at;
    long rows = cpu_ctx_of(be)->ngroups ? FC_GROUP_SPLIT : j->B;
    return rows * j->M * j->N >= FC_SPLIT_MIN;
}

static void fc_fwd_task(void *arg, int t, int thread)
{
    (void)thread;
    fc_job *j = arg;
    int g = t / j->nob, n0 = t % j->nob * j->ob, nb = n0 + j->ob < j->N ? j->ob : j->N - n0;
    int rows = j->size[g];
    if (rows == 0)
        return;
    const float *in = j->in + (size_t)j->at[g] * j->M;
    float *out = j->out + (size_t)j->at[g] * j->N;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nb, j->M, 1.0f, in, j->M,
                j->w + (size_t)n0 * j->M, j->M, 0.0f, out + n0, j->N);
    for (int b = 0; b < rows; b++)
        cpu_vadd(out + (size_t)b * j->N + n0, j->bias + n0, (size_t)nb);
}

void cpu_fc_forward(backend *be, float *out, const float *in, const float *w, const float *bias,
                    int B, int M, int N)
{
    fc_job j = {.out = out, .in = in, .w = w, .bias = bias, .B = B, .M = M, .N = N};
    j.ob = fc_split(be, &j, "fc_forward") ? FC_OUT_BLOCK : N;
    j.nob = cpu_ntasks((size_t)N, (size_t)j.ob);
    cpu_run(be, j.ngroups * j.nob, fc_fwd_task, &j);
}

/* level l of the dw-block tree: dw's rows (l = 0) or this thread's scratch */
static float *level(const fc_job *j, int thread, int l, float *dw0)
{
    return l == 0 ? dw0 : j->levels + ((size_t)thread * (FC_MAX_LEVELS - 1) + l - 1) * j->level_n;
}

/* rows [n0, n0 + nb) of dw and dbias for group g into w0 (nb x M) and b0 (nb) */
static void dw_leaf(const fc_job *j, int g, int n0, int nb, float *w0, float *b0)
{
    int rows = j->size[g];
    const float *dout = j->dout + (size_t)j->at[g] * j->N;
    cpu_vfill(b0, 0.0f, (size_t)nb); /* sums in sample order */
    if (rows == 0) {
        cpu_vfill(w0, 0.0f, (size_t)nb * j->M);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nb, j->M, rows, 1.0f, dout + n0, j->N,
                j->in + (size_t)j->at[g] * j->M, j->M, 0.0f, w0, j->M);
    for (int b = 0; b < rows; b++)
        cpu_vadd(b0, dout + (size_t)b * j->N + n0, (size_t)nb);
}

static void fc_dw_task(fc_job *j, int t, int thread)
{
    int n0 = t * j->dwb, nb = n0 + j->dwb < j->N ? j->dwb : j->N - n0;
    float *dw0 = j->dw + (size_t)n0 * j->M;
    /* a binary counter of levels: level l holds the sum of count[l] groups;
     * two equal neighbours are added (left += right), so a power of 2 of
     * groups ends as one balanced tree in level 0, that is in dw */
    int count[FC_MAX_LEVELS], depth = 0;
    for (int g = 0; g < j->ngroups; g++) {
        float *w = level(j, thread, depth, dw0);
        float *b = depth == 0 ? j->dbias + n0 : w + (size_t)nb * j->M;
        dw_leaf(j, g, n0, nb, w, b);
        count[depth++] = 1;
        while (depth > 1 && count[depth - 1] == count[depth - 2]) {
            float *lw = level(j, thread, depth - 2, dw0), *rw = level(j, thread, depth - 1, dw0);
            float *lb = depth - 2 == 0 ? j->dbias + n0 : lw + (size_t)nb * j->M;
            cpu_vadd(lw, rw, (size_t)nb * j->M);
            cpu_vadd(lb, rw + (size_t)nb * j->M, (size_t)nb);
            count[depth - 2] *= 2;
            depth--;
        }
    }
}

static void fc_bwd_task(void *arg, int t, int thread)
{
    fc_job *j = arg;
    if (t < j->n_dw_tasks) {
        fc_dw_task(j, t, thread);
        return;
    }
    t -= j->n_dw_tasks;
    int g = t / j->ndinb, m0 = t % j->ndinb * j->dinb;
    int mb = m0 + j->dinb < j->M ? j->dinb : j->M - m0, rows = j->size[g];
    if (rows == 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, mb, j->N, 1.0f,
                j->dout + (size_t)j->at[g] * j->N, j->N, j->w + m0, j->M, 0.0f,
                j->din + (size_t)j->at[g] * j->M + m0, j->M);
}

void cpu_fc_backward(backend *be, float *din, float *dw, float *dbias, const float *dout,
                     const float *in, const float *w, int B, int M, int N)
{
    fc_job j = {.din = din,
                .dw = dw,
                .dbias = dbias,
                .dout = dout,
                .in = in,
                .w = w,
                .B = B,
                .M = M,
                .N = N};
    int split = fc_split(be, &j, "fc_backward");
    j.dwb = split ? FC_DW_BLOCK : N;
    j.dinb = split ? FC_DIN_BLOCK : M;
    j.n_dw_tasks = cpu_ntasks((size_t)N, (size_t)j.dwb);
    j.ndinb = cpu_ntasks((size_t)M, (size_t)j.dinb);
    if (j.ngroups > 1) { /* tree levels beyond dw itself */
        cpu_ctx *c = cpu_ctx_of(be);
        j.level_n = (size_t)j.dwb * (M + 1);
        j.levels = cpu_scratch(be, &c->fc_scratch, &c->fc_scratch_n,
                               j.level_n * (FC_MAX_LEVELS - 1) * (size_t)c->threads);
    }
    int n_din = din ? j.ngroups * j.ndinb : 0;
    cpu_run(be, j.n_dw_tasks + n_din, fc_bwd_task, &j);
}
