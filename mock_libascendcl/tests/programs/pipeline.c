/*
 * pipeline.c - the seed's host/device pipeline comparison, on the mock's timing
 * model (mock README "Timing model").
 *
 * The same batches of float32 data go through "copy to the device, compute
 * (y = 2x + 1: a kernel launch, run by its host twin, with a declared cost), copy back"
 * twice:
 *
 *   naive      per batch: allocate the device buffers, synchronous copies of pageable
 *              host memory, launch, synchronize, copy back, free - everything waits;
 *   pipelined  device buffers and pinned host buffers allocated once, two streams,
 *              batch i on stream i % 2, asynchronous copies, one synchronization at
 *              the end: copies of one batch overlap the compute and copies of the
 *              other (separate H2D and D2H engines, a compute lane).
 *
 * Both results are checked. Under ASCEND_MOCK_TIMING=virtual the program prints the
 * modeled time of each variant (aclmockTimingNow: deterministic), under paced the wall
 * time too; under real (the default, as in the test suite) only correctness counts.
 *
 *   pipeline [--batches N] [--batch-kib K] [--kernel-us U] [--target X]
 *
 * prints "RESULT naive_model_us=... pipelined_model_us=... naive_wall_us=...
 * pipelined_wall_us=..." and, with --target, "PASS"/"FAIL" for speedup >= X in
 * modeled time (and in wall time when paced), exiting 1 on FAIL.
 * scripts/bench_pipeline.py builds and runs it in virtual and paced mode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_mock_kernel.h"

#define CHECK(expr)                                                                        \
    do {                                                                                   \
        aclError rc_ = (expr);                                                             \
        if (rc_ != ACL_SUCCESS) {                                                          \
            const char *m_ = aclGetRecentErrMsg();                                         \
            fprintf(stderr, "%s:%d: %s failed: %d %s\n", __FILE__, __LINE__, #expr, (int)rc_, \
                    m_ ? m_ : "");                                                         \
            exit(2);                                                                       \
        }                                                                                  \
    } while (0)

/* The kernel y = 2x + 1 and its host twin (acl/acl_mock_kernel.h): on a card the
 * same launch would run the device binary's "scale"; on the mock this function runs,
 * once per block, on the stream's worker. */
typedef struct scale_args {
    const float *in;
    float *out;
    uint64_t n;
} scale_args;

static int32_t scale(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData)
{
    const scale_args *a = args;
    uint64_t per = (a->n + blockDim - 1) / blockDim;
    for (uint64_t i = (uint64_t)blockIdx * per; i < a->n && i < (uint64_t)(blockIdx + 1) * per; i++) {
        a->out[i] = 2.0f * a->in[i] + 1.0f;
    }
    (void)userData;
    return 0;
}

/* Its modeled cost (the timing model asks when the launch is submitted): --kernel-us. */
static uint64_t g_kernel_ns;
static uint64_t scale_cost(const void *args, size_t size, uint32_t blockDim, void *userData)
{
    (void)args;
    (void)size;
    (void)blockDim;
    (void)userData;
    return g_kernel_ns;
}

static const aclmockKernelParam scale_params[] = {ACLMOCK_PTR_IN, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint64_t)};
static const aclmockKernelDesc scale_desc = {
    ACLMOCK_KERNEL_DESC_VERSION, ACLMOCK_KERNEL_BLOCKS_INDEPENDENT, "scale", scale, NULL, 3u, 0u, scale_params, 0u,
    scale_cost, {NULL, NULL, NULL, NULL}};
ACLMOCK_KERNEL_EXPORT(scale_desc);

#define SCALE_BLOCKS 8u
static aclrtFuncHandle g_scale;

static void launch_scale(void *din, void *dout, size_t bytes, aclrtStream s)
{
    uint64_t n = bytes / sizeof(float);
    void *arr[3] = {&din, &dout, &n};
    CHECK(aclrtLaunchKernelWithArgsArray(g_scale, SCALE_BLOCKS, s, NULL, arr));
}

static double wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int verify(float *const *out, float *const *in, int batches, size_t n)
{
    for (int b = 0; b < batches; b++) {
        for (size_t i = 0; i < n; i += 997) {
            if (out[b][i] != 2.0f * in[b][i] + 1.0f) {
                fprintf(stderr, "batch %d element %zu: %f, expected %f\n", b, i, out[b][i], 2.0f * in[b][i] + 1.0f);
                return 1;
            }
        }
    }
    return 0;
}

/* Everything waits: per batch allocate, copy (pageable, synchronous), compute,
 * synchronize, copy back, free. */
static void run_naive(float **in, float **out, int batches, size_t bytes)
{
    for (int b = 0; b < batches; b++) {
        void *din = NULL, *dout = NULL;
        CHECK(aclrtMalloc(&din, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&dout, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMemcpy(din, bytes, in[b], bytes, ACL_MEMCPY_HOST_TO_DEVICE));
        launch_scale(din, dout, bytes, NULL);
        CHECK(aclrtSynchronizeStream(NULL));
        CHECK(aclrtMemcpy(out[b], bytes, dout, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
        CHECK(aclrtFree(din));
        CHECK(aclrtFree(dout));
    }
}

/* Preallocated buffers, pinned host memory, two streams, asynchronous copies. */
static void run_pipelined(float **in, float **out, int batches, size_t bytes, aclrtStream s[2], void *din[2],
                          void *dout[2])
{
    for (int b = 0; b < batches; b++) {
        int k = b % 2; /* stream k owns buffers k: stream order makes their reuse safe */
        CHECK(aclrtMemcpyAsync(din[k], bytes, in[b], bytes, ACL_MEMCPY_HOST_TO_DEVICE, s[k]));
        launch_scale(din[k], dout[k], bytes, s[k]);
        CHECK(aclrtMemcpyAsync(out[b], bytes, dout[k], bytes, ACL_MEMCPY_DEVICE_TO_HOST, s[k]));
    }
    CHECK(aclrtSynchronizeStream(s[0]));
    CHECK(aclrtSynchronizeStream(s[1]));
}

int main(int argc, char **argv)
{
    int batches = 8;
    size_t kib = 256;
    double kernel_us = 50.0, target = 0.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--batches") == 0) {
            batches = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--batch-kib") == 0) {
            kib = (size_t)strtoull(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--kernel-us") == 0) {
            kernel_us = atof(argv[i + 1]);
        } else if (strcmp(argv[i], "--target") == 0) {
            target = atof(argv[i + 1]);
        } else {
            fprintf(stderr, "usage: %s [--batches N] [--batch-kib K] [--kernel-us U] [--target X]\n", argv[0]);
            return 2;
        }
    }
    if (batches < 2 || batches > 4096 || kib == 0 || kib > 1024 * 1024) {
        fprintf(stderr, "pipeline: --batches must be 2..4096 and --batch-kib 1..1048576\n");
        return 2;
    }
    size_t bytes = kib * 1024, n = bytes / sizeof(float);
    g_kernel_ns = (uint64_t)(kernel_us * 1000.0);

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtGetFuncBySymbol((const void *)scale, &g_scale)); /* the twin of this program */
    float **in = calloc((size_t)batches, sizeof *in), **out_naive = calloc((size_t)batches, sizeof *out_naive);
    float **in_pinned = calloc((size_t)batches, sizeof *in_pinned);
    float **out_pinned = calloc((size_t)batches, sizeof *out_pinned);
    if (in == NULL || out_naive == NULL || in_pinned == NULL || out_pinned == NULL) {
        return 2;
    }
    for (int b = 0; b < batches; b++) {
        in[b] = malloc(bytes);
        out_naive[b] = calloc(1, bytes);
        CHECK(aclrtMallocHost((void **)&in_pinned[b], bytes));
        CHECK(aclrtMallocHost((void **)&out_pinned[b], bytes));
        if (in[b] == NULL || out_naive[b] == NULL) {
            return 2;
        }
        for (size_t i = 0; i < n; i++) {
            in[b][i] = (float)((b * 131 + (int)i) % 1000) * 0.5f;
        }
        memcpy(in_pinned[b], in[b], bytes);
        memset(out_pinned[b], 0, bytes);
    }
    aclrtStream s[2];
    void *din[2], *dout[2];
    for (int k = 0; k < 2; k++) {
        CHECK(aclrtCreateStream(&s[k]));
        CHECK(aclrtMalloc(&din[k], bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&dout[k], bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    }
    CHECK(aclrtSynchronizeDevice());

    uint64_t m0 = aclmockTimingNow();
    double w0 = wall_us();
    run_naive(in, out_naive, batches, bytes);
    uint64_t m1 = aclmockTimingNow();
    double w1 = wall_us();
    run_pipelined(in_pinned, out_pinned, batches, bytes, s, din, dout);
    uint64_t m2 = aclmockTimingNow();
    double w2 = wall_us();

    int bad = verify(out_naive, in, batches, n) + verify(out_pinned, in, batches, n);
    aclmockTimingMode mode = aclmockTimingGetMode();
    double naive_model = (double)(m1 - m0) / 1e3, pipe_model = (double)(m2 - m1) / 1e3;
    printf("RESULT mode=%s batches=%d batch_kib=%zu kernel_us=%.1f naive_model_us=%.1f pipelined_model_us=%.1f "
           "naive_wall_us=%.1f pipelined_wall_us=%.1f\n",
           mode == ACLMOCK_TIMING_VIRTUAL ? "virtual" : mode == ACLMOCK_TIMING_PACED ? "paced" : "real", batches,
           kib, kernel_us, naive_model, pipe_model, w1 - w0, w2 - w1);

    for (int k = 0; k < 2; k++) {
        CHECK(aclrtFree(din[k]));
        CHECK(aclrtFree(dout[k]));
        CHECK(aclrtDestroyStream(s[k]));
    }
    for (int b = 0; b < batches; b++) {
        free(in[b]);
        free(out_naive[b]);
        CHECK(aclrtFreeHost(in_pinned[b]));
        CHECK(aclrtFreeHost(out_pinned[b]));
    }
    free(in);
    free(out_naive);
    free(in_pinned);
    free(out_pinned);
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    if (bad) {
        printf("FAIL: wrong results\n");
        return 1;
    }
    if (target > 0.0 && mode != ACLMOCK_TIMING_REAL) {
        double model_speedup = pipe_model > 0 ? naive_model / pipe_model : 0.0;
        double wall_speedup = (w2 - w1) > 0 ? (w1 - w0) / (w2 - w1) : 0.0;
        bool ok = model_speedup >= target && (mode != ACLMOCK_TIMING_PACED || wall_speedup >= target);
        char wall[64] = "";
        if (mode == ACLMOCK_TIMING_PACED) {
            snprintf(wall, sizeof wall, ", %.2fx in paced wall time", wall_speedup);
        }
        printf("%s: pipelined speedup %.2fx in modeled time%s (target >= %.1fx)\n", ok ? "PASS" : "FAIL",
               model_speedup, wall, target);
        return ok ? 0 : 1;
    }
    printf("results ok\n");
    return 0;
}
