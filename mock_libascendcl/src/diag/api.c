/*
 * api.c - the aclmock* calls of the timing model and the race sanitizer that are
 * not part of one of the other files (acl/acl_mock.h "diagnostics").
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "diag/diag_private.h"

aclmockTimingMode aclmockTimingGetMode(void)
{
    return (aclmockTimingMode)diag_config_get()->timing;
}

aclError aclmockTimingGetModel(aclmockTimingModel *model)
{
    MOCK_REQUIRE_NONNULL("aclmockTimingGetModel", model);
    const diag_model *m = &diag_config_get()->model;
    *model = (aclmockTimingModel){
        .h2dGBps = m->h2d_gbps,
        .d2hGBps = m->d2h_gbps,
        .pageableGBps = m->pageable_gbps,
        .hbmGBps = m->hbm_gbps,
        .peerGBps = m->peer_gbps,
        .hostGBps = m->host_gbps,
        .latencyNs = m->latency_ns,
        .kernelNs = m->kernel_ns,
        .launchNs = m->launch_ns,
        .syncNs = m->sync_ns,
        .mallocNs = m->malloc_ns,
        .freeNs = m->free_ns,
        .computeLanes = m->compute_lanes,
        .pace = m->pace,
    };
    return ACL_SUCCESS;
}

uint64_t aclmockTimingNow(void)
{
    return diag_host_now();
}

aclError aclmockTimingStreamEnd(aclrtStream stream, uint64_t *endNs)
{
    static const char fn[] = "aclmockTimingStreamEnd";
    MOCK_REQUIRE_NONNULL(fn, endNs);
    mock_stream *s = NULL;
    aclError rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *endNs = diag_config_get()->timing == DIAG_TIMING_REAL ? 0 : diag_timing_stream_end(s);
    return ACL_SUCCESS;
}

aclError aclmockSetNextTaskTag(const char *tag)
{
    if (tag != NULL && strlen(tag) >= 256) {
        return core_error("aclmockSetNextTaskTag", ACL_ERROR_INVALID_PARAM, "argument 'tag' is longer than 255 "
                          "characters");
    }
    /* kept only while something observes tasks (the sanitizer, a profile, the timing
     * model, a dump): otherwise nothing would take it, and a stale tag must not reach a
     * task of a later profile */
    diag_set_tag(core_observing() ? tag : NULL);
    return ACL_SUCCESS;
}

aclError aclmockSanitizerHostAccess(const void *ptr, size_t size, uint32_t access)
{
    static const char fn[] = "aclmockSanitizerHostAccess";
    MOCK_REQUIRE_NONNULL(fn, ptr);
    if (access == 0 || (access & ~ACLMOCK_ACCESS_READ_WRITE) != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'access' is %u (expected ACLMOCK_ACCESS_READ, "
                          "_WRITE or _READ_WRITE)", access);
    }
    char *tag = diag_take_tag();
    if (!diag_sanitizing() || size == 0) {
        free(tag);
        return ACL_SUCCESS;
    }
    mock_access a = {.ptr = ptr, .size = size, .mode = access, .dtype = -1};
    diag_report *reports = NULL;
    diag_state_lock();
    diag_sanitize_host(diag_next_task_id(), (access & ACLMOCK_ACCESS_WRITE) ? "host write" : "host read", tag,
                       diag_current_device(), &a, 1, &reports);
    diag_state_unlock();
    free(tag);
    size_t n = diag_sanitize_emit(reports);
    if (n > 0 && diag_config_get()->sanitize == DIAG_SANITIZE_FAIL) {
        return core_error(fn, ACL_ERROR_RT_AICORE_EXCEPTION,
                          "the host access races with a pending task (race sanitizer, see the report)");
    }
    return ACL_SUCCESS;
}
