/*
 * devlog.c - the device log (README "Device log"): a bounded log per device and
 * one for the host (CANN's plog), of errors (every error an API call records),
 * device resets, task failures (exceptions, with the task and stream), timeouts,
 * injected faults and race sanitizer reports. Kept in memory for aclmockGetDeviceLog
 * (the last 1024 entries of each), and written in CANN's log layout when asked:
 *
 *   ASCEND_PROCESS_LOG_PATH (else $ASCEND_WORK_PATH/log) set:
 *     <dir>/debug/plog/plog-<pid>_<time>.log              host entries
 *     <dir>/debug/device-<id>/device-<pid>_<time>.log     entries of device <id>
 *   ASCEND_LOG_PRINT_TO_STDOUT=1: printed instead (on stderr, like aclAppLog)
 *
 * Files and console get the entries at or above ASCEND_GLOBAL_LOG_LEVEL (default
 * error; 4 = none). Every line: [LEVEL] RUNTIME(pid,program):date-time.ms.us
 * [device N]tid function: message (error code).
 * MOCK_LOCK_DIAG_LOG may be taken under any other lock (errors are recorded
 * anywhere); nothing else is taken under it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "diag/diag_private.h"

#define LOG_CAP 1024u
#define LOG_RINGS (MOCK_MAX_DEVICES + 1) /* [0] host, [1 + d] device d */

typedef struct log_entry {
    uint64_t seq;
    struct timespec when;
    int level;
    int32_t device;
    aclError code;
    long tid;
    char func[48];
    char text[384];
} log_entry;

typedef struct ring {
    log_entry *v; /* LOG_CAP entries, allocated at the first one */
    uint64_t total; /* entries ever added */
    FILE *file;
    bool file_failed;
} ring;

static mock_mutex g_log_mu = MOCK_MUTEX_INIT(MOCK_LOCK_DIAG_LOG);
static ring g_rings[LOG_RINGS];
static uint64_t g_seq;
static char g_stamp[64]; /* the process's log file time stamp */

static const char *const k_level[] = {"DEBUG", "INFO", "WARNING", "ERROR"};

static ring *ring_of(int32_t device)
{
    if (device < 0 || device >= MOCK_MAX_DEVICES) {
        return &g_rings[0];
    }
    return &g_rings[1 + device];
}

static void format_line(char *buf, size_t len, const log_entry *e)
{
    struct tm tm;
    localtime_r(&e->when.tv_sec, &tm);
    char dev[24];
    if (e->device >= 0) {
        snprintf(dev, sizeof dev, "device %d", e->device);
    } else {
        snprintf(dev, sizeof dev, "host");
    }
    char code[32] = "";
    if (e->code != 0) {
        snprintf(code, sizeof code, " (error %d)", e->code);
    }
    snprintf(buf, len, "[%s] RUNTIME(%ld,%s):%04d-%02d-%02d-%02d:%02d:%02d.%03ld.%03ld [%s]%ld %s: %s%s\n",
             k_level[e->level], (long)getpid(), program_invocation_short_name, tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, e->when.tv_nsec / 1000000L, (e->when.tv_nsec / 1000L) % 1000L,
             dev, e->tid, e->func[0] ? e->func : "runtime", e->text, code);
}

/* g_log_mu held: the log file of a ring, opened at its first line. */
static FILE *file_of_locked(ring *r, int32_t device, const char *dir)
{
    if (r->file != NULL || r->file_failed) {
        return r->file;
    }
    if (g_stamp[0] == '\0') {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        snprintf(g_stamp, sizeof g_stamp, "%04d%02d%02d%02d%02d%02d%03ld", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L);
    }
    char folder[4200], path[4400];
    if (device < 0) {
        snprintf(folder, sizeof folder, "%s/debug/plog", dir);
        snprintf(path, sizeof path, "%s/plog-%ld_%s.log", folder, (long)getpid(), g_stamp);
    } else {
        snprintf(folder, sizeof folder, "%s/debug/device-%d", dir, device);
        snprintf(path, sizeof path, "%s/device-%ld_%s.log", folder, (long)getpid(), g_stamp);
    }
    int err = diag_make_dirs(folder);
    r->file = err == 0 ? fopen(path, "a") : NULL;
    if (r->file == NULL) {
        r->file_failed = true; /* said once, then the log stays in memory only */
        fprintf(stderr, "mock_libascendcl: cannot write the device log '%s': %s\n", path,
                strerror(err != 0 ? err : errno));
    }
    return r->file;
}

void diag_log(int32_t device, int level, const char *func, aclError code, const char *fmt, ...)
{
    const diag_config *c = diag_config_get();
    log_entry e;
    memset(&e, 0, sizeof e);
    clock_gettime(CLOCK_REALTIME, &e.when);
    e.level = level < 0 ? 0 : level > 3 ? 3 : level;
    e.device = device >= 0 && device < MOCK_MAX_DEVICES ? device : -1;
    e.code = code;
    e.tid = (long)syscall(SYS_gettid);
    snprintf(e.func, sizeof e.func, "%s", func != NULL ? func : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.text, sizeof e.text, fmt, ap);
    va_end(ap);
    bool out = c->log_level < 4 && e.level >= c->log_level && (c->log_console || c->log_dir[0] != '\0');
    char line[640];
    if (out) {
        format_line(line, sizeof line, &e);
    }
    core_mutex_lock(&g_log_mu);
    ring *r = ring_of(e.device);
    if (r->v == NULL) {
        r->v = calloc(LOG_CAP, sizeof *r->v);
    }
    e.seq = ++g_seq;
    if (r->v != NULL) {
        r->v[r->total % LOG_CAP] = e;
        r->total++;
    }
    if (out && !c->log_console) {
        FILE *f = file_of_locked(r, e.device, c->log_dir);
        if (f != NULL) {
            fputs(line, f);
            fflush(f);
        }
    }
    core_mutex_unlock(&g_log_mu);
    if (out && c->log_console) {
        fputs(line, stderr); /* one call: lines of concurrent threads do not mix */
    }
}

/* ------------------------------------------------------------------ the API */

/* Appends the kept entries of ring r (oldest first) with seq in (after, ...) into a
 * snprintf-style buffer. */
typedef struct textbuf {
    char *buf;
    size_t len;
    size_t need;
} textbuf;

static void put_line(textbuf *t, const log_entry *e)
{
    char line[640];
    format_line(line, sizeof line, e);
    size_t n = strlen(line);
    if (t->need + 1 < t->len) {
        size_t room = t->len - 1 - t->need;
        memcpy(t->buf + t->need, line, n < room ? n : room);
    }
    t->need += n;
}

static size_t kept(const ring *r)
{
    return r->v == NULL ? 0 : (size_t)(r->total < LOG_CAP ? r->total : LOG_CAP);
}

static const log_entry *kept_at(const ring *r, size_t i) /* i-th oldest kept entry */
{
    uint64_t start = r->total < LOG_CAP ? 0 : r->total - LOG_CAP;
    return &r->v[(start + i) % LOG_CAP];
}

int aclmockGetDeviceLog(int32_t device, char *buf, size_t len)
{
    if (device < ACLMOCK_LOG_HOST || device >= MOCK_MAX_DEVICES || (buf == NULL && len > 0)) {
        return -1;
    }
    textbuf t = {buf, len, 0};
    core_mutex_lock(&g_log_mu);
    if (device == ACLMOCK_LOG_ALL) {
        /* merge the rings by sequence number */
        size_t pos[LOG_RINGS] = {0};
        for (;;) {
            int best = -1;
            uint64_t seq = UINT64_MAX;
            for (int k = 0; k < LOG_RINGS; k++) {
                if (pos[k] < kept(&g_rings[k]) && kept_at(&g_rings[k], pos[k])->seq < seq) {
                    seq = kept_at(&g_rings[k], pos[k])->seq;
                    best = k;
                }
            }
            if (best < 0) {
                break;
            }
            put_line(&t, kept_at(&g_rings[best], pos[best]++));
        }
    } else {
        const ring *r = device == ACLMOCK_LOG_HOST ? &g_rings[0] : &g_rings[1 + device];
        for (size_t i = 0; i < kept(r); i++) {
            put_line(&t, kept_at(r, i));
        }
    }
    core_mutex_unlock(&g_log_mu);
    if (len > 0) {
        buf[t.need < len ? t.need : len - 1] = '\0';
    }
    return (int)t.need;
}

uint64_t aclmockGetDeviceLogCount(int32_t device)
{
    if (device < ACLMOCK_LOG_HOST || device >= MOCK_MAX_DEVICES) {
        return 0;
    }
    uint64_t n = 0;
    core_mutex_lock(&g_log_mu);
    if (device == ACLMOCK_LOG_ALL) {
        for (int k = 0; k < LOG_RINGS; k++) {
            n += kept(&g_rings[k]);
        }
    } else {
        n = kept(device == ACLMOCK_LOG_HOST ? &g_rings[0] : &g_rings[1 + device]);
    }
    core_mutex_unlock(&g_log_mu);
    return n;
}

void aclmockClearDeviceLog(void)
{
    core_mutex_lock(&g_log_mu);
    for (int k = 0; k < LOG_RINGS; k++) {
        g_rings[k].total = 0;
    }
    core_mutex_unlock(&g_log_mu);
}

/* Process exit: the log files are closed. */
void diag_log_close(void)
{
    core_mutex_lock(&g_log_mu);
    for (int k = 0; k < LOG_RINGS; k++) {
        if (g_rings[k].file != NULL) {
            fclose(g_rings[k].file);
            g_rings[k].file = NULL;
        }
    }
    core_mutex_unlock(&g_log_mu);
}
