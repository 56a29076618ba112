/*
 * copy.c - data movement of the mock: aclrtMemcpy / MemcpyAsync (+ WithCondition),
 * Memcpy2d(+Async), MemcpyBatch(+Async, V2), Memset(+Async), MemsetD32(+Async)
 * and the stream-ordered value operations aclrtValueWrite / aclrtValueWait
 * (acl_abi.md §1.6, §1.9, §5.6).
 *
 * Every copy is checked against the registry before any byte moves: the
 * direction comes from where the pointers live (the `kind` argument is
 * reserved in CANN: validated, then ignored - see check_kind), and a range
 * that would run past the end of the allocation containing it (or into freed /
 * unmapped device address space) is refused with an error instead of
 * corrupting memory.
 * Data is moved with one memmove, no staging and no lock held.
 *
 * ValueWait: the waiting task re-reads the watched word whenever device memory
 * was written (every device write ends with mem_write_end(), which bumps a
 * generation and wakes waiters) and at least every 10 ms. Writers hold a shared
 * "write gate" while they copy and the waiter reads under the exclusive gate,
 * so the read never races with a copy (TSAN clean).
 */
#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem_private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- write gate/notify */

static mock_rwlock g_gate = MOCK_RWLOCK_INIT(MOCK_LOCK_COPY_GATE);
static mock_mutex g_notify_mu = MOCK_MUTEX_INIT(MOCK_LOCK_VALUE_NOTIFY);
static pthread_cond_t g_notify_cv;
static pthread_once_t g_notify_once = PTHREAD_ONCE_INIT;
static uint64_t g_write_gen;     /* under g_notify_mu */
static atomic_int g_waiters;

static void notify_init(void)
{
    core_cond_init(&g_notify_cv);
}

MOCK_HIDDEN void mem_write_begin(void)
{
    core_rwlock_rdlock(&g_gate);
}

MOCK_HIDDEN void mem_write_end(void)
{
    core_rwlock_unlock(&g_gate);
    if (atomic_load(&g_waiters) > 0) {
        pthread_once(&g_notify_once, notify_init);
        core_mutex_lock(&g_notify_mu);
        g_write_gen++;
        pthread_cond_broadcast(&g_notify_cv);
        core_mutex_unlock(&g_notify_mu);
    }
}

MOCK_HIDDEN void mem_copy_finalize(void)
{
    /* Nothing is owned here; waits are cancelled through their streams. */
}

/* ----------------------------------------------------------- classification */

/* Where one side of a copy lives. */
typedef struct side {
    mem_rec *rec;   /* with a reference, or NULL for pageable host memory */
    bool dev;       /* device accessible */
    bool host;      /* host accessible */
    bool pinned;    /* runtime-known host memory (async stays async) */
    int32_t device; /* for device-only memory, else -1 */
} side;

static void side_drop(side *s)
{
    mem_release(s->rec);
    s->rec = NULL;
}

/* Finds the memory holding [p, p+len) and checks the range is inside it. */
static aclError classify(const char *fn, const char *what, const void *p, size_t len, bool write, side *out)
{
    memset(out, 0, sizeof(*out));
    out->device = -1;
    mem_rec *r = mem_acquire(p);
    if (r == NULL) {
        if (mem_in_dead_space(p, len)) {
            return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                              "argument '%s' (%p, %zu bytes) is device address space that is not a live "
                              "allocation (freed, unmapped or out of bounds)",
                              what, p, len);
        }
        if (!mem_host_mapped(p, len)) {
            return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                              "argument '%s' (%p, %zu bytes) is not mapped memory of this process", what, p, len);
        }
        out->host = true;
        return ACL_SUCCESS;
    }
    size_t off = (uintptr_t)p - r->base;
    if (len > r->size - off) {
        size_t size = r->size;
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument '%s': %zu bytes at offset %zu overrun the %zu-byte allocation at %p", what, len,
                          off, size, (void *)(uintptr_t)((uintptr_t)p - off));
    }
    if (r->device >= 0 && r->kind != MEM_REC_HOST_REG) {
        aclError lost = core_device_lost_code(r->device);
        if (lost != ACL_SUCCESS) {
            int32_t dev = r->device;
            mem_release(r);
            return core_error(fn, lost, "argument '%s' (%p) is memory of device %d, which is lost", what, p, dev);
        }
    }
    if (r->no_access || (write && r->readonly)) {
        bool na = r->no_access;
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument '%s' (%p) is mapped %s", what, p,
                          na ? "without access (aclrtMemSetAccess)" : "read-only");
    }
    out->rec = r;
    switch (r->kind) {
    case MEM_REC_DEVICE:
    case MEM_REC_VMM_MAP:
    case MEM_REC_IPC:
        out->dev = true;
        out->device = r->device;
        break;
    case MEM_REC_HOST_PINNED:
        out->host = true;
        out->pinned = true;
        break;
    case MEM_REC_MANAGED:
    case MEM_REC_HOST_REG:
        out->dev = true;
        out->host = true;
        out->pinned = true;
        break;
    }
    return ACL_SUCCESS;
}

/* The direction of a copy comes from where the pointers live, never from
 * `kind`: CANN documents the kind of aclrtMemcpy and its relatives as a
 * reserved parameter ("the system determines from the source and destination
 * addresses whether the copy is possible") - the ACL layer only validates that
 * it is one of the accepted enumerators, and the runtime copies by the real
 * locations of src and dst (acl_abi.md §5.6). So a kind that disagrees with
 * the addresses (HOST_TO_DEVICE from device memory, ...) still copies, in the
 * direction the addresses give. What the addresses make impossible is refused:
 * copies between two devices need peer access between them (aclrtMemcpy doc:
 * enable it with aclrtDeviceEnablePeerAccess first). *effective gets the
 * direction used (an ACL_MEMCPY_* of H2H/H2D/D2H/D2D). */
static aclError check_kind(const char *fn, const side *d, const side *s, int *effective)
{
    /* Memory both sides reach (managed, host-registered) counts as host. */
    bool sd = s->dev && !s->host, dd = d->dev && !d->host;
    *effective = sd ? (dd ? ACL_MEMCPY_DEVICE_TO_DEVICE : ACL_MEMCPY_DEVICE_TO_HOST)
                    : (dd ? ACL_MEMCPY_HOST_TO_DEVICE : ACL_MEMCPY_HOST_TO_HOST);
    if (s->device >= 0 && d->device >= 0 && s->device != d->device && !mem_peer_enabled(s->device, d->device) &&
        !mem_peer_enabled(d->device, s->device)) {
        /* Not pinned down on hardware; the runtime rejects the addresses. */
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "copy between device %d and device %d needs peer access: call "
                          "aclrtDeviceEnablePeerAccess first",
                          s->device, d->device);
    }
    return ACL_SUCCESS;
}

/* Classifies dst (dext bytes, written) and src (sext bytes, read) and derives the
 * direction from them (*eff, see check_kind). On success d and s hold references; on
 * failure neither does. */
static aclError classify_pair(const char *fn, void *dst, size_t dext, const void *src, size_t sext, side *d,
                              side *s, int *eff)
{
    aclError rc = classify(fn, "dst", dst, dext, true, d);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = classify(fn, "src", src, sext, false, s);
    if (rc != ACL_SUCCESS) {
        side_drop(d);
        return rc;
    }
    rc = check_kind(fn, d, s, eff);
    if (rc != ACL_SUCCESS) {
        side_drop(d);
        side_drop(s);
    }
    return rc;
}

static bool is_device_write(const side *d)
{
    return d->rec != NULL && d->dev;
}

/* ------------------------------------------------------------- operations */

enum op_kind { OP_COPY, OP_COPY2D, OP_MEMSET, OP_MEMSET32, OP_VALUE_WRITE, OP_VALUE_WAIT, OP_BATCH };

typedef struct copy_op {
    int op;
    void *dst;
    const void *src;
    size_t n;
    side d, s;
    /* 2D */
    size_t dpitch, spitch, width, height;
    /* memset / value */
    uint64_t value;
    uint32_t flag;
    /* batch */
    size_t nb;
    void **dsts;
    const void **srcs;
    size_t *sizes;
    side *bd, *bs;
    /* synchronous completion of an async call (pageable host memory) */
    bool sync;
    bool done;
    aclError rc;
    mock_mutex mu;
    pthread_cond_t cv;
} copy_op;

static void raw_copy(side *d, side *s, void *dst, const void *src, size_t n)
{
    bool dw = is_device_write(d);
    mem_rec_access_begin(d->rec);
    if (s->rec != d->rec) {
        mem_rec_access_begin(s->rec);
    }
    if (dw) {
        mem_write_begin();
    }
    memmove(dst, src, n);
    if (dw) {
        mem_write_end();
    }
    if (s->rec != d->rec) {
        mem_rec_access_end(s->rec);
    }
    mem_rec_access_end(d->rec);
}

static bool wait_cond(uint64_t cur, uint64_t value, uint32_t flag)
{
    switch (flag) {
    case ACL_STREAM_WAIT_VALUE_GEQ:
        return (int64_t)(cur - value) >= 0;
    case ACL_STREAM_WAIT_VALUE_EQ:
        return cur == value;
    case ACL_STREAM_WAIT_VALUE_AND:
        return (cur & value) != 0;
    default: /* NOR */
        return ~(cur | value) != 0;
    }
}

static uint64_t read_watched(copy_op *o)
{
    uint64_t v;
    mem_rec_access_begin(o->d.rec);
    core_rwlock_wrlock(&g_gate);
    memcpy(&v, o->dst, sizeof(v));
    core_rwlock_unlock(&g_gate);
    mem_rec_access_end(o->d.rec);
    return v;
}

static aclError value_wait(copy_op *o)
{
    pthread_once(&g_notify_once, notify_init);
    atomic_fetch_add(&g_waiters, 1);
    aclError rc = ACL_SUCCESS;
    for (;;) {
        core_mutex_lock(&g_notify_mu);
        uint64_t gen = g_write_gen;
        core_mutex_unlock(&g_notify_mu);
        if (wait_cond(read_watched(o), o->value, o->flag)) {
            break;
        }
        if (atomic_load(&o->d.rec->freed)) {
            rc = core_error("aclrtValueWait", ACL_ERROR_RT_PARAM_INVALID,
                            "the memory watched at %p was freed while the stream waited on it", o->dst);
            break;
        }
        aclError lost = core_device_lost_code(o->d.rec->device);
        if (lost != ACL_SUCCESS) {
            rc = lost;
            break;
        }
        core_mutex_lock(&g_notify_mu);
        int w = 0;
        if (g_write_gen == gen) {
            /* Wake at least every 10 ms: stream_task_wait also notices a stream
             * abort (destroy-force) and returns ECANCELED. */
            struct timespec dl = core_deadline_ms(10);
            w = stream_task_wait(&g_notify_cv, &g_notify_mu, &dl);
        }
        core_mutex_unlock(&g_notify_mu);
        if (w == ECANCELED) {
            rc = ACL_ERROR_RT_STREAM_ABORT;
            break;
        }
    }
    atomic_fetch_sub(&g_waiters, 1);
    return rc;
}

static aclError op_run(copy_op *o)
{
    switch (o->op) {
    case OP_COPY:
        raw_copy(&o->d, &o->s, o->dst, o->src, o->n);
        return ACL_SUCCESS;
    case OP_COPY2D: {
        bool dw = is_device_write(&o->d);
        mem_rec_access_begin(o->d.rec);
        if (o->s.rec != o->d.rec) {
            mem_rec_access_begin(o->s.rec);
        }
        if (dw) {
            mem_write_begin();
        }
        for (size_t row = 0; row < o->height; row++) {
            memmove((char *)o->dst + row * o->dpitch, (const char *)o->src + row * o->spitch, o->width);
        }
        if (dw) {
            mem_write_end();
        }
        if (o->s.rec != o->d.rec) {
            mem_rec_access_end(o->s.rec);
        }
        mem_rec_access_end(o->d.rec);
        return ACL_SUCCESS;
    }
    case OP_MEMSET:
    case OP_MEMSET32: {
        bool dw = is_device_write(&o->d);
        mem_rec_access_begin(o->d.rec);
        if (dw) {
            mem_write_begin();
        }
        if (o->op == OP_MEMSET) {
            memset(o->dst, (int)(o->value & 0xFFu), o->n);
        } else {
            uint32_t v = (uint32_t)o->value;
            unsigned char *p = o->dst;
            for (size_t i = 0; i < o->n; i++) {
                memcpy(p + i * 4, &v, 4);
            }
        }
        if (dw) {
            mem_write_end();
        }
        mem_rec_access_end(o->d.rec);
        return ACL_SUCCESS;
    }
    case OP_VALUE_WRITE: {
        mem_rec_access_begin(o->d.rec);
        mem_write_begin();
        memcpy(o->dst, &o->value, sizeof(o->value));
        mem_write_end();
        mem_rec_access_end(o->d.rec);
        return ACL_SUCCESS;
    }
    case OP_VALUE_WAIT:
        return value_wait(o);
    case OP_BATCH:
        for (size_t i = 0; i < o->nb; i++) {
            raw_copy(&o->bd[i], &o->bs[i], o->dsts[i], o->srcs[i], o->sizes[i]);
        }
        return ACL_SUCCESS;
    }
    return ACL_ERROR_RT_INTERNAL_ERROR;
}

static void op_destroy(copy_op *o)
{
    side_drop(&o->d);
    side_drop(&o->s);
    for (size_t i = 0; i < o->nb; i++) {
        if (o->bd) {
            side_drop(&o->bd[i]);
        }
        if (o->bs) {
            side_drop(&o->bs[i]);
        }
    }
    free(o->bd);
    free(o->bs);
    free(o->dsts);
    free(o->srcs);
    free(o->sizes);
    if (o->sync) {
        core_mutex_destroy(&o->mu);
        pthread_cond_destroy(&o->cv);
    }
    free(o);
}

/* ----------------------------------------------- what a task is (capture) */

static aclError value_get_params(void *arg, aclmdlRITaskParams *p)
{
    copy_op *o = arg;
    if (o->op == OP_VALUE_WRITE) {
        p->valueWriteTaskParams.devAddr = o->dst;
        p->valueWriteTaskParams.value = o->value;
    } else {
        p->valueWaitTaskParams.devAddr = o->dst;
        p->valueWaitTaskParams.value = o->value;
        p->valueWaitTaskParams.flag = o->flag;
    }
    return ACL_SUCCESS;
}

/* aclmdlRITaskSetParams + aclmdlRIUpdate of a captured value write / wait (the
 * model is not running): the new address is checked like the original one. */
static aclError value_set_params(const char *fn, void *arg, const aclmdlRITaskParams *p)
{
    copy_op *o = arg;
    bool write = o->op == OP_VALUE_WRITE;
    void *addr = write ? p->valueWriteTaskParams.devAddr : p->valueWaitTaskParams.devAddr;
    uint32_t flag = write ? o->flag : p->valueWaitTaskParams.flag;
    if (!write && flag > ACL_STREAM_WAIT_VALUE_NOR) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "value wait flag %u is not GEQ/EQ/AND/NOR", flag);
    }
    if (addr == NULL || ((uintptr_t)addr & 7u) != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "devAddr %p is NULL or not 8-byte aligned", addr);
    }
    side d;
    aclError rc = classify(fn, "devAddr", addr, sizeof(uint64_t), write, &d);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (!d.dev) {
        side_drop(&d);
        return core_error(fn, ACL_ERROR_RT_INVALID_MEMORY_TYPE, "devAddr %p is not device memory", addr);
    }
    side_drop(&o->d);
    o->d = d;
    o->dst = addr;
    o->value = write ? p->valueWriteTaskParams.value : p->valueWaitTaskParams.value;
    o->flag = flag;
    return ACL_SUCCESS;
}

static const stream_task_ops k_ops[] = {
    [OP_COPY] = {"memcpy", ACL_MODEL_RI_TASK_DEFAULT, true, NULL, NULL},
    [OP_COPY2D] = {"memcpy2d", ACL_MODEL_RI_TASK_DEFAULT, true, NULL, NULL},
    [OP_MEMSET] = {"memset", ACL_MODEL_RI_TASK_DEFAULT, true, NULL, NULL},
    [OP_MEMSET32] = {"memset_d32", ACL_MODEL_RI_TASK_DEFAULT, true, NULL, NULL},
    [OP_VALUE_WRITE] = {"value_write", ACL_MODEL_RI_TASK_VALUE_WRITE, true, value_get_params, value_set_params},
    [OP_VALUE_WAIT] = {"value_wait", ACL_MODEL_RI_TASK_VALUE_WAIT, true, value_get_params, value_set_params},
    [OP_BATCH] = {"memcpy_batch", ACL_MODEL_RI_TASK_DEFAULT, true, NULL, NULL},
};

static aclError op_task(void *arg)
{
    copy_op *o = arg;
    aclError rc = op_run(o);
    o->rc = rc;
    return rc;
}

static void op_task_free(void *arg)
{
    copy_op *o = arg;
    if (o->sync) {
        core_mutex_lock(&o->mu);
        o->done = true;
        pthread_cond_signal(&o->cv);
        core_mutex_unlock(&o->mu);
        return; /* the caller waiting in op_submit frees it */
    }
    op_destroy(o);
}

static copy_op *op_new(int op)
{
    copy_op *o = calloc(1, sizeof(*o));
    if (o != NULL) {
        o->op = op;
        o->d.device = o->s.device = -1;
        o->rc = ACL_ERROR_RT_STREAM_ABORT; /* unless the task runs */
    }
    return o;
}

/* ------------------------------------------------------------ descriptions */

/* The link a copy from side `s` to side `d` uses (core/core.h mock_link); for a copy
 * between two devices *peer gets the device that is not `s`'s. */
static mock_link copy_link(const side *d, const side *s, int32_t *peer)
{
    bool sd = s->dev && !s->host, dd = d->dev && !d->host;
    *peer = -1;
    if (sd && dd) {
        if (s->device >= 0 && d->device >= 0 && s->device != d->device) {
            *peer = d->device;
            return MOCK_LINK_PEER;
        }
        return MOCK_LINK_D2D;
    }
    return sd ? MOCK_LINK_D2H : dd ? MOCK_LINK_H2D : MOCK_LINK_H2H;
}

static void access_set(mock_access *a, const void *p, size_t n, uint32_t mode)
{
    memset(a, 0, sizeof *a);
    a->ptr = p;
    a->size = n;
    a->mode = mode;
    a->dtype = -1; /* ACL_DT_UNDEFINED: raw bytes */
}

/* Describes `o` for the observers (timing model, profiler, sanitizer). `acc` has room
 * for two accesses; a batch gets a malloc'd array in *heap (free it; NULL when short
 * of memory: the batch is then described without its ranges). */
static void op_describe(const copy_op *o, const char *fn, mock_task_desc *desc, mock_access acc[2],
                        mock_access **heap)
{
    memset(desc, 0, sizeof *desc);
    desc->name = fn;
    desc->peer_device = -1;
    desc->access = acc;
    *heap = NULL;
    switch (o->op) {
    case OP_COPY:
    case OP_COPY2D: {
        size_t w = o->op == OP_COPY ? o->n : o->width;
        size_t rows = o->op == OP_COPY ? 1 : o->height;
        /* a 2D copy is described by the extent its rows span (pitch * (rows-1) + width) */
        size_t dext = o->op == OP_COPY ? o->n : (o->height - 1) * o->dpitch + o->width;
        size_t sext = o->op == OP_COPY ? o->n : (o->height - 1) * o->spitch + o->width;
        desc->kind = MOCK_TASK_COPY;
        desc->bytes = (uint64_t)w * rows;
        desc->link = copy_link(&o->d, &o->s, &desc->peer_device);
        desc->pageable = o->d.rec == NULL || o->s.rec == NULL;
        access_set(&acc[0], o->src, sext, MOCK_ACCESS_READ);
        access_set(&acc[1], o->dst, dext, MOCK_ACCESS_WRITE);
        desc->naccess = 2;
        break;
    }
    case OP_MEMSET:
    case OP_MEMSET32:
        desc->kind = MOCK_TASK_MEMSET;
        desc->bytes = o->op == OP_MEMSET ? o->n : (uint64_t)o->n * 4u;
        desc->link = o->d.dev && !o->d.host ? MOCK_LINK_D2D : MOCK_LINK_H2H;
        access_set(&acc[0], o->dst, (size_t)desc->bytes, MOCK_ACCESS_WRITE);
        desc->naccess = 1;
        break;
    case OP_VALUE_WRITE:
    case OP_VALUE_WAIT:
        desc->kind = MOCK_TASK_VALUE;
        desc->bytes = sizeof(uint64_t);
        desc->link = MOCK_LINK_D2D;
        access_set(&acc[0], o->dst, sizeof(uint64_t), o->op == OP_VALUE_WRITE ? MOCK_ACCESS_WRITE : MOCK_ACCESS_READ);
        desc->naccess = 1;
        break;
    case OP_BATCH: {
        desc->kind = MOCK_TASK_COPY;
        mock_access *v = calloc(o->nb * 2, sizeof *v);
        for (size_t i = 0; i < o->nb; i++) {
            desc->bytes += o->sizes[i];
            int32_t peer;
            mock_link l = copy_link(&o->bd[i], &o->bs[i], &peer);
            if (i == 0 || l > desc->link) { /* the slowest kind of link of the batch */
                desc->link = l;
                desc->peer_device = peer;
            }
            desc->pageable |= o->bd[i].rec == NULL || o->bs[i].rec == NULL;
            if (v != NULL) {
                access_set(&v[2 * i], o->srcs[i], o->sizes[i], MOCK_ACCESS_READ);
                access_set(&v[2 * i + 1], o->dsts[i], o->sizes[i], MOCK_ACCESS_WRITE);
            }
        }
        desc->access = v;
        desc->naccess = v != NULL ? o->nb * 2 : 0;
        *heap = v;
        break;
    }
    }
}

/* A synchronous operation done by the calling thread (sync copies and memsets, and
 * async memsets of host memory): reported to the observers, then run. */
static void op_run_on_host(const char *fn, copy_op *o)
{
    if (core_observing()) {
        mock_task_desc desc;
        mock_access acc[2];
        mock_access *heap;
        op_describe(o, fn, &desc, acc, &heap);
        mock_context *ctx = core_ctx_current();
        core_obs ob = {0};
        ob.kind = CORE_OBS_HOST_OP;
        ob.task = &desc;
        ob.device = ctx != NULL ? core_ctx_device(ctx) : -1;
        (void)core_observe(&ob);
        free(heap);
    }
    (void)op_run(o);
}

/* Enqueues `o` on `stream`. With wait_done (pageable host memory) the call
 * returns only once the task finished, with its result (§5.6: an async copy
 * of pageable memory completes before returning). Takes ownership of o. */
static aclError op_submit(const char *fn, copy_op *o, mock_stream *s, bool wait_done)
{
    if (wait_done) {
        /* Pageable host memory: refused on a capturing stream, and by the
         * capture modes elsewhere (G-CAP1 item 5, MRI#aclmdlRICaptureBegin). */
        aclError rc = stream_capture_check(fn, STREAM_CALL_PAGEABLE_COPY, s, NULL);
        if (rc != ACL_SUCCESS) {
            op_destroy(o);
            return rc;
        }
    }
    mock_task_desc desc;
    mock_access acc[2];
    mock_access *heap = NULL;
    const mock_task_desc *dp = NULL;
    if (core_observing() && stream_binding(s) == NULL) { /* a capture runs it later */
        op_describe(o, fn, &desc, acc, &heap);
        dp = &desc;
    }
    if (wait_done && (core_worker_stream() == s || stream_is_persistent(s) || stream_binding(s) != NULL)) {
        /* Called from a task of this very stream (a host function): waiting
         * would deadlock, so the copy stays asynchronous (still in order).
         * A persistent, capturing or bound stream keeps the copy instead of
         * running it. */
        wait_done = false;
    }
    if (wait_done) {
        o->sync = true;
        core_mutex_init(&o->mu, MOCK_LOCK_COPY_OP);
        pthread_cond_init(&o->cv, NULL);
    }
    stream_task t = {op_task, o, op_task_free, &k_ops[o->op]};
    aclError rc = stream_enqueue_task_desc(s, &t, dp);
    free(heap);
    if (rc != ACL_SUCCESS) {
        if (wait_done) {
            op_destroy(o); /* free_arg only signalled */
        }
        return core_error(fn, rc, "the stream refused the task");
    }
    if (!wait_done) {
        return ACL_SUCCESS;
    }
    core_mutex_lock(&o->mu);
    while (!o->done) {
        core_cond_wait(&o->cv, &o->mu);
    }
    core_mutex_unlock(&o->mu);
    rc = o->rc;
    op_destroy(o);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the copy did not complete on its stream");
    }
    if (core_observing()) { /* the caller waited for the stream up to this copy */
        core_observe_simple(CORE_OBS_SYNC_STREAM, s, NULL, NULL, 0, stream_device(s));
    }
    return ACL_SUCCESS;
}

static aclError no_mem(const char *fn)
{
    return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for the task");
}

/* Shared tail of the checks of the single-range stream ops: resolves `stream` into *st
 * (unless st is NULL: a synchronous op), then a new op of kind `op` that takes over the
 * checked sides d and s (s may be NULL). On failure the sides are dropped. */
static aclError op_prepare(const char *fn, int op, side *d, side *s, aclrtStream stream, mock_stream **st,
                           copy_op **out)
{
    aclError rc = st != NULL ? stream_resolve(fn, stream, st) : ACL_SUCCESS;
    copy_op *o = rc == ACL_SUCCESS ? op_new(op) : NULL;
    if (rc == ACL_SUCCESS && o == NULL) {
        rc = no_mem(fn);
    }
    if (rc != ACL_SUCCESS) {
        side_drop(d);
        if (s != NULL) {
            side_drop(s);
        }
        return rc;
    }
    o->d = *d;
    if (s != NULL) {
        o->s = *s;
    }
    *out = o;
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- memcpy */

/* Argument checks in the order of the real stack (§5.6). Returns
 * ACL_SUCCESS with *nothing = true when there is nothing to copy. On success
 * with work to do, d and s hold references. */
static aclError memcpy_check(const char *fn, void *dst, size_t destMax, const void *src, size_t count, int kind,
                             bool async, side *d, side *s, bool *nothing)
{
    *nothing = false;
    if (count == 0) {
        *nothing = true;
        return ACL_SUCCESS;
    }
    MOCK_REQUIRE_NONNULL(fn, dst);
    MOCK_REQUIRE_NONNULL(fn, src);
    if (kind < ACL_MEMCPY_HOST_TO_HOST || kind > ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'kind' %d is not a supported aclrtMemcpyKind", kind);
    }
    MOCK_ENTER(fn);
    if (destMax == 0) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'destMax' is 0");
    }
    if (count > destMax) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'count' (%zu) exceeds 'destMax' (%zu)", count,
                          destMax);
    }
    if (dst == src) {
        *nothing = true;
        return ACL_SUCCESS;
    }
    mock_context *ctx;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int eff;
    rc = classify_pair(fn, dst, count, src, count, d, s, &eff);
    if (rc == ACL_SUCCESS && async && eff == ACL_MEMCPY_HOST_TO_HOST) {
        /* doc 11-03: asynchronous host-to-host copies are not supported on
         * hosts with attached (EP) devices, which is what the mock models. */
        rc = core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                        "asynchronous host-to-host copies are not supported (use aclrtMemcpy)");
        side_drop(d);
        side_drop(s);
    }
    return rc;
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind)
{
    const char *fn = "aclrtMemcpy";
    side d, s;
    bool nothing;
    aclError rc = stream_capture_check(fn, STREAM_CALL_BLOCKING_COPY, NULL, NULL); /* 107041 */
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = memcpy_check(fn, dst, destMax, src, count, (int)kind, false, &d, &s, &nothing);
    if (rc != ACL_SUCCESS || nothing) {
        return rc;
    }
    if (core_observing()) {
        copy_op view = {.op = OP_COPY, .dst = dst, .src = src, .n = count, .d = d, .s = s};
        mock_task_desc desc;
        mock_access acc[2];
        mock_access *heap;
        op_describe(&view, fn, &desc, acc, &heap);
        mock_context *ctx = core_ctx_current();
        core_obs ob = {0};
        ob.kind = CORE_OBS_HOST_OP;
        ob.task = &desc;
        ob.device = ctx != NULL ? core_ctx_device(ctx) : -1;
        (void)core_observe(&ob);
    }
    raw_copy(&d, &s, dst, src, count);
    side_drop(&d);
    side_drop(&s);
    return ACL_SUCCESS;
}

static aclError memcpy_async(const char *fn, void *dst, size_t destMax, const void *src, size_t count,
                             aclrtMemcpyKind kind, aclrtStream stream)
{
    side d, s;
    bool nothing;
    aclError rc = memcpy_check(fn, dst, destMax, src, count, (int)kind, true, &d, &s, &nothing);
    if (rc != ACL_SUCCESS || nothing) {
        return rc;
    }
    mock_stream *st;
    copy_op *o;
    rc = op_prepare(fn, OP_COPY, &d, &s, stream, &st, &o);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    o->dst = dst;
    o->src = src;
    o->n = count;
    bool pageable = (d.rec == NULL) || (s.rec == NULL);
    return op_submit(fn, o, st, pageable);
}

aclError mem_memcpy_async(const char *fn, void *dst, size_t destMax, const void *src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream)
{
    return memcpy_async(fn, dst, destMax, src, count, kind, stream);
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream)
{
    return memcpy_async("aclrtMemcpyAsync", dst, destMax, src, count, kind, stream);
}

aclError aclrtMemcpyAsyncWithCondition(void *dst, size_t destMax, const void *src, size_t count,
                                       aclrtMemcpyKind kind, aclrtStream stream)
{
    return memcpy_async("aclrtMemcpyAsyncWithCondition", dst, destMax, src, count, kind, stream);
}

/* -------------------------------------------------------------- memcpy 2d */

/* Limits of aclrtMemcpy2d / aclrtMemcpy2dAsync, the same for the sync and the
 * async call: the width may not exceed either pitch (ACL layer, 100000,
 * acl_abi.md §5.6), the width is at most 5000000 bytes and the height at most
 * 5*1024*1024 = 5242880 rows (CANN doc 11-03_memory_copy_and_set.md:
 * "otherwise the call fails"; the reference tables are silent on the code - the
 * runtime checks it, so ACL_ERROR_RT_PARAM_INVALID 107000). */
#define MEMCPY2D_MAX_WIDTH ((size_t)5000000)
#define MEMCPY2D_MAX_HEIGHT ((size_t)5 * 1024 * 1024)

static aclError memcpy2d_check(const char *fn, void *dst, size_t dpitch, const void *src, size_t spitch,
                               size_t width, size_t height, int kind, side *d, side *s, bool *nothing)
{
    *nothing = false;
    if (width == 0 || height == 0) {
        *nothing = true;
        return ACL_SUCCESS;
    }
    MOCK_REQUIRE_NONNULL(fn, dst);
    MOCK_REQUIRE_NONNULL(fn, src);
    if (width > spitch) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'width' (%zu) exceeds 'spitch' (%zu)", width, spitch);
    }
    if (width > dpitch) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'width' (%zu) exceeds 'dpitch' (%zu)", width, dpitch);
    }
    if (kind != ACL_MEMCPY_HOST_TO_DEVICE && kind != ACL_MEMCPY_DEVICE_TO_HOST &&
        kind != ACL_MEMCPY_DEVICE_TO_DEVICE && kind != ACL_MEMCPY_DEFAULT) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'kind' %d is not supported for 2D copies (H2D, D2H, D2D or DEFAULT)", kind);
    }
    MOCK_ENTER(fn);
    if (width > MEMCPY2D_MAX_WIDTH) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'width' (%zu) exceeds the maximum %zu", width,
                          MEMCPY2D_MAX_WIDTH);
    }
    if (height > MEMCPY2D_MAX_HEIGHT) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'height' (%zu) exceeds the maximum %zu", height,
                          MEMCPY2D_MAX_HEIGHT);
    }
    mock_context *ctx;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* extent = (height - 1) * pitch + width, overflow-checked */
    size_t dext, sext;
    if (__builtin_mul_overflow(height - 1, dpitch, &dext) || __builtin_add_overflow(dext, width, &dext) ||
        __builtin_mul_overflow(height - 1, spitch, &sext) || __builtin_add_overflow(sext, width, &sext)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "pitch * height overflows");
    }
    int eff;
    return classify_pair(fn, dst, dext, src, sext, d, s, &eff);
}

/* Shared body of aclrtMemcpy2d{,Async}: checks, then runs the copy (sync) or
 * enqueues it on `stream` (async). */
static aclError memcpy2d_common(const char *fn, void *dst, size_t dpitch, const void *src, size_t spitch,
                                size_t width, size_t height, aclrtMemcpyKind kind, bool async, aclrtStream stream)
{
    side d, s;
    bool nothing;
    aclError rc = async ? ACL_SUCCESS : stream_capture_check(fn, STREAM_CALL_BLOCKING_COPY, NULL, NULL);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = memcpy2d_check(fn, dst, dpitch, src, spitch, width, height, (int)kind, &d, &s, &nothing);
    if (rc != ACL_SUCCESS || nothing) {
        return rc;
    }
    mock_stream *st = NULL;
    copy_op *o;
    rc = op_prepare(fn, OP_COPY2D, &d, &s, stream, async ? &st : NULL, &o);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    o->dst = dst;
    o->src = src;
    o->dpitch = dpitch;
    o->spitch = spitch;
    o->width = width;
    o->height = height;
    if (!async) {
        op_run_on_host(fn, o);
        op_destroy(o);
        return ACL_SUCCESS;
    }
    return op_submit(fn, o, st, d.rec == NULL || s.rec == NULL);
}

aclError aclrtMemcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                       aclrtMemcpyKind kind)
{
    return memcpy2d_common("aclrtMemcpy2d", dst, dpitch, src, spitch, width, height, kind, false, NULL);
}

aclError aclrtMemcpy2dAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                            size_t height, aclrtMemcpyKind kind, aclrtStream stream)
{
    return memcpy2d_common("aclrtMemcpy2dAsync", dst, dpitch, src, spitch, width, height, kind, true, stream);
}

/* ---------------------------------------------------------------- memset */

/* Memset works on device memory and runtime-allocated host memory; on plain
 * malloc memory it is undefined on hardware, which the mock reports. */
static aclError memset_check(const char *fn, void *ptr, size_t bytes, side *d)
{
    mock_context *ctx;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = classify(fn, "devPtr", ptr, bytes, true, d);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (d->rec == NULL) {
        return core_error(fn, ACL_ERROR_RT_INVALID_MEMORY_TYPE,
                          "pointer %p is not device memory or host memory allocated by the runtime", ptr);
    }
    return ACL_SUCCESS;
}

static aclError memset_common(const char *fn, void *devPtr, size_t maxCount, uint64_t value, size_t count,
                              bool d32, bool async, aclrtStream stream)
{
    if (count == 0) {
        return ACL_SUCCESS;
    }
    if (devPtr == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", d32 ? "ptr" : "devPtr");
    }
    MOCK_ENTER(fn);
    size_t bytes = count;
    if (d32 && __builtin_mul_overflow(count, (size_t)4, &bytes)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'N' (%zu) is too large", count);
    }
    if (bytes > maxCount) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "%zu bytes to set exceed '%s' (%zu)", bytes,
                          d32 ? "memSize" : "maxCount", maxCount);
    }
    if (d32 && ((uintptr_t)devPtr & 3u) != 0) {
        return core_error(fn, ACL_ERROR_RT_ADDR_UNALIGNED, "argument 'ptr' %p is not 4-byte aligned", devPtr);
    }
    aclError rc = async ? ACL_SUCCESS : stream_capture_check(fn, STREAM_CALL_BLOCKING_COPY, NULL, NULL);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    side d;
    rc = memset_check(fn, devPtr, bytes, &d);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_stream *st = NULL;
    copy_op *o;
    rc = op_prepare(fn, d32 ? OP_MEMSET32 : OP_MEMSET, &d, NULL, stream, async ? &st : NULL, &o);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    o->dst = devPtr;
    o->n = count;
    o->value = value;
    /* On host memory (aclrtMallocHost, registered host ranges) the async
     * variants behave like the sync ones: the runtime sets the bytes with the
     * CPU during the call instead of queueing a device task, so they are set
     * when the call returns, whatever the stream still has queued (the stream
     * is only validated). Device and managed memory are set in stream order. */
    bool host = d.rec->kind == MEM_REC_HOST_PINNED || d.rec->kind == MEM_REC_HOST_REG;
    if (!async || (host && stream_binding(st) == NULL)) { /* a capture records it */
        op_run_on_host(fn, o);
        op_destroy(o);
        return ACL_SUCCESS;
    }
    return op_submit(fn, o, st, false);
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    return memset_common("aclrtMemset", devPtr, maxCount, (uint32_t)value, count, false, false, NULL);
}

aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream)
{
    return memset_common("aclrtMemsetAsync", devPtr, maxCount, (uint32_t)value, count, false, true, stream);
}

aclError aclrtMemsetD32(void *ptr, size_t memSize, uint32_t value, size_t N)
{
    return memset_common("aclrtMemsetD32", ptr, memSize, value, N, true, false, NULL);
}

aclError aclrtMemsetD32Async(void *ptr, size_t memSize, uint32_t value, size_t N, aclrtStream stream)
{
    return memset_common("aclrtMemsetD32Async", ptr, memSize, value, N, true, true, stream);
}

/* ----------------------------------------------------------------- batch */

static bool loc_matches(const aclrtMemLocation *loc, const side *sd)
{
    switch ((int)loc->type) {
    case ACL_MEM_LOCATION_TYPE_DEVICE:
        return sd->dev && (sd->device < 0 || (uint32_t)sd->device == loc->id);
    case ACL_MEM_LOCATION_TYPE_HOST:
    case ACL_MEM_LOCATION_TYPE_HOST_NUMA:
    case ACL_MEM_LOCATION_TYPE_UNREGISTERED:
        return sd->host;
    case ACL_MEM_LOCATION_TYPE_MANAGED:
        return sd->rec != NULL && sd->rec->kind == MEM_REC_MANAGED;
    default:
        return false;
    }
}

/* Validates a batch (cudaMemcpyBatchAsync-style: attrs[k] applies to copies
 * attrsIndexes[k] .. attrsIndexes[k+1]-1) and builds the op. */
static aclError batch_build(const char *fn, void **dsts, size_t *destMaxs, void **srcs, size_t *sizes,
                            size_t numBatches, aclrtMemcpyBatchAttr *attrs, size_t *attrsIndexes, size_t numAttrs,
                            size_t *failIndex, bool need_fail, copy_op **out)
{
    if (need_fail && failIndex == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'failIndex' is NULL");
    }
    if (failIndex != NULL) {
        *failIndex = SIZE_MAX;
    }
    if (dsts == NULL || destMaxs == NULL || srcs == NULL || sizes == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL",
                          dsts == NULL ? "dsts" : destMaxs == NULL ? "destMaxs" : srcs == NULL ? "srcs" : "sizes");
    }
    if (numBatches == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'numBatches' is 0");
    }
    if (attrs == NULL || attrsIndexes == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", attrs == NULL ? "attrs" : "attrsIndexes");
    }
    aclError vrc = mem_check_batch_indexes(fn, attrsIndexes, numAttrs, numBatches, "attrsIndexes", "numAttrs",
                                           "numBatches");
    if (vrc != ACL_SUCCESS) {
        return vrc;
    }
    MOCK_ENTER(fn);
    mock_context *ctx;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    copy_op *o = op_new(OP_BATCH);
    if (o == NULL) {
        return no_mem(fn);
    }
    o->dsts = calloc(numBatches, sizeof(void *));
    o->srcs = calloc(numBatches, sizeof(void *));
    o->sizes = calloc(numBatches, sizeof(size_t));
    o->bd = calloc(numBatches, sizeof(side));
    o->bs = calloc(numBatches, sizeof(side));
    if (!o->dsts || !o->srcs || !o->sizes || !o->bd || !o->bs) {
        op_destroy(o);
        return no_mem(fn);
    }
    size_t k = 0;
    for (size_t i = 0; i < numBatches; i++) {
        while (k + 1 < numAttrs && attrsIndexes[k + 1] <= i) {
            k++;
        }
        rc = ACL_SUCCESS;
        if (sizes[i] == 0) {
            rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "sizes[%zu] is 0", i);
        } else if (dsts[i] == NULL || srcs[i] == NULL) {
            rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "%s[%zu] is NULL", dsts[i] == NULL ? "dsts" : "srcs", i);
        } else if (sizes[i] > destMaxs[i]) {
            rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "sizes[%zu] (%zu) exceeds destMaxs[%zu] (%zu)", i, sizes[i],
                            i, destMaxs[i]);
        } else {
            rc = classify(fn, "dsts[i]", dsts[i], sizes[i], true, &o->bd[i]);
            if (rc == ACL_SUCCESS) {
                rc = classify(fn, "srcs[i]", srcs[i], sizes[i], false, &o->bs[i]);
            }
            if (rc == ACL_SUCCESS) {
                int eff;
                rc = check_kind(fn, &o->bd[i], &o->bs[i], &eff);
            }
            if (rc == ACL_SUCCESS && (!loc_matches(&attrs[k].dstLoc, &o->bd[i]) ||
                                      !loc_matches(&attrs[k].srcLoc, &o->bs[i]))) {
                rc = core_error(fn, ACL_ERROR_RT_INVALID_MEMORY_TYPE,
                                "copy %zu: the locations in attrs[%zu] do not match where dsts/srcs live", i, k);
            }
        }
        o->nb = i + 1; /* sides 0..i hold references */
        if (rc != ACL_SUCCESS) {
            if (failIndex != NULL) {
                *failIndex = i;
            }
            op_destroy(o);
            return rc;
        }
        o->dsts[i] = dsts[i];
        o->srcs[i] = srcs[i];
        o->sizes[i] = sizes[i];
    }
    *out = o;
    return ACL_SUCCESS;
}

static bool batch_pageable(const copy_op *o)
{
    for (size_t i = 0; i < o->nb; i++) {
        if (o->bd[i].rec == NULL || o->bs[i].rec == NULL) {
            return true;
        }
    }
    return false;
}

/* Shared body of the four batch copies: built and checked by batch_build, then run
 * at once (sync) or enqueued on `stream` (async). */
static aclError batch_common(const char *fn, void **dsts, size_t *destMaxs, void **srcs, size_t *sizes,
                             size_t numBatches, aclrtMemcpyBatchAttr *attrs, size_t *attrsIndexes, size_t numAttrs,
                             size_t *failIndex, bool need_fail, bool async, aclrtStream stream)
{
    copy_op *o = NULL;
    aclError rc = async ? ACL_SUCCESS : stream_capture_check(fn, STREAM_CALL_BLOCKING_COPY, NULL, NULL);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = batch_build(fn, dsts, destMaxs, srcs, sizes, numBatches, attrs, attrsIndexes, numAttrs, failIndex,
                              need_fail, &o);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (!async) {
        op_run_on_host(fn, o);
        op_destroy(o);
        return ACL_SUCCESS;
    }
    mock_stream *st;
    rc = stream_resolve(fn, stream, &st);
    if (rc != ACL_SUCCESS) {
        op_destroy(o);
        return rc;
    }
    return op_submit(fn, o, st, batch_pageable(o));
}

aclError aclrtMemcpyBatch(void **dsts, size_t *destMaxs, void **srcs, size_t *sizes, size_t numBatches,
                          aclrtMemcpyBatchAttr *attrs, size_t *attrsIndexes, size_t numAttrs, size_t *failIndex)
{
    return batch_common("aclrtMemcpyBatch", dsts, destMaxs, srcs, sizes, numBatches, attrs, attrsIndexes, numAttrs,
                        failIndex, true, false, NULL);
}

aclError aclrtMemcpyBatchV2(void **dsts, size_t *destMaxs, void **srcs, size_t *sizes, size_t numBatches,
                            aclrtMemcpyBatchAttr *attrs, size_t *attrsIndexes, size_t numAttrs)
{
    return batch_common("aclrtMemcpyBatchV2", dsts, destMaxs, srcs, sizes, numBatches, attrs, attrsIndexes, numAttrs,
                        NULL, false, false, NULL);
}

aclError aclrtMemcpyBatchAsync(void **dsts, size_t *destMaxs, void **srcs, size_t *sizes, size_t numBatches,
                               aclrtMemcpyBatchAttr *attrs, size_t *attrsIndexes, size_t numAttrs, size_t *failIndex,
                               aclrtStream stream)
{
    return batch_common("aclrtMemcpyBatchAsync", dsts, destMaxs, srcs, sizes, numBatches, attrs, attrsIndexes,
                        numAttrs, failIndex, true, true, stream);
}

aclError aclrtMemcpyBatchAsyncV2(void **dsts, size_t *destMaxs, void **srcs, size_t *sizes, size_t numBatches,
                                 aclrtMemcpyBatchAttr *attrs, size_t *attrsIndexes, size_t numAttrs,
                                 aclrtStream stream)
{
    return batch_common("aclrtMemcpyBatchAsyncV2", dsts, destMaxs, srcs, sizes, numBatches, attrs, attrsIndexes,
                        numAttrs, NULL, false, true, stream);
}

/* ----------------------------------------------------------- value ops */

static aclError value_op(const char *fn, int op, void *devAddr, uint64_t value, uint32_t flag, aclrtStream stream)
{
    MOCK_REQUIRE_NONNULL(fn, devAddr);
    if (op == OP_VALUE_WAIT && flag > ACL_STREAM_WAIT_VALUE_NOR) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'flag' %u is not ACL_STREAM_WAIT_VALUE_GEQ/EQ/AND/NOR", flag);
    }
    MOCK_ENTER(fn);
    side d;
    aclError rc = classify(fn, "devAddr", devAddr, sizeof(uint64_t), op == OP_VALUE_WRITE, &d);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (!d.dev) {
        side_drop(&d);
        return core_error(fn, ACL_ERROR_RT_INVALID_MEMORY_TYPE, "argument 'devAddr' %p is not device memory", devAddr);
    }
    mock_stream *st;
    copy_op *o;
    rc = op_prepare(fn, op, &d, NULL, stream, &st, &o);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    o->dst = devAddr;
    o->value = value;
    o->flag = flag;
    return op_submit(fn, o, st, false);
}

aclError aclrtValueWrite(void *devAddr, uint64_t value, uint32_t flag, aclrtStream stream)
{
    /* flag is reserved for write ordering options; the simulator's writes
     * are always fully ordered, so every value is accepted. */
    return value_op("aclrtValueWrite", OP_VALUE_WRITE, devAddr, value, flag, stream);
}

aclError aclrtValueWait(void *devAddr, uint64_t value, uint32_t flag, aclrtStream stream)
{
    return value_op("aclrtValueWait", OP_VALUE_WAIT, devAddr, value, flag, stream);
}
