/*
 * dump_api.c - libascend_dump.so: acldumpGetPath, acldumpRegCallback,
 * acldumpUnregCallback.
 *
 * The dump configuration lives in libascendcl.so (aclmdlSetDump, dump.c);
 * acldumpGetPath asks it through the exported aclmockDumpGetPath. A host
 * simulator executes no operators, so no dump chunk is ever produced: the
 * registered callback is stored (one per process, as in CANN) and never
 * called. Errors are recorded through aclmockSetError.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "acl/acl.h"
#include "acl/acl_dump.h"
#include "acl/acl_mock.h"
#include "core/lock_order.h"

/* Defined in libascendcl.so (src/dump.c). */
extern const char *aclmockDumpGetPath(int32_t dumpType);

typedef int32_t (*dump_cb_t)(const acldumpChunk *, int32_t);

static mock_mutex g_cb_mu = MOCK_MUTEX_INIT(MOCK_LOCK_DUMP_CALLBACK);
static dump_cb_t g_cb = NULL;
static int32_t g_cb_flag = 0;

const char *acldumpGetPath(acldumpType dumpType)
{
    int t = (int)dumpType;
    if (t < AIC_ERR_BRIEF_DUMP || t > OVERFLOW_DUMP) {
        (void)aclmockSetError("acldumpGetPath", ACL_ERROR_INVALID_PARAM,
                              "argument 'dumpType' (%d) is not an acldumpType (1..5)", t);
        return NULL;
    }
    const char *path = aclmockDumpGetPath((int32_t)t);
    if (path == NULL) {
        (void)aclmockSetError("acldumpGetPath", ACL_ERROR_DUMP_NOT_RUN,
                              "dump type %d is not enabled (aclmdlInitDump + aclmdlSetDump with a config that "
                              "enables it)",
                              t);
    }
    return path;
}

aclError acldumpRegCallback(int32_t (*const messageCallback)(const acldumpChunk *, int32_t), int32_t flag)
{
    if (messageCallback == NULL) {
        return aclmockSetError("acldumpRegCallback", ACL_ERROR_INVALID_PARAM, "argument 'messageCallback' is NULL");
    }
    core_mutex_lock(&g_cb_mu);
    g_cb = messageCallback; /* a new registration replaces the previous one */
    g_cb_flag = flag;
    core_mutex_unlock(&g_cb_mu);
    return ACL_SUCCESS;
}

void acldumpUnregCallback(void)
{
    core_mutex_lock(&g_cb_mu);
    g_cb = NULL;
    g_cb_flag = 0;
    core_mutex_unlock(&g_cb_mu);
}
