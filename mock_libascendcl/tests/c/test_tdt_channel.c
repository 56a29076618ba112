/* test_tdt_channel.c - libacl_tdt_channel.so (acl/acl_tdt.h): data items, datasets and
 * channels with capacity, blocking send/receive with timeouts, stop from another thread,
 * producer/consumer threads, per-SoC support (acl_next_semantics.md section 6.1). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "acl/acl.h"
#include "acl/acl_tdt.h"
#include "mock_test.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A dataset with one int32 tensor [2, 3] holding `base + i` and one end-of-sequence item;
 * *item0 receives the tensor item (to destroy after the dataset). */
static acltdtDataset *make_dataset(int32_t *storage, int32_t base, acltdtDataItem **item0, acltdtDataItem **item1)
{
    for (int i = 0; i < 6; i++) {
        storage[i] = base + i;
    }
    int64_t dims[2] = {2, 3};
    acltdtDataset *ds = acltdtCreateDataset();
    *item0 = acltdtCreateDataItem(ACL_TENSOR_DATA_TENSOR, dims, 2, ACL_INT32, storage, 6 * sizeof(int32_t));
    *item1 = acltdtCreateDataItem(ACL_TENSOR_DATA_END_OF_SEQUENCE, NULL, 0, ACL_DT_UNDEFINED, NULL, 0);
    CHECK(ds != NULL && *item0 != NULL && *item1 != NULL);
    CHECK_OK(acltdtAddDataItem(ds, *item0));
    CHECK_OK(acltdtAddDataItem(ds, *item1));
    return ds;
}

static void free_dataset(acltdtDataset *ds, acltdtDataItem *a, acltdtDataItem *b)
{
    CHECK_OK(acltdtDestroyDataset(ds));
    CHECK_OK(acltdtDestroyDataItem(a));
    CHECK_OK(acltdtDestroyDataItem(b));
}

/* section 6.1 "Data objects": items, getters, datasets */
static void test_items_and_datasets(void)
{
    int32_t data[6];
    int64_t dims[2] = {2, 3};
    acltdtDataItem *it = acltdtCreateDataItem(ACL_TENSOR_DATA_TENSOR, dims, 2, ACL_INT32, data, sizeof data);
    CHECK(it != NULL);
    CHECK_EQ(acltdtGetTensorTypeFromItem(it), ACL_TENSOR_DATA_TENSOR);
    CHECK_EQ(acltdtGetDataTypeFromItem(it), ACL_INT32);
    CHECK(acltdtGetDataAddrFromItem(it) == data);
    CHECK_EQ(acltdtGetDataSizeFromItem(it), sizeof data);
    CHECK_EQ(acltdtGetDimNumFromItem(it), 2);
    int64_t out[4] = {0};
    CHECK_OK(acltdtGetDimsFromItem(it, out, 4));
    CHECK(out[0] == 2 && out[1] == 3);
    CHECK_EQ(acltdtGetDimsFromItem(it, out, 1), ACL_ERROR_INVALID_PARAM); /* too small */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "acltdtGetDimsFromItem: argument 'dimNum'");
    size_t num = 9, id = 9;
    CHECK_OK(acltdtGetSliceInfoFromItem(it, &num, &id));
    CHECK(num == 1 && id == 0);

    /* NULL items: the documented sentinels */
    CHECK_EQ(acltdtGetTensorTypeFromItem(NULL), ACL_TENSOR_DATA_UNDEFINED);
    CHECK_EQ(acltdtGetDataTypeFromItem(NULL), ACL_DT_UNDEFINED);
    CHECK(acltdtGetDataAddrFromItem(NULL) == NULL);
    CHECK_EQ(acltdtGetDataSizeFromItem(NULL), 0);
    CHECK_EQ(acltdtGetDimNumFromItem(NULL), 0);
    /* bad construction arguments */
    CHECK(acltdtCreateDataItem((acltdtTensorType)9, dims, 2, ACL_INT32, data, 4) == NULL);
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    CHECK(acltdtCreateDataItem(ACL_TENSOR_DATA_TENSOR, NULL, 2, ACL_INT32, data, 4) == NULL);
    CHECK(acltdtCreateDataItem(ACL_TENSOR_DATA_TENSOR, dims, 2, ACL_INT32, NULL, 4) == NULL);

    acltdtDataset *ds = acltdtCreateDataset();
    CHECK(ds != NULL);
    CHECK_EQ(acltdtGetDatasetSize(ds), 0);
    CHECK_STR_EQ(acltdtGetDatasetName(ds), "");
    CHECK_OK(acltdtAddDataItem(ds, it));
    CHECK_EQ(acltdtAddDataItem(ds, it), ACL_ERROR_INVALID_PARAM); /* already in it */
    CHECK_EQ(acltdtGetDatasetSize(ds), 1);
    CHECK(acltdtGetDataItem(ds, 0) == it);
    CHECK(acltdtGetDataItem(ds, 1) == NULL);
    CHECK_EQ(acltdtAddDataItem(NULL, it), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(acltdtDestroyDataset(ds));
    /* destroyed handles are errors, never crashes */
    CHECK_EQ(acltdtDestroyDataset(ds), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(acltdtGetDatasetSize(ds), 0);
    CHECK_OK(acltdtDestroyDataItem(it)); /* the dataset did not own it */
    CHECK_EQ(acltdtDestroyDataItem(it), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(acltdtGetTensorTypeFromItem(it), ACL_TENSOR_DATA_UNDEFINED);
    int garbage = 0;
    CHECK_EQ(acltdtDestroyDataItem((acltdtDataItem *)&garbage), ACL_ERROR_INVALID_PARAM);
}

/* section 6.1: capacity in [2, 8192]; support on the default SoC (A2) */
static void test_create_and_capacity(void)
{
    CHECK(acltdtCreateChannelWithCapacity(0, "c1", 1) == NULL);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "capacity");
    CHECK(acltdtCreateChannelWithCapacity(0, "c1", 8193) == NULL);
    CHECK(acltdtCreateChannelWithCapacity(0, NULL, 4) == NULL);
    CHECK(acltdtCreateChannelWithCapacity(99, "c1", 4) == NULL);
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
    /* acltdtCreateChannel is for the 910 training series only */
    CHECK(acltdtCreateChannel(0, "plain") == NULL);
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);

    acltdtChannelHandle *ch = acltdtCreateChannelWithCapacity(0, "c1", 2);
    CHECK(ch != NULL);
    CHECK(acltdtCreateChannelWithCapacity(0, "c1", 2) == NULL); /* one per (device, name) */
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_REPEATED_INIT);
    acltdtChannelHandle *other = acltdtCreateChannelWithCapacity(1, "c1", 2);
    CHECK(other != NULL);

    int32_t s1[6], s2[6], s3[6];
    acltdtDataItem *a1, *b1, *a2, *b2, *a3, *b3;
    acltdtDataset *d1 = make_dataset(s1, 10, &a1, &b1);
    acltdtDataset *d2 = make_dataset(s2, 20, &a2, &b2);
    acltdtDataset *d3 = make_dataset(s3, 30, &a3, &b3);
    size_t n = 99;
    CHECK_OK(acltdtQueryChannelSize(ch, &n));
    CHECK_EQ(n, 0);
    CHECK_OK(acltdtSendTensor(ch, d1, 0));
    CHECK_OK(acltdtSendTensor(ch, d2, -1));
    CHECK_OK(acltdtQueryChannelSize(ch, &n));
    CHECK_EQ(n, 2);
    /* full: timeout 0 fails at once, > 0 after the wait */
    CHECK_EQ(acltdtSendTensor(ch, d3, 0), ACL_ERROR_RT_QUEUE_FULL);
    CHECK_EQ(acltdtSendTensor(ch, d3, 20), ACL_ERROR_RT_QUEUE_FULL);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "acltdtSendTensor: the channel is full");
    CHECK_EQ(acltdtSendTensor(ch, d3, -2), ACL_ERROR_INVALID_PARAM);
    /* the data was copied at send: changing the source does not change what arrives */
    s1[0] = -1;
    acltdtDataset *rx = acltdtCreateDataset();
    CHECK_OK(acltdtReceiveTensor(ch, rx, 0));
    CHECK_EQ(acltdtGetDatasetSize(rx), 2);
    CHECK_STR_EQ(acltdtGetDatasetName(rx), "c1");
    acltdtDataItem *got = acltdtGetDataItem(rx, 0);
    CHECK_EQ(acltdtGetTensorTypeFromItem(got), ACL_TENSOR_DATA_TENSOR);
    CHECK_EQ(acltdtGetDataTypeFromItem(got), ACL_INT32);
    CHECK_EQ(acltdtGetDataSizeFromItem(got), 24);
    const int32_t *v = acltdtGetDataAddrFromItem(got);
    CHECK(v != NULL && v != s1 && v[0] == 10 && v[5] == 15);
    int64_t dims[2];
    CHECK_OK(acltdtGetDimsFromItem(got, dims, 2));
    CHECK(dims[0] == 2 && dims[1] == 3);
    CHECK_EQ(acltdtGetTensorTypeFromItem(acltdtGetDataItem(rx, 1)), ACL_TENSOR_DATA_END_OF_SEQUENCE);
    /* the next receive replaces the dataset's items (FIFO order) */
    CHECK_OK(acltdtReceiveTensor(ch, rx, 10));
    v = acltdtGetDataAddrFromItem(acltdtGetDataItem(rx, 0));
    CHECK(v != NULL && v[0] == 20);
    CHECK_EQ(acltdtReceiveTensor(ch, rx, 0), ACL_ERROR_RT_QUEUE_EMPTY);
    CHECK_EQ(acltdtReceiveTensor(ch, rx, 15), ACL_ERROR_RT_QUEUE_EMPTY);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "acltdtReceiveTensor: the channel is empty");
    CHECK_EQ(acltdtGetDatasetSize(rx), 1 + 1); /* a failed receive leaves the dataset alone */

    /* clean drops what is queued */
    CHECK_OK(acltdtSendTensor(ch, d3, 0));
    CHECK_OK(acltdtCleanChannel(ch));
    CHECK_OK(acltdtQueryChannelSize(ch, &n));
    CHECK_EQ(n, 0);
    CHECK_OK(acltdtStopChannel(ch));
    CHECK_EQ(acltdtSendTensor(ch, d3, 0), ACL_ERROR_FAILURE); /* stopped */
    CHECK_EQ(acltdtReceiveTensor(ch, rx, 0), ACL_ERROR_FAILURE);
    CHECK_OK(acltdtDestroyChannel(ch));
    CHECK_EQ(acltdtDestroyChannel(ch), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(acltdtQueryChannelSize(ch, &n), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(acltdtDestroyChannel(other));
    /* the name is free again */
    ch = acltdtCreateChannelWithCapacity(0, "c1", 2);
    CHECK(ch != NULL);
    CHECK_OK(acltdtSendTensor(ch, d1, 0)); /* destroyed with something queued: freed */
    CHECK_OK(acltdtDestroyChannel(ch));

    CHECK_OK(acltdtDestroyDataset(rx)); /* destroys the received items with it */
    free_dataset(d1, a1, b1);
    free_dataset(d2, a2, b2);
    free_dataset(d3, a3, b3);
}

/* A received item the caller destroyed may have its address reused by an item another
 * receive put into another dataset: clearing the first dataset (at its next receive)
 * leaves that item alone (test failed before: it destroyed it). */
static void test_received_items_belong_to_their_dataset(void)
{
    acltdtChannelHandle *ch = acltdtCreateChannelWithCapacity(0, "owners", 4);
    int32_t s1[6];
    acltdtDataItem *a, *b;
    acltdtDataset *tx = make_dataset(s1, 1, &a, &b);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(acltdtSendTensor(ch, tx, 0));
    }
    acltdtDataset *d1 = acltdtCreateDataset(), *d2 = acltdtCreateDataset();
    CHECK_OK(acltdtReceiveTensor(ch, d1, 0));
    CHECK_OK(acltdtDestroyDataItem(acltdtGetDataItem(d1, 0))); /* the caller may */
    CHECK_OK(acltdtDestroyDataItem(acltdtGetDataItem(d1, 1)));
    CHECK_OK(acltdtReceiveTensor(ch, d2, 0)); /* new items, likely at the freed addresses */
    CHECK_OK(acltdtReceiveTensor(ch, d1, 0)); /* clears d1 */
    CHECK_OK(acltdtDestroyDataset(d1));       /* destroys d1's own items only */
    CHECK_EQ(acltdtGetTensorTypeFromItem(acltdtGetDataItem(d2, 0)), ACL_TENSOR_DATA_TENSOR);
    CHECK_EQ(acltdtGetTensorTypeFromItem(acltdtGetDataItem(d2, 1)), ACL_TENSOR_DATA_END_OF_SEQUENCE);
    const int32_t *v = acltdtGetDataAddrFromItem(acltdtGetDataItem(d2, 0));
    CHECK(v != NULL && v[5] == 6);
    CHECK_OK(acltdtDestroyDataset(d2));
    free_dataset(tx, a, b);
    CHECK_OK(acltdtDestroyChannel(ch));
}

/* Slices: a run of SLICE_TENSOR items closed by END_TENSOR is one tensor. */
static void test_slices(void)
{
    acltdtChannelHandle *ch = acltdtCreateChannelWithCapacity(0, "slices", 4);
    char bytes[3] = {1, 2, 3};
    int64_t dims[1] = {1};
    acltdtDataset *ds = acltdtCreateDataset();
    acltdtDataItem *it[4];
    acltdtTensorType types[4] = {ACL_TENSOR_DATA_SLICE_TENSOR, ACL_TENSOR_DATA_SLICE_TENSOR,
                                 ACL_TENSOR_DATA_END_TENSOR, ACL_TENSOR_DATA_TENSOR};
    for (int i = 0; i < 4; i++) {
        it[i] = acltdtCreateDataItem(types[i], dims, 1, ACL_INT8, &bytes[i % 3], 1);
        CHECK_OK(acltdtAddDataItem(ds, it[i]));
    }
    CHECK_OK(acltdtSendTensor(ch, ds, -1));
    acltdtDataset *rx = acltdtCreateDataset();
    CHECK_OK(acltdtReceiveTensor(ch, rx, -1));
    for (size_t i = 0; i < 4; i++) {
        size_t num = 0, id = 0;
        CHECK_OK(acltdtGetSliceInfoFromItem(acltdtGetDataItem(rx, i), &num, &id));
        CHECK_EQ(num, i < 3 ? 3 : 1);
        CHECK_EQ(id, i < 3 ? i : 0);
    }
    CHECK_OK(acltdtDestroyDataset(rx));
    CHECK_OK(acltdtDestroyDataset(ds));
    for (int i = 0; i < 4; i++) {
        CHECK_OK(acltdtDestroyDataItem(it[i]));
    }
    CHECK_OK(acltdtDestroyChannel(ch));
}

/* ------------------------------------------------------- producer / consumer */

#define PC_COUNT 500

typedef struct pc_args {
    acltdtChannelHandle *ch;
    atomic_int received;
    int bad;
} pc_args;

static void *producer(void *arg)
{
    pc_args *a = arg;
    for (int32_t k = 0; k < PC_COUNT; k++) {
        int64_t dims[1] = {1};
        acltdtDataset *ds = acltdtCreateDataset();
        acltdtDataItem *it = acltdtCreateDataItem(ACL_TENSOR_DATA_TENSOR, dims, 1, ACL_INT32, &k, sizeof k);
        acltdtAddDataItem(ds, it);
        if (acltdtSendTensor(a->ch, ds, -1) != ACL_SUCCESS) {
            a->bad++;
        }
        acltdtDestroyDataset(ds);
        acltdtDestroyDataItem(it);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    pc_args *a = arg;
    acltdtDataset *rx = acltdtCreateDataset();
    for (int32_t k = 0; k < PC_COUNT; k++) {
        if (acltdtReceiveTensor(a->ch, rx, -1) != ACL_SUCCESS) {
            a->bad++;
            break;
        }
        const int32_t *v = acltdtGetDataAddrFromItem(acltdtGetDataItem(rx, 0));
        if (v == NULL || *v != k) { /* FIFO */
            a->bad++;
        }
        atomic_fetch_add(&a->received, 1);
    }
    acltdtDestroyDataset(rx);
    return NULL;
}

/* A producer blocked on a channel of capacity 2 and a consumer draining it, in order. */
static void test_producer_consumer(void)
{
    pc_args a = {acltdtCreateChannelWithCapacity(0, "pc", 2), 0, 0};
    CHECK(a.ch != NULL);
    pthread_t p, c;
    pthread_create(&p, NULL, producer, &a);
    pthread_create(&c, NULL, consumer, &a);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    CHECK_EQ(a.bad, 0);
    CHECK_EQ(atomic_load(&a.received), PC_COUNT);
    size_t n = 9;
    CHECK_OK(acltdtQueryChannelSize(a.ch, &n));
    CHECK_EQ(n, 0);
    CHECK_OK(acltdtStopChannel(a.ch));
    CHECK_OK(acltdtDestroyChannel(a.ch));
}

typedef struct stop_args {
    acltdtChannelHandle *ch;
    aclError rc;
    atomic_int started;
} stop_args;

static void *blocked_receiver(void *arg)
{
    stop_args *a = arg;
    acltdtDataset *rx = acltdtCreateDataset();
    atomic_store(&a->started, 1);
    a->rc = acltdtReceiveTensor(a->ch, rx, -1); /* nothing comes: only the stop wakes it */
    acltdtDestroyDataset(rx);
    return NULL;
}

static void *blocked_sender(void *arg)
{
    stop_args *a = arg;
    int32_t v = 1;
    int64_t dims[1] = {1};
    acltdtDataset *ds = acltdtCreateDataset();
    acltdtDataItem *it = acltdtCreateDataItem(ACL_TENSOR_DATA_TENSOR, dims, 1, ACL_INT32, &v, sizeof v);
    acltdtAddDataItem(ds, it);
    atomic_store(&a->started, 1);
    aclError rc = ACL_SUCCESS;
    while (rc == ACL_SUCCESS) {
        rc = acltdtSendTensor(a->ch, ds, -1); /* fills the channel, then blocks */
    }
    a->rc = rc;
    acltdtDestroyDataset(ds);
    acltdtDestroyDataItem(it);
    return NULL;
}

/* section 6.1: acltdtStopChannel from another thread wakes blocked senders and
 * receivers; destroy after stop. */
static void test_stop_wakes_blocked_threads(void)
{
    stop_args r = {acltdtCreateChannelWithCapacity(0, "stop-rx", 4), ACL_SUCCESS, 0};
    stop_args s = {acltdtCreateChannelWithCapacity(0, "stop-tx", 2), ACL_SUCCESS, 0};
    pthread_t tr, ts;
    pthread_create(&tr, NULL, blocked_receiver, &r);
    pthread_create(&ts, NULL, blocked_sender, &s);
    while (!atomic_load(&r.started) || !atomic_load(&s.started)) {
        sleep_ms(1);
    }
    sleep_ms(20); /* very likely blocked by now; the test holds either way */
    CHECK_OK(acltdtStopChannel(r.ch));
    CHECK_OK(acltdtStopChannel(s.ch));
    pthread_join(tr, NULL);
    pthread_join(ts, NULL);
    CHECK_EQ(r.rc, ACL_ERROR_FAILURE);
    CHECK_EQ(s.rc, ACL_ERROR_FAILURE);
    CHECK_OK(acltdtDestroyChannel(r.ch));
    CHECK_OK(acltdtDestroyChannel(s.ch));

    /* destroy without an explicit stop also wakes a blocked receiver first */
    stop_args d = {acltdtCreateChannelWithCapacity(0, "stop-destroy", 4), ACL_SUCCESS, 0};
    pthread_t td;
    pthread_create(&td, NULL, blocked_receiver, &d);
    while (!atomic_load(&d.started)) {
        sleep_ms(1);
    }
    sleep_ms(10);
    CHECK_OK(acltdtDestroyChannel(d.ch));
    pthread_join(td, NULL);
    CHECK(d.rc == ACL_ERROR_FAILURE || d.rc == ACL_ERROR_INVALID_PARAM); /* woken, or too late */
}

/* Child scenario (ASCEND_MOCK_SOC_NAME=Ascend910A): acltdtCreateChannel works on the 910
 * training series; its channel has no capacity, so QueryChannelSize / Clean refuse. */
static void child_910(void)
{
    acltdtChannelHandle *ch = acltdtCreateChannel(0, "legacy");
    CHECK(ch != NULL);
    int32_t s[6];
    acltdtDataItem *a, *b;
    acltdtDataset *ds = make_dataset(s, 1, &a, &b);
    for (int i = 0; i < 20; i++) { /* unbounded */
        CHECK_OK(acltdtSendTensor(ch, ds, 0));
    }
    size_t n = 0;
    CHECK_EQ(acltdtQueryChannelSize(ch, &n), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(acltdtCleanChannel(ch), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "without a capacity");
    CHECK_OK(acltdtStopChannel(ch));
    CHECK_OK(acltdtDestroyChannel(ch));
    free_dataset(ds, a, b);
}

/* Child scenario (Ascend310P3): no TDT channels at all. */
static void child_310p(void)
{
    CHECK(acltdtCreateChannelWithCapacity(0, "x", 4) == NULL);
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK(acltdtCreateChannel(0, "x") == NULL);
}

static void test_support_per_soc(void)
{
    CHECK(mt_run_child("910", "ASCEND_MOCK_SOC_NAME", "Ascend910A"));
    CHECK(mt_run_child("310p", "ASCEND_MOCK_SOC_NAME", "Ascend310P3"));
}

int main(void)
{
    const char *child = mt_child_scenario();
    if (child != NULL) {
        if (strcmp(child, "910") == 0) {
            RUN_TEST(child_910);
        } else if (strcmp(child, "310p") == 0) {
            RUN_TEST(child_310p);
        }
        return TEST_REPORT();
    }
    mt_mock_env((const char *)NULL);
    RUN_TEST(test_items_and_datasets);
    RUN_TEST(test_create_and_capacity);
    RUN_TEST(test_received_items_belong_to_their_dataset);
    RUN_TEST(test_slices);
    RUN_TEST(test_producer_consumer);
    RUN_TEST(test_stop_wakes_blocked_threads);
    RUN_TEST(test_support_per_soc);
    return TEST_REPORT();
}
