/*
 * misc/misc.h - what the misc subsystem (src/misc/: overflow, dump, exception,
 * other, util, the generated unsupported stubs) offers to the layer above it
 * (diag): the dump configuration, for the dump writer. misc plugs into aclInit,
 * aclFinalize and failed stream tasks through the hooks it registers in
 * misc/hooks.c. Helpers shared inside src/misc/ are in misc/misc_private.h;
 * every function declared here starts with misc_.
 */
#ifndef MOCK_MISC_H
#define MOCK_MISC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* What to dump of one kernel launch (dump.c, misc_dump_match). */
typedef struct misc_dump_plan {
    bool inputs;         /* dump_mode "input" or "all" */
    bool outputs;        /* dump_mode "output" (the default) or "all" */
    bool stats;          /* dump_data "stats": statistics instead of tensors */
    uint64_t generation; /* changes with every new configuration */
    char dir[4096];      /* the root: ASCEND_DUMP_PATH > ASCEND_WORK_PATH > dump_path */
} misc_dump_plan;

/* True (and *out filled) when the dump configuration in effect (aclmdlSetDump, else
 * the aclInit config or DUMP_CONFIG_PATH) dumps the kernel `op_name` at step `step`
 * (dump_list layers or dump_op_switch "on", or `forced`: the launch asked for it with
 * ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP; dump_step). */
MOCK_HIDDEN bool misc_dump_match(const char *op_name, uint64_t step, bool forced, misc_dump_plan *out);

#endif /* MOCK_MISC_H */
