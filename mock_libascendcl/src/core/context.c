/*
 * context.c - contexts, the registry of live contexts, the thread's current context.
 *
 * acl_abi.md §5.3: aclrtCreateContext creates a context on a device and makes it the
 * calling thread's current context; each context has its own default stream;
 * aclrtDestroyContext destroys only explicitly created contexts (a device's default
 * ("primary") context is released by aclrtResetDevice); aclrtSetCurrentContext also
 * switches the thread's device. The current context is thread-local (§5.2).
 *
 * Handles given to the user are pointers to mock_context, but a user handle is never
 * dereferenced before it was found in the registry, so garbage handles give
 * ACL_ERROR_RT_PARAM_INVALID (107000) instead of crashing.
 *
 * The thread-local current context is cached together with the context's unique id
 * and the registry "epoch" (bumped at every destruction). While the epoch is unchanged
 * the cache is valid without any lock; otherwise it is re-validated under the registry
 * lock, so a thread whose context was destroyed by another thread (aclrtResetDevice,
 * aclrtDestroyContext) sees "no context" (107002) instead of a dangling pointer.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h" /* the one upward link: a context's default stream (README) */
#include "core/core_private.h"

#define CTX_MAGIC 0x43545843u /* "CXTC" */
#define SYSPARAM_COUNT 4      /* ACL_OPT_DETERMINISTIC .. ACL_OPT_ENABLE_KERNEL_EARLY_START */

struct mock_context {
    uint32_t magic;
    uint64_t id;
    int32_t device;
    bool primary;
    atomic_int refs;          /* registry holds one; core_ctx_collect adds temporary ones */
    mock_stream *default_stream;
    mock_mutex opt_lock;
    bool opt_set[SYSPARAM_COUNT];
    int64_t opt_value[SYSPARAM_COUNT];
    atomic_bool stop_on_failure; /* a stream of it was set to ACL_STOP_ON_FAILURE */
};

static mock_mutex g_reg_lock = MOCK_MUTEX_INIT(MOCK_LOCK_CONTEXTS);
static mock_registry g_reg = MOCK_REGISTRY_EMPTY; /* live contexts */
static uint64_t g_next_id = 1;
static atomic_uint_fast64_t g_epoch;

/* Registered contexts per device, and how many of them are primary (0 or 1): a device
 * with contexts but no primary one holds the device's own stream besides its contexts'
 * default streams (core_device_hidden_streams). */
static atomic_int g_ctx_per_dev[MOCK_MAX_DEVICES];
static atomic_int g_primary_per_dev[MOCK_MAX_DEVICES];

/* The stream whose worker is this thread (core_worker_enter), with its context and
 * device. */
static __thread mock_stream *t_worker;
static __thread const mock_context *t_worker_ctx;
static __thread int32_t t_worker_device = -1;

static __thread mock_context *t_cur;
static __thread uint64_t t_cur_id;
static __thread uint64_t t_cur_epoch;
/* The device of the context last made current on this thread (-1: none); read without
 * a lock by core_thread_device (the device log of an error recorded under any lock). */
static __thread int32_t t_cur_device = -1;

/* Process-wide system parameters (aclrtSetSysParamOpt). */
static mock_mutex g_opt_lock = MOCK_MUTEX_INIT(MOCK_LOCK_SYSPARAMS);
static bool g_opt_set[SYSPARAM_COUNT];
static int64_t g_opt_value[SYSPARAM_COUNT];

/* Caller holds g_reg_lock. */
static bool registered_locked(const mock_context *ctx)
{
    return core_registry_contains(&g_reg, ctx);
}

/* Validates a user handle; returns the context (not retained) or NULL. */
static mock_context *lookup(const void *handle)
{
    core_mutex_lock(&g_reg_lock);
    mock_context *found = core_registry_find(&g_reg, handle);
    core_mutex_unlock(&g_reg_lock);
    return found;
}

static void count_context(const mock_context *ctx, int delta)
{
    if (ctx->device >= 0 && ctx->device < MOCK_MAX_DEVICES) {
        atomic_fetch_add(&g_ctx_per_dev[ctx->device], delta);
        if (ctx->primary) {
            atomic_fetch_add(&g_primary_per_dev[ctx->device], delta);
        }
    }
}

/* ----------------------------------------------------------- internal API */

uint32_t core_device_hidden_streams(int32_t device)
{
    if (device < 0 || device >= MOCK_MAX_DEVICES) {
        return 0;
    }
    return atomic_load(&g_ctx_per_dev[device]) > 0 && atomic_load(&g_primary_per_dev[device]) == 0 ? 1u : 0u;
}

mock_context *core_ctx_create(int32_t device, bool primary)
{
    mock_context *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) {
        return NULL;
    }
    ctx->magic = CTX_MAGIC;
    ctx->device = device;
    ctx->primary = primary;
    atomic_init(&ctx->refs, 1);
    core_mutex_init(&ctx->opt_lock, MOCK_LOCK_SYSPARAMS);
    ctx->default_stream = stream_create_default(ctx);
    if (ctx->default_stream == NULL) {
        core_mutex_destroy(&ctx->opt_lock);
        free(ctx);
        return NULL;
    }
    core_mutex_lock(&g_reg_lock);
    bool ok = core_registry_insert(&g_reg, ctx);
    if (ok) {
        ctx->id = g_next_id++;
        count_context(ctx, 1);
    }
    core_mutex_unlock(&g_reg_lock);
    core_stat_add(device, MOCK_STAT_CONTEXTS, 1);
    if (primary) {
        core_stat_add(device, MOCK_STAT_DEFAULT_CONTEXTS, 1);
    }
    if (!ok) { /* out of host memory for the registry */
        core_ctx_release(ctx);
        return NULL;
    }
    return ctx;
}

static void teardown(mock_context *ctx)
{
    /* What the subsystems keep for the context first (the stream subsystem drains and
     * destroys its explicit streams), then the default stream. */
    core_subsystems_ctx_teardown(ctx);
    stream_destroy_default(ctx->default_stream);
    ctx->default_stream = NULL;
    core_stat_add(ctx->device, MOCK_STAT_CONTEXTS, -1);
    if (ctx->primary) {
        core_stat_add(ctx->device, MOCK_STAT_DEFAULT_CONTEXTS, -1);
    }
    ctx->magic = 0;
    core_mutex_destroy(&ctx->opt_lock);
    free(ctx);
}

void core_ctx_release(mock_context *ctx)
{
    if (atomic_fetch_sub(&ctx->refs, 1) == 1) {
        teardown(ctx);
    }
}

void core_ctx_destroy(mock_context *ctx)
{
    core_mutex_lock(&g_reg_lock);
    bool was_registered = core_registry_erase(&g_reg, ctx);
    if (was_registered) {
        atomic_fetch_add(&g_epoch, 1);
        count_context(ctx, -1);
    }
    core_mutex_unlock(&g_reg_lock);
    if (!was_registered) {
        return;
    }
    if (t_cur == ctx) {
        t_cur = NULL;
    }
    core_ctx_release(ctx);
}

void core_ctx_destroy_all(void)
{
    for (;;) {
        core_mutex_lock(&g_reg_lock);
        mock_context *ctx = NULL;
        for (size_t i = 0; ctx == NULL && i < g_reg.cap; i++) {
            ctx = core_registry_slot(&g_reg, i);
        }
        core_mutex_unlock(&g_reg_lock);
        if (ctx == NULL) {
            break;
        }
        core_ctx_destroy(ctx);
    }
    t_cur = NULL;
}

mock_context **core_ctx_collect(int32_t device, size_t *n)
{
    *n = 0;
    core_mutex_lock(&g_reg_lock);
    size_t count = 0;
    for (size_t i = 0; i < g_reg.cap; i++) {
        mock_context *c = core_registry_slot(&g_reg, i);
        count += c != NULL && c->device == device;
    }
    mock_context **out = count > 0 ? malloc(count * sizeof *out) : NULL;
    if (out != NULL) {
        for (size_t i = 0; i < g_reg.cap; i++) {
            mock_context *c = core_registry_slot(&g_reg, i);
            if (c != NULL && c->device == device) {
                atomic_fetch_add(&c->refs, 1);
                out[(*n)++] = c;
            }
        }
    }
    core_mutex_unlock(&g_reg_lock);
    return out;
}

void core_ctx_set_current(mock_context *ctx)
{
    t_cur = ctx;
    t_cur_device = ctx != NULL ? ctx->device : -1;
    if (ctx != NULL) {
        /* Read the epoch before publishing: if a destruction races with us the next
         * core_ctx_current re-validates. */
        t_cur_epoch = atomic_load(&g_epoch);
        core_mutex_lock(&g_reg_lock);
        t_cur_id = registered_locked(ctx) ? ctx->id : 0;
        core_mutex_unlock(&g_reg_lock);
        if (t_cur_id == 0) {
            t_cur = NULL;
        }
    }
}

/* ---------------------------------------------------------- core/core.h API */

void core_worker_enter(mock_stream *s, mock_context *ctx, int32_t device)
{
    t_worker = s;
    t_worker_ctx = ctx;
    t_worker_device = device;
}

void core_worker_leave(void)
{
    t_worker = NULL;
    t_worker_ctx = NULL;
    t_worker_device = -1;
}

mock_stream *core_worker_stream(void)
{
    return t_worker;
}

int32_t core_thread_device(void)
{
    return t_worker != NULL ? t_worker_device : t_cur_device;
}

bool core_worker_in_context(const mock_context *ctx)
{
    return t_worker != NULL && ctx != NULL && t_worker_ctx == ctx;
}

bool core_worker_on_device(int32_t device)
{
    return t_worker != NULL && t_worker_device == device;
}

mock_context *core_ctx_current(void)
{
    mock_context *ctx = t_cur;
    if (ctx == NULL) {
        return NULL;
    }
    uint64_t epoch = atomic_load_explicit(&g_epoch, memory_order_acquire);
    if (epoch == t_cur_epoch) {
        return ctx;
    }
    /* Some context was destroyed since we last looked: is ours still alive? */
    core_mutex_lock(&g_reg_lock);
    bool alive = registered_locked(ctx) && ctx->id == t_cur_id;
    core_mutex_unlock(&g_reg_lock);
    if (!alive) {
        t_cur = NULL;
        return NULL;
    }
    t_cur_epoch = epoch;
    return ctx;
}

aclError core_ctx_require(const char *func, mock_context **out)
{
    mock_context *ctx = core_ctx_current();
    if (ctx == NULL && core_default_device() >= 0) {
        ctx = core_default_device_bind(); /* aclInit "defaultDevice" (device.c) */
    }
    if (ctx == NULL) {
        *out = NULL;
        return core_error(func, ACL_ERROR_RT_CONTEXT_NULL,
                          "the calling thread has no current context (call aclrtSetDevice "
                          "or aclrtSetCurrentContext first)");
    }
    aclError lost = core_device_lost_code(ctx->device);
    if (lost != ACL_SUCCESS) {
        *out = NULL;
        return core_error(func, lost, "device %d is lost (sticky error %d)", ctx->device, lost);
    }
    *out = ctx;
    return ACL_SUCCESS;
}

int32_t core_ctx_device(const mock_context *ctx)
{
    return ctx->device;
}

void core_ctx_set_stop_on_failure(mock_context *ctx)
{
    atomic_store(&ctx->stop_on_failure, true);
}

bool core_ctx_stop_on_failure(const mock_context *ctx)
{
    return atomic_load(&((mock_context *)ctx)->stop_on_failure);
}

mock_stream *core_ctx_default_stream(mock_context *ctx)
{
    return ctx->default_stream;
}

/* ------------------------------------------------------------ public API */

aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId)
{
    static const char fn[] = "aclrtCreateContext";
    MOCK_REQUIRE_NONNULL(fn, context);
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    mock_context *ctx = core_ctx_create(deviceId, false);
    if (ctx == NULL) {
        return core_error(fn, ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                          "could not create a context on device %d", deviceId);
    }
    core_ctx_set_current(ctx);
    *context = (aclrtContext)ctx;
    return ACL_SUCCESS;
}

/* A `context` argument: non-NULL and a live context of the registry. */
static aclError context_arg(const char *fn, aclrtContext context, mock_context **out)
{
    MOCK_REQUIRE_NONNULL(fn, context);
    *out = lookup(context);
    if (*out == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'context' (%p) is not a live context", context);
    }
    return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context)
{
    static const char fn[] = "aclrtDestroyContext";
    mock_context *ctx = NULL;
    aclError rc = context_arg(fn, context, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (ctx->primary) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "context %p is the default context of device %d; it is released "
                          "by aclrtResetDevice", context, ctx->device);
    }
    MOCK_ENTER(fn);
    if (core_worker_in_context(ctx)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "called from a task of a stream of this context: destroying it would wait for "
                          "that task (deadlock)");
    }
    aclError lost = core_device_lost_code(ctx->device);
    core_ctx_destroy(ctx);
    if (lost != ACL_SUCCESS) {
        return core_error(fn, lost, "device is lost (sticky error %d); context released", lost);
    }
    return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context)
{
    static const char fn[] = "aclrtSetCurrentContext";
    mock_context *ctx = NULL;
    aclError rc = context_arg(fn, context, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    aclError lost = core_device_lost_code(ctx->device);
    if (lost != ACL_SUCCESS) {
        return core_error(fn, lost, "device %d is lost (sticky error %d)", ctx->device, lost);
    }
    MOCK_ENTER(fn);
    core_ctx_set_current(ctx);
    if (core_ctx_current() != ctx) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "context %p was destroyed concurrently", context);
    }
    return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext *context)
{
    static const char fn[] = "aclrtGetCurrentContext";
    MOCK_REQUIRE_NONNULL(fn, context);
    MOCK_ENTER(fn);
    mock_context *ctx = core_ctx_current();
    if (ctx == NULL) {
        return core_error(fn, ACL_ERROR_RT_CONTEXT_NULL,
                          "the calling thread has no current context");
    }
    *context = (aclrtContext)ctx;
    return ACL_SUCCESS;
}

aclError aclrtCtxGetCurrentDefaultStream(aclrtStream *stream)
{
    static const char fn[] = "aclrtCtxGetCurrentDefaultStream";
    MOCK_REQUIRE_NONNULL(fn, stream);
    MOCK_ENTER(fn);
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *stream = (aclrtStream)ctx->default_stream;
    return ACL_SUCCESS;
}

static bool opt_valid(aclSysParamOpt opt)
{
    return (int)opt >= 0 && (int)opt < SYSPARAM_COUNT;
}

/* Every option is a switch: 0 (off) or 1 (on). */
static bool opt_value_valid(int64_t value)
{
    return value == 0 || value == 1;
}

/* The option table of the current context (per_ctx) or the process-wide one. */
typedef struct {
    mock_mutex *lock;
    bool *set;
    int64_t *value;
} opt_table;

static aclError opt_table_get(const char *fn, bool per_ctx, opt_table *t)
{
    if (!per_ctx) {
        *t = (opt_table){&g_opt_lock, g_opt_set, g_opt_value};
        return ACL_SUCCESS;
    }
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *t = (opt_table){&ctx->opt_lock, ctx->opt_set, ctx->opt_value};
    return ACL_SUCCESS;
}

/* Shared body of acl{rtCtx,rt}SetSysParamOpt. */
static aclError sysparam_set(const char *fn, bool per_ctx, aclSysParamOpt opt, int64_t value)
{
    if (!opt_valid(opt)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'opt' (%d) is not an aclSysParamOpt",
                          (int)opt);
    }
    if (!opt_value_valid(value)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'value' (%lld) must be 0 or 1",
                          (long long)value);
    }
    MOCK_ENTER(fn);
    opt_table t;
    aclError rc = opt_table_get(fn, per_ctx, &t);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(t.lock);
    t.set[opt] = true;
    t.value[opt] = value;
    core_mutex_unlock(t.lock);
    return ACL_SUCCESS;
}

/* Shared body of acl{rtCtx,rt}GetSysParamOpt. */
static aclError sysparam_get(const char *fn, bool per_ctx, aclSysParamOpt opt, int64_t *value)
{
    if (!opt_valid(opt)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'opt' (%d) is not an aclSysParamOpt",
                          (int)opt);
    }
    MOCK_REQUIRE_NONNULL(fn, value);
    MOCK_ENTER(fn);
    opt_table t;
    aclError rc = opt_table_get(fn, per_ctx, &t);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(t.lock);
    bool set = t.set[opt];
    int64_t v = t.value[opt];
    core_mutex_unlock(t.lock);
    if (!set && per_ctx) {
        return core_error(fn, ACL_ERROR_RT_SYSPARAMOPT_NOT_SET,
                          "option %d was never set on the current context", (int)opt);
    }
    /* Process level: an option never set reads as its default, 0 (off). */
    *value = set ? v : 0;
    return ACL_SUCCESS;
}

aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value)
{
    return sysparam_set("aclrtCtxSetSysParamOpt", true, opt, value);
}

aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t *value)
{
    return sysparam_get("aclrtCtxGetSysParamOpt", true, opt, value);
}

aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value)
{
    return sysparam_set("aclrtSetSysParamOpt", false, opt, value);
}

aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t *value)
{
    return sysparam_get("aclrtGetSysParamOpt", false, opt, value);
}
