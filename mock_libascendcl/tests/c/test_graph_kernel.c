/* test_graph_kernel.c - kernel launches in captured models (acl_next_semantics.md
 * §2.6, §2.10): a launch is recorded as a KERNEL task, replayed, read back with
 * aclmdlRITaskGetParams, given new arguments between replays through a task-group
 * update and through aclmdlRITaskSetParams + aclmdlRIUpdate. */
#include <stdint.h>
#include <string.h>

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
    aclrtLaunchKernelAttrValue v;
    CHECK_EQ(aclmdlRIKernelTaskGetAttribute(t, ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, &v),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT); /* attributes of captured kernels: not simulated */

    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtFree(out));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(upd));
    CHECK_OK(aclrtDestroyStream(exec));
    CHECK_OK(aclmockUnregisterKernel("graph_fill"));
}

int main(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_kernel_in_graph);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
