/*
 * graph/graph_private.h - the objects of the graph subsystem, shared by its
 * files (capture.c, model.c, exec.c, introspect.c, build.c, hooks.c); no file
 * outside src/graph/ includes it. Every function declared here starts with
 * graph_.
 *
 * Locks (core/lock_order.h): MOCK_LOCK_GRAPH (g_graph_mu in model.c) guards
 * everything structural - models, their streams and task lists, captures,
 * bindings, event marks, groups, labels, the handle registries. A model's
 * execution state (runs, activations, record generations, task arguments
 * swapped by an update) is under its own MOCK_LOCK_GRAPH_EXEC (xmu), which may
 * be taken with MOCK_LOCK_GRAPH held. Neither is held while a task runs, and
 * no stream or memory lock is taken under them (streams are resolved and
 * memory touched before or after).
 */
#ifndef MOCK_GRAPH_PRIVATE_H
#define MOCK_GRAPH_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "stream/stream.h"

#define GRAPH_NAME_MAX 512u

typedef struct graph_model graph_model;
typedef struct graph_mstream graph_mstream;
typedef struct graph_task graph_task;
typedef struct graph_group graph_group;
typedef struct graph_label graph_label;
typedef struct graph_label_list graph_label_list;
typedef struct graph_cond graph_cond;

/* Model states (D-GRAPH#7.2, D-MDL). */
enum graph_state {
    GRAPH_NEW,         /* a sub-model made by aclmdlRIAddCondTask, not captured yet */
    GRAPH_CAPTURING,   /* CAPTURE_ACTIVE */
    GRAPH_INVALIDATED, /* CAPTURE_INVALIDATED: End returns 507903 */
    GRAPH_BUILDING,    /* aclmdlRIBuildBegin .. BuildEnd */
    GRAPH_READY,
    GRAPH_UPDATING     /* aclmdlRIUpdate applying edits (no lock held) */
};

/* What a model task does when the model runs. */
enum graph_task_kind {
    GT_OP,            /* a captured stream task (copy, memset, callback, kernel, ...) */
    GT_EDGE_RECORD,   /* a captured event record: a cross-stream edge inside the model */
    GT_EDGE_WAIT,     /* a captured event wait on such a record */
    GT_ACTIVE,        /* aclrtActiveStream */
    GT_SWITCH_STREAM, /* aclrtSwitchStream */
    GT_SWITCH_LABEL,  /* aclrtSwitchLabelByIndex */
    GT_COND           /* aclmdlRIAddCondTask */
};

/* A stream binding (stream_set_binding): what receives the stream's tasks. */
enum graph_bind_kind { BIND_STREAM = 1, BIND_UPDATE = 2 };

struct graph_task {
    uint64_t magic;
    graph_mstream *ms;
    uint32_t seq;   /* aclmdlRITaskGetSeqId: order of recording in the root model */
    int kind;
    int type;       /* aclmdlRITaskType */
    stream_task t;  /* GT_OP; t.fn/t.arg swapped by a task-group update (under xmu) */
    /* events (record / wait / reset): for aclmdlRITaskGetParams */
    aclrtEvent event;
    uint32_t event_flags, op_flag;
    graph_task *rec;          /* GT_EDGE_WAIT: the record it waits for */
    uint64_t rec_gen;         /* GT_EDGE_RECORD: run generation that reached it (xmu) */
    graph_mstream **waiters;  /* GT_EDGE_RECORD: the streams that waited on it (rejoin check) */
    size_t nwaiters;
    /* control tasks */
    graph_mstream *target;    /* GT_ACTIVE, GT_SWITCH_STREAM (true stream) */
    void *left, *right;
    int cond, dtype;
    void *ptr;                /* GT_SWITCH_LABEL index word */
    graph_label_list *list;
    graph_cond *condh;        /* GT_COND */
    int cond_type;
    uint32_t nsub;
    graph_model **subs;
    graph_group *grp;
    bool disabled, pending_disable;
    bool has_pending;
    aclmdlRITaskParams pending;
    void *pending_buf;        /* KERNEL: the staged copy of the host args and cfg `pending` points into */
    void *op_info;
    size_t op_info_size;
    char *ext_info;
};

struct graph_mstream {
    int bind_kind;            /* BIND_STREAM: first member (binding dispatch) */
    uint64_t magic;
    graph_model *m;
    mock_stream *user;        /* the captured / bound stream (built: a reference is held) */
    int32_t user_id;
    uint32_t index;
    uint32_t flag;            /* ACL_MODEL_STREAM_FLAG_HEAD / _DEFAULT */
    graph_task **tasks;
    size_t n, cap;
    bool bound;               /* the user stream's binding points here */
    bool ended;               /* aclmdlRIEndTask / unbound */
    bool user_gone;           /* the user stream was destroyed */
    /* execution (under m->xmu) */
    bool pending, running;
    size_t start;
    bool thread_started;
    pthread_t thread;
};

typedef struct graph_destroy_cb {
    aclrtCallback fn;
    void *user;
} graph_destroy_cb;

struct graph_cond {
    uint64_t magic;
    graph_model *root;
    uint64_t *ptr;            /* 8-byte device word (aclrtMalloc) */
    uint32_t def;
    uint32_t flag;
    bool used;
};

struct graph_model {
    uint64_t magic;
    atomic_int refs;
    uint32_t id;
    int state;
    bool captured;            /* capture model (vs built) */
    graph_model *root;        /* sub-models: the root model; NULL for a root */
    graph_model *parent;
    graph_model **children;
    size_t nchildren;
    char name[GRAPH_NAME_MAX + 1];
    mock_context *ctx;
    int32_t device;
    graph_mstream **streams;
    size_t nstreams, capstreams;
    uint32_t next_seq;
    /* capture */
    int mode;
    pthread_t thread;
    graph_mstream *origin;
    graph_group *grp_recording;
    graph_destroy_cb *cbs;
    size_t ncbs;
    graph_cond **conds;
    size_t nconds;
    /* execution (xmu) */
    mock_mutex xmu;
    pthread_cond_t xcv;
    int pending_runs;         /* ExecuteAsync enqueued, not finished */
    bool running;
    uint64_t gen;
    aclError err;
    atomic_bool stop;
    bool aborted;
    int active;
    bool shutdown;
    mock_stream *exec_stream;
    stream_task *retired;
    size_t nretired, capretired;
};

struct graph_group {
    uint64_t magic;
    graph_model *m;
    graph_mstream *ms;
    size_t start;
    graph_task **tasks;
    size_t n;
    aclError err;
    bool ended;
    bool updating;
};

/* The binding of a stream recording a task-group update. */
typedef struct graph_update {
    int bind_kind; /* BIND_UPDATE */
    graph_group *grp;
    mock_stream *s;
    stream_task *tasks;
    size_t n, cap;
} graph_update;

struct graph_label {
    uint64_t magic;
    int refs;                 /* g_graph */
    bool destroyed;           /* aclrtDestroyLabel (still referenced by a list) */
    graph_mstream *ms;        /* set by aclrtSetLabel */
    size_t pos;
};

struct graph_label_list {
    uint64_t magic;
    int refs;
    bool destroyed;
    graph_label **labels;
    size_t n;
};

/* ------------------------------------------------------------- model.c */

MOCK_HIDDEN void graph_lock(void);
MOCK_HIDDEN void graph_unlock(void);
/* A new model (state given), registered, one reference (the user's). */
MOCK_HIDDEN graph_model *graph_model_new(int state, bool captured, mock_context *ctx, int32_t device);
MOCK_HIDDEN void graph_model_ref(graph_model *m);
MOCK_HIDDEN void graph_model_put(graph_model *m);
/* The live model behind a user handle (g_graph held), or NULL. */
MOCK_HIDDEN graph_model *graph_model_find_locked(const void *handle);
/* Adds a model stream for `s` (g_graph held); NULL when out of memory. */
MOCK_HIDDEN graph_mstream *graph_mstream_add_locked(graph_model *m, mock_stream *s, uint32_t flag);
/* Appends a task of `kind` (g_graph held); NULL when out of memory. Takes t (may be NULL). */
MOCK_HIDDEN graph_task *graph_task_append_locked(graph_mstream *ms, int kind, int type, const stream_task *t);
MOCK_HIDDEN bool graph_task_is_live_locked(const void *handle);
MOCK_HIDDEN graph_mstream *graph_mstream_find_locked(const void *handle);
/* Unlinks a model and everything under it (g_graph held): returns the list of
 * stream tasks to free and the callbacks to run once the lock is dropped. */
MOCK_HIDDEN void graph_model_teardown_locked(graph_model *m);
MOCK_HIDDEN void graph_release_all(void);
MOCK_HIDDEN graph_label *graph_label_find_locked(const void *h);
MOCK_HIDDEN graph_label_list *graph_label_list_find_locked(const void *h);
MOCK_HIDDEN void graph_label_list_put_locked(graph_label_list *l);
MOCK_HIDDEN bool graph_label_register_locked(graph_label *l);
MOCK_HIDDEN bool graph_label_list_register_locked(graph_label_list *l);
MOCK_HIDDEN void graph_label_unregister_locked(graph_label *l);
MOCK_HIDDEN void graph_label_list_unregister_locked(graph_label_list *l);
MOCK_HIDDEN graph_group *graph_group_find_locked(const void *h);
MOCK_HIDDEN bool graph_group_register_locked(graph_group *g);
MOCK_HIDDEN graph_cond *graph_cond_find_locked(const void *h);
MOCK_HIDDEN bool graph_cond_register_locked(graph_cond *c);
/* Frees tasks queued by graph_defer_free_locked once the lock is dropped. */
MOCK_HIDDEN void graph_defer_free_locked(const stream_task *t);
MOCK_HIDDEN void graph_unlock_and_free(void);

/* The model stream a user stream is bound to by aclmdlRIBindStream (g_graph held). */
MOCK_HIDDEN graph_mstream *graph_bound_find_locked(const mock_stream *s);
MOCK_HIDDEN bool graph_bound_add_locked(mock_stream *s, graph_mstream *ms);
MOCK_HIDDEN void graph_bound_remove_locked(const mock_stream *s);

/* ----------------------------------------------------------- capture.c */

MOCK_HIDDEN extern const stream_capture_port graph_port;
/* Invalidates a capture (and its root's) with g_graph held. */
MOCK_HIDDEN void graph_invalidate_locked(graph_model *m);
/* Ends the binding of every stream of a capture (g_graph held). */
MOCK_HIDDEN void graph_unbind_all_locked(graph_model *m);
MOCK_HIDDEN void graph_forget_events_locked(graph_model *m);
MOCK_HIDDEN aclError graph_ctx_sync(mock_context *ctx, int64_t timeout_ms);
MOCK_HIDDEN void graph_stream_destroyed(mock_stream *s);
/* The last task the calling thread recorded in a capture or build (for
 * aclrtCacheLastTask*), or NULL. */
MOCK_HIDDEN graph_task *graph_tls_last_task(void);
MOCK_HIDDEN void graph_tls_set_last_task(graph_task *t);
/* Support rules of the simulated SoC (MRI support matrix, STR). */
MOCK_HIDDEN aclError graph_soc_check(const char *fn, int family);
enum { GRAPH_SOC_CAPTURE, GRAPH_SOC_EDIT, GRAPH_SOC_STREAM_SWITCH };

/* -------------------------------------------------------------- exec.c */

/* Runs a model once on the calling thread (its streams on the model's executor
 * threads). exec_stream: the stream the run belongs to (abort), or NULL;
 * deadline NULL = no limit. Returns the first task error. */
MOCK_HIDDEN aclError graph_run(graph_model *m, mock_stream *exec_stream, const struct timespec *deadline);
/* Stops and joins the executor threads of a model that no longer runs. */
MOCK_HIDDEN void graph_exec_shutdown(graph_model *m);
/* Reads the 8-byte condition word / 4-byte index / compare operands. */
MOCK_HIDDEN uint64_t graph_read_device(const void *p, size_t n);
MOCK_HIDDEN void graph_write_device(void *p, uint64_t v);

#endif /* MOCK_GRAPH_PRIVATE_H */
