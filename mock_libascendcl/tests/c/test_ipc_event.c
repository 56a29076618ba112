/*
 * test_ipc_event.c - IPC events (src/stream/event.c, src/ipc/share_event.c;
 * acl_next_semantics.md §3.3, EVT#aclrtCreateEventExWithFlag, EVT#aclrtIpcGetEventHandle,
 * D-EVT 4.4): the creation rules (ACL_EVENT_IPC alone, per SoC), the calls that refuse
 * IPC events, the 64-byte handle, and an event recorded on a stream in one process and
 * waited on in another (aclrtStreamWaitEvent, aclrtSynchronizeEvent) in both directions;
 * a wait on an event never recorded ends at once; the creator must not destroy before the
 * other process opened; each process destroys its own handle.
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

/* aclrtQueryEvent is deprecated, but its refusal of IPC events is part of the rules. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* ---------------------------------------------------------------- helpers */

/* A stream blocked by a host function until the gate opens. */
static atomic_int g_gate;

static void gate_task(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_gate)) {
        usleep(1000);
    }
}

static atomic_int g_mark;

static void mark_task(void *arg)
{
    (void)arg;
    atomic_store(&g_mark, 1);
}

static void to_hex(const aclrtIpcEventHandle *h, char *out)
{
    const unsigned char *b = (const unsigned char *)h->reserved;
    for (size_t i = 0; i < sizeof h->reserved; i++) {
        sprintf(out + 2 * i, "%02x", b[i]);
    }
}

static void from_hex(const char *s, aclrtIpcEventHandle *h)
{
    memset(h, 0, sizeof *h);
    for (size_t i = 0; i < sizeof h->reserved && s[2 * i] && s[2 * i + 1]; i++) {
        unsigned v = 0;
        sscanf(s + 2 * i, "%2x", &v);
        h->reserved[i] = (char)v;
    }
}

static aclrtEventRecordedStatus status_of(aclrtEvent e)
{
    aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    CHECK_OK(aclrtQueryEventStatus(e, &st));
    return st;
}

/* ================================================================ child shell */

static int child_shell(void)
{
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        return 2;
    }
    aclrtEvent ev = NULL;
    aclrtStream s = NULL;
    aclrtCreateStream(&s);
    char line[512];
    while (mt_parent_recv(line, sizeof line) == 0) {
        char cmd[32] = "", arg[200] = "";
        sscanf(line, "%31s %199s", cmd, arg);
        if (strcmp(cmd, "exit") == 0) {
            break;
        } else if (strcmp(cmd, "open") == 0) {
            aclrtIpcEventHandle h;
            from_hex(arg, &h);
            aclError rc = aclrtIpcOpenEventHandle(h, &ev);
            const char *msg = rc != ACL_SUCCESS ? aclGetRecentErrMsg() : NULL;
            mt_parent_send("%d %s", rc, msg != NULL ? msg : "");
        } else if (strcmp(cmd, "refusals") == 0) {
            /* §3.3: the opened event refuses what the created one does */
            aclrtEventStatus st;
            aclrtEventWaitStatus ws;
            uint32_t id = 0;
            uint64_t ts = 0;
            float ms = 0;
            aclrtIpcEventHandle h;
            mt_parent_send("%d %d %d %d %d %d %d", aclrtResetEvent(ev, s), aclrtQueryEvent(ev, &st),
                           aclrtQueryEventWaitStatus(ev, &ws), aclrtGetEventId(ev, &id),
                           aclrtEventGetTimestamp(ev, &ts), aclrtEventElapsedTime(&ms, ev, ev),
                           aclrtIpcGetEventHandle(ev, &h)); /* only its creator exports it */
        } else if (strcmp(cmd, "wait") == 0) { /* the stream waits for the event, then marks */
            atomic_store(&g_mark, 0);
            aclError rc = aclrtStreamWaitEvent(s, ev);
            aclError rc2 = aclrtLaunchHostFunc(s, mark_task, NULL);
            mt_parent_send("%d %d", rc, rc2);
        } else if (strcmp(cmd, "query") == 0) {
            aclrtStreamStatus st = ACL_STREAM_STATUS_RESERVED;
            aclError rc = aclrtStreamQuery(s, &st);
            mt_parent_send("%d %d %d", rc, (int)st, atomic_load(&g_mark));
        } else if (strcmp(cmd, "syncstream") == 0) {
            aclError rc = aclrtSynchronizeStream(s);
            mt_parent_send("%d %d", rc, atomic_load(&g_mark));
        } else if (strcmp(cmd, "syncevent") == 0) {
            mt_parent_send("%d", aclrtSynchronizeEvent(ev));
        } else if (strcmp(cmd, "status") == 0) {
            aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_NOT_READY;
            aclError rc = aclrtQueryEventStatus(ev, &st);
            mt_parent_send("%d %d", rc, (int)st);
        } else if (strcmp(cmd, "gatedrecord") == 0) { /* record behind a closed gate */
            atomic_store(&g_gate, 0);
            aclError rc = aclrtLaunchHostFunc(s, gate_task, NULL);
            aclError rc2 = aclrtRecordEvent(ev, s);
            mt_parent_send("%d %d", rc, rc2);
        } else if (strcmp(cmd, "opengate") == 0) {
            atomic_store(&g_gate, 1);
            mt_parent_send("%d", aclrtSynchronizeStream(s));
        } else if (strcmp(cmd, "destroy") == 0) {
            mt_parent_send("%d", aclrtDestroyEvent(ev));
        } else if (strcmp(cmd, "create") == 0) { /* the SoC rules in this child's SoC */
            aclrtEvent e = NULL;
            aclError rc = aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC);
            aclrtIpcEventHandle h;
            aclError rc2 = rc == ACL_SUCCESS ? aclrtIpcGetEventHandle(e, &h) : rc;
            if (e != NULL) {
                aclrtDestroyEvent(e);
            }
            mt_parent_send("%d %d", rc, rc2);
        } else {
            mt_parent_send("unknown");
        }
    }
    aclrtDestroyStream(s);
    aclFinalize();
    return 0;
}

/* ================================================================ parent side */

/* §3.3: ACL_EVENT_IPC must not be ORed; the refused calls; the handle. */
static void test_creation_rules_and_refusals(void)
{
    aclrtEvent e = NULL;
    CHECK_EQ(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC | ACL_EVENT_SYNC), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC | ACL_EVENT_TIME_LINE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCreateEventWithFlag(&e, ACL_EVENT_IPC), ACL_ERROR_RT_PARAM_INVALID); /* Ex only (§9.4) */
    CHECK_OK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    aclrtEventStatus st;
    aclrtEventWaitStatus ws;
    uint32_t id = 0;
    uint64_t ts = 0;
    float ms = 0;
    CHECK_EQ(aclrtResetEvent(e, s), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtQueryEvent(e, &st), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtQueryEventWaitStatus(e, &ws), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtGetEventId(e, &id), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "ACL_EVENT_IPC");
    CHECK_EQ(aclrtEventGetTimestamp(e, &ts), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtEventElapsedTime(&ms, e, e), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    /* never recorded: complete; a wait on it ends at once (D-EVT 4.4) */
    CHECK_EQ(status_of(e), ACL_EVENT_RECORDED_STATUS_COMPLETE);
    CHECK_OK(aclrtSynchronizeEvent(e));
    CHECK_OK(aclrtStreamWaitEvent(s, e));
    CHECK_OK(aclrtSynchronizeStreamWithTimeout(s, 10000));
    /* recorded: complete once the record ran */
    atomic_store(&g_gate, 0);
    CHECK_OK(aclrtLaunchHostFunc(s, gate_task, NULL));
    CHECK_OK(aclrtRecordEvent(e, s));
    CHECK_EQ(status_of(e), ACL_EVENT_RECORDED_STATUS_NOT_READY);
    CHECK_EQ(aclrtSynchronizeEventWithTimeout(e, 20), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    atomic_store(&g_gate, 1);
    CHECK_OK(aclrtSynchronizeEvent(e));
    CHECK_EQ(status_of(e), ACL_EVENT_RECORDED_STATUS_COMPLETE);

    aclrtIpcEventHandle h, h2;
    CHECK_EQ(aclrtIpcGetEventHandle(e, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcGetEventHandle(NULL, &h), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtIpcGetEventHandle(e, &h));
    CHECK_OK(aclrtIpcGetEventHandle(e, &h2));
    CHECK(memcmp(&h, &h2, sizeof h) == 0); /* the same event, the same handle */
    aclrtEvent plain = NULL;
    CHECK_OK(aclrtCreateEvent(&plain));
    CHECK_EQ(aclrtIpcGetEventHandle(plain, &h2), ACL_ERROR_RT_PARAM_INVALID); /* only IPC events */
    CHECK_OK(aclrtDestroyEvent(plain));
    aclrtEvent mine = NULL;
    CHECK_EQ(aclrtIpcOpenEventHandle(h, &mine), ACL_ERROR_RT_FEATURE_NOT_SUPPORT); /* own process */
    aclrtIpcEventHandle junk;
    memset(&junk, 0x5F, sizeof junk);
    CHECK_EQ(aclrtIpcOpenEventHandle(junk, &mine), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtIpcOpenEventHandle(h, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyEvent(e));
}

/* G-IPC flow, both directions: a record in one process, a stream wait and an event
 * synchronize in the other; the waiting stream does not run past the wait before the
 * record ran. */
static void test_record_here_wait_there_and_back(void)
{
    aclrtEvent e = NULL;
    CHECK_OK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC));
    aclrtIpcEventHandle h;
    CHECK_OK(aclrtIpcGetEventHandle(e, &h));
    char hex[2 * ACL_IPC_EVENT_HANDLE_SIZE + 1];
    to_hex(&h, hex);
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    mt_child c;
    if (mt_child_start(&c, "shell", NULL, (const char *)NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512], expect[64];
    mt_child_ask(&c, ans, sizeof ans, "open %s", hex);
    CHECK_STR_EQ(ans, "0 ");
    mt_child_ask(&c, ans, sizeof ans, "refusals");
    snprintf(expect, sizeof expect, "%d %d %d %d %d %d %d", ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_EQ(ans, expect);
    /* nothing recorded yet: the other process's wait ends at once */
    mt_child_ask(&c, ans, sizeof ans, "wait");
    CHECK_STR_EQ(ans, "0 0");
    mt_child_ask(&c, ans, sizeof ans, "syncstream");
    CHECK_STR_EQ(ans, "0 1");

    /* here: a record held back by a gate; there: a stream wait then a mark */
    atomic_store(&g_gate, 0);
    CHECK_OK(aclrtLaunchHostFunc(s, gate_task, NULL));
    CHECK_OK(aclrtRecordEvent(e, s));
    mt_child_ask(&c, ans, sizeof ans, "wait");
    CHECK_STR_EQ(ans, "0 0");
    mt_child_ask(&c, ans, sizeof ans, "status");
    snprintf(expect, sizeof expect, "0 %d", (int)ACL_EVENT_RECORDED_STATUS_NOT_READY);
    CHECK_STR_EQ(ans, expect);
    mt_child_ask(&c, ans, sizeof ans, "query");
    snprintf(expect, sizeof expect, "0 %d 0", (int)ACL_STREAM_STATUS_NOT_READY);
    CHECK_STR_EQ(ans, expect); /* held at the wait: not marked */
    atomic_store(&g_gate, 1);  /* the record runs here ... */
    CHECK_OK(aclrtSynchronizeStream(s));
    mt_child_ask(&c, ans, sizeof ans, "syncstream");
    CHECK_STR_EQ(ans, "0 1"); /* ... and releases the wait there */
    mt_child_ask(&c, ans, sizeof ans, "syncevent");
    CHECK_STR_EQ(ans, "0");

    /* there: a gated record; here: a stream wait, an event synchronize */
    mt_child_ask(&c, ans, sizeof ans, "gatedrecord");
    CHECK_STR_EQ(ans, "0 0");
    CHECK_EQ(status_of(e), ACL_EVENT_RECORDED_STATUS_NOT_READY);
    atomic_store(&g_mark, 0);
    CHECK_OK(aclrtStreamWaitEvent(s, e));
    CHECK_OK(aclrtLaunchHostFunc(s, mark_task, NULL));
    aclrtStreamStatus sst = ACL_STREAM_STATUS_RESERVED;
    CHECK_OK(aclrtStreamQuery(s, &sst));
    CHECK_EQ(sst, ACL_STREAM_STATUS_NOT_READY);
    CHECK_EQ(atomic_load(&g_mark), 0);
    mt_child_ask(&c, ans, sizeof ans, "opengate");
    CHECK_STR_EQ(ans, "0");
    CHECK_OK(aclrtSynchronizeEvent(e));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(atomic_load(&g_mark), 1);

    /* the creator destroys its handle; the opener's event keeps working */
    CHECK_OK(aclrtDestroyEvent(e));
    mt_child_ask(&c, ans, sizeof ans, "gatedrecord");
    mt_child_ask(&c, ans, sizeof ans, "opengate");
    mt_child_ask(&c, ans, sizeof ans, "syncevent");
    CHECK_STR_EQ(ans, "0");
    mt_child_ask(&c, ans, sizeof ans, "destroy");
    CHECK_STR_EQ(ans, "0");
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_OK(aclrtDestroyStream(s));
}

/* §3.3: the creator must not destroy its event before the other process opened it. */
static void test_destroyed_before_open(void)
{
    aclrtEvent e = NULL;
    CHECK_OK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC));
    aclrtIpcEventHandle h;
    CHECK_OK(aclrtIpcGetEventHandle(e, &h));
    CHECK_OK(aclrtDestroyEvent(e));
    char hex[2 * ACL_IPC_EVENT_HANDLE_SIZE + 1];
    to_hex(&h, hex);
    mt_child c;
    if (mt_child_start(&c, "shell", NULL, (const char *)NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "open %s", hex);
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_IPC_ERROR);
    CHECK(strstr(ans, "no longer exists") != NULL);
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
}

/* Many events exported and destroyed: the export table forgets the dead ones (its
 * sweep asks the event registry without holding its own lock: the test builds check
 * the lock order), and a live one is still opened. */
static void test_many_exports(void)
{
    aclrtIpcEventHandle h;
    for (int i = 0; i < 300; i++) {
        aclrtEvent e = NULL;
        CHECK_OK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC));
        CHECK_OK(aclrtIpcGetEventHandle(e, &h));
        CHECK_OK(aclrtDestroyEvent(e));
    }
    aclrtEvent live = NULL;
    CHECK_OK(aclrtCreateEventExWithFlag(&live, ACL_EVENT_IPC));
    CHECK_OK(aclrtIpcGetEventHandle(live, &h));
    char hex[2 * ACL_IPC_EVENT_HANDLE_SIZE + 1];
    to_hex(&h, hex);
    mt_child c;
    if (mt_child_start(&c, "shell", NULL, (const char *)NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "open %s", hex);
    CHECK_STR_EQ(ans, "0 ");
    mt_child_ask(&c, ans, sizeof ans, "destroy");
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_OK(aclrtDestroyEvent(live));
}

/* Support (EVT#aclrtIpcGetEventHandle): 950PR, A3, A2; not 950DT, 310P. */
static void test_soc_support(void)
{
    static const char *const socs[][2] = {
        {"ASCEND_MOCK_SOC_NAME=Ascend950PR_9599", "0 0"},
        {"ASCEND_MOCK_SOC_NAME=Ascend910_9391", "0 0"},
        {"ASCEND_MOCK_SOC_NAME=Ascend950DT_9591", "207000 207000"},
        {"ASCEND_MOCK_SOC_NAME=Ascend310P3", "207000 207000"},
    };
    for (size_t i = 0; i < sizeof socs / sizeof socs[0]; i++) {
        const char *const env[] = {socs[i][0], NULL};
        mt_child c;
        if (mt_child_start(&c, "shell", env, (const char *)NULL) != 0) {
            CHECK(0);
            return;
        }
        char ans[512];
        mt_child_ask(&c, ans, sizeof ans, "create");
        CHECK_STR_EQ(ans, socs[i][1]);
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
    RUN_TEST(test_creation_rules_and_refusals);
    RUN_TEST(test_record_here_wait_there_and_back);
    RUN_TEST(test_destroyed_before_open);
    RUN_TEST(test_many_exports);
    RUN_TEST(test_soc_support);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
