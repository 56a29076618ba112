/* test_tdt_queue.c - libacl_tdt_queue.so (acl/acl_tdt_queue.h): queues with depth,
 * enqueue/dequeue with user data and timeouts (host and device memory), producer and
 * consumer threads, routes 1->N with cycle detection, status and queries, the shared
 * buffer functions per SoC (acl_next_semantics.md sections 6.2 and 5.5). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "acl/acl.h"
#include "acl/acl_tdt_queue.h"
#include "mock_test.h"

static uint32_t make_queue(const char *name, uint32_t depth)
{
    acltdtQueueAttr *attr = acltdtCreateQueueAttr();
    CHECK(attr != NULL);
    if (name != NULL) {
        CHECK_OK(acltdtSetQueueAttr(attr, ACL_TDT_QUEUE_NAME_PTR, sizeof(char *), &name));
    }
    CHECK_OK(acltdtSetQueueAttr(attr, ACL_TDT_QUEUE_DEPTH_UINT32, sizeof depth, &depth));
    uint32_t qid = 0;
    CHECK_OK(acltdtCreateQueue(attr, &qid));
    CHECK_OK(acltdtDestroyQueueAttr(attr));
    return qid;
}

static aclError put(uint32_t qid, int32_t v, int32_t timeout)
{
    return acltdtEnqueueData(qid, &v, sizeof v, NULL, 0, timeout, 0);
}

static int32_t get(uint32_t qid, int32_t timeout, aclError *rc)
{
    int32_t v = -1;
    size_t n = 0;
    *rc = acltdtDequeueData(qid, &v, sizeof v, &n, NULL, 0, timeout);
    return v;
}

/* section 6.2 "Attribute and route objects": name/depth attributes */
static void test_attributes(void)
{
    acltdtQueueAttr *attr = acltdtCreateQueueAttr();
    uint32_t depth = 0;
    size_t ret = 0;
    CHECK_OK(acltdtGetQueueAttr(attr, ACL_TDT_QUEUE_DEPTH_UINT32, 4, &ret, &depth));
    CHECK(depth == 8 && ret == 4); /* the default depth */
    const char *name = "frames";
    CHECK_OK(acltdtSetQueueAttr(attr, ACL_TDT_QUEUE_NAME_PTR, sizeof(char *), &name));
    const char *back = NULL;
    CHECK_OK(acltdtGetQueueAttr(attr, ACL_TDT_QUEUE_NAME_PTR, sizeof(char *), &ret, &back));
    CHECK_STR_EQ(back, "frames");
    CHECK_EQ(ret, sizeof(char *));
    /* wrong lengths, bad values, bad handles */
    CHECK_EQ(acltdtSetQueueAttr(attr, ACL_TDT_QUEUE_DEPTH_UINT32, 8, &depth), ACL_ERROR_INVALID_PARAM);
    depth = 0;
    CHECK_EQ(acltdtSetQueueAttr(attr, ACL_TDT_QUEUE_DEPTH_UINT32, 4, &depth), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "acltdtSetQueueAttr: the queue depth 0");
    CHECK_EQ(acltdtGetQueueAttr(attr, ACL_TDT_QUEUE_DEPTH_UINT32, 2, &ret, &depth), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(acltdtSetQueueAttr(attr, (acltdtQueueAttrType)7, 4, &depth), ACL_ERROR_INVALID_PARAM);
    const char *empty = "";
    CHECK_EQ(acltdtSetQueueAttr(attr, ACL_TDT_QUEUE_NAME_PTR, sizeof(char *), &empty), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(acltdtDestroyQueueAttr(attr));
    CHECK_EQ(acltdtDestroyQueueAttr(attr), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(acltdtGetQueueAttr(attr, ACL_TDT_QUEUE_DEPTH_UINT32, 4, &ret, &depth), ACL_ERROR_INVALID_PARAM);
    uint32_t qid;
    CHECK_EQ(acltdtCreateQueue(attr, &qid), ACL_ERROR_INVALID_PARAM); /* destroyed attr */
}

/* section 6.2: depth, FIFO, timeouts, user data, sizes */
static void test_enqueue_dequeue(void)
{
    uint32_t q = 0;
    CHECK_OK(acltdtCreateQueue(NULL, &q)); /* depth 8 */
    CHECK_NE(q, 0);
    for (int32_t i = 0; i < 8; i++) {
        CHECK_OK(put(q, i, 0));
    }
    CHECK_EQ(put(q, 8, 0), ACL_ERROR_RT_QUEUE_FULL);
    CHECK_EQ(put(q, 8, 15), ACL_ERROR_RT_QUEUE_FULL);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "acltdtEnqueueData: queue");
    aclError rc;
    for (int32_t i = 0; i < 8; i++) {
        CHECK_EQ(get(q, 0, &rc), i);
        CHECK_OK(rc);
    }
    get(q, 0, &rc);
    CHECK_EQ(rc, ACL_ERROR_RT_QUEUE_EMPTY);
    get(q, 10, &rc);
    CHECK_EQ(rc, ACL_ERROR_RT_QUEUE_EMPTY);

    /* user data (<= 96 bytes) travels with the element */
    unsigned char user[96], back[96];
    for (int i = 0; i < 96; i++) {
        user[i] = (unsigned char)i;
    }
    char msg[] = "hello queue";
    CHECK_OK(acltdtEnqueueData(q, msg, sizeof msg, user, sizeof user, -1, 0));
    CHECK_EQ(acltdtEnqueueData(q, msg, sizeof msg, user, 97, -1, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(acltdtEnqueueData(q, msg, sizeof msg, NULL, 0, -1, 1), ACL_ERROR_INVALID_PARAM); /* rsv */
    CHECK_EQ(acltdtEnqueueData(q, msg, sizeof msg, NULL, 0, -5, 0), ACL_ERROR_INVALID_PARAM);
    char small[4];
    size_t got = 0;
    /* too small a buffer: the size is reported and the element stays */
    CHECK_EQ(acltdtDequeueData(q, small, sizeof small, &got, NULL, 0, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(got, sizeof msg);
    char out[32] = {0};
    CHECK_OK(acltdtDequeueData(q, out, sizeof out, &got, back, sizeof back, 0));
    CHECK_EQ(got, sizeof msg);
    CHECK_STR_EQ(out, "hello queue");
    CHECK(memcmp(user, back, sizeof back) == 0);

    /* unknown / destroyed queues */
    CHECK_OK(acltdtDestroyQueue(q));
    CHECK_EQ(acltdtDestroyQueue(q), ACL_ERROR_INVALID_QUEUE_ID);
    CHECK_EQ(put(q, 1, 0), ACL_ERROR_INVALID_QUEUE_ID);
    get(q, 0, &rc);
    CHECK_EQ(rc, ACL_ERROR_INVALID_QUEUE_ID);
    CHECK_EQ(put(0, 1, 0), ACL_ERROR_INVALID_QUEUE_ID);
    /* a reused slot gets a new id: the old one stays invalid */
    uint32_t q2 = 0;
    CHECK_OK(acltdtCreateQueue(NULL, &q2));
    CHECK_NE(q2, q);
    CHECK_EQ(put(q, 1, 0), ACL_ERROR_INVALID_QUEUE_ID);
    CHECK_OK(acltdtDestroyQueue(q2));
    CHECK_EQ(acltdtCreateQueue(NULL, NULL), ACL_ERROR_INVALID_PARAM);
    /* buffers of every product are unsupported (docs), so are grant/attach */
    acltdtBuf b = NULL;
    uint32_t perm = 0;
    CHECK_EQ(acltdtEnqueue(q2, b, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(acltdtDequeue(q2, &b, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(acltdtGrantQueue(q2, 1, ACL_TDT_QUEUE_PERMISSION_ENQUEUE, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(acltdtAttachQueue(q2, 0, &perm), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
}

/* section 6.2: "data may be in host or device memory" */
static void test_device_memory(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    uint32_t q = make_queue("dev", 2);
    int32_t *dev = NULL;
    CHECK_OK(aclrtMalloc((void **)&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    int32_t host[4] = {5, 6, 7, 8};
    CHECK_OK(aclrtMemcpy(dev, 64, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(acltdtEnqueueData(q, dev, sizeof host, NULL, 0, 0, 0)); /* from device memory */
    int32_t *dev2 = NULL;
    CHECK_OK(aclrtMalloc((void **)&dev2, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    size_t n = 0;
    CHECK_OK(acltdtDequeueData(q, dev2, 64, &n, NULL, 0, 0)); /* into device memory */
    CHECK_EQ(n, sizeof host);
    int32_t back[4] = {0};
    CHECK_OK(aclrtMemcpy(back, sizeof back, dev2, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(back, host, sizeof host) == 0);
    CHECK_OK(aclrtFree(dev));
    CHECK_OK(aclrtFree(dev2));
    CHECK_OK(acltdtDestroyQueue(q));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
}

/* ---------------------------------------------------------------- routes */

static acltdtQueueRouteList *routes(const uint32_t (*pairs)[2], size_t n)
{
    acltdtQueueRouteList *l = acltdtCreateQueueRouteList();
    for (size_t i = 0; i < n; i++) {
        acltdtQueueRoute *r = acltdtCreateQueueRoute(pairs[i][0], pairs[i][1]);
        CHECK_OK(acltdtAddQueueRoute(l, r));
        CHECK_OK(acltdtDestroyQueueRoute(r));
    }
    return l;
}

static int32_t route_status(const acltdtQueueRouteList *l, size_t i)
{
    acltdtQueueRoute *r = acltdtCreateQueueRoute(0, 0);
    int32_t st = -1;
    size_t ret = 0;
    CHECK_OK(acltdtGetQueueRoute(l, i, r));
    CHECK_OK(acltdtGetQueueRouteParam(r, ACL_TDT_QUEUE_ROUTE_STATUS_INT32, 4, &ret, &st));
    CHECK_EQ(ret, 4);
    CHECK_OK(acltdtDestroyQueueRoute(r));
    return st;
}

/* section 6.2: 1->N forwarding, chains, cycle detection, per-route status, queries,
 * unbind, destroyed queues making routes abnormal. */
static void test_routes(void)
{
    uint32_t src = make_queue("src", 4), a = make_queue("a", 2), b = make_queue("b", 4), c = make_queue("c", 4);
    const uint32_t fan[2][2] = {{src, a}, {src, b}};
    acltdtQueueRouteList *l = routes(fan, 2);
    CHECK_EQ(acltdtGetQueueRouteNum(l), 2);
    CHECK_EQ(route_status(l, 0), ACL_TDT_QUEUE_ROUTE_UNBIND);
    CHECK_OK(acltdtBindQueueRoutes(l));
    CHECK_EQ(route_status(l, 0), ACL_TDT_QUEUE_ROUTE_BIND);
    CHECK_EQ(route_status(l, 1), ACL_TDT_QUEUE_ROUTE_BIND);

    /* 1 -> N: each element reaches both destinations */
    aclError rc;
    CHECK_OK(put(src, 1, 0));
    CHECK_OK(put(src, 2, 0));
    CHECK_EQ(get(a, 0, &rc), 1);
    CHECK_EQ(get(b, 0, &rc), 1);
    CHECK_EQ(get(b, 0, &rc), 2);
    /* `a` (depth 2) fills up: elements wait in the source until every destination has room */
    CHECK_OK(put(src, 3, 0));
    CHECK_OK(put(src, 4, 0)); /* a holds 2 and 3: 4 waits in src */
    CHECK_EQ(get(b, 0, &rc), 3);
    get(b, 0, &rc);
    CHECK_EQ(rc, ACL_ERROR_RT_QUEUE_EMPTY); /* 4 has not been forwarded yet */
    CHECK_EQ(get(a, 0, &rc), 2);           /* room in a: 4 goes on to both */
    CHECK_EQ(get(b, 0, &rc), 4);
    CHECK_EQ(get(a, 0, &rc), 3);
    CHECK_EQ(get(a, 0, &rc), 4);

    /* chains: b -> c forwards what src sends on to c */
    const uint32_t chain[1][2] = {{b, c}};
    acltdtQueueRouteList *l2 = routes(chain, 1);
    CHECK_OK(acltdtBindQueueRoutes(l2));
    CHECK_OK(put(src, 5, 0));
    CHECK_EQ(get(a, 0, &rc), 5);
    CHECK_EQ(get(c, 0, &rc), 5);
    get(b, 0, &rc);
    CHECK_EQ(rc, ACL_ERROR_RT_QUEUE_EMPTY);

    /* a cycle (c -> src), a self route, a duplicate and an unknown queue are refused;
     * the good route of the same list binds and the failed ones stay UNBIND */
    const uint32_t bad[5][2] = {{c, src}, {a, a}, {src, a}, {a, 99999}, {a, c}};
    acltdtQueueRouteList *l3 = routes(bad, 5);
    CHECK_EQ(acltdtBindQueueRoutes(l3), ACL_ERROR_INVALID_PARAM); /* the first failure's code */
    const char *why = aclGetRecentErrMsg(); /* read once: reading clears it */
    CHECK_STR_CONTAINS(why, "4 of 5 routes failed");
    CHECK_STR_CONTAINS(why, "cycle");
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ(route_status(l3, i), ACL_TDT_QUEUE_ROUTE_UNBIND);
    }
    CHECK_EQ(route_status(l3, 4), ACL_TDT_QUEUE_ROUTE_BIND); /* a -> c */
    const uint32_t unknown[1][2] = {{a, 99999}};
    acltdtQueueRouteList *l4 = routes(unknown, 1);
    CHECK_EQ(acltdtBindQueueRoutes(l4), ACL_ERROR_INVALID_QUEUE_ID);

    /* queries */
    acltdtQueueRouteQueryInfo *qi = acltdtCreateQueueRouteQueryInfo();
    acltdtQueueRouteList *found = acltdtCreateQueueRouteList();
    CHECK_EQ(acltdtQueryQueueRoutes(qi, found), ACL_ERROR_INVALID_PARAM); /* no mode */
    int32_t mode = ACL_TDT_QUEUE_ROUTE_QUERY_SRC;
    CHECK_OK(acltdtSetQueueRouteQueryInfo(qi, ACL_TDT_QUEUE_ROUTE_QUERY_MODE_ENUM, 4, &mode));
    CHECK_EQ(acltdtQueryQueueRoutes(qi, found), ACL_ERROR_INVALID_PARAM); /* no source id */
    CHECK_OK(acltdtSetQueueRouteQueryInfo(qi, ACL_TDT_QUEUE_ROUTE_QUERY_SRC_ID_UINT32, 4, &src));
    CHECK_OK(acltdtQueryQueueRoutes(qi, found));
    CHECK_EQ(acltdtGetQueueRouteNum(found), 2);
    acltdtQueueRoute *r = acltdtCreateQueueRoute(0, 0);
    uint32_t v = 0;
    size_t ret = 0;
    CHECK_OK(acltdtGetQueueRoute(found, 1, r));
    CHECK_OK(acltdtGetQueueRouteParam(r, ACL_TDT_QUEUE_ROUTE_SRC_UINT32, 4, &ret, &v));
    CHECK_EQ(v, src);
    CHECK_EQ(acltdtGetQueueRoute(found, 2, r), ACL_ERROR_INVALID_PARAM);
    mode = ACL_TDT_QUEUE_ROUTE_QUERY_SRC_AND_DST;
    CHECK_OK(acltdtSetQueueRouteQueryInfo(qi, ACL_TDT_QUEUE_ROUTE_QUERY_MODE_ENUM, 4, &mode));
    CHECK_OK(acltdtSetQueueRouteQueryInfo(qi, ACL_TDT_QUEUE_ROUTE_QUERY_DST_ID_UINT32, 4, &b));
    CHECK_OK(acltdtQueryQueueRoutes(qi, found)); /* appends */
    CHECK_EQ(acltdtGetQueueRouteNum(found), 3);
    mode = 7;
    CHECK_EQ(acltdtSetQueueRouteQueryInfo(qi, ACL_TDT_QUEUE_ROUTE_QUERY_MODE_ENUM, 4, &mode),
             ACL_ERROR_INVALID_PARAM);

    /* destroying a queue makes its routes abnormal; unbinding removes them */
    CHECK_OK(acltdtDestroyQueue(c));
    acltdtQueueRouteList *abn = acltdtCreateQueueRouteList();
    mode = ACL_TDT_QUEUE_ROUTE_QUERY_ABNORMAL;
    CHECK_OK(acltdtSetQueueRouteQueryInfo(qi, ACL_TDT_QUEUE_ROUTE_QUERY_MODE_ENUM, 4, &mode));
    CHECK_OK(acltdtQueryQueueRoutes(qi, abn));
    CHECK_EQ(acltdtGetQueueRouteNum(abn), 2); /* b -> c and a -> c */
    CHECK_EQ(route_status(abn, 0), ACL_TDT_QUEUE_ROUTE_BIND_ABNORMAL);
    CHECK_OK(put(src, 6, 0)); /* src -> a, b still forward; b -> c does not */
    CHECK_EQ(get(b, 0, &rc), 6);
    CHECK_EQ(get(a, 0, &rc), 6);
    CHECK_OK(acltdtUnbindQueueRoutes(abn));
    CHECK_EQ(route_status(abn, 0), ACL_TDT_QUEUE_ROUTE_UNBIND);
    CHECK_EQ(acltdtUnbindQueueRoutes(abn), ACL_ERROR_INVALID_PARAM); /* not bound any more */
    CHECK_OK(acltdtUnbindQueueRoutes(l));
    CHECK_OK(put(src, 7, 0)); /* no route: it stays in src */
    CHECK_EQ(get(src, 0, &rc), 7);
    get(a, 0, &rc);
    CHECK_EQ(rc, ACL_ERROR_RT_QUEUE_EMPTY);

    CHECK_OK(acltdtDestroyQueueRoute(r));
    CHECK_OK(acltdtDestroyQueueRouteQueryInfo(qi));
    CHECK_EQ(acltdtDestroyQueueRouteQueryInfo(qi), ACL_ERROR_INVALID_PARAM);
    acltdtQueueRouteList *lists[] = {l, l2, l3, l4, found, abn};
    for (size_t i = 0; i < 6; i++) {
        CHECK_OK(acltdtDestroyQueueRouteList(lists[i]));
    }
    CHECK_EQ(acltdtGetQueueRouteNum(l), 0); /* destroyed: an error, no crash */
    CHECK_OK(acltdtDestroyQueue(src));
    CHECK_OK(acltdtDestroyQueue(a));
    CHECK_OK(acltdtDestroyQueue(b));
}

/* --------------------------------------------------------------- threads */

#define Q_COUNT 2000

typedef struct q_args {
    uint32_t qid;
    atomic_int bad;
    aclError rc;
} q_args;

static void *q_producer(void *arg)
{
    q_args *a = arg;
    for (int32_t i = 0; i < Q_COUNT; i++) {
        if (put(a->qid, i, -1) != ACL_SUCCESS) {
            atomic_fetch_add(&a->bad, 1);
        }
    }
    return NULL;
}

static void *q_consumer(void *arg)
{
    q_args *a = arg;
    for (int32_t i = 0; i < Q_COUNT; i++) {
        aclError rc;
        if (get(a->qid, -1, &rc) != i || rc != ACL_SUCCESS) {
            atomic_fetch_add(&a->bad, 1);
        }
    }
    return NULL;
}

static void *q_waiter(void *arg)
{
    q_args *a = arg;
    get(a->qid, -1, &a->rc); /* nothing comes: woken by the destruction */
    return NULL;
}

/* producer/consumer through a queue of depth 3 with a route in between, and a waiter
 * woken by the destruction of its queue */
static void test_threads(void)
{
    q_args a = {make_queue("in", 3), 0, ACL_SUCCESS};
    q_args b = {make_queue("out", 3), 0, ACL_SUCCESS};
    const uint32_t pair[1][2] = {{a.qid, b.qid}};
    acltdtQueueRouteList *l = routes(pair, 1);
    CHECK_OK(acltdtBindQueueRoutes(l));
    pthread_t p, c;
    q_args prod = {a.qid, 0, ACL_SUCCESS}, cons = {b.qid, 0, ACL_SUCCESS};
    pthread_create(&p, NULL, q_producer, &prod);
    pthread_create(&c, NULL, q_consumer, &cons);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    CHECK_EQ(atomic_load(&prod.bad), 0);
    CHECK_EQ(atomic_load(&cons.bad), 0);
    CHECK_OK(acltdtUnbindQueueRoutes(l));
    CHECK_OK(acltdtDestroyQueueRouteList(l));

    pthread_t w;
    pthread_create(&w, NULL, q_waiter, &a);
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    CHECK_OK(acltdtDestroyQueue(a.qid));
    pthread_join(w, NULL);
    CHECK_EQ(a.rc, ACL_ERROR_INVALID_QUEUE_ID); /* woken (or too late: the id is gone) */
    CHECK_OK(acltdtDestroyQueue(b.qid));
}

/* ---------------------------------------------------------- shared buffers */

/* section 5.5: acltdt*Buf are 310B-only, and Alloc / CopyBufRef RC-mode only; the mock
 * runs in EP mode. */
static void test_buffers_default_soc(void)
{
    acltdtBuf buf = NULL;
    CHECK_EQ(acltdtAllocBuf(64, ACL_TDT_NORMAL_MEM, &buf), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "acltdtAllocBuf: not supported in EP mode");
    void *data = NULL;
    size_t size = 0;
    CHECK_EQ(acltdtGetBufData(buf, &data, &size), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "310B only");
}

/* Child (ASCEND_MOCK_SOC_NAME=Ascend310B1): the nine other functions work on buffers
 * (here made by aclrtAllocBuf) with the shared rules, errors under their own names. */
static void child_310b(void)
{
    acltdtBuf buf = NULL;
    CHECK_EQ(acltdtAllocBuf(64, ACL_TDT_NORMAL_MEM, &buf), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    aclrtMbuf m = NULL;
    CHECK_OK(aclrtAllocBuf(&m, 128));
    void *data = NULL;
    size_t size = 0;
    CHECK_OK(acltdtGetBufData(m, &data, &size));
    CHECK(data != NULL && size == 128);
    CHECK_OK(acltdtSetBufDataLen(m, 100));
    size_t len = 0;
    CHECK_OK(acltdtGetBufDataLen(m, &len));
    CHECK_EQ(len, 100);
    char ud[8] = "user";
    CHECK_EQ(acltdtSetBufUserData(m, ud, 8, 90), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "acltdtSetBufUserData: offset 90 + size 8");
    uint32_t n = 0;
    CHECK_OK(acltdtGetBufChainNum(m, &n));
    CHECK_EQ(n, 1);
    CHECK_OK(acltdtFreeBuf(m));
    CHECK_EQ(acltdtFreeBuf(m), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
}

int main(void)
{
    const char *child = mt_child_scenario();
    if (child != NULL) {
        if (strcmp(child, "310b") == 0) {
            RUN_TEST(child_310b);
        }
        return TEST_REPORT();
    }
    mt_mock_env((const char *)NULL);
    RUN_TEST(test_attributes);
    RUN_TEST(test_enqueue_dequeue);
    RUN_TEST(test_device_memory);
    RUN_TEST(test_routes);
    RUN_TEST(test_threads);
    RUN_TEST(test_buffers_default_soc);
    CHECK(mt_run_child("310b", "ASCEND_MOCK_SOC_NAME", "Ascend310B1"));
    return TEST_REPORT();
}
