/*
 * kernel/kernel.h - what the kernel subsystem (src/kernel/: binaries, host twins,
 * argument lists, launches) offers to higher subsystems: a kernel launch as one
 * self-contained stream task.
 *
 * Every launch API builds one task object and enqueues it with stream_enqueue_task
 * (kernel_task_run, task, kernel_task_free, and its KERNEL task description for
 * captures: launch.c). The object owns
 * everything the launch needs: a copy of its argument block (or, for aclrtLaunchKernel
 * and V2, the device address of the user's block), the device copy of its placeholder
 * data, the resolved twin and a reference on the binary (so an unload cannot pull the
 * code from under it). Running it does not change it (a fault's report is kept per
 * thread), so a captured task can be run again and again (graph replay), also on two
 * streams at once, and is freed once; only kernel_task_set_params changes it, which must
 * not overlap a run. Every function declared here starts with kernel_; the private
 * helpers are in kernel/kernel_private.h.
 */
#ifndef MOCK_KERNEL_H
#define MOCK_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "stream/stream.h"

/* The task function and free function of a kernel launch (the mock_task_fn and
 * free_arg handed to stream_enqueue). */
MOCK_HIDDEN aclError kernel_task_run(void *task);
MOCK_HIDDEN void kernel_task_free(void *task);

/* True when (fn, arg) enqueued on a stream is a kernel launch. */
MOCK_HIDDEN bool kernel_task_is(mock_task_fn fn);

/* An independent copy of a launch task (its own argument block and placeholder device
 * memory, a new reference on the binary and twin), or NULL when out of memory. */
MOCK_HIDDEN void *kernel_task_clone(const void *task);

/* aclmdlRITaskGetParams of a kernel task: funcHandle, args (the task's block: host
 * memory, isHostArgs 1, or the user's device block for aclrtLaunchKernel/V2,
 * isHostArgs 0), argsSize, numBlocks; cfg is NULL (the attributes were applied at
 * launch). */
MOCK_HIDDEN void kernel_task_get_params(const void *task, aclmdlRIKernelTaskParams *out);

/* aclmdlRITaskSetParams of a kernel task: a new argument block (copied when
 * isHostArgs is 1; placeholders are not updated) and/or block count (numBlocks 0 keeps
 * it); the function cannot change. Errors are recorded under fn. */
MOCK_HIDDEN aclError kernel_task_set_params(const char *fn, void *task, const aclmdlRIKernelTaskParams *p);

/* aclmdlRIKernelTaskGetAttribute of a kernel task: the value of a launch attribute
 * (its default, 0, when the launch did not give it; TIMEOUT in whole seconds rounded
 * up, TIMEOUT_US in microseconds, whichever of the two was given). ENGINE_TYPE,
 * BLOCKDIM_OFFSET and BLOCK_TASK_PREFETCH cannot be queried (107000); an unknown id is
 * 100000. Errors are recorded under fn. Must not overlap set_params. */
MOCK_HIDDEN aclError kernel_task_get_attr(const char *fn, const void *task, int id, aclrtLaunchKernelAttrValue *out);

#endif /* MOCK_KERNEL_H */
