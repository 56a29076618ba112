/*
 * introspect.c - reading and editing a model's tasks (aclmdlRIGetStreams,
 * aclmdlRIGetTasksByStream, aclmdlRITask*, aclmdlRIKernelTaskGetAttribute,
 * aclmdlRITaskDisable, aclmdlRIUpdate; acl_next_semantics.md §2.10).
 *
 * The streams of a captured model are the model's own stream handles (valid
 * for aclmdlRIGetTasksByStream only, not for submitting work); those of a
 * built model are the bound streams. SetParams and Disable are staged on the
 * task and take effect at aclmdlRIUpdate, which fails (107040) while the model
 * is capturing, building or running.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "kernel/kernel.h"
#include "graph/graph.h"
#include "graph/graph_private.h"

aclError aclmdlRIGetStreams(aclmdlRI modelRI, aclrtStream *streams, uint32_t *numStreams)
{
    static const char fn[] = "aclmdlRIGetStreams";
    MOCK_REQUIRE_NONNULL(fn, modelRI);
    MOCK_REQUIRE_NONNULL(fn, numStreams);
    MOCK_ENTER(fn);
    aclError rc = graph_soc_check(fn, GRAPH_SOC_EDIT);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_lock();
    graph_model *m = graph_model_find_locked(modelRI);
    uint32_t n = 0;
    if (m == NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
    } else {
        for (size_t i = 0; i < m->nstreams; i++) {
            n += (m->captured || !m->streams[i]->ended || m->streams[i]->user != NULL) ? 1u : 0u;
        }
        if (streams != NULL && *numStreams < n) {
            rc = ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY;
        } else if (streams != NULL) {
            uint32_t k = 0;
            for (size_t i = 0; i < m->nstreams; i++) {
                graph_mstream *ms = m->streams[i];
                if (m->captured) {
                    streams[k++] = (aclrtStream)ms;
                } else if (ms->user != NULL) {
                    streams[k++] = (aclrtStream)ms->user;
                }
            }
            n = k;
        }
    }
    graph_unlock();
    if (rc == ACL_ERROR_RT_PARAM_INVALID) {
        return core_error(fn, rc, "argument 'modelRI' (%p) is not a live model run instance", modelRI);
    }
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the array holds %u streams, the model has %u", *numStreams, n);
    }
    *numStreams = n;
    return ACL_SUCCESS;
}

aclError aclmdlRIGetTasksByStream(aclrtStream stream, aclmdlRITask *tasks, uint32_t *numTasks)
{
    static const char fn[] = "aclmdlRIGetTasksByStream";
    MOCK_REQUIRE_NONNULL(fn, stream);
    MOCK_REQUIRE_NONNULL(fn, numTasks);
    MOCK_ENTER(fn);
    aclError rc = graph_soc_check(fn, GRAPH_SOC_EDIT);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* a built model's bound stream is a real stream: resolve it before the lock */
    mock_stream *s = NULL;
    graph_lock();
    graph_mstream *ms = graph_mstream_find_locked(stream);
    graph_unlock();
    if (ms == NULL) {
        rc = stream_acquire(fn, stream, false, &s);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
    }
    uint32_t n = 0;
    graph_lock();
    if (ms == NULL) {
        ms = graph_bound_find_locked(s);
    } else {
        ms = graph_mstream_find_locked(stream);
    }
    if (ms == NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
    } else {
        n = (uint32_t)ms->n;
        if (tasks != NULL && *numTasks < n) {
            rc = ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY;
        } else if (tasks != NULL) {
            for (uint32_t i = 0; i < n; i++) {
                tasks[i] = ms->tasks[i];
            }
        }
    }
    graph_unlock();
    if (s != NULL) {
        stream_release(s);
    }
    if (rc == ACL_ERROR_RT_PARAM_INVALID) {
        return core_error(fn, rc, "argument 'stream' does not belong to a model (aclmdlRIGetStreams)");
    }
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the array holds %u tasks, the stream has %u", *numTasks, n);
    }
    *numTasks = n;
    return ACL_SUCCESS;
}

/* The task behind a handle, g_graph held on success. */
static aclError task_get(const char *fn, aclmdlRITask task, graph_task **out)
{
    if (task == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'task' is NULL");
    }
    aclError rc = graph_soc_check(fn, GRAPH_SOC_EDIT);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_lock();
    if (!graph_task_is_live_locked(task)) {
        graph_unlock();
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'task' (%p) is not a live model task", task);
    }
    *out = task;
    return ACL_SUCCESS;
}

aclError aclmdlRITaskGetSeqId(aclmdlRITask task, uint32_t *id)
{
    static const char fn[] = "aclmdlRITaskGetSeqId";
    MOCK_REQUIRE_NONNULL(fn, id);
    MOCK_ENTER(fn);
    graph_task *t = NULL;
    aclError rc = task_get(fn, task, &t);
    if (rc == ACL_SUCCESS) {
        *id = t->seq;
        graph_unlock();
    }
    return rc;
}

aclError aclmdlRITaskGetType(aclmdlRITask task, aclmdlRITaskType *type)
{
    static const char fn[] = "aclmdlRITaskGetType";
    MOCK_REQUIRE_NONNULL(fn, type);
    MOCK_ENTER(fn);
    graph_task *t = NULL;
    aclError rc = task_get(fn, task, &t);
    if (rc == ACL_SUCCESS) {
        *type = (aclmdlRITaskType)t->type;
        graph_unlock();
    }
    return rc;
}

aclError aclmdlRITaskGetParams(aclmdlRITask task, aclmdlRITaskParams *params)
{
    static const char fn[] = "aclmdlRITaskGetParams";
    MOCK_REQUIRE_NONNULL(fn, params);
    MOCK_ENTER(fn);
    graph_task *t = NULL;
    aclError rc = task_get(fn, task, &t);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    memset(params, 0, sizeof(*params));
    params->type = (aclmdlRITaskType)t->type;
    params->taskGrp = t->grp;
    params->opInfoPtr = t->op_info;
    params->opInfoSize = t->op_info_size;
    switch (t->type) {
    case ACL_MODEL_RI_TASK_EVENT_RECORD:
        params->eventRecordTaskParams.event = t->event;
        params->eventRecordTaskParams.eventFlag = t->event_flags;
        params->eventRecordTaskParams.recordFlag = t->op_flag;
        break;
    case ACL_MODEL_RI_TASK_EVENT_WAIT:
        params->eventWaitTaskParams.event = t->event;
        params->eventWaitTaskParams.eventFlag = t->event_flags;
        params->eventWaitTaskParams.waitFlag = t->op_flag;
        break;
    case ACL_MODEL_RI_TASK_EVENT_RESET:
        params->eventResetTaskParams.event = t->event;
        params->eventResetTaskParams.eventFlag = t->event_flags;
        break;
    default:
        if (t->kind == GT_OP && t->t.ops != NULL && t->t.ops->get_params != NULL) {
            if (t->has_pending) {
                *params = t->pending; /* staged by SetParams, not yet applied */
            } else {
                graph_model *m = t->ms->m;
                core_mutex_lock(&m->xmu); /* a task-group update swaps t->t under it */
                rc = t->t.ops->get_params(t->t.arg, params);
                core_mutex_unlock(&m->xmu);
            }
        }
        break;
    }
    graph_unlock();
    return rc;
}

/* True when `args` is the mock's own host argument block of a kernel task of model m
 * as aclmdlRITaskGetParams gave it: the block of `cur` (the task's launch now) or of a
 * launch a task-group update has swapped out since (kept until the next run), which
 * GetParams may have read just before the swap. *size: its bytes. m->xmu held. */
static bool own_host_block_xmu(graph_model *m, const aclmdlRIKernelTaskParams *cur, const void *args, size_t *size)
{
    if (args == NULL) {
        return false;
    }
    if (cur->isHostArgs != 0 && args == cur->args) {
        *size = cur->argsSize;
        return true;
    }
    for (size_t i = 0; i < m->nretired; i++) {
        aclmdlRIKernelTaskParams old;
        if (kernel_task_is(m->retired[i].fn)) {
            kernel_task_get_params(m->retired[i].arg, &old);
            if (old.isHostArgs != 0 && args == old.args) {
                *size = old.argsSize;
                return true;
            }
        }
    }
    return false;
}

/* stage_kernel with m->xmu held: a task-group update swaps t->t under it and a run
 * frees the swapped-out launches under it, so an own block is still there to copy. */
static aclError stage_kernel_xmu(graph_task *t, aclmdlRIKernelTaskParams *k, void **buf, const char **why)
{
    aclmdlRIKernelTaskParams cur;
    kernel_task_get_params(t->t.arg, &cur);
    size_t own_size = 0;
    bool own = own_host_block_xmu(t->ms->m, &cur, k->args, &own_size);
    bool host = k->args != NULL && (k->isHostArgs != 0 || own);
    if (own && k->argsSize > own_size) {
        *why = "params->kernelTaskParams.argsSize is larger than the task's own argument block it points to";
        return ACL_ERROR_INVALID_PARAM;
    }
    if (host && k->argsSize > ((size_t)1 << 30)) {
        *why = "params->kernelTaskParams.argsSize is larger than 1 GiB";
        return ACL_ERROR_INVALID_PARAM;
    }
    size_t nattrs = 0;
    if (k->cfg != NULL) {
        nattrs = k->cfg->numAttrs;
        if (nattrs > 0 && k->cfg->attrs == NULL) {
            *why = "params->kernelTaskParams.cfg->attrs is NULL but numAttrs is not 0";
            return ACL_ERROR_INVALID_PARAM;
        }
        if (nattrs > 9) {
            *why = "params->kernelTaskParams.cfg->numAttrs is larger than the 9 attribute ids";
            return ACL_ERROR_INVALID_PARAM;
        }
    }
    size_t cfg_bytes = k->cfg != NULL ? sizeof(aclrtLaunchKernelCfg) + nattrs * sizeof(aclrtLaunchKernelAttr) : 0;
    size_t arg_bytes = host ? k->argsSize : 0;
    if (cfg_bytes + arg_bytes == 0) {
        return ACL_SUCCESS;
    }
    uint8_t *b = malloc(cfg_bytes + arg_bytes);
    if (b == NULL) {
        *why = "out of host memory";
        return ACL_ERROR_BAD_ALLOC;
    }
    if (k->cfg != NULL) {
        aclrtLaunchKernelCfg *c = (aclrtLaunchKernelCfg *)b;
        c->attrs = (aclrtLaunchKernelAttr *)(b + sizeof *c);
        c->numAttrs = nattrs;
        if (nattrs > 0) {
            memcpy(c->attrs, k->cfg->attrs, nattrs * sizeof(aclrtLaunchKernelAttr));
        }
        k->cfg = c;
    }
    if (host) {
        memcpy(b + cfg_bytes, k->args, arg_bytes);
        k->args = b + cfg_bytes;
        k->isHostArgs = 1;
    }
    *buf = b;
    return ACL_SUCCESS;
}

/* Host memory a staged kernel edit refers to is copied at aclmdlRITaskSetParams (the
 * caller may free it before aclmdlRIUpdate): the cfg with its attributes, and the
 * argument block when it is host memory (isHostArgs 1, or the task's own host block
 * as aclmdlRITaskGetParams gave it, read with isHostArgs 0). *k is rewritten to point
 * into *buf (graph lock held). */
static aclError stage_kernel(graph_task *t, aclmdlRIKernelTaskParams *k, void **buf, const char **why)
{
    graph_model *m = t->ms->m;
    core_mutex_lock(&m->xmu);
    aclError rc = stage_kernel_xmu(t, k, buf, why);
    core_mutex_unlock(&m->xmu);
    return rc;
}

aclError aclmdlRITaskSetParams(aclmdlRITask task, aclmdlRITaskParams *params)
{
    static const char fn[] = "aclmdlRITaskSetParams";
    MOCK_REQUIRE_NONNULL(fn, params);
    MOCK_ENTER(fn);
    graph_task *t = NULL;
    aclError rc = task_get(fn, task, &t);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    aclmdlRITaskParams staged = *params;
    void *buf = NULL;
    if ((int)params->type != t->type) {
        rc = ACL_ERROR_INVALID_PARAM;
        why = "params->type differs from the task's type";
    } else if (t->kind != GT_OP || t->t.ops == NULL || t->t.ops->set_params == NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "the parameters of this task type cannot be set (event parameters are output only)";
    } else if (t->type == ACL_MODEL_RI_TASK_KERNEL && kernel_task_is(t->t.fn)) {
        rc = stage_kernel(t, &staged.kernelTaskParams, &buf, &why);
    }
    if (rc == ACL_SUCCESS) {
        free(t->pending_buf);
        t->pending_buf = buf;
        t->pending = staged;
        t->has_pending = true;
    }
    graph_unlock();
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}

aclError aclmdlRIKernelTaskGetAttribute(aclmdlRITask task, aclrtLaunchKernelAttrId attrId,
                                        aclrtLaunchKernelAttrValue *attrValue)
{
    static const char fn[] = "aclmdlRIKernelTaskGetAttribute";
    MOCK_REQUIRE_NONNULL(fn, attrValue);
    MOCK_ENTER(fn);
    graph_task *t = NULL;
    aclError rc = task_get(fn, task, &t);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (t->kind != GT_OP || t->type != ACL_MODEL_RI_TASK_KERNEL || !kernel_task_is(t->t.fn)) {
        graph_unlock();
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the task is not a KERNEL task");
    }
    /* the attributes the task runs with (an edit staged by SetParams shows after Update) */
    graph_model *m = t->ms->m;
    core_mutex_lock(&m->xmu); /* a task-group update swaps t->t under it */
    rc = kernel_task_get_attr(fn, t->t.arg, (int)attrId, attrValue);
    core_mutex_unlock(&m->xmu);
    graph_unlock();
    return rc;
}

aclError aclmdlRITaskDisable(aclmdlRITask task)
{
    static const char fn[] = "aclmdlRITaskDisable";
    MOCK_ENTER(fn);
    graph_task *t = NULL;
    aclError rc = task_get(fn, task, &t);
    if (rc == ACL_SUCCESS) {
        t->pending_disable = true; /* applied by aclmdlRIUpdate */
        graph_unlock();
    }
    return rc;
}

/* Applies the staged edits of a model in GRAPH_UPDATING (no lock held: a
 * parameter check touches the memory registry; the state keeps runs, edits
 * and destruction away meanwhile). */
static void apply_model(const char *fn, graph_model *m, aclError *rc)
{
    for (size_t i = 0; i < m->nstreams; i++) {
        graph_mstream *ms = m->streams[i];
        for (size_t k = 0; k < ms->n; k++) {
            graph_task *t = ms->tasks[k];
            graph_lock();
            bool disable = t->pending_disable;
            bool edit = t->has_pending;
            aclmdlRITaskParams p = t->pending;
            void *buf = t->pending_buf; /* p points into it */
            t->pending_disable = false;
            t->has_pending = false;
            t->pending_buf = NULL;
            graph_unlock();
            core_mutex_lock(&t->ms->m->xmu); /* a task-group update ending on its stream swaps t->t */
            stream_task tk = t->t;
            core_mutex_unlock(&t->ms->m->xmu);
            /* no run can start while UPDATING, so a swapped-out tk is not freed meanwhile
             * (an edit of it is lost with it: the group update replaced the task) */
            aclError r = edit ? tk.ops->set_params(fn, tk.arg, &p) : ACL_SUCCESS;
            free(buf);
            if (disable) {
                t->disabled = true;
            }
            if (r != ACL_SUCCESS && *rc == ACL_SUCCESS) {
                *rc = r;
            }
            for (uint32_t j = 0; t->kind == GT_COND && j < t->nsub; j++) {
                apply_model(fn, t->subs[j], rc);
            }
        }
    }
}

aclError aclmdlRIUpdate(aclmdlRI modelRI)
{
    static const char fn[] = "aclmdlRIUpdate";
    MOCK_REQUIRE_NONNULL(fn, modelRI);
    MOCK_ENTER(fn);
    aclError rc = graph_soc_check(fn, GRAPH_SOC_EDIT);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    graph_lock();
    graph_model *m = graph_model_find_locked(modelRI);
    if (m == NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "argument 'modelRI' is not a live model run instance";
    } else if (m->state != GRAPH_READY) {
        rc = ACL_ERROR_RT_MODEL_UPDATE_FAILED;
        why = "the model is not fully captured or built";
    } else {
        core_mutex_lock(&m->xmu);
        bool busy = m->running || m->pending_runs > 0;
        core_mutex_unlock(&m->xmu);
        if (busy) {
            rc = ACL_ERROR_RT_MODEL_UPDATE_FAILED;
            why = "the model is executing";
        } else {
            m->state = GRAPH_UPDATING; /* READY -> UPDATING -> READY (D-GRAPH#7.2) */
        }
    }
    graph_unlock();
    if (rc == ACL_SUCCESS) {
        aclError r = ACL_SUCCESS;
        apply_model(fn, m, &r);
        graph_lock();
        m->state = GRAPH_READY;
        graph_unlock();
        if (r != ACL_SUCCESS) {
            rc = ACL_ERROR_RT_MODEL_UPDATE_FAILED;
            why = "a parameter update failed (see the previous message)";
        }
    }
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}
