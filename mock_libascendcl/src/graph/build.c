/*
 * build.c - models built without capture (aclmdlRIBuild*, §2.8), labels and
 * stream control inside them (aclrt*Label*, aclrtActiveStream,
 * aclrtSwitchStream; §4) and conditional tasks of captured models
 * (aclmdlRICondHandle*, aclmdlRIAddCondTask; §2.7).
 *
 * A stream bound with aclmdlRIBindStream (ACL_STREAM_PERSISTENT streams only)
 * gets a binding to its model stream until aclmdlRIEndTask / BuildEnd: what is
 * submitted meanwhile becomes the model's tasks. The stream stays associated
 * with the model (labels, switches, aclmdlRIGetTasksByStream) until
 * aclmdlRIUnbindStream or the model's destruction.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "graph/graph.h"
#include "graph/graph_private.h"

#define MODEL_STREAM_FLAG_HEAD 0x0u          /* ACL_MODEL_STREAM_FLAG_HEAD (doc only) */
#define MODEL_STREAM_FLAG_DEFAULT 0x7FFFFFFFu /* ACL_MODEL_STREAM_FLAG_DEFAULT (doc only) */
#define LABEL_MAX 65535u

static size_t g_nlabels; /* g_graph */

aclError aclmdlRIBuildBegin(aclmdlRI *modelRI, uint32_t flag)
{
    static const char fn[] = "aclmdlRIBuildBegin";
    MOCK_REQUIRE_NONNULL(fn, modelRI);
    if (flag != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flag' is %u (must be 0)", flag);
    }
    MOCK_ENTER(fn);
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_model *m = graph_model_new(GRAPH_BUILDING, false, ctx, core_ctx_device(ctx));
    if (m == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory for a model");
    }
    *modelRI = m;
    return ACL_SUCCESS;
}

/* Resolves a model (must be a live built model) and a stream; g_graph held on success. */
static aclError model_and_stream(const char *fn, aclmdlRI modelRI, aclrtStream stream, graph_model **m,
                                 mock_stream **s)
{
    if (modelRI == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'modelRI' is NULL");
    }
    if (stream == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'stream' is NULL (the default stream cannot be bound)");
    }
    aclError rc = stream_acquire(fn, stream, false, s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_lock();
    *m = graph_model_find_locked(modelRI);
    if (*m == NULL || (*m)->captured) {
        graph_unlock();
        stream_release(*s);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'modelRI' (%p) is not a live built model", modelRI);
    }
    return ACL_SUCCESS;
}

aclError aclmdlRIBindStream(aclmdlRI modelRI, aclrtStream stream, uint32_t flag)
{
    static const char fn[] = "aclmdlRIBindStream";
    if (flag != MODEL_STREAM_FLAG_HEAD && flag != MODEL_STREAM_FLAG_DEFAULT) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'flag' is 0x%x (ACL_MODEL_STREAM_FLAG_HEAD 0x0 or _DEFAULT 0x7FFFFFFF)", flag);
    }
    MOCK_ENTER(fn);
    graph_model *m = NULL;
    mock_stream *s = NULL;
    aclError rc = model_and_stream(fn, modelRI, stream, &m, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    if (!stream_is_persistent(s)) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "the stream was not created with ACL_STREAM_PERSISTENT (aclrtCreateStreamWithConfig)";
    } else if (graph_bound_find_locked(s) != NULL || stream_binding(s) != NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "the stream is already bound to a model (a stream binds to one model only; EE1007)";
    } else if (m->state != GRAPH_BUILDING) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "the model has finished building (aclmdlRIBuildEnd)";
    } else if (stream_device(s) != m->device) {
        rc = ACL_ERROR_RT_STREAM_CONTEXT;
        why = "the stream belongs to another device than the model";
    } else {
        graph_mstream *ms = graph_mstream_add_locked(m, s, flag);
        if (ms == NULL || !graph_bound_add_locked(s, ms)) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            why = "out of host memory";
            if (ms != NULL) {
                m->nstreams--;
                free(ms);
            }
        } else {
            ms->bound = true;
            stream_set_binding(s, ms);
            stream_capture_count(1);
            s = NULL; /* the model keeps the reference */
        }
    }
    graph_unlock();
    if (s != NULL) {
        stream_release(s);
    }
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}

/* g_graph held */
static void end_binding_locked(graph_mstream *ms)
{
    if (ms->bound) {
        stream_set_binding(ms->user, NULL);
        ms->bound = false;
        stream_capture_count(-1);
    }
}

aclError aclmdlRIEndTask(aclmdlRI modelRI, aclrtStream stream)
{
    static const char fn[] = "aclmdlRIEndTask";
    MOCK_ENTER(fn);
    graph_model *m = NULL;
    mock_stream *s = NULL;
    aclError rc = model_and_stream(fn, modelRI, stream, &m, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_mstream *ms = graph_bound_find_locked(s);
    if (ms == NULL || ms->m != m) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the stream is not bound to this model");
    } else {
        end_binding_locked(ms); /* later tasks are kept by the persistent stream, outside the model */
    }
    graph_unlock();
    stream_release(s);
    return rc;
}

aclError aclmdlRIBuildEnd(aclmdlRI modelRI, void *reserve)
{
    static const char fn[] = "aclmdlRIBuildEnd";
    MOCK_REQUIRE_NONNULL(fn, modelRI);
    if (reserve != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'reserve' must be NULL");
    }
    MOCK_ENTER(fn);
    aclError rc = ACL_SUCCESS;
    graph_lock();
    graph_model *m = graph_model_find_locked(modelRI);
    if (m == NULL || m->captured) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'modelRI' (%p) is not a live built model", modelRI);
    } else if (m->state != GRAPH_BUILDING) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the model has already finished building");
    } else {
        for (size_t i = 0; i < m->nstreams; i++) {
            end_binding_locked(m->streams[i]);
        }
        m->state = GRAPH_READY;
    }
    graph_unlock();
    return rc;
}

aclError aclmdlRIUnbindStream(aclmdlRI modelRI, aclrtStream stream)
{
    static const char fn[] = "aclmdlRIUnbindStream";
    MOCK_ENTER(fn);
    graph_model *m = NULL;
    mock_stream *s = NULL;
    aclError rc = model_and_stream(fn, modelRI, stream, &m, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_mstream *ms = graph_bound_find_locked(s);
    core_mutex_lock(&m->xmu);
    bool busy = m->running || m->pending_runs > 0;
    core_mutex_unlock(&m->xmu);
    bool release = false;
    if (ms == NULL || ms->m != m) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the stream is not bound to this model (EE4002)");
    } else if (busy) {
        rc = core_error(fn, ACL_ERROR_RT_MODEL_RUNNING, "the model is executing (EE4002)");
    } else {
        end_binding_locked(ms);
        graph_bound_remove_locked(s);
        ms->ended = true; /* no longer part of the model's runs */
        ms->user_gone = true;
        ms->user = NULL; /* the model's reference is released below */
        release = true;
    }
    graph_unlock();
    stream_release(s);
    if (release) {
        stream_release(s); /* the model's reference */
    }
    return rc;
}

/* --------------------------------------------------------------- labels */

aclError aclrtCreateLabel(aclrtLabel *label)
{
    static const char fn[] = "aclrtCreateLabel";
    MOCK_REQUIRE_NONNULL(fn, label);
    MOCK_ENTER(fn);
    graph_label *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    l->magic = 0x4c4142454c4c4231ull;
    l->refs = 1;
    aclError rc = ACL_SUCCESS;
    graph_lock();
    if (g_nlabels >= LABEL_MAX) {
        rc = ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    } else if (!graph_label_register_locked(l)) {
        rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    } else {
        g_nlabels++;
    }
    graph_unlock();
    if (rc != ACL_SUCCESS) {
        free(l);
        return core_error(fn, rc, rc == ACL_ERROR_RT_RESOURCE_ALLOC_FAIL ? "at most 65535 labels per process"
                                                                          : "out of host memory");
    }
    *label = l;
    return ACL_SUCCESS;
}

aclError aclrtDestroyLabel(aclrtLabel label)
{
    static const char fn[] = "aclrtDestroyLabel";
    MOCK_REQUIRE_NONNULL(fn, label);
    MOCK_ENTER(fn);
    graph_lock();
    graph_label *l = graph_label_find_locked(label);
    if (l != NULL) {
        graph_label_unregister_locked(l);
        g_nlabels--;
    }
    graph_unlock();
    if (l == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'label' (%p) is not a live label", label);
    }
    return ACL_SUCCESS;
}

/* The model stream `s` is bound to, which must be building; g_graph held. */
static graph_mstream *building_ms_locked(const mock_stream *s)
{
    graph_mstream *ms = graph_bound_find_locked(s);
    return (ms != NULL && ms->bound && ms->m->state == GRAPH_BUILDING) ? ms : NULL;
}

aclError aclrtSetLabel(aclrtLabel label, aclrtStream stream)
{
    static const char fn[] = "aclrtSetLabel";
    MOCK_REQUIRE_NONNULL(fn, label);
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_acquire(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    graph_lock();
    graph_label *l = graph_label_find_locked(label);
    graph_mstream *ms = building_ms_locked(s);
    if (l == NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "argument 'label' is not a live label";
    } else if (ms == NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "the stream is not bound to a model being built (aclmdlRIBindStream)";
    } else if (l->ms != NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "the label is already set: it cannot be set repeatedly (EE1018)";
    } else {
        l->ms = ms;
        l->pos = ms->n;
    }
    graph_unlock();
    stream_release(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}

aclError aclrtCreateLabelList(aclrtLabel *labels, size_t num, aclrtLabelList *labelList)
{
    static const char fn[] = "aclrtCreateLabelList";
    MOCK_REQUIRE_NONNULL(fn, labels);
    MOCK_REQUIRE_NONNULL(fn, labelList);
    if (num == 0 || num > LABEL_MAX) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'num' is %zu (must be in (0, 65535])", num);
    }
    MOCK_ENTER(fn);
    graph_label_list *l = calloc(1, sizeof(*l));
    graph_label **v = calloc(num, sizeof(*v));
    if (l == NULL || v == NULL) {
        free(l);
        free(v);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    aclError rc = ACL_SUCCESS;
    size_t bad = 0;
    graph_lock();
    for (size_t i = 0; i < num && rc == ACL_SUCCESS; i++) {
        v[i] = graph_label_find_locked(labels[i]);
        if (v[i] == NULL) {
            rc = ACL_ERROR_RT_PARAM_INVALID;
            bad = i;
        }
    }
    if (rc == ACL_SUCCESS) {
        l->magic = 0x4c41424c4953544cull;
        l->refs = 1;
        l->labels = v;
        l->n = num;
        if (!graph_label_list_register_locked(l)) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
        } else {
            for (size_t i = 0; i < num; i++) {
                v[i]->refs++;
            }
        }
    }
    graph_unlock();
    if (rc != ACL_SUCCESS) {
        free(l);
        free(v);
        if (rc == ACL_ERROR_RT_PARAM_INVALID) {
            return core_error(fn, rc, "labels[%zu] is not a live label", bad);
        }
        return core_error(fn, rc, "out of host memory");
    }
    *labelList = l;
    return ACL_SUCCESS;
}

aclError aclrtDestroyLabelList(aclrtLabelList labelList)
{
    static const char fn[] = "aclrtDestroyLabelList";
    MOCK_REQUIRE_NONNULL(fn, labelList);
    MOCK_ENTER(fn);
    graph_lock();
    graph_label_list *l = graph_label_list_find_locked(labelList);
    if (l != NULL) {
        graph_label_list_unregister_locked(l);
    }
    graph_unlock();
    if (l == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'labelList' (%p) is not a live label list",
                          labelList);
    }
    return ACL_SUCCESS;
}

/* Device memory of at least `len` bytes at p (the mock registry). */
static bool is_device(const void *p, size_t len)
{
    mock_mem_info info;
    return p != NULL && mem_lookup(p, &info) && info.kind == MOCK_MEM_DEVICE &&
           (uintptr_t)p + len <= info.base + info.size;
}

aclError aclrtSwitchLabelByIndex(void *ptr, uint32_t maxValue, aclrtLabelList labelList, aclrtStream stream)
{
    static const char fn[] = "aclrtSwitchLabelByIndex";
    MOCK_REQUIRE_NONNULL(fn, ptr);
    MOCK_REQUIRE_NONNULL(fn, labelList);
    MOCK_ENTER(fn);
    if (!is_device(ptr, 4)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'ptr' %p is not 4 bytes of device memory", ptr);
    }
    mock_stream *s = NULL;
    aclError rc = stream_acquire(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    graph_lock();
    graph_label_list *l = graph_label_list_find_locked(labelList);
    graph_mstream *ms = building_ms_locked(s);
    if (l == NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "argument 'labelList' is not a live label list";
    } else if (maxValue == 0 || maxValue > l->n) {
        rc = ACL_ERROR_INVALID_PARAM;
        why = "argument 'maxValue' must be the number of labels in the list";
    } else if (ms == NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "the stream is not bound to a model being built (aclmdlRIBindStream)";
    } else {
        graph_task *t = graph_task_append_locked(ms, GT_SWITCH_LABEL, ACL_MODEL_RI_TASK_DEFAULT, NULL);
        if (t == NULL) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            why = "out of host memory";
        } else {
            t->ptr = ptr;
            t->list = l;
            l->refs++;
        }
    }
    graph_unlock();
    stream_release(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}

/* The two streams of aclrtActiveStream / aclrtSwitchStream: `stream` is bound
 * to a model being built, `other` is bound to the same model. */
static aclError two_streams(const char *fn, aclrtStream other, aclrtStream stream, const char *other_name,
                            graph_mstream **ms, graph_mstream **target)
{
    aclError rc = graph_soc_check(fn, GRAPH_SOC_STREAM_SWITCH);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (other == NULL || stream == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", other == NULL ? other_name : "stream");
    }
    mock_stream *a = NULL, *b = NULL;
    rc = stream_acquire(fn, other, false, &a);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = stream_acquire(fn, stream, false, &b);
    if (rc != ACL_SUCCESS) {
        stream_release(a);
        return rc;
    }
    graph_lock();
    *ms = building_ms_locked(b);
    *target = graph_bound_find_locked(a);
    if (*ms == NULL || *target == NULL || (*target)->m != (*ms)->m) {
        graph_unlock();
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                        "both streams must be bound to the same model being built (aclmdlRIBindStream; EE1011)");
    }
    stream_release(a);
    stream_release(b);
    return rc; /* g_graph held on success */
}

aclError aclrtActiveStream(aclrtStream activeStream, aclrtStream stream)
{
    static const char fn[] = "aclrtActiveStream";
    MOCK_ENTER(fn);
    graph_mstream *ms = NULL, *target = NULL;
    aclError rc = two_streams(fn, activeStream, stream, "activeStream", &ms, &target);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_task *t = graph_task_append_locked(ms, GT_ACTIVE, ACL_MODEL_RI_TASK_DEFAULT, NULL);
    if (t != NULL) {
        t->target = target;
    }
    graph_unlock();
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    return ACL_SUCCESS;
}

aclError aclrtSwitchStream(void *leftValue, aclrtCondition cond, void *rightValue, aclrtCompareDataType dataType,
                           aclrtStream trueStream, aclrtStream falseStream, aclrtStream stream)
{
    static const char fn[] = "aclrtSwitchStream";
    if ((int)cond < ACL_RT_EQUAL || (int)cond > ACL_RT_LESS_OR_EQUAL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'cond' %d is not an aclrtCondition", (int)cond);
    }
    if (dataType != ACL_RT_SWITCH_INT32 && dataType != ACL_RT_SWITCH_INT64) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataType' %d is not an aclrtCompareDataType",
                          (int)dataType);
    }
    if (falseStream != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'falseStream' must be NULL");
    }
    MOCK_ENTER(fn);
    size_t n = dataType == ACL_RT_SWITCH_INT64 ? 8 : 4;
    if (!is_device(leftValue, n) || !is_device(rightValue, n)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "leftValue and rightValue must be %zu bytes of device memory",
                          n);
    }
    graph_mstream *ms = NULL, *target = NULL;
    aclError rc = two_streams(fn, trueStream, stream, "trueStream", &ms, &target);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_task *t = graph_task_append_locked(ms, GT_SWITCH_STREAM, ACL_MODEL_RI_TASK_DEFAULT, NULL);
    if (t != NULL) {
        t->target = target;
        t->left = leftValue;
        t->right = rightValue;
        t->cond = (int)cond;
        t->dtype = (int)dataType;
    }
    graph_unlock();
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------ conditional tasks */

aclError aclmdlRICondHandleCreate(aclmdlRI modelRI, uint32_t defaultLaunchValue, aclmdlRICondHandleFlag flag,
                                  aclmdlRICondHandle *handle)
{
    static const char fn[] = "aclmdlRICondHandleCreate";
    MOCK_REQUIRE_NONNULL(fn, modelRI);
    MOCK_REQUIRE_NONNULL(fn, handle);
    if ((uint32_t)flag > ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flag' is %u (0 or ASSIGN_DEFAULT 1)", (uint32_t)flag);
    }
    MOCK_ENTER(fn);
    aclError rc = graph_soc_check(fn, GRAPH_SOC_EDIT);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_lock();
    graph_model *m = graph_model_find_locked(modelRI);
    const char *why = NULL;
    if (m == NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "argument 'modelRI' is not a live model run instance";
    } else if (!m->captured) {
        rc = ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
        why = "condition handles belong to capture models (this one was built)";
    } else if (m->state != GRAPH_CAPTURING) {
        rc = ACL_ERROR_INVALID_PARAM;
        why = "the model's capture has ended (a condition handle is created while capturing)";
    }
    graph_unlock();
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    /* the 8-byte device word, zeroed (device memory of the mock reads as zeros) */
    void *ptr = NULL;
    rc = aclrtMalloc(&ptr, sizeof(uint64_t), ACL_MEM_MALLOC_NORMAL_ONLY);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_cond *c = calloc(1, sizeof(*c));
    graph_lock();
    m = graph_model_find_locked(modelRI);
    graph_model *root = m != NULL && m->root != NULL ? m->root : m;
    if (c == NULL || m == NULL || m->state != GRAPH_CAPTURING) {
        rc = c == NULL ? ACL_ERROR_RT_MEMORY_ALLOCATION : ACL_ERROR_INVALID_PARAM;
    } else {
        graph_cond **n = realloc(root->conds, (root->nconds + 1) * sizeof(*n));
        if (n == NULL || !graph_cond_register_locked(c)) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            if (n != NULL) {
                root->conds = n;
            }
        } else {
            root->conds = n;
            c->magic = 0x434f4e4448444c31ull;
            c->root = root;
            c->ptr = ptr;
            c->def = defaultLaunchValue;
            c->flag = (uint32_t)flag;
            root->conds[root->nconds++] = c;
        }
    }
    graph_unlock();
    if (rc != ACL_SUCCESS) {
        free(c);
        (void)aclrtFree(ptr);
        return core_error(fn, rc, "cannot create the condition handle");
    }
    *handle = c;
    return ACL_SUCCESS;
}

aclError aclmdlRICondHandleGetCondPtr(aclmdlRICondHandle handle, uint64_t **ptr)
{
    static const char fn[] = "aclmdlRICondHandleGetCondPtr";
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_REQUIRE_NONNULL(fn, ptr);
    MOCK_ENTER(fn);
    graph_lock();
    graph_cond *c = graph_cond_find_locked(handle);
    if (c != NULL) {
        *ptr = c->ptr;
    }
    graph_unlock();
    if (c == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'handle' (%p) is not a live condition handle",
                          handle);
    }
    return ACL_SUCCESS;
}

aclError aclmdlRIAddCondTask(aclmdlRICondTaskParams params, aclrtStream stream, uint32_t flags)
{
    static const char fn[] = "aclmdlRIAddCondTask";
    if (flags != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flags' must be 0");
    }
    MOCK_REQUIRE_NONNULL(fn, params.handle);
    MOCK_REQUIRE_NONNULL(fn, params.modelRIArray);
    bool size_ok = (params.type == ACL_MODEL_RI_COND_TYPE_IF && (params.size == 1 || params.size == 2)) ||
                   (params.type == ACL_MODEL_RI_COND_TYPE_WHILE && params.size == 1) ||
                   (params.type == ACL_MODEL_RI_COND_TYPE_SWITCH && params.size > 0 && params.size <= 65536);
    if (!size_ok) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "params.type %d with size %u (IF: 1 or 2, WHILE: 1, SWITCH: > 0)", (int)params.type,
                          params.size);
    }
    MOCK_ENTER(fn);
    aclError rc = graph_soc_check(fn, GRAPH_SOC_EDIT);
    mock_stream *s = NULL;
    if (rc == ACL_SUCCESS) {
        rc = stream_acquire(fn, stream, false, &s);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_model **subs = calloc(params.size, sizeof(*subs));
    for (uint32_t i = 0; subs != NULL && i < params.size; i++) {
        subs[i] = graph_model_new(GRAPH_NEW, true, stream_context(s), stream_device(s));
        if (subs[i] == NULL) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
        }
    }
    if (subs == NULL) {
        rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    const char *why = rc != ACL_SUCCESS ? "out of host memory" : NULL;
    graph_lock();
    void *b = stream_binding(s);
    graph_mstream *ms = (b != NULL && *(int *)b == BIND_STREAM) ? b : NULL;
    graph_cond *c = graph_cond_find_locked(params.handle);
    if (rc != ACL_SUCCESS) {
        /* reported below */
    } else if (ms == NULL || !ms->m->captured || ms->m->state != GRAPH_CAPTURING) {
        rc = ACL_ERROR_RT_STREAM_NOT_CAPTURED;
        why = "the stream is not capturing";
    } else if (c == NULL || c->root != (ms->m->root != NULL ? ms->m->root : ms->m)) {
        rc = ACL_ERROR_INVALID_PARAM;
        why = "params.handle is not a condition handle of this capture";
    } else if (c->used) {
        rc = ACL_ERROR_INVALID_PARAM;
        why = "params.handle is already used by a conditional task";
    } else {
        graph_model *m = ms->m;
        graph_model **n = realloc(m->children, (m->nchildren + params.size) * sizeof(*n));
        graph_task *t = n != NULL ? graph_task_append_locked(ms, GT_COND, ACL_MODEL_RI_TASK_DEFAULT, NULL) : NULL;
        if (n != NULL) {
            m->children = n;
        }
        if (t == NULL) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            why = "out of host memory";
        } else {
            c->used = true;
            t->condh = c;
            t->cond_type = (int)params.type;
            t->nsub = params.size;
            t->subs = subs;
            for (uint32_t i = 0; i < params.size; i++) {
                subs[i]->root = m->root != NULL ? m->root : m;
                subs[i]->parent = m;
                m->children[m->nchildren++] = subs[i];
                params.modelRIArray[i] = subs[i];
            }
            subs = NULL;
        }
    }
    if (subs != NULL) {
        for (uint32_t i = 0; i < params.size; i++) {
            if (subs[i] != NULL) {
                graph_model_teardown_locked(subs[i]);
            }
        }
    }
    graph_unlock_and_free();
    free(subs);
    stream_release(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}
