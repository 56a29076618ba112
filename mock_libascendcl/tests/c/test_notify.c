/*
 * test_notify.c - notifies and IPC notifies (src/notify/notify.c, src/ipc/share_notify.c;
 * acl_next_semantics.md §3.4, NTF, G-NTF, G-IPC#进程间共享Notify, RTS-E EE1012): flags,
 * ids, one record wakes exactly one wait (a notify counts to 1), wait timeouts in
 * seconds, the device of the wait, batch reset, aborts, per-SoC limits and support, and
 * a notify created in one process, recorded by another that imported it by key (pid
 * whitelist; only the creator waits).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "ipc_util.h"
#include "mock_test.h"

static atomic_int g_marks;

static void mark_task(void *arg)
{
    (void)arg;
    atomic_fetch_add(&g_marks, 1);
}

static aclrtStreamStatus stream_status(aclrtStream s)
{
    aclrtStreamStatus st = ACL_STREAM_STATUS_RESERVED;
    CHECK_OK(aclrtStreamQuery(s, &st));
    return st;
}

/* Waits (bounded) until g_marks reaches n. */
static void wait_marks(int n)
{
    for (int i = 0; i < 5000 && atomic_load(&g_marks) < n; i++) {
        usleep(1000);
    }
    CHECK_EQ(atomic_load(&g_marks), n);
}

static void *create_without_context(void *arg)
{
    aclrtNotify n = NULL;
    *(aclError *)arg = aclrtCreateNotify(&n, ACL_NOTIFY_DEFAULT);
    return NULL;
}

/* NTF#aclrtCreateNotify: flags DEFAULT 0x0 and DEVICE_USE_ONLY 0x1; ids; handles. */
static void test_create_destroy(void)
{
    aclrtNotify a = NULL, b = NULL;
    CHECK_EQ(aclrtCreateNotify(NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCreateNotify(&a, 2), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtCreateNotify");
    CHECK_OK(aclrtCreateNotify(&a, ACL_NOTIFY_DEFAULT));
    CHECK_OK(aclrtCreateNotify(&b, ACL_NOTIFY_DEVICE_USE_ONLY));
    uint32_t ia = 0, ib = 0;
    CHECK_OK(aclrtGetNotifyId(a, &ia));
    CHECK_OK(aclrtGetNotifyId(b, &ib));
    CHECK(ia != ib);
    CHECK_EQ(aclrtGetNotifyId(a, NULL), ACL_ERROR_INVALID_PARAM);
    aclError rc = ACL_SUCCESS;
    pthread_t t;
    pthread_create(&t, NULL, create_without_context, &rc);
    pthread_join(t, NULL);
    CHECK_EQ(rc, ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_OK(aclrtDestroyNotify(a));
    CHECK_OK(aclrtDestroyNotify(b));
    CHECK_EQ(aclrtDestroyNotify(a), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtGetNotifyId(a, &ia), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtRecordNotify(a, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtDestroyNotify(NULL), ACL_ERROR_INVALID_PARAM);
}

/* G-NTF: a wait resets the notify, so one record wakes exactly one wait, and two records
 * before a wait are one (a notify counts to 1). Timeout in seconds: the stream fails
 * with ACL_ERROR_RT_WAIT_TIMEOUT (mock choice of code). */
static void test_one_record_one_wait(void)
{
    aclrtNotify n = NULL;
    aclrtStream w = NULL, r = NULL;
    CHECK_OK(aclrtCreateNotify(&n, 0));
    CHECK_OK(aclrtCreateStream(&w));
    CHECK_OK(aclrtCreateStream(&r));
    atomic_store(&g_marks, 0);
    CHECK_OK(aclrtWaitAndResetNotify(n, w, 0));
    CHECK_OK(aclrtLaunchHostFunc(w, mark_task, NULL));
    CHECK_OK(aclrtWaitAndResetNotify(n, w, 0));
    CHECK_OK(aclrtLaunchHostFunc(w, mark_task, NULL));
    CHECK_EQ(stream_status(w), ACL_STREAM_STATUS_NOT_READY);
    CHECK_OK(aclrtRecordNotify(n, r));
    CHECK_OK(aclrtSynchronizeStream(r));
    wait_marks(1);
    CHECK_EQ(stream_status(w), ACL_STREAM_STATUS_NOT_READY); /* the second wait still waits */
    CHECK_EQ(atomic_load(&g_marks), 1);
    CHECK_OK(aclrtRecordNotify(n, r));
    CHECK_OK(aclrtSynchronizeStream(w));
    CHECK_EQ(atomic_load(&g_marks), 2);

    /* two records, then two waits: the second one times out after 1 s */
    CHECK_OK(aclrtRecordNotify(n, r));
    CHECK_OK(aclrtRecordNotify(n, NULL)); /* the default stream */
    CHECK_OK(aclrtSynchronizeStream(r));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtWaitAndResetNotify(n, w, 1));
    CHECK_OK(aclrtWaitAndResetNotify(n, w, 1));
    CHECK_EQ(aclrtSynchronizeStream(w), ACL_ERROR_RT_WAIT_TIMEOUT);
    CHECK_OK(aclrtSynchronizeStream(w)); /* reported once (ACL_CONTINUE_ON_FAILURE) */

    CHECK_OK(aclrtDestroyStream(w));
    CHECK_OK(aclrtDestroyStream(r));
    CHECK_OK(aclrtDestroyNotify(n));
}

/* RTS-E EE1012: the wait runs on the device that created the notify; a record may come
 * from any device (that is what notifies are for). */
static void test_devices(void)
{
    aclrtNotify n = NULL;
    CHECK_OK(aclrtCreateNotify(&n, 0));
    CHECK_OK(aclrtSetDevice(1));
    aclrtStream s1 = NULL;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_EQ(aclrtWaitAndResetNotify(n, s1, 0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "device that created");
    CHECK_OK(aclrtRecordNotify(n, s1));
    CHECK_OK(aclrtSynchronizeStream(s1));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtWaitAndResetNotify(n, NULL, 0)); /* the record of device 1 */
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtDestroyNotify(n));
    CHECK_OK(aclrtResetDevice(1));
}

/* NTF#aclrtNotifyBatchReset: all or nothing. */
static void test_batch_reset(void)
{
    aclrtNotify n[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(aclrtCreateNotify(&n[i], 0));
        CHECK_OK(aclrtRecordNotify(n[i], NULL));
    }
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_EQ(aclrtNotifyBatchReset(NULL, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtNotifyBatchReset(n, 0), ACL_ERROR_INVALID_PARAM);
    aclrtNotify with_bad[2] = {n[0], (aclrtNotify)&with_bad};
    CHECK_EQ(aclrtNotifyBatchReset(with_bad, 2), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtNotifyBatchReset(n, 2)); /* n[0], n[1] */
    CHECK_OK(aclrtWaitAndResetNotify(n[0], NULL, 1));
    CHECK_EQ(aclrtSynchronizeStream(NULL), ACL_ERROR_RT_WAIT_TIMEOUT); /* reset: no record left */
    CHECK_OK(aclrtWaitAndResetNotify(n[2], NULL, 1));
    CHECK_OK(aclrtSynchronizeStream(NULL)); /* not in the batch: still recorded */
    for (int i = 0; i < 3; i++) {
        CHECK_OK(aclrtDestroyNotify(n[i]));
    }
}

/* A wait without timeout is interrupted by aclrtStreamAbort; a notify destroyed while a
 * wait holds it stays valid for that wait. */
static void test_abort_and_destroy_while_waiting(void)
{
    aclrtNotify n = NULL;
    aclrtStream w = NULL;
    CHECK_OK(aclrtCreateNotify(&n, 0));
    CHECK_OK(aclrtCreateStream(&w));
    CHECK_OK(aclrtWaitAndResetNotify(n, w, 0));
    CHECK_OK(aclrtDestroyNotify(n));
    CHECK_EQ(stream_status(w), ACL_STREAM_STATUS_NOT_READY);
    CHECK_OK(aclrtStreamAbort(w));
    CHECK_OK(aclrtSynchronizeStream(w));
    CHECK_OK(aclrtDestroyStream(w));
}

/* ================================================================ child shell */

static int child_shell(void)
{
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        return 2;
    }
    aclrtNotify n = NULL;
    aclrtStream s = NULL;
    aclrtCreateStream(&s);
    char line[512];
    while (mt_parent_recv(line, sizeof line) == 0) {
        char cmd[32] = "", arg[128] = "";
        sscanf(line, "%31s %127s", cmd, arg);
        if (strcmp(cmd, "exit") == 0) {
            break;
        } else if (strcmp(cmd, "pid") == 0) {
            int32_t pid = 0;
            aclrtDeviceGetBareTgid(&pid);
            mt_parent_send("%d", pid);
        } else if (strcmp(cmd, "import") == 0) {
            aclError rc = aclrtNotifyImportByKey(&n, arg, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS);
            const char *msg = rc != ACL_SUCCESS ? aclGetRecentErrMsg() : NULL;
            mt_parent_send("%d %s", rc, msg != NULL ? msg : "");
        } else if (strcmp(cmd, "record") == 0) {
            aclError rc = aclrtRecordNotify(n, s);
            mt_parent_send("%d %d", rc, aclrtSynchronizeStream(s));
        } else if (strcmp(cmd, "wait") == 0) { /* only the creator waits */
            uint32_t id = 0;
            mt_parent_send("%d %d %d", aclrtWaitAndResetNotify(n, s, 1), aclrtGetNotifyId(n, &id),
                           aclrtNotifyGetExportKey(n, line, 65, 0));
        } else if (strcmp(cmd, "destroy") == 0) {
            mt_parent_send("%d", aclrtDestroyNotify(n));
        } else if (strcmp(cmd, "limit") == 0) { /* create until the limit, then one more */
            static aclrtNotify all[70000];
            int made = 0;
            aclError rc = ACL_SUCCESS;
            while (made < 70000 && (rc = aclrtCreateNotify(&all[made], 0)) == ACL_SUCCESS) {
                made++;
            }
            aclError again = ACL_ERROR_RT_INTERNAL_ERROR;
            if (made > 0) {
                aclrtDestroyNotify(all[--made]);
                again = aclrtCreateNotify(&all[made++], 0); /* room for one after a destroy */
            }
            for (int i = 0; i < made; i++) {
                aclrtDestroyNotify(all[i]);
            }
            mt_parent_send("%d %d %d", made, rc, again);
        } else if (strcmp(cmd, "support") == 0) { /* BatchReset and IPC notify on this SoC */
            aclrtNotify x = NULL;
            aclrtCreateNotify(&x, 0);
            char key[65];
            int32_t pid = 77;
            aclrtServerPid sp = {0, &pid, 1};
            aclError e = aclrtNotifyGetExportKey(x, key, sizeof key, 0);
            mt_parent_send("%d %d %d", aclrtNotifyBatchReset(&x, 1), e, aclrtNotifySetImportPidInterServer(x, &sp, 1));
            aclrtDestroyNotify(x);
        } else {
            mt_parent_send("unknown");
        }
    }
    aclrtDestroyStream(s);
    aclFinalize();
    return 0;
}

/* G-IPC#进程间共享Notify: the creator exports, whitelists the importer's pid; the
 * importer records, the creator waits; only the creator may wait. */
static void test_ipc_notify(void)
{
    aclrtNotify n = NULL;
    CHECK_OK(aclrtCreateNotify(&n, 0));
    char key[80], key2[80];
    CHECK_EQ(aclrtNotifyGetExportKey(n, key, 64, 0), ACL_ERROR_INVALID_PARAM); /* at least 65 */
    CHECK_EQ(aclrtNotifyGetExportKey(n, key, 65, 1), ACL_ERROR_INVALID_PARAM); /* 0x2 here, not 0x1 */
    CHECK_EQ(aclrtNotifyGetExportKey(n, NULL, 65, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtNotifyGetExportKey(NULL, key, 65, 0), ACL_ERROR_INVALID_PARAM);
    int32_t pid = 99;
    CHECK_EQ(aclrtNotifySetImportPid(n, &pid, 1), ACL_ERROR_RT_PARAM_INVALID); /* not exported yet */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtNotifyGetExportKey first");
    CHECK_OK(aclrtNotifyGetExportKey(n, key, sizeof key, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT));
    CHECK(strncmp(key, "acl-ipc-n-", 10) == 0 && strlen(key) < 65);
    CHECK_OK(aclrtNotifyGetExportKey(n, key2, sizeof key2, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT));
    CHECK_STR_EQ(key2, key); /* the same notify, the same key */
    aclrtNotify mine = NULL;
    CHECK_EQ(aclrtNotifyImportByKey(&mine, key, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT); /* own process */
    CHECK_EQ(aclrtNotifyImportByKey(&mine, key, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtNotifyImportByKey(&mine, "acl-ipc-m-1-0000000000000001-0000000000000001", 0),
             ACL_ERROR_RT_PARAM_INVALID); /* a memory key */
    aclrtServerPid sp = {0, &pid, 1};
    CHECK_EQ(aclrtNotifySetImportPidInterServer(n, &sp, 1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT); /* A3 only */

    mt_child c;
    if (mt_child_start(&c, "shell", NULL, (const char *)NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512], expect[64];
    mt_child_ask(&c, ans, sizeof ans, "import %s", key);
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_NO_PERMISSION);
    mt_child_ask(&c, ans, sizeof ans, "pid");
    int32_t child = atoi(ans);
    CHECK_OK(aclrtNotifySetImportPid(n, &child, 1));
    mt_child_ask(&c, ans, sizeof ans, "import %s", key);
    CHECK_STR_EQ(ans, "0 ");
    mt_child_ask(&c, ans, sizeof ans, "wait"); /* the importer neither waits nor exports */
    snprintf(expect, sizeof expect, "%d 0 %d", ACL_ERROR_RT_PARAM_INVALID, ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_EQ(ans, expect);

    aclrtStream w = NULL;
    CHECK_OK(aclrtCreateStream(&w));
    atomic_store(&g_marks, 0);
    CHECK_OK(aclrtWaitAndResetNotify(n, w, 0));
    CHECK_OK(aclrtLaunchHostFunc(w, mark_task, NULL));
    CHECK_EQ(stream_status(w), ACL_STREAM_STATUS_NOT_READY);
    mt_child_ask(&c, ans, sizeof ans, "record"); /* the other process's record ... */
    CHECK_STR_EQ(ans, "0 0");
    CHECK_OK(aclrtSynchronizeStream(w)); /* ... wakes the wait here */
    CHECK_EQ(atomic_load(&g_marks), 1);
    CHECK_OK(aclrtDestroyNotify(n)); /* each process destroys its own */
    mt_child_ask(&c, ans, sizeof ans, "record"); /* still a valid notify there */
    CHECK_STR_EQ(ans, "0 0");
    mt_child_ask(&c, ans, sizeof ans, "destroy");
    CHECK_STR_EQ(ans, "0");

    /* many notifies exported and destroyed: the export table forgets them (its sweep
     * asks the notify registry without holding its own lock) */
    for (int i = 0; i < 300; i++) {
        aclrtNotify x = NULL;
        CHECK_OK(aclrtCreateNotify(&x, 0));
        CHECK_OK(aclrtNotifyGetExportKey(x, key2, sizeof key2, 0));
        CHECK_OK(aclrtDestroyNotify(x));
    }
    /* destroyed before the import: the import fails */
    aclrtNotify gone = NULL;
    CHECK_OK(aclrtCreateNotify(&gone, 0));
    CHECK_OK(aclrtNotifyGetExportKey(gone, key, sizeof key, ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION));
    CHECK_OK(aclrtDestroyNotify(gone));
    mt_child_ask(&c, ans, sizeof ans, "import %s", key);
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_IPC_ERROR);
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_OK(aclrtDestroyStream(w));
}

/* NTF#aclrtCreateNotify limits per device and the support of BatchReset (950/A3/A2), IPC
 * notify (not 310B) and ...InterServer (A3), per SoC. */
static void test_limits_and_support(void)
{
    static const char *const cases[][3] = {
        /* SoC,                                limit answer,   support answer */
        {"ASCEND_MOCK_SOC_NAME=Ascend310P3", "1024 207009 0", "207000 0 207000"},
        {"ASCEND_MOCK_SOC_NAME=Ascend310B1", "2048 207009 0", "207000 207000 207000"},
        {"ASCEND_MOCK_SOC_NAME=Ascend910B1", "8192 207009 0", "0 0 207000"},
        {"ASCEND_MOCK_SOC_NAME=Ascend910_9391", "8192 207009 0", "0 0 0"},
        {"ASCEND_MOCK_SOC_NAME=Ascend950PR_9599", "65535 207009 0", "0 0 207000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *const env[] = {cases[i][0], NULL};
        mt_child c;
        if (mt_child_start(&c, "shell", env, (const char *)NULL) != 0) {
            CHECK(0);
            return;
        }
        char ans[128];
        mt_child_ask(&c, ans, sizeof ans, "limit");
        CHECK_STR_EQ(ans, cases[i][1]);
        mt_child_ask(&c, ans, sizeof ans, "support");
        CHECK_STR_EQ(ans, cases[i][2]);
        mt_child_send(&c, "exit");
        CHECK_EQ(mt_child_wait(&c), 0);
    }
}

int main(int argc, char **argv)
{
    if (mt_is_child(argc, argv)) {
        return child_shell();
    }
    mt_mock_env("ASCEND_MOCK_DEVICE_COUNT", "2", (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_create_destroy);
    RUN_TEST(test_one_record_one_wait);
    RUN_TEST(test_devices);
    RUN_TEST(test_batch_reset);
    RUN_TEST(test_abort_and_destroy_while_waiting);
    RUN_TEST(test_ipc_notify);
    RUN_TEST(test_limits_and_support);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
