/*
 * channel.c - libacl_tdt_channel.so: TDT data items, datasets and channels
 * (acl/acl_tdt.h; acl_next_semantics.md section 6.1).
 *
 * A channel is a FIFO of datasets between the host and a device. The mock runs no device
 * program, so the device end of every channel is a loopback: the datasets the host sends
 * (acltdtSendTensor) are the ones it receives (acltdtReceiveTensor), in order, as deep
 * copies (mock choice; README "TDT channels"). So a producer thread and a consumer thread
 * of one process exercise the documented rules:
 *   - a channel made with a capacity (2..8192) holds at most that many datasets; a send
 *     to a full channel waits (timeout -1), fails at once (0) or after `timeout` ms with
 *     ACL_ERROR_RT_QUEUE_FULL (207014); a receive from an empty channel likewise, with
 *     ACL_ERROR_RT_QUEUE_EMPTY (207013). timeout < -1 is ACL_ERROR_INVALID_PARAM;
 *   - acltdtStopChannel wakes every blocked thread; they and every later send or receive
 *     fail with ACL_ERROR_FAILURE (500001, mock choice: the docs name no code);
 *   - acltdtQueryChannelSize / acltdtCleanChannel need a channel with a capacity
 *     (else ACL_ERROR_INVALID_PARAM);
 *   - support per SoC (ASCEND_MOCK_SOC_NAME): acltdtCreateChannel on the 910 training
 *     series only (Ascend910 without B / _93), acltdtCreateChannelWithCapacity on 950, A3,
 *     A2 and 910; elsewhere they return NULL with ACL_ERROR_RT_FEATURE_NOT_SUPPORT
 *     recorded. One channel per (device, name): a second one is refused (207015).
 * acltdtDestroyChannel stops the channel, waits until no thread is inside a call on it and
 * frees it. Items and datasets are validated handles (a stale or foreign pointer is an
 * error, never a crash). Errors are recorded through libascendcl.so's aclmockSetError, so
 * aclGetRecentErrMsg / aclrtGetLastError report them like runtime errors. No lock is held
 * while calling into libascendcl.so.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_tdt.h"
#include "core/core.h" /* handle registry, locks, deadlines (static inline) */

#define TDT_MIN_CAPACITY 2u
#define TDT_MAX_CAPACITY 8192u
#define TDT_MAX_DIMS 128u
#define TDT_ITEM_MAGIC 0x7464744974656d31ULL
#define TDT_DATASET_MAGIC 0x7464744461746173ULL
#define TDT_CHANNEL_MAGIC 0x74647443686e6e6cULL

/* ================================================================ errors */

/* Records the error on the calling thread (libascendcl.so's aclmockSetError). */
#define tdt_error aclmockSetError

/* ================================================================ objects */

struct acltdtDataItem {
    uint64_t magic;
    acltdtTensorType type;
    aclDataType dtype;
    size_t ndims;
    int64_t *dims;
    void *data;
    size_t size;
    bool owns_data;  /* received items own a copy of the bytes */
    const struct acltdtDataset *owner; /* the dataset a receive put it in, else NULL */
    size_t slice_num, slice_id;
};

struct acltdtDataset {
    uint64_t magic;
    acltdtDataItem **items;
    size_t n, cap;
    char *name; /* the channel a received dataset came from; NULL = "" */
};

/* One dataset in a channel: deep copies of the sent items. */
typedef struct tdt_msg {
    acltdtDataItem *items; /* array of n items (owning their dims and bytes) */
    size_t n;
    struct tdt_msg *next;
} tdt_msg;

struct acltdtChannelHandle {
    uint64_t magic;
    uint32_t device;
    char *name;
    size_t capacity;   /* 0 = unbounded */
    mock_mutex mu;     /* everything below */
    pthread_cond_t cv; /* queue changed, stopped, or a user left */
    tdt_msg *head, *tail;
    size_t count;
    bool stopped;
    int users;          /* calls in progress on this channel */
};

/* The live items, datasets and channels. One lock: lookups are short and never nest
 * with a channel's lock (a channel is pinned with `users` under this lock, then used). */
static mock_mutex g_handles_mu = MOCK_MUTEX_INIT(MOCK_LOCK_TDT_HANDLES);
static mock_registry g_items = MOCK_REGISTRY_EMPTY;
static mock_registry g_datasets = MOCK_REGISTRY_EMPTY;
static mock_registry g_channels = MOCK_REGISTRY_EMPTY;

static bool handle_live(mock_registry *reg, const void *h)
{
    core_mutex_lock(&g_handles_mu);
    bool ok = core_registry_contains(reg, h);
    core_mutex_unlock(&g_handles_mu);
    return ok;
}

static bool handle_add(mock_registry *reg, const void *h)
{
    core_mutex_lock(&g_handles_mu);
    bool ok = core_registry_insert(reg, h);
    core_mutex_unlock(&g_handles_mu);
    return ok;
}

static bool handle_remove(mock_registry *reg, const void *h)
{
    core_mutex_lock(&g_handles_mu);
    bool ok = core_registry_erase(reg, h);
    core_mutex_unlock(&g_handles_mu);
    return ok;
}

/* ================================================================ data items */

static void item_free_content(acltdtDataItem *it)
{
    free(it->dims);
    if (it->owns_data) {
        free(it->data);
    }
    it->dims = NULL;
    it->data = NULL;
}

acltdtDataItem *acltdtCreateDataItem(acltdtTensorType tdtType, const int64_t *dims, size_t dimNum,
                                     aclDataType dataType, void *data, size_t size)
{
    const char *fn = "acltdtCreateDataItem";
    if ((int)tdtType < (int)ACL_TENSOR_DATA_TENSOR || (int)tdtType > (int)ACL_TENSOR_DATA_END_TENSOR) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'tdtType' %d is not an acltdtTensorType (0..4)",
                  (int)tdtType);
        return NULL;
    }
    if (dimNum > TDT_MAX_DIMS || (dimNum > 0 && dims == NULL)) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dims' is %s with dimNum %zu (at most %u dims)",
                  dims == NULL ? "NULL" : "given", dimNum, TDT_MAX_DIMS);
        return NULL;
    }
    if (size > 0 && data == NULL) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'data' is NULL with size %zu", size);
        return NULL;
    }
    acltdtDataItem *it = calloc(1, sizeof(*it));
    int64_t *d = dimNum > 0 ? malloc(dimNum * sizeof(int64_t)) : NULL;
    if (it == NULL || (dimNum > 0 && d == NULL)) {
        free(it);
        free(d);
        tdt_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
        return NULL;
    }
    if (dimNum > 0) {
        memcpy(d, dims, dimNum * sizeof(int64_t));
    }
    *it = (acltdtDataItem){TDT_ITEM_MAGIC, tdtType, dataType, dimNum, d, data, size, false, NULL, 1, 0};
    if (!handle_add(&g_items, it)) {
        item_free_content(it);
        free(it);
        tdt_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
        return NULL;
    }
    return it;
}

aclError acltdtDestroyDataItem(acltdtDataItem *dataItem)
{
    const char *fn = "acltdtDestroyDataItem";
    if (dataItem == NULL) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataItem' is NULL");
    }
    if (!handle_remove(&g_items, dataItem)) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM,
                         "argument 'dataItem' (%p) is not a live data item (destroyed twice?)", (void *)dataItem);
    }
    item_free_content(dataItem);
    dataItem->magic = 0;
    free(dataItem);
    return ACL_SUCCESS;
}

/* The item, or NULL (recording the error under fn) when it is not live. */
static const acltdtDataItem *item_get(const char *fn, const acltdtDataItem *it)
{
    if (it == NULL) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataItem' is NULL");
        return NULL;
    }
    if (!handle_live(&g_items, it)) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataItem' (%p) is not a live data item", (const void *)it);
        return NULL;
    }
    return it;
}

acltdtTensorType acltdtGetTensorTypeFromItem(const acltdtDataItem *dataItem)
{
    const acltdtDataItem *it = item_get("acltdtGetTensorTypeFromItem", dataItem);
    return it != NULL ? it->type : ACL_TENSOR_DATA_UNDEFINED;
}

aclDataType acltdtGetDataTypeFromItem(const acltdtDataItem *dataItem)
{
    const acltdtDataItem *it = item_get("acltdtGetDataTypeFromItem", dataItem);
    return it != NULL ? it->dtype : ACL_DT_UNDEFINED;
}

void *acltdtGetDataAddrFromItem(const acltdtDataItem *dataItem)
{
    const acltdtDataItem *it = item_get("acltdtGetDataAddrFromItem", dataItem);
    return it != NULL ? it->data : NULL;
}

size_t acltdtGetDataSizeFromItem(const acltdtDataItem *dataItem)
{
    const acltdtDataItem *it = item_get("acltdtGetDataSizeFromItem", dataItem);
    return it != NULL ? it->size : 0;
}

size_t acltdtGetDimNumFromItem(const acltdtDataItem *dataItem)
{
    const acltdtDataItem *it = item_get("acltdtGetDimNumFromItem", dataItem);
    return it != NULL ? it->ndims : 0;
}

aclError acltdtGetDimsFromItem(const acltdtDataItem *dataItem, int64_t *dims, size_t dimNum)
{
    const char *fn = "acltdtGetDimsFromItem";
    const acltdtDataItem *it = item_get(fn, dataItem);
    if (it == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (it->ndims > 0 && dims == NULL) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dims' is NULL");
    }
    if (dimNum < it->ndims) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dimNum' (%zu) is less than the item's %zu dims",
                         dimNum, it->ndims);
    }
    if (it->ndims > 0) {
        memcpy(dims, it->dims, it->ndims * sizeof(int64_t));
    }
    return ACL_SUCCESS;
}

aclError acltdtGetSliceInfoFromItem(const acltdtDataItem *dataItem, size_t *sliceNum, size_t *sliceId)
{
    const char *fn = "acltdtGetSliceInfoFromItem";
    const acltdtDataItem *it = item_get(fn, dataItem);
    if (it == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (sliceNum == NULL || sliceId == NULL) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", sliceNum == NULL ? "sliceNum" : "sliceId");
    }
    *sliceNum = it->slice_num;
    *sliceId = it->slice_id;
    return ACL_SUCCESS;
}

/* ================================================================ datasets */

acltdtDataset *acltdtCreateDataset(void)
{
    acltdtDataset *ds = calloc(1, sizeof(*ds));
    if (ds == NULL || !handle_add(&g_datasets, ds)) {
        free(ds);
        tdt_error("acltdtCreateDataset", ACL_ERROR_BAD_ALLOC, "host out of memory");
        return NULL;
    }
    ds->magic = TDT_DATASET_MAGIC;
    return ds;
}

static acltdtDataset *dataset_get(const char *fn, const acltdtDataset *ds)
{
    if (ds == NULL) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataset' is NULL");
        return NULL;
    }
    if (!handle_live(&g_datasets, ds)) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataset' (%p) is not a live dataset", (const void *)ds);
        return NULL;
    }
    return (acltdtDataset *)(uintptr_t)ds;
}

/* Removes every item from ds; destroys those a receive put there and that are still
 * alive (the caller may have destroyed some already; their addresses may even belong to
 * other items by now, which the owner check leaves alone). */
static void dataset_clear(acltdtDataset *ds)
{
    for (size_t i = 0; i < ds->n; i++) {
        acltdtDataItem *it = ds->items[i];
        bool ours = false;
        core_mutex_lock(&g_handles_mu);
        if (core_registry_contains(&g_items, it) && it->owner == ds) {
            ours = core_registry_erase(&g_items, it);
        }
        core_mutex_unlock(&g_handles_mu);
        if (ours) {
            item_free_content(it);
            it->magic = 0;
            free(it);
        }
    }
    ds->n = 0;
}

aclError acltdtDestroyDataset(acltdtDataset *dataset)
{
    const char *fn = "acltdtDestroyDataset";
    if (dataset == NULL) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataset' is NULL");
    }
    if (!handle_remove(&g_datasets, dataset)) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM,
                         "argument 'dataset' (%p) is not a live dataset (destroyed twice?)", (void *)dataset);
    }
    dataset_clear(dataset);
    free(dataset->items);
    free(dataset->name);
    dataset->magic = 0;
    free(dataset);
    return ACL_SUCCESS;
}

static bool dataset_push(acltdtDataset *ds, acltdtDataItem *it)
{
    if (ds->n == ds->cap) {
        size_t ncap = ds->cap ? ds->cap * 2 : 8;
        acltdtDataItem **n = realloc(ds->items, ncap * sizeof(*n));
        if (n == NULL) {
            return false;
        }
        ds->items = n;
        ds->cap = ncap;
    }
    ds->items[ds->n++] = it;
    return true;
}

aclError acltdtAddDataItem(acltdtDataset *dataset, acltdtDataItem *dataItem)
{
    const char *fn = "acltdtAddDataItem";
    acltdtDataset *ds = dataset_get(fn, dataset);
    if (ds == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (item_get(fn, dataItem) == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    for (size_t i = 0; i < ds->n; i++) {
        if (ds->items[i] == dataItem) {
            return tdt_error(fn, ACL_ERROR_INVALID_PARAM, "the data item %p is already in the dataset",
                             (void *)dataItem);
        }
    }
    if (!dataset_push(ds, dataItem)) {
        return tdt_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
    }
    return ACL_SUCCESS;
}

acltdtDataItem *acltdtGetDataItem(const acltdtDataset *dataset, size_t index)
{
    const char *fn = "acltdtGetDataItem";
    acltdtDataset *ds = dataset_get(fn, dataset);
    if (ds == NULL) {
        return NULL;
    }
    if (index >= ds->n) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'index' (%zu) is not below the dataset size %zu", index, ds->n);
        return NULL;
    }
    return ds->items[index];
}

size_t acltdtGetDatasetSize(const acltdtDataset *dataset)
{
    acltdtDataset *ds = dataset_get("acltdtGetDatasetSize", dataset);
    return ds != NULL ? ds->n : 0;
}

const char *acltdtGetDatasetName(const acltdtDataset *dataset)
{
    acltdtDataset *ds = dataset_get("acltdtGetDatasetName", dataset);
    if (ds == NULL) {
        return NULL;
    }
    return ds->name != NULL ? ds->name : "";
}

/* ================================================================ channels */

/* The SoC families of the support matrix (ASCEND_MOCK_SOC_NAME). */
static bool soc_is_910_training(const char *soc)
{
    /* "Ascend910A", "Ascend910ProB", ...: the 910 series before A2 (910B) and A3 (910_93) */
    return strncmp(soc, "Ascend910", 9) == 0 && soc[9] != 'B' && soc[9] != '_';
}

static bool soc_has_capacity_channels(const char *soc)
{
    return strncmp(soc, "Ascend910", 9) == 0 || strncmp(soc, "Ascend950", 9) == 0;
}

static void msg_free(tdt_msg *m)
{
    if (m == NULL) {
        return;
    }
    for (size_t i = 0; i < m->n; i++) {
        item_free_content(&m->items[i]);
    }
    free(m->items);
    free(m);
}

static acltdtChannelHandle *channel_create(const char *fn, uint32_t deviceId, const char *name, size_t capacity,
                                           bool supported)
{
    const char *soc = aclmockGetSocName();
    if (!supported) {
        tdt_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "not supported on %s (ASCEND_MOCK_SOC_NAME)", soc);
        return NULL;
    }
    if (name == NULL || name[0] == '\0') {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'name' is %s", name == NULL ? "NULL" : "empty");
        return NULL;
    }
    int64_t visible = aclmockGetConfig(ACLMOCK_CONFIG_VISIBLE_DEVICE_COUNT);
    if ((int64_t)deviceId >= visible) {
        tdt_error(fn, ACL_ERROR_RT_INVALID_DEVICEID, "argument 'deviceId' %u is not a visible device (%lld visible)",
                  deviceId, (long long)visible);
        return NULL;
    }
    acltdtChannelHandle *ch = calloc(1, sizeof(*ch));
    char *copy = strdup(name);
    if (ch == NULL || copy == NULL) {
        free(ch);
        free(copy);
        tdt_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
        return NULL;
    }
    ch->magic = TDT_CHANNEL_MAGIC;
    ch->device = deviceId;
    ch->name = copy;
    ch->capacity = capacity;
    core_mutex_init(&ch->mu, MOCK_LOCK_TDT_CHANNEL);
    core_cond_init(&ch->cv);
    /* one channel per (device, name) */
    bool dup = false, added = false;
    core_mutex_lock(&g_handles_mu);
    for (size_t i = 0; i < g_channels.cap && !dup; i++) {
        const acltdtChannelHandle *o = core_registry_slot(&g_channels, i);
        dup = o != NULL && o->device == deviceId && strcmp(o->name, name) == 0;
    }
    if (!dup) {
        added = core_registry_insert(&g_channels, ch);
    }
    core_mutex_unlock(&g_handles_mu);
    if (!added) {
        core_mutex_destroy(&ch->mu);
        pthread_cond_destroy(&ch->cv);
        free(copy);
        free(ch);
        if (dup) {
            tdt_error(fn, ACL_ERROR_RT_REPEATED_INIT, "a channel named '%s' already exists on device %u", name,
                      deviceId);
        } else {
            tdt_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
        }
        return NULL;
    }
    return ch;
}

acltdtChannelHandle *acltdtCreateChannel(uint32_t deviceId, const char *name)
{
    return channel_create("acltdtCreateChannel", deviceId, name, 0, soc_is_910_training(aclmockGetSocName()));
}

acltdtChannelHandle *acltdtCreateChannelWithCapacity(uint32_t deviceId, const char *name, size_t capacity)
{
    const char *fn = "acltdtCreateChannelWithCapacity";
    bool supported = soc_has_capacity_channels(aclmockGetSocName());
    if (supported && (capacity < TDT_MIN_CAPACITY || capacity > TDT_MAX_CAPACITY)) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'capacity' %zu is not in [%u, %u]", capacity,
                  TDT_MIN_CAPACITY, TDT_MAX_CAPACITY);
        return NULL;
    }
    return channel_create(fn, deviceId, name, capacity, supported);
}

/* Pins a live channel (users + 1) or records the error and returns NULL. */
static acltdtChannelHandle *channel_enter(const char *fn, const acltdtChannelHandle *handle)
{
    if (handle == NULL) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'handle' is NULL");
        return NULL;
    }
    acltdtChannelHandle *ch = NULL;
    core_mutex_lock(&g_handles_mu);
    if (core_registry_contains(&g_channels, handle)) {
        ch = (acltdtChannelHandle *)(uintptr_t)handle;
        /* users is otherwise guarded by ch->mu; taking it here would nest the two locks,
         * so the pin is an atomic increment made while the registry vouches for ch */
        __atomic_fetch_add(&ch->users, 1, __ATOMIC_ACQ_REL);
    }
    core_mutex_unlock(&g_handles_mu);
    if (ch == NULL) {
        tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'handle' (%p) is not a live channel",
                  (const void *)handle);
    }
    return ch;
}

static void channel_leave(acltdtChannelHandle *ch)
{
    core_mutex_lock(&ch->mu);
    __atomic_fetch_sub(&ch->users, 1, __ATOMIC_ACQ_REL);
    pthread_cond_broadcast(&ch->cv);
    core_mutex_unlock(&ch->mu);
}

aclError acltdtStopChannel(acltdtChannelHandle *handle)
{
    acltdtChannelHandle *ch = channel_enter("acltdtStopChannel", handle);
    if (ch == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    core_mutex_lock(&ch->mu);
    ch->stopped = true;
    pthread_cond_broadcast(&ch->cv);
    core_mutex_unlock(&ch->mu);
    channel_leave(ch);
    return ACL_SUCCESS;
}

aclError acltdtDestroyChannel(acltdtChannelHandle *handle)
{
    const char *fn = "acltdtDestroyChannel";
    if (handle == NULL) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'handle' is NULL");
    }
    if (!handle_remove(&g_channels, handle)) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'handle' (%p) is not a live channel", (void *)handle);
    }
    acltdtChannelHandle *ch = handle;
    core_mutex_lock(&ch->mu);
    ch->stopped = true;
    pthread_cond_broadcast(&ch->cv);
    while (__atomic_load_n(&ch->users, __ATOMIC_ACQUIRE) > 0) {
        core_cond_wait(&ch->cv, &ch->mu);
    }
    tdt_msg *m = ch->head;
    ch->head = ch->tail = NULL;
    core_mutex_unlock(&ch->mu);
    while (m != NULL) {
        tdt_msg *next = m->next;
        msg_free(m);
        m = next;
    }
    core_mutex_destroy(&ch->mu);
    pthread_cond_destroy(&ch->cv);
    free(ch->name);
    ch->magic = 0;
    free(ch);
    return ACL_SUCCESS;
}

/* Deep copy of a dataset's items for the channel; NULL with *rc set on failure. */
static tdt_msg *msg_from_dataset(const char *fn, const acltdtDataset *ds, aclError *rc)
{
    tdt_msg *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        *rc = tdt_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
        return NULL;
    }
    m->items = ds->n > 0 ? calloc(ds->n, sizeof(acltdtDataItem)) : NULL;
    if (ds->n > 0 && m->items == NULL) {
        free(m);
        *rc = tdt_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
        return NULL;
    }
    for (size_t i = 0; i < ds->n; i++) {
        const acltdtDataItem *src = ds->items[i];
        if (!handle_live(&g_items, src)) {
            msg_free(m);
            *rc = tdt_error(fn, ACL_ERROR_INVALID_PARAM, "item %zu of the dataset (%p) was destroyed", i,
                            (const void *)src);
            return NULL;
        }
        acltdtDataItem *dst = &m->items[i];
        *dst = *src;
        dst->owns_data = true;
        dst->owner = NULL; /* set when a receive hands it to a dataset */
        dst->dims = src->ndims > 0 ? malloc(src->ndims * sizeof(int64_t)) : NULL;
        dst->data = malloc(src->size > 0 ? src->size : 1);
        m->n = i + 1;
        if ((src->ndims > 0 && dst->dims == NULL) || dst->data == NULL) {
            msg_free(m);
            *rc = tdt_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory for a %zu-byte item", src->size);
            return NULL;
        }
        if (src->ndims > 0) {
            memcpy(dst->dims, src->dims, src->ndims * sizeof(int64_t));
        }
        if (src->size > 0) {
            memcpy(dst->data, src->data, src->size);
        }
    }
    /* slices: a run of SLICE_TENSOR items closed by an END_TENSOR item is one tensor */
    size_t start = 0;
    for (size_t i = 0; i < m->n; i++) {
        acltdtTensorType t = m->items[i].type;
        if (t != ACL_TENSOR_DATA_SLICE_TENSOR && t != ACL_TENSOR_DATA_END_TENSOR) {
            m->items[i].slice_num = 1;
            m->items[i].slice_id = 0;
            start = i + 1;
        } else if (t == ACL_TENSOR_DATA_END_TENSOR) {
            for (size_t k = start; k <= i; k++) {
                m->items[k].slice_num = i - start + 1;
                m->items[k].slice_id = k - start;
            }
            start = i + 1;
        }
    }
    return m;
}

/* Waits on ch->cv (held) until ready(ch), a stop, or the deadline. 0 = ready,
 * 1 = stopped, 2 = timed out. */
static int channel_wait(acltdtChannelHandle *ch, bool (*ready)(const acltdtChannelHandle *),
                        const struct timespec *deadline)
{
    for (;;) {
        if (ch->stopped) {
            return 1;
        }
        if (ready(ch)) {
            return 0;
        }
        if (core_cond_wait_until(&ch->cv, &ch->mu, deadline) == ETIMEDOUT && !ready(ch) && !ch->stopped) {
            return 2;
        }
    }
}

static bool has_room(const acltdtChannelHandle *ch)
{
    return ch->capacity == 0 || ch->count < ch->capacity;
}

static bool has_data(const acltdtChannelHandle *ch)
{
    return ch->count > 0;
}

static aclError check_channel_timeout(const char *fn, int32_t timeout, struct timespec *buf,
                                      const struct timespec **deadline)
{
    if (timeout < -1) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'timeout' is %d (must be -1, 0 or a number of ms)",
                         (int)timeout);
    }
    *deadline = core_deadline_opt(timeout, buf); /* 0: already due, so a full wait fails at once */
    return ACL_SUCCESS;
}

aclError acltdtSendTensor(const acltdtChannelHandle *handle, const acltdtDataset *dataset, int32_t timeout)
{
    const char *fn = "acltdtSendTensor";
    struct timespec buf;
    const struct timespec *deadline = NULL;
    aclError rc = check_channel_timeout(fn, timeout, &buf, &deadline);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const acltdtDataset *ds = dataset_get(fn, dataset);
    if (ds == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    acltdtChannelHandle *ch = channel_enter(fn, handle);
    if (ch == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    tdt_msg *m = msg_from_dataset(fn, ds, &rc);
    if (m == NULL) {
        channel_leave(ch);
        return rc;
    }
    core_mutex_lock(&ch->mu);
    int w = channel_wait(ch, has_room, deadline);
    if (w == 0) {
        if (ch->tail != NULL) {
            ch->tail->next = m;
        } else {
            ch->head = m;
        }
        ch->tail = m;
        ch->count++;
        m = NULL;
        pthread_cond_broadcast(&ch->cv);
    }
    size_t cap = ch->capacity;
    core_mutex_unlock(&ch->mu);
    channel_leave(ch);
    msg_free(m);
    if (w == 1) {
        return tdt_error(fn, ACL_ERROR_FAILURE, "the channel was stopped (acltdtStopChannel)");
    }
    if (w == 2) {
        return tdt_error(fn, ACL_ERROR_RT_QUEUE_FULL, "the channel is full (%zu datasets) after waiting %d ms", cap,
                         (int)timeout);
    }
    return ACL_SUCCESS;
}

aclError acltdtReceiveTensor(const acltdtChannelHandle *handle, acltdtDataset *dataset, int32_t timeout)
{
    const char *fn = "acltdtReceiveTensor";
    struct timespec buf;
    const struct timespec *deadline = NULL;
    aclError rc = check_channel_timeout(fn, timeout, &buf, &deadline);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    acltdtDataset *ds = dataset_get(fn, dataset);
    if (ds == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    acltdtChannelHandle *ch = channel_enter(fn, handle);
    if (ch == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    core_mutex_lock(&ch->mu);
    int w = channel_wait(ch, has_data, deadline);
    tdt_msg *m = NULL;
    if (w == 0) {
        m = ch->head;
        ch->head = m->next;
        if (ch->head == NULL) {
            ch->tail = NULL;
        }
        ch->count--;
        pthread_cond_broadcast(&ch->cv);
    }
    char *name = w == 0 ? strdup(ch->name) : NULL;
    core_mutex_unlock(&ch->mu);
    channel_leave(ch);
    if (w == 1) {
        return tdt_error(fn, ACL_ERROR_FAILURE, "the channel was stopped (acltdtStopChannel)");
    }
    if (w == 2) {
        return tdt_error(fn, ACL_ERROR_RT_QUEUE_EMPTY, "the channel is empty after waiting %d ms", (int)timeout);
    }
    /* the received items replace the dataset's content (README "TDT channels") */
    dataset_clear(ds);
    free(ds->name);
    ds->name = name;
    rc = ACL_SUCCESS;
    for (size_t i = 0; i < m->n && rc == ACL_SUCCESS; i++) {
        acltdtDataItem *it = malloc(sizeof(*it));
        if (it != NULL) {
            *it = m->items[i];
            it->owner = ds;
            m->items[i].dims = NULL; /* moved */
            m->items[i].data = NULL;
        }
        if (it == NULL || !handle_add(&g_items, it) || !dataset_push(ds, it)) {
            if (it != NULL) {
                handle_remove(&g_items, it);
                item_free_content(it);
                free(it);
            }
            rc = tdt_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory for the received items");
        }
    }
    msg_free(m);
    return rc;
}

aclError acltdtQueryChannelSize(const acltdtChannelHandle *handle, size_t *size)
{
    const char *fn = "acltdtQueryChannelSize";
    if (size == NULL) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is NULL");
    }
    acltdtChannelHandle *ch = channel_enter(fn, handle);
    if (ch == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    core_mutex_lock(&ch->mu);
    bool bounded = ch->capacity > 0;
    size_t n = ch->count;
    core_mutex_unlock(&ch->mu);
    channel_leave(ch);
    if (!bounded) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM,
                         "the channel was made without a capacity (use acltdtCreateChannelWithCapacity)");
    }
    *size = n;
    return ACL_SUCCESS;
}

aclError acltdtCleanChannel(acltdtChannelHandle *handle)
{
    const char *fn = "acltdtCleanChannel";
    acltdtChannelHandle *ch = channel_enter(fn, handle);
    if (ch == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    core_mutex_lock(&ch->mu);
    bool bounded = ch->capacity > 0;
    tdt_msg *m = NULL;
    if (bounded) {
        m = ch->head;
        ch->head = ch->tail = NULL;
        ch->count = 0;
        pthread_cond_broadcast(&ch->cv);
    }
    core_mutex_unlock(&ch->mu);
    channel_leave(ch);
    while (m != NULL) {
        tdt_msg *next = m->next;
        msg_free(m);
        m = next;
    }
    if (!bounded) {
        return tdt_error(fn, ACL_ERROR_INVALID_PARAM,
                         "the channel was made without a capacity (use acltdtCreateChannelWithCapacity)");
    }
    return ACL_SUCCESS;
}
