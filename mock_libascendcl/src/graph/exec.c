/*
 * exec.c - running a model (aclmdlRIExecuteAsync / aclmdlRIExecute / Abort).
 *
 * A model has one executor thread per model stream (started at its first run,
 * joined when the model goes): these are the model's internal streams; the
 * origin stream of a captured model runs on the thread that runs the model. A run
 * activates the HEAD streams at position 0 (every stream of a captured model);
 * each executor runs its task list in order: captured tasks call their task
 * function, a captured event record marks the run generation on its node and a
 * captured wait blocks until the record it names was reached in the same run
 * (the cross-stream edges of the capture); aclrtActiveStream activates another
 * stream, a switch activates its target and stops the current stream, a
 * conditional task runs its sub-models. The run ends when no stream is active
 * or pending. Runs of one model never overlap: a second run waits for the
 * first (a model is one instance). ExecuteAsync enqueues the whole run as one
 * task on the target stream (one unit in its order); the executors act as
 * workers of that stream while they run, so aborting it interrupts blocking
 * tasks of the run.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "graph/graph.h"
#include "graph/graph_private.h"

uint64_t graph_read_device(const void *p, size_t n)
{
    uint64_t v = 0;
    mem_access_begin(p, n);
    memcpy(&v, p, n);
    mem_access_end(p, n);
    return v;
}

void graph_write_device(void *p, uint64_t v)
{
    mem_access_begin(p, sizeof(v));
    memcpy(p, &v, sizeof(v));
    mem_access_end(p, sizeof(v));
}

/* m->xmu held */
static void activate_locked(graph_model *m, graph_mstream *ms, size_t pos)
{
    if (ms->pending || ms->ended) {
        return; /* mock choice: an activation of a stream already pending is merged */
    }
    ms->pending = true;
    ms->start = pos;
    m->active++;
    pthread_cond_broadcast(&m->xcv);
}

static void fail_locked(graph_model *m, aclError rc)
{
    if (m->err == ACL_SUCCESS) {
        m->err = rc;
    }
    atomic_store(&m->stop, true);
    pthread_cond_broadcast(&m->xcv);
}

static bool compare(const graph_task *t)
{
    size_t n = t->dtype == ACL_RT_SWITCH_INT64 ? 8 : 4;
    int64_t l, r;
    if (n == 8) {
        l = (int64_t)graph_read_device(t->left, 8);
        r = (int64_t)graph_read_device(t->right, 8);
    } else {
        l = (int32_t)(uint32_t)graph_read_device(t->left, 4);
        r = (int32_t)(uint32_t)graph_read_device(t->right, 4);
    }
    switch (t->cond) {
    case ACL_RT_EQUAL:
        return l == r;
    case ACL_RT_NOT_EQUAL:
        return l != r;
    case ACL_RT_GREATER:
        return l > r;
    case ACL_RT_GREATER_OR_EQUAL:
        return l >= r;
    case ACL_RT_LESS:
        return l < r;
    default:
        return l <= r;
    }
}

/* A conditional task: IF / WHILE / SWITCH over the 8-byte condition word
 * (MRI#aclmdlRIAddCondTask). A SWITCH value past the last sub-model runs none. */
static aclError run_cond(graph_model *m, graph_task *t)
{
    aclError rc = ACL_SUCCESS;
    uint64_t v = graph_read_device(t->condh->ptr, 8);
    switch (t->cond_type) {
    case ACL_MODEL_RI_COND_TYPE_IF:
        if (v != 0) {
            rc = graph_run(t->subs[0], m->exec_stream, NULL);
        } else if (t->nsub == 2) {
            rc = graph_run(t->subs[1], m->exec_stream, NULL);
        }
        break;
    case ACL_MODEL_RI_COND_TYPE_WHILE:
        while (v != 0 && rc == ACL_SUCCESS && !atomic_load(&m->stop)) {
            rc = graph_run(t->subs[0], m->exec_stream, NULL);
            v = graph_read_device(t->condh->ptr, 8);
        }
        break;
    default:
        if (v < t->nsub) {
            rc = graph_run(t->subs[v], m->exec_stream, NULL);
        }
        break;
    }
    return rc;
}

/* What the executor of a stream does after a task. */
enum step_next { STEP_NEXT, STEP_STOP, STEP_JUMP };

static void activate(graph_model *m, graph_mstream *ms, size_t pos)
{
    core_mutex_lock(&m->xmu);
    activate_locked(m, ms, pos);
    core_mutex_unlock(&m->xmu);
}

/* Runs one task of `ms` (no lock held). STEP_JUMP sets *jump to the position
 * where the stream continues. */
static enum step_next step(graph_model *m, graph_mstream *ms, graph_task *t, size_t *jump, aclError *rc)
{
    switch (t->kind) {
    case GT_OP: {
        core_mutex_lock(&m->xmu);
        stream_task tk = t->t; /* a task-group update swaps it under xmu */
        core_mutex_unlock(&m->xmu);
        core_lock_check_none("running a model task");
        *rc = tk.fn(tk.arg);
        return STEP_NEXT;
    }
    case GT_EDGE_RECORD:
        core_mutex_lock(&m->xmu);
        t->rec_gen = m->gen;
        pthread_cond_broadcast(&m->xcv);
        core_mutex_unlock(&m->xmu);
        return STEP_NEXT;
    case GT_EDGE_WAIT:
        core_mutex_lock(&m->xmu);
        while (t->rec->rec_gen != m->gen && !atomic_load(&m->stop)) {
            if (stream_task_wait(&m->xcv, &m->xmu, NULL) == ECANCELED) {
                fail_locked(m, ACL_ERROR_RT_STREAM_ABORT);
            }
        }
        core_mutex_unlock(&m->xmu);
        return STEP_NEXT;
    case GT_ACTIVE:
        activate(m, t->target, 0);
        return STEP_NEXT;
    case GT_SWITCH_STREAM:
        if (!compare(t)) {
            return STEP_NEXT;
        }
        activate(m, t->target, 0);
        return STEP_STOP; /* only the true stream continues */
    case GT_SWITCH_LABEL: {
        uint32_t idx = (uint32_t)graph_read_device(t->ptr, 4);
        size_t n = t->list->n;
        graph_label *l = t->list->labels[idx < n ? idx : n - 1]; /* past the end: the last label */
        if (l->ms == NULL || l->ms->m != m) {
            *rc = ACL_ERROR_RT_MODEL_EXECUTE; /* the label is not set in this model */
            return STEP_STOP;
        }
        if (l->ms == ms) {
            *jump = l->pos; /* a jump on the stream itself */
            return STEP_JUMP;
        }
        activate(m, l->ms, l->pos);
        return STEP_STOP; /* the current stream stops */
    }
    case GT_COND:
        *rc = run_cond(m, t);
        return STEP_NEXT;
    default:
        return STEP_NEXT;
    }
}

/* Runs one activation of a model stream from `pos` (no lock held). */
static void run_stream(graph_model *m, graph_mstream *ms, size_t pos)
{
    size_t i = pos;
    while (i < ms->n && !atomic_load(&m->stop)) {
        graph_task *t = ms->tasks[i];
        aclError rc = ACL_SUCCESS;
        size_t jump = 0;
        enum step_next next = t->disabled ? STEP_NEXT : step(m, ms, t, &jump, &rc);
        if (rc != ACL_SUCCESS) {
            core_mutex_lock(&m->xmu);
            fail_locked(m, rc);
            core_mutex_unlock(&m->xmu);
            break;
        }
        if (next == STEP_STOP) {
            break;
        }
        i = next == STEP_JUMP ? jump : i + 1;
    }
}

typedef struct exec_arg {
    graph_model *m;
    graph_mstream *ms;
} exec_arg;

static void *executor_main(void *p)
{
    exec_arg a = *(exec_arg *)p;
    free(p);
    graph_model *m = a.m;
    graph_mstream *ms = a.ms;
    core_mutex_lock(&m->xmu);
    for (;;) {
        while (!ms->pending && !m->shutdown) {
            core_cond_wait(&m->xcv, &m->xmu);
        }
        if (!ms->pending) {
            break; /* shutdown */
        }
        size_t pos = ms->start;
        ms->pending = false;
        ms->running = true;
        mock_stream *es = m->exec_stream;
        core_mutex_unlock(&m->xmu);
        if (es != NULL) {
            /* act as a worker of the stream the run belongs to: its abort interrupts us */
            core_worker_enter(es, stream_context(es), stream_device(es));
        }
        run_stream(m, ms, pos);
        if (es != NULL) {
            core_worker_leave();
        }
        core_mutex_lock(&m->xmu);
        ms->running = false;
        m->active--;
        pthread_cond_broadcast(&m->xcv);
    }
    core_mutex_unlock(&m->xmu);
    return NULL;
}

/* m->xmu held. false when a thread cannot be started. */
static bool start_executors_locked(graph_model *m)
{
    for (size_t i = m->captured ? 1 : 0; i < m->nstreams; i++) { /* see graph_run: origin inline */
        graph_mstream *ms = m->streams[i];
        if (ms->thread_started) {
            continue;
        }
        exec_arg *a = malloc(sizeof(*a));
        if (a == NULL) {
            return false;
        }
        a->m = m;
        a->ms = ms;
        if (pthread_create(&ms->thread, NULL, executor_main, a) != 0) {
            free(a);
            return false;
        }
        ms->thread_started = true;
    }
    return true;
}

void graph_exec_shutdown(graph_model *m)
{
    core_mutex_lock(&m->xmu);
    m->shutdown = true;
    pthread_cond_broadcast(&m->xcv);
    core_mutex_unlock(&m->xmu);
    for (size_t i = 0; i < m->nstreams; i++) {
        if (m->streams[i]->thread_started) {
            pthread_join(m->streams[i]->thread, NULL);
            m->streams[i]->thread_started = false;
        }
    }
}

aclError graph_run(graph_model *m, mock_stream *exec_stream, const struct timespec *deadline)
{
    aclError rc = ACL_SUCCESS;
    core_mutex_lock(&m->xmu);
    while (m->running) {
        /* one run at a time: a model is one instance */
        int w = stream_task_wait(&m->xcv, &m->xmu, deadline);
        if (w == ECANCELED || w == ETIMEDOUT) {
            rc = w == ECANCELED ? ACL_ERROR_RT_STREAM_ABORT : ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
            break;
        }
    }
    if (rc == ACL_SUCCESS) {
        m->running = true;
        m->gen++;
        m->err = ACL_SUCCESS;
        m->aborted = false;
        atomic_store(&m->stop, false);
        m->exec_stream = exec_stream;
        /* arguments replaced by an update before this run: no executor uses them */
        for (size_t i = 0; i < m->nretired; i++) {
            m->retired[i].free_arg(m->retired[i].arg);
        }
        m->nretired = 0;
    }
    core_mutex_unlock(&m->xmu);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* condition words with ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT start every run
     * of the root model at their default value */
    if (m->root == NULL) {
        for (size_t i = 0; i < m->nconds; i++) {
            if (m->conds[i]->flag == ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT) {
                graph_write_device(m->conds[i]->ptr, m->conds[i]->def);
            }
        }
    }
    /* A captured model's origin stream runs on the calling thread (the target stream's
     * worker for ExecuteAsync): nothing can activate it again during a run (no labels or
     * switches in captured models), and it saves a thread hand-off per run. */
    graph_mstream *inline0 = m->captured && m->nstreams > 0 ? m->streams[0] : NULL;
    core_mutex_lock(&m->xmu);
    if (!start_executors_locked(m)) {
        fail_locked(m, ACL_ERROR_RT_RESOURCE_ALLOC_FAIL);
        inline0 = NULL;
    } else {
        for (size_t i = 0; i < m->nstreams; i++) {
            graph_mstream *ms = m->streams[i];
            if (ms != inline0 && (m->captured || ms->flag == 0 /* ACL_MODEL_STREAM_FLAG_HEAD */)) {
                activate_locked(m, ms, 0);
            }
        }
    }
    if (inline0 != NULL) {
        m->active++;
        inline0->running = true;
        core_mutex_unlock(&m->xmu);
        run_stream(m, inline0, 0);
        core_mutex_lock(&m->xmu);
        inline0->running = false;
        m->active--;
    }
    bool timed_out = false;
    while (m->active > 0) {
        int w = stream_task_wait(&m->xcv, &m->xmu, timed_out ? NULL : deadline);
        if (w == ECANCELED) {
            fail_locked(m, ACL_ERROR_RT_STREAM_ABORT);
        } else if (w == ETIMEDOUT && m->active > 0 && !timed_out) {
            timed_out = true;
            fail_locked(m, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
        }
    }
    rc = m->aborted ? ACL_ERROR_RT_MODEL_ABORT_NORMAL : m->err;
    m->running = false;
    m->exec_stream = NULL;
    pthread_cond_broadcast(&m->xcv);
    core_mutex_unlock(&m->xmu);
    return rc;
}

/* ---------------------------------------------------------- entry points */

static aclError replay_task(void *arg)
{
    graph_model *m = arg;
    return graph_run(m, core_worker_stream(), NULL);
}

static void replay_free(void *arg)
{
    graph_model *m = arg;
    core_mutex_lock(&m->xmu);
    m->pending_runs--;
    pthread_cond_broadcast(&m->xcv);
    core_mutex_unlock(&m->xmu);
    graph_model_put(m);
}

/* Checks that `m` (g_graph held) can run; the error is recorded. */
static aclError check_runnable_locked(const char *fn, graph_model *m)
{
    if (m->root != NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "a sub-model of a conditional task runs only inside its root model");
    }
    if (m->state == GRAPH_CAPTURING) {
        return core_error(fn, ACL_ERROR_RT_MODEL_CAPTURED, "the model is still capturing (D-GRAPH#模型执行流程)");
    }
    if (m->state != GRAPH_READY) {
        return core_error(fn, ACL_ERROR_RT_MODEL_EXECUTE,
                          "the model is not ready (capture invalidated or build not finished)");
    }
    return ACL_SUCCESS;
}

aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream)
{
    static const char fn[] = "aclmdlRIExecuteAsync";
    MOCK_REQUIRE_NONNULL(fn, modelRI);
    MOCK_ENTER(fn);
    aclError rc = graph_soc_check(fn, GRAPH_SOC_CAPTURE);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_stream *s = NULL;
    rc = stream_acquire(fn, stream, true, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_lock();
    graph_model *m = graph_model_find_locked(modelRI);
    if (m == NULL) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'modelRI' (%p) is not a live model run instance",
                        modelRI);
    } else {
        rc = check_runnable_locked(fn, m);
    }
    if (rc == ACL_SUCCESS && stream_device(s) != m->device) {
        rc = core_error(fn, ACL_ERROR_RT_STREAM_CONTEXT, "the model belongs to device %d, the stream to device %d",
                        m->device, stream_device(s));
    }
    if (rc == ACL_SUCCESS) {
        graph_model_ref(m);
        core_mutex_lock(&m->xmu);
        m->pending_runs++;
        core_mutex_unlock(&m->xmu);
    }
    graph_unlock();
    if (rc == ACL_SUCCESS) {
        stream_task t = {replay_task, m, replay_free, NULL};
        rc = stream_enqueue_task(s, &t); /* frees (replay_free) on refusal */
        if (rc != ACL_SUCCESS) {
            rc = core_error(fn, rc, "the stream refused the model run (error %d)", rc);
        }
    }
    stream_release(s);
    return rc;
}

aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout)
{
    static const char fn[] = "aclmdlRIExecute";
    MOCK_REQUIRE_NONNULL(fn, modelRI);
    if (timeout == 0 || timeout < -1) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'timeout' is %d (-1 = forever, > 0 = ms)", timeout);
    }
    MOCK_ENTER(fn);
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_lock();
    graph_model *m = graph_model_find_locked(modelRI);
    if (m == NULL) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'modelRI' (%p) is not a live model run instance",
                        modelRI);
    } else {
        rc = check_runnable_locked(fn, m);
    }
    if (rc == ACL_SUCCESS) {
        graph_model_ref(m);
        core_mutex_lock(&m->xmu);
        m->pending_runs++;
        core_mutex_unlock(&m->xmu);
    }
    graph_unlock();
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    struct timespec dl_buf;
    const struct timespec *dl = core_deadline_opt(timeout, &dl_buf);
    rc = graph_run(m, NULL, dl);
    replay_free(m);
    if (rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
        /* the timeout code is not named by the docs (MRI#aclmdlRIExecute): mock choice */
        return core_error(fn, rc, "the model did not finish within %d ms (the run was stopped)", timeout);
    }
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "a task of the model failed (error %d)", rc);
    }
    return ACL_SUCCESS;
}

aclError aclmdlRIAbort(aclmdlRI modelRI)
{
    static const char fn[] = "aclmdlRIAbort";
    MOCK_REQUIRE_NONNULL(fn, modelRI);
    MOCK_ENTER(fn);
    graph_lock();
    graph_model *m = graph_model_find_locked(modelRI);
    aclError rc = ACL_SUCCESS;
    if (m == NULL) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'modelRI' (%p) is not a live model run instance",
                        modelRI);
    } else if (m->captured) {
        rc = core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "aclmdlRIAbort is not supported for captured models");
    } else {
        core_mutex_lock(&m->xmu);
        if (m->running) {
            /* the run stops at the next task boundary and reports 507023 */
            m->aborted = true;
            fail_locked(m, ACL_ERROR_RT_MODEL_ABORT_NORMAL);
        }
        core_mutex_unlock(&m->xmu);
    }
    graph_unlock();
    return rc;
}
