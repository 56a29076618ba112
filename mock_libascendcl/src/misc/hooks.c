/*
 * hooks.c - the misc subsystem's descriptor (core/core.h "subsystem.c"): the "dump"
 * section of the aclInit config, what aclFinalize ends (dumping, shared buffers, a locked
 * process snapshot), a context's overflow status area, and the exception-info callbacks
 * of failed stream tasks.
 */
#include "core/core.h"
#include "misc/misc.h"
#include "misc/misc_private.h"

/* aclInit: a config file may configure dumping (dump.c validates the section). */
static aclError misc_init(const core_init_info *info)
{
    bool has_dump = false;
    if (info->config_text != NULL) {
        aclError rc = misc_dump_configure_from_init(info->fn, info->config_path, info->config_text,
                                                    info->config_len, &has_dump);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
    }
    /* no "dump" section: the seed's switch, DUMP_CONFIG_PATH naming a dump config file */
    return has_dump ? ACL_SUCCESS : misc_dump_configure_from_env(info->fn);
}

static void misc_task_failed(const core_task_failure *f)
{
    misc_exception_report(f);
}

/* aclFinalize, after the contexts are gone: dump state, shared buffers, and a process
 * snapshot still locked (the runtime unlocks by force at exit). */
static void misc_release(void)
{
    misc_dump_finalize();
    misc_mbuf_release_all();
    misc_snapshot_release();
}

static const core_subsystem k_misc_subsystem = {
    .name = "misc",
    .level = CORE_LEVEL_MISC,
    .init = misc_init,
    .init_undo = misc_dump_finalize,
    .release = misc_release,
    .ctx_teardown = misc_overflow_area_teardown, /* the context's overflow status area */
    .task_failed = misc_task_failed,
};
MOCK_REGISTER_SUBSYSTEM(k_misc_subsystem)
