/*
 * diag/diag_private.h - glue between the files of the diagnostics subsystem
 * (config.c, task.c, timing.c, sanitize.c, prof.c, trace.c, dump.c, devlog.c,
 * op.c, api.c, hooks.c); no file outside src/diag/ includes it. Every function
 * declared here starts with diag_.
 *
 * Locks (core/lock_order.h): MOCK_LOCK_DIAG_STATE guards the model of the streams
 * (timing and sanitizer state, the task infos of reports); MOCK_LOCK_DIAG_PROF the
 * profiler's collection and subscriptions; MOCK_LOCK_DIAG_DUMP the dump writer;
 * MOCK_LOCK_DIAG_LOG the device log (taken under any lock: errors are recorded
 * anywhere). The first three are never held together.
 */
#ifndef MOCK_DIAG_PRIVATE_H
#define MOCK_DIAG_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "diag/diag.h"

/* ------------------------------------------------------------------ config.c */

enum { DIAG_TIMING_REAL = 0, DIAG_TIMING_VIRTUAL = 1, DIAG_TIMING_PACED = 2 };
enum { DIAG_SANITIZE_OFF = 0, DIAG_SANITIZE_REPORT = 1, DIAG_SANITIZE_FAIL = 2, DIAG_SANITIZE_ABORT = 3 };

/* The numbers of the timing model (README "Timing model"); bandwidths in GB/s
 * (1 GB/s = 1 byte/ns), times in ns of modeled time. */
typedef struct diag_model {
    double h2d_gbps;      /* pinned host -> device over PCIe            */
    double d2h_gbps;      /* device -> pinned host over PCIe            */
    double pageable_gbps; /* either direction with pageable host memory */
    double hbm_gbps;      /* device memory (a D2D copy moves bytes twice) */
    double peer_gbps;     /* device -> device over the device link      */
    double host_gbps;     /* host -> host (the CPU)                     */
    uint64_t latency_ns;  /* fixed cost of every copy, memset, kernel   */
    uint64_t kernel_ns;   /* a kernel that declares no cost             */
    uint64_t launch_ns;   /* host time of one asynchronous call         */
    uint64_t sync_ns;     /* host time of a synchronization that waited */
    uint64_t malloc_ns;   /* host time of one allocation                */
    uint64_t free_ns;     /* host time of one free                      */
    uint32_t compute_lanes; /* kernels that may run at once on a device */
    double pace;          /* paced mode: wall time = pace x modeled time */
} diag_model;

typedef struct diag_config {
    int timing;                   /* DIAG_TIMING_*: ASCEND_MOCK_TIMING        */
    diag_model model;             /* SoC defaults + ASCEND_MOCK_TIMING_MODEL  */
    int sanitize;                 /* DIAG_SANITIZE_*: ASCEND_MOCK_SANITIZE    */
    bool prof_env;                /* ASCEND_PROFILER_FLAGS=enable            */
    char prof_dir[4096];          /* ASCEND_PROFILER_OUTPUT (default ".")    */
    uint64_t prof_start_step;     /* ASCEND_PROFILER_START_STEP (default 0)  */
    uint64_t prof_stop_step;      /* ASCEND_PROFILER_STOP_STEP (0 = never)   */
    int log_level;                /* ASCEND_GLOBAL_LOG_LEVEL (default 3)     */
    bool log_console;             /* ASCEND_LOG_PRINT_TO_STDOUT=1 (or the deprecated SLOG one) */
    char log_dir[4096];           /* ASCEND_PROCESS_LOG_PATH > ASCEND_WORK_PATH/log, "" = none */
} diag_config;

/* Read once (pthread_once, no lock taken; bad values print one line on stderr and
 * fall back), at the first aclInit or the first call that needs it. */
MOCK_HIDDEN const diag_config *diag_config_get(void);
/* The timing model of a SoC name (the defaults before overrides). */
MOCK_HIDDEN void diag_model_defaults(const char *soc, diag_model *out);
/* mkdir -p; 0 or an errno. */
MOCK_HIDDEN int diag_make_dirs(const char *path);
/* Wall clock (CLOCK_MONOTONIC) ns since the diagnostics epoch (first config read). */
MOCK_HIDDEN uint64_t diag_wall_ns(void);
/* Name of a task kind / link for traces and summaries ("copy_h2d", "kernel", ...). */
MOCK_HIDDEN const char *diag_kind_name(int kind, int link);

/* -------------------------------------------------------------------- task.c */

/* The diagnostics record of one observed task (what CORE_OBS_TASK_SUBMIT returns). */
typedef struct diag_event_node diag_event_node;
typedef struct diag_dump_job diag_dump_job;

typedef struct diag_task {
    uint64_t id;            /* process-wide task number, from 1 */
    mock_stream *stream;
    int32_t device;
    int32_t stream_id;
    bool stream_default;
    mock_task_kind kind;
    mock_link link;
    bool pageable;
    int32_t peer;
    uint64_t bytes;
    uint64_t cost_ns;
    char name[64];
    char *tag;              /* aclmockSetNextTaskTag, malloc'd, or NULL */
    uint64_t step;          /* profiler step at submission */
    /* timing model (DIAG_STATE) */
    bool timed;
    bool deferred;          /* scheduled by the worker (after a host callback) */
    bool scheduled;
    uint64_t submit_vt, start_vt, end_vt;
    diag_event_node *dep;   /* EVENT_WAIT: the record waited for (a reference) */
    diag_event_node *node;  /* EVENT_RECORD: this record (a reference) */
    uint64_t real_begin;    /* diag_wall_ns at the start (callbacks, real-time profile) */
    /* consumers */
    bool profile;           /* goes into the running profile */
    bool subscribed;        /* reported to op-info subscriptions */
    aclError fail;          /* race sanitizer, fail mode: do not run, fail with this */
    void *cb_vc;            /* host callbacks: the stream's clock at submission (owned) */
    uint32_t cb_pid, cb_t;  /* ... and the callback task's epoch */
    diag_dump_job *dump;    /* dump writer job, or NULL */
} diag_task;

/* The observe hook (hooks.c registers it). */
MOCK_HIDDEN void *diag_observe(core_obs *o);
/* Consumes the calling thread's pending tag (aclmockSetNextTaskTag): malloc'd or NULL. */
MOCK_HIDDEN char *diag_take_tag(void);
MOCK_HIDDEN void diag_set_tag(const char *tag);
/* Task numbers of host operations and tasks come from one counter. */
MOCK_HIDDEN uint64_t diag_next_task_id(void);
/* The calling thread's small host-thread number (trace tracks), from 1. */
MOCK_HIDDEN uint32_t diag_host_tid(void);

/* ------------------------------------------------------------------ timing.c */
/* Everything here runs under MOCK_LOCK_DIAG_STATE (diag_state_lock) unless said. */

MOCK_HIDDEN void diag_state_lock(void);
MOCK_HIDDEN void diag_state_unlock(void);

/* The per-stream state kept by the diagnostics (timing + sanitizer). */
typedef struct diag_stream diag_stream;
/* Finds or creates the state of `s` (NULL when out of memory). */
MOCK_HIDDEN diag_stream *diag_stream_get(mock_stream *s, int32_t device, int32_t id);
MOCK_HIDDEN void diag_stream_forget(mock_stream *s);
/* Calls fn for every known stream of ctx (ctx NULL: every stream). */
MOCK_HIDDEN void diag_streams_each(mock_context *ctx, void (*fn)(diag_stream *ds, void *arg), void *arg);
MOCK_HIDDEN uint32_t diag_stream_pid(const diag_stream *ds);
MOCK_HIDDEN void *diag_stream_vc(diag_stream *ds); /* sanitizer's vector clock (sanitize.c type) */

/* The latest record of an event (timing: its modeled time; sanitizer: its clock). */
struct diag_event_node {
    int refs;
    bool resolved;          /* the modeled time is known */
    uint64_t vt;
    void *vc;               /* sanitizer: the recording stream's clock (owned) */
};
/* The node of the latest record of `event` (NULL: never recorded), referenced. */
MOCK_HIDDEN diag_event_node *diag_event_latest(const void *event);
/* A new node as the latest record of `event`, referenced once for the caller. */
MOCK_HIDDEN diag_event_node *diag_event_record(const void *event);
MOCK_HIDDEN void diag_event_put(diag_event_node *n);
/* Forgets every stream and event (aclFinalize). */
MOCK_HIDDEN void diag_state_reset(void);

/* Timing model entry points (timing mode != REAL). */
MOCK_HIDDEN void diag_timing_submit(diag_task *t, diag_stream *ds);
/* No lock held: schedules a deferred task, then (paced) sleeps until it starts. */
MOCK_HIDDEN void diag_timing_begin(diag_task *t);
/* No lock held: the end of a task (host callbacks: their real duration; paced: sleep). */
MOCK_HIDDEN void diag_timing_end(diag_task *t, bool skipped);
/* A task the stream refused: undoes what submit counted. */
MOCK_HIDDEN void diag_timing_drop(diag_task *t);
/* Host side, no lock held. */
MOCK_HIDDEN void diag_timing_host_op(const mock_task_desc *d, int32_t device, uint64_t *start, uint64_t *end);
MOCK_HIDDEN void diag_timing_host_cost(uint64_t cost_ns, uint64_t *start, uint64_t *end);
MOCK_HIDDEN void diag_timing_sync_stream(mock_stream *s);
MOCK_HIDDEN void diag_timing_sync_event(const void *event);
MOCK_HIDDEN void diag_timing_sync_context(mock_context *ctx);
/* The calling thread's modeled time (virtual, paced) or diag_wall_ns (real). */
MOCK_HIDDEN uint64_t diag_host_now(void);
/* Modeled end of everything submitted to `s` so far (0 if nothing). */
MOCK_HIDDEN uint64_t diag_timing_stream_end(mock_stream *s);
/* Duration in ns of a task of this description under the model. */
MOCK_HIDDEN uint64_t diag_timing_duration(const diag_model *m, mock_task_kind kind, mock_link link, bool pageable,
                                          uint64_t bytes, uint64_t cost_ns);

/* ---------------------------------------------------------------- sanitize.c */

/* A report waiting to be emitted (built under DIAG_STATE, emitted after it). */
typedef struct diag_report diag_report;
MOCK_HIDDEN bool diag_sanitizing(void);
/* Under DIAG_STATE: the task's accesses are checked and recorded; reports are
 * appended to *out (emit them with diag_sanitize_emit after unlocking). */
MOCK_HIDDEN void diag_sanitize_task(diag_task *t, diag_stream *ds, const mock_task_desc *d, diag_report **out);
MOCK_HIDDEN void diag_sanitize_host(uint64_t task_id, const char *name, const char *tag, int32_t device,
                                    const mock_access *acc, size_t n, diag_report **out);
MOCK_HIDDEN void diag_sanitize_free(const void *ptr, size_t size, bool host_pinned, const char *tag,
                                    diag_report **out);
MOCK_HIDDEN void diag_sanitize_alloc(const void *ptr, size_t size);
/* On the worker running host callback t / after it: the thread acts as that task. */
MOCK_HIDDEN void diag_sanitize_callback_enter(diag_task *t);
MOCK_HIDDEN void diag_sanitize_callback_leave(void);
MOCK_HIDDEN void diag_sanitize_sync_stream(diag_stream *ds);
MOCK_HIDDEN void diag_sanitize_sync_node(diag_event_node *n);
MOCK_HIDDEN void *diag_vc_new(void);
MOCK_HIDDEN void diag_vc_free(void *vc);
MOCK_HIDDEN void diag_sanitize_reset(void);
/* No lock held: prints, stores and logs the reports, frees the list; returns how many. */
MOCK_HIDDEN size_t diag_sanitize_emit(diag_report *list);

/* -------------------------------------------------------------------- prof.c */

/* The small record of a profiled task kept in the stream's ring (core_obs.inline_rec):
 * the cheap path when nothing but the profiler needs the task. */
typedef struct diag_fast_rec {
    uint64_t id;
    uint64_t bytes;
    uint64_t start;
    uint64_t step;
    char *tag;
    uint8_t kind;
    uint8_t link;
    uint8_t stream_default;
    uint8_t pad;
    char name[52];
} diag_fast_rec;
_Static_assert(sizeof(diag_fast_rec) <= CORE_OBS_INLINE_BYTES, "diag_fast_rec outgrew the inline record");

/* Lock-free: does the running collection take the tasks of `device`? */
MOCK_HIDDEN bool diag_prof_wants_device(int32_t device);
MOCK_HIDDEN bool diag_prof_wants(const diag_task *t);
MOCK_HIDDEN void diag_prof_fast(const diag_fast_rec *f, int32_t device, int32_t stream_id, uint64_t end_ns,
                                aclError rc);
MOCK_HIDDEN bool diag_prof_subscribed(void);
MOCK_HIDDEN uint64_t diag_prof_step(void);
MOCK_HIDDEN void diag_prof_task(const diag_task *t, uint64_t start_ns, uint64_t end_ns, aclError rc);
/* A host-side span or instant (end == start) on the calling thread's track. */
MOCK_HIDDEN void diag_prof_host(const char *name, const char *cat, uint64_t start_ns, uint64_t end_ns, uint64_t bytes,
                                const char *tag);
MOCK_HIDDEN void diag_prof_subscription_task(const diag_task *t, uint64_t start_ns, uint64_t end_ns);
/* Env profiling (ASCEND_PROFILER_*): started by aclInit, written at aclFinalize/exit. */
MOCK_HIDDEN void diag_prof_env_start(void);
MOCK_HIDDEN void diag_prof_finalize(void);
/* aclFinalize / exit: every op-info subscription ends (flushed, pipe closed). */
MOCK_HIDDEN void diag_prof_subscriptions_end(void);

/* ------------------------------------------------------------------- trace.c */

/* One finished entry of a profile. */
typedef struct diag_prof_rec {
    uint64_t id;
    uint64_t start_ns, end_ns;
    uint64_t bytes;
    uint64_t step;
    int32_t device;     /* -1: host track */
    int32_t stream_id;  /* stream id, or the host thread number */
    uint8_t kind;       /* mock_task_kind, or MOCK_TASK_KIND_COUNT for a host event */
    uint8_t link;
    uint8_t instant;
    uint8_t stream_default;
    aclError rc;
    const char *cat;    /* a static string: the kind's name, or the host event's */
    char *tag;
    char name[64];
} diag_prof_rec;

/* Writes trace.json, summary.json, kind_summary.csv and stream_summary.csv into dir
 * (created); 0 or an errno. `timing` is the mode name. */
MOCK_HIDDEN int diag_trace_write(const char *dir, const diag_prof_rec *recs, size_t n, const char *timing,
                                 uint64_t first_step, uint64_t last_step);

/* -------------------------------------------------------------------- dump.c */

/* A job for a kernel launch that matches the dump config (NULL: none). */
MOCK_HIDDEN diag_dump_job *diag_dump_plan(const diag_task *t, const mock_task_desc *d);
MOCK_HIDDEN void diag_dump_inputs(diag_task *t);
MOCK_HIDDEN void diag_dump_outputs(diag_task *t, aclError rc);
MOCK_HIDDEN void diag_dump_free(diag_dump_job *job);
MOCK_HIDDEN void diag_dump_finalize(void);

/* ------------------------------------------------------------------ devlog.c */

enum { DIAG_LOG_DEBUG = 0, DIAG_LOG_INFO = 1, DIAG_LOG_WARNING = 2, DIAG_LOG_ERROR = 3 };
/* Appends one entry to the log of `device` (-1 = the host / process log), and to the
 * log files or the console when asked. Takes MOCK_LOCK_DIAG_LOG only. */
MOCK_HIDDEN void diag_log(int32_t device, int level, const char *func, aclError code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The device of the calling thread's work: its stream worker's, else its current
 * context's, else -1. */
MOCK_HIDDEN int32_t diag_current_device(void);
/* Process exit: closes the log files. */
MOCK_HIDDEN void diag_log_close(void);

#endif /* MOCK_DIAG_PRIVATE_H */
