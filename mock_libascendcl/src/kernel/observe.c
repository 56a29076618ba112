/*
 * observe.c - a kernel launch as the diagnostics see it (core/core.h "tasks and
 * observations"): while core_observing() (timing model, profiler, race sanitizer or
 * dump on), a launch is enqueued with a description - kind MOCK_TASK_KERNEL, the
 * kernel's name, its modeled cost and the device memory its declared pointer
 * arguments read and write - instead of as an anonymous task.
 *
 *   cost     the twin's costFn (called here, when the launch is submitted: the model
 *            schedules at submission), else costNsPerBlock x the waves of blocks on
 *            the device's AI cores (ceil(numBlocks / cores) for independent blocks,
 *            numBlocks otherwise), else 0 (the model's default kernel_ns);
 *   memory   each pointer argument the twin declares (ACLMOCK_PTR_IN/OUT/INOUT) that
 *            is not NULL: from the pointer to the end of its allocation (a twin
 *            declares no extent; mock choice, README "Race sanitizer"), with its
 *            access mode. A twin whose parameters are unknown declares no access;
 *   dump     the launch attribute DATA_DUMP 1 dumps it when a dump is on, whatever
 *            the layer list says.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "kernel/kernel_private.h"

/* Waves of blocks on the device's AI cores. */
static uint64_t waves(const kernel_launch *l, const kernel_twin *t)
{
    uint64_t blocks = l->num_blocks;
    if ((t->desc.flags & ACLMOCK_KERNEL_BLOCKS_INDEPENDENT) == 0 || blocks <= 1) {
        return blocks;
    }
    int64_t cores = 0;
    if (aclrtGetDeviceInfo((uint32_t)l->device, ACL_DEV_ATTR_AICORE_CORE_NUM, &cores) != ACL_SUCCESS || cores <= 0) {
        cores = 1;
    }
    return (blocks + (uint64_t)cores - 1) / (uint64_t)cores;
}

aclError kernel_enqueue_observed(mock_stream *s, const stream_task *task)
{
    kernel_launch *l = task->arg;
    const kernel_twin *t = l->twin;
    const uint8_t *block = l->args != NULL ? l->args : l->args_dev;
    size_t block_size = l->args_size;
    if (l->args == NULL && block != NULL) {
        mem_access_begin(block, block_size); /* the user's device block (isolation) */
    }
    uint64_t cost = 0;
    if (t->desc.costFn != NULL) {
        cost = t->desc.costFn(block, block_size, l->num_blocks, t->desc.userData);
    } else if (t->desc.costNsPerBlock != 0) {
        uint64_t w = waves(l, t);
        cost = t->desc.costNsPerBlock > UINT64_MAX / w ? UINT64_MAX : t->desc.costNsPerBlock * w;
    }
    mock_access *acc = NULL;
    size_t nacc = 0;
    if (t->desc.numParams != ACLMOCK_PARAMS_UNKNOWN && t->desc.numParams > 0 && block != NULL) {
        acc = calloc(t->desc.numParams, sizeof *acc);
        for (uint32_t i = 0; acc != NULL && i < t->desc.numParams; i++) {
            if (t->params[i].access == ACLMOCK_ACCESS_VALUE || t->offsets[i] + sizeof(void *) > block_size) {
                continue;
            }
            void *p = NULL;
            memcpy(&p, block + t->offsets[i], sizeof p);
            mock_mem_info mi;
            if (p == NULL || !mem_lookup(p, &mi)) {
                continue; /* the run faults it, naming the argument */
            }
            mock_access *a = &acc[nacc++];
            a->ptr = p;
            a->size = mi.size - (size_t)((uintptr_t)p - mi.base);
            a->mode = t->params[i].access & (MOCK_ACCESS_READ | MOCK_ACCESS_WRITE);
            a->dtype = ACL_DT_UNDEFINED;
        }
    }
    if (l->args == NULL && block != NULL) {
        mem_access_end(block, block_size);
    }
    mock_task_desc desc = {.kind = MOCK_TASK_KERNEL,
                           .name = t->name,
                           .peer_device = -1,
                           .cost_ns = cost,
                           .access = acc,
                           .naccess = nacc,
                           .dump_task = l->dump != 0};
    aclError rc = stream_enqueue_task_desc(s, task, &desc); /* frees l when refused */
    free(acc);
    return rc;
}
