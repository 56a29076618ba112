/*
 * queue.c - libacl_tdt_queue.so: shared queues, their attributes and the routes that
 * forward from one queue to several (acl/acl_tdt_queue.h; acl_next_semantics.md
 * section 6.2).
 *
 * Queues live in this process (the pid permissions of acltdtGrantQueue /
 * acltdtAttachQueue, and acltdtEnqueue / acltdtDequeue of shared buffers, are marked
 * unsupported on every product by the docs: they answer ACL_ERROR_RT_FEATURE_NOT_SUPPORT).
 *   - acltdtCreateQueue: attr NULL = an automatic name ("queue_<qid>") and depth 8; the
 *     depth is 1..8192 and a process has at most 4096 queues (ACL_ERROR_RT_OVER_LIMIT
 *     207012) (limits: mock choice). An unknown qid is ACL_ERROR_INVALID_QUEUE_ID (100032).
 *   - acltdtEnqueueData copies dataSize bytes from host or device memory (device memory
 *     through aclrtMemcpy: the calling thread needs a context of that device) and up to
 *     96 bytes of user data; acltdtDequeueData copies the oldest element out (into host or
 *     device memory) with *retDataSize = its size; a buffer smaller than the element is
 *     ACL_ERROR_INVALID_PARAM with *retDataSize set and the element left in the queue.
 *     timeout -1 waits, > 0 waits that many ms, 0 does not wait (the docs define 0 on the
 *     device side only; on the host the mock does not wait either: mock choice). A full
 *     queue is ACL_ERROR_RT_QUEUE_FULL (207014), an empty one ACL_ERROR_RT_QUEUE_EMPTY
 *     (207013); a copy from or to device memory that fails is ACL_ERROR_RT_COPY_DATA
 *     (507052); a queue destroyed while a thread waits on it wakes it with 100032.
 *   - routes: acltdtBindQueueRoutes binds every route of the list or reports an error;
 *     each route of the list gets its status (BIND, or UNBIND when it could not be
 *     bound: unknown queue (100032), a route to itself, one already bound or one closing
 *     a cycle (ACL_ERROR_INVALID_PARAM)). While a queue has bound routes, each element
 *     enqueued to it is forwarded to every destination queue as soon as all of them have
 *     room (until then it waits in the source queue); the destinations share the
 *     element's bytes. Destroying a queue turns its routes BIND_ABNORMAL (found by the
 *     ABNORMAL query, removed by unbinding them). Unlike the real runtime the route calls
 *     are thread-safe.
 * Every object handle is validated (a stale or foreign pointer is an error, never a
 * crash). One lock guards the library's state; each queue has a condition variable on it.
 * No lock is held while calling into libascendcl.so (errors, copies).
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_tdt_queue.h"
#include "core/core.h" /* handle registry, locks, deadlines (static inline) */

#define Q_DEFAULT_DEPTH 8u
#define Q_MAX_DEPTH 8192u
#define Q_MAX_QUEUES 4096u
#define Q_USER_DATA 96u
#define Q_NAME_MAX 128u /* bytes with the NUL */
#define Q_ATTR_MAGIC 0x7164744174747231ULL
#define Q_ROUTE_MAGIC 0x7164745274653031ULL
#define Q_LIST_MAGIC 0x716474526c737431ULL
#define Q_QUERY_MAGIC 0x7164745172793031ULL

/* ================================================================ errors */

/* Records the error on the calling thread (libascendcl.so's aclmockSetError). */
#define q_error aclmockSetError

/* ================================================================ objects */

struct acltdtQueueAttr {
    uint64_t magic;
    char name[Q_NAME_MAX];
    const char *name_ptr; /* what ACL_TDT_QUEUE_NAME_PTR reads back: name or NULL */
    uint32_t depth;
};

struct acltdtQueueRoute {
    uint64_t magic;
    uint32_t src, dst;
    int32_t status;
};

struct acltdtQueueRouteList {
    uint64_t magic;
    acltdtQueueRoute *v; /* copies */
    size_t n, cap;
};

struct acltdtQueueRouteQueryInfo {
    uint64_t magic;
    bool has_mode, has_src, has_dst;
    int32_t mode;
    uint32_t src, dst;
};

/* The bytes of an element, shared by the copies a route forwards. */
typedef struct q_data {
    atomic_size_t refs; /* the elements holding it (queue_free runs without the lock) */
    size_t size;
    unsigned char bytes[];
} q_data;

typedef struct q_elem {
    q_data *data;
    unsigned char user[Q_USER_DATA];
    struct q_elem *next;
} q_elem;

typedef struct tdt_queue {
    uint32_t id;
    char name[Q_NAME_MAX];
    uint32_t depth;
    q_elem *head, *tail;
    size_t count;
    pthread_cond_t cv; /* an element came or went, or the queue was destroyed */
    bool destroyed;
    int waiters;   /* threads waiting on cv (the last one frees a destroyed queue) */
    size_t routes_out; /* bound (not abnormal) routes with this queue as source */
} tdt_queue;

typedef struct bound_route {
    uint32_t src, dst;
    int32_t status; /* BIND or BIND_ABNORMAL */
} bound_route;

/* Everything below is guarded by g_mu. */
static mock_mutex g_mu = MOCK_MUTEX_INIT(MOCK_LOCK_TDT_QUEUES);
static tdt_queue *g_slots[Q_MAX_QUEUES];
static uint32_t g_generation[Q_MAX_QUEUES];
static uint32_t g_live;
static bound_route *g_routes;
static size_t g_nroutes, g_caproutes;
static mock_registry g_attrs = MOCK_REGISTRY_EMPTY;
static mock_registry g_route_objs = MOCK_REGISTRY_EMPTY;
static mock_registry g_lists = MOCK_REGISTRY_EMPTY;
static mock_registry g_queries = MOCK_REGISTRY_EMPTY;

/* qid = generation * Q_MAX_QUEUES + slot + 1 (never 0; reused slots get new ids) */
static tdt_queue *queue_get_locked(uint32_t qid)
{
    if (qid == 0) {
        return NULL;
    }
    tdt_queue *q = g_slots[(qid - 1) % Q_MAX_QUEUES];
    return q != NULL && q->id == qid ? q : NULL;
}

static bool live(mock_registry *reg, const void *h)
{
    core_mutex_lock(&g_mu);
    bool ok = core_registry_contains(reg, h);
    core_mutex_unlock(&g_mu);
    return ok;
}

static void data_unref(q_data *d)
{
    if (d != NULL && atomic_fetch_sub(&d->refs, 1) == 1) {
        free(d);
    }
}

static void queue_free(tdt_queue *q)
{
    q_elem *e = q->head;
    while (e != NULL) {
        q_elem *n = e->next;
        data_unref(e->data);
        free(e);
        e = n;
    }
    pthread_cond_destroy(&q->cv);
    free(q);
}

/* ================================================================ attributes */

/* A zeroed object of `size` bytes registered in `reg`; NULL (error recorded under fn)
 * when out of memory. */
static void *create_obj(const char *fn, mock_registry *reg, size_t size)
{
    void *o = calloc(1, size);
    if (o != NULL) {
        core_mutex_lock(&g_mu);
        bool ok = core_registry_insert(reg, o);
        core_mutex_unlock(&g_mu);
        if (!ok) {
            free(o);
            o = NULL;
        }
    }
    if (o == NULL) {
        q_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
    }
    return o;
}

acltdtQueueAttr *acltdtCreateQueueAttr(void)
{
    acltdtQueueAttr *a = create_obj("acltdtCreateQueueAttr", &g_attrs, sizeof(*a));
    if (a != NULL) {
        a->magic = Q_ATTR_MAGIC;
        a->depth = Q_DEFAULT_DEPTH;
    }
    return a;
}

static aclError destroy_obj(const char *fn, const char *what, mock_registry *reg, const void *obj)
{
    if (obj == NULL) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", what);
    }
    core_mutex_lock(&g_mu);
    bool ok = core_registry_erase(reg, obj);
    core_mutex_unlock(&g_mu);
    if (!ok) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' (%p) is not live (destroyed twice?)", what, obj);
    }
    return ACL_SUCCESS;
}

aclError acltdtDestroyQueueAttr(const acltdtQueueAttr *attr)
{
    aclError rc = destroy_obj("acltdtDestroyQueueAttr", "attr", &g_attrs, attr);
    if (rc == ACL_SUCCESS) {
        free((void *)(uintptr_t)attr);
    }
    return rc;
}

static aclError check_obj(const char *fn, const char *what, mock_registry *reg, const void *obj)
{
    if (obj == NULL) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", what);
    }
    if (!live(reg, obj)) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' (%p) is not a live object of its kind", what, obj);
    }
    return ACL_SUCCESS;
}

/* The size of an attribute's value (0 for an unknown type). */
static size_t attr_size(acltdtQueueAttrType type)
{
    switch (type) {
    case ACL_TDT_QUEUE_NAME_PTR:
        return sizeof(char *);
    case ACL_TDT_QUEUE_DEPTH_UINT32:
        return sizeof(uint32_t);
    }
    return 0;
}

aclError acltdtSetQueueAttr(acltdtQueueAttr *attr, acltdtQueueAttrType type, size_t len, const void *param)
{
    const char *fn = "acltdtSetQueueAttr";
    aclError rc = check_obj(fn, "attr", &g_attrs, attr);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    size_t need = attr_size(type);
    if (need == 0) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'type' %d is not an acltdtQueueAttrType", (int)type);
    }
    if (param == NULL || len != need) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' must be %zu bytes (got %zu%s)",
                       param == NULL ? "param" : "len", need, len, param == NULL ? ", param NULL" : "");
    }
    if (type == ACL_TDT_QUEUE_NAME_PTR) {
        const char *name;
        memcpy(&name, param, sizeof name);
        if (name == NULL || name[0] == '\0' || strnlen(name, Q_NAME_MAX) >= Q_NAME_MAX) {
            return q_error(fn, ACL_ERROR_INVALID_PARAM, "the queue name must be 1..%u characters", Q_NAME_MAX - 1);
        }
        snprintf(attr->name, sizeof attr->name, "%s", name);
        attr->name_ptr = attr->name;
        return ACL_SUCCESS;
    }
    uint32_t depth;
    memcpy(&depth, param, sizeof depth);
    if (depth == 0 || depth > Q_MAX_DEPTH) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "the queue depth %u is not in [1, %u]", depth, Q_MAX_DEPTH);
    }
    attr->depth = depth;
    return ACL_SUCCESS;
}

aclError acltdtGetQueueAttr(const acltdtQueueAttr *attr, acltdtQueueAttrType type, size_t len,
                            size_t *paramRetSize, void *param)
{
    const char *fn = "acltdtGetQueueAttr";
    aclError rc = check_obj(fn, "attr", &g_attrs, attr);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    size_t need = attr_size(type);
    if (need == 0) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'type' %d is not an acltdtQueueAttrType", (int)type);
    }
    if (param == NULL || paramRetSize == NULL || len < need) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'param' needs %zu bytes (len %zu%s)", need, len,
                       param == NULL || paramRetSize == NULL ? ", or a NULL pointer" : "");
    }
    if (type == ACL_TDT_QUEUE_NAME_PTR) {
        memcpy(param, &attr->name_ptr, sizeof attr->name_ptr);
    } else {
        memcpy(param, &attr->depth, sizeof attr->depth);
    }
    *paramRetSize = need;
    return ACL_SUCCESS;
}

/* ================================================================ queues */

aclError acltdtCreateQueue(const acltdtQueueAttr *attr, uint32_t *qid)
{
    const char *fn = "acltdtCreateQueue";
    if (qid == NULL) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'qid' is NULL");
    }
    tdt_queue *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        return q_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
    }
    core_cond_init(&q->cv);
    int why = 0; /* 1 bad attr, 2 too many */
    core_mutex_lock(&g_mu);
    if (attr != NULL && !core_registry_contains(&g_attrs, attr)) {
        why = 1;
    } else if (g_live >= Q_MAX_QUEUES) {
        why = 2;
    } else {
        uint32_t slot = 0;
        while (g_slots[slot] != NULL) {
            slot++;
        }
        q->id = g_generation[slot]++ % (UINT32_MAX / Q_MAX_QUEUES) * Q_MAX_QUEUES + slot + 1;
        q->depth = attr != NULL ? attr->depth : Q_DEFAULT_DEPTH;
        if (attr != NULL && attr->name_ptr != NULL) {
            snprintf(q->name, sizeof q->name, "%s", attr->name);
        } else {
            snprintf(q->name, sizeof q->name, "queue_%u", q->id);
        }
        g_slots[slot] = q;
        g_live++;
        *qid = q->id;
    }
    core_mutex_unlock(&g_mu);
    if (why != 0) {
        pthread_cond_destroy(&q->cv);
        free(q);
        if (why == 1) {
            return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'attr' (%p) is not a live queue attribute",
                           (const void *)attr);
        }
        return q_error(fn, ACL_ERROR_RT_OVER_LIMIT, "too many queues (at most %u per process)", Q_MAX_QUEUES);
    }
    return ACL_SUCCESS;
}

static void routes_forget_queue_locked(uint32_t qid);

aclError acltdtDestroyQueue(uint32_t qid)
{
    const char *fn = "acltdtDestroyQueue";
    bool found = false, free_now = false;
    core_mutex_lock(&g_mu);
    tdt_queue *q = queue_get_locked(qid);
    if (q != NULL) {
        found = true;
        g_slots[(qid - 1) % Q_MAX_QUEUES] = NULL;
        g_live--;
        routes_forget_queue_locked(qid);
        q->destroyed = true;
        pthread_cond_broadcast(&q->cv);
        free_now = q->waiters == 0; /* else the last waiter frees it */
    }
    core_mutex_unlock(&g_mu);
    if (!found) {
        return q_error(fn, ACL_ERROR_INVALID_QUEUE_ID, "queue %u does not exist", qid);
    }
    if (free_now) {
        queue_free(q);
    }
    return ACL_SUCCESS;
}

/* Forwards the head elements of queues with bound routes to all their destinations
 * while every destination has room (cascading along chains of routes). */
static void pump_locked(void)
{
    bool progress = true;
    while (progress) {
        progress = false;
        for (uint32_t s = 0; s < Q_MAX_QUEUES; s++) {
            tdt_queue *src = g_slots[s];
            if (src == NULL || src->routes_out == 0 || src->head == NULL) {
                continue;
            }
            bool room = true;
            for (size_t i = 0; i < g_nroutes && room; i++) {
                bound_route *r = &g_routes[i];
                if (r->src == src->id && r->status == ACL_TDT_QUEUE_ROUTE_BIND) {
                    tdt_queue *dst = queue_get_locked(r->dst);
                    room = dst != NULL && dst->count < dst->depth;
                }
            }
            if (!room) {
                continue;
            }
            q_elem *e = src->head;
            src->head = e->next;
            if (src->head == NULL) {
                src->tail = NULL;
            }
            src->count--;
            for (size_t i = 0; i < g_nroutes; i++) {
                bound_route *r = &g_routes[i];
                if (r->src != src->id || r->status != ACL_TDT_QUEUE_ROUTE_BIND) {
                    continue;
                }
                tdt_queue *dst = queue_get_locked(r->dst);
                q_elem *c = malloc(sizeof(*c));
                if (c == NULL) {
                    continue; /* host out of memory: this destination misses the element */
                }
                *c = *e;
                c->next = NULL;
                atomic_fetch_add(&c->data->refs, 1);
                if (dst->tail != NULL) {
                    dst->tail->next = c;
                } else {
                    dst->head = c;
                }
                dst->tail = c;
                dst->count++;
                pthread_cond_broadcast(&dst->cv);
            }
            data_unref(e->data);
            free(e);
            pthread_cond_broadcast(&src->cv);
            progress = true;
        }
    }
}

/* Waits (g_mu held) on q until ready(q), the deadline or q's destruction. Returns 0 when
 * ready, 1 when the queue was destroyed (then freed here if this was its last waiter;
 * q must not be used after), 2 on time-out. */
static int queue_wait_locked(tdt_queue *q, bool (*ready)(const tdt_queue *), const struct timespec *deadline)
{
    int result = 0;
    q->waiters++;
    for (;;) {
        if (q->destroyed) {
            result = 1;
            break;
        }
        if (ready(q)) {
            break;
        }
        if (core_cond_wait_until(&q->cv, &g_mu, deadline) == ETIMEDOUT && !q->destroyed && !ready(q)) {
            result = 2;
            break;
        }
    }
    q->waiters--;
    if (result == 1 && q->waiters == 0) {
        queue_free(q);
    }
    return result;
}

static bool q_has_room(const tdt_queue *q)
{
    return q->count < q->depth;
}

static bool q_has_data(const tdt_queue *q)
{
    return q->head != NULL;
}

static aclError check_queue_timeout(const char *fn, int32_t timeout, struct timespec *buf,
                                    const struct timespec **deadline)
{
    if (timeout < -1) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'timeout' is %d (must be -1, 0 or a number of ms)",
                       (int)timeout);
    }
    *deadline = core_deadline_opt(timeout, buf);
    return ACL_SUCCESS;
}

/* True when [p, p+n) is device memory (aclrtPointerGetAttributes), which the host
 * reaches through aclrtMemcpy only. */
static bool is_device_memory(const void *p)
{
    aclrtPtrAttributes a;
    if (aclrtPointerGetAttributes(p, &a) != ACL_SUCCESS) {
        (void)aclGetRecentErrMsg(); /* not ours to report */
        (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
        return false;
    }
    return a.location.type == ACL_MEM_LOCATION_TYPE_DEVICE;
}

/* Copies n bytes between host memory and user memory that may be device memory. */
static aclError copy_user(const char *fn, void *dst, const void *src, size_t n, bool to_user)
{
    const void *user = to_user ? dst : src;
    if (n == 0) {
        return ACL_SUCCESS;
    }
    if (!is_device_memory(user)) {
        memcpy(dst, src, n);
        return ACL_SUCCESS;
    }
    aclError rc = aclrtMemcpy(dst, n, src, n, to_user ? ACL_MEMCPY_HOST_TO_DEVICE : ACL_MEMCPY_DEVICE_TO_HOST);
    if (rc != ACL_SUCCESS) {
        const char *why = aclGetRecentErrMsg();
        char msg[400];
        snprintf(msg, sizeof msg, "%s", why != NULL ? why : "");
        return q_error(fn, ACL_ERROR_RT_COPY_DATA, "copying %zu bytes %s device memory failed (%d: %s)", n,
                       to_user ? "to" : "from", (int)rc, msg);
    }
    return ACL_SUCCESS;
}

aclError acltdtEnqueueData(uint32_t qid, const void *data, size_t dataSize, const void *userData,
                           size_t userDataSize, int32_t timeout, uint32_t rsv)
{
    const char *fn = "acltdtEnqueueData";
    struct timespec buf;
    const struct timespec *deadline = NULL;
    aclError rc = check_queue_timeout(fn, timeout, &buf, &deadline);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (rsv != 0) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'rsv' is %u (must be 0)", rsv);
    }
    if (data == NULL && dataSize > 0) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'data' is NULL with dataSize %zu", dataSize);
    }
    if (userDataSize > Q_USER_DATA || (userData == NULL && userDataSize > 0)) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "user data of %zu bytes%s (at most %u)", userDataSize,
                       userData == NULL ? " at NULL" : "", Q_USER_DATA);
    }
    q_elem *e = calloc(1, sizeof(*e));
    q_data *d = malloc(sizeof(q_data) + dataSize);
    if (e == NULL || d == NULL) {
        free(e);
        free(d);
        return q_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory for %zu bytes", dataSize);
    }
    atomic_init(&d->refs, 1);
    d->size = dataSize;
    e->data = d;
    rc = copy_user(fn, d->bytes, data, dataSize, false);
    if (rc != ACL_SUCCESS) {
        free(e);
        free(d);
        return rc;
    }
    if (userDataSize > 0) {
        memcpy(e->user, userData, userDataSize);
    }
    int w = -1; /* -1: no such queue */
    core_mutex_lock(&g_mu);
    tdt_queue *q = queue_get_locked(qid);
    if (q != NULL) {
        w = queue_wait_locked(q, q_has_room, deadline);
    }
    if (w == 0) {
        if (q->tail != NULL) {
            q->tail->next = e;
        } else {
            q->head = e;
        }
        q->tail = e;
        q->count++;
        e = NULL;
        pthread_cond_broadcast(&q->cv);
        pump_locked();
    }
    core_mutex_unlock(&g_mu);
    if (e != NULL) {
        free(e);
        free(d);
    }
    switch (w) {
    case -1:
        return q_error(fn, ACL_ERROR_INVALID_QUEUE_ID, "queue %u does not exist", qid);
    case 1:
        return q_error(fn, ACL_ERROR_INVALID_QUEUE_ID, "queue %u was destroyed while waiting", qid);
    case 2:
        return q_error(fn, ACL_ERROR_RT_QUEUE_FULL, "queue %u is full (timeout %d ms)", qid, (int)timeout);
    }
    return ACL_SUCCESS;
}

aclError acltdtDequeueData(uint32_t qid, void *data, size_t dataSize, size_t *retDataSize, void *userData,
                           size_t userDataSize, int32_t timeout)
{
    const char *fn = "acltdtDequeueData";
    struct timespec buf;
    const struct timespec *deadline = NULL;
    aclError rc = check_queue_timeout(fn, timeout, &buf, &deadline);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (retDataSize == NULL || (data == NULL && dataSize > 0)) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", retDataSize == NULL ? "retDataSize" : "data");
    }
    if (userDataSize > Q_USER_DATA || (userData == NULL && userDataSize > 0)) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "user data of %zu bytes%s (at most %u)", userDataSize,
                       userData == NULL ? " at NULL" : "", Q_USER_DATA);
    }
    int w = -1;
    q_elem *e = NULL;
    size_t need = 0;
    core_mutex_lock(&g_mu);
    tdt_queue *q = queue_get_locked(qid);
    if (q != NULL) {
        w = queue_wait_locked(q, q_has_data, deadline);
    }
    if (w == 0) {
        need = q->head->data->size;
        if (need <= dataSize) {
            e = q->head;
            q->head = e->next;
            if (q->head == NULL) {
                q->tail = NULL;
            }
            q->count--;
            pthread_cond_broadcast(&q->cv);
            pump_locked(); /* room for what routes forward here */
        }
    }
    core_mutex_unlock(&g_mu);
    switch (w) {
    case -1:
        return q_error(fn, ACL_ERROR_INVALID_QUEUE_ID, "queue %u does not exist", qid);
    case 1:
        return q_error(fn, ACL_ERROR_INVALID_QUEUE_ID, "queue %u was destroyed while waiting", qid);
    case 2:
        return q_error(fn, ACL_ERROR_RT_QUEUE_EMPTY, "queue %u is empty (timeout %d ms)", qid, (int)timeout);
    }
    *retDataSize = need;
    if (e == NULL) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM,
                       "the element of queue %u has %zu bytes, more than dataSize %zu (it stays queued)", qid, need,
                       dataSize);
    }
    rc = copy_user(fn, data, e->data->bytes, need, true);
    if (userDataSize > 0) {
        memcpy(userData, e->user, userDataSize);
    }
    data_unref(e->data);
    free(e);
    return rc;
}

static aclError no_product(const char *fn)
{
    return q_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                   "not supported: the documentation lists no product that supports it");
}

aclError acltdtEnqueue(uint32_t qid, acltdtBuf buf, int32_t timeout)
{
    (void)qid;
    (void)buf;
    (void)timeout;
    return no_product("acltdtEnqueue");
}

aclError acltdtDequeue(uint32_t qid, acltdtBuf *buf, int32_t timeout)
{
    (void)qid;
    (void)buf;
    (void)timeout;
    return no_product("acltdtDequeue");
}

aclError acltdtGrantQueue(uint32_t qid, int32_t pid, uint32_t permission, int32_t timeout)
{
    (void)qid;
    (void)pid;
    (void)permission;
    (void)timeout;
    return no_product("acltdtGrantQueue");
}

aclError acltdtAttachQueue(uint32_t qid, int32_t timeout, uint32_t *permission)
{
    (void)qid;
    (void)timeout;
    (void)permission;
    return no_product("acltdtAttachQueue");
}

/* ================================================================ routes */

acltdtQueueRoute *acltdtCreateQueueRoute(uint32_t srcId, uint32_t dstId)
{
    acltdtQueueRoute *r = create_obj("acltdtCreateQueueRoute", &g_route_objs, sizeof(*r));
    if (r != NULL) {
        *r = (acltdtQueueRoute){Q_ROUTE_MAGIC, srcId, dstId, ACL_TDT_QUEUE_ROUTE_UNBIND};
    }
    return r;
}

aclError acltdtDestroyQueueRoute(const acltdtQueueRoute *route)
{
    aclError rc = destroy_obj("acltdtDestroyQueueRoute", "route", &g_route_objs, route);
    if (rc == ACL_SUCCESS) {
        free((void *)(uintptr_t)route);
    }
    return rc;
}

aclError acltdtGetQueueRouteParam(const acltdtQueueRoute *route, acltdtQueueRouteParamType type, size_t len,
                                  size_t *paramRetSize, void *param)
{
    const char *fn = "acltdtGetQueueRouteParam";
    aclError rc = check_obj(fn, "route", &g_route_objs, route);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (type != ACL_TDT_QUEUE_ROUTE_SRC_UINT32 && type != ACL_TDT_QUEUE_ROUTE_DST_UINT32 &&
        type != ACL_TDT_QUEUE_ROUTE_STATUS_INT32) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'type' %d is not an acltdtQueueRouteParamType",
                       (int)type);
    }
    if (param == NULL || paramRetSize == NULL || len < 4) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'param' needs 4 bytes (len %zu%s)", len,
                       param == NULL || paramRetSize == NULL ? ", or a NULL pointer" : "");
    }
    core_mutex_lock(&g_mu);
    uint32_t v = type == ACL_TDT_QUEUE_ROUTE_SRC_UINT32   ? route->src
                 : type == ACL_TDT_QUEUE_ROUTE_DST_UINT32 ? route->dst
                                                          : (uint32_t)route->status;
    core_mutex_unlock(&g_mu);
    memcpy(param, &v, 4);
    *paramRetSize = 4;
    return ACL_SUCCESS;
}

acltdtQueueRouteList *acltdtCreateQueueRouteList(void)
{
    acltdtQueueRouteList *l = create_obj("acltdtCreateQueueRouteList", &g_lists, sizeof(*l));
    if (l != NULL) {
        l->magic = Q_LIST_MAGIC;
    }
    return l;
}

aclError acltdtDestroyQueueRouteList(const acltdtQueueRouteList *routeList)
{
    aclError rc = destroy_obj("acltdtDestroyQueueRouteList", "routeList", &g_lists, routeList);
    if (rc == ACL_SUCCESS) {
        free(routeList->v);
        free((void *)(uintptr_t)routeList);
    }
    return rc;
}

/* Appends a copy of r to l (g_mu held); false when out of memory. */
static bool list_push_locked(acltdtQueueRouteList *l, const acltdtQueueRoute *r)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 8;
        acltdtQueueRoute *v = realloc(l->v, ncap * sizeof(*v));
        if (v == NULL) {
            return false;
        }
        l->v = v;
        l->cap = ncap;
    }
    l->v[l->n++] = *r;
    return true;
}

aclError acltdtAddQueueRoute(acltdtQueueRouteList *routeList, const acltdtQueueRoute *route)
{
    const char *fn = "acltdtAddQueueRoute";
    int why = 0; /* 1 list, 2 route, 3 memory */
    core_mutex_lock(&g_mu);
    if (routeList == NULL || !core_registry_contains(&g_lists, routeList)) {
        why = 1;
    } else if (route == NULL || !core_registry_contains(&g_route_objs, route)) {
        why = 2;
    } else if (!list_push_locked(routeList, route)) {
        why = 3;
    }
    core_mutex_unlock(&g_mu);
    if (why == 3) {
        return q_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
    }
    if (why != 0) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL or not live",
                       why == 1 ? "routeList" : "route");
    }
    return ACL_SUCCESS;
}

aclError acltdtGetQueueRoute(const acltdtQueueRouteList *routeList, size_t index, acltdtQueueRoute *route)
{
    const char *fn = "acltdtGetQueueRoute";
    int why = 0; /* 1 list, 2 route, 3 index */
    size_t n = 0;
    core_mutex_lock(&g_mu);
    if (routeList == NULL || !core_registry_contains(&g_lists, routeList)) {
        why = 1;
    } else if (route == NULL || !core_registry_contains(&g_route_objs, route)) {
        why = 2;
    } else if (index >= routeList->n) {
        why = 3;
        n = routeList->n;
    } else {
        *route = routeList->v[index];
    }
    core_mutex_unlock(&g_mu);
    if (why == 3) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'index' (%zu) is not below the list size %zu", index, n);
    }
    if (why != 0) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL or not live",
                       why == 1 ? "routeList" : "route");
    }
    return ACL_SUCCESS;
}

size_t acltdtGetQueueRouteNum(const acltdtQueueRouteList *routeList)
{
    size_t n = 0;
    bool ok;
    core_mutex_lock(&g_mu);
    ok = routeList != NULL && core_registry_contains(&g_lists, routeList);
    if (ok) {
        n = routeList->n;
    }
    core_mutex_unlock(&g_mu);
    if (!ok) {
        q_error("acltdtGetQueueRouteNum", ACL_ERROR_INVALID_PARAM, "argument 'routeList' is NULL or not live");
    }
    return n;
}

static bound_route *route_find_locked(uint32_t src, uint32_t dst)
{
    for (size_t i = 0; i < g_nroutes; i++) {
        if (g_routes[i].src == src && g_routes[i].dst == dst) {
            return &g_routes[i];
        }
    }
    return NULL;
}

/* True when `to` is reachable from `from` along bound routes. */
static bool reachable_locked(uint32_t from, uint32_t to)
{
    if (from == to) {
        return true;
    }
    /* iterative DFS over queue ids; the route count bounds the work */
    uint32_t *stack = malloc((g_nroutes + 1) * sizeof(uint32_t));
    bool *seen = calloc(g_nroutes + 1, sizeof(bool)); /* per route: followed */
    bool found = false;
    if (stack == NULL || seen == NULL) {
        free(stack);
        free(seen);
        return true; /* out of memory: refuse the bind rather than risk a cycle */
    }
    size_t top = 0;
    stack[top++] = from;
    while (top > 0 && !found) {
        uint32_t at = stack[--top];
        for (size_t i = 0; i < g_nroutes && !found; i++) {
            if (!seen[i] && g_routes[i].src == at && g_routes[i].status == ACL_TDT_QUEUE_ROUTE_BIND) {
                seen[i] = true;
                found = g_routes[i].dst == to;
                stack[top++] = g_routes[i].dst;
            }
        }
    }
    free(stack);
    free(seen);
    return found;
}

static void route_count_locked(uint32_t src, int delta)
{
    tdt_queue *q = queue_get_locked(src);
    if (q != NULL) {
        q->routes_out = (size_t)((long)q->routes_out + delta);
    }
}

/* Destroyed queue: its bound routes become abnormal. */
static void routes_forget_queue_locked(uint32_t qid)
{
    for (size_t i = 0; i < g_nroutes; i++) {
        bound_route *r = &g_routes[i];
        if ((r->src == qid || r->dst == qid) && r->status == ACL_TDT_QUEUE_ROUTE_BIND) {
            r->status = ACL_TDT_QUEUE_ROUTE_BIND_ABNORMAL;
            if (r->dst == qid) {
                route_count_locked(r->src, -1);
            }
        }
    }
}

/* Binds one route (g_mu held): 0 or the error code, with *why a reason. */
static aclError bind_one_locked(const acltdtQueueRoute *r, const char **why)
{
    if (queue_get_locked(r->src) == NULL || queue_get_locked(r->dst) == NULL) {
        *why = "a queue of the route does not exist";
        return ACL_ERROR_INVALID_QUEUE_ID;
    }
    if (r->src == r->dst) {
        *why = "a route from a queue to itself";
        return ACL_ERROR_INVALID_PARAM;
    }
    if (route_find_locked(r->src, r->dst) != NULL) {
        *why = "the route is already bound";
        return ACL_ERROR_INVALID_PARAM;
    }
    if (reachable_locked(r->dst, r->src)) {
        *why = "the route would close a cycle";
        return ACL_ERROR_INVALID_PARAM;
    }
    if (g_nroutes == g_caproutes) {
        size_t ncap = g_caproutes ? g_caproutes * 2 : 16;
        bound_route *v = realloc(g_routes, ncap * sizeof(*v));
        if (v == NULL) {
            *why = "host out of memory";
            return ACL_ERROR_BAD_ALLOC;
        }
        g_routes = v;
        g_caproutes = ncap;
    }
    g_routes[g_nroutes++] = (bound_route){r->src, r->dst, ACL_TDT_QUEUE_ROUTE_BIND};
    route_count_locked(r->src, +1);
    return ACL_SUCCESS;
}

static aclError unbind_one_locked(const acltdtQueueRoute *r, const char **why)
{
    bound_route *b = route_find_locked(r->src, r->dst);
    if (b == NULL) {
        *why = "the route is not bound";
        return ACL_ERROR_INVALID_PARAM;
    }
    if (b->status == ACL_TDT_QUEUE_ROUTE_BIND) {
        route_count_locked(b->src, -1);
    }
    *b = g_routes[--g_nroutes];
    return ACL_SUCCESS;
}

static aclError bind_common(const char *fn, acltdtQueueRouteList *list, bool bind)
{
    aclError first = ACL_SUCCESS;
    size_t failed = 0, at = 0;
    const char *why = "";
    uint32_t fsrc = 0, fdst = 0;
    bool ok_list;
    core_mutex_lock(&g_mu);
    ok_list = list != NULL && core_registry_contains(&g_lists, list);
    for (size_t i = 0; ok_list && i < list->n; i++) {
        acltdtQueueRoute *r = &list->v[i];
        const char *w = "";
        aclError rc = bind ? bind_one_locked(r, &w) : unbind_one_locked(r, &w);
        if (rc == ACL_SUCCESS) {
            r->status = bind ? ACL_TDT_QUEUE_ROUTE_BIND : ACL_TDT_QUEUE_ROUTE_UNBIND;
        } else {
            if (failed++ == 0) {
                first = rc;
                why = w;
                at = i;
                fsrc = r->src;
                fdst = r->dst;
            }
            if (bind) {
                r->status = ACL_TDT_QUEUE_ROUTE_UNBIND;
            }
        }
    }
    if (ok_list && bind) {
        pump_locked();
    }
    size_t n = ok_list ? list->n : 0;
    core_mutex_unlock(&g_mu);
    if (!ok_list) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'qRouteList' is NULL or not live");
    }
    if (failed > 0) {
        return q_error(fn, first, "%zu of %zu routes failed; the first, route %zu (%u -> %u): %s", failed, n, at, fsrc,
                       fdst, why);
    }
    return ACL_SUCCESS;
}

aclError acltdtBindQueueRoutes(acltdtQueueRouteList *qRouteList)
{
    return bind_common("acltdtBindQueueRoutes", qRouteList, true);
}

aclError acltdtUnbindQueueRoutes(acltdtQueueRouteList *qRouteList)
{
    return bind_common("acltdtUnbindQueueRoutes", qRouteList, false);
}

acltdtQueueRouteQueryInfo *acltdtCreateQueueRouteQueryInfo(void)
{
    acltdtQueueRouteQueryInfo *q = create_obj("acltdtCreateQueueRouteQueryInfo", &g_queries, sizeof(*q));
    if (q != NULL) {
        q->magic = Q_QUERY_MAGIC;
    }
    return q;
}

aclError acltdtDestroyQueueRouteQueryInfo(const acltdtQueueRouteQueryInfo *param)
{
    aclError rc = destroy_obj("acltdtDestroyQueueRouteQueryInfo", "param", &g_queries, param);
    if (rc == ACL_SUCCESS) {
        free((void *)(uintptr_t)param);
    }
    return rc;
}

aclError acltdtSetQueueRouteQueryInfo(acltdtQueueRouteQueryInfo *param, acltdtQueueRouteQueryInfoParamType type,
                                      size_t len, const void *value)
{
    const char *fn = "acltdtSetQueueRouteQueryInfo";
    aclError rc = check_obj(fn, "param", &g_queries, param);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (value == NULL || len != 4) {
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'value' must be 4 bytes (len %zu%s)", len,
                       value == NULL ? ", value NULL" : "");
    }
    uint32_t v;
    memcpy(&v, value, 4);
    switch (type) {
    case ACL_TDT_QUEUE_ROUTE_QUERY_MODE_ENUM:
        if (v != ACL_TDT_QUEUE_ROUTE_QUERY_SRC && v != ACL_TDT_QUEUE_ROUTE_QUERY_DST &&
            v != ACL_TDT_QUEUE_ROUTE_QUERY_SRC_AND_DST && v != ACL_TDT_QUEUE_ROUTE_QUERY_ABNORMAL) {
            return q_error(fn, ACL_ERROR_INVALID_PARAM, "query mode %u is not an acltdtQueueRouteQueryMode", v);
        }
        param->mode = (int32_t)v;
        param->has_mode = true;
        return ACL_SUCCESS;
    case ACL_TDT_QUEUE_ROUTE_QUERY_SRC_ID_UINT32:
        param->src = v;
        param->has_src = true;
        return ACL_SUCCESS;
    case ACL_TDT_QUEUE_ROUTE_QUERY_DST_ID_UINT32:
        param->dst = v;
        param->has_dst = true;
        return ACL_SUCCESS;
    }
    return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'type' %d is not an acltdtQueueRouteQueryInfoParamType",
                   (int)type);
}

aclError acltdtQueryQueueRoutes(const acltdtQueueRouteQueryInfo *queryInfo, acltdtQueueRouteList *qRouteList)
{
    const char *fn = "acltdtQueryQueueRoutes";
    int why = 0; /* 1 info, 2 list, 3 mode unset, 4 ids unset, 5 memory */
    core_mutex_lock(&g_mu);
    if (queryInfo == NULL || !core_registry_contains(&g_queries, queryInfo)) {
        why = 1;
    } else if (qRouteList == NULL || !core_registry_contains(&g_lists, qRouteList)) {
        why = 2;
    } else if (!queryInfo->has_mode) {
        why = 3;
    } else {
        int32_t m = queryInfo->mode;
        bool need_src = m == ACL_TDT_QUEUE_ROUTE_QUERY_SRC || m == ACL_TDT_QUEUE_ROUTE_QUERY_SRC_AND_DST;
        bool need_dst = m == ACL_TDT_QUEUE_ROUTE_QUERY_DST || m == ACL_TDT_QUEUE_ROUTE_QUERY_SRC_AND_DST;
        if ((need_src && !queryInfo->has_src) || (need_dst && !queryInfo->has_dst)) {
            why = 4;
        }
        for (size_t i = 0; why == 0 && i < g_nroutes; i++) {
            const bound_route *b = &g_routes[i];
            bool match = m == ACL_TDT_QUEUE_ROUTE_QUERY_ABNORMAL ? b->status == ACL_TDT_QUEUE_ROUTE_BIND_ABNORMAL
                                                                 : (!need_src || b->src == queryInfo->src) &&
                                                                       (!need_dst || b->dst == queryInfo->dst);
            acltdtQueueRoute r = {Q_ROUTE_MAGIC, b->src, b->dst, b->status};
            if (match && !list_push_locked(qRouteList, &r)) {
                why = 5;
            }
        }
    }
    core_mutex_unlock(&g_mu);
    switch (why) {
    case 1:
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'queryInfo' is NULL or not live");
    case 2:
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'qRouteList' is NULL or not live");
    case 3:
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "the query mode is not set (ACL_TDT_QUEUE_ROUTE_QUERY_MODE_ENUM)");
    case 4:
        return q_error(fn, ACL_ERROR_INVALID_PARAM, "the query mode needs the source/destination queue id set");
    case 5:
        return q_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
    }
    return ACL_SUCCESS;
}
