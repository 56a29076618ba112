/*
 * model.c - model run instances (aclmdlRI) as objects: the registries of
 * models, model streams, tasks, groups, labels and condition handles (all
 * under g_graph), creation and teardown, and the management entry points
 * (aclmdlRIDestroy, names, ids, destroy callbacks, debug prints, the op-info
 * attached to captured tasks). MRI#aclmdlRI*, acl_next_semantics.md §2.9.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "stream/stream.h"
#include "graph/graph.h"
#include "graph/graph_private.h"

#define MODEL_MAGIC 0x4d4f44454c524931ull /* "MODELRI1" */
#define MSTREAM_MAGIC 0x4d53545245414d31ull
#define TASK_MAGIC 0x4752415048544b31ull

static mock_mutex g_graph_mu = MOCK_MUTEX_INIT(MOCK_LOCK_GRAPH);
static mock_registry g_models = MOCK_REGISTRY_EMPTY;
static mock_registry g_tasks = MOCK_REGISTRY_EMPTY;
static mock_registry g_mstreams = MOCK_REGISTRY_EMPTY;
static mock_registry g_groups = MOCK_REGISTRY_EMPTY;
static mock_registry g_labels = MOCK_REGISTRY_EMPTY;
static mock_registry g_lists = MOCK_REGISTRY_EMPTY;
static mock_registry g_conds = MOCK_REGISTRY_EMPTY;
static atomic_uint g_next_id;

/* aclmdlRIBindStream: user stream -> model stream */
typedef struct bound_entry {
    const mock_stream *s;
    graph_mstream *ms;
} bound_entry;
static bound_entry *g_bound;
static size_t g_nbound, g_capbound;

/* Work deferred until g_graph is dropped: task arguments to free, streams to
 * release, condition words to free. */
static stream_task *g_defer;
static size_t g_ndefer, g_capdefer;
static mock_stream **g_defer_streams;
static size_t g_ndefer_streams, g_capdefer_streams;
static void **g_defer_mem;
static size_t g_ndefer_mem, g_capdefer_mem;

static bool grow(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) {
        return true;
    }
    size_t ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) {
        ncap *= 2;
    }
    void *n = realloc(*v, ncap * elem);
    if (n == NULL) {
        return false;
    }
    *v = n;
    *cap = ncap;
    return true;
}

void graph_lock(void)
{
    core_mutex_lock(&g_graph_mu);
}

void graph_unlock(void)
{
    core_mutex_unlock(&g_graph_mu);
}

void graph_defer_free_locked(const stream_task *t)
{
    if (t->free_arg == NULL) {
        return;
    }
    if (!grow((void **)&g_defer, &g_capdefer, g_ndefer + 1, sizeof(*g_defer))) {
        /* out of memory: leak rather than free under the lock */
        return;
    }
    g_defer[g_ndefer++] = *t;
}

static void defer_stream_locked(mock_stream *s)
{
    if (grow((void **)&g_defer_streams, &g_capdefer_streams, g_ndefer_streams + 1, sizeof(*g_defer_streams))) {
        g_defer_streams[g_ndefer_streams++] = s;
    }
}

static void defer_mem_locked(void *p)
{
    if (grow((void **)&g_defer_mem, &g_capdefer_mem, g_ndefer_mem + 1, sizeof(*g_defer_mem))) {
        g_defer_mem[g_ndefer_mem++] = p;
    }
}

void graph_unlock_and_free(void)
{
    stream_task *v = g_defer;
    size_t n = g_ndefer;
    mock_stream **sv = g_defer_streams;
    size_t ns = g_ndefer_streams;
    void **mv = g_defer_mem;
    size_t nm = g_ndefer_mem;
    g_defer = NULL;
    g_ndefer = g_capdefer = 0;
    g_defer_streams = NULL;
    g_ndefer_streams = g_capdefer_streams = 0;
    g_defer_mem = NULL;
    g_ndefer_mem = g_capdefer_mem = 0;
    core_mutex_unlock(&g_graph_mu);
    for (size_t i = 0; i < n; i++) {
        v[i].free_arg(v[i].arg);
    }
    for (size_t i = 0; i < ns; i++) {
        stream_release(sv[i]);
    }
    for (size_t i = 0; i < nm; i++) {
        (void)aclrtFree(mv[i]);
    }
    free(v);
    free(sv);
    free(mv);
}

/* ------------------------------------------------------------ registries */

graph_model *graph_model_find_locked(const void *handle)
{
    graph_model *m = core_registry_find(&g_models, handle);
    return (m != NULL && m->magic == MODEL_MAGIC) ? m : NULL;
}

bool graph_task_is_live_locked(const void *handle)
{
    return core_registry_contains(&g_tasks, handle);
}

graph_mstream *graph_mstream_find_locked(const void *handle)
{
    return core_registry_find(&g_mstreams, handle);
}

graph_group *graph_group_find_locked(const void *h)
{
    return core_registry_find(&g_groups, h);
}

bool graph_group_register_locked(graph_group *g)
{
    return core_registry_insert(&g_groups, g);
}

/* Labels and lists stay registered while referenced (a list keeps its labels,
 * a switch task its list), flagged destroyed once the user destroyed them. */
graph_label *graph_label_find_locked(const void *h)
{
    graph_label *l = core_registry_find(&g_labels, h);
    return (l != NULL && !l->destroyed) ? l : NULL;
}

graph_label_list *graph_label_list_find_locked(const void *h)
{
    graph_label_list *l = core_registry_find(&g_lists, h);
    return (l != NULL && !l->destroyed) ? l : NULL;
}

bool graph_label_register_locked(graph_label *l)
{
    return core_registry_insert(&g_labels, l);
}

bool graph_label_list_register_locked(graph_label_list *l)
{
    return core_registry_insert(&g_lists, l);
}

static void label_put_locked(graph_label *l);

void graph_label_unregister_locked(graph_label *l)
{
    l->destroyed = true;
    label_put_locked(l);
}

void graph_label_list_unregister_locked(graph_label_list *l)
{
    l->destroyed = true;
    graph_label_list_put_locked(l);
}

graph_cond *graph_cond_find_locked(const void *h)
{
    return core_registry_find(&g_conds, h);
}

bool graph_cond_register_locked(graph_cond *c)
{
    return core_registry_insert(&g_conds, c);
}

graph_mstream *graph_bound_find_locked(const mock_stream *s)
{
    for (size_t i = 0; i < g_nbound; i++) {
        if (g_bound[i].s == s) {
            return g_bound[i].ms;
        }
    }
    return NULL;
}

bool graph_bound_add_locked(mock_stream *s, graph_mstream *ms)
{
    if (!grow((void **)&g_bound, &g_capbound, g_nbound + 1, sizeof(*g_bound))) {
        return false;
    }
    g_bound[g_nbound++] = (bound_entry){s, ms};
    return true;
}

void graph_bound_remove_locked(const mock_stream *s)
{
    for (size_t i = 0; i < g_nbound; i++) {
        if (g_bound[i].s == s) {
            g_bound[i] = g_bound[--g_nbound];
            return;
        }
    }
}

/* ---------------------------------------------------------------- models */

graph_model *graph_model_new(int state, bool captured, mock_context *ctx, int32_t device)
{
    graph_model *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    m->magic = MODEL_MAGIC;
    atomic_init(&m->refs, 1);
    m->id = atomic_fetch_add(&g_next_id, 1);
    m->state = state;
    m->captured = captured;
    m->ctx = ctx;
    m->device = device;
    atomic_init(&m->stop, false);
    core_mutex_init(&m->xmu, MOCK_LOCK_GRAPH_EXEC);
    core_cond_init(&m->xcv);
    graph_lock();
    bool ok = core_registry_insert(&g_models, m);
    graph_unlock();
    if (!ok) {
        core_mutex_destroy(&m->xmu);
        pthread_cond_destroy(&m->xcv);
        free(m);
        return NULL;
    }
    return m;
}

void graph_model_ref(graph_model *m)
{
    atomic_fetch_add(&m->refs, 1);
}

void graph_model_put(graph_model *m)
{
    if (atomic_fetch_sub(&m->refs, 1) == 1) {
        core_mutex_destroy(&m->xmu);
        pthread_cond_destroy(&m->xcv);
        free(m->retired);
        m->magic = 0;
        free(m);
    }
}

graph_mstream *graph_mstream_add_locked(graph_model *m, mock_stream *s, uint32_t flag)
{
    if (!grow((void **)&m->streams, &m->capstreams, m->nstreams + 1, sizeof(*m->streams))) {
        return NULL;
    }
    graph_mstream *ms = calloc(1, sizeof(*ms));
    if (ms == NULL) {
        return NULL;
    }
    ms->bind_kind = BIND_STREAM;
    ms->magic = MSTREAM_MAGIC;
    ms->m = m;
    ms->user = s;
    ms->user_id = s != NULL ? stream_id(s) : -1;
    ms->index = (uint32_t)m->nstreams;
    ms->flag = flag;
    if (m->captured && !core_registry_insert(&g_mstreams, ms)) {
        free(ms);
        return NULL;
    }
    m->streams[m->nstreams++] = ms;
    return ms;
}

graph_task *graph_task_append_locked(graph_mstream *ms, int kind, int type, const stream_task *t)
{
    graph_task *gt = NULL;
    if (grow((void **)&ms->tasks, &ms->cap, ms->n + 1, sizeof(*ms->tasks))) {
        gt = calloc(1, sizeof(*gt));
    }
    if (gt != NULL && !core_registry_insert(&g_tasks, gt)) {
        free(gt);
        gt = NULL;
    }
    if (gt == NULL) {
        if (t != NULL) {
            graph_defer_free_locked(t);
        }
        return NULL;
    }
    gt->magic = TASK_MAGIC;
    gt->ms = ms;
    graph_model *root = ms->m->root != NULL ? ms->m->root : ms->m;
    gt->seq = root->next_seq++;
    gt->kind = kind;
    gt->type = type;
    if (t != NULL) {
        gt->t = *t;
    }
    ms->tasks[ms->n++] = gt;
    graph_tls_set_last_task(gt);
    return gt;
}

static void label_put_locked(graph_label *l)
{
    if (--l->refs == 0) {
        core_registry_erase(&g_labels, l);
        l->magic = 0;
        free(l);
    }
}

void graph_label_list_put_locked(graph_label_list *l)
{
    if (--l->refs == 0) {
        for (size_t i = 0; i < l->n; i++) {
            label_put_locked(l->labels[i]);
        }
        free(l->labels);
        core_registry_erase(&g_lists, l);
        l->magic = 0;
        free(l);
    }
}

static void task_free_locked(graph_task *t)
{
    core_registry_erase(&g_tasks, t);
    if (t->kind == GT_OP) {
        graph_defer_free_locked(&t->t);
    }
    if (t->kind == GT_SWITCH_LABEL && t->list != NULL) {
        graph_label_list_put_locked(t->list);
    }
    if (t->kind == GT_COND) {
        for (uint32_t i = 0; i < t->nsub; i++) {
            graph_model_teardown_locked(t->subs[i]);
        }
        free(t->subs);
    }
    free(t->waiters);
    free(t->pending_buf);
    free(t->op_info);
    free(t->ext_info);
    t->magic = 0;
    free(t);
}

/* Everything a model owns goes (g_graph held; its executors are stopped and
 * nothing runs it). Sub-models go with it. The model struct itself goes with
 * its last reference. */
void graph_model_teardown_locked(graph_model *m)
{
    if (graph_model_find_locked(m) == NULL) {
        return;
    }
    core_registry_erase(&g_models, m);
    graph_exec_shutdown(m); /* the executors go first: they point at the model streams */
    graph_unbind_all_locked(m);
    graph_forget_events_locked(m);
    /* labels set on this model's streams are unset (D-MDL#模型销毁流程) */
    for (size_t i = 0; i < g_labels.cap; i++) {
        graph_label *l = core_registry_slot(&g_labels, i);
        if (l != NULL && l->ms != NULL && l->ms->m == m) {
            l->ms = NULL;
        }
    }
    for (size_t i = 0; i < m->nstreams; i++) {
        graph_mstream *ms = m->streams[i];
        for (size_t k = 0; k < ms->n; k++) {
            task_free_locked(ms->tasks[k]);
        }
        free(ms->tasks);
        if (!m->captured) {
            graph_bound_remove_locked(ms->user);
            if (ms->user != NULL) {
                defer_stream_locked(ms->user);
            }
        }
        core_registry_erase(&g_mstreams, ms);
        ms->magic = 0;
        free(ms);
    }
    free(m->streams);
    m->streams = NULL;
    m->nstreams = 0;
    for (size_t i = 0; i < m->nconds; i++) {
        core_registry_erase(&g_conds, m->conds[i]);
        defer_mem_locked(m->conds[i]->ptr);
        m->conds[i]->magic = 0;
        free(m->conds[i]);
    }
    free(m->conds);
    m->conds = NULL;
    m->nconds = 0;
    for (size_t i = 0; i < g_groups.cap; i++) {
        graph_group *g = core_registry_slot(&g_groups, i);
        if (g != NULL && g->m == m) {
            core_registry_erase(&g_groups, g);
            free(g->tasks);
            free(g);
            i = (size_t)-1; /* the table may have been rearranged: rescan */
        }
    }
    if (m->grp_recording != NULL && !m->grp_recording->ended) {
        free(m->grp_recording->tasks);
        free(m->grp_recording);
    }
    m->grp_recording = NULL;
    for (size_t i = 0; i < m->nretired; i++) {
        graph_defer_free_locked(&m->retired[i]);
    }
    m->nretired = 0;
    free(m->children);
    m->children = NULL;
    free(m->cbs);
    m->cbs = NULL;
    graph_model_put(m);
}

/* aclFinalize: every model, label and list still alive goes. */
void graph_release_all(void)
{
    graph_lock();
    for (;;) {
        graph_model *victim = NULL;
        for (size_t i = 0; i < g_models.cap && victim == NULL; i++) {
            graph_model *m = core_registry_slot(&g_models, i);
            if (m != NULL && m->root == NULL) {
                victim = m;
            }
        }
        if (victim == NULL) {
            break;
        }
        graph_model_teardown_locked(victim);
    }
    /* what the user did not destroy (no model references them any more) */
    for (size_t i = 0; i < g_lists.cap; i++) {
        graph_label_list *l = core_registry_slot(&g_lists, i);
        if (l != NULL) {
            free(l->labels);
            free(l);
        }
    }
    core_registry_release(&g_lists);
    for (size_t i = 0; i < g_labels.cap; i++) {
        free(core_registry_slot(&g_labels, i));
    }
    core_registry_release(&g_labels);
    graph_unlock_and_free();
}

/* ------------------------------------------------------------ entry points */

/* The root model behind a user handle, with g_graph held on success. */
static aclError model_get_locked(const char *fn, aclmdlRI handle, graph_model **out)
{
    if (handle == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'modelRI' is NULL");
    }
    graph_lock();
    graph_model *m = graph_model_find_locked(handle);
    if (m == NULL) {
        graph_unlock();
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'modelRI' (%p) is not a live model run instance",
                          handle);
    }
    *out = m;
    return ACL_SUCCESS;
}

aclError aclmdlRIDestroy(aclmdlRI modelRI)
{
    static const char fn[] = "aclmdlRIDestroy";
    MOCK_ENTER(fn);
    graph_model *m = NULL;
    aclError rc = model_get_locked(fn, modelRI, &m);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    if (m->root != NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "a sub-model of a conditional task is freed with its root model (D-GRAPH#子模型资源管理)";
    } else if (m->state == GRAPH_CAPTURING) {
        rc = ACL_ERROR_RT_MODEL_CAPTURED;
        why = "the model is still capturing (end the capture first)";
    } else if (m->state == GRAPH_UPDATING) {
        rc = ACL_ERROR_RT_MODEL_RUNNING;
        why = "aclmdlRIUpdate is applying edits to the model";
    } else {
        core_mutex_lock(&m->xmu);
        bool busy = m->running || m->pending_runs > 0;
        core_mutex_unlock(&m->xmu);
        if (busy) {
            rc = ACL_ERROR_RT_MODEL_RUNNING;
            why = "the model is executing (or an execution is queued)";
        }
    }
    if (rc != ACL_SUCCESS) {
        graph_unlock();
        return core_error(fn, rc, "%s", why);
    }
    graph_destroy_cb *cbs = m->cbs;
    size_t ncbs = m->ncbs;
    m->cbs = NULL;
    m->ncbs = 0;
    graph_model_teardown_locked(m);
    graph_unlock_and_free();
    core_lock_check_none("calling a model destroy callback");
    for (size_t i = 0; i < ncbs; i++) {
        cbs[i].fn(cbs[i].user);
    }
    free(cbs);
    return ACL_SUCCESS;
}

aclError aclmdlRISetName(aclmdlRI modelRI, const char *name)
{
    static const char fn[] = "aclmdlRISetName";
    MOCK_REQUIRE_NONNULL(fn, name);
    MOCK_ENTER(fn);
    graph_model *m = NULL;
    aclError rc = model_get_locked(fn, modelRI, &m);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* The last call wins; longer than 512 bytes is truncated (MRI#aclmdlRISetName). */
    snprintf(m->name, sizeof(m->name), "%s", name);
    graph_unlock();
    return ACL_SUCCESS;
}

aclError aclmdlRIGetName(aclmdlRI modelRI, uint32_t maxLen, char *name)
{
    static const char fn[] = "aclmdlRIGetName";
    MOCK_REQUIRE_NONNULL(fn, name);
    if (maxLen == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'maxLen' is 0");
    }
    MOCK_ENTER(fn);
    graph_model *m = NULL;
    aclError rc = model_get_locked(fn, modelRI, &m);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    size_t len = strlen(m->name);
    if (len + 1 > maxLen) {
        /* mock choice: a buffer too small for the name is an error (never a silent cut) */
        graph_unlock();
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'maxLen' (%u) is smaller than the name (%zu bytes + NUL)",
                          maxLen, len);
    }
    memcpy(name, m->name, len + 1);
    graph_unlock();
    return ACL_SUCCESS;
}

aclError aclmdlRIGetId(aclmdlRI modelRI, uint32_t *modelRIId)
{
    static const char fn[] = "aclmdlRIGetId";
    MOCK_REQUIRE_NONNULL(fn, modelRIId);
    MOCK_ENTER(fn);
    graph_model *m = NULL;
    aclError rc = model_get_locked(fn, modelRI, &m);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *modelRIId = m->id;
    graph_unlock();
    return ACL_SUCCESS;
}

aclError aclmdlRIDestroyRegisterCallback(aclmdlRI modelRI, aclrtCallback func, void *userData)
{
    static const char fn[] = "aclmdlRIDestroyRegisterCallback";
    MOCK_REQUIRE_NONNULL(fn, func);
    MOCK_ENTER(fn);
    graph_model *m = NULL;
    aclError rc = model_get_locked(fn, modelRI, &m);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_destroy_cb *n = realloc(m->cbs, (m->ncbs + 1) * sizeof(*n));
    if (n != NULL) {
        m->cbs = n;
        m->cbs[m->ncbs++] = (graph_destroy_cb){func, userData};
    }
    graph_unlock();
    if (n == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    return ACL_SUCCESS;
}

aclError aclmdlRIDestroyUnregisterCallback(aclmdlRI modelRI, aclrtCallback func)
{
    static const char fn[] = "aclmdlRIDestroyUnregisterCallback";
    MOCK_REQUIRE_NONNULL(fn, func);
    MOCK_ENTER(fn);
    graph_model *m = NULL;
    aclError rc = model_get_locked(fn, modelRI, &m);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    bool found = false;
    for (size_t i = 0; i < m->ncbs; i++) {
        if (m->cbs[i].fn == func) {
            memmove(&m->cbs[i], &m->cbs[i + 1], (m->ncbs - i - 1) * sizeof(*m->cbs));
            m->ncbs--;
            found = true;
            break;
        }
    }
    graph_unlock();
    if (!found) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'func' is not a registered destroy callback");
    }
    return ACL_SUCCESS;
}

static const char *task_kind_name(const graph_task *t)
{
    switch (t->kind) {
    case GT_EDGE_RECORD:
        return "event_record";
    case GT_EDGE_WAIT:
        return "event_wait";
    case GT_ACTIVE:
        return "active_stream";
    case GT_SWITCH_STREAM:
        return "switch_stream";
    case GT_SWITCH_LABEL:
        return "switch_label";
    case GT_COND:
        return "cond";
    default:
        return t->t.ops != NULL ? t->t.ops->kind : "task";
    }
}

aclError aclmdlRIDebugPrint(aclmdlRI modelRI)
{
    static const char fn[] = "aclmdlRIDebugPrint";
    MOCK_ENTER(fn);
    graph_model *m = NULL;
    aclError rc = model_get_locked(fn, modelRI, &m);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (m->state != GRAPH_READY) {
        graph_unlock();
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the model is not complete (call it after CaptureEnd/BuildEnd)");
    }
    fprintf(stderr, "mock_libascendcl: aclmdlRI %u \"%s\" device %d, %zu stream(s)\n", m->id, m->name, m->device,
            m->nstreams);
    for (size_t i = 0; i < m->nstreams; i++) {
        graph_mstream *ms = m->streams[i];
        for (size_t k = 0; k < ms->n; k++) {
            fprintf(stderr, "mock_libascendcl:   stream %zu task %u %s\n", i, ms->tasks[k]->seq,
                    task_kind_name(ms->tasks[k]));
        }
    }
    graph_unlock();
    return ACL_SUCCESS;
}

/* chrome://tracing JSON of the model's streams and tasks (MRI#aclmdlRIDebugJsonPrint):
 * one complete event per task, tid = model stream, ts = task order. `path` is the
 * file to write, or an existing directory (then aclmdlRI_<id>.json inside it). */
aclError aclmdlRIDebugJsonPrint(aclmdlRI modelRI, const char *path, uint32_t flags)
{
    static const char fn[] = "aclmdlRIDebugJsonPrint";
    MOCK_REQUIRE_NONNULL(fn, path);
    if (flags != ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY && flags != ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flags' is %u (expected 0 or 1)", flags);
    }
    MOCK_ENTER(fn);
    char file[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(file, sizeof(file), "%s/aclmdlRI_%u.json", path, modelRI != NULL ? 0u : 0u);
    } else {
        snprintf(file, sizeof(file), "%s", path);
    }
    graph_model *m = NULL;
    aclError rc = model_get_locked(fn, modelRI, &m);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (m->state != GRAPH_READY) {
        graph_unlock();
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the model is not complete (call it after CaptureEnd/BuildEnd)");
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(file, sizeof(file), "%s/aclmdlRI_%u.json", path, m->id);
    }
    FILE *f = fopen(file, "w");
    if (f == NULL) {
        graph_unlock();
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "cannot write '%s'", file);
    }
    fprintf(f, "{\"traceEvents\":[\n");
    bool first = true;
    for (size_t i = 0; i < m->nstreams; i++) {
        graph_mstream *ms = m->streams[i];
        fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%zu,\"args\":{\"name\":\"stream %d\"}}",
                first ? "" : ",\n", m->device, i, ms->user_id);
        first = false;
        for (size_t k = 0; k < ms->n; k++) {
            graph_task *t = ms->tasks[k];
            fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%zu,\"ts\":%u,\"dur\":1,"
                       "\"args\":{\"seq\":%u,\"type\":%d,\"disabled\":%s",
                    task_kind_name(t), m->device, i, t->seq, t->seq, t->type, t->disabled ? "true" : "false");
            if (flags == ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE && t->ext_info != NULL) {
                fprintf(f, ",\"extendInfo\":%s", t->ext_info);
            }
            fprintf(f, "}}");
        }
    }
    fprintf(f, "\n],\"otherData\":{\"modelId\":%u,\"name\":\"", m->id);
    for (const char *c = m->name; *c; c++) {
        if (*c == '"' || *c == '\\') {
            fputc('\\', f);
        }
        if ((unsigned char)*c >= 0x20) {
            fputc(*c, f);
        }
    }
    fprintf(f, "\"}}\n");
    graph_unlock();
    if (fclose(f) != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "cannot write '%s'", file);
    }
    return ACL_SUCCESS;
}

/* aclrtCacheLastTaskOpInfo / ExtendInfo (OTH): info attached to the last task
 * the calling thread recorded into a capture (or a build, for ExtendInfo),
 * read back by aclmdlRITaskGetParams (opInfoPtr/opInfoSize) and
 * aclmdlRIDebugJsonPrint (extendInfo). Op info needs the stream attribute
 * ACL_STREAM_ATTR_CACHE_OP_INFO. Mock choice: outside a capture, or with the
 * attribute off, the call succeeds and keeps nothing ("valid only while"). */
static aclError cache_common(const char *fn, const void *ptr, size_t size, bool ext)
{
    size_t max = ext ? 4096u : 65536u;
    if (ptr == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", ext ? "extendInfoPtr" : "infoPtr");
    }
    if (size == 0 || (!ext && size > max) || (ext && size > ((size_t)1 << 30))) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'infoSize' is %zu (must be in (0, %zu])", size, max);
    }
    MOCK_ENTER(fn);
    aclError rc = ACL_SUCCESS;
    graph_lock();
    graph_task *t = graph_tls_last_task();
    bool keep = t != NULL && graph_task_is_live_locked(t) &&
                (t->ms->m->state == GRAPH_CAPTURING || (ext && t->ms->m->state == GRAPH_BUILDING));
    if (keep && !ext) {
        keep = t->ms->user != NULL && !t->ms->user_gone && stream_cache_op_info(t->ms->user) != 0;
    }
    if (keep) {
        size_t n = size > max ? max : size; /* extend info longer than 4 KiB is cut */
        char *copy = malloc(n + 1);
        if (copy == NULL) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
        } else {
            memcpy(copy, ptr, n);
            copy[n] = '\0';
            if (ext) {
                free(t->ext_info);
                t->ext_info = copy;
            } else {
                free(t->op_info);
                t->op_info = copy;
                t->op_info_size = n;
            }
        }
    }
    graph_unlock();
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "out of host memory");
    }
    return ACL_SUCCESS;
}

aclError aclrtCacheLastTaskOpInfo(const void *const infoPtr, const size_t infoSize)
{
    return cache_common("aclrtCacheLastTaskOpInfo", infoPtr, infoSize, false);
}

aclError aclrtCacheLastTaskExtendInfo(const char *const extendInfoPtr, const size_t infoSize)
{
    return cache_common("aclrtCacheLastTaskExtendInfo", extendInfoPtr, infoSize, true);
}
