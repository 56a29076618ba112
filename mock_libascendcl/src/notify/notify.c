/*
 * notify.c - notifies (acl_next_semantics.md §3.4; NTF, G-NTF): aclrtCreateNotify /
 * aclrtDestroyNotify / aclrtRecordNotify / aclrtWaitAndResetNotify / aclrtGetNotifyId /
 * aclrtNotifyBatchReset, and the notify side of IPC notifies (src/ipc/ has the keys).
 *
 * A notify is one 32-bit word: 1 = recorded, 0 = reset. A record task stores 1 and
 * wakes the waiters; a wait task takes the 1 back (compare-and-swap 1 -> 0), so one
 * record wakes exactly one wait and a notify counts to 1 at most (two records before a
 * wait are one). The word lives in a process-shared slot (core/shm.c) so that another
 * process that imported the notify records into the same word and wakes a wait here
 * (shared futex). Notifies are not owned by a context: aclFinalize destroys the ones
 * still alive.
 *
 * Rules (§3.4): flag ACL_NOTIFY_DEFAULT or ACL_NOTIFY_DEVICE_USE_ONLY; at most 65535
 * (950), 8192 (A3/A2), 2048 (310B) or 1024 (310P/910) notifies per device
 * (ACL_ERROR_RT_NO_NOTIFY_RESOURCE); the wait runs on a stream of the notify's device
 * (RTS-E EE1012: 107000), a record on any stream; an imported notify may only be
 * recorded; the wait timeout is in seconds (0 = forever) and fails the stream with
 * ACL_ERROR_RT_WAIT_TIMEOUT (mock choice of code); BatchReset on 950/A3/A2 only.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "notify/notify.h"
#include "notify/notify_private.h"

#define NOTIFY_MAGIC 0x4e4f54494659214eull /* "NOTIFY!N" */

typedef struct nt_s {
    uint64_t magic;
    atomic_int refs;
    int32_t device;
    uint32_t id;
    uint32_t flags;
    _Atomic uint32_t *word;       /* 1 = recorded; in `slot`, or another process's slot */
    core_shm_slot slot;           /* created here */
    void (*release)(void *arg);   /* imported: unmaps the word, tells the creator */
    void *release_arg;
} nt_t;

static mock_mutex g_nt_mu = MOCK_MUTEX_INIT(MOCK_LOCK_NOTIFY_REGISTRY);
static mock_registry g_nt_reg = MOCK_REGISTRY_EMPTY;
static uint32_t g_nt_live[MOCK_MAX_DEVICES];
static uint32_t g_nt_next_id;

/* Notifies per device (NTF#aclrtCreateNotify). */
static uint32_t notify_limit(void)
{
    switch (core_soc_family_get()) {
    case CORE_SOC_950PR:
    case CORE_SOC_950DT:
        return 65535u;
    case CORE_SOC_A3:
    case CORE_SOC_A2:
        return 8192u;
    case CORE_SOC_310B:
        return 2048u;
    case CORE_SOC_310P:
    case CORE_SOC_910:
        return 1024u;
    }
    return 8192u;
}

const struct timespec *notify_deadline(uint32_t timeout_s, struct timespec *buf)
{
    return core_deadline_opt(timeout_s == 0 ? -1 : (int64_t)timeout_s * 1000, buf);
}

static void nt_put(nt_t *n)
{
    if (atomic_fetch_sub(&n->refs, 1) == 1) {
        n->magic = 0;
        core_shm_slot_free(&n->slot);
        if (n->release != NULL) {
            n->release(n->release_arg);
        }
        free(n);
    }
}

static void nt_put_void(void *p)
{
    nt_put(p);
}

/* The live notify behind `handle`, referenced (100000 for NULL, 107000 for garbage). */
static aclError nt_get(const char *fn, aclrtNotify handle, const char *argname, nt_t **out)
{
    if (handle == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", argname);
    }
    core_mutex_lock(&g_nt_mu);
    nt_t *n = core_registry_find(&g_nt_reg, handle);
    if (n != NULL && n->magic == NOTIFY_MAGIC) {
        atomic_fetch_add(&n->refs, 1);
    } else {
        n = NULL;
    }
    core_mutex_unlock(&g_nt_mu);
    if (n == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument '%s' (%p) is not a live notify handle", argname,
                          handle);
    }
    aclError lost = core_device_lost_code(n->device);
    if (lost != ACL_SUCCESS) {
        nt_put(n);
        return core_error(fn, lost, "device %d of the notify is lost", n->device);
    }
    *out = n;
    return ACL_SUCCESS;
}

/* A new notify of the current context: on a new shared slot, or (imported) on another
 * process's `word`, released with release(arg). */
static aclError nt_create(const char *fn, uint32_t flags, _Atomic uint32_t *word, void (*release)(void *arg),
                          void *arg, aclrtNotify *out)
{
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int32_t dev = core_ctx_device(ctx);
    nt_t *n = calloc(1, sizeof(*n));
    if (n == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory for a notify");
    }
    n->magic = NOTIFY_MAGIC;
    atomic_init(&n->refs, 1);
    n->device = dev;
    n->flags = flags;
    n->slot.fd = -1;
    if (word != NULL) {
        n->word = word;
        n->release = release;
        n->release_arg = arg;
    } else if (core_shm_slot_alloc(&n->slot)) {
        n->word = n->slot.addr;
    } else {
        free(n);
        return core_error(fn, ACL_ERROR_RT_NO_NOTIFY_RESOURCE, "no shared memory for a notify");
    }
    uint32_t limit = notify_limit();
    core_mutex_lock(&g_nt_mu);
    bool full = g_nt_live[dev] >= limit;
    bool registered = !full && core_registry_insert(&g_nt_reg, n);
    if (registered) {
        g_nt_live[dev]++;
        n->id = g_nt_next_id++;
    }
    core_mutex_unlock(&g_nt_mu);
    if (!registered) {
        n->release = NULL; /* the caller still owns the imported word */
        nt_put(n);
        if (full) {
            return core_error(fn, ACL_ERROR_RT_NO_NOTIFY_RESOURCE,
                              "device %d already has the maximum of %u notifies (%s)", dev, limit,
                              core_config_get()->soc_name);
        }
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory for the notify registry");
    }
    *out = n;
    return ACL_SUCCESS;
}

aclError aclrtCreateNotify(aclrtNotify *notify, uint64_t flag)
{
    static const char fn[] = "aclrtCreateNotify";
    MOCK_REQUIRE_NONNULL(fn, notify);
    if (flag != ACL_NOTIFY_DEFAULT && flag != ACL_NOTIFY_DEVICE_USE_ONLY) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'flag' is 0x%llx (ACL_NOTIFY_DEFAULT 0x0 or ACL_NOTIFY_DEVICE_USE_ONLY 0x1)",
                          (unsigned long long)flag);
    }
    MOCK_ENTER(fn);
    return nt_create(fn, (uint32_t)flag, NULL, NULL, NULL, notify);
}

aclError aclrtDestroyNotify(aclrtNotify notify)
{
    static const char fn[] = "aclrtDestroyNotify";
    MOCK_REQUIRE_NONNULL(fn, notify);
    MOCK_ENTER(fn);
    core_mutex_lock(&g_nt_mu);
    nt_t *n = core_registry_find(&g_nt_reg, notify);
    if (n != NULL) {
        core_registry_erase(&g_nt_reg, n);
        g_nt_live[n->device]--;
    }
    core_mutex_unlock(&g_nt_mu);
    if (n == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'notify' (%p) is not a live notify handle", notify);
    }
    /* Pending record/wait tasks keep their references; an IPC notify lives on while
     * another process holds it (every process destroys its own, §3.4). */
    nt_put(n);
    return ACL_SUCCESS;
}

void notify_finalize(void)
{
    core_mutex_lock(&g_nt_mu);
    mock_registry reg = g_nt_reg;
    memset(&g_nt_reg, 0, sizeof g_nt_reg);
    memset(g_nt_live, 0, sizeof g_nt_live);
    core_mutex_unlock(&g_nt_mu);
    for (size_t i = 0; i < reg.cap; i++) {
        nt_t *n = core_registry_slot(&reg, i);
        if (n != NULL) {
            nt_put(n);
        }
    }
    core_registry_release(&reg);
}

/* ---------------------------------------------------------------- record */

static aclError record_task(void *p)
{
    nt_t *n = p;
    atomic_store(n->word, 1u);
    core_futex_wake(n->word);
    return ACL_SUCCESS;
}

aclError aclrtRecordNotify(aclrtNotify notify, aclrtStream stream)
{
    static const char fn[] = "aclrtRecordNotify";
    MOCK_REQUIRE_NONNULL(fn, notify);
    MOCK_ENTER(fn);
    nt_t *n = NULL;
    aclError rc = nt_get(fn, notify, "notify", &n);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_stream *s = NULL;
    rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        nt_put(n);
        return rc;
    }
    /* A record may come from any device (that is what notifies are for, G-NTF). */
    /* for the diagnostics a record is like an event record (a wait orders after it) */
    mock_task_desc desc = {.kind = MOCK_TASK_EVENT_RECORD, .name = fn, .peer_device = -1, .event = n};
    rc = stream_enqueue_desc(s, record_task, n, nt_put_void, &desc);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the record task (error %d)", rc);
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------------ wait */

typedef struct wait_arg {
    nt_t *n;
    uint32_t timeout_s;
} wait_arg;

static aclError wait_task(void *p)
{
    wait_arg *a = p;
    struct timespec buf;
    const struct timespec *dl = notify_deadline(a->timeout_s, &buf);
    for (;;) {
        uint32_t one = 1;
        if (atomic_compare_exchange_strong(a->n->word, &one, 0u)) {
            return ACL_SUCCESS; /* this wait took the record: automatic reset */
        }
        int w = stream_task_wait_word(a->n->word, 0u, dl);
        if (w == ECANCELED) {
            return ACL_SUCCESS; /* stream aborted: the task counts as discarded */
        }
        one = 1;
        if (w == ETIMEDOUT && !atomic_compare_exchange_strong(a->n->word, &one, 0u)) {
            return ACL_ERROR_RT_WAIT_TIMEOUT;
        }
        if (w == ETIMEDOUT) {
            return ACL_SUCCESS;
        }
    }
}

static void wait_free(void *p)
{
    wait_arg *a = p;
    nt_put(a->n);
    free(a);
}

aclError aclrtWaitAndResetNotify(aclrtNotify notify, aclrtStream stream, uint32_t timeout)
{
    static const char fn[] = "aclrtWaitAndResetNotify";
    MOCK_REQUIRE_NONNULL(fn, notify);
    MOCK_ENTER(fn);
    nt_t *n = NULL;
    aclError rc = nt_get(fn, notify, "notify", &n);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (n->release != NULL) {
        nt_put(n);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'notify' was imported from another process: only its creator may wait on it "
                          "(the importer only records)");
    }
    mock_stream *s = NULL;
    rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        nt_put(n);
        return rc;
    }
    if (stream_device(s) != n->device) {
        int32_t sd = stream_device(s), nd = n->device;
        nt_put(n);
        /* RTS-E EE1012: the wait must be delivered on the device that created the notify */
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "the notify was created on device %d but argument 'stream' is on device %d (the wait must "
                          "run on the device that created the notify)",
                          nd, sd);
    }
    wait_arg *a = malloc(sizeof(*a));
    if (a == NULL) {
        nt_put(n);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    a->n = n;
    a->timeout_s = timeout;
    mock_task_desc desc = {.kind = MOCK_TASK_EVENT_WAIT, .name = fn, .peer_device = -1, .event = n};
    rc = stream_enqueue_desc(s, wait_task, a, wait_free, &desc);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the wait task (error %d)", rc);
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ id, reset */

aclError aclrtGetNotifyId(aclrtNotify notify, uint32_t *notifyId)
{
    static const char fn[] = "aclrtGetNotifyId";
    MOCK_REQUIRE_NONNULL(fn, notify);
    MOCK_REQUIRE_NONNULL(fn, notifyId);
    MOCK_ENTER(fn);
    nt_t *n = NULL;
    aclError rc = nt_get(fn, notify, "notify", &n);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *notifyId = n->id;
    nt_put(n);
    return ACL_SUCCESS;
}

aclError aclrtNotifyBatchReset(aclrtNotify *notifies, size_t num)
{
    static const char fn[] = "aclrtNotifyBatchReset";
    MOCK_REQUIRE_NONNULL(fn, notifies);
    if (num == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'num' is 0");
    }
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, CORE_SOC_950 | CORE_SOC_BIT(CORE_SOC_A3) | CORE_SOC_BIT(CORE_SOC_A2));
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* All or nothing: every handle is checked before any notify is reset. */
    size_t bad = num;
    core_mutex_lock(&g_nt_mu);
    for (size_t i = 0; i < num && bad == num; i++) {
        nt_t *n = core_registry_find(&g_nt_reg, notifies[i]);
        if (n == NULL || n->magic != NOTIFY_MAGIC) {
            bad = i;
        }
    }
    for (size_t i = 0; i < num && bad == num; i++) {
        nt_t *n = notifies[i];
        atomic_store(n->word, 0u);
    }
    core_mutex_unlock(&g_nt_mu);
    if (bad != num) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "notifies[%zu] (%p) is not a live notify handle", bad,
                          notifies[bad]);
    }
    return ACL_SUCCESS;
}

/* ---------------------------------------------------- IPC (for src/ipc/) */

aclError notify_ipc_export(const char *fn, aclrtNotify notify, uint32_t *id)
{
    nt_t *n = NULL;
    aclError rc = nt_get(fn, notify, "notify", &n);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    bool imported = n->release != NULL, shareable = n->slot.fd >= 0;
    *id = n->id;
    nt_put(n);
    if (imported) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'notify' was imported from another process (only its creator exports it)");
    }
    if (!shareable) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "this system cannot share memory between processes (memfd_create failed)");
    }
    return ACL_SUCCESS;
}

aclError notify_ipc_acquire(aclrtNotify notify, uint32_t id, void **obj, int *fd, uint64_t *offset, int32_t *device)
{
    core_mutex_lock(&g_nt_mu);
    nt_t *n = core_registry_find(&g_nt_reg, notify);
    bool ok = n != NULL && n->magic == NOTIFY_MAGIC && n->id == id && n->slot.addr != NULL;
    if (ok) {
        atomic_fetch_add(&n->refs, 1);
    }
    core_mutex_unlock(&g_nt_mu);
    if (!ok) {
        return ACL_ERROR_RT_IPC_ERROR; /* destroyed before the import: it fails (§3.4) */
    }
    *obj = n;
    *fd = n->slot.fd;
    *offset = n->slot.offset;
    *device = n->device;
    return ACL_SUCCESS;
}

void notify_ipc_put(void *obj)
{
    nt_put(obj);
}

aclError notify_ipc_open(const char *fn, void *word, void (*release)(void *arg), void *arg, aclrtNotify *out)
{
    return nt_create(fn, ACL_NOTIFY_DEFAULT, word, release, arg, out);
}
