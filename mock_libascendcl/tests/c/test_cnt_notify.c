/*
 * test_cnt_notify.c - count notifies (src/notify/cnt_notify.c; acl_next_semantics.md
 * §3.5, CNT, ST#aclrtCntNotifyWaitInfo, ENUM#aclrtCntNotifyRecordMode): the record modes
 * (SET_VALUE, ADD, BIT_OR, BIT_AND), the wait conditions (LESS, EQUAL, BIGGER,
 * BIGGER_OR_EQUAL, EQUAL_WITH_BITMASK) with isClear, timeouts in seconds, reset, the NULL
 * (default) stream, argument checks, and the support matrix: this program simulates an
 * Ascend 950PR; a child on an Atlas A2 gets ACL_ERROR_RT_FEATURE_NOT_SUPPORT everywhere.
 */
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

static aclError record(aclrtCntNotify c, aclrtStream s, int mode, uint32_t value)
{
    aclrtCntNotifyRecordInfo info = {(aclrtCntNotifyRecordMode)mode, value};
    return aclrtCntNotifyRecord(c, s, &info);
}

static aclError wait_for(aclrtCntNotify c, aclrtStream s, int mode, uint32_t value, uint32_t timeout_s, uint8_t clear)
{
    aclrtCntNotifyWaitInfo info;
    memset(&info, 0, sizeof info);
    info.mode = (aclrtCntNotifyWaitMode)mode;
    info.value = value;
    info.timeout = timeout_s;
    info.isClear = clear;
    return aclrtCntNotifyWaitWithTimeout(c, s, &info);
}

/* Each wait is satisfied by the records before it (all on the default stream). */
static void test_modes_and_conditions(void)
{
    aclrtCntNotify c = NULL;
    CHECK_OK(aclrtCntNotifyCreate(&c, 0));
    uint32_t id = 0;
    CHECK_OK(aclrtCntNotifyGetId(c, &id));
    CHECK_OK(record(c, NULL, ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, 1));
    CHECK_OK(record(c, NULL, ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, 1));
    CHECK_OK(record(c, NULL, ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, 1));
    CHECK_OK(wait_for(c, NULL, ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE, 3, 1, 1)); /* 3, then cleared */
    CHECK_OK(wait_for(c, NULL, ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE, 0, 1, 0));
    CHECK_OK(record(c, NULL, ACL_RT_CNT_NOTIFY_RECORD_SET_VALUE_MODE, 5));
    CHECK_OK(wait_for(c, NULL, ACL_RT_CNT_NOTIFY_WAIT_BIGGER_MODE, 4, 1, 0));
    CHECK_OK(wait_for(c, NULL, ACL_RT_CNT_NOTIFY_WAIT_BIGGER_OR_EQUAL_MODE, 5, 1, 0));
    CHECK_OK(wait_for(c, NULL, ACL_RT_CNT_NOTIFY_WAIT_LESS_MODE, 6, 1, 0));
    CHECK_OK(record(c, NULL, ACL_RT_CNT_NOTIFY_RECORD_BIT_OR_MODE, 2)); /* 7 */
    CHECK_OK(wait_for(c, NULL, ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE, 7, 1, 0));
    CHECK_OK(record(c, NULL, ACL_RT_CNT_NOTIFY_RECORD_BIT_AND_MODE, 6)); /* 6 */
    CHECK_OK(wait_for(c, NULL, ACL_RT_CNT_NOTIFY_WAIT_EQUAL_WITH_BITMASK_MODE, 4, 1, 0)); /* 6 & 4 == 4 */
    CHECK_OK(wait_for(c, NULL, ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE, 6, 1, 0));
    CHECK_OK(aclrtCntNotifyReset(c, NULL));
    CHECK_OK(wait_for(c, NULL, ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE, 0, 1, 0));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtCntNotifyDestroy(c));
}

/* A wait holds its stream until a record on another stream satisfies it; on expiry the
 * stream fails with ACL_ERROR_RT_WAIT_TIMEOUT (mock choice of code). */
static void test_wait_blocks_and_times_out(void)
{
    aclrtCntNotify c = NULL;
    aclrtStream w = NULL, r = NULL;
    CHECK_OK(aclrtCntNotifyCreate(&c, 0));
    CHECK_OK(aclrtCreateStream(&w));
    CHECK_OK(aclrtCreateStream(&r));
    atomic_store(&g_marks, 0);
    CHECK_OK(wait_for(c, w, ACL_RT_CNT_NOTIFY_WAIT_BIGGER_OR_EQUAL_MODE, 10, 0, 0));
    CHECK_OK(aclrtLaunchHostFunc(w, mark_task, NULL));
    CHECK_OK(record(c, r, ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, 4));
    CHECK_OK(aclrtSynchronizeStream(r));
    aclrtStreamStatus st = ACL_STREAM_STATUS_RESERVED;
    CHECK_OK(aclrtStreamQuery(w, &st));
    CHECK_EQ(st, ACL_STREAM_STATUS_NOT_READY); /* 4 < 10 */
    CHECK_EQ(atomic_load(&g_marks), 0);
    CHECK_OK(record(c, r, ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, 6));
    CHECK_OK(aclrtSynchronizeStream(w));
    CHECK_EQ(atomic_load(&g_marks), 1);
    CHECK_OK(wait_for(c, w, ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE, 99, 1, 0));
    CHECK_EQ(aclrtSynchronizeStream(w), ACL_ERROR_RT_WAIT_TIMEOUT);
    /* an abort ends a wait without timeout */
    CHECK_OK(wait_for(c, w, ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE, 99, 0, 0));
    CHECK_OK(aclrtCntNotifyDestroy(c)); /* the waiting task keeps it */
    CHECK_OK(aclrtStreamAbort(w));
    CHECK_OK(aclrtSynchronizeStream(w));
    CHECK_OK(aclrtDestroyStream(w));
    CHECK_OK(aclrtDestroyStream(r));
}

static void test_arguments(void)
{
    aclrtCntNotify c = NULL;
    CHECK_EQ(aclrtCntNotifyCreate(NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCntNotifyCreate(&c, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtCntNotifyCreate(&c, 0));
    CHECK_EQ(record(c, NULL, 3, 1), ACL_ERROR_INVALID_PARAM); /* 3 is not a mode */
    CHECK_EQ(record(c, NULL, 5, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCntNotifyRecord(c, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(wait_for(c, NULL, 5, 1, 1, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(wait_for(c, NULL, ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE, 1, 1, 2), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCntNotifyWaitWithTimeout(c, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCntNotifyGetId(c, NULL), ACL_ERROR_INVALID_PARAM);
    aclrtStream dead = (aclrtStream)&c;
    CHECK_EQ(aclrtCntNotifyReset(c, dead), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtCntNotifyDestroy(c));
    uint32_t id = 0;
    CHECK_EQ(aclrtCntNotifyGetId(c, &id), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCntNotifyDestroy(c), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(record(c, NULL, ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, 1), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtCntNotifyRecord");
}

/* §3.5: only 950 has count notifies. */
static int child_other_soc(void)
{
    aclInit(NULL);
    aclrtSetDevice(0);
    aclrtCntNotify c = NULL;
    uint32_t id = 0;
    aclrtCntNotify fake = (aclrtCntNotify)&c;
    mt_parent_send("%d %d %d %d %d %d", aclrtCntNotifyCreate(&c, 0), aclrtCntNotifyDestroy(fake),
                   aclrtCntNotifyGetId(fake, &id), record(fake, NULL, 0, 1), aclrtCntNotifyReset(fake, NULL),
                   wait_for(fake, NULL, 0, 1, 1, 0));
    aclFinalize();
    return 0;
}

static void test_other_soc(void)
{
    const char *const a2[] = {"ASCEND_MOCK_SOC_NAME=Ascend910B1", NULL};
    mt_child c;
    if (mt_child_start(&c, "a2", a2, (const char *)NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[128];
    CHECK_EQ(mt_child_recv(&c, ans, sizeof ans), 0);
    CHECK_STR_EQ(ans, "207000 207000 207000 207000 207000 207000");
    CHECK_EQ(mt_child_wait(&c), 0);
}

int main(int argc, char **argv)
{
    if (mt_is_child(argc, argv)) {
        return child_other_soc();
    }
    mt_mock_env("ASCEND_MOCK_SOC_NAME", "Ascend950PR_9599", (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_modes_and_conditions);
    RUN_TEST(test_wait_blocks_and_times_out);
    RUN_TEST(test_arguments);
    RUN_TEST(test_other_soc);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
