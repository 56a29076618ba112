/*
 * cnt_notify.c - count notifies (acl_next_semantics.md §3.5; CNT,
 * ST#aclrtCntNotifyWaitInfo, ENUM#aclrtCntNotifyRecordMode). Only Ascend 950 has them:
 * on every other SoC each aclrtCntNotify* call answers ACL_ERROR_RT_FEATURE_NOT_SUPPORT.
 *
 * A count notify is a 32-bit counter. aclrtCntNotifyRecord queues a task that sets it
 * (SET_VALUE 0), adds to it (ADD 1, modulo 2^32), or ORs / ANDs a value into it (BIT_OR
 * 2, BIT_AND 4; 3 is not a mode). aclrtCntNotifyWaitWithTimeout queues a task that
 * waits until the condition holds - LESS 0: count < value, EQUAL 1, BIGGER 2,
 * BIGGER_OR_EQUAL 3, EQUAL_WITH_BITMASK 4: (count & value) == value - and with isClear
 * 1 sets the count to 0 in the same atomic step; timeout in seconds, 0 = forever (on
 * expiry the stream fails with ACL_ERROR_RT_WAIT_TIMEOUT, mock choice of code).
 * aclrtCntNotifyReset queues a reset to 0. Stream NULL = the default stream. The
 * per-device limit is the notify limit of the SoC (65535 on 950), counted apart from
 * plain notifies (mock choice). Not shared between processes (there is no IPC API).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "notify/notify.h"
#include "notify/notify_private.h"

#define CNT_MAGIC 0x434e544e4f544659ull /* "CNTNOTFY" */
#define CNT_MAX_PER_DEVICE 65535u     /* the 950 notify limit (§3.4) */

typedef struct cnt_s {
    uint64_t magic;
    atomic_int refs;
    int32_t device;
    uint32_t id;
    _Atomic uint32_t count; /* futex word */
} cnt_t;

static mock_mutex g_cnt_mu = MOCK_MUTEX_INIT(MOCK_LOCK_CNT_NOTIFY_REGISTRY);
static mock_registry g_cnt_reg = MOCK_REGISTRY_EMPTY;
static uint32_t g_cnt_live[MOCK_MAX_DEVICES];
static uint32_t g_cnt_next_id;

static void cnt_put(cnt_t *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        c->magic = 0;
        free(c);
    }
}

/* Fault hook, then the SoC: the whole family is 950 only. */
static aclError cnt_enter(const char *fn)
{
    MOCK_ENTER(fn);
    return core_soc_require(fn, CORE_SOC_950);
}

static aclError cnt_get(const char *fn, aclrtCntNotify handle, cnt_t **out)
{
    core_mutex_lock(&g_cnt_mu);
    cnt_t *c = core_registry_find(&g_cnt_reg, handle);
    if (c != NULL && c->magic == CNT_MAGIC) {
        atomic_fetch_add(&c->refs, 1);
    } else {
        c = NULL;
    }
    core_mutex_unlock(&g_cnt_mu);
    if (c == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'cntNotify' (%p) is not a live count notify handle",
                          handle);
    }
    aclError lost = core_device_lost_code(c->device);
    if (lost != ACL_SUCCESS) {
        cnt_put(c);
        return core_error(fn, lost, "device %d of the count notify is lost", c->device);
    }
    *out = c;
    return ACL_SUCCESS;
}

aclError aclrtCntNotifyCreate(aclrtCntNotify *cntNotify, uint64_t flag)
{
    static const char fn[] = "aclrtCntNotifyCreate";
    MOCK_REQUIRE_NONNULL(fn, cntNotify);
    if (flag != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flag' must be 0, got 0x%llx",
                          (unsigned long long)flag);
    }
    aclError rc = cnt_enter(fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_context *ctx = NULL;
    rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int32_t dev = core_ctx_device(ctx);
    cnt_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory for a count notify");
    }
    c->magic = CNT_MAGIC;
    atomic_init(&c->refs, 1);
    c->device = dev;
    core_mutex_lock(&g_cnt_mu);
    bool full = g_cnt_live[dev] >= CNT_MAX_PER_DEVICE;
    bool registered = !full && core_registry_insert(&g_cnt_reg, c);
    if (registered) {
        g_cnt_live[dev]++;
        c->id = g_cnt_next_id++;
    }
    core_mutex_unlock(&g_cnt_mu);
    if (!registered) {
        cnt_put(c);
        if (full) {
            return core_error(fn, ACL_ERROR_RT_NO_NOTIFY_RESOURCE, "device %d already has the maximum of %u count notifies",
                              dev, CNT_MAX_PER_DEVICE);
        }
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory for the count notify registry");
    }
    *cntNotify = c;
    return ACL_SUCCESS;
}

aclError aclrtCntNotifyDestroy(aclrtCntNotify cntNotify)
{
    static const char fn[] = "aclrtCntNotifyDestroy";
    MOCK_REQUIRE_NONNULL(fn, cntNotify);
    aclError rc = cnt_enter(fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&g_cnt_mu);
    cnt_t *c = core_registry_find(&g_cnt_reg, cntNotify);
    if (c != NULL) {
        core_registry_erase(&g_cnt_reg, c);
        g_cnt_live[c->device]--;
    }
    core_mutex_unlock(&g_cnt_mu);
    if (c == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'cntNotify' (%p) is not a live count notify handle",
                          cntNotify);
    }
    cnt_put(c); /* pending record/wait tasks keep their references */
    return ACL_SUCCESS;
}

aclError aclrtCntNotifyGetId(aclrtCntNotify cntNotify, uint32_t *notifyId)
{
    static const char fn[] = "aclrtCntNotifyGetId";
    MOCK_REQUIRE_NONNULL(fn, cntNotify);
    MOCK_REQUIRE_NONNULL(fn, notifyId);
    aclError rc = cnt_enter(fn);
    cnt_t *c = NULL;
    if (rc == ACL_SUCCESS) {
        rc = cnt_get(fn, cntNotify, &c);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *notifyId = c->id;
    cnt_put(c);
    return ACL_SUCCESS;
}

void notify_cnt_finalize(void)
{
    core_mutex_lock(&g_cnt_mu);
    mock_registry reg = g_cnt_reg;
    memset(&g_cnt_reg, 0, sizeof g_cnt_reg);
    memset(g_cnt_live, 0, sizeof g_cnt_live);
    core_mutex_unlock(&g_cnt_mu);
    for (size_t i = 0; i < reg.cap; i++) {
        cnt_t *c = core_registry_slot(&reg, i);
        if (c != NULL) {
            cnt_put(c);
        }
    }
    core_registry_release(&reg);
}

/* ------------------------------------------------------- record and reset */

typedef struct cnt_op {
    cnt_t *c;
    int mode;          /* aclrtCntNotifyRecordMode, or -1 = reset */
    uint32_t value;
    uint32_t timeout_s; /* wait */
    bool clear;         /* wait: isClear */
} cnt_op;

static void op_free(void *p)
{
    cnt_op *o = p;
    cnt_put(o->c);
    free(o);
}

static uint32_t apply(int mode, uint32_t cur, uint32_t value)
{
    switch (mode) {
    case ACL_RT_CNT_NOTIFY_RECORD_SET_VALUE_MODE:
        return value;
    case ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE:
        return cur + value; /* modulo 2^32 */
    case ACL_RT_CNT_NOTIFY_RECORD_BIT_OR_MODE:
        return cur | value;
    case ACL_RT_CNT_NOTIFY_RECORD_BIT_AND_MODE:
        return cur & value;
    default: /* reset */
        return 0;
    }
}

static aclError record_task(void *p)
{
    cnt_op *o = p;
    uint32_t cur = atomic_load(&o->c->count);
    while (!atomic_compare_exchange_weak(&o->c->count, &cur, apply(o->mode, cur, o->value))) {
    }
    core_futex_wake(&o->c->count);
    return ACL_SUCCESS;
}

/* Shared tail of Record / Wait / Reset: validate the handle and the stream, queue `task`. */
static aclError enqueue_op(const char *fn, aclrtCntNotify handle, aclrtStream stream, cnt_op *proto,
                           mock_task_fn task)
{
    cnt_t *c = NULL;
    aclError rc = cnt_get(fn, handle, &c);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_stream *s = NULL;
    rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        cnt_put(c);
        return rc;
    }
    cnt_op *o = malloc(sizeof(*o));
    if (o == NULL) {
        cnt_put(c);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    *o = *proto;
    o->c = c;
    rc = stream_enqueue(s, task, o, op_free);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the task (error %d)", rc);
    }
    return ACL_SUCCESS;
}

aclError aclrtCntNotifyRecord(aclrtCntNotify cntNotify, aclrtStream stream, aclrtCntNotifyRecordInfo *info)
{
    static const char fn[] = "aclrtCntNotifyRecord";
    MOCK_REQUIRE_NONNULL(fn, cntNotify);
    MOCK_REQUIRE_NONNULL(fn, info);
    int mode = (int)info->mode;
    if (mode != ACL_RT_CNT_NOTIFY_RECORD_SET_VALUE_MODE && mode != ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE &&
        mode != ACL_RT_CNT_NOTIFY_RECORD_BIT_OR_MODE && mode != ACL_RT_CNT_NOTIFY_RECORD_BIT_AND_MODE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "info->mode %d is not an aclrtCntNotifyRecordMode (SET_VALUE 0, ADD 1, BIT_OR 2, BIT_AND 4)",
                          mode);
    }
    aclError rc = cnt_enter(fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    cnt_op proto = {NULL, mode, info->value, 0, false};
    return enqueue_op(fn, cntNotify, stream, &proto, record_task);
}

aclError aclrtCntNotifyReset(aclrtCntNotify cntNotify, aclrtStream stream)
{
    static const char fn[] = "aclrtCntNotifyReset";
    MOCK_REQUIRE_NONNULL(fn, cntNotify);
    aclError rc = cnt_enter(fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    cnt_op proto = {NULL, -1, 0, 0, false};
    return enqueue_op(fn, cntNotify, stream, &proto, record_task);
}

/* ------------------------------------------------------------------ wait */

static bool wait_done(int mode, uint32_t count, uint32_t value)
{
    switch (mode) {
    case ACL_RT_CNT_NOTIFY_WAIT_LESS_MODE:
        return count < value;
    case ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE:
        return count == value;
    case ACL_RT_CNT_NOTIFY_WAIT_BIGGER_MODE:
        return count > value;
    case ACL_RT_CNT_NOTIFY_WAIT_BIGGER_OR_EQUAL_MODE:
        return count >= value;
    default: /* EQUAL_WITH_BITMASK */
        return (count & value) == value;
    }
}

static aclError wait_task(void *p)
{
    cnt_op *o = p;
    struct timespec buf;
    const struct timespec *dl = notify_deadline(o->timeout_s, &buf);
    bool timed_out = false;
    for (;;) {
        uint32_t cur = atomic_load(&o->c->count);
        if (wait_done(o->mode, cur, o->value)) {
            /* the condition and the clear are one atomic step */
            if (!o->clear || atomic_compare_exchange_strong(&o->c->count, &cur, 0u)) {
                if (o->clear) {
                    core_futex_wake(&o->c->count);
                }
                return ACL_SUCCESS;
            }
            continue;
        }
        if (timed_out) {
            return ACL_ERROR_RT_WAIT_TIMEOUT;
        }
        int w = stream_task_wait_word(&o->c->count, cur, dl);
        if (w == ECANCELED) {
            return ACL_SUCCESS; /* stream aborted: the task counts as discarded */
        }
        timed_out = w == ETIMEDOUT; /* one last look at the count */
    }
}

aclError aclrtCntNotifyWaitWithTimeout(aclrtCntNotify cntNotify, aclrtStream stream, aclrtCntNotifyWaitInfo *info)
{
    static const char fn[] = "aclrtCntNotifyWaitWithTimeout";
    MOCK_REQUIRE_NONNULL(fn, cntNotify);
    MOCK_REQUIRE_NONNULL(fn, info);
    int mode = (int)info->mode;
    if (mode < ACL_RT_CNT_NOTIFY_WAIT_LESS_MODE || mode > ACL_RT_CNT_NOTIFY_WAIT_EQUAL_WITH_BITMASK_MODE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "info->mode %d is not an aclrtCntNotifyWaitMode (LESS 0 .. EQUAL_WITH_BITMASK 4)", mode);
    }
    if (info->isClear > 1) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "info->isClear must be 0 or 1, got %u", info->isClear);
    }
    aclError rc = cnt_enter(fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    cnt_op proto = {NULL, mode, info->value, info->timeout, info->isClear == 1};
    return enqueue_op(fn, cntNotify, stream, &proto, wait_task);
}
