/* test_timing.c - the timing model (mock README "Timing model"): modeled durations by
 * link and engine, overlap of streams on separate engines and queueing on a shared
 * one, cross-stream event waits (queued or already complete) propagating virtual
 * time, host time (launches, synchronous copies, allocations, synchronizations),
 * host callbacks taking their real time, event timestamps and elapsed times from
 * the model, determinism across runs, and the switches (ASCEND_MOCK_TIMING,
 * ASCEND_MOCK_TIMING_MODEL) with their fallbacks. Every scenario runs in a child
 * process: the mode is read once per process. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

#define N_BYTES ((size_t)24 * 1000 * 1000) /* 1 ms over a 24 GB/s link */

static aclmockTimingModel g_m;

/* Modeled duration of a copy of n bytes over a link of `gbps` (latency + bytes / bw). */
static uint64_t copy_ns(size_t n, double gbps)
{
    return g_m.latencyNs + (uint64_t)((double)n / gbps);
}

static uint64_t ts_ns(aclrtEvent e)
{
    uint64_t us = 0;
    CHECK_OK(aclrtEventGetTimestamp(e, &us));
    return us * 1000u;
}

static void setup(int device)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(device));
    CHECK_OK(aclmockTimingGetModel(&g_m));
}

static void teardown(int device)
{
    CHECK_OK(aclrtResetDevice(device));
    CHECK_OK(aclFinalize());
}

/* ----------------------------------------------------------------- scenarios */

/* One stream: record, copy, record; the events carry modeled timestamps and the
 * elapsed time is exactly the copy plus one launch (the host's second call). */
static void scenario_single_copy(void)
{
    aclrtStream s;
    void *d, *h;
    aclrtEvent a, b;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtMalloc(&d, N_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&h, N_BYTES));
    CHECK_OK(aclrtCreateEvent(&a));
    CHECK_OK(aclrtCreateEvent(&b));
    uint64_t t0 = aclmockTimingNow();
    CHECK_OK(aclrtRecordEvent(a, s));
    CHECK_OK(aclrtMemcpyAsync(d, N_BYTES, h, N_BYTES, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK_OK(aclrtRecordEvent(b, s));
    CHECK_EQ(aclmockTimingNow(), t0 + 3 * g_m.launchNs); /* three asynchronous calls */
    CHECK_OK(aclrtSynchronizeStream(s));
    uint64_t dur = copy_ns(N_BYTES, g_m.h2dGBps);
    CHECK_EQ(ts_ns(a), (t0 + g_m.launchNs) / 1000 * 1000);
    uint64_t end = t0 + 2 * g_m.launchNs + dur;
    CHECK_EQ(ts_ns(b), end / 1000 * 1000);
    float ms = 0;
    CHECK_OK(aclrtEventElapsedTime(&ms, a, b));
    CHECK(ms > (float)(g_m.launchNs + dur) / 1e6f * 0.999f && ms < (float)(g_m.launchNs + dur) / 1e6f * 1.001f);
    /* the host waited for the copy: its time is the copy's end plus the sync cost */
    CHECK_EQ(aclmockTimingNow(), end + g_m.syncNs);
    uint64_t se = 0;
    CHECK_OK(aclmockTimingStreamEnd(s, &se));
    CHECK_EQ(se, end);
    CHECK_OK(aclrtDestroyEvent(a));
    CHECK_OK(aclrtDestroyEvent(b));
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFreeHost(h));
    CHECK_OK(aclrtDestroyStream(s));
}

/* Two streams: an H2D and a D2H copy overlap (separate engines); two H2D copies queue
 * on the one H2D engine. */
static void scenario_engines(void)
{
    aclrtStream s1, s2;
    void *d1, *d2, *h1, *h2;
    aclrtEvent e1, e2;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtMalloc(&d1, N_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&d2, N_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&h1, N_BYTES));
    CHECK_OK(aclrtMallocHost(&h2, N_BYTES));
    CHECK_OK(aclrtCreateEvent(&e1));
    CHECK_OK(aclrtCreateEvent(&e2));

    uint64_t t0 = aclmockTimingNow();
    CHECK_OK(aclrtMemcpyAsync(d1, N_BYTES, h1, N_BYTES, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK_OK(aclrtMemcpyAsync(h2, N_BYTES, d2, N_BYTES, ACL_MEMCPY_DEVICE_TO_HOST, s2));
    CHECK_OK(aclrtRecordEvent(e1, s1));
    CHECK_OK(aclrtRecordEvent(e2, s2));
    CHECK_OK(aclrtSynchronizeDevice());
    uint64_t h2d = copy_ns(N_BYTES, g_m.h2dGBps), d2h = copy_ns(N_BYTES, g_m.d2hGBps);
    CHECK_EQ(ts_ns(e1), (t0 + g_m.launchNs + h2d) / 1000 * 1000);
    CHECK_EQ(ts_ns(e2), (t0 + 2 * g_m.launchNs + d2h) / 1000 * 1000); /* overlapped */

    uint64_t t1 = aclmockTimingNow();
    CHECK_OK(aclrtMemcpyAsync(d1, N_BYTES, h1, N_BYTES, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK_OK(aclrtMemcpyAsync(d2, N_BYTES, h2, N_BYTES, ACL_MEMCPY_HOST_TO_DEVICE, s2));
    CHECK_OK(aclrtRecordEvent(e1, s1));
    CHECK_OK(aclrtRecordEvent(e2, s2));
    CHECK_OK(aclrtSynchronizeDevice());
    uint64_t first_end = t1 + g_m.launchNs + h2d;
    CHECK_EQ(ts_ns(e1), first_end / 1000 * 1000);
    CHECK_EQ(ts_ns(e2), (first_end + h2d) / 1000 * 1000); /* queued behind the first */

    CHECK_OK(aclrtDestroyEvent(e1));
    CHECK_OK(aclrtDestroyEvent(e2));
    CHECK_OK(aclrtFree(d1));
    CHECK_OK(aclrtFree(d2));
    CHECK_OK(aclrtFreeHost(h1));
    CHECK_OK(aclrtFreeHost(h2));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
}

static atomic_int g_release;

static void wait_for_release(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_release)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void launch(const char *name, uint64_t cost, void *buf, size_t n, uint32_t access, aclrtStream s)
{
    aclmockOpArg arg = {buf, n, access, ACL_UINT8, 0, {0}};
    aclmockOpDesc op = {name, cost, &arg, 1, NULL, NULL};
    CHECK_OK(aclmockLaunchOp(&op, s));
}

/* A stream waiting for an event recorded after a long kernel on another stream starts
 * after that kernel - whether the wait is queued (the record has not run yet) or the
 * record already completed in real time (virtual kernels take no real time). */
static void scenario_cross_stream(void)
{
    aclrtStream s1, s2;
    aclrtEvent ev, after;
    void *buf;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateEvent(&ev));
    CHECK_OK(aclrtCreateEvent(&after));
    CHECK_OK(aclrtMalloc(&buf, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    const uint64_t cost = 1000000; /* 1 ms */

    /* the record completes (in real time) before the wait is submitted */
    uint64_t t0 = aclmockTimingNow();
    launch("long", cost, buf, 4096, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    /* 20 ms of real time, and no ACL call (the host's modeled time stays): the virtual
     * kernel and the record have run by then, so the wait below queues nothing */
    struct timespec pause = {0, 20000000};
    nanosleep(&pause, NULL);
    uint64_t kernel_end = t0 + g_m.launchNs + g_m.latencyNs + cost;
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    CHECK_OK(aclrtRecordEvent(after, s2));
    CHECK_OK(aclrtSynchronizeStream(s2));
    CHECK_EQ(ts_ns(ev), kernel_end / 1000 * 1000);
    CHECK_EQ(ts_ns(after), kernel_end / 1000 * 1000);

    /* the record waits behind a host function, so the wait is queued and deferred */
    atomic_store(&g_release, 0);
    CHECK_OK(aclrtLaunchHostFunc(s1, wait_for_release, NULL));
    uint64_t t1 = aclmockTimingNow();
    launch("long", cost, buf, 4096, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    CHECK_OK(aclrtRecordEvent(after, s2));
    atomic_store(&g_release, 1);
    CHECK_OK(aclrtSynchronizeStream(s2));
    CHECK_OK(aclrtSynchronizeStream(s1));
    /* the kernel starts once the host function returned (its real time) */
    CHECK_GE(ts_ns(ev), (t1 + g_m.launchNs + g_m.latencyNs + cost) / 1000 * 1000);
    CHECK_EQ(ts_ns(after), ts_ns(ev));

    CHECK_OK(aclrtFree(buf));
    CHECK_OK(aclrtDestroyEvent(ev));
    CHECK_OK(aclrtDestroyEvent(after));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
}

static void sleep_30ms(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 30000000};
    nanosleep(&ts, NULL);
}

/* A host callback takes its real time; what follows it on the stream is scheduled
 * when it returns. */
static void scenario_host_callback(void)
{
    aclrtStream s;
    aclrtEvent a, b;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateEvent(&a));
    CHECK_OK(aclrtCreateEvent(&b));
    CHECK_OK(aclrtRecordEvent(a, s));
    CHECK_OK(aclrtLaunchHostFunc(s, sleep_30ms, NULL));
    CHECK_OK(aclrtRecordEvent(b, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_GE(ts_ns(b) - ts_ns(a), 30000000u);
    CHECK_GE(aclmockTimingNow(), ts_ns(b));
    CHECK_OK(aclrtDestroyEvent(a));
    CHECK_OK(aclrtDestroyEvent(b));
    CHECK_OK(aclrtDestroyStream(s));
}

/* Kernels: their declared cost (or the default) on the device's one compute lane. */
static void scenario_kernels(void)
{
    aclrtStream s1, s2;
    aclrtEvent e1, e2;
    void *b1, *b2;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateEvent(&e1));
    CHECK_OK(aclrtCreateEvent(&e2));
    CHECK_OK(aclrtMalloc(&b1, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&b2, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    uint64_t t0 = aclmockTimingNow();
    launch("k1", 500000, b1, 64, ACLMOCK_ACCESS_WRITE, s1);
    launch("k2", 0, b2, 64, ACLMOCK_ACCESS_WRITE, s2); /* the model's default cost */
    CHECK_OK(aclrtRecordEvent(e1, s1));
    CHECK_OK(aclrtRecordEvent(e2, s2));
    CHECK_OK(aclrtSynchronizeDevice());
    uint64_t k1_end = t0 + g_m.launchNs + g_m.latencyNs + 500000;
    CHECK_EQ(ts_ns(e1), k1_end / 1000 * 1000);
    CHECK_EQ(ts_ns(e2), (k1_end + g_m.latencyNs + g_m.kernelNs) / 1000 * 1000); /* one lane */
    CHECK_OK(aclrtFree(b1));
    CHECK_OK(aclrtFree(b2));
    CHECK_OK(aclrtDestroyEvent(e1));
    CHECK_OK(aclrtDestroyEvent(e2));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
}

/* Host time: allocations, frees and synchronous copies (pageable: the slower link). */
static void scenario_host_time(void)
{
    uint64_t t0 = aclmockTimingNow();
    void *d = NULL;
    CHECK_OK(aclrtMalloc(&d, N_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(aclmockTimingNow(), t0 + g_m.mallocNs);
    char *h = malloc(N_BYTES);
    CHECK(h != NULL);
    memset(h, 1, N_BYTES);
    uint64_t t1 = aclmockTimingNow();
    CHECK_OK(aclrtMemcpy(d, N_BYTES, h, N_BYTES, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_EQ(aclmockTimingNow(), t1 + copy_ns(N_BYTES, g_m.pageableGBps) + g_m.syncNs);
    uint64_t t2 = aclmockTimingNow();
    CHECK_OK(aclrtFree(d));
    CHECK_EQ(aclmockTimingNow(), t2 + g_m.freeNs);
    free(h);
}

/* ------------------------------------------------------------- the children */

static void child_virtual(void)
{
    mt_mock_env("ASCEND_MOCK_TIMING", "virtual", (const char *)NULL);
    setup(0);
    CHECK_EQ(aclmockTimingGetMode(), ACLMOCK_TIMING_VIRTUAL);
    /* the Atlas A2 figures of the model (README "Timing model") */
    CHECK(g_m.h2dGBps == 24.0 && g_m.pageableGBps == 8.0 && g_m.hbmGBps == 1600.0);
    CHECK_EQ(g_m.latencyNs, 2000);
    CHECK_EQ(g_m.computeLanes, 1);
    RUN_TEST(scenario_single_copy);
    RUN_TEST(scenario_engines);
    RUN_TEST(scenario_cross_stream);
    RUN_TEST(scenario_host_callback);
    RUN_TEST(scenario_kernels);
    RUN_TEST(scenario_host_time);
    teardown(0);
}

/* The same program twice: the same modeled timestamps (written to fd). */
static int g_out_fd = -1;

static void child_deterministic(void)
{
    mt_mock_env("ASCEND_MOCK_TIMING", "virtual", (const char *)NULL);
    setup(1);
    aclrtStream s[2];
    aclrtEvent ev[8];
    void *d[2], *h[2];
    for (int k = 0; k < 2; k++) {
        CHECK_OK(aclrtCreateStream(&s[k]));
        CHECK_OK(aclrtMalloc(&d[k], 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK_OK(aclrtMallocHost(&h[k], 1 << 20));
    }
    for (int i = 0; i < 8; i++) {
        CHECK_OK(aclrtCreateEvent(&ev[i]));
    }
    for (int i = 0; i < 8; i++) { /* a small two-stream pipeline */
        int k = i % 2;
        CHECK_OK(aclrtMemcpyAsync(d[k], 1 << 20, h[k], 1 << 20, ACL_MEMCPY_HOST_TO_DEVICE, s[k]));
        launch("step", 40000 + (uint64_t)i * 1000, d[k], 1 << 20, ACLMOCK_ACCESS_READ_WRITE, s[k]);
        CHECK_OK(aclrtMemcpyAsync(h[k], 1 << 20, d[k], 1 << 20, ACL_MEMCPY_DEVICE_TO_HOST, s[k]));
        CHECK_OK(aclrtRecordEvent(ev[i], s[k]));
        if (i == 4) {
            CHECK_OK(aclrtStreamWaitEvent(s[1], ev[3]));
        }
    }
    CHECK_OK(aclrtSynchronizeDevice());
    char line[512];
    size_t used = 0;
    for (int i = 0; i < 8; i++) {
        used += (size_t)snprintf(line + used, sizeof line - used, "%llu ", (unsigned long long)ts_ns(ev[i]));
    }
    used += (size_t)snprintf(line + used, sizeof line - used, "%llu\n", (unsigned long long)aclmockTimingNow());
    CHECK_EQ(write(g_out_fd, line, used), (ssize_t)used);
    for (int i = 0; i < 8; i++) {
        CHECK_OK(aclrtDestroyEvent(ev[i]));
    }
    for (int k = 0; k < 2; k++) {
        CHECK_OK(aclrtFree(d[k]));
        CHECK_OK(aclrtFreeHost(h[k]));
        CHECK_OK(aclrtDestroyStream(s[k]));
    }
    teardown(1);
}

static void read_all(int fd, char *buf, size_t len)
{
    size_t got = 0;
    ssize_t r;
    while (got + 1 < len && (r = read(fd, buf + got, len - 1 - got)) > 0) {
        got += (size_t)r;
    }
    buf[got] = '\0';
}

static void test_deterministic_across_runs(void)
{
    char out[2][1024];
    for (int run = 0; run < 2; run++) {
        int fds[2];
        CHECK_EQ(pipe(fds), 0);
        g_out_fd = fds[1];
        CHECK_EQ(mt_run_child_fn(child_deterministic), 0);
        close(fds[1]);
        read_all(fds[0], out[run], sizeof out[run]);
        close(fds[0]);
    }
    CHECK(strlen(out[0]) > 20);
    CHECK_STR_EQ(out[0], out[1]);
}

/* ASCEND_MOCK_TIMING_MODEL overrides the SoC's numbers (inline JSON); the A3 SoC has
 * its own figures. */
static void child_model_override(void)
{
    mt_mock_env("ASCEND_MOCK_TIMING", "virtual", "ASCEND_MOCK_SOC_NAME", "Ascend910_9391",
                "ASCEND_MOCK_TIMING_MODEL", "{\"h2d_gbps\": 10, \"latency_ns\": 0, \"compute_lanes\": 2}",
                (const char *)NULL);
    setup(0);
    CHECK(g_m.h2dGBps == 10.0);
    CHECK(g_m.d2hGBps == 32.0); /* the A3 figure, not overridden */
    CHECK(g_m.peerGBps == 196.0);
    CHECK_EQ(g_m.latencyNs, 0);
    CHECK_EQ(g_m.computeLanes, 2);
    /* two kernels on two streams run at once on two lanes */
    aclrtStream s1, s2;
    aclrtEvent e1, e2;
    void *b;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateEvent(&e1));
    CHECK_OK(aclrtCreateEvent(&e2));
    CHECK_OK(aclrtMalloc(&b, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    uint64_t t0 = aclmockTimingNow();
    launch("a", 1000000, b, 64, ACLMOCK_ACCESS_READ, s1);
    launch("b", 1000000, b, 64, ACLMOCK_ACCESS_READ, s2);
    CHECK_OK(aclrtRecordEvent(e1, s1));
    CHECK_OK(aclrtRecordEvent(e2, s2));
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_EQ(ts_ns(e1), (t0 + g_m.launchNs + 1000000) / 1000 * 1000);
    CHECK_EQ(ts_ns(e2), (t0 + 2 * g_m.launchNs + 1000000) / 1000 * 1000);
    CHECK_OK(aclrtFree(b));
    CHECK_OK(aclrtDestroyEvent(e1));
    CHECK_OK(aclrtDestroyEvent(e2));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
    teardown(0);
}

/* Bad values: one stderr line each, then the fallback (real mode, the SoC's model). */
static void child_bad_values(void)
{
    mt_mock_env("ASCEND_MOCK_TIMING", "warp", "ASCEND_MOCK_TIMING_MODEL", "{\"h2d_gbps\": -1, \"bogus\": 3}",
                (const char *)NULL);
    setup(0);
    CHECK_EQ(aclmockTimingGetMode(), ACLMOCK_TIMING_REAL);
    CHECK(g_m.h2dGBps == 24.0);
    /* real mode: events take the host clock, nothing is modeled */
    uint64_t end = 1;
    CHECK_OK(aclmockTimingStreamEnd(NULL, &end));
    CHECK_EQ(end, 0);
    CHECK_EQ(aclmockTimingGetModel(NULL), ACL_ERROR_INVALID_PARAM);
    teardown(0);
}

static void test_bad_values_fall_back(void)
{
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    int saved = dup(2);
    dup2(fds[1], 2);
    int rc = mt_run_child_fn(child_bad_values);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    char err[4096];
    read_all(fds[0], err, sizeof err);
    close(fds[0]);
    CHECK_EQ(rc, 0);
    CHECK_STR_CONTAINS(err, "ASCEND_MOCK_TIMING='warp' is not real, virtual or paced; real");
    CHECK_STR_CONTAINS(err, "bad value for \"h2d_gbps\"");
    CHECK_STR_CONTAINS(err, "bad value for \"bogus\"");
}

/* Paced: the same model, the workers sleep so that wall time follows it. */
static void child_paced(void)
{
    mt_mock_env("ASCEND_MOCK_TIMING", "paced", (const char *)NULL);
    setup(0);
    CHECK_EQ(aclmockTimingGetMode(), ACLMOCK_TIMING_PACED);
    aclrtStream s;
    aclrtEvent a, b;
    void *buf;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateEvent(&a));
    CHECK_OK(aclrtCreateEvent(&b));
    CHECK_OK(aclrtMalloc(&buf, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtRecordEvent(a, s));
    launch("k", 2000000, buf, 64, ACLMOCK_ACCESS_WRITE, s);
    CHECK_OK(aclrtRecordEvent(b, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_GE(ts_ns(b) - ts_ns(a), 2000000u);
    CHECK_GE(aclmockTimingNow(), ts_ns(b));
    CHECK_OK(aclrtFree(buf));
    CHECK_OK(aclrtDestroyEvent(a));
    CHECK_OK(aclrtDestroyEvent(b));
    CHECK_OK(aclrtDestroyStream(s));
    teardown(0);
}

static void test_virtual(void)
{
    CHECK_EQ(mt_run_child_fn(child_virtual), 0);
}

static void test_model_override(void)
{
    CHECK_EQ(mt_run_child_fn(child_model_override), 0);
}

static void test_paced(void)
{
    CHECK_EQ(mt_run_child_fn(child_paced), 0);
}

int main(void)
{
    RUN_TEST(test_virtual);
    RUN_TEST(test_deterministic_across_runs);
    RUN_TEST(test_model_override);
    RUN_TEST(test_bad_values_fall_back);
    RUN_TEST(test_paced);
    return TEST_REPORT();
}
