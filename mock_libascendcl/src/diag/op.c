/*
 * op.c - aclmockLaunchOp: a compute task with a name, a modeled cost, arguments
 * with access modes and an optional host twin (acl/acl_mock.h). The timing model,
 * the profiler, the dump writer, the op-info subscriptions and the race sanitizer
 * see it as a kernel launch (MOCK_TASK_KERNEL).
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "diag/diag_private.h"

#define OP_MAX_ARGS 64u
#define OP_NAME_MAX 64u

typedef struct op_task {
    aclmockOpFunc func;
    void *user;
} op_task;

static aclError op_run(void *p)
{
    op_task *t = p;
    return t->func != NULL ? t->func(t->user) : ACL_SUCCESS;
}

/* Checks one argument; fills the access the task is described with. */
static aclError check_arg(const char *fn, uint32_t i, const aclmockOpArg *a, mock_access *out)
{
    if (a->ptr == NULL || a->size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "args[%u]: 'ptr' is NULL or 'size' is 0", i);
    }
    if (a->access == 0 || (a->access & ~ACLMOCK_ACCESS_READ_WRITE) != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "args[%u]: 'access' is %u (expected ACLMOCK_ACCESS_READ, "
                          "_WRITE or _READ_WRITE)", i, a->access);
    }
    if (a->ndim > 8) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "args[%u]: 'ndim' is %u (at most 8)", i, a->ndim);
    }
    mock_mem_info info;
    if (!mem_lookup(a->ptr, &info) || (uintptr_t)a->ptr + a->size > info.base + info.size ||
        (uintptr_t)a->ptr + a->size < (uintptr_t)a->ptr) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "args[%u]: %zu bytes at %p are not inside one live allocation of the runtime", i, a->size,
                          a->ptr);
    }
    memset(out, 0, sizeof *out);
    out->ptr = a->ptr;
    out->size = a->size;
    out->mode = a->access;
    out->dtype = a->dtype;
    out->ndim = a->ndim;
    memcpy(out->dims, a->dims, sizeof out->dims);
    return ACL_SUCCESS;
}

aclError aclmockLaunchOp(const aclmockOpDesc *desc, aclrtStream stream)
{
    static const char fn[] = "aclmockLaunchOp";
    MOCK_REQUIRE_NONNULL(fn, desc);
    size_t nl = desc->name != NULL ? strnlen(desc->name, OP_NAME_MAX) : 0;
    if (nl == 0 || nl >= OP_NAME_MAX) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "desc->name must be 1..%u characters", OP_NAME_MAX - 1);
    }
    if (desc->numArgs > OP_MAX_ARGS || (desc->numArgs > 0 && desc->args == NULL)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "desc->numArgs is %u (at most %u, with desc->args set)",
                          desc->numArgs, OP_MAX_ARGS);
    }
    MOCK_ENTER(fn);
    (void)diag_config_get();
    mock_access acc[OP_MAX_ARGS];
    for (uint32_t i = 0; i < desc->numArgs; i++) {
        aclError rc = check_arg(fn, i, &desc->args[i], &acc[i]);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
    }
    mock_stream *s = NULL;
    aclError rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    op_task *t = malloc(sizeof *t);
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    t->func = desc->func;
    t->user = desc->userData;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < desc->numArgs; i++) {
        bytes += desc->args[i].size;
    }
    mock_task_desc d = {
        .kind = MOCK_TASK_KERNEL,
        .name = desc->name,
        .bytes = bytes,
        .link = MOCK_LINK_NONE,
        .peer_device = -1,
        .cost_ns = desc->costNs,
        .access = acc,
        .naccess = desc->numArgs,
    };
    rc = stream_enqueue_desc(s, op_run, t, free, &d);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the operator (error %d)", rc);
    }
    return ACL_SUCCESS;
}
