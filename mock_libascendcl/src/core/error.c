/*
 * error.c - per-thread last error and recent error message, fault injection.
 *
 * acl_abi.md §5.1: aclGetRecentErrMsg returns *and clears* the most recent error text
 * of the calling thread (process level with "err_msg_mode":"1" in the aclInit JSON);
 * the pointer stays valid until the thread's next call. With no message recorded it
 * returns NULL (the documented "failure" result). aclrtGetLastError(ACL_RT_THREAD_LEVEL)
 * returns and clears the thread's last error code, aclrtPeekAtLastError returns it
 * without clearing.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "core/core_private.h"

#define MSG_MAX 1024

static __thread aclError t_last_error;
static __thread bool t_has_msg;
static __thread char t_msg[MSG_MAX];
static __thread char t_ret[MSG_MAX];

/* Process-level message mode (err_msg_mode = 1). */
static atomic_bool g_process_mode;
static mock_mutex g_proc_lock = MOCK_MUTEX_INIT(MOCK_LOCK_ERROR_PROCESS);
static bool g_proc_has_msg;
static char g_proc_msg[MSG_MAX];

void core_error_set_process_mode(bool process_level)
{
    atomic_store(&g_process_mode, process_level);
}

aclError core_error_v(const char *func, aclError code, const char *fmt, va_list ap)
{
    char text[MSG_MAX];
    int n = snprintf(text, sizeof text, "%s", func ? func : "acl");
    if (fmt != NULL && fmt[0] != '\0' && n >= 0 && (size_t)n < sizeof text - 2) {
        text[n++] = ':';
        text[n++] = ' ';
        vsnprintf(text + n, sizeof text - (size_t)n, fmt, ap);
    }
    t_last_error = code;
    if (atomic_load_explicit(&g_process_mode, memory_order_relaxed)) {
        core_mutex_lock(&g_proc_lock);
        memcpy(g_proc_msg, text, sizeof text);
        g_proc_has_msg = true;
        core_mutex_unlock(&g_proc_lock);
    } else {
        memcpy(t_msg, text, sizeof text);
        t_has_msg = true;
    }
    /* the device log (src/diag) keeps every recorded error */
    core_obs o = {0};
    o.kind = CORE_OBS_ERROR;
    o.device = -1;
    o.rc = code;
    o.func = func;
    o.text = text;
    (void)core_observe(&o);
    return code;
}

aclError core_error(const char *func, aclError code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    aclError rc = core_error_v(func, code, fmt, ap);
    va_end(ap);
    return rc;
}

aclError aclmockSetError(const char *func, aclError code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    aclError rc = core_error_v(func, code, fmt, ap);
    va_end(ap);
    return rc;
}

const char *aclGetRecentErrMsg(void)
{
    if (atomic_load_explicit(&g_process_mode, memory_order_relaxed)) {
        bool have;
        core_mutex_lock(&g_proc_lock);
        have = g_proc_has_msg;
        if (have) {
            memcpy(t_ret, g_proc_msg, sizeof t_ret);
            g_proc_has_msg = false;
        }
        core_mutex_unlock(&g_proc_lock);
        if (have) {
            return t_ret;
        }
        /* fall through: a message recorded while in thread mode */
    }
    if (!t_has_msg) {
        return NULL;
    }
    memcpy(t_ret, t_msg, sizeof t_ret);
    t_has_msg = false;
    return t_ret;
}

aclError aclrtGetLastError(aclrtLastErrLevel level)
{
    if ((int)level != (int)ACL_RT_THREAD_LEVEL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    aclError e = t_last_error;
    t_last_error = ACL_SUCCESS;
    return e;
}

aclError aclrtPeekAtLastError(aclrtLastErrLevel level)
{
    if ((int)level != (int)ACL_RT_THREAD_LEVEL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    return t_last_error;
}

/* ------------------------------------------------------------ fault injection */

typedef struct fault_slot {
    bool used;       /* slot holds a fault (armed or spent) */
    bool armed;      /* still able to fire */
    char func[CORE_FUNC_NAME_MAX];
    uint32_t nth;    /* 0 = always */
    uint32_t calls;  /* calls seen since armed */
    uint32_t hits;   /* times it fired */
    aclError code;
} fault_slot;

static mock_mutex g_fault_lock = MOCK_MUTEX_INIT(MOCK_LOCK_FAULTS);
static fault_slot g_slots[CORE_MAX_FAULTS];
/* Number of armed (not yet spent) faults, plus FAULTS_ENV_PENDING until
 * ASCEND_MOCK_FAULTS has been read: the fast path reads only this, so the first
 * call of any entry point takes the slow path once and loads the environment
 * lazily (a program may setenv() before its first ACL call). */
#define FAULTS_ENV_PENDING (1 << 30)
static atomic_int g_armed = FAULTS_ENV_PENDING;
static pthread_once_t g_fault_once = PTHREAD_ONCE_INIT;

/* Caller holds g_fault_lock. */
static aclError arm_locked(const char *func, uint32_t nth, aclError code)
{
    fault_slot *free_slot = NULL;
    for (size_t i = 0; i < CORE_MAX_FAULTS; i++) {
        fault_slot *s = &g_slots[i];
        if (s->used && strcmp(s->func, func) == 0) {
            free_slot = s;
            break;
        }
        if (!s->used && free_slot == NULL) {
            free_slot = s;
        }
    }
    if (free_slot == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (!free_slot->armed) {
        atomic_fetch_add(&g_armed, 1);
    }
    free_slot->used = true;
    free_slot->armed = true;
    snprintf(free_slot->func, sizeof free_slot->func, "%s", func);
    free_slot->nth = nth;
    free_slot->calls = 0;
    free_slot->hits = 0;
    free_slot->code = code;
    return ACL_SUCCESS;
}

static void load_env_faults(void)
{
    size_t n = 0;
    const core_fault_spec *specs = core_config_faults(&n);
    core_mutex_lock(&g_fault_lock);
    for (size_t i = 0; i < n; i++) {
        (void)arm_locked(specs[i].func, specs[i].nth, specs[i].code);
    }
    atomic_fetch_sub(&g_armed, FAULTS_ENV_PENDING);
    core_mutex_unlock(&g_fault_lock);
}

aclError core_fault_check(const char *func)
{
    core_gate_pass(func); /* a closed snapshot gate holds resource-changing calls (gate.c) */
    if (atomic_load_explicit(&g_armed, memory_order_relaxed) == 0) {
        return ACL_SUCCESS;
    }
    /* first call (environment not read yet), or a fault is armed */
    pthread_once(&g_fault_once, load_env_faults);
    aclError code = ACL_SUCCESS;
    uint32_t call_no = 0;
    core_mutex_lock(&g_fault_lock);
    for (size_t i = 0; i < CORE_MAX_FAULTS; i++) {
        fault_slot *s = &g_slots[i];
        if (!s->armed || strcmp(s->func, func) != 0) {
            continue;
        }
        s->calls++;
        if (s->nth == 0 || s->calls == s->nth) {
            s->hits++;
            code = s->code;
            call_no = s->calls;
            if (s->nth != 0) {
                /* one-shot fault spent: disarm, keep the hit count visible */
                s->armed = false;
                atomic_fetch_sub(&g_armed, 1);
            }
        }
        break;
    }
    core_mutex_unlock(&g_fault_lock);
    if (code != ACL_SUCCESS) {
        return core_error(func, code, "injected fault (call %u) via aclmock/ASCEND_MOCK_FAULTS",
                          call_no);
    }
    return ACL_SUCCESS;
}

aclError aclmockInjectFault(const char *func, uint32_t nth, aclError code)
{
    pthread_once(&g_fault_once, load_env_faults);
    if (func == NULL || func[0] == '\0' || strlen(func) >= CORE_FUNC_NAME_MAX || code == 0) {
        return ACL_ERROR_INVALID_PARAM;
    }
    core_mutex_lock(&g_fault_lock);
    aclError rc = arm_locked(func, nth, code);
    core_mutex_unlock(&g_fault_lock);
    return rc;
}

void aclmockClearFaults(void)
{
    pthread_once(&g_fault_once, load_env_faults);
    core_mutex_lock(&g_fault_lock);
    memset(g_slots, 0, sizeof g_slots);
    atomic_store(&g_armed, 0);
    core_mutex_unlock(&g_fault_lock);
}

uint32_t aclmockGetFaultHits(const char *func)
{
    if (func == NULL) {
        return 0;
    }
    pthread_once(&g_fault_once, load_env_faults);
    uint32_t hits = 0;
    core_mutex_lock(&g_fault_lock);
    for (size_t i = 0; i < CORE_MAX_FAULTS; i++) {
        if (g_slots[i].used && strcmp(g_slots[i].func, func) == 0) {
            hits = g_slots[i].hits;
            break;
        }
    }
    core_mutex_unlock(&g_fault_lock);
    return hits;
}
