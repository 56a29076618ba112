/* test_graph_kernel.c - kernel launches in captured models (acl_next_semantics.md
 * §2.6, §2.10): a launch is recorded as a KERNEL task, replayed, read back with
 * aclmdlRITaskGetParams, given new arguments between replays through a task-group
 * update and through aclmdlRITaskSetParams + aclmdlRIUpdate; its launch attributes
 * read back with aclmdlRIKernelTaskGetAttribute; a two-stream fork/join graph of
 * copies, a memset and a kernel replayed 1000 times. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

typedef struct fill_args {
    uint64_t *out;
    uint64_t v;
} fill_args;

/* out[block] = v + block */
static int32_t fill_twin(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData)
{
    (void)blockDim;
    (void)userData;
    fill_args a;
    memcpy(&a, args, sizeof a);
    a.out[blockIdx] = a.v + blockIdx;
    return 0;
}

static void read_out(const void *dev, uint64_t *host)
{
    CHECK_OK(aclrtMemcpy(host, 4 * sizeof(uint64_t), dev, 4 * sizeof(uint64_t), ACL_MEMCPY_DEVICE_TO_HOST));
}

static void test_kernel_in_graph(void)
{
    CHECK_OK(aclmockRegisterKernel("graph_fill", fill_twin, NULL, 0));
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)fill_twin, &f));
    aclrtStream s = NULL, upd = NULL, exec = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateStream(&upd));
    CHECK_OK(aclrtCreateStream(&exec));
    uint64_t *out = NULL;
    CHECK_OK(aclrtMalloc((void **)&out, 4 * sizeof(uint64_t), ACL_MEM_MALLOC_HUGE_FIRST));
    uint64_t h[4];

    fill_args a = {out, 5};
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclmdlRICaptureTaskGrpBegin(s));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, s, NULL, &a, sizeof a, NULL, 0));
    aclrtTaskGrp grp = NULL;
    CHECK_OK(aclmdlRICaptureTaskGrpEnd(s, &grp));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    read_out(out, h);
    CHECK_EQ(h[0], 0); /* recorded, not run */

    CHECK_OK(aclmdlRIExecuteAsync(ri, exec));
    CHECK_OK(aclrtSynchronizeStream(exec));
    read_out(out, h);
    CHECK_EQ(h[0], 5);
    CHECK_EQ(h[3], 8);

    /* introspection: one KERNEL task with its function, block count and arguments */
    aclrtStream ms = NULL;
    uint32_t n = 1;
    CHECK_OK(aclmdlRIGetStreams(ri, &ms, &n));
    aclmdlRITask t = NULL;
    CHECK_OK(aclmdlRIGetTasksByStream(ms, &t, &n));
    aclmdlRITaskType type;
    CHECK_OK(aclmdlRITaskGetType(t, &type));
    CHECK_EQ(type, ACL_MODEL_RI_TASK_KERNEL);
    aclmdlRITaskParams p;
    CHECK_OK(aclmdlRITaskGetParams(t, &p));
    CHECK(p.kernelTaskParams.funcHandle == f);
    CHECK_EQ(p.kernelTaskParams.numBlocks, 4);
    CHECK_EQ(p.kernelTaskParams.argsSize, sizeof a);
    CHECK(p.taskGrp == grp);

    /* task-group update: the next replay runs the launch with its new arguments */
    fill_args b = {out, 100};
    CHECK_OK(aclmdlRICaptureTaskUpdateBegin(upd, grp));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, upd, NULL, &b, sizeof b, NULL, 0));
    CHECK_OK(aclmdlRICaptureTaskUpdateEnd(upd));
    CHECK_OK(aclrtSynchronizeStream(upd));
    CHECK_OK(aclmdlRIExecuteAsync(ri, exec));
    CHECK_OK(aclrtSynchronizeStream(exec));
    read_out(out, h);
    CHECK_EQ(h[0], 100);
    CHECK_EQ(h[3], 103);

    /* SetParams + Update: other host arguments and 2 blocks */
    CHECK_OK(aclmdlRIGetTasksByStream(ms, &t, &n));
    fill_args c = {out, 7};
    CHECK_OK(aclrtMemset(out, 32, 0, 32));
    CHECK_OK(aclmdlRITaskGetParams(t, &p));
    p.kernelTaskParams.args = &c;
    p.kernelTaskParams.argsSize = sizeof c;
    p.kernelTaskParams.isHostArgs = 1;
    p.kernelTaskParams.numBlocks = 2;
    CHECK_OK(aclmdlRITaskSetParams(t, &p));
    CHECK_OK(aclmdlRIUpdate(ri));
    CHECK_OK(aclmdlRIExecute(ri, -1));
    read_out(out, h);
    CHECK_EQ(h[0], 7);
    CHECK_EQ(h[1], 8);
    CHECK_EQ(h[2], 0);
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtFree(out));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(upd));
    CHECK_OK(aclrtDestroyStream(exec));
    CHECK_OK(aclmockUnregisterKernel("graph_fill"));
}

typedef struct add_args {
    const uint64_t *in;
    uint64_t *out;
    uint64_t v;
} add_args;

/* out[block] = in[block] + v */
static int32_t add_twin(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData)
{
    (void)blockDim;
    (void)userData;
    add_args a;
    memcpy(&a, args, sizeof a);
    a.out[blockIdx] = a.in[blockIdx] + a.v;
    return 0;
}

static aclrtLaunchKernelAttr attr_u8(aclrtLaunchKernelAttrId id, uint8_t v)
{
    aclrtLaunchKernelAttr a;
    memset(&a, 0, sizeof a);
    a.id = id;
    a.value.schemMode = v; /* every 1-byte member sits at offset 0 */
    return a;
}

/* The one task of a single-stream captured model. */
static aclmdlRITask only_task(aclmdlRI ri)
{
    aclrtStream ms = NULL;
    uint32_t n = 1;
    CHECK_OK(aclmdlRIGetStreams(ri, &ms, &n));
    aclmdlRITask t = NULL;
    n = 1;
    CHECK_OK(aclmdlRIGetTasksByStream(ms, &t, &n));
    return t;
}

/* §2.10 MRI#aclmdlRIKernelTaskGetAttribute: the attributes a captured launch was given
 * read back (defaults 0); ENGINE_TYPE, BLOCKDIM_OFFSET and BLOCK_TASK_PREFETCH cannot be
 * queried; KERNEL tasks only. A cfg given to aclmdlRITaskSetParams replaces them at
 * aclmdlRIUpdate. */
static void test_kernel_task_attributes(void)
{
    CHECK_OK(aclmockRegisterKernel("graph_fill", fill_twin, NULL, 0));
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)fill_twin, &f));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    uint64_t *out = NULL;
    CHECK_OK(aclrtMalloc((void **)&out, 4 * sizeof(uint64_t), ACL_MEM_MALLOC_HUGE_FIRST));
    fill_args a = {out, 1};
    aclrtLaunchKernelAttr attrs[3];
    attrs[0] = attr_u8(ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, 1);
    attrs[1] = attr_u8(ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP, 1);
    memset(&attrs[2], 0, sizeof attrs[2]);
    attrs[2].id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US;
    attrs[2].value.timeoutUs.timeoutLow = 2500000; /* 2.5 s */
    aclrtLaunchKernelCfg cfg = {attrs, 3};
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, s, &cfg, &a, sizeof a, NULL, 0));
    CHECK_OK(aclrtMemsetAsync(out, 32, 0, 32, s));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    aclrtStream ms = NULL;
    uint32_t n = 1;
    CHECK_OK(aclmdlRIGetStreams(ri, &ms, &n));
    aclmdlRITask tasks[2] = {NULL, NULL};
    n = 2;
    CHECK_OK(aclmdlRIGetTasksByStream(ms, tasks, &n));
    aclmdlRITask t = tasks[0];

    aclrtLaunchKernelAttrValue v;
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, &v));
    CHECK_EQ(v.schemMode, 1);
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP, &v));
    CHECK_EQ(v.isDataDump, 1);
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US, &v));
    CHECK_EQ(v.timeoutUs.timeoutLow, 2500000);
    CHECK_EQ(v.timeoutUs.timeoutHigh, 0);
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT, &v));
    CHECK_EQ(v.timeout, 3); /* whole seconds, rounded up (mock choice) */
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING, &v));
    CHECK_EQ(v.enableProfiling, 0); /* not given: its default */
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE, &v));
    CHECK_EQ(v.dynUBufSize, 0);
    CHECK_EQ(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE, &v), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "ENGINE_TYPE");
    CHECK_EQ(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET, &v),
             ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH, &v),
             ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclmdlRIKernelTaskGetAttribute(t, (aclrtLaunchKernelAttrId)42, &v), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmdlRIKernelTaskGetAttribute(tasks[1], ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, &v),
             ACL_ERROR_RT_PARAM_INVALID); /* a memset is not a KERNEL task */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "not a KERNEL task");
    CHECK_EQ(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, NULL), ACL_ERROR_INVALID_PARAM);

    /* SetParams with a new cfg: staged (the attributes change at Update); the cfg is
     * copied at SetParams, so the caller may reuse it at once */
    aclmdlRITaskParams p;
    CHECK_OK(aclmdlRITaskGetParams(t, &p));
    aclrtLaunchKernelAttr nattrs[1];
    memset(nattrs, 0, sizeof nattrs);
    nattrs[0].id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
    nattrs[0].value.timeout = 7;
    aclrtLaunchKernelCfg ncfg = {nattrs, 1};
    p.kernelTaskParams.cfg = &ncfg;
    CHECK_OK(aclmdlRITaskSetParams(t, &p));
    nattrs[0].value.timeout = 9; /* too late: the staged copy is used */
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, &v));
    CHECK_EQ(v.schemMode, 1); /* not applied yet */
    CHECK_OK(aclmdlRIUpdate(ri));
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT, &v));
    CHECK_EQ(v.timeout, 7);
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, &v));
    CHECK_EQ(v.schemMode, 0); /* the new cfg replaced the attribute set */
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US, &v));
    CHECK_EQ(v.timeoutUs.timeoutLow, 7000000);

    /* a bad cfg: numAttrs without attrs is refused at SetParams; a checked-later
     * rule (TIMEOUT and TIMEOUT_US together) fails the Update with 107040 and
     * changes nothing */
    aclrtLaunchKernelCfg bad = {NULL, 1};
    p.kernelTaskParams.cfg = &bad;
    CHECK_EQ(aclmdlRITaskSetParams(t, &p), ACL_ERROR_INVALID_PARAM);
    aclrtLaunchKernelAttr both[2];
    memset(both, 0, sizeof both);
    both[0].id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
    both[0].value.timeout = 1;
    both[1].id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US;
    both[1].value.timeoutUs.timeoutLow = 1;
    aclrtLaunchKernelCfg two = {both, 2};
    p.kernelTaskParams.cfg = &two;
    CHECK_OK(aclmdlRITaskSetParams(t, &p));
    CHECK_EQ(aclmdlRIUpdate(ri), ACL_ERROR_RT_MODEL_UPDATE_FAILED);
    CHECK_OK(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT, &v));
    CHECK_EQ(v.timeout, 7);

    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_EQ(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, &v),
             ACL_ERROR_RT_PARAM_INVALID); /* the task went with its model */
    CHECK_OK(aclrtFree(out));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclmockUnregisterKernel("graph_fill"));
}

/* §2.10 aclmdlRITaskSetParams: the host argument block is copied when SetParams is
 * called (the caller may change or free it before aclmdlRIUpdate); the block that
 * aclmdlRITaskGetParams gave back (read with isHostArgs 0) can be given back as is. */
static void test_kernel_set_params_copies(void)
{
    CHECK_OK(aclmockRegisterKernel("graph_fill", fill_twin, NULL, 0));
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)fill_twin, &f));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    uint64_t *out = NULL;
    CHECK_OK(aclrtMalloc((void **)&out, 4 * sizeof(uint64_t), ACL_MEM_MALLOC_HUGE_FIRST));
    uint64_t h[4];
    fill_args a = {out, 10};
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, s, NULL, &a, sizeof a, NULL, 0));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    aclmdlRITask t = only_task(ri);

    aclmdlRITaskParams p;
    CHECK_OK(aclmdlRITaskGetParams(t, &p));
    fill_args *heap = malloc(sizeof *heap);
    CHECK(heap != NULL);
    heap->out = out;
    heap->v = 20;
    p.kernelTaskParams.args = heap;
    p.kernelTaskParams.argsSize = sizeof *heap;
    p.kernelTaskParams.isHostArgs = 1;
    CHECK_OK(aclmdlRITaskSetParams(t, &p));
    heap->v = 99; /* changed, then freed, before the Update */
    free(heap);
    CHECK_OK(aclmdlRIUpdate(ri));
    CHECK_OK(aclmdlRIExecute(ri, -1));
    read_out(out, h);
    CHECK_EQ(h[0], 20);
    CHECK_EQ(h[3], 23);

    /* GetParams -> SetParams round trip: only the block count changes */
    CHECK_OK(aclmdlRITaskGetParams(t, &p));
    CHECK_EQ(p.kernelTaskParams.isHostArgs, 0);
    p.kernelTaskParams.numBlocks = 2;
    CHECK_OK(aclmdlRITaskSetParams(t, &p));
    CHECK_OK(aclmdlRIUpdate(ri));
    CHECK_OK(aclrtMemset(out, 32, 0, 32));
    CHECK_OK(aclmdlRIExecute(ri, -1));
    read_out(out, h);
    CHECK_EQ(h[0], 20);
    CHECK_EQ(h[1], 21);
    CHECK_EQ(h[2], 0);
    /* the task's own block with a size past its end is refused */
    CHECK_OK(aclmdlRITaskGetParams(t, &p));
    p.kernelTaskParams.argsSize += 8;
    CHECK_EQ(aclmdlRITaskSetParams(t, &p), ACL_ERROR_INVALID_PARAM);

    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtFree(out));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclmockUnregisterKernel("graph_fill"));
}

/* §2.2, G-CAP2 with a kernel: s1 copies the input, forks s2 by an event; s2 runs a
 * kernel on it (out = in + 1000) and copies the result, then joins s1, which memsets
 * a buffer meanwhile and copies the result out after the join. Replayed 1000 times
 * with a new input each time: every replay sees its own input through both streams. */
static void test_two_stream_kernel_replay(void)
{
    CHECK_OK(aclmockRegisterKernel("graph_add", add_twin, NULL, 0));
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)add_twin, &f));
    aclrtStream s1 = NULL, s2 = NULL, exec = NULL;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateStream(&exec));
    aclrtEvent fork = NULL, join = NULL;
    CHECK_OK(aclrtCreateEventWithFlag(&fork, ACL_EVENT_SYNC));
    CHECK_OK(aclrtCreateEventWithFlag(&join, ACL_EVENT_SYNC));
    const size_t n = 4 * sizeof(uint64_t);
    uint64_t *in = NULL, *a = NULL, *b = NULL, *c = NULL, *d = NULL, *res = NULL;
    CHECK_OK(aclrtMalloc((void **)&in, n, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc((void **)&a, n, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc((void **)&b, n, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc((void **)&c, n, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc((void **)&d, n, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc((void **)&res, n, ACL_MEM_MALLOC_HUGE_FIRST));

    add_args k = {a, b, 1000};
    CHECK_OK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclrtMemcpyAsync(a, n, in, n, ACL_MEMCPY_DEVICE_TO_DEVICE, s1));
    CHECK_OK(aclrtRecordEvent(fork, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, fork));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, s2, NULL, &k, sizeof k, NULL, 0));
    CHECK_OK(aclrtMemcpyAsync(c, n, b, n, ACL_MEMCPY_DEVICE_TO_DEVICE, s2));
    CHECK_OK(aclrtRecordEvent(join, s2));
    CHECK_OK(aclrtMemsetAsync(d, n, 0x11, n, s1));
    CHECK_OK(aclrtStreamWaitEvent(s1, join));
    CHECK_OK(aclrtMemcpyAsync(res, n, c, n, ACL_MEMCPY_DEVICE_TO_DEVICE, s1));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s1, &ri));

    uint64_t host_in[4], got[4], dd[4];
    int bad = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        for (int j = 0; j < 4; j++) {
            host_in[j] = i * 10 + (uint64_t)j;
        }
        CHECK_OK(aclrtMemcpy(in, n, host_in, n, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK_OK(aclmdlRIExecuteAsync(ri, exec));
        CHECK_OK(aclrtSynchronizeStream(exec));
        CHECK_OK(aclrtMemcpy(got, n, res, n, ACL_MEMCPY_DEVICE_TO_HOST));
        for (int j = 0; j < 4; j++) {
            bad += got[j] != i * 10 + (uint64_t)j + 1000;
        }
    }
    CHECK_EQ(bad, 0);
    CHECK_OK(aclrtMemcpy(dd, n, d, n, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(dd[3], 0x1111111111111111ull);

    /* the kernel is a KERNEL task of the forked stream (wait, kernel, copy, record) */
    aclrtStream ms[2] = {NULL, NULL};
    uint32_t ns = 2;
    CHECK_OK(aclmdlRIGetStreams(ri, ms, &ns));
    CHECK_EQ(ns, 2);
    aclmdlRITask tasks[4];
    uint32_t nt = 4;
    CHECK_OK(aclmdlRIGetTasksByStream(ms[1], tasks, &nt));
    CHECK_EQ(nt, 4);
    aclmdlRITaskType type;
    CHECK_OK(aclmdlRITaskGetType(tasks[1], &type));
    CHECK_EQ(type, ACL_MODEL_RI_TASK_KERNEL);

    CHECK_OK(aclmdlRIDestroy(ri));
    uint64_t *bufs[] = {in, a, b, c, d, res};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        CHECK_OK(aclrtFree(bufs[i]));
    }
    CHECK_OK(aclrtDestroyEvent(fork));
    CHECK_OK(aclrtDestroyEvent(join));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
    CHECK_OK(aclrtDestroyStream(exec));
    CHECK_OK(aclmockUnregisterKernel("graph_add"));
}

/* §2.6 + §2.10 under concurrency (for TSAN): a task-group update ends on its stream
 * (the swap of the group's task runs on that stream's worker) while this thread reads
 * and edits the same task (GetParams, SetParams, Update) without waiting for it. Each
 * round's run sees one whole version of the arguments: this round's, or the one the
 * previous round ran with (GetParams read it before the swap and the Update applied it
 * after; that can repeat, so it is not always the previous round's update). */
static void test_group_update_races_edit(void)
{
    CHECK_OK(aclmockRegisterKernel("graph_fill", fill_twin, NULL, 0));
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)fill_twin, &f));
    aclrtStream s = NULL, upd = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateStream(&upd));
    uint64_t *out = NULL;
    CHECK_OK(aclrtMalloc((void **)&out, 4 * sizeof(uint64_t), ACL_MEM_MALLOC_HUGE_FIRST));
    fill_args a = {out, 0};
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclmdlRICaptureTaskGrpBegin(s));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, s, NULL, &a, sizeof a, NULL, 0));
    aclrtTaskGrp grp = NULL;
    CHECK_OK(aclmdlRICaptureTaskGrpEnd(s, &grp));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    aclmdlRITask t = only_task(ri);
    int bad = 0;
    uint64_t h[4];
    uint64_t prev = 0; /* what the previous round ran with */
    for (uint64_t i = 1; i <= 100; i++) {
        fill_args b = {out, i * 10};
        CHECK_OK(aclmdlRICaptureTaskUpdateBegin(upd, grp));
        CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, upd, NULL, &b, sizeof b, NULL, 0));
        CHECK_OK(aclmdlRICaptureTaskUpdateEnd(upd));
        aclmdlRITaskParams p;
        CHECK_OK(aclmdlRITaskGetParams(t, &p));
        p.kernelTaskParams.numBlocks = 4;
        CHECK_OK(aclmdlRITaskSetParams(t, &p));
        CHECK_OK(aclmdlRIUpdate(ri));
        CHECK_OK(aclrtSynchronizeStream(upd));
        CHECK_OK(aclmdlRIExecute(ri, -1));
        read_out(out, h);
        bad += (h[0] != i * 10 && h[0] != prev) || h[3] != h[0] + 3;
        prev = h[0];
    }
    CHECK_EQ(bad, 0);
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtFree(out));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(upd));
    CHECK_OK(aclmockUnregisterKernel("graph_fill"));
}

/* The race of test_group_update_races_edit, made deterministic: a task-group update
 * swaps the launch between aclmdlRITaskGetParams and aclmdlRITaskSetParams. The block
 * GetParams gave is still the task's own (now swapped-out) host block: SetParams copies
 * it and the replay runs with those arguments (failed before: it was taken for a device
 * block, freed by the run, and the replay faulted with 507015). */
static void test_group_update_between_get_and_set(void)
{
    CHECK_OK(aclmockRegisterKernel("graph_fill", fill_twin, NULL, 0));
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)fill_twin, &f));
    aclrtStream s = NULL, upd = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateStream(&upd));
    uint64_t *out = NULL;
    CHECK_OK(aclrtMalloc((void **)&out, 4 * sizeof(uint64_t), ACL_MEM_MALLOC_HUGE_FIRST));
    fill_args a = {out, 10};
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclmdlRICaptureTaskGrpBegin(s));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, s, NULL, &a, sizeof a, NULL, 0));
    aclrtTaskGrp grp = NULL;
    CHECK_OK(aclmdlRICaptureTaskGrpEnd(s, &grp));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    aclmdlRITask t = only_task(ri);
    aclmdlRITaskParams p;
    CHECK_OK(aclmdlRITaskGetParams(t, &p)); /* the block of v = 10 */
    fill_args b = {out, 20};
    CHECK_OK(aclmdlRICaptureTaskUpdateBegin(upd, grp));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, upd, NULL, &b, sizeof b, NULL, 0));
    CHECK_OK(aclmdlRICaptureTaskUpdateEnd(upd));
    CHECK_OK(aclrtSynchronizeStream(upd)); /* swapped: the v = 10 launch is retired */
    CHECK_OK(aclmdlRITaskSetParams(t, &p));
    CHECK_OK(aclmdlRIUpdate(ri));
    CHECK_OK(aclmdlRIExecute(ri, -1));
    uint64_t h[4];
    read_out(out, h);
    CHECK_EQ(h[0], 10);
    CHECK_EQ(h[3], 13);
    CHECK_OK(aclmdlRIExecute(ri, -1)); /* the staged copy outlives the retired block */
    read_out(out, h);
    CHECK_EQ(h[0], 10);
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtFree(out));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(upd));
    CHECK_OK(aclmockUnregisterKernel("graph_fill"));
}

static _Atomic int g_gate;

/* A host function that holds its stream until g_gate opens. */
static void wait_gate(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&g_gate, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* §2.6 + §2.9 (mock choice: the docs are silent): a model destroyed while a task-group
 * update of it is still queued on the update stream; the update is dropped when its
 * turn comes (no use of the freed group: ASAN failed before), the stream stays usable. */
static void test_destroy_with_update_queued(void)
{
    CHECK_OK(aclmockRegisterKernel("graph_fill", fill_twin, NULL, 0));
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)fill_twin, &f));
    aclrtStream s = NULL, upd = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateStream(&upd));
    uint64_t *out = NULL;
    CHECK_OK(aclrtMalloc((void **)&out, 4 * sizeof(uint64_t), ACL_MEM_MALLOC_HUGE_FIRST));
    fill_args a = {out, 1};
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclmdlRICaptureTaskGrpBegin(s));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, s, NULL, &a, sizeof a, NULL, 0));
    aclrtTaskGrp grp = NULL;
    CHECK_OK(aclmdlRICaptureTaskGrpEnd(s, &grp));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));

    __atomic_store_n(&g_gate, 0, __ATOMIC_RELEASE);
    CHECK_OK(aclrtLaunchHostFunc(upd, wait_gate, NULL));
    fill_args b = {out, 2};
    CHECK_OK(aclmdlRICaptureTaskUpdateBegin(upd, grp));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 4, upd, NULL, &b, sizeof b, NULL, 0));
    CHECK_OK(aclmdlRICaptureTaskUpdateEnd(upd)); /* the swap waits behind wait_gate */
    CHECK_OK(aclmdlRIDestroy(ri));
    __atomic_store_n(&g_gate, 1, __ATOMIC_RELEASE);
    CHECK_OK(aclrtSynchronizeStream(upd));
    CHECK_OK(aclrtMemsetAsync(out, 32, 0, 32, upd));
    CHECK_OK(aclrtSynchronizeStream(upd));
    CHECK_OK(aclrtFree(out));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(upd));
    CHECK_OK(aclmockUnregisterKernel("graph_fill"));
}

int main(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_kernel_in_graph);
    RUN_TEST(test_kernel_task_attributes);
    RUN_TEST(test_kernel_set_params_copies);
    RUN_TEST(test_two_stream_kernel_replay);
    RUN_TEST(test_group_update_races_edit);
    RUN_TEST(test_group_update_between_get_and_set);
    RUN_TEST(test_destroy_with_update_queued);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
