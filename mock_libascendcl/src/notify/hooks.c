/*
 * hooks.c - the notify subsystem's descriptor (core/core.h "subsystem.c"): what
 * aclFinalize does to notifies and count notifies. Level 400: above stream (their
 * record and wait tasks run on streams) and the layers before it.
 */
#include "core/core.h"
#include "notify/notify.h"
#include "notify/notify_private.h"

static void notify_release(void)
{
    notify_cnt_finalize();
    notify_finalize();
}

static const core_subsystem k_notify_subsystem = {
    .name = "notify",
    .level = 400,
    .release = notify_release, /* notifies are not owned by a context */
};
MOCK_REGISTER_SUBSYSTEM(k_notify_subsystem)
