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
 *            is not NULL, with its access mode, over its extent: the one the twin
 *            declares (extentFn / extents table; an extent past the end of the
 *            allocation is left out: the run faults it), else the one the launching
 *            thread gave for this launch (aclmockSetNextLaunchExtents, clipped to the
 *            allocation), else up to the end of the sub-allocation region the pointer
 *            lies in (aclmockMemRegionRegister), else of its allocation (mock choice,
 *            README "Race sanitizer"). The task's bytes are the sum of the declared
 *            extents. A twin whose parameters are unknown declares no access;
 *   dump     the launch attribute DATA_DUMP 1 dumps it when a dump is on, whatever
 *            the layer list says.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "kernel/kernel_private.h"

/* aclmockSetNextLaunchExtents of the calling thread (count 0: none). */
static _Thread_local uint64_t tls_hint[ACLMOCK_MAX_PARAMS];
static _Thread_local uint32_t tls_nhint;

aclError aclmockSetNextLaunchExtents(const uint64_t *bytes, uint32_t count)
{
    static const char fn[] = "aclmockSetNextLaunchExtents";
    if (count > ACLMOCK_MAX_PARAMS) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'count' is %u (at most %u)", count,
                          ACLMOCK_MAX_PARAMS);
    }
    if (count > 0 && bytes == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'bytes' is NULL but 'count' is %u", count);
    }
    /* kept only while something observes tasks, like a task tag */
    tls_nhint = core_observing() ? count : 0;
    if (tls_nhint > 0) {
        memcpy(tls_hint, bytes, count * sizeof *bytes);
    }
    return ACL_SUCCESS;
}

uint64_t *kernel_take_launch_hint(uint32_t *n)
{
    *n = 0;
    if (tls_nhint == 0) {
        return NULL;
    }
    uint64_t *h = malloc(tls_nhint * sizeof *h);
    if (h != NULL) {
        memcpy(h, tls_hint, tls_nhint * sizeof *h);
        *n = tls_nhint;
    }
    tls_nhint = 0;
    return h;
}

/* The bytes of pointer argument i at p a launch observes (see above); false when it
 * observes none (not device memory, or a declared extent the run faults). */
static bool observed_extent(const kernel_launch *l, const uint8_t *block, size_t block_size, uint32_t i, void *p,
                            size_t *size, bool *declared)
{
    mock_mem_info mi;
    size_t region_left = 0;
    if (!mem_lookup_region(p, &mi, &region_left)) {
        return false; /* the run faults it, naming the argument */
    }
    size_t left = mi.size - (size_t)((uintptr_t)p - mi.base);
    uint64_t bytes = 0;
    *declared = kernel_twin_extent(l->twin, block, block_size, i, &bytes);
    if (*declared) {
        if (bytes > left) {
            return false; /* the run faults it, naming the argument */
        }
        *size = (size_t)bytes;
    } else if (i < l->nhint && l->hint[i] != 0) {
        *size = l->hint[i] < left ? (size_t)l->hint[i] : left;
    } else {
        *size = region_left;
    }
    return true;
}

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
    uint64_t bytes = 0; /* of the declared extents */
    if (t->desc.numParams != ACLMOCK_PARAMS_UNKNOWN && t->desc.numParams > 0 && block != NULL) {
        acc = calloc(t->desc.numParams, sizeof *acc);
        for (uint32_t i = 0; acc != NULL && i < t->desc.numParams; i++) {
            if (t->params[i].access == ACLMOCK_ACCESS_VALUE || t->offsets[i] + sizeof(void *) > block_size) {
                continue;
            }
            void *p = NULL;
            memcpy(&p, block + t->offsets[i], sizeof p);
            size_t size = 0;
            bool declared = false;
            if (p == NULL || !observed_extent(l, block, block_size, i, p, &size, &declared)) {
                continue;
            }
            if (declared) {
                bytes = bytes > UINT64_MAX - size ? UINT64_MAX : bytes + size;
            }
            mock_access *a = &acc[nacc++];
            a->ptr = p;
            a->size = size;
            a->mode = t->params[i].access & (MOCK_ACCESS_READ | MOCK_ACCESS_WRITE);
            a->dtype = ACL_DT_UNDEFINED;
        }
    }
    if (l->args == NULL && block != NULL) {
        mem_access_end(block, block_size);
    }
    mock_task_desc desc = {.kind = MOCK_TASK_KERNEL,
                           .name = t->name,
                           .bytes = bytes,
                           .peer_device = -1,
                           .cost_ns = cost,
                           .access = acc,
                           .naccess = nacc,
                           .dump_task = l->dump != 0};
    aclError rc = stream_enqueue_task_desc(s, task, &desc); /* frees l when refused */
    free(acc);
    return rc;
}
