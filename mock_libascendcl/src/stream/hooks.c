/*
 * hooks.c - the stream subsystem's descriptor (core/core.h "subsystem.c"): what
 * aclFinalize, device synchronize/abort and context teardown do to streams, events and
 * report subscriptions. Core runs these hooks; it never calls the stream subsystem
 * directly, except for a context's default stream (README "Source layout").
 */
#include "core/core.h"
#include "stream/stream.h"
#include "stream/stream_private.h"

static const core_subsystem k_stream_subsystem = {
    .name = "stream",
    .level = CORE_LEVEL_STREAM,
    .quiesce = stream_callbacks_finalize,    /* report subscriptions end first */
    .release = stream_events_finalize,       /* events outlive contexts */
    .ctx_sync = stream_sync_context,         /* aclrtSynchronizeDevice, aclrtDeviceTaskAbort */
    .ctx_abort = stream_abort_context,       /* aclrtDeviceTaskAbort */
    .ctx_teardown = stream_destroy_context,  /* explicit streams, before the default one */
};
MOCK_REGISTER_SUBSYSTEM(k_stream_subsystem)
