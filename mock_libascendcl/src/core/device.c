/*
 * device.c - device table, per-device reference counts and primary contexts, device
 * queries, device-lost state, live-object statistics.
 *
 * acl_abi.md §5.2: the current device/context is per thread; aclrtSetDevice is
 * reference counted per device per process (each call +1, each aclrtResetDevice -1);
 * the device's default ("primary") context, its default stream and every stream
 * created in it are released when the count reaches 0; aclrtResetDeviceForce
 * releases regardless of the count. Invalid ids give ACL_ERROR_RT_INVALID_DEVICEID
 * (107001); aclrtGetDevice on a thread without a context gives
 * ACL_ERROR_RT_CONTEXT_NULL (107002) without logging an error; aclrtGetDeviceCount
 * counts visible devices and fails with ACL_ERROR_RT_NO_DEVICE (207004) when there is
 * none or ASCEND_RT_VISIBLE_DEVICES is malformed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "core/core_private.h"

/* ------------------------------------------------------------ SoC profiles */

typedef struct soc_profile {
    const char *prefix;    /* matched against the start of the SoC name */
    int64_t aicore;        /* = cube cores */
    int64_t vector;
    int64_t aicpu;
    int64_t l2_bytes;
    int64_t ub_bytes;      /* unified buffer per vector core */
} soc_profile;

/* Values of the Atlas A2/A3 training parts (the common CI targets); anything else uses
 * the Ascend910B1 profile. */
static const soc_profile k_profiles[] = {
    {"Ascend910B1", 24, 48, 6, 192ll << 20, 192ll << 10},
    {"Ascend910B2", 24, 48, 6, 192ll << 20, 192ll << 10},
    {"Ascend910B3", 20, 40, 6, 192ll << 20, 192ll << 10},
    {"Ascend910B4", 20, 40, 6, 96ll << 20, 192ll << 10},
    {"Ascend910_93", 24, 48, 6, 192ll << 20, 192ll << 10},
    {"Ascend310P", 8, 7, 8, 96ll << 20, 256ll << 10},
};

static const soc_profile *profile(void)
{
    const char *soc = core_config_get()->soc_name;
    for (size_t i = 0; i < sizeof k_profiles / sizeof k_profiles[0]; i++) {
        if (strncmp(soc, k_profiles[i].prefix, strlen(k_profiles[i].prefix)) == 0) {
            return &k_profiles[i];
        }
    }
    return &k_profiles[0];
}

/* ------------------------------------------------------------ device table */

#define DEV_LIMIT_COUNT 5 /* aclrtDeviceLimit: SIMT_STACK_SIZE .. SIMT_PRINTF_FIFO_SIZE */
#define DEV_LIMIT_SIMT_ALIGN 16             /* SIMT stack sizes: rounded up to 16 bytes (mock choice) */
#define DEV_LIMIT_SIMD_STACK_ALIGN (16 * 1024) /* doc 25-02 aclrtDeviceLimit: 16 KiB multiples */
#define DEV_LIMIT_SIMD_STACK_MIN (32 * 1024)   /* doc 25-02: values <= 32 KiB are taken as 32768 */
#define DEV_LIMIT_SIMD_FIFO_ALIGN 8            /* doc 25-02: SIMD printf FIFO, multiple of 8 bytes */
static const size_t k_limit_default[DEV_LIMIT_COUNT] = {
    1024,        /* ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE (not on Atlas A2/A3) */
    1024,        /* ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE */
    32 * 1024,   /* ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE */
    32 * 1024,   /* ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE (doc 25-02: 32768) */
    1024 * 1024, /* ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE */
};

typedef struct mock_device {
    mock_mutex lock;
    uint32_t set_count;       /* aclrtSetDevice references */
    mock_context *primary;    /* default context while set_count > 0 */
    uint32_t res_limit[2];    /* ACL_RT_DEV_RES_CUBE_CORE, ACL_RT_DEV_RES_VECTOR_CORE */
} mock_device;

/* aclrtDeviceSetLimit values: per process (not per device or context), until aclFinalize;
 * 0 = never set (a set value is never 0). */
static atomic_size_t g_limits[DEV_LIMIT_COUNT];

static mock_device g_dev[MOCK_MAX_DEVICES];
static atomic_int g_default_device = -1; /* aclInit "defaultDevice", -1 = none */
static atomic_int g_lost[MOCK_MAX_DEVICES];
static pthread_once_t g_dev_once = PTHREAD_ONCE_INIT;

static void reset_limits_locked(mock_device *d)
{
    const soc_profile *p = profile();
    d->res_limit[0] = (uint32_t)p->aicore;
    d->res_limit[1] = (uint32_t)p->vector;
}

static void dev_init(void)
{
    for (int i = 0; i < MOCK_MAX_DEVICES; i++) {
        core_mutex_init(&g_dev[i].lock, MOCK_LOCK_DEVICE);
        reset_limits_locked(&g_dev[i]);
        atomic_init(&g_lost[i], core_config_lost_code(i));
    }
}

static inline void ensure_init(void)
{
    pthread_once(&g_dev_once, dev_init);
}

uint32_t core_visible_count(void)
{
    const mock_config *c = core_config_get();
    return c->visible_invalid ? 0 : c->visible_count;
}

static bool id_in_range(int64_t device)
{
    return device >= 0 && device < (int64_t)core_visible_count();
}

/* Range check only (no lost check); records the error. */
static aclError check_range(const char *func, int64_t device)
{
    if (core_visible_count() == 0) {
        return core_error(func, ACL_ERROR_RT_NO_DEVICE,
                          "no device is available (ASCEND_MOCK_DEVICE_COUNT=0 or invalid "
                          "ASCEND_RT_VISIBLE_DEVICES)");
    }
    if (!id_in_range(device)) {
        return core_error(func, ACL_ERROR_RT_INVALID_DEVICEID,
                          "argument 'deviceId' (%lld) is out of range [0, %u)",
                          (long long)device, core_visible_count());
    }
    return ACL_SUCCESS;
}

aclError core_device_lost_code(int32_t device)
{
    if (device < 0 || device >= MOCK_MAX_DEVICES) {
        return ACL_SUCCESS;
    }
    ensure_init();
    return atomic_load_explicit(&g_lost[device], memory_order_relaxed);
}

aclError core_device_check(const char *func, int32_t device)
{
    aclError rc = check_range(func, device);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    aclError lost = core_device_lost_code(device);
    if (lost != ACL_SUCCESS) {
        return core_error(func, lost, "device %d is lost (sticky error %d)", (int)device, lost);
    }
    return ACL_SUCCESS;
}

/* Same as core_device_check for the uint32_t device ids of some APIs. */
static aclError device_check_u32(const char *func, uint32_t device)
{
    if (device > (uint32_t)INT32_MAX) {
        return check_range(func, (int64_t)device);
    }
    return core_device_check(func, (int32_t)device);
}

/* ------------------------------------------------------------ statistics */

static atomic_llong g_stats[MOCK_MAX_DEVICES + 1][MOCK_STAT_COUNT];

void core_stat_add(int32_t device, mock_stat which, int64_t delta)
{
    if (device < -1 || device >= MOCK_MAX_DEVICES || (int)which < 0 || which >= MOCK_STAT_COUNT) {
        return;
    }
    atomic_fetch_add_explicit(&g_stats[device + 1][which], delta, memory_order_relaxed);
}

int64_t core_stat_get(int32_t device, mock_stat which)
{
    if ((int)which < 0 || which >= MOCK_STAT_COUNT || device < -1 || device >= MOCK_MAX_DEVICES) {
        return -1;
    }
    if (device == -1) {
        int64_t sum = 0;
        for (int i = 0; i <= MOCK_MAX_DEVICES; i++) {
            sum += atomic_load_explicit(&g_stats[i][which], memory_order_relaxed);
        }
        return sum;
    }
    return atomic_load_explicit(&g_stats[device + 1][which], memory_order_relaxed);
}

int64_t aclmockGetStat(int32_t device, aclmockStat which)
{
    if ((int)which < 0 || (int)which >= (int)MOCK_STAT_COUNT) {
        return -1;
    }
    if (device != ACLMOCK_ALL_DEVICES && !id_in_range(device)) {
        return -1;
    }
    return core_stat_get(device, (mock_stat)which);
}

/* ------------------------------------------------------------ device lost */

aclError aclmockSetDeviceLost(int32_t device, aclError code)
{
    if (!id_in_range(device)) {
        return ACL_ERROR_RT_INVALID_DEVICEID;
    }
    ensure_init();
    atomic_store(&g_lost[device], code);
    return ACL_SUCCESS;
}

aclError aclmockGetDeviceLost(int32_t device)
{
    if (!id_in_range(device)) {
        return 0;
    }
    return core_device_lost_code(device);
}

/* ------------------------------------------------------------ callbacks */

#define MAX_CALLBACKS 32
#define REG_NAME_MAX 64

/* A named callback of aclrtRegDeviceStateCallback or aclrtSetDeviceTaskAbortCallback. */
typedef struct named_cb {
    char name[REG_NAME_MAX];
    union {
        aclrtDeviceStateCallback state;
        aclrtDeviceTaskAbortCallback abort;
    } fn;
    void *args;
} named_cb;

typedef struct cb_list {
    named_cb cbs[MAX_CALLBACKS];
    size_t count;
} cb_list;

static mock_mutex g_cb_lock = MOCK_MUTEX_INIT(MOCK_LOCK_DEVICE_CALLBACKS);
static cb_list g_state_cbs;
static cb_list g_abort_cbs;

/* Copies the list under the lock so that the callbacks run without it; returns the count. */
static size_t cb_snapshot(const cb_list *l, named_cb *snap)
{
    core_mutex_lock(&g_cb_lock);
    size_t n = l->count;
    memcpy(snap, l->cbs, n * sizeof snap[0]);
    core_mutex_unlock(&g_cb_lock);
    return n;
}

static void fire_state(int32_t device, aclrtDeviceState state)
{
    named_cb snap[MAX_CALLBACKS];
    size_t n = cb_snapshot(&g_state_cbs, snap);
    core_lock_check_none("calling a device state callback");
    for (size_t i = 0; i < n; i++) {
        snap[i].fn.state((uint32_t)device, state, snap[i].args);
    }
}

static void fire_abort(int32_t device, aclrtDeviceTaskAbortStage stage, uint32_t timeout)
{
    named_cb snap[MAX_CALLBACKS];
    size_t n = cb_snapshot(&g_abort_cbs, snap);
    core_lock_check_none("calling a task-abort callback");
    for (size_t i = 0; i < n; i++) {
        (void)snap[i].fn.abort(device, stage, timeout, snap[i].args);
    }
}

static bool reg_name_ok(const char *name)
{
    return name != NULL && name[0] != '\0' && strlen(name) < REG_NAME_MAX;
}

/* Shared body of aclrtRegDeviceStateCallback and aclrtSetDeviceTaskAbortCallback:
 * registers `entry` under regName (replacing a callback of that name), or, with
 * `unregister` (a NULL callback), removes the name. `what` names the list in the
 * "too many" error. */
static aclError cb_register(const char *fn, cb_list *l, const char *regName, bool unregister,
                            named_cb entry, const char *what)
{
    if (!reg_name_ok(regName)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'regName' is NULL, empty or longer than 63 characters");
    }
    MOCK_ENTER(fn);
    aclError rc = ACL_SUCCESS;
    core_mutex_lock(&g_cb_lock);
    size_t i = 0;
    while (i < l->count && strcmp(l->cbs[i].name, regName) != 0) {
        i++;
    }
    if (unregister) {
        if (i < l->count) {
            l->cbs[i] = l->cbs[--l->count];
        }
    } else if (i < l->count || l->count < MAX_CALLBACKS) {
        if (i == l->count) {
            l->count++;
        }
        snprintf(entry.name, REG_NAME_MAX, "%s", regName);
        l->cbs[i] = entry;
    } else {
        rc = ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    core_mutex_unlock(&g_cb_lock);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "too many %s callbacks (max %d)", what, MAX_CALLBACKS);
    }
    return ACL_SUCCESS;
}

aclError aclrtRegDeviceStateCallback(const char *regName, aclrtDeviceStateCallback callback,
                                     void *args)
{
    named_cb entry = {.fn.state = callback, .args = args};
    return cb_register("aclrtRegDeviceStateCallback", &g_state_cbs, regName, callback == NULL, entry,
                       "device state");
}

aclError aclrtSetDeviceTaskAbortCallback(const char *regName, aclrtDeviceTaskAbortCallback callback,
                                         void *args)
{
    named_cb entry = {.fn.abort = callback, .args = args};
    return cb_register("aclrtSetDeviceTaskAbortCallback", &g_abort_cbs, regName, callback == NULL,
                       entry, "task-abort");
}

/* ------------------------------------------------------------ set / reset */

aclError aclrtGetDeviceCount(uint32_t *count)
{
    static const char fn[] = "aclrtGetDeviceCount";
    MOCK_REQUIRE_NONNULL(fn, count);
    MOCK_ENTER(fn);
    const mock_config *c = core_config_get();
    if (c->visible_invalid) {
        return core_error(fn, ACL_ERROR_RT_NO_DEVICE,
                          "ASCEND_RT_VISIBLE_DEVICES is invalid (duplicates, not ascending, "
                          "malformed or nonexistent ids)");
    }
    if (c->visible_count == 0) {
        return core_error(fn, ACL_ERROR_RT_NO_DEVICE, "no device is available");
    }
    *count = c->visible_count;
    return ACL_SUCCESS;
}

/* Makes the primary (default) context of `device` the calling thread's current context,
 * creating it when the device has none, and gives it one more aclrtSetDevice reference
 * when `take_ref` or when this call created it. Creating starts the default stream's
 * worker thread, so it runs without the device lock: of threads racing to create one,
 * the first to publish it wins and the others destroy theirs. NULL when it cannot be
 * created. */
static mock_context *primary_bind(int32_t device, bool take_ref)
{
    mock_device *d = &g_dev[device];
    mock_context *spare = NULL;
    mock_context *ctx = NULL;
    for (int pass = 0; pass < 2; pass++) {
        core_mutex_lock(&d->lock);
        bool created = d->primary == NULL && spare != NULL;
        if (created) {
            d->primary = spare;
            spare = NULL;
        }
        ctx = d->primary;
        if (ctx != NULL) {
            if (take_ref || created) {
                d->set_count++;
            }
            core_ctx_set_current(ctx);
        }
        core_mutex_unlock(&d->lock);
        if (ctx != NULL) {
            break;
        }
        spare = core_ctx_create(device, true);
        if (spare == NULL) {
            break;
        }
    }
    if (spare != NULL) {
        core_ctx_destroy(spare); /* another thread published its context first */
    }
    return ctx;
}

aclError aclrtSetDevice(int32_t deviceId)
{
    static const char fn[] = "aclrtSetDevice";
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    ensure_init();
    fire_state(deviceId, ACL_RT_DEVICE_STATE_SET_PRE);
    if (primary_bind(deviceId, true) == NULL) {
        return core_error(fn, ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                          "could not create the default context of device %d", deviceId);
    }
    fire_state(deviceId, ACL_RT_DEVICE_STATE_SET_POST);
    return ACL_SUCCESS;
}

/* Shared body of aclrtResetDevice[Force]. The decision (refused, one reference less, or
 * released) is taken in one critical section, so of two threads racing to release the
 * last reference exactly one succeeds. A reset once the count is 0 - never set, one
 * reset too many, or after a force reset (also from another thread) - touches nothing
 * and fails with ACL_ERROR_RT_CONTEXT_NULL (mock choice, README "Error codes"). */
static aclError reset_device(const char *fn, int32_t deviceId, bool force)
{
    aclError rc = check_range(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    ensure_init();
    mock_device *d = &g_dev[deviceId];
    mock_context *victim = NULL;
    core_mutex_lock(&d->lock);
    bool tears_down = force || d->set_count == 1;
    /* the default context's streams are drained: a calling task's stream would wait
     * for itself */
    bool not_set = d->set_count == 0;
    bool self = !not_set && tears_down && core_worker_in_context(d->primary);
    if (not_set || self) {
        /* refused: nothing changes */
    } else if (tears_down) {
        d->set_count = 0;
        victim = d->primary;
        d->primary = NULL;
    } else {
        d->set_count--;
    }
    core_mutex_unlock(&d->lock);
    if (not_set) {
        return core_error(fn, ACL_ERROR_RT_CONTEXT_NULL,
                          "device %d is not set (no aclrtSetDevice reference left to release)",
                          deviceId);
    }
    if (self) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "called from a task of a stream of device %d's default context: releasing the "
                          "device would wait for that task (deadlock)", deviceId);
    }
    fire_state(deviceId, ACL_RT_DEVICE_STATE_RESET_PRE);
    if (victim != NULL) {
        /* Outside the device lock: draining streams may run user callbacks. */
        core_ctx_destroy(victim);
    }
    fire_state(deviceId, ACL_RT_DEVICE_STATE_RESET_POST);
    if (victim != NULL) { /* the device log records a reset that released the device */
        core_obs o = {0};
        o.kind = CORE_OBS_DEVICE_RESET;
        o.device = deviceId;
        o.flag = force;
        o.func = fn;
        (void)core_observe(&o);
    }
    aclError lost = core_device_lost_code(deviceId);
    if (lost != ACL_SUCCESS) {
        return core_error(fn, lost, "device %d is lost (sticky error %d); resources released",
                          deviceId, lost);
    }
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId)
{
    return reset_device("aclrtResetDevice", deviceId, false);
}

aclError aclrtResetDeviceForce(int32_t deviceId)
{
    return reset_device("aclrtResetDeviceForce", deviceId, true);
}

/* ------------------------------------------------------------ default device */
/* acl_abi.md §5.2: with {"defaultDevice": {"default_device": "N"}} in the aclInit config,
 * aclrtGetDevice reports N on a thread that set no device; the mock also lets such a
 * thread use N for work that needs a context (as if it had called aclrtSetDevice(N)). */

void core_default_device_set(int32_t device)
{
    atomic_store(&g_default_device, device);
}

int32_t core_default_device(void)
{
    return atomic_load(&g_default_device);
}

mock_context *core_default_device_bind(void)
{
    int32_t dev = core_default_device();
    if (dev < 0 || !id_in_range(dev) || core_device_lost_code(dev) != ACL_SUCCESS) {
        return NULL;
    }
    ensure_init();
    return primary_bind(dev, false);
}

aclError aclrtGetDevice(int32_t *deviceId)
{
    static const char fn[] = "aclrtGetDevice";
    MOCK_REQUIRE_NONNULL(fn, deviceId);
    MOCK_ENTER(fn);
    mock_context *ctx = core_ctx_current();
    if (ctx == NULL) {
        int32_t dflt = core_default_device();
        if (dflt >= 0) {
            *deviceId = dflt; /* the aclInit default device (creates nothing) */
            return ACL_SUCCESS;
        }
        /* "special state": returned without recording an error (acl_abi.md §5.2). */
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    *deviceId = core_ctx_device(ctx);
    return ACL_SUCCESS;
}

aclError aclrtGetPrimaryCtxState(int32_t deviceId, uint32_t *flags, int32_t *active)
{
    static const char fn[] = "aclrtGetPrimaryCtxState";
    /* `flags` is optional (reserved, always 0); only `active` is required. */
    MOCK_REQUIRE_NONNULL(fn, active);
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    ensure_init();
    mock_device *d = &g_dev[deviceId];
    core_mutex_lock(&d->lock);
    *active = d->primary != NULL ? 1 : 0;
    core_mutex_unlock(&d->lock);
    if (flags != NULL) {
        *flags = 0;
    }
    return ACL_SUCCESS;
}

void core_devices_finalize(void)
{
    ensure_init();
    for (int i = 0; i < MOCK_MAX_DEVICES; i++) {
        mock_device *d = &g_dev[i];
        core_mutex_lock(&d->lock);
        d->set_count = 0;
        d->primary = NULL; /* destroyed below with every other context */
        reset_limits_locked(d);
        core_mutex_unlock(&d->lock);
    }
    for (int i = 0; i < DEV_LIMIT_COUNT; i++) {
        atomic_store(&g_limits[i], 0);
    }
    core_default_device_set(-1);
    core_ctx_destroy_all();
}

/* ------------------------------------------------------------ synchronize */

/* Waits for the work of the current context: every subsystem's ctx_sync hook (the
 * stream subsystem waits for its streams). Fault hook and timeout check done by
 * core_sync_with_timeout. */
static aclError sync_current_context(const char *fn, void *unused, int64_t timeout_ms)
{
    (void)unused;
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (core_worker_in_context(ctx)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "called from a task of a stream of the current context: it would wait for itself");
    }
    rc = core_subsystems_ctx_sync(ctx, timeout_ms);
    if (rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
        return core_error(fn, rc, "the streams of the current context did not finish within %lld ms",
                          (long long)timeout_ms);
    }
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "a stream of the current context failed (error %d)", rc);
    }
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void)
{
    return core_sync_with_timeout("aclrtSynchronizeDevice", NULL, -1, sync_current_context);
}

aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)
{
    return core_sync_with_timeout("aclrtSynchronizeDeviceWithTimeout", NULL, timeout, sync_current_context);
}

#define TASK_ABORT_MAX_MS (36u * 60u * 1000u)

aclError aclrtDeviceTaskAbort(int32_t deviceId, uint32_t timeout)
{
    static const char fn[] = "aclrtDeviceTaskAbort";
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (timeout > TASK_ABORT_MAX_MS) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'timeout' (%u ms) exceeds 36 minutes", timeout);
    }
    MOCK_ENTER(fn);
    if (core_worker_on_device(deviceId)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "called from a task of a stream of device %d: the abort would wait for that task",
                          deviceId);
    }
    fire_abort(deviceId, ACL_RT_DEVICE_TASK_ABORT_PRE, timeout);
    /* Every stream of every context of the device drops its pending tasks and has
     * its blocked tasks interrupted (the ctx_abort hooks: stream.c); then the running
     * tasks get `timeout` to return. */
    size_t n = 0;
    mock_context **ctxs = core_ctx_collect(deviceId, &n);
    aclError result = ACL_SUCCESS;
    int32_t wait_ms = timeout == 0 ? -1 : (int32_t)timeout;
    for (size_t i = 0; i < n; i++) {
        core_subsystems_ctx_abort(ctxs[i]);
        aclError r = core_subsystems_ctx_sync(ctxs[i], wait_ms);
        if (result == ACL_SUCCESS && r != ACL_SUCCESS) {
            result = r;
        }
        core_ctx_release(ctxs[i]);
    }
    free(ctxs);
    fire_abort(deviceId, ACL_RT_DEVICE_TASK_ABORT_POST, timeout);
    if (result != ACL_SUCCESS) {
        return core_error(fn, ACL_ERROR_RT_DEVICE_TASK_ABORT,
                          "tasks of device %d did not finish within %u ms (error %d)", deviceId,
                          timeout, result);
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ queries */

const char *aclrtGetSocName(void)
{
    static const char fn[] = "aclrtGetSocName";
    if (core_fault_check(fn) != ACL_SUCCESS) {
        return NULL;
    }
    if (core_visible_count() == 0) {
        (void)core_error(fn, ACL_ERROR_RT_NO_DEVICE, "no device is available");
        return NULL;
    }
    return core_config_get()->soc_name;
}

aclError aclrtGetRunMode(aclrtRunMode *runMode)
{
    static const char fn[] = "aclrtGetRunMode";
    MOCK_REQUIRE_NONNULL(fn, runMode);
    MOCK_ENTER(fn);
    *runMode = ACL_HOST;
    return ACL_SUCCESS;
}

aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo deviceInfo, int64_t *value)
{
    static const char fn[] = "aclGetDeviceCapability";
    MOCK_REQUIRE_NONNULL(fn, value);
    aclError rc = device_check_u32(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    const soc_profile *p = profile();
    switch ((int)deviceInfo) {
    case ACL_DEVICE_INFO_AI_CORE_NUM: *value = p->aicore; return ACL_SUCCESS;
    case ACL_DEVICE_INFO_VECTOR_CORE_NUM: *value = p->vector; return ACL_SUCCESS;
    case ACL_DEVICE_INFO_L2_SIZE: *value = p->l2_bytes; return ACL_SUCCESS;
    default:
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'deviceInfo' (%d) is not a supported aclDeviceInfo",
                          (int)deviceInfo);
    }
}

aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t *value)
{
    static const char fn[] = "aclrtGetDeviceInfo";
    MOCK_REQUIRE_NONNULL(fn, value);
    aclError rc = device_check_u32(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    const soc_profile *p = profile();
    const mock_config *c = core_config_get();
    int64_t v;
    switch ((int)attr) {
    case ACL_DEV_ATTR_AICPU_CORE_NUM: v = p->aicpu; break;
    case ACL_DEV_ATTR_AICORE_CORE_NUM: v = p->aicore; break;
    case ACL_DEV_ATTR_CUBE_CORE_NUM: v = p->aicore; break;
    case ACL_DEV_ATTR_VECTOR_CORE_NUM: v = p->vector; break;
    case ACL_DEV_ATTR_WARP_SIZE: v = 32; break;
    case ACL_DEV_ATTR_MAX_THREAD_PER_VECTOR_CORE: v = 2048; break;
    case ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE: v = p->ub_bytes; break;
    case ACL_DEV_ATTR_MAX_GRID_DIM_X: v = 65535; break;
    case ACL_DEV_ATTR_MAX_GRID_DIM_Y: v = 1; break;
    case ACL_DEV_ATTR_MAX_GRID_DIM_Z: v = 1; break;
    case ACL_DEV_ATTR_MAX_BLOCK_PER_GRID: v = 65535; break;
    case ACL_DEV_ATTR_MAX_THREADS_PER_BLOCK: v = 2048; break;
    case ACL_DEV_ATTR_MAX_BLOCK_DIM_X: v = 2048; break;
    case ACL_DEV_ATTR_MAX_BLOCK_DIM_Y: v = 1; break;
    case ACL_DEV_ATTR_MAX_BLOCK_DIM_Z: v = 1; break;
    case ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE:
        v = c->mem_per_device > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)c->mem_per_device;
        break;
    case ACL_DEV_ATTR_L2_CACHE_SIZE: v = p->l2_bytes; break;
    case ACL_DEV_ATTR_SMP_ID: v = 0; break;
    case ACL_DEV_ATTR_PHY_CHIP_ID: v = c->visible_map[deviceId]; break;
    case ACL_DEV_ATTR_SUPER_POD_DEVICE_ID: v = c->visible_map[deviceId]; break;
    case ACL_DEV_ATTR_SUPER_POD_SERVER_ID: v = 0; break;
    case ACL_DEV_ATTR_SUPER_POD_ID: v = 0; break;
    case ACL_DEV_ATTR_CUST_OP_PRIVILEGE: v = 0; break;
    case ACL_DEV_ATTR_MAINBOARD_ID: v = 0; break;
    case ACL_DEV_ATTR_HD_CONNECT_TYPE: v = 0; break;   /* PCIe */
    case ACL_DEV_ATTR_DEVICE_FORM_FACTOR: v = 0; break;
    case ACL_DEV_ATTR_IS_VIRTUAL: v = 0; break;
    case ACL_DEV_ATTR_NPU_ARCH: v = 220; break;        /* A2 generation (dav-c220) */
    default:
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'attr' (%d) is not an aclrtDevAttr",
                          (int)attr);
    }
    *value = v;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceCapability(int32_t deviceId, aclrtDevFeatureType devFeatureType,
                                  int32_t *value)
{
    static const char fn[] = "aclrtGetDeviceCapability";
    MOCK_REQUIRE_NONNULL(fn, value);
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    switch ((int)devFeatureType) {
    case ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV:
    case ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV:
        /* Neither feature exists without a task scheduler / device queues. */
        *value = ACL_DEV_FEATURE_NOT_SUPPORT;
        return ACL_SUCCESS;
    default:
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'devFeatureType' (%d) is not an aclrtDevFeatureType",
                          (int)devFeatureType);
    }
}

aclError aclrtGetDeviceUtilizationRate(int32_t deviceId, aclrtUtilizationInfo *utilizationInfo)
{
    static const char fn[] = "aclrtGetDeviceUtilizationRate";
    MOCK_REQUIRE_NONNULL(fn, utilizationInfo);
    if (utilizationInfo->utilizationExtend != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "utilizationInfo->utilizationExtend is reserved and must be NULL");
    }
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    utilizationInfo->cubeUtilization = 0;
    utilizationInfo->vectorUtilization = 0;
    utilizationInfo->aicpuUtilization = 0;
    utilizationInfo->memoryUtilization = -1; /* always "not supported" (acl_abi.md §1.2) */
    return ACL_SUCCESS;
}

aclError aclrtQueryDeviceStatus(int32_t deviceId, aclrtDeviceStatus *deviceStatus)
{
    static const char fn[] = "aclrtQueryDeviceStatus";
    MOCK_REQUIRE_NONNULL(fn, deviceStatus);
    aclError rc = check_range(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    *deviceStatus = core_device_lost_code(deviceId) != ACL_SUCCESS ? ACL_RT_DEVICE_STATUS_ABNORMAL
                                                                   : ACL_RT_DEVICE_STATUS_NORMAL;
    return ACL_SUCCESS;
}

aclError aclrtDeviceGetUuid(int32_t deviceId, aclrtUuid *uuid)
{
    static const char fn[] = "aclrtDeviceGetUuid";
    MOCK_REQUIRE_NONNULL(fn, uuid);
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    /* Stable per physical device: "ACLMOCK-" + 8 bytes derived from the physical id. */
    int32_t phys = core_config_get()->visible_map[deviceId];
    static const char prefix[8] = {'A', 'C', 'L', 'M', 'O', 'C', 'K', '-'};
    memcpy(uuid->bytes, prefix, sizeof prefix);
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(phys + 1);
    for (int i = 0; i < 8; i++) {
        uuid->bytes[8 + i] = (char)(x >> (8 * i));
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ id mapping */
/* User id = index into the visible list; logical id = physical id in the mock (no
 * container remapping below ASCEND_RT_VISIBLE_DEVICES). */

static aclError map_out_check(const char *fn, const void *out, const char *name)
{
    if (out == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", name);
    }
    return ACL_SUCCESS;
}

static aclError physical_check(const char *fn, int32_t id, const char *what)
{
    if (id < 0 || (uint32_t)id >= core_config_get()->physical_count) {
        return core_error(fn, ACL_ERROR_RT_INVALID_DEVICEID,
                          "argument '%s' (%d) is not a device id of this host (%u devices)", what,
                          id, core_config_get()->physical_count);
    }
    return ACL_SUCCESS;
}

static aclError user_from_physical(const char *fn, int32_t phys, int32_t *user)
{
    const mock_config *c = core_config_get();
    for (uint32_t i = 0; i < core_visible_count(); i++) {
        if (c->visible_map[i] == phys) {
            *user = (int32_t)i;
            return ACL_SUCCESS;
        }
    }
    return core_error(fn, ACL_ERROR_RT_INVALID_DEVICEID,
                      "device %d is not visible (ASCEND_RT_VISIBLE_DEVICES)", phys);
}

/* The three id spaces of the mapping functions: user (index into the visible list) on one
 * side, logical and physical (equal in the mock) on the other. */
typedef enum { ID_USER, ID_LOGIC, ID_PHYS } dev_id_space;

/* Shared body of the six aclrtGet*DevIdBy*DevId functions: check `out`, check `in` in its
 * space (user ids against the visible range, logical/physical ids against the host), then map. */
static aclError map_dev_id(const char *fn, int32_t in, dev_id_space from, const char *in_name,
                           int32_t *out, dev_id_space to, const char *out_name)
{
    aclError rc = map_out_check(fn, out, out_name);
    if (rc == ACL_SUCCESS) {
        rc = from == ID_USER ? check_range(fn, in) : physical_check(fn, in, in_name);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    if (from == ID_USER) {
        *out = core_config_get()->visible_map[in];
        return ACL_SUCCESS;
    }
    if (to == ID_USER) {
        return user_from_physical(fn, in, out);
    }
    *out = in;
    return ACL_SUCCESS;
}

aclError aclrtGetLogicDevIdByUserDevId(const int32_t userDevid, int32_t *const logicDevId)
{
    return map_dev_id("aclrtGetLogicDevIdByUserDevId", userDevid, ID_USER, "userDevid",
                      logicDevId, ID_LOGIC, "logicDevId");
}

aclError aclrtGetPhyDevIdByUserDevId(const int32_t userDevId, int32_t *const phyDevId)
{
    return map_dev_id("aclrtGetPhyDevIdByUserDevId", userDevId, ID_USER, "userDevId", phyDevId,
                      ID_PHYS, "phyDevId");
}

aclError aclrtGetUserDevIdByLogicDevId(const int32_t logicDevId, int32_t *const userDevid)
{
    return map_dev_id("aclrtGetUserDevIdByLogicDevId", logicDevId, ID_LOGIC, "logicDevId",
                      userDevid, ID_USER, "userDevid");
}

aclError aclrtGetUserDevIdByPhyDevId(const int32_t phyDevId, int32_t *const userDevId)
{
    return map_dev_id("aclrtGetUserDevIdByPhyDevId", phyDevId, ID_PHYS, "phyDevId", userDevId,
                      ID_USER, "userDevId");
}

aclError aclrtGetLogicDevIdByPhyDevId(const int32_t phyDevId, int32_t *const logicDevId)
{
    return map_dev_id("aclrtGetLogicDevIdByPhyDevId", phyDevId, ID_PHYS, "phyDevId", logicDevId,
                      ID_LOGIC, "logicDevId");
}

aclError aclrtGetPhyDevIdByLogicDevId(const int32_t logicDevId, int32_t *const phyDevId)
{
    return map_dev_id("aclrtGetPhyDevIdByLogicDevId", logicDevId, ID_LOGIC, "logicDevId",
                      phyDevId, ID_PHYS, "phyDevId");
}

/* ------------------------------------------------------------ start-up queries */
/* Cheap queries the reference marks "unsupported" but programs make at start-up
 * (abi/mock_overrides.tsv moves them to "simulate"). */

aclError aclrtCheckArchCompatibility(const char *socVersion, int32_t *canCompatible)
{
    static const char fn[] = "aclrtCheckArchCompatibility";
    MOCK_REQUIRE_NONNULL(fn, socVersion);
    MOCK_REQUIRE_NONNULL(fn, canCompatible);
    MOCK_ENTER(fn);
    /* A binary built for exactly the SoC of this machine is compatible; the mock knows
     * no cross-SoC compatibility rules, so every other name is not. */
    *canCompatible = strcmp(socVersion, core_config_get()->soc_name) == 0 ? 1 : 0;
    return ACL_SUCCESS;
}

/* Simulated PCI address of physical device `phys`: domain 0, bus phys + 1, device 0,
 * function 0 ("0000:01:00.0" for physical device 0), stable for the process. */
#define PCI_BUS_ID_LEN 12 /* "dddd:bb:dd.f" */

aclError aclrtDeviceGetPCIBusId(int32_t deviceId, char *pciBusId, int32_t len)
{
    static const char fn[] = "aclrtDeviceGetPCIBusId";
    MOCK_REQUIRE_NONNULL(fn, pciBusId);
    if (len <= PCI_BUS_ID_LEN) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'len' (%d) is too small for a bus id (needs %d bytes)", (int)len,
                          PCI_BUS_ID_LEN + 1);
    }
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    int32_t phys = core_config_get()->visible_map[deviceId];
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", (unsigned)(phys + 1));
    return ACL_SUCCESS;
}

aclError aclrtDeviceGetByPCIBusId(const char *pciBusId, int32_t *deviceId)
{
    static const char fn[] = "aclrtDeviceGetByPCIBusId";
    MOCK_REQUIRE_NONNULL(fn, pciBusId);
    MOCK_REQUIRE_NONNULL(fn, deviceId);
    unsigned domain = 0, bus = 0, dev = 0, func = 0;
    int used = -1;
    if (sscanf(pciBusId, "%4x:%2x:%2x.%1x%n", &domain, &bus, &dev, &func, &used) != 4 ||
        used != PCI_BUS_ID_LEN || pciBusId[used] != '\0') {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'pciBusId' ('%.32s') is not a bus id 'dddd:bb:dd.f'", pciBusId);
    }
    MOCK_ENTER(fn);
    uint32_t phys_count = core_config_get()->physical_count;
    if (domain != 0 || dev != 0 || func != 0 || bus == 0 || bus > phys_count) {
        return core_error(fn, ACL_ERROR_RT_INVALID_DEVICEID, "no device has the bus id '%s'",
                          pciBusId);
    }
    return user_from_physical(fn, (int32_t)bus - 1, deviceId);
}

aclError aclrtDeviceGetBareTgid(int32_t *pid)
{
    static const char fn[] = "aclrtDeviceGetBareTgid";
    MOCK_REQUIRE_NONNULL(fn, pid);
    MOCK_ENTER(fn);
    *pid = (int32_t)getpid(); /* no container pid namespace to see through */
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ limits */

aclError aclrtGetDeviceResLimit(int32_t deviceId, aclrtDevResLimitType type, uint32_t *value)
{
    static const char fn[] = "aclrtGetDeviceResLimit";
    MOCK_REQUIRE_NONNULL(fn, value);
    if ((int)type != ACL_RT_DEV_RES_CUBE_CORE && (int)type != ACL_RT_DEV_RES_VECTOR_CORE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'type' (%d) is not an aclrtDevResLimitType", (int)type);
    }
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    ensure_init();
    mock_device *d = &g_dev[deviceId];
    core_mutex_lock(&d->lock);
    *value = d->res_limit[type];
    core_mutex_unlock(&d->lock);
    return ACL_SUCCESS;
}

aclError aclrtSetDeviceResLimit(int32_t deviceId, aclrtDevResLimitType type, uint32_t value)
{
    static const char fn[] = "aclrtSetDeviceResLimit";
    if ((int)type != ACL_RT_DEV_RES_CUBE_CORE && (int)type != ACL_RT_DEV_RES_VECTOR_CORE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'type' (%d) is not an aclrtDevResLimitType", (int)type);
    }
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const soc_profile *p = profile();
    uint32_t max = (uint32_t)(type == ACL_RT_DEV_RES_CUBE_CORE ? p->aicore : p->vector);
    if (value == 0 || value > max) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'value' (%u) must be in [1, %u]",
                          value, max);
    }
    MOCK_ENTER(fn);
    ensure_init();
    mock_device *d = &g_dev[deviceId];
    core_mutex_lock(&d->lock);
    d->res_limit[type] = value;
    core_mutex_unlock(&d->lock);
    return ACL_SUCCESS;
}

aclError aclrtResetDeviceResLimit(int32_t deviceId)
{
    static const char fn[] = "aclrtResetDeviceResLimit";
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    ensure_init();
    const soc_profile *p = profile();
    mock_device *d = &g_dev[deviceId];
    core_mutex_lock(&d->lock);
    d->res_limit[0] = (uint32_t)p->aicore;
    d->res_limit[1] = (uint32_t)p->vector;
    core_mutex_unlock(&d->lock);
    return ACL_SUCCESS;
}

aclError aclrtDeviceGetStreamPriorityRange(int32_t *leastPriority, int32_t *greatestPriority)
{
    static const char fn[] = "aclrtDeviceGetStreamPriorityRange";
    if (leastPriority == NULL || greatestPriority == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL",
                          leastPriority == NULL ? "leastPriority" : "greatestPriority");
    }
    MOCK_ENTER(fn);
    /* Priorities 0 (highest) .. 7 (lowest) (acl_abi.md §1.4 note). */
    *leastPriority = 7;
    *greatestPriority = 0;
    return ACL_SUCCESS;
}

/* aclrtDeviceGetLimit / aclrtDeviceSetLimit: process-wide values that need no device or
 * context (they may be set before the first aclrtSetDevice and apply to every device);
 * never set = the default of k_limit_default; aclFinalize restores the defaults.
 * Doc 25-02_Enumerations.md, aclrtDeviceLimit:
 *  - SIMD printf FIFO per core: default 32768, rounded up to a multiple of 8 (1025 -> 1032);
 *  - SIMD stack size: rounded up to a multiple of 16 KiB, values <= 32 KiB give 32768;
 *  - ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE is not supported on Atlas A2/A3
 *    (ACL_ERROR_RT_FEATURE_NOT_SUPPORT), for Get and Set alike.
 * Mock choices (README, the reference is silent): the two SIMT stack sizes are rounded up
 * to 16 bytes, the SIMT printf FIFO is kept as given, 0 is ACL_ERROR_INVALID_PARAM. */
static bool limit_valid(aclrtDeviceLimit limit)
{
    return (int)limit >= 0 && (int)limit < DEV_LIMIT_COUNT;
}

/* Atlas A2/A3 training/inference parts (Ascend910B*, Ascend910_93*). */
static bool soc_is_a2_a3(void)
{
    const char *soc = core_config_get()->soc_name;
    return strncmp(soc, "Ascend910B", 10) == 0 || strncmp(soc, "Ascend910_93", 12) == 0;
}

/* ACL_ERROR_RT_FEATURE_NOT_SUPPORT (recorded) for a limit this SoC does not have, else 0. */
static aclError limit_supported(const char *fn, aclrtDeviceLimit limit)
{
    if ((int)limit == ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE && soc_is_a2_a3()) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE is not supported on %s (Atlas A2/A3)",
                          core_config_get()->soc_name);
    }
    return ACL_SUCCESS;
}

/* The value a set stores: `value` rounded as the limit requires, or 0 when rounding
 * would overflow. */
static size_t limit_round(aclrtDeviceLimit limit, size_t value)
{
    size_t align = 1;
    switch ((int)limit) {
    case ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE:
    case ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE:
        align = DEV_LIMIT_SIMT_ALIGN;
        break;
    case ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE:
        if (value <= DEV_LIMIT_SIMD_STACK_MIN) {
            return DEV_LIMIT_SIMD_STACK_MIN;
        }
        align = DEV_LIMIT_SIMD_STACK_ALIGN;
        break;
    case ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE:
        align = DEV_LIMIT_SIMD_FIFO_ALIGN;
        break;
    default: /* ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE: as given */
        return value;
    }
    if (value > SIZE_MAX - (align - 1)) {
        return 0;
    }
    return (value + align - 1) / align * align;
}

aclError aclrtDeviceGetLimit(aclrtDeviceLimit limit, size_t *value)
{
    static const char fn[] = "aclrtDeviceGetLimit";
    MOCK_REQUIRE_NONNULL(fn, value);
    if (!limit_valid(limit)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'limit' (%d) is not an aclrtDeviceLimit",
                          (int)limit);
    }
    MOCK_ENTER(fn);
    aclError rc = limit_supported(fn, limit);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    size_t v = atomic_load(&g_limits[limit]);
    *value = v != 0 ? v : k_limit_default[limit];
    return ACL_SUCCESS;
}

aclError aclrtDeviceSetLimit(aclrtDeviceLimit limit, size_t value)
{
    static const char fn[] = "aclrtDeviceSetLimit";
    if (!limit_valid(limit)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'limit' (%d) is not an aclrtDeviceLimit",
                          (int)limit);
    }
    size_t rounded = value == 0 ? 0 : limit_round(limit, value);
    if (rounded == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'value' (%zu) is %s", value,
                          value == 0 ? "0" : "too large");
    }
    MOCK_ENTER(fn);
    aclError rc = limit_supported(fn, limit);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    atomic_store(&g_limits[limit], rounded);
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ op timeouts */
/* Process-wide. Doc 12_execution_control.md, the API reference of each function (where it
 * and the other documents disagree the mock follows it):
 *  - aclrtGetOpExecuteTimeout before any set: the default, 1091 s (returned in ms);
 *  - the hardware counts in steps of aclrtGetOpTimeOutInterval microseconds, at most 254
 *    of them: a set rounds up to the interval and clamps to 254 x interval;
 *  - aclrtSetOpExecuteTimeOutV2(0) means the maximum, and "never" (UINT64_MAX) when the
 *    interval is below 100000 us.
 * acl_abi.md §1.2 records that torch_npu sets 547 s (kMaxOpExecuteTimeOut): a value it
 * chooses, below the A2/A3 maximum, not the runtime's maximum (the mock used to cap at
 * 547 s). The interval is ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US (default 4294967 us, 2^32 ns:
 * 254 steps = 1090.9 s, the documented 1091 s of Atlas A2/A3). V1 (seconds) and WithMs
 * follow the same rules after converting to microseconds. */

#define OP_TIMEOUT_DEFAULT_MS 1091000u
#define OP_TIMEOUT_MAX_STEPS 254u
#define OP_TIMEOUT_NEVER_BELOW_US 100000u
#define OP_TIMEOUT_NEVER UINT64_MAX

/* 0 = never set (aclrtGetOpExecuteTimeout answers the default); else microseconds. */
static atomic_ullong g_op_timeout_us;

static uint64_t op_interval_us(void)
{
    return core_config_get()->op_timeout_interval_us;
}

/* The timeout (us) the hardware applies for a request of `us` microseconds. */
static uint64_t op_timeout_actual_us(uint64_t us)
{
    uint64_t step = op_interval_us();
    uint64_t max = OP_TIMEOUT_MAX_STEPS * step; /* config keeps step <= UINT64_MAX / 254 */
    if (us == 0) {
        return step < OP_TIMEOUT_NEVER_BELOW_US ? OP_TIMEOUT_NEVER : max;
    }
    if (us >= max) {
        return max;
    }
    return (us + step - 1) / step * step;
}

aclError aclrtSetOpExecuteTimeOut(uint32_t timeout)
{
    MOCK_ENTER("aclrtSetOpExecuteTimeOut");
    atomic_store(&g_op_timeout_us, op_timeout_actual_us((uint64_t)timeout * 1000000ull));
    return ACL_SUCCESS;
}

aclError aclrtSetOpExecuteTimeOutWithMs(uint32_t timeout)
{
    MOCK_ENTER("aclrtSetOpExecuteTimeOutWithMs");
    atomic_store(&g_op_timeout_us, op_timeout_actual_us((uint64_t)timeout * 1000ull));
    return ACL_SUCCESS;
}

aclError aclrtSetOpExecuteTimeOutV2(uint64_t timeout, uint64_t *actualTimeout)
{
    static const char fn[] = "aclrtSetOpExecuteTimeOutV2";
    MOCK_REQUIRE_NONNULL(fn, actualTimeout);
    MOCK_ENTER(fn);
    uint64_t actual = op_timeout_actual_us(timeout);
    atomic_store(&g_op_timeout_us, actual);
    *actualTimeout = actual;
    return ACL_SUCCESS;
}

aclError aclrtGetOpExecuteTimeout(uint32_t *const timeoutMs)
{
    static const char fn[] = "aclrtGetOpExecuteTimeout";
    MOCK_REQUIRE_NONNULL(fn, timeoutMs);
    MOCK_ENTER(fn);
    uint64_t us = atomic_load(&g_op_timeout_us);
    uint64_t ms = us == 0 ? OP_TIMEOUT_DEFAULT_MS : us / 1000ull;
    *timeoutMs = ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms; /* "never" reads as UINT32_MAX */
    return ACL_SUCCESS;
}

aclError aclrtGetOpTimeOutInterval(uint64_t *interval)
{
    static const char fn[] = "aclrtGetOpTimeOutInterval";
    MOCK_REQUIRE_NONNULL(fn, interval);
    MOCK_ENTER(fn);
    *interval = op_interval_us();
    return ACL_SUCCESS;
}
