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
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>

#include "cpu/internal.h"

#define FC_OUT_BLOCK 128 /* forward: columns of out per task */
#define FC_DW_BLOCK 64   /* backward: rows of dw per task */
#define FC_DIN_BLOCK 256 /* backward: columns of din per task */
/* below this many multiply-adds a layer is not worth splitting */
#define FC_SPLIT_MIN (1L << 18)

typedef struct fc_job {
    float *out, *din, *dw, *dbias;
    const float *in, *w, *bias, *dout;
    int B, M, N;
    int ob, dwb, dinb; /* block sizes */
    int n_dw_tasks;
} fc_job;

static void fc_fwd_task(void *arg, int t, int thread)
{
    (void)thread;
    fc_job *j = arg;
    int n0 = t * j->ob, nb = n0 + j->ob < j->N ? j->ob : j->N - n0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->B, nb, j->M, 1.0f, j->in, j->M,
                j->w + (size_t)n0 * j->M, j->M, 0.0f, j->out + n0, j->N);
    for (int b = 0; b < j->B; b++)
        cpu_vadd(j->out + (size_t)b * j->N + n0, j->bias + n0, (size_t)nb);
}

void cpu_fc_forward(backend *be, float *out, const float *in, const float *w, const float *bias,
                    int B, int M, int N)
{
    fc_job j = {.out = out, .in = in, .w = w, .bias = bias, .B = B, .M = M, .N = N};
    int split = (long)B * M * N >= FC_SPLIT_MIN;
    j.ob = split ? FC_OUT_BLOCK : N;
    cpu_run(be, cpu_ntasks((size_t)N, (size_t)j.ob), fc_fwd_task, &j);
}

static void fc_bwd_task(void *arg, int t, int thread)
{
    (void)thread;
    fc_job *j = arg;
    if (t < j->n_dw_tasks) {
        int n0 = t * j->dwb, nb = n0 + j->dwb < j->N ? j->dwb : j->N - n0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nb, j->M, j->B, 1.0f, j->dout + n0,
                    j->N, j->in, j->M, 0.0f, j->dw + (size_t)n0 * j->M, j->M);
        cpu_vfill(j->dbias + n0, 0.0f, (size_t)nb); /* sums in sample order */
        for (int b = 0; b < j->B; b++)
            cpu_vadd(j->dbias + n0, j->dout + (size_t)b * j->N + n0, (size_t)nb);
        return;
    }
    t -= j->n_dw_tasks;
    int m0 = t * j->dinb, mb = m0 + j->dinb < j->M ? j->dinb : j->M - m0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, j->B, mb, j->N, 1.0f, j->dout, j->N,
                j->w + m0, j->M, 0.0f, j->din + m0, j->M);
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
    int split = (long)B * M * N >= FC_SPLIT_MIN;
    j.dwb = split ? FC_DW_BLOCK : N;
    j.dinb = split ? FC_DIN_BLOCK : M;
    j.n_dw_tasks = cpu_ntasks((size_t)N, (size_t)j.dwb);
    int n_din = din ? cpu_ntasks((size_t)M, (size_t)j.dinb) : 0;
    cpu_run(be, j.n_dw_tasks + n_din, fc_bwd_task, &j);
}
