/*
 * run.c - running a kernel launch on the stream worker: the task object (kernel.h),
 * its placeholder device memory, the buffers held open while the twin runs, the blocks
 * (in order on the worker, or on a small pool when the twin declares them
 * independent), and faults.
 *
 * A fault never takes the process down (README "Kernels and host twins"):
 *   - a pointer argument the twin declares (ACLMOCK_PTR_*) must be NULL or device
 *     memory the launching device can reach; otherwise the launch faults before any
 *     block runs, naming the argument;
 *   - the buffers the kernel was given (declared pointer arguments, or for a twin
 *     without a parameter description every 8-byte slot of its first 1 KiB of
 *     arguments that points into device memory, plus its placeholder data) are held
 *     open while it runs: an aclrtFree meanwhile cannot unmap them, and under
 *     ASCEND_MOCK_ISOLATION=1 they are the only device pages the twin can touch;
 *   - a twin that touches an unmapped or protected page (freed device memory, the
 *     reserved space around allocations, any other allocation under isolation)
 *     raises SIGSEGV/SIGBUS (or SIGFPE/SIGILL for a bad instruction) on the thread
 *     running it; the mock's handler, installed at the first launch and chaining to
 *     the previous handler for every fault that is not in a twin, jumps back
 *     (siglongjmp) to the block loop, on an alternate signal stack so that a stack
 *     overflow is caught too;
 *   - a nonzero return of the twin is a fault too.
 * A fault fails the task with the exception code of the kernel type (AI Core / Cube /
 * Mix 507015, Vector 507035, AI CPU 507018; a twin may return a 5xxxxx code itself),
 * stops the blocks not started yet, and leaves a core_task_detail for the stream (the
 * text of the synchronize error) and the exception callbacks (the binary's callback,
 * then the process ones; aclrtGetArgsFromExceptionInfo / GetFuncHandleFromExceptionInfo).
 * What a faulting twin leaves behind (a lock it held, memory it allocated) cannot be
 * undone: twins must be plain computations on their buffers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "kernel/kernel.h"
#include "kernel/kernel_private.h"

#define SCAN_SLOTS 128u /* slots scanned for pointers when the parameters are unknown */
#define MAX_HOLDS (ACLMOCK_MAX_PARAMS + 4u)
#define POOL_MAX 7u
#define ALT_STACK_SIZE (64u * 1024u)

/* ======================================================== the task object */

bool kernel_task_is(mock_task_fn fn)
{
    return fn == kernel_task_run;
}

void kernel_task_free(void *task)
{
    kernel_launch *l = task;
    if (l == NULL) {
        return;
    }
    mem_runtime_free(l->ph_dev);
    free(l->ph_slots);
    free(l->hint);
    free(l->args);
    kernel_twin_put(l->twin);
    kernel_binary_put(l->bin);
    free(l);
}

static size_t round8(size_t v)
{
    return (v + 7u) & ~(size_t)7u;
}

aclError kernel_launch_placeholders(const char *fn, kernel_launch *l, const kernel_ph *ph, size_t nph)
{
    if (nph == 0) {
        return ACL_SUCCESS;
    }
    size_t total = 0;
    for (size_t i = 0; i < nph; i++) {
        if (ph[i].slot + 8u > l->args_size) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "placeholder slot at offset %u is outside the arguments",
                              ph[i].slot);
        }
        total += round8(ph[i].size ? ph[i].size : 1);
    }
    l->ph_slots = calloc(nph, sizeof *l->ph_slots);
    if (l->ph_slots == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    void *dev = NULL;
    aclError rc = mem_runtime_alloc(fn, l->device, total, &dev);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* G-REC#aclrtLaunchKernelWithHostArgs: the data goes to the device at launch and its
     * device address into the slot */
    l->ph_dev = dev;
    l->ph_size = total;
    mem_access_begin(dev, total);
    size_t off = 0;
    for (size_t i = 0; i < nph; i++) {
        uint8_t *dst = (uint8_t *)dev + off;
        memcpy(dst, ph[i].data, ph[i].size);
        memcpy(l->args + ph[i].slot, &dst, sizeof dst);
        l->ph_slots[i] = ph[i].slot;
        off += round8(ph[i].size ? ph[i].size : 1);
    }
    mem_access_end(dev, total);
    l->nph = nph;
    return ACL_SUCCESS;
}

void *kernel_task_clone(const void *task)
{
    const kernel_launch *src = task;
    kernel_launch *l = malloc(sizeof *l);
    if (l == NULL) {
        return NULL;
    }
    *l = *src;
    l->args = NULL;
    l->ph_dev = NULL;
    l->ph_slots = NULL;
    if (src->args != NULL) {
        l->args = malloc(src->args_size ? src->args_size : 1);
        if (l->args == NULL) {
            free(l);
            return NULL;
        }
        memcpy(l->args, src->args, src->args_size);
    }
    kernel_binary_ref(l->bin);
    kernel_twin_ref(l->twin);
    if (src->nph == 0) {
        return l;
    }
    l->ph_slots = malloc(src->nph * sizeof *l->ph_slots);
    void *dev = NULL;
    if (l->ph_slots == NULL || mem_runtime_alloc("aclmdlRICaptureEnd", l->device, src->ph_size, &dev) != ACL_SUCCESS) {
        kernel_task_free(l);
        return NULL;
    }
    memcpy(l->ph_slots, src->ph_slots, src->nph * sizeof *l->ph_slots);
    l->ph_dev = dev;
    mem_access_begin(src->ph_dev, src->ph_size);
    mem_access_begin(dev, src->ph_size);
    memcpy(dev, src->ph_dev, src->ph_size);
    mem_access_end(dev, src->ph_size);
    mem_access_end(src->ph_dev, src->ph_size);
    for (size_t i = 0; i < src->nph; i++) {
        uintptr_t old = 0;
        memcpy(&old, l->args + l->ph_slots[i], sizeof old);
        uintptr_t moved = old - (uintptr_t)src->ph_dev + (uintptr_t)dev;
        memcpy(l->args + l->ph_slots[i], &moved, sizeof moved);
    }
    return l;
}

void kernel_task_get_params(const void *task, aclmdlRIKernelTaskParams *out)
{
    const kernel_launch *l = task;
    memset(out, 0, sizeof *out);
    out->funcHandle = l->func;
    out->cfg = NULL;
    out->args = l->args != NULL ? (void *)l->args : l->args_dev;
    out->isHostArgs = l->args != NULL ? 1u : 0u;
    out->argsSize = l->args_size;
    out->numBlocks = l->num_blocks;
}

aclError kernel_task_set_params(const char *fn, void *task, const aclmdlRIKernelTaskParams *p)
{
    kernel_launch *l = task;
    if (p->funcHandle != NULL && p->funcHandle != (void *)l->func) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "the function of a kernel task cannot change");
    }
    if (p->numBlocks > 65535u) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "numBlocks %u is larger than 65535", p->numBlocks);
    }
    if (p->args != NULL) {
        if (p->argsSize < l->twin->params_min || p->argsSize > ((size_t)1 << 30)) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "argsSize %zu does not fit kernel '%.100s'", p->argsSize,
                              l->twin->name);
        }
        if (p->isHostArgs) {
            uint8_t *copy = malloc(p->argsSize ? p->argsSize : 1);
            if (copy == NULL) {
                return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
            }
            memcpy(copy, p->args, p->argsSize);
            free(l->args);
            l->args = copy;
            l->args_dev = NULL;
        } else {
            free(l->args);
            l->args = NULL;
            l->args_dev = p->args;
        }
        l->args_size = p->argsSize;
        /* the new block has no placeholders of ours */
        free(l->ph_slots);
        l->ph_slots = NULL;
        l->nph = 0;
    }
    if (p->numBlocks != 0 && p->numBlocks != l->num_blocks) {
        l->num_blocks = p->numBlocks; /* a SIMT grid becomes (numBlocks, 1, 1) */
        l->grid[0] = p->numBlocks;
        l->grid[1] = l->grid[2] = 1;
    }
    return ACL_SUCCESS;
}

/* ================================================================ faults */

/* One armed block: where the handler jumps back to. */
typedef struct fault_frame {
    sigjmp_buf env;
    volatile sig_atomic_t armed;
    volatile int sig;
    void *volatile addr;
} fault_frame;

/* The armed frames by thread id, in a global table the handler reads without touching
 * thread-local storage (the library may be dlopen'ed, and dynamic TLS can allocate on
 * first use, which a signal handler must not do; the initial-exec model would put all
 * of the library's TLS into the scarce static TLS block). Open addressing from
 * tid % ARMED_SLOTS; a thread finding no free slot runs its block unprotected. */
#define ARMED_SLOTS 1024u
typedef struct armed_slot {
    _Atomic pid_t tid; /* 0 = free */
    fault_frame *_Atomic frame;
} armed_slot;
static armed_slot g_armed[ARMED_SLOTS];
static atomic_int g_armed_count;
static _Thread_local pid_t t_tid;

static int arm(fault_frame *f)
{
    if (t_tid == 0) {
        t_tid = (pid_t)syscall(SYS_gettid);
    }
    for (size_t k = 0; k < ARMED_SLOTS; k++) {
        size_t i = ((size_t)t_tid + k) % ARMED_SLOTS;
        pid_t free_tid = 0;
        if (atomic_compare_exchange_strong(&g_armed[i].tid, &free_tid, t_tid)) {
            atomic_store(&g_armed[i].frame, f);
            atomic_fetch_add(&g_armed_count, 1);
            return (int)i;
        }
    }
    return -1;
}

static void disarm(int slot)
{
    if (slot >= 0) {
        atomic_store(&g_armed[slot].frame, NULL);
        atomic_store(&g_armed[slot].tid, 0);
        atomic_fetch_sub(&g_armed_count, 1);
    }
}

/* The frame armed by the calling thread, or NULL (async-signal-safe). */
static fault_frame *armed_frame(void)
{
    if (atomic_load(&g_armed_count) == 0) {
        return NULL;
    }
    pid_t tid = (pid_t)syscall(SYS_gettid);
    for (size_t k = 0; k < ARMED_SLOTS; k++) {
        size_t i = ((size_t)tid + k) % ARMED_SLOTS;
        if (atomic_load(&g_armed[i].tid) == tid) {
            return atomic_load(&g_armed[i].frame);
        }
    }
    return NULL;
}

static const int k_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#define NSIGNALS (sizeof k_signals / sizeof k_signals[0])
/* the handlers found when ours was installed (written under kernel_mu) */
static struct sigaction g_prev[NSIGNALS];
static pthread_once_t g_sig_once = PTHREAD_ONCE_INIT;

static void fault_handler(int sig, siginfo_t *si, void *uc);

static int sig_index(int sig)
{
    for (size_t i = 0; i < NSIGNALS; i++) {
        if (k_signals[i] == sig) {
            return (int)i;
        }
    }
    return 0;
}

/* Not a twin's fault: what would have happened without the mock. */
static void chain(int sig, siginfo_t *si, void *uc)
{
    const struct sigaction *p = &g_prev[sig_index(sig)];
    if ((p->sa_flags & SA_SIGINFO) != 0 && p->sa_sigaction != NULL) {
        p->sa_sigaction(sig, si, uc);
        return;
    }
    if ((p->sa_flags & SA_SIGINFO) == 0 && p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
        p->sa_handler(sig);
        return;
    }
    /* default action: restore it; returning re-runs the faulting instruction */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
}

static void fault_handler(int sig, siginfo_t *si, void *uc)
{
    fault_frame *f = armed_frame();
    if (f != NULL && f->armed) {
        f->armed = 0;
        f->sig = sig;
        f->addr = si != NULL ? si->si_addr : NULL;
        siglongjmp(f->env, 1);
    }
    chain(sig, si, uc);
}

/* Installs the handler for one signal, keeping the one it replaces (kernel_mu held). */
static void install_locked(size_t i)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(k_signals[i], &sa, &old) == 0 && old.sa_sigaction != fault_handler) {
        g_prev[i] = old;
    }
}

static void install_once(void)
{
    core_mutex_lock(&kernel_mu);
    for (size_t i = 0; i < NSIGNALS; i++) {
        install_locked(i);
    }
    core_mutex_unlock(&kernel_mu);
}

/* The handlers are in place: installed at the first launch, and put back (chaining to
 * the newcomer) when the program replaced one since. */
static void ensure_handlers(void)
{
    pthread_once(&g_sig_once, install_once);
    for (size_t i = 0; i < 2; i++) { /* SIGSEGV and SIGBUS: the ones a bad access raises */
        struct sigaction cur;
        if (sigaction(k_signals[i], NULL, &cur) == 0 && cur.sa_sigaction != fault_handler) {
            core_mutex_lock(&kernel_mu);
            install_locked(i);
            core_mutex_unlock(&kernel_mu);
        }
    }
}

/* A thread's alternate signal stack (so that a twin overflowing its stack is caught),
 * unless it has one (sanitizer runtimes install their own). */
static pthread_key_t g_alt_key;
static pthread_once_t g_alt_once = PTHREAD_ONCE_INIT;
static bool g_alt_key_ok;
static __thread bool t_alt_checked;

static void alt_free(void *p)
{
    stack_t off;
    memset(&off, 0, sizeof off);
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, NULL);
    munmap(p, ALT_STACK_SIZE);
}

static void alt_key_init(void)
{
    g_alt_key_ok = pthread_key_create(&g_alt_key, alt_free) == 0;
}

static void ensure_altstack(void)
{
    if (t_alt_checked) {
        return;
    }
    t_alt_checked = true;
    pthread_once(&g_alt_once, alt_key_init);
    stack_t cur;
    if (!g_alt_key_ok || sigaltstack(NULL, &cur) != 0 || (cur.ss_flags & SS_DISABLE) == 0) {
        return;
    }
    void *mem = mmap(NULL, ALT_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        return;
    }
    stack_t st;
    memset(&st, 0, sizeof st);
    st.ss_sp = mem;
    st.ss_size = ALT_STACK_SIZE;
    if (sigaltstack(&st, NULL) != 0 || pthread_setspecific(g_alt_key, mem) != 0) {
        alt_free(mem);
    }
}

/* ================================================================ blocks */

/* What one launch's blocks share while they run. */
typedef struct run_ctx {
    const kernel_launch *l;
    void *args;
    size_t args_size;
    /* the first fault (the thread that sets `failed` writes the rest) */
    atomic_bool failed;
    uint32_t fault_block;
    int32_t fault_rc; /* the twin's return value, or 0 for a signal */
    int fault_sig;
    void *fault_addr;
} run_ctx;

/* The block the calling thread runs (aclmockKernelGetLaunchInfo). */
static _Thread_local const run_ctx *t_run;
static _Thread_local uint32_t t_block;

/* Runs one block with the fault frame armed; records a fault in c. */
static void run_block(run_ctx *c, uint32_t idx)
{
    const kernel_launch *l = c->l;
    fault_frame fr;
    fr.armed = 0;
    fr.sig = 0;
    fr.addr = NULL;
    t_run = c;
    t_block = l->block_offset + idx;
    volatile int32_t rc = 0;
    volatile int slot = arm(&fr);
    if (sigsetjmp(fr.env, 1) == 0) {
        fr.armed = 1;
        rc = l->twin->desc.fn(c->args, l->block_offset + idx, l->block_offset + l->num_blocks, l->twin->desc.userData);
        fr.armed = 0;
    }
    disarm(slot);
    t_run = NULL;
    if ((fr.sig != 0 || rc != 0) && !atomic_exchange(&c->failed, true)) {
        c->fault_block = idx;
        c->fault_rc = rc;
        c->fault_sig = fr.sig;
        c->fault_addr = fr.addr;
    }
}

/* ------------------------------------------------------------ the pool */

typedef struct block_job {
    run_ctx *ctx;
    uint32_t n;
    atomic_uint next;
    atomic_uint done;
    int active; /* pool threads working on it (g_pool_mu) */
    struct block_job *link;
} block_job;

static mock_mutex g_pool_mu = MOCK_MUTEX_INIT(MOCK_LOCK_KERNEL_POOL);
static pthread_cond_t g_pool_cv; /* work for the pool threads */
static pthread_cond_t g_done_cv; /* a pool thread left a job */
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;
static block_job *g_jobs;
static pthread_t g_threads[POOL_MAX];
static size_t g_nthreads;
static bool g_pool_stop;

static void pool_cv_init(void)
{
    core_cond_init(&g_pool_cv);
    core_cond_init(&g_done_cv);
}

/* Takes blocks of j until none is left. */
static void job_work(block_job *j)
{
    for (;;) {
        uint32_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n) {
            break;
        }
        if (!atomic_load(&j->ctx->failed)) {
            run_block(j->ctx, i);
        }
        atomic_fetch_add(&j->done, 1);
    }
}

static void *pool_main(void *arg)
{
    (void)arg;
    ensure_altstack();
    core_mutex_lock(&g_pool_mu);
    while (!g_pool_stop) {
        block_job *j = g_jobs;
        while (j != NULL && atomic_load(&j->next) >= j->n) {
            j = j->link;
        }
        if (j == NULL) {
            core_cond_wait(&g_pool_cv, &g_pool_mu);
            continue;
        }
        j->active++;
        core_mutex_unlock(&g_pool_mu);
        core_lock_check_none("running kernel blocks");
        job_work(j);
        core_mutex_lock(&g_pool_mu);
        if (--j->active == 0) {
            pthread_cond_broadcast(&g_done_cv);
        }
    }
    core_mutex_unlock(&g_pool_mu);
    return NULL;
}

/* Starts the pool threads if there are none (g_pool_mu held); the number of them. */
static size_t pool_start_locked(void)
{
    if (g_nthreads == 0 && !g_pool_stop) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        size_t want = cpus > 1 ? (size_t)cpus - 1 : 1;
        want = want > POOL_MAX ? POOL_MAX : want;
        while (g_nthreads < want && pthread_create(&g_threads[g_nthreads], NULL, pool_main, NULL) == 0) {
            g_nthreads++;
        }
    }
    return g_nthreads;
}

/* Runs the blocks of c on the pool and on the calling thread. */
static void run_pool(run_ctx *c, uint32_t n)
{
    pthread_once(&g_pool_once, pool_cv_init);
    block_job j;
    j.ctx = c;
    j.n = n;
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    j.active = 0;
    core_mutex_lock(&g_pool_mu);
    bool pooled = pool_start_locked() > 0;
    if (pooled) {
        j.link = g_jobs;
        g_jobs = &j;
        pthread_cond_broadcast(&g_pool_cv);
    }
    core_mutex_unlock(&g_pool_mu);
    job_work(&j);
    if (!pooled) {
        return;
    }
    core_mutex_lock(&g_pool_mu);
    while (j.active > 0 || atomic_load(&j.done) < n) {
        core_cond_wait(&g_done_cv, &g_pool_mu);
    }
    block_job **pp = &g_jobs;
    while (*pp != &j) {
        pp = &(*pp)->link;
    }
    *pp = j.link;
    core_mutex_unlock(&g_pool_mu);
}

void kernel_pool_finalize(void)
{
    pthread_once(&g_pool_once, pool_cv_init);
    core_mutex_lock(&g_pool_mu);
    g_pool_stop = true;
    size_t n = g_nthreads;
    pthread_cond_broadcast(&g_pool_cv);
    core_mutex_unlock(&g_pool_mu);
    for (size_t i = 0; i < n; i++) {
        pthread_join(g_threads[i], NULL);
    }
    core_mutex_lock(&g_pool_mu);
    g_nthreads = 0;
    g_pool_stop = false;
    core_mutex_unlock(&g_pool_mu);
}

/* ============================================================ the run */

typedef struct hold_set {
    mem_hold *h[MAX_HOLDS];
    size_t n;
} hold_set;

/* Opens a hold on ptr unless one of hs covers it already; NULL `why` on success. */
static bool hold_add(hold_set *hs, const void *ptr, int32_t device, bool writable, const char **why)
{
    for (size_t i = 0; i < hs->n; i++) {
        uintptr_t base;
        size_t size;
        mem_hold_range(hs->h[i], &base, &size);
        if ((uintptr_t)ptr >= base && (uintptr_t)ptr - base < size && !writable) {
            return true;
        }
    }
    if (hs->n == MAX_HOLDS) {
        return true; /* enough: the rest is not held open (isolation may fault) */
    }
    mem_hold *h = mem_hold_open(ptr, device, writable, why);
    if (h == NULL) {
        return false;
    }
    hs->h[hs->n++] = h;
    return true;
}

static void holds_close(hold_set *hs)
{
    for (size_t i = hs->n; i-- > 0;) {
        mem_hold_close(hs->h[i]);
    }
    hs->n = 0;
}

/* The per-thread detail of the last failed run (core_task_detail), valid until the
 * stream worker runs the next task. */
static _Thread_local core_task_detail t_detail;
static _Thread_local char t_msg[256];

static aclError type_code(int32_t type, bool timeout)
{
    switch (type) {
    case ACL_KERNEL_TYPE_VECTOR: return timeout ? ACL_ERROR_RT_VECTOR_CORE_TIMEOUT : ACL_ERROR_RT_VECTOR_CORE_EXCEPTION;
    case ACL_KERNEL_TYPE_AICPU: return timeout ? ACL_ERROR_RT_AICPU_TIMEOUT : ACL_ERROR_RT_AICPU_EXCEPTION;
    default: return timeout ? ACL_ERROR_RT_AICORE_TIMEOUT : ACL_ERROR_RT_AICORE_EXCEPTION;
    }
}

static const char *sig_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    default: return "SIGILL";
    }
}

/* Fails the task: its detail for the stream and the exception callbacks. */
static aclError fail(const kernel_launch *l, void *args, size_t args_size, aclError code)
{
    core_mutex_lock(&kernel_mu);
    t_detail.callback = l->bin->cb;
    t_detail.callback_data = l->bin->cb_data;
    core_mutex_unlock(&kernel_mu);
    t_detail.func = l->func;
    t_detail.args = args;
    t_detail.args_size = (uint32_t)(args_size > UINT32_MAX ? UINT32_MAX : args_size);
    t_detail.message = t_msg;
    core_task_set_detail(&t_detail);
    return code;
}

/* A declared extent of pointer argument i (at p, in device memory) must end inside p's
 * allocation; false (t_msg says why) otherwise. */
static bool extent_fits(const kernel_launch *l, const uint8_t *block, uint32_t i, void *p)
{
    const kernel_twin *t = l->twin;
    uint64_t bytes = 0;
    mock_mem_info mi;
    if (!kernel_twin_extent(t, block, l->args_size, i, &bytes) || !mem_lookup(p, &mi)) {
        return true; /* none declared, or memory the hold accepted without an allocation of ours */
    }
    uint64_t left = (uint64_t)(mi.base + mi.size - (uintptr_t)p);
    if (bytes <= left) {
        return true;
    }
    snprintf(t_msg, sizeof t_msg,
             "kernel '%.100s': argument %u (%p) declares an extent of %llu bytes, but its allocation ends %llu bytes "
             "after it", t->name, i, p, (unsigned long long)bytes, (unsigned long long)left);
    return false;
}

/* Holds the argument block and the buffers it points to; false (t_msg says why) when a
 * declared pointer argument is not memory the kernel may touch. */
static bool open_buffers(const kernel_launch *l, hold_set *hs, void **args)
{
    const kernel_twin *t = l->twin;
    const char *why = NULL;
    *args = l->args;
    if (l->args_dev != NULL) {
        if (!hold_add(hs, l->args_dev, l->device, false, &why)) {
            snprintf(t_msg, sizeof t_msg, "kernel '%.100s': its argument block at %p %s", t->name, l->args_dev, why);
            return false;
        }
        *args = l->args_dev;
    }
    if (l->ph_dev != NULL && !hold_add(hs, l->ph_dev, l->device, true, &why)) {
        snprintf(t_msg, sizeof t_msg, "kernel '%.100s': its placeholder data %s", t->name, why);
        return false;
    }
    const uint8_t *block = *args;
    if (t->desc.numParams != ACLMOCK_PARAMS_UNKNOWN) {
        for (uint32_t i = 0; i < t->desc.numParams; i++) {
            if (t->params[i].access == ACLMOCK_ACCESS_VALUE) {
                continue;
            }
            void *p = NULL;
            memcpy(&p, block + t->offsets[i], sizeof p);
            if (p != NULL && !hold_add(hs, p, l->device, (t->params[i].access & ACLMOCK_ACCESS_WRITE) != 0, &why)) {
                snprintf(t_msg, sizeof t_msg, "kernel '%.100s': argument %u (%p) %s", t->name, i, p, why);
                return false;
            }
            if (p != NULL && !extent_fits(l, block, i, p)) {
                return false;
            }
        }
        return true;
    }
    for (size_t off = 0; off + 8 <= l->args_size && off < SCAN_SLOTS * 8u; off += 8) {
        void *p = NULL;
        memcpy(&p, block + off, sizeof p);
        if ((uintptr_t)p >= 4096u) {
            /* read access: a read-only mapping stays read-only; anything that is not
             * memory of the device is not ours to judge */
            (void)hold_add(hs, p, l->device, false, &why);
        }
    }
    return true;
}

aclError kernel_task_run(void *task)
{
    kernel_launch *l = task;
    const kernel_twin *t = l->twin;
    int32_t type = kernel_func_type(l->func, t);
    ensure_handlers();
    ensure_altstack();
    hold_set hs;
    hs.n = 0;
    void *args = NULL;
    if (!open_buffers(l, &hs, &args)) {
        holds_close(&hs);
        return fail(l, args, l->args_size, type_code(type, false));
    }
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.l = l;
    c.args = args;
    c.args_size = l->args_size;
    atomic_init(&c.failed, false);
    uint64_t start = core_now_ns();
    core_lock_check_none("running a kernel twin");
    if ((t->desc.flags & ACLMOCK_KERNEL_BLOCKS_INDEPENDENT) != 0 && l->num_blocks > 1) {
        run_pool(&c, l->num_blocks);
    } else {
        for (uint32_t i = 0; i < l->num_blocks && !atomic_load(&c.failed); i++) {
            run_block(&c, i);
        }
    }
    uint64_t elapsed_us = (core_now_ns() - start) / 1000u;
    holds_close(&hs);
    mem_device_written();
    if (atomic_load(&c.failed)) {
        if (c.fault_sig != 0) {
            snprintf(t_msg, sizeof t_msg,
                     "kernel '%.100s' faulted in block %u: %s at address %p (memory outside the buffers it was given)",
                     t->name, c.fault_block, sig_name(c.fault_sig), c.fault_addr);
            return fail(l, args, l->args_size, type_code(type, false));
        }
        snprintf(t_msg, sizeof t_msg, "kernel '%.100s' faulted in block %u: its twin returned %d", t->name, c.fault_block,
                 c.fault_rc);
        bool own_code = c.fault_rc >= 500000 && c.fault_rc < 600000;
        return fail(l, args, l->args_size, own_code ? (aclError)c.fault_rc : type_code(type, false));
    }
    if (l->timeout_us != 0 && elapsed_us > l->timeout_us) {
        /* ST#aclrtLaunchKernelAttrValue TIMEOUT/TIMEOUT_US: the host code cannot be
         * stopped, so the mock reports the timeout when the twin returns late */
        snprintf(t_msg, sizeof t_msg, "kernel '%.100s' ran %llu us, longer than its timeout of %llu us", t->name,
                 (unsigned long long)elapsed_us, (unsigned long long)l->timeout_us);
        return fail(l, args, l->args_size, type_code(type, true));
    }
    return ACL_SUCCESS;
}

/* ================================================================ aclmock */

int32_t aclmockKernelGetLaunchInfo(aclmockKernelLaunchInfo *info)
{
    const run_ctx *c = t_run;
    if (info == NULL || c == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    const kernel_launch *l = c->l;
    memset(info, 0, sizeof *info);
    info->name = l->twin->name;
    info->blockIdx = t_block;
    info->numBlocks = l->block_offset + l->num_blocks;
    memcpy(info->gridDim, l->grid, sizeof info->gridDim);
    memcpy(info->blockDim, l->block, sizeof info->blockDim);
    info->dynUbufSize = l->dyn_ubuf;
    info->device = l->device;
    info->stream = l->stream;
    info->args = c->args;
    info->argsSize = c->args_size;
    return ACL_SUCCESS;
}
