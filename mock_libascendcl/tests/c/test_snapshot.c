/* test_snapshot.c - the process snapshot state machine (aclrtSnapShot*; acl_next_semantics.md
 * section 5.4, D-SNAP): RUNNING -> Lock -> LOCKED -> Backup -> BACKED_UP -> Restore ->
 * LOCKED, Unlock back to RUNNING, the error codes of the other transitions, the stage
 * callbacks (once per device in use), resource calls blocked while locked, the device
 * memory image, the forced unlock of aclFinalize. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "mock_test.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------- callbacks */

typedef struct cb_log {
    int calls[6];
    uint64_t devices[6]; /* bit per device id seen */
    int fail_stage;      /* stage whose callback returns nonzero, -1 none */
} cb_log;

static cb_log g_log;

#define STAGE_CB(stage)                                             \
    static uint32_t cb_##stage(int32_t dev, void *args)             \
    {                                                               \
        cb_log *l = args;                                           \
        l->calls[stage]++;                                          \
        l->devices[stage] |= 1ull << dev;                           \
        return l->fail_stage == (stage) ? 7u : 0u;                  \
    }
STAGE_CB(0)
STAGE_CB(1)
STAGE_CB(2)
STAGE_CB(3)
STAGE_CB(4)
STAGE_CB(5)
static aclrtSnapShotCallBack const k_cbs[6] = {cb_0, cb_1, cb_2, cb_3, cb_4, cb_5};

static void register_all(void)
{
    for (int s = 0; s < 6; s++) {
        CHECK_OK(aclrtSnapShotCallbackRegister((aclrtSnapShotStage)s, k_cbs[s], &g_log));
    }
}

/* section 5.4: the transitions and the codes of the refused ones */
static void test_state_machine(void)
{
    int pid = (int)getpid();
    memset(&g_log, 0, sizeof g_log);
    g_log.fail_stage = -1;
    register_all();
    CHECK_OK(aclrtSetDevice(2));
    CHECK_OK(aclrtSetDevice(0)); /* the current device of the later tests */

    /* RUNNING: only Lock */
    CHECK_EQ(aclrtSnapShotProcessUnlock(pid, NULL), ACL_ERROR_SNAPSHOT_UNLOCK_FAILED);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "state is RUNNING");
    CHECK_EQ(aclrtSnapShotProcessBackup(pid, NULL), ACL_ERROR_SNAPSHOT_BACKUP_FAILED);
    CHECK_EQ(aclrtSnapShotProcessRestore(pid, NULL), ACL_ERROR_SNAPSHOT_RESTORE_FAILED);
    CHECK_OK(aclrtSnapShotProcessLock(pid, NULL));
    /* callbacks run once per device in use (0 and 2), with its id */
    CHECK_EQ(g_log.calls[ACL_RT_SNAPSHOT_LOCK_PRE], 2);
    CHECK_EQ(g_log.devices[ACL_RT_SNAPSHOT_LOCK_PRE], 0x5);
    /* LOCKED: Lock and Restore are refused */
    CHECK_EQ(aclrtSnapShotProcessLock(pid, NULL), ACL_ERROR_SNAPSHOT_LOCK_FAILED);
    CHECK_EQ(aclrtSnapShotProcessRestore(pid, NULL), ACL_ERROR_SNAPSHOT_RESTORE_FAILED);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "state is LOCKED");
    CHECK_OK(aclrtSnapShotProcessBackup(pid, NULL));
    CHECK_EQ(g_log.calls[ACL_RT_SNAPSHOT_BACKUP_PRE], 2);
    CHECK_EQ(g_log.calls[ACL_RT_SNAPSHOT_BACKUP_POST], 2);
    /* BACKED_UP: Backup may repeat (the last one counts), Lock is refused */
    CHECK_OK(aclrtSnapShotProcessBackup(pid, NULL));
    CHECK_EQ(aclrtSnapShotProcessLock(pid, NULL), ACL_ERROR_SNAPSHOT_LOCK_FAILED);
    CHECK_OK(aclrtSnapShotProcessRestore(pid, NULL));
    CHECK_EQ(g_log.calls[ACL_RT_SNAPSHOT_RESTORE_PRE], 2);
    CHECK_EQ(g_log.calls[ACL_RT_SNAPSHOT_RESTORE_POST], 2);
    /* back in LOCKED: a second Restore needs a new Backup */
    CHECK_EQ(aclrtSnapShotProcessRestore(pid, NULL), ACL_ERROR_SNAPSHOT_RESTORE_FAILED);
    CHECK_OK(aclrtSnapShotProcessUnlock(pid, NULL));
    CHECK_EQ(g_log.calls[ACL_RT_SNAPSHOT_UNLOCK_POST], 2);
    /* Unlock from BACKED_UP too */
    CHECK_OK(aclrtSnapShotProcessLock(pid, NULL));
    CHECK_OK(aclrtSnapShotProcessBackup(pid, NULL));
    CHECK_OK(aclrtSnapShotProcessUnlock(pid, NULL));
    CHECK_EQ(aclrtSnapShotProcessRestore(pid, NULL), ACL_ERROR_SNAPSHOT_RESTORE_FAILED);

    /* another pid, non-NULL reserved arguments */
    CHECK_EQ(aclrtSnapShotProcessLock(pid + 1, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "is not the calling process");
    int dummy = 0;
    CHECK_EQ(aclrtSnapShotProcessLock(pid, &dummy), ACL_ERROR_INVALID_PARAM);
    aclrtSnapShotBackupArgs bargs;
    memset(&bargs, 0, sizeof bargs);
    CHECK_EQ(aclrtSnapShotProcessBackup(pid, &bargs), ACL_ERROR_INVALID_PARAM);

    /* a failing LOCK_PRE callback: the lock fails and the state stays RUNNING */
    g_log.fail_stage = ACL_RT_SNAPSHOT_LOCK_PRE;
    CHECK_EQ(aclrtSnapShotProcessLock(pid, NULL), ACL_ERROR_SNAPSHOT_CALLBACK_FAILED);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "LOCK_PRE callback");
    CHECK_EQ(aclrtSnapShotProcessUnlock(pid, NULL), ACL_ERROR_SNAPSHOT_UNLOCK_FAILED);
    g_log.fail_stage = ACL_RT_SNAPSHOT_BACKUP_PRE;
    CHECK_OK(aclrtSnapShotProcessLock(pid, NULL));
    CHECK_EQ(aclrtSnapShotProcessBackup(pid, NULL), ACL_ERROR_SNAPSHOT_CALLBACK_FAILED);
    CHECK_EQ(aclrtSnapShotProcessRestore(pid, NULL), ACL_ERROR_SNAPSHOT_RESTORE_FAILED); /* no backup */
    g_log.fail_stage = -1;
    CHECK_OK(aclrtSnapShotProcessUnlock(pid, NULL));

    /* registration rules */
    CHECK_EQ(aclrtSnapShotCallbackRegister(ACL_RT_SNAPSHOT_LOCK_PRE, cb_0, NULL),
             ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED); /* twice */
    CHECK_EQ(aclrtSnapShotCallbackRegister((aclrtSnapShotStage)6, cb_0, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSnapShotCallbackRegister(ACL_RT_SNAPSHOT_LOCK_PRE, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    for (int s = 0; s < 6; s++) {
        CHECK_OK(aclrtSnapShotCallbackUnregister((aclrtSnapShotStage)s, k_cbs[s]));
    }
    CHECK_EQ(aclrtSnapShotCallbackUnregister(ACL_RT_SNAPSHOT_LOCK_PRE, cb_0), ACL_ERROR_INVALID_PARAM);
    memset(&g_log, 0, sizeof g_log);
    CHECK_OK(aclrtSnapShotProcessLock(pid, NULL));
    CHECK_OK(aclrtSnapShotProcessUnlock(pid, NULL));
    CHECK_EQ(g_log.calls[0] + g_log.calls[5], 0); /* unregistered: not called */
    CHECK_OK(aclrtResetDevice(2));
}

/* ------------------------------------------------------- blocked resources */

typedef struct malloc_args {
    atomic_int done;
    aclError rc;
    void *ptr;
} malloc_args;

static void *do_malloc(void *arg)
{
    malloc_args *a = arg;
    if (aclrtSetDevice(0) != ACL_SUCCESS) { /* blocked while locked too */
        a->rc = -1;
    } else {
        a->rc = aclrtMalloc(&a->ptr, 256, ACL_MEM_MALLOC_HUGE_FIRST);
    }
    atomic_store(&a->done, 1);
    return NULL;
}

/* D-SNAP 5.2: while LOCKED, calls that change device resources block the calling thread
 * until Unlock; queries and synchronizations do not. */
static void test_resource_calls_block_while_locked(void)
{
    int pid = (int)getpid();
    CHECK_OK(aclrtSnapShotProcessLock(pid, NULL));
    malloc_args a = {0, ACL_SUCCESS, NULL};
    pthread_t t;
    pthread_create(&t, NULL, do_malloc, &a);
    /* queries and syncs pass */
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_OK(aclrtSynchronizeDevice());
    size_t free_b = 0, total = 0;
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total));
    sleep_ms(50);
    CHECK_EQ(atomic_load(&a.done), 0); /* still held at the gate */
    CHECK_OK(aclrtSnapShotProcessUnlock(pid, NULL));
    pthread_join(t, NULL);
    CHECK_EQ(atomic_load(&a.done), 1);
    CHECK_OK(a.rc);
    CHECK_OK(aclrtFree(a.ptr));
}

/* Backup saves the content of device memory, Restore writes it back. */
static void test_backup_restore_memory(void)
{
    int pid = (int)getpid();
    uint8_t *dev = NULL;
    CHECK_OK(aclrtMalloc((void **)&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    uint8_t host[4096];
    memset(host, 0x5A, sizeof host);
    CHECK_OK(aclrtMemcpy(dev, 4096, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtSnapShotProcessLock(pid, NULL));
    CHECK_OK(aclrtSnapShotProcessBackup(pid, NULL));
    /* the device memory changes after the backup (the mock's device memory is host
     * memory: without isolation the test can write it directly, as a kernel would) */
    memset(dev, 0x11, 4096);
    CHECK_OK(aclrtSnapShotProcessRestore(pid, NULL));
    CHECK_OK(aclrtSnapShotProcessUnlock(pid, NULL));
    uint8_t back[4096];
    CHECK_OK(aclrtMemcpy(back, sizeof back, dev, 4096, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(back, host, sizeof back) == 0);
    CHECK_OK(aclrtFree(dev));
}

static aclError g_task_rc;

static void backup_from_task(void *arg)
{
    (void)arg;
    g_task_rc = aclrtSnapShotProcessBackup((int)getpid(), NULL);
}

/* A backup synchronizes every stream: from a task of a stream it would wait for itself,
 * so it is refused (107000), like the other synchronizations made from a task. */
static void test_backup_from_a_task_is_refused(void)
{
    int pid = (int)getpid();
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtSnapShotProcessLock(pid, NULL));
    g_task_rc = ACL_SUCCESS;
    CHECK_OK(aclrtLaunchHostFunc(s, backup_from_task, NULL)); /* not held by the gate */
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(g_task_rc, ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtSnapShotProcessUnlock(pid, NULL));
    CHECK_OK(aclrtDestroyStream(s));
}

/* "At exit the runtime unlocks by force": aclFinalize while LOCKED opens the gate (it
 * releases the devices itself, through no held entry point). */
static void test_finalize_unlocks(void)
{
    int pid = (int)getpid();
    CHECK_OK(aclrtSnapShotProcessLock(pid, NULL));
    CHECK_OK(aclFinalize());
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(1)); /* would block if the gate were still closed */
    CHECK_EQ(aclrtSnapShotProcessUnlock(pid, NULL), ACL_ERROR_SNAPSHOT_UNLOCK_FAILED); /* RUNNING */
    CHECK_OK(aclrtSnapShotProcessLock(pid, NULL));
    CHECK_OK(aclrtSnapShotProcessUnlock(pid, NULL));
    CHECK_OK(aclrtResetDevice(1));
}

int main(void)
{
    mt_mock_env((const char *)NULL);
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_state_machine);
    RUN_TEST(test_resource_calls_block_while_locked);
    RUN_TEST(test_backup_restore_memory);
    RUN_TEST(test_backup_from_a_task_is_refused);
    RUN_TEST(test_finalize_unlocks);
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
