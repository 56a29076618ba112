/* test_lock_order.c - the lock order of src/core/lock_order.h, checked two ways.
 *
 * 1. The run-time checker (src/core/lock_order.c, compiled into this program with
 *    MOCK_LOCK_CHECK=1) aborts on each kind of violation: an inversion, a nesting the
 *    table does not declare, two locks of one class, exclusive re-entry, a condition wait
 *    on a lock that is not the innermost, a lock held while user code runs. Each case
 *    runs in a child process that must die with SIGABRT and name the locks.
 * 2. Stress tests: for every pair of locks that can nest (the "may hold" sets of the
 *    table), threads run the code paths that take the pair nested, concurrently with
 *    code that takes each lock alone. The "pairs:" comment of each stress test names the
 *    pairs it covers, "OUTER > INNER" (tests/test_mock_c.py checks that every pair of the
 *    table is named here). In the tsan configuration ThreadSanitizer reports a data race
 *    or a lock-order inversion among them; in every configuration the library's own
 *    checker (MOCK_LOCK_CHECK is on in the test builds) aborts on an undeclared nesting.
 */
#define MOCK_LOCK_CHECK 1
#include "core/lock_order.c" /* the checker under test (its functions are this program's) */

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "core/core.h" /* core_deadline_ms */
#include "mock_test.h"

#define MIB ((size_t)1 << 20)

/* ============================================================ 1. the checker */

typedef void (*violation_fn)(void);

/* Runs `fn` in a child; it must abort (SIGABRT) with a message containing `needle`. */
static void expect_abort(const char *name, violation_fn fn, const char *needle)
{
    int fds[2];
    if (pipe(fds) != 0) {
        CHECK(!"pipe");
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn();
        _exit(0); /* no abort: the checker missed it */
    }
    close(fds[1]);
    char buf[2048];
    size_t len = 0;
    ssize_t n;
    while (len + 1 < sizeof buf && (n = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0) {
        len += (size_t)n;
    }
    buf[len] = '\0';
    close(fds[0]);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CHECK_STR_CONTAINS(buf, needle);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) || strstr(buf, needle) == NULL) {
        fprintf(stderr, "checker case '%s': status %d, stderr: %s\n", name, status, buf);
    }
}

static mock_mutex m_device = MOCK_MUTEX_INIT(MOCK_LOCK_DEVICE);
static mock_mutex m_device2 = MOCK_MUTEX_INIT(MOCK_LOCK_DEVICE);
static mock_mutex m_contexts = MOCK_MUTEX_INIT(MOCK_LOCK_CONTEXTS);
static mock_mutex m_stream = MOCK_MUTEX_INIT(MOCK_LOCK_STREAM);
static mock_mutex m_lifecycle = MOCK_RECURSIVE_MUTEX_INIT(MOCK_LOCK_LIFECYCLE);
static mock_mutex m_error = MOCK_MUTEX_INIT(MOCK_LOCK_ERROR_PROCESS);
static mock_rwlock m_gate = MOCK_RWLOCK_INIT(MOCK_LOCK_COPY_GATE);
static mock_rwlock m_registry = MOCK_RWLOCK_INIT(MOCK_LOCK_MEM_REGISTRY);

static void inversion(void) /* CONTEXTS may be taken under DEVICE, not the reverse */
{
    core_mutex_lock(&m_contexts);
    core_mutex_lock(&m_device);
}

static void undeclared(void) /* STREAM is not declared under DEVICE */
{
    core_mutex_lock(&m_device);
    core_mutex_lock(&m_stream);
}

static void same_class(void) /* two devices at once */
{
    core_mutex_lock(&m_device);
    core_mutex_lock(&m_device2);
}

static void exclusive_again(void) /* a non-recursive mutex taken twice would deadlock */
{
    core_mutex_lock(&m_device);
    core_mutex_lock(&m_device);
}

static void write_after_read(void) /* an rwlock: write-locking what this thread reads */
{
    core_rwlock_rdlock(&m_gate);
    core_rwlock_wrlock(&m_gate);
}

static void wait_not_innermost(void) /* waiting on DEVICE while CONTEXTS stays held */
{
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    core_mutex_lock(&m_device);
    core_mutex_lock(&m_contexts);
    struct timespec dl = {0, 0};
    (void)core_cond_wait_until(&cv, &m_device, &dl);
}

static void user_code_under_lock(void)
{
    core_mutex_lock(&m_stream);
    core_lock_check_none("running a stream task");
}

static void release_unheld(void)
{
    core_mutex_unlock(&m_device);
}

/* What the table allows must pass: the order of the table, LIFECYCLE re-entered, a read
 * lock taken again by its holder, the error lock under anything, user code under
 * LIFECYCLE only, a condition wait on the innermost lock. */
static void test_checker_allows_the_declared_order(void)
{
    core_mutex_lock(&m_lifecycle);
    core_mutex_lock(&m_lifecycle);
    core_mutex_lock(&m_device);
    core_mutex_lock(&m_contexts);
    core_mutex_lock(&m_error);
    core_mutex_unlock(&m_error);
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    struct timespec dl = core_deadline_ms(1);
    CHECK_EQ(core_cond_wait_until(&cv, &m_contexts, &dl), ETIMEDOUT);
    core_mutex_unlock(&m_contexts);
    core_mutex_unlock(&m_device);
    core_rwlock_rdlock(&m_gate);
    core_rwlock_rdlock(&m_gate); /* a second access bracket */
    core_rwlock_rdlock(&m_registry);
    core_rwlock_unlock(&m_registry);
    core_rwlock_unlock(&m_gate);
    core_rwlock_unlock(&m_gate);
    core_lock_check_none("running a finalize callback"); /* only LIFECYCLE is held */
    core_mutex_unlock(&m_lifecycle);
    core_mutex_unlock(&m_lifecycle);
    CHECK_EQ(t_nheld, 0);
}

static void test_checker_aborts_on_violations(void)
{
    expect_abort("inversion", inversion, "taking MOCK_LOCK_DEVICE");
    expect_abort("undeclared", undeclared, "taking MOCK_LOCK_STREAM (stream/stream.c mock_stream.mu) while holding "
                                           "MOCK_LOCK_DEVICE");
    expect_abort("same class", same_class, "taking MOCK_LOCK_DEVICE");
    expect_abort("exclusive re-entry", exclusive_again, "while holding MOCK_LOCK_DEVICE");
    expect_abort("write after read", write_after_read, "taking MOCK_LOCK_COPY_GATE");
    expect_abort("wait", wait_not_innermost, "waiting on MOCK_LOCK_DEVICE");
    expect_abort("user code", user_code_under_lock, "running a stream task while holding MOCK_LOCK_STREAM");
    expect_abort("release", release_unheld, "does not hold");
}

/* Every "may hold" set names only locks that come earlier in the table (so the table
 * order is a lock order), and every lock of libascendcl.so may be taken under LIFECYCLE. */
static void test_table_is_an_order(void)
{
    for (int id = 0; id < MOCK_LOCK_COUNT; id++) {
        CHECK_EQ(k_may_hold[id] & ~(MOCK_HOLDS(id) - 1ull), 0);
    }
    for (int id = MOCK_LOCK_LIFECYCLE + 1; id <= MOCK_LOCK_ERROR_PROCESS; id++) {
        CHECK((k_may_hold[id] & MOCK_HOLDS_LIFECYCLE) != 0);
    }
    for (int id = MOCK_LOCK_ERROR_PROCESS + 1; id < MOCK_LOCK_COUNT; id++) {
        CHECK_EQ(k_may_hold[id], MOCK_HOLDS_NONE); /* the other two libraries: leaves */
    }
}

/* ============================================================ 2. stress tests */

#define ITERS 60

typedef struct worker {
    pthread_t t;
    int id;
} worker;

static atomic_int g_stop;

static void run_threads(void *(*const fns[])(void *), int n)
{
    worker w[16];
    atomic_store(&g_stop, 0);
    for (int i = 0; i < n; i++) {
        w[i].id = i;
        CHECK_OK(pthread_create(&w[i].t, NULL, fns[i], &w[i]));
    }
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].t, NULL);
    }
}

/* ---------------------------------------------------------- devices/contexts */
/* pairs: MOCK_LOCK_DEVICE > MOCK_LOCK_CONTEXTS
 * aclrtSetDevice makes the primary context current under the device lock (the context
 * registry is taken inside); threads racing to create the primary context publish one
 * and destroy the others; explicit contexts take the registry alone. */
#define DEV_CTX 1

static void *set_reset_loop(void *arg)
{
    (void)arg;
    for (int i = 0; i < ITERS; i++) {
        CHECK_OK(aclrtSetDevice(DEV_CTX));
        int32_t active = 0;
        CHECK_OK(aclrtGetPrimaryCtxState(DEV_CTX, NULL, &active));
        CHECK_EQ(active, 1);
        aclrtContext cur = NULL;
        CHECK_OK(aclrtGetCurrentContext(&cur));
        CHECK_OK(aclrtResetDevice(DEV_CTX));
    }
    return NULL;
}

static void *context_loop(void *arg)
{
    (void)arg;
    for (int i = 0; i < ITERS; i++) {
        aclrtContext c = NULL;
        CHECK_OK(aclrtCreateContext(&c, DEV_CTX));
        CHECK_OK(aclrtSetCurrentContext(c));
        uint32_t n = 0;
        CHECK_OK(aclrtGetStreamAvailableNum(&n));
        CHECK_OK(aclrtDestroyContext(c));
    }
    return NULL;
}

static void test_stress_device_contexts(void)
{
    void *(*const fns[])(void *) = {set_reset_loop, set_reset_loop, set_reset_loop, context_loop, context_loop};
    run_threads(fns, 5);
    CHECK_EQ(aclmockGetStat(DEV_CTX, ACLMOCK_STAT_CONTEXTS), 0);
    CHECK_EQ(aclmockGetStat(DEV_CTX, ACLMOCK_STAT_STREAMS), 0);
}

/* ------------------------------------------------------------ the write gate */
/* pairs: MOCK_LOCK_COPY_GATE > MOCK_LOCK_MEM_REGISTRY, MOCK_LOCK_COPY_GATE > MOCK_LOCK_MEM_ISOLATION,
 *        MOCK_LOCK_COPY_GATE > MOCK_LOCK_VALUE_NOTIFY
 * aclrtReduceAsync opens two access brackets (the gate taken shared twice; the second
 * looks its memory up and, with isolation on, unprotects it under the first); value
 * waits take the gate exclusively and make the writers wake them; allocations and
 * copies take the registry and the isolation lock alone. Run with ASCEND_MOCK_ISOLATION=1
 * (a child process). */
#define DEV_GATE 2
#define FLOATS 64

static void *reduce_loop(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetDevice(DEV_GATE));
    aclrtStream s = NULL;
    void *dst = NULL, *src = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtMalloc(&dst, FLOATS * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&src, FLOATS * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < ITERS; i++) {
        CHECK_OK(aclrtReduceAsync(dst, src, FLOATS * sizeof(float), ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, s,
                                  NULL));
    }
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtFree(dst));
    CHECK_OK(aclrtFree(src));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(DEV_GATE));
    return NULL;
}

static void *value_loop(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetDevice(DEV_GATE));
    aclrtStream waiter = NULL, writer = NULL;
    void *flag = NULL;
    CHECK_OK(aclrtCreateStream(&waiter));
    CHECK_OK(aclrtCreateStream(&writer));
    CHECK_OK(aclrtMalloc(&flag, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 1; i <= ITERS; i++) {
        CHECK_OK(aclrtValueWait(flag, (uint64_t)i, ACL_STREAM_WAIT_VALUE_GEQ, waiter));
        CHECK_OK(aclrtValueWrite(flag, (uint64_t)i, 0, writer));
    }
    CHECK_OK(aclrtSynchronizeStream(writer));
    CHECK_OK(aclrtSynchronizeStream(waiter));
    CHECK_OK(aclrtFree(flag));
    CHECK_OK(aclrtDestroyStream(waiter));
    CHECK_OK(aclrtDestroyStream(writer));
    CHECK_OK(aclrtResetDevice(DEV_GATE));
    return NULL;
}

static void *alloc_copy_loop(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetDevice(DEV_GATE));
    unsigned char host[256];
    memset(host, 7, sizeof host);
    for (int i = 0; i < ITERS; i++) {
        void *d = NULL;
        CHECK_OK(aclrtMalloc(&d, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK_OK(aclrtMemcpy(d, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK_OK(aclrtMemset(d, sizeof host, 1, sizeof host));
        CHECK_OK(aclrtFree(d));
    }
    CHECK_OK(aclrtResetDevice(DEV_GATE));
    return NULL;
}

static void child_stress_gate(void)
{
    void *(*const fns[])(void *) = {reduce_loop, reduce_loop, value_loop, alloc_copy_loop};
    run_threads(fns, 4);
}

/* --------------------------------------------------------------------- VMM */
/* pairs: MOCK_LOCK_VMM_RESERVATIONS > MOCK_LOCK_VMM_HANDLES, MOCK_LOCK_VMM_HANDLES > MOCK_LOCK_MEM_REGION
 * Mapping looks the reservation and the handle up together; releasing a reservation
 * checks its mappings; the last reference of a physical handle gives its capacity back
 * to the device region; plain allocations take the region alone. */
#define DEV_VMM 3

static void *vmm_loop(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetDevice(DEV_VMM));
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof prop);
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = DEV_VMM;
    unsigned char host[64];
    memset(host, 3, sizeof host);
    for (int i = 0; i < ITERS; i++) {
        void *va = NULL;
        aclrtDrvMemHandle h = NULL;
        CHECK_OK(aclrtReserveMemAddress(&va, 2 * MIB, 0, NULL, 0));
        CHECK_OK(aclrtMallocPhysical(&h, 2 * MIB, &prop, 0));
        CHECK_OK(aclrtMapMem(va, 2 * MIB, 0, h, 0));
        CHECK_EQ(aclrtReleaseMemAddress(va), ACL_ERROR_RT_PARAM_INVALID); /* still mapped */
        CHECK_OK(aclrtMemcpy(va, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK_OK(aclrtFreePhysical(h)); /* the mapping keeps it alive */
        CHECK_OK(aclrtUnmapMem(va));     /* its last reference: capacity back to the region */
        CHECK_OK(aclrtReleaseMemAddress(va));
    }
    CHECK_OK(aclrtResetDevice(DEV_VMM));
    return NULL;
}

static void *region_loop(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetDevice(DEV_VMM));
    for (int i = 0; i < ITERS; i++) {
        void *d = NULL;
        size_t free_b = 0, total = 0;
        CHECK_OK(aclrtMalloc(&d, 3 * MIB, ACL_MEM_MALLOC_HUGE_ONLY));
        CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total));
        CHECK_OK(aclrtFree(d));
    }
    CHECK_OK(aclrtResetDevice(DEV_VMM));
    return NULL;
}

static void test_stress_vmm(void)
{
    void *(*const fns[])(void *) = {vmm_loop, vmm_loop, region_loop};
    run_threads(fns, 3);
    size_t free_b = 0, total = 0;
    CHECK_OK(aclrtSetDevice(DEV_VMM));
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total));
    CHECK_EQ(free_b, total); /* every byte came back */
    CHECK_OK(aclrtResetDevice(DEV_VMM));
}

/* ----------------------------------------------------------------- graphs */
/* pairs: MOCK_LOCK_GRAPH > MOCK_LOCK_GRAPH_EXEC
 * aclmdlRIExecuteAsync, aclmdlRIUpdate and aclmdlRIDestroy look at a model's run state
 * (its exec lock) under the graph lock; the runs themselves (stream workers and the
 * model's executor threads) and the stream-ordered end of a run take the exec lock
 * alone; captures take the graph lock alone. */
#define DEV_GRAPH 3

static aclmdlRI g_stress_model;

static void *graph_replay_loop(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetDevice(DEV_GRAPH));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    for (int i = 0; i < ITERS; i++) {
        /* refused (507011) while the other thread's aclmdlRIUpdate applies edits:
         * task edits are not thread-safe per model (MRI) */
        aclError rc = aclmdlRIExecuteAsync(g_stress_model, s);
        CHECK(rc == ACL_SUCCESS || rc == ACL_ERROR_RT_MODEL_EXECUTE);
        rc = aclmdlRIUpdate(g_stress_model); /* refused while a run is queued */
        CHECK(rc == ACL_SUCCESS || rc == ACL_ERROR_RT_MODEL_UPDATE_FAILED);
        CHECK_OK(aclrtSynchronizeStream(s));
    }
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(DEV_GRAPH));
    return NULL;
}

static void *graph_capture_loop(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetDevice(DEV_GRAPH));
    aclrtStream s = NULL;
    void *d = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < ITERS; i++) {
        CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
        CHECK_OK(aclrtMemsetAsync(d, 64, i & 0xFF, 64, s));
        aclmdlRI ri = NULL;
        CHECK_OK(aclmdlRICaptureEnd(s, &ri));
        CHECK_OK(aclmdlRIExecuteAsync(ri, s));
        aclError rc = aclmdlRIDestroy(ri); /* 107037 while queued or running */
        CHECK(rc == ACL_SUCCESS || rc == ACL_ERROR_RT_MODEL_RUNNING);
        CHECK_OK(aclrtSynchronizeStream(s));
        if (rc != ACL_SUCCESS) {
            CHECK_OK(aclmdlRIDestroy(ri));
        }
    }
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(DEV_GRAPH));
    return NULL;
}

static void test_stress_graph(void)
{
    CHECK_OK(aclrtSetDevice(DEV_GRAPH));
    aclrtStream s = NULL;
    void *a = NULL, *b = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtMalloc(&a, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&b, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK_OK(aclrtMemcpyAsync(b, 4096, a, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK_OK(aclrtValueWrite(a, 1, 0, s));
    CHECK_OK(aclmdlRICaptureEnd(s, &g_stress_model));
    void *(*const fns[])(void *) = {graph_replay_loop, graph_replay_loop, graph_capture_loop, graph_capture_loop};
    run_threads(fns, 4);
    CHECK_OK(aclmdlRIDestroy(g_stress_model));
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtFree(b));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(DEV_GRAPH));
}

/* ------------------------------------------------- errors at process level */
/* pairs: * > MOCK_LOCK_ERROR_PROCESS
 * With "err_msg_mode": "1" every error goes through the process-level message lock,
 * also the ones recorded while a subsystem lock is held (an event's timestamp checks,
 * managed-memory attributes, VMM mapping checks, a dump config racing with
 * aclmdlFinalizeDump), while other threads read the message. */
#define DEV_ERR 4

static aclrtEvent g_unrecorded;
static void *g_managed;
static void *g_va;

static void *event_error_loop(void *arg)
{
    (void)arg;
    for (int i = 0; i < ITERS; i++) {
        float ms = 0;
        uint64_t ts = 0;
        CHECK_EQ(aclrtEventElapsedTime(&ms, g_unrecorded, g_unrecorded), ACL_ERROR_RT_INTERNAL_ERROR);
        CHECK_EQ(aclrtEventGetTimestamp(g_unrecorded, &ts), ACL_ERROR_RT_INTERNAL_ERROR);
    }
    return NULL;
}

static void *mem_error_loop(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetDevice(DEV_ERR));
    int junk = 0;
    for (int i = 0; i < ITERS; i++) {
        int32_t out[3];
        CHECK_EQ(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, g_managed, 64, out, 3),
                 ACL_ERROR_INVALID_PARAM); /* not a multiple of 4 */
        CHECK_EQ(aclrtMapMem(g_va, 2 * MIB, 0, &junk, 0), ACL_ERROR_RT_INVALID_HANDLE);
    }
    CHECK_OK(aclrtResetDevice(DEV_ERR));
    return NULL;
}

static const char *g_dump_cfg;

static void *dump_loop(void *arg)
{
    (void)arg;
    for (int i = 0; i < ITERS; i++) {
        aclError rc = aclmdlSetDump(g_dump_cfg);
        CHECK(rc == ACL_SUCCESS || rc == ACL_ERROR_DUMP_NOT_RUN);
        (void)aclmdlFinalizeDump();
        (void)aclmdlInitDump();
    }
    return NULL;
}

static void *message_reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < 4 * ITERS; i++) {
        (void)aclGetRecentErrMsg();
        (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    }
    return NULL;
}

static const char *write_file(const char *dir, const char *name, const char *text, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return NULL;
    }
    fputs(text, f);
    fclose(f);
    return path;
}

/* pairs: * > MOCK_LOCK_DIAG_LOG
 * Every recorded error goes into the device log (src/diag/devlog.c), also the ones
 * recorded while a subsystem lock is held (an event's timestamp checks under the event
 * lock, managed-memory attributes, VMM mapping checks), while other threads read,
 * count and clear the log. */
static void *log_reader(void *arg)
{
    (void)arg;
    char buf[4096];
    for (int i = 0; i < ITERS; i++) {
        CHECK(aclmockGetDeviceLog(ACLMOCK_LOG_ALL, buf, sizeof buf) >= 0);
        (void)aclmockGetDeviceLogCount(DEV_ERR);
        if (i % 64 == 0) {
            aclmockClearDeviceLog();
        }
    }
    return NULL;
}

static void test_stress_device_log(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(DEV_ERR));
    CHECK_OK(aclrtCreateEventWithFlag(&g_unrecorded, ACL_EVENT_TIME_LINE));
    CHECK_OK(aclrtMemAllocManaged(&g_managed, 64, ACL_RT_MEM_ATTACH_GLOBAL));
    CHECK_OK(aclrtReserveMemAddress(&g_va, 2 * MIB, 0, NULL, 0));
    void *(*const fns[])(void *) = {event_error_loop, mem_error_loop, log_reader, log_reader};
    run_threads(fns, 4);
    CHECK_EQ(aclrtMalloc(NULL, 1, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CHECK_GT(aclmockGetDeviceLogCount(ACLMOCK_LOG_ALL), 0);
    CHECK_OK(aclrtReleaseMemAddress(g_va));
    CHECK_OK(aclrtFree(g_managed));
    CHECK_OK(aclrtDestroyEvent(g_unrecorded));
    CHECK_OK(aclrtResetDevice(DEV_ERR));
    CHECK_OK(aclFinalize());
}

static void test_stress_errors_process_level(void)
{
    char dir[128], init_cfg[256], dump_cfg[256];
    if (mt_make_tmpdir(dir, sizeof dir, "lock_order") != 0) {
        CHECK(!"tmpdir");
        return;
    }
    CHECK(write_file(dir, "init.json", "{\"err_msg_mode\": \"1\"}", init_cfg, sizeof init_cfg) != NULL);
    char text[512];
    snprintf(text, sizeof text, "{\"dump\": {\"dump_path\": \"%s\", \"dump_list\": []}}", dir);
    g_dump_cfg = write_file(dir, "dump.json", text, dump_cfg, sizeof dump_cfg);
    CHECK_OK(aclInit(init_cfg));
    CHECK_OK(aclmdlInitDump());
    CHECK_OK(aclrtSetDevice(DEV_ERR));
    CHECK_OK(aclrtCreateEventWithFlag(&g_unrecorded, ACL_EVENT_TIME_LINE));
    CHECK_OK(aclrtMemAllocManaged(&g_managed, 64, ACL_RT_MEM_ATTACH_GLOBAL));
    CHECK_OK(aclrtReserveMemAddress(&g_va, 2 * MIB, 0, NULL, 0));
    void *(*const fns[])(void *) = {event_error_loop, mem_error_loop, dump_loop, message_reader, message_reader};
    run_threads(fns, 5);
    CHECK_OK(aclrtReleaseMemAddress(g_va));
    CHECK_OK(aclrtFree(g_managed));
    CHECK_OK(aclrtDestroyEvent(g_unrecorded));
    CHECK_OK(aclrtResetDevice(DEV_ERR));
    (void)aclmdlFinalizeDump();
    CHECK_OK(aclFinalize());
    unlink(init_cfg);
    unlink(dump_cfg);
    rmdir(dir);
}

/* --------------------------------------------------------------- lifecycle */
/* pairs: MOCK_LOCK_LIFECYCLE > *
 * aclInit / aclFinalize hold the lifecycle lock while the subsystems apply the config
 * (a "dump" section), while the finalize callbacks (user code calling the API) run and
 * while everything is torn down: devices, contexts, streams, events, report
 * subscriptions, allocators, memory, VMM, peer pairs, dump state. Meanwhile other
 * threads take the leaf locks alone (callback lists, config handles, data buffers,
 * system parameters, the leak snapshot, init callbacks, peer status). */
#define DEV_LIFE 5
#define DEV_PEER 6
#define LIFE_ROUNDS 12

static aclError fini_cb(void *user)
{
    (void)user;
    uint32_t n = 0;
    int64_t v = 0;
    char report[256];
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_OK(aclrtSetSysParamOpt(ACL_OPT_DETERMINISTIC, 1));
    CHECK_OK(aclrtGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v));
    CHECK(aclmockGetLeakReport(report, sizeof report, ACLMOCK_REPORT_NOW) > 0);
    return ACL_SUCCESS;
}

static aclError init_cb(const char *text, size_t len, void *user)
{
    (void)text;
    (void)len;
    (void)user;
    return ACL_SUCCESS;
}

static void state_cb(int32_t dev, aclrtDeviceState state, void *args)
{
    (void)dev;
    (void)state;
    (void)args;
}

static void stream_state_cb(aclrtStream s, aclrtStreamState state, void *args)
{
    (void)s;
    (void)state;
    (void)args;
}

static void exc_cb(aclrtExceptionInfo *info)
{
    (void)info;
}

static void *dummy_alloc(aclrtAllocator a, size_t n)
{
    (void)a;
    (void)n;
    return NULL;
}
static void dummy_free(aclrtAllocator a, aclrtAllocatorBlock b)
{
    (void)a;
    (void)b;
}
static void *dummy_addr(aclrtAllocatorBlock b)
{
    return b;
}

static void one_life(const char *cfg)
{
    CHECK_OK(aclInit(cfg));
    CHECK_OK(aclFinalizeCallbackRegister(ACL_REG_TYPE_OTHER, fini_cb, NULL));
    CHECK_OK(aclrtSetDevice(DEV_LIFE));
    aclrtStream s = NULL;
    aclrtEvent e = NULL;
    void *d = NULL, *h = NULL, *va = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateEvent(&e));
    CHECK_OK(aclrtRecordEvent(e, s));
    CHECK_OK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&h, 4096));
    CHECK_OK(aclrtReserveMemAddress(&va, 2 * MIB, 0, NULL, 0));
    CHECK_OK(aclrtDeviceEnablePeerAccess(DEV_PEER, 0));
    CHECK_OK(aclrtSubscribeReport((uint64_t)pthread_self(), s));
    aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
    CHECK(desc != NULL);
    CHECK_OK(aclrtAllocatorSetObjToDesc(desc, (aclrtAllocator)(uintptr_t)1));
    CHECK_OK(aclrtAllocatorSetAllocFuncToDesc(desc, dummy_alloc));
    CHECK_OK(aclrtAllocatorSetFreeFuncToDesc(desc, dummy_free));
    CHECK_OK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, dummy_addr));
    CHECK_OK(aclrtAllocatorRegister(s, desc));
    CHECK_OK(aclmdlInitDump());
    /* everything above is still alive: aclFinalize releases it */
    CHECK_OK(aclFinalize());
    CHECK_OK(aclrtAllocatorDestroyDesc(desc));
    CHECK_OK(aclFinalizeCallbackUnRegister(ACL_REG_TYPE_OTHER, fini_cb));
}

static void *leaf_loop(void *arg)
{
    const worker *w = arg;
    char name[32];
    snprintf(name, sizeof name, "lock-order-%d", w->id);
    while (!atomic_load(&g_stop)) {
        CHECK_OK(aclrtRegDeviceStateCallback(name, state_cb, NULL));
        CHECK_OK(aclrtRegDeviceStateCallback(name, NULL, NULL));
        CHECK_OK(aclrtRegStreamStateCallback(name, stream_state_cb, NULL));
        CHECK_OK(aclrtRegStreamStateCallback(name, NULL, NULL));
        aclrtStreamConfigHandle *cfg = aclrtCreateStreamConfigHandle();
        CHECK(cfg != NULL);
        CHECK_OK(aclrtDestroyStreamConfigHandle(cfg));
        aclDataBuffer *b = aclCreateDataBuffer(name, sizeof name);
        CHECK(b != NULL);
        CHECK_OK(aclDestroyDataBuffer(b));
        CHECK_OK(aclrtSetSysParamOpt(ACL_OPT_DETERMINISTIC, 0));
        char report[256];
        CHECK(aclmockGetLeakReport(report, sizeof report, ACLMOCK_REPORT_LAST_FINALIZE) > 0);
        CHECK_OK(aclInitCallbackRegister(ACL_REG_TYPE_OTHER, init_cb, NULL));
        CHECK_OK(aclInitCallbackUnRegister(ACL_REG_TYPE_OTHER, init_cb));
        if (w->id == 0) { /* a callback may be registered once */
            CHECK_OK(aclrtExceptionInfoCallbackRegister(exc_cb));
            CHECK_OK(aclrtExceptionInfoCallbackUnregister(exc_cb));
        }
        int32_t st = 0;
        CHECK_OK(aclrtDevicePeerAccessStatus(DEV_PEER, DEV_LIFE, &st));
    }
    return NULL;
}

static void *lifecycle_loop(void *arg)
{
    (void)arg;
    char dir[128], cfg[256], text[512];
    if (mt_make_tmpdir(dir, sizeof dir, "lock_life") != 0) {
        CHECK(!"tmpdir");
        atomic_store(&g_stop, 1);
        return NULL;
    }
    snprintf(text, sizeof text, "{\"dump\": {\"dump_path\": \"%s\", \"dump_list\": []}}", dir);
    const char *path = write_file(dir, "init.json", text, cfg, sizeof cfg);
    for (int i = 0; i < LIFE_ROUNDS; i++) {
        one_life(i % 2 == 0 ? path : NULL);
    }
    atomic_store(&g_stop, 1);
    unlink(cfg);
    rmdir(dir);
    return NULL;
}

static void test_stress_lifecycle(void)
{
    void *(*const fns[])(void *) = {lifecycle_loop, leaf_loop, leaf_loop};
    run_threads(fns, 3);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_STREAMS), 0);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_EVENTS), 0);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_ALLOCATIONS), 0);
}

/* ============================================================ driver */

/* The write-gate stress needs ASCEND_MOCK_ISOLATION=1, read at the first ACL call: it runs
 * in a child started before this process makes any. */
static void test_stress_write_gate(void)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TEST_LOCK_ORDER_CHILD", "gate", 1);
        setenv("ASCEND_MOCK_ISOLATION", "1", 1);
        execl("/proc/self/exe", "test_lock_order", (char *)NULL);
        _exit(127);
    }
    CHECK_GT(pid, 0);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
    const char *child = getenv("TEST_LOCK_ORDER_CHILD");
    if (child != NULL) {
        if (strcmp(child, "gate") == 0) {
            child_stress_gate();
        }
        return TEST_FAILED_COUNT() == 0 ? 0 : 1;
    }
    mt_mock_env("ASCEND_MOCK_DEVICE_COUNT", "8", (const char *)NULL);
    /* before any ACL call: the children fork a process without mock threads */
    RUN_TEST(test_checker_allows_the_declared_order);
    RUN_TEST(test_checker_aborts_on_violations);
    RUN_TEST(test_table_is_an_order);
    RUN_TEST(test_stress_write_gate);
    RUN_TEST(test_stress_device_contexts);
    RUN_TEST(test_stress_vmm);
    RUN_TEST(test_stress_graph);
    RUN_TEST(test_stress_errors_process_level);
    RUN_TEST(test_stress_device_log);
    RUN_TEST(test_stress_lifecycle);
    return TEST_REPORT();
}
