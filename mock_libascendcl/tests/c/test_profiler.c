/* test_profiler.c - the profiler's collection and files (mock README "Profiling"): the
 * seed's switches (ASCEND_PROFILER_FLAGS/OUTPUT/START_STEP/STOP_STEP; written at
 * aclFinalize, at the stop step, or at process exit), a golden trace of the
 * deterministic timing model (exact task times, per-stream busy time and overlap in the
 * summary), markers, ranges and steps, and the aclmockProf* calls with their errors. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

#define N_BYTES ((size_t)24 * 1000 * 1000) /* 1 ms over the 24 GB/s model link */

static char g_dir[256];
static char g_text[1 << 20];

static const char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    g_text[0] = '\0';
    if (f != NULL) {
        size_t n = fread(g_text, 1, sizeof g_text - 1, f);
        g_text[n] = '\0';
        fclose(f);
    }
    return g_text;
}

static const char *profile_file(const char *name)
{
    char folder[4300], path[4500];
    CHECK_GT(aclmockProfLastOutput(folder, sizeof folder), 0);
    snprintf(path, sizeof path, "%s/%s", folder, name);
    return slurp(path);
}

static void op(const char *name, uint64_t cost, void *buf, aclrtStream s)
{
    aclmockOpArg a = {buf, 64, ACLMOCK_ACCESS_WRITE, ACL_UINT8, 0, {0}};
    aclmockOpDesc o = {name, cost, &a, 1, NULL, NULL};
    CHECK_OK(aclmockLaunchOp(&o, s));
}

/* "ts":<us>.<ns>: the trace's microsecond format */
static void ts_text(char *buf, size_t len, const char *key, uint64_t ns)
{
    snprintf(buf, len, "\"%s\":%llu.%03llu", key, (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000));
}

/* The golden trace: two streams, an H2D and a D2H copy that overlap, then a kernel,
 * under the virtual model: every time is known in advance. Written at aclFinalize. */
static void child_golden(void)
{
    char out[300];
    snprintf(out, sizeof out, "%s/golden", g_dir);
    mt_mock_env("ASCEND_MOCK_TIMING", "virtual", "ASCEND_PROFILER_FLAGS", "enable", "ASCEND_PROFILER_OUTPUT", out,
                (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_EQ(aclmockProfIsActive(), 1);
    CHECK_OK(aclrtSetDevice(0));
    aclmockTimingModel m;
    CHECK_OK(aclmockTimingGetModel(&m));
    aclrtStream s1, s2;
    void *d1, *d2, *h1, *h2;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtMalloc(&d1, N_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&d2, N_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&h1, N_BYTES));
    CHECK_OK(aclrtMallocHost(&h2, N_BYTES));
    uint64_t t0 = aclmockTimingNow();
    CHECK_OK(aclrtMemcpyAsync(d1, N_BYTES, h1, N_BYTES, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK_OK(aclrtMemcpyAsync(h2, N_BYTES, d2, N_BYTES, ACL_MEMCPY_DEVICE_TO_HOST, s2));
    op("matmul", 500000, d1, s1);
    CHECK_OK(aclmockProfMark("phase-end", s2, 1));
    CHECK_OK(aclrtSynchronizeDevice());
    int32_t id1, id2;
    CHECK_OK(aclrtStreamGetId(s1, &id1));
    CHECK_OK(aclrtStreamGetId(s2, &id2));
    CHECK_OK(aclrtFree(d1));
    CHECK_OK(aclrtFree(d2));
    CHECK_OK(aclrtFreeHost(h1));
    CHECK_OK(aclrtFreeHost(h2));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize()); /* writes the profile */
    CHECK_EQ(aclmockProfIsActive(), 0);

    uint64_t copy = m.latencyNs + N_BYTES / 24; /* 24 GB/s = 24 bytes per ns */
    uint64_t h2d_start = t0 + m.launchNs, d2h_start = t0 + 2 * m.launchNs;
    uint64_t k_start = h2d_start + copy; /* after the H2D on its stream */
    uint64_t k_dur = m.latencyNs + 500000;
    char want[256], field[64];
    const char *trace = profile_file("trace.json");
    CHECK_STR_CONTAINS(trace, "{\"traceEvents\":[");
    ts_text(field, sizeof field, "ts", h2d_start);
    snprintf(want, sizeof want, "{\"name\":\"aclrtMemcpyAsync\",\"cat\":\"copy_h2d\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,%s",
             id1, field);
    CHECK_STR_CONTAINS(trace, want);
    ts_text(field, sizeof field, "dur", copy);
    CHECK_STR_CONTAINS(trace, field);
    ts_text(field, sizeof field, "ts", d2h_start);
    snprintf(want, sizeof want, "{\"name\":\"aclrtMemcpyAsync\",\"cat\":\"copy_d2h\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,%s",
             id2, field);
    CHECK_STR_CONTAINS(trace, want);
    ts_text(field, sizeof field, "ts", k_start);
    snprintf(want, sizeof want, "{\"name\":\"matmul\",\"cat\":\"kernel\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,%s", id1, field);
    CHECK_STR_CONTAINS(trace, want);
    snprintf(want, sizeof want, "\"bytes\":%zu,", N_BYTES);
    CHECK_STR_CONTAINS(trace, want);
    CHECK_STR_CONTAINS(trace, "{\"name\":\"phase-end\",\"cat\":\"marker\",\"ph\":\"i\",\"s\":\"t\",\"pid\":1,");
    CHECK_STR_CONTAINS(trace, "\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"NPU 0 (Ascend910B1)\"}");
    snprintf(want, sizeof want, "\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"stream %d\"}",
             id2, id2);
    CHECK_STR_CONTAINS(trace, want);
    CHECK_STR_CONTAINS(trace, "\"name\":\"aclrtMalloc\",\"cat\":\"malloc\",\"ph\":\"X\",\"pid\":0,");
    CHECK_STR_CONTAINS(trace, "\"timing\":\"virtual\"");

    /* the summary: the D2H copy (on s2) overlaps the work of s1 (the H2D copy, then the
     * kernel) from its first to its last nanosecond */
    const char *sum = profile_file("summary.json");
    snprintf(want, sizeof want, "{\"device\": %d, \"stream\": %d, \"default\": false, \"tasks\": 2, \"busy_us\": %.3f, "
             "\"overlap_us\": %.3f", 0, id1, (double)(copy + k_dur) / 1e3, (double)copy / 1e3);
    CHECK_STR_CONTAINS(sum, want);
    snprintf(want, sizeof want, "{\"device\": 0, \"busy_us\": %.3f, \"overlap_us\": %.3f",
             (double)(k_start + k_dur - h2d_start) / 1e3, (double)copy / 1e3);
    CHECK_STR_CONTAINS(sum, want);
    snprintf(want, sizeof want, "{\"kind\": \"copy_h2d\", \"count\": 1, \"total_us\": %.3f, \"mean_us\": %.3f, \"bytes\": %zu, "
             "\"bandwidth_gbps\": %.3f}", (double)copy / 1e3, (double)copy / 1e3, N_BYTES, (double)N_BYTES / (double)copy);
    CHECK_STR_CONTAINS(sum, want);
    const char *csv = profile_file("kind_summary.csv");
    CHECK_STR_CONTAINS(csv, "kind,count,total_us,mean_us,bytes,bandwidth_gbps\n");
    CHECK_STR_CONTAINS(csv, "kernel,1,502.000,502.000,64,");
    csv = profile_file("stream_summary.csv");
    CHECK_STR_CONTAINS(csv, "device,stream,default,tasks,busy_us,overlap_us,first_us,last_us,utilization\n");
}

static void mark_step(const char *name)
{
    CHECK_OK(aclmockProfMark(name, NULL, 0));
}

/* START_STEP / STOP_STEP: only steps 1..1 are collected; the profile is written when
 * step 2 begins. */
static void child_steps(void)
{
    char out[300];
    snprintf(out, sizeof out, "%s/steps", g_dir);
    mt_mock_env("ASCEND_PROFILER_FLAGS", "enable", "ASCEND_PROFILER_OUTPUT", out, "ASCEND_PROFILER_START_STEP", "1",
                "ASCEND_PROFILER_STOP_STEP", "2", (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_EQ(aclmockProfIsActive(), 2); /* armed: waiting for step 1 */
    mark_step("in-step-0");
    CHECK_EQ(aclmockProfStep(), 1);
    CHECK_EQ(aclmockProfIsActive(), 1);
    mark_step("in-step-1");
    CHECK_EQ(aclmockProfStep(), 2); /* the stop step: written now */
    CHECK_EQ(aclmockProfIsActive(), 0);
    mark_step("in-step-2");
    const char *trace = profile_file("trace.json");
    CHECK_STR_CONTAINS(trace, "in-step-1");
    CHECK(strstr(trace, "in-step-0") == NULL);
    CHECK(strstr(trace, "in-step-2") == NULL);
    CHECK_STR_CONTAINS(trace, "\"first_step\":1,\"last_step\":2");
    CHECK_OK(aclFinalize());
}

/* A process that never calls aclFinalize still leaves its profile. */
static void child_exit_without_finalize(void)
{
    char out[300];
    snprintf(out, sizeof out, "%s/atexit", g_dir);
    mt_mock_env("ASCEND_PROFILER_FLAGS", "enable", "ASCEND_PROFILER_OUTPUT", out, (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    void *d = NULL;
    CHECK_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemsetAsync(d, 64, 0, 64, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    exit(TEST_FAILED_COUNT() == 0 ? 0 : 1); /* atexit handlers run */
}

static void child_bad_output(void)
{
    mt_mock_env("ASCEND_PROFILER_FLAGS", "enable", "ASCEND_PROFILER_OUTPUT", "/proc/no/such/dir", (const char *)NULL);
    CHECK_OK(aclInit(NULL)); /* one stderr line, no profiling */
    CHECK_EQ(aclmockProfIsActive(), 0);
    CHECK_OK(aclFinalize());
}

static void test_env_switches(void)
{
    CHECK_EQ(mt_run_child_fn(child_golden), 0);
    CHECK_EQ(mt_run_child_fn(child_steps), 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        child_exit_without_finalize();
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char path[512];
    snprintf(path, sizeof path, "%s/atexit/mock_prof_%ld_1/trace.json", g_dir, (long)pid);
    CHECK_STR_CONTAINS(slurp(path), "\"cat\":\"memset\"");

    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    int saved = dup(2);
    dup2(fds[1], 2);
    int rc = mt_run_child_fn(child_bad_output);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    char err[2048];
    ssize_t n = read(fds[0], err, sizeof err - 1);
    err[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    CHECK_EQ(rc, 0);
    CHECK_STR_CONTAINS(err, "ASCEND_PROFILER_OUTPUT='/proc/no/such/dir' is not a usable directory; not profiling");
}

static uint64_t g_cross_range;

static void *stop_range(void *arg)
{
    (void)arg;
    CHECK_OK(aclmockProfRangeStop(g_cross_range)); /* a range may end on another thread */
    return NULL;
}

/* The aclmockProf* calls (real timing): ranges, markers, the device mask, errors. */
static void test_api(void)
{
    char out[300], folder[4300];
    snprintf(out, sizeof out, "%s/api", g_dir);
    CHECK_EQ(aclmockProfStart(NULL, 1, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockProfStart("/proc/no/such", 1, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockProfStop(folder, sizeof folder), ACL_ERROR_PROF_NOT_RUN);
    CHECK_EQ(aclmockProfSetDevices(1), ACL_ERROR_PROF_NOT_RUN);
    CHECK_OK(aclmockProfStart(out, 1u << 1, 0)); /* device 1 only */
    CHECK_OK(aclrtSetDevice(0));
    void *d0 = NULL, *d1 = NULL;
    CHECK_OK(aclrtMalloc(&d0, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclmockProfRangePush("outer"));
    CHECK_OK(aclmockProfRangePush("inner"));
    CHECK_OK(aclrtMemsetAsync(d0, 64, 1, 64, NULL)); /* device 0: not profiled */
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtMalloc(&d1, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    aclmockSetNextTaskTag("model.py:42");
    CHECK_OK(aclrtMemsetAsync(d1, 64, 2, 64, NULL));
    CHECK_OK(aclmockProfMark("on-stream", NULL, 1));
    CHECK_OK(aclmockProfRangePop());
    CHECK_OK(aclmockProfRangePop());
    CHECK_EQ(aclmockProfRangePop(), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclmockProfRangeStart("cross", &g_cross_range));
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, stop_range, NULL), 0);
    pthread_join(t, NULL);
    CHECK_EQ(aclmockProfRangeStop(g_cross_range), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockProfMark(NULL, NULL, 0), ACL_ERROR_INVALID_PARAM);
    uint64_t step = aclmockProfStep();
    CHECK_EQ(aclmockProfGetStep(), step);
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_OK(aclmockProfStop(folder, sizeof folder));
    CHECK_STR_CONTAINS(folder, out);
    const char *trace = profile_file("trace.json");
    CHECK_STR_CONTAINS(trace, "\"name\":\"aclrtMemsetAsync\",\"cat\":\"memset\",\"ph\":\"X\",\"pid\":2,");
    CHECK(strstr(trace, "\"pid\":1,") == NULL); /* device 0 was not profiled */
    CHECK_STR_CONTAINS(trace, "\"tag\":\"model.py:42\"");
    CHECK_STR_CONTAINS(trace, "\"name\":\"inner\",\"cat\":\"range\",\"ph\":\"X\",\"pid\":0,");
    CHECK_STR_CONTAINS(trace, "\"name\":\"outer\",\"cat\":\"range\"");
    CHECK_STR_CONTAINS(trace, "\"name\":\"cross\",\"cat\":\"range\"");
    CHECK_STR_CONTAINS(trace, "\"name\":\"on-stream\",\"cat\":\"marker\",\"ph\":\"i\"");
    char want[64];
    snprintf(want, sizeof want, "\"name\":\"step %llu\",\"cat\":\"step\"", (unsigned long long)step);
    CHECK_STR_CONTAINS(trace, want);
    CHECK_STR_CONTAINS(trace, "\"timing\":\"real\"");
    CHECK_OK(aclrtFree(d1));
    CHECK_OK(aclrtResetDevice(1));
    CHECK_OK(aclrtFree(d0));
    CHECK_OK(aclrtResetDevice(0));
}

int main(void)
{
    if (mt_make_tmpdir(g_dir, sizeof g_dir, "profiler") != 0) {
        return 1;
    }
    RUN_TEST(test_env_switches); /* children first: the switches are read once per process */
    mt_mock_env((const char *)NULL);
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_api);
    CHECK_OK(aclFinalize());
    mt_remove_tree(g_dir);
    return TEST_REPORT();
}
