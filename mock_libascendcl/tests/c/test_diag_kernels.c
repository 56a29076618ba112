/* test_diag_kernels.c - kernel launches (aclrtLaunchKernel*, host twins) as the
 * diagnostics see them (mock README "Timing model", "Profiling", "Dump", "Race
 * sanitizer"): their declared cost in the timing model (costNsPerBlock per wave of
 * blocks on the AI cores, costFn, the default kernel_ns), their name and kind in the
 * profile, their pointer arguments with the declared read/write modes checked by the
 * race sanitizer, and dumped as inputs/outputs by kernel name. The built-in random
 * number task is a checked kernel too; a kernel fault is in the device log. Each scenario runs in a child process (the
 * switches are read once per process). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_mock_kernel.h"
#include "mock_test.h"

#define N 256u /* floats per buffer */

/* ------------------------------------------------------------------ the twins */

typedef struct scale_args {
    const float *in;
    float *out;
    uint64_t n;
} scale_args;

/* out = 2 * in, 50 us per block, blocks independent */
ACLMOCK_KERNEL_WITH_COST(dk_scale, ACLMOCK_KERNEL_BLOCKS_INDEPENDENT, 50000u, ACLMOCK_PTR_IN, ACLMOCK_PTR_OUT,
                         ACLMOCK_VALUE(uint64_t))
{
    const scale_args *a = args;
    uint64_t per = (a->n + blockDim - 1) / blockDim;
    for (uint64_t i = blockIdx * per; i < a->n && i < (uint64_t)(blockIdx + 1) * per; i++) {
        a->out[i] = 2.0f * a->in[i];
    }
    (void)userData;
    return 0;
}

/* out = 2 * in over its n floats, with declared extents (n floats each): the dump and
 * the profile see exactly those bytes */
static const aclmockKernelExtent k_half_extents[] = {ACLMOCK_EXTENT_ELEMS(float, 2), ACLMOCK_EXTENT_ELEMS(float, 2),
                                                     ACLMOCK_EXTENT_NONE};
ACLMOCK_KERNEL_EXTENTS(dk_sized, 0, 0u, k_half_extents, ACLMOCK_PTR_IN, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint64_t))
{
    const scale_args *a = args;
    for (uint64_t i = blockIdx; i < a->n; i += blockDim) {
        a->out[i] = 2.0f * a->in[i];
    }
    (void)userData;
    return 0;
}

/* reads its buffer only, no declared cost */
ACLMOCK_KERNEL(dk_read, 0, ACLMOCK_PTR_IN)
{
    (void)args;
    (void)blockIdx;
    (void)blockDim;
    (void)userData;
    return 0;
}

/* fails in block 1 */
ACLMOCK_KERNEL(dk_fault, 0, ACLMOCK_VALUE(uint64_t))
{
    (void)args;
    (void)blockDim;
    (void)userData;
    return blockIdx == 1 ? 3 : 0;
}

static uint64_t cost_of(const void *args, size_t size, uint32_t blockDim, void *userData)
{
    (void)args;
    (void)userData;
    return size == 8 ? 1000u * blockDim + 7u : 1u;
}

static int32_t costed_twin(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData)
{
    (void)args;
    (void)blockIdx;
    (void)blockDim;
    (void)userData;
    return 0;
}

/* ------------------------------------------------------------------ helpers */

static aclrtStream g_s1, g_s2;
static float *g_in, *g_out;
static aclrtFuncHandle g_scale, g_read;

static void setup(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtCreateStream(&g_s1));
    CHECK_OK(aclrtCreateStream(&g_s2));
    CHECK_OK(aclrtMalloc((void **)&g_in, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc((void **)&g_out, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    float h[N];
    for (unsigned i = 0; i < N; i++) {
        h[i] = (float)i;
    }
    CHECK_OK(aclrtMemcpy(g_in, sizeof h, h, sizeof h, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtGetFuncBySymbol((const void *)dk_scale, &g_scale));
    CHECK_OK(aclrtGetFuncBySymbol((const void *)dk_read, &g_read));
}

static void teardown(void)
{
    CHECK_OK(aclrtFree(g_in));
    CHECK_OK(aclrtFree(g_out));
    CHECK_OK(aclrtDestroyStream(g_s1));
    CHECK_OK(aclrtDestroyStream(g_s2));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
}

static void launch_scale_to(uint32_t blocks, aclrtStream s, float *out)
{
    float *in = g_in;
    uint64_t n = N;
    void *arr[3] = {&in, &out, &n};
    CHECK_OK(aclrtLaunchKernelWithArgsArray(g_scale, blocks, s, NULL, arr));
}

static void launch_scale(uint32_t blocks, aclrtStream s)
{
    launch_scale_to(blocks, s, g_out);
}

static void launch_read(const void *p, aclrtStream s)
{
    void *arr[1] = {&p};
    CHECK_OK(aclrtLaunchKernelWithArgsArray(g_read, 1, s, NULL, arr));
}

static void launch_sized(uint64_t n, aclrtStream s)
{
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)dk_sized, &f));
    float *in = g_in, *out = g_out;
    void *arr[3] = {&in, &out, &n};
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 1, s, NULL, arr));
}

/* Modeled ns between two records around `launch` on g_s1. */
static uint64_t modeled(void (*launch)(void *), void *arg)
{
    aclrtEvent a, b;
    CHECK_OK(aclrtCreateEvent(&a));
    CHECK_OK(aclrtCreateEvent(&b));
    CHECK_OK(aclrtRecordEvent(a, g_s1));
    launch(arg);
    CHECK_OK(aclrtRecordEvent(b, g_s1));
    CHECK_OK(aclrtSynchronizeStream(g_s1));
    uint64_t ta = 0, tb = 0;
    CHECK_OK(aclrtEventGetTimestamp(a, &ta));
    CHECK_OK(aclrtEventGetTimestamp(b, &tb));
    CHECK_OK(aclrtDestroyEvent(a));
    CHECK_OK(aclrtDestroyEvent(b));
    return (tb - ta) * 1000u;
}

static void l_scale(void *blocks) { launch_scale((uint32_t)(uintptr_t)blocks, g_s1); }
static void l_read(void *p) { launch_read(p, g_s1); }
static void l_costed(void *f)
{
    uint64_t v = 1;
    void *arr[1] = {&v};
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 3, g_s1, NULL, arr));
}

static size_t slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        buf[0] = '\0';
        return 0;
    }
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n;
}

/* The newest "<root>/<prefix><pid>_*" folder. */
static void newest(const char *root, const char *prefix, char *out, size_t len)
{
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "ls -td '%s'/%s%ld_* 2>/dev/null | head -1", root, prefix, (long)getpid());
    FILE *p = popen(cmd, "r");
    out[0] = '\0';
    if (p != NULL) {
        if (fgets(out, (int)len, p) != NULL) {
            out[strcspn(out, "\n")] = '\0';
        }
        pclose(p);
    }
}

/* ------------------------------------------------------------------ timing */

/* Virtual time: a kernel lasts latency + its declared cost. costNsPerBlock counts
 * per wave of blocks on the device's AI cores (independent blocks); a costFn gets
 * the argument block and the block count; no cost: kernel_ns. The time between the
 * records also holds one launch of the host (the launch call). */
static void child_timing(void)
{
    mt_mock_env("ASCEND_MOCK_TIMING", "virtual", (const char *)NULL);
    setup();
    aclmockTimingModel m;
    CHECK_OK(aclmockTimingGetModel(&m));
    int64_t cores = 0;
    CHECK_OK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_AICORE_CORE_NUM, &cores));
    CHECK_GT(cores, 1);
    uint64_t gap = m.launchNs; /* record b is submitted one launch after the kernel */
    uint64_t one = modeled(l_scale, (void *)(uintptr_t)1);
    CHECK_EQ(one, (m.launchNs + m.latencyNs + 50000u + 0 * gap) / 1000 * 1000);
    uint64_t full = modeled(l_scale, (void *)(uintptr_t)cores); /* one wave */
    CHECK_EQ(full, one);
    uint64_t two = modeled(l_scale, (void *)(uintptr_t)(cores + 1)); /* two waves */
    CHECK_EQ(two, (m.launchNs + m.latencyNs + 100000u) / 1000 * 1000);
    uint64_t dflt = modeled(l_read, g_in);
    CHECK_EQ(dflt, (m.launchNs + m.latencyNs + m.kernelNs) / 1000 * 1000);

    aclmockKernelParam p = {8u, ACLMOCK_ACCESS_VALUE};
    aclmockKernelDesc d;
    memset(&d, 0, sizeof d);
    d.version = ACLMOCK_KERNEL_DESC_VERSION;
    d.name = "dk_costed";
    d.fn = costed_twin;
    d.numParams = 1;
    d.params = &p;
    d.costNsPerBlock = 999999u; /* the costFn overrides it */
    d.costFn = cost_of;
    CHECK_OK(aclmockRegisterKernelDesc(&d));
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)costed_twin, &f));
    uint64_t fn_cost = modeled(l_costed, f);
    CHECK_EQ(fn_cost, (m.launchNs + m.latencyNs + 3007u) / 1000 * 1000);
    CHECK_OK(aclmockUnregisterKernel("dk_costed"));

    /* the kernel ran: its output is right */
    float h[N];
    CHECK_OK(aclrtMemcpy(h, sizeof h, g_out, sizeof h, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(h[0] == 0.0f && h[N - 1] == 2.0f * (float)(N - 1));
    teardown();
}

/* Two kernels on two streams overlap on... one compute lane: they queue (the model has
 * computeLanes 1); a copy on another engine overlaps them. */
static void child_timing_lanes(void)
{
    mt_mock_env("ASCEND_MOCK_TIMING", "virtual", (const char *)NULL);
    setup();
    aclmockTimingModel m;
    CHECK_OK(aclmockTimingGetModel(&m));
    /* the second kernel writes its own buffer: the two really run at once on the
     * mock's workers, and one shared output would be a data race (TSAN) */
    float *out2 = NULL;
    CHECK_OK(aclrtMalloc((void **)&out2, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    uint64_t t0 = aclmockTimingNow();
    launch_scale(1, g_s1);
    launch_scale_to(1, g_s2, out2);
    uint64_t e1 = 0, e2 = 0;
    CHECK_OK(aclmockTimingStreamEnd(g_s1, &e1));
    CHECK_OK(aclmockTimingStreamEnd(g_s2, &e2));
    CHECK_EQ(e1, t0 + m.launchNs + m.latencyNs + 50000u);
    CHECK_EQ(e2, e1 + m.latencyNs + 50000u); /* queued behind the first on the one lane */
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_OK(aclrtFree(out2));
    teardown();
}

/* ------------------------------------------------------------------ profiler */

static void child_profile(void)
{
    char dir[256], folder[1024], path[1400];
    static char trace[1 << 16];
    CHECK_OK(mt_make_tmpdir(dir, sizeof dir, "dkprof"));
    mt_mock_env("ASCEND_MOCK_TIMING", "virtual", (const char *)NULL);
    setup();
    CHECK_OK(aclmockProfStart(dir, ACLMOCK_PROF_ALL_DEVICES, 0));
    launch_scale(2, g_s1);
    launch_sized(N / 2, g_s1); /* declared extents: N / 2 floats in and out */
    CHECK_OK(aclrtSynchronizeStream(g_s1));
    CHECK_OK(aclmockProfStop(folder, sizeof folder));
    snprintf(path, sizeof path, "%s/trace.json", folder);
    CHECK_GT(slurp(path, trace, sizeof trace), 0);
    CHECK_STR_CONTAINS(trace, "\"name\":\"dk_scale\"");
    const char *sized = strstr(trace, "\"name\":\"dk_sized\"");
    CHECK(sized != NULL);
    if (sized != NULL) {
        char want[64];
        snprintf(want, sizeof want, "\"bytes\":%u", (unsigned)(N * sizeof(float)));
        const char *b = strstr(sized, "\"bytes\":");
        CHECK(b != NULL && strncmp(b, want, strlen(want)) == 0);
    }
    CHECK_STR_CONTAINS(trace, "\"cat\":\"kernel\"");
    snprintf(path, sizeof path, "%s/kind_summary.csv", folder);
    CHECK_GT(slurp(path, trace, sizeof trace), 0);
    CHECK_STR_CONTAINS(trace, "kernel,2,");
    teardown();
    mt_remove_tree(dir);
}

/* ------------------------------------------------------------------ sanitizer */

static uint64_t reports(void)
{
    return aclmockSanitizerGetReportCount();
}

static void child_sanitizer(void)
{
    mt_mock_env("ASCEND_MOCK_SANITIZE", "1", (const char *)NULL);
    setup();
    CHECK_EQ(aclmockSanitizerGetMode(), 1);
    CHECK_OK(aclrtSynchronizeDevice());
    aclmockSanitizerClearReports();

    /* a kernel writes g_out on s1, another reads it on s2 with no ordering: a race
     * naming both kernels and streams */
    launch_scale(2, g_s1);
    launch_read(g_out, g_s2);
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_EQ(reports(), 1);
    aclmockSanitizerReport r;
    if (aclmockSanitizerGetReports(&r, 1, 0) == 1) {
        CHECK_EQ(r.kind, ACLMOCK_SANITIZER_RACE);
        CHECK_STR_EQ(r.current.name, "dk_read");
        CHECK_STR_EQ(r.previous.name, "dk_scale");
        CHECK_EQ(r.current.access, ACLMOCK_ACCESS_READ);
        CHECK_EQ(r.previous.access, ACLMOCK_ACCESS_WRITE);
        CHECK_EQ(r.address, (uint64_t)(uintptr_t)g_out);
        CHECK(r.current.stream == g_s2 && r.previous.stream == g_s1);
    }
    aclmockSanitizerClearReports();

    /* ordered by an event: no report */
    aclrtEvent e;
    CHECK_OK(aclrtCreateEvent(&e));
    launch_scale(2, g_s1);
    CHECK_OK(aclrtRecordEvent(e, g_s1));
    CHECK_OK(aclrtStreamWaitEvent(g_s2, e));
    launch_read(g_out, g_s2);
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_EQ(reports(), 0);

    /* two kernels reading the same input on two streams: no report */
    launch_read(g_in, g_s1);
    launch_read(g_in, g_s2);
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_EQ(reports(), 0);

    /* a kernel reading what a copy on another stream writes: a race */
    float h[N] = {0};
    void *pinned = NULL;
    CHECK_OK(aclrtMallocHost(&pinned, sizeof h));
    CHECK_OK(aclrtMemcpyAsync(g_in, sizeof h, pinned, sizeof h, ACL_MEMCPY_HOST_TO_DEVICE, g_s2));
    launch_scale(1, g_s1);
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_EQ(reports(), 1);
    if (aclmockSanitizerGetReports(&r, 1, 0) == 1) {
        CHECK_STR_EQ(r.current.name, "dk_scale");
        CHECK_STR_EQ(r.previous.name, "aclrtMemcpyAsync");
    }
    aclmockSanitizerClearReports();

    /* freeing a buffer a queued kernel still reads: use after free */
    aclrtEvent gate;
    CHECK_OK(aclrtCreateEvent(&gate));
    float *tmp = NULL;
    CHECK_OK(aclrtMalloc((void **)&tmp, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    launch_read(tmp, g_s1);
    CHECK_OK(aclrtFree(tmp));
    /* the kernel ran before the free, or after it and faulted reading freed memory */
    aclError freed_rc = aclrtSynchronizeDevice();
    CHECK(freed_rc == ACL_SUCCESS || freed_rc == ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK_GE(reports(), 1);
    if (aclmockSanitizerGetReports(&r, 1, 0) == 1) {
        CHECK_EQ(r.kind, ACLMOCK_SANITIZER_USE_AFTER_FREE);
        CHECK_STR_EQ(r.previous.name, "dk_read");
    }
    aclmockSanitizerClearReports();

    /* the built-in random numbers write their result: a race with a kernel reading it */
    uint64_t *counter = NULL;
    CHECK_OK(aclrtMalloc((void **)&counter, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(counter, 64, 0, 64));
    aclrtRandomNumTaskInfo ti;
    memset(&ti, 0, sizeof ti);
    ti.dataType = ACL_FLOAT;
    ti.randomNumFuncParaInfo.funcType = ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS;
    float lo = 0.0f, hi = 1.0f;
    uint64_t seed = 1, num = N;
    ti.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min.size = 4;
    memcpy(ti.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min.valueOrAddr, &lo, 4);
    ti.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max.size = 4;
    memcpy(ti.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max.valueOrAddr, &hi, 4);
    ti.randomSeed.size = 8;
    memcpy(ti.randomSeed.valueOrAddr, &seed, 8);
    ti.randomNum.size = 8;
    memcpy(ti.randomNum.valueOrAddr, &num, 8);
    ti.randomResultAddr = g_out;
    ti.randomCounterAddr = counter;
    CHECK_OK(aclrtRandomNumAsync(&ti, g_s1, NULL));
    launch_read(g_out, g_s2);
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_EQ(reports(), 1);
    if (aclmockSanitizerGetReports(&r, 1, 0) == 1) {
        CHECK_STR_EQ(r.previous.name, "aclrtRandomNumAsync");
        CHECK_STR_EQ(r.current.name, "dk_read");
    }
    aclmockSanitizerClearReports();
    CHECK_OK(aclrtFree(counter));
    CHECK_OK(aclrtFreeHost(pinned));
    CHECK_OK(aclrtDestroyEvent(e));
    CHECK_OK(aclrtDestroyEvent(gate));
    teardown();
}

/* ------------------------------------------------------------------ dump */

static void child_dump(void)
{
    char dir[256], cfg[400], folder[1024], path[1400];
    static char index[1 << 16];
    CHECK_OK(mt_make_tmpdir(dir, sizeof dir, "dkdump"));
    mt_mock_env((const char *)NULL);
    setup();
    snprintf(cfg, sizeof cfg, "%s/dump.json", dir);
    FILE *f = fopen(cfg, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fprintf(f, "{\"dump\": {\"dump_path\": \"%s/out\", \"dump_mode\": \"all\", "
                   "\"dump_list\": [{\"model_name\": \"m\", \"layer\": [\"dk_scale\", \"dk_sized\"]}]}}",
                dir);
        fclose(f);
    }
    CHECK_OK(aclmdlInitDump());
    CHECK_OK(aclmdlSetDump(cfg));
    launch_scale(2, g_s1);
    launch_read(g_in, g_s1); /* not in the layer list */
    /* ... unless the launch asks for it (ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP,
     * acl_next_semantics.md §1.5: 1 = dump this task) */
    aclrtLaunchKernelAttr attr;
    memset(&attr, 0, sizeof attr);
    attr.id = ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP;
    attr.value.isDataDump = 1;
    aclrtLaunchKernelCfg kcfg = {&attr, 1};
    const void *p = g_out;
    void *arr[1] = {&p};
    CHECK_OK(aclrtLaunchKernelWithArgsArray(g_read, 1, g_s1, &kcfg, arr));
    CHECK_OK(aclrtSynchronizeStream(g_s1));
    snprintf(path, sizeof path, "%s/out", dir);
    newest(path, "mock_dump_", folder, sizeof folder);
    CHECK(folder[0] != '\0');
    snprintf(path, sizeof path, "%s/index.json", folder);
    CHECK_GT(slurp(path, index, sizeof index), 0);
    CHECK_STR_CONTAINS(index, "\"op\": \"dk_scale\"");
    CHECK_STR_CONTAINS(index, "\"io\": \"input\"");
    CHECK_STR_CONTAINS(index, "\"io\": \"output\"");
    const char *forced = strstr(index, "\"op\": \"dk_read\"");
    CHECK(forced != NULL);                                      /* the one with DATA_DUMP */
    CHECK(forced == NULL || strstr(forced + 1, "\"op\": \"dk_read\"") == NULL); /* only it */
    /* the output file holds 2 * in (the first N floats of the allocation's rest) */
    const char *o = strstr(index, "\"io\": \"output\"");
    const char *fl = o != NULL ? strstr(o, "\"file\": \"") : NULL;
    char rel[256];
    if (fl != NULL && sscanf(fl, "\"file\": \"%255[^\"]\"", rel) == 1) {
        CHECK_STR_CONTAINS(rel, "_dk_scale.output.0.npy");
        snprintf(path, sizeof path, "%s/%s", folder, rel);
        static char npy[1 << 16];
        size_t n = slurp(path, npy, sizeof npy);
        CHECK_GT(n, 10);
        if (n > 10) {
            size_t hlen = (unsigned char)npy[8] | ((size_t)(unsigned char)npy[9] << 8);
            CHECK_GE(n, 10 + hlen + N * sizeof(float));
            if (n >= 10 + hlen + N * sizeof(float)) {
                float v[N];
                memcpy(v, npy + 10 + hlen, sizeof v);
                CHECK(v[1] == 2.0f && v[N - 1] == 2.0f * (float)(N - 1));
            }
        }
    } else {
        CHECK(!"no output file in the index");
    }
    /* declared extents: the output is dumped over exactly its N / 2 floats */
    launch_sized(N / 2, g_s1);
    CHECK_OK(aclrtSynchronizeStream(g_s1));
    snprintf(path, sizeof path, "%s/out", dir);
    newest(path, "mock_dump_", folder, sizeof folder);
    snprintf(path, sizeof path, "%s/index.json", folder);
    CHECK_GT(slurp(path, index, sizeof index), 0);
    const char *so = strstr(index, "_dk_sized.output.0.npy");
    CHECK(so != NULL);
    if (so != NULL) {
        const char *start = so;
        while (start > index && start[-1] != '"') {
            start--;
        }
        char rel2[256];
        snprintf(rel2, sizeof rel2, "%.*s", (int)(so - start) + (int)strlen("_dk_sized.output.0.npy"), start);
        snprintf(path, sizeof path, "%s/%s", folder, rel2);
        static char npy2[1 << 16];
        size_t n2 = slurp(path, npy2, sizeof npy2);
        CHECK_GT(n2, 10);
        if (n2 > 10) {
            size_t hlen = (unsigned char)npy2[8] | ((size_t)(unsigned char)npy2[9] << 8);
            CHECK_EQ(n2, 10 + hlen + (N / 2) * sizeof(float));
        }
    }
    CHECK_OK(aclmdlFinalizeDump());
    teardown();
    mt_remove_tree(dir);
}

/* ------------------------------------------------------------------ device log */

/* A kernel fault is in the device log with its task, stream and what went wrong. */
static void child_devlog(void)
{
    mt_mock_env((const char *)NULL);
    setup();
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)dk_fault, &f));
    uint64_t v = 0;
    void *arr[1] = {&v};
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 2, g_s1, NULL, arr));
    CHECK_EQ(aclrtSynchronizeStream(g_s1), ACL_ERROR_RT_AICORE_EXCEPTION);
    static char log[1 << 16];
    CHECK_GT(aclmockGetDeviceLog(0, log, sizeof log), 0);
    CHECK_STR_CONTAINS(log, "failed: kernel 'dk_fault' faulted in block 1: its twin returned 3 (error 507015)");
    CHECK_STR_CONTAINS(log, "[device 0]");
    teardown();
}

/* ------------------------------------------------------------------ graphs */

/* While the profiler and the sanitizer observe: a kernel launched on a capturing stream
 * is recorded, not observed (no kernel record, nothing checked); the model run is one
 * task of the stream that runs it, and the kernel it replays computes (mock README
 * "Race sanitizer", limits). */
static void child_graph(void)
{
    char dir[256], folder[1024], path[1400];
    static char text[1 << 16];
    CHECK_OK(mt_make_tmpdir(dir, sizeof dir, "dkgraph"));
    mt_mock_env("ASCEND_MOCK_TIMING", "virtual", "ASCEND_MOCK_SANITIZE", "1", (const char *)NULL);
    setup();
    CHECK_OK(aclrtMemset(g_out, N * sizeof(float), 0, N * sizeof(float)));
    CHECK_OK(aclmockProfStart(dir, ACLMOCK_PROF_ALL_DEVICES, 0));
    aclmockSanitizerClearReports();
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureBegin(g_s1, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    launch_scale(2, g_s1);
    CHECK_OK(aclmdlRICaptureEnd(g_s1, &ri));
    CHECK_OK(aclrtSynchronizeStream(g_s1));
    float h[N];
    CHECK_OK(aclrtMemcpy(h, sizeof h, g_out, sizeof h, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(h[N - 1] == 0.0f); /* captured, not run */
    CHECK_OK(aclmdlRIExecuteAsync(ri, g_s2));
    CHECK_OK(aclmdlRIExecuteAsync(ri, g_s2));
    CHECK_OK(aclrtSynchronizeStream(g_s2));
    CHECK_OK(aclrtMemcpy(h, sizeof h, g_out, sizeof h, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(h[N - 1] == 2.0f * (float)(N - 1)); /* replayed */
    CHECK_EQ(aclmockSanitizerGetReportCount(), 0);
    CHECK_OK(aclmockProfStop(folder, sizeof folder));
    snprintf(path, sizeof path, "%s/trace.json", folder);
    CHECK_GT(slurp(path, text, sizeof text), 0);
    CHECK(strstr(text, "\"name\":\"dk_scale\"") == NULL);
    snprintf(path, sizeof path, "%s/kind_summary.csv", folder);
    CHECK_GT(slurp(path, text, sizeof text), 0);
    CHECK(strstr(text, "kernel,") == NULL);
    CHECK_OK(aclmdlRIDestroy(ri));
    teardown();
    mt_remove_tree(dir);
}

/* ------------------------------------------------------------------ main */

static void test_timing(void) { CHECK_EQ(mt_run_child_fn(child_timing), 0); }
static void test_timing_lanes(void) { CHECK_EQ(mt_run_child_fn(child_timing_lanes), 0); }
static void test_profile(void) { CHECK_EQ(mt_run_child_fn(child_profile), 0); }
static void test_sanitizer(void) { CHECK_EQ(mt_run_child_fn(child_sanitizer), 0); }
static void test_dump(void) { CHECK_EQ(mt_run_child_fn(child_dump), 0); }
static void test_devlog(void) { CHECK_EQ(mt_run_child_fn(child_devlog), 0); }
static void test_graph(void) { CHECK_EQ(mt_run_child_fn(child_graph), 0); }

int main(void)
{
    RUN_TEST(test_timing);
    RUN_TEST(test_timing_lanes);
    RUN_TEST(test_profile);
    RUN_TEST(test_sanitizer);
    RUN_TEST(test_dump);
    RUN_TEST(test_devlog);
    RUN_TEST(test_graph);
    return TEST_REPORT();
}
