/* test_graph_build.c - models built from persistent streams (acl_next_semantics.md
 * §2.8), labels and stream control inside them (§4), and conditional tasks of
 * captured models (§2.7). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

#define FLAG_HEAD 0x0u
#define FLAG_DEFAULT 0x7FFFFFFFu

static aclrtStream persistent(void)
{
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStreamWithConfig(&s, 0, ACL_STREAM_PERSISTENT));
    return s;
}

static uint64_t read_u64(const void *dev)
{
    uint64_t v = 0;
    CHECK_OK(aclrtMemcpy(&v, 8, dev, 8, ACL_MEMCPY_DEVICE_TO_HOST));
    return v;
}

static void write_u32(void *dev, uint32_t v)
{
    CHECK_OK(aclrtMemcpy(dev, 4, &v, 4, ACL_MEMCPY_HOST_TO_DEVICE));
}

/* §2.8: BuildBegin -> BindStream -> tasks -> EndTask -> BuildEnd -> Execute ->
 * UnbindStream -> Destroy, with the documented refusals. */
static void test_build_and_execute(void)
{
    aclmdlRI m = NULL;
    CHECK_EQ(aclmdlRIBuildBegin(&m, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclmdlRIBuildBegin(&m, 0));
    aclrtStream head = persistent(), side = persistent(), plain = NULL, exec = NULL;
    CHECK_OK(aclrtCreateStream(&plain));
    CHECK_OK(aclrtCreateStream(&exec));
    CHECK_EQ(aclmdlRIBindStream(m, plain, FLAG_HEAD), ACL_ERROR_RT_PARAM_INVALID); /* not persistent */
    CHECK_EQ(aclmdlRIBindStream(m, NULL, FLAG_HEAD), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmdlRIBindStream(m, head, 5), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclmdlRIBindStream(m, head, FLAG_HEAD));
    CHECK_EQ(aclmdlRIBindStream(m, head, FLAG_HEAD), ACL_ERROR_RT_PARAM_INVALID); /* one model per stream */
    aclmdlRI other = NULL;
    CHECK_OK(aclmdlRIBuildBegin(&other, 0));
    CHECK_EQ(aclmdlRIBindStream(other, head, FLAG_HEAD), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclmdlRIDestroy(other));
    CHECK_OK(aclmdlRIBindStream(m, side, FLAG_DEFAULT));

    void *a = NULL, *b = NULL;
    CHECK_OK(aclrtMalloc(&a, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&b, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtValueWrite(a, 5, 0, head));
    CHECK_OK(aclrtActiveStream(side, head)); /* runs `side` in parallel */
    CHECK_OK(aclrtValueWrite(b, 9, 0, side));
    /* not executed at build time */
    CHECK_EQ(read_u64(a), 0);
    CHECK_EQ(aclmdlRIExecuteAsync(m, exec), ACL_ERROR_RT_MODEL_EXECUTE); /* not built yet */
    CHECK_OK(aclmdlRIEndTask(m, head));
    CHECK_OK(aclmdlRIEndTask(m, side));
    CHECK_EQ(aclmdlRIBuildEnd(m, (void *)1), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclmdlRIBuildEnd(m, NULL));
    CHECK_EQ(aclmdlRIBuildEnd(m, NULL), ACL_ERROR_RT_PARAM_INVALID);

    CHECK_OK(aclmdlRIExecute(m, 5000));
    CHECK_EQ(read_u64(a), 5);
    CHECK_EQ(read_u64(b), 9);
    CHECK_OK(aclrtMemset(a, 64, 0, 64));
    CHECK_OK(aclrtMemset(b, 64, 0, 64));
    for (int i = 0; i < 20; i++) {
        CHECK_OK(aclmdlRIExecuteAsync(m, exec));
    }
    CHECK_OK(aclrtSynchronizeStream(exec));
    CHECK_EQ(read_u64(b), 9);

    /* introspection of a built model: the bound streams themselves */
    uint32_t ns = 0;
    CHECK_OK(aclmdlRIGetStreams(m, NULL, &ns));
    CHECK_EQ(ns, 2);
    uint32_t nt = 0;
    CHECK_OK(aclmdlRIGetTasksByStream(head, NULL, &nt));
    CHECK_EQ(nt, 2);

    CHECK_EQ(aclmdlRIUnbindStream(m, plain), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclmdlRIUnbindStream(m, side));
    CHECK_EQ(aclmdlRIUnbindStream(m, side), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclmdlRIAbort(m)); /* not running: nothing to stop */
    CHECK_OK(aclmdlRIDestroy(m));
    CHECK_OK(aclrtDestroyStream(head));
    CHECK_OK(aclrtDestroyStream(side));
    CHECK_OK(aclrtDestroyStream(plain));
    CHECK_OK(aclrtDestroyStream(exec));
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtFree(b));
}

/* §4: labels in a built model. Stream `main` writes a counter, switches by an
 * index word to label L1 (on stream s1) or L2 (on stream s2); an index past
 * the end jumps to the last label. */
static void test_labels(void)
{
    aclrtLabel l1 = NULL, l2 = NULL, spare = NULL;
    CHECK_OK(aclrtCreateLabel(&l1));
    CHECK_OK(aclrtCreateLabel(&l2));
    CHECK_OK(aclrtCreateLabel(&spare));
    aclrtLabel v[2] = {l1, l2};
    aclrtLabelList list = NULL;
    CHECK_EQ(aclrtCreateLabelList(v, 0, &list), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCreateLabelList(v, 65536, &list), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtCreateLabelList(v, 2, &list));

    aclrtStream plain = NULL;
    CHECK_OK(aclrtCreateStream(&plain));
    CHECK_EQ(aclrtSetLabel(l1, plain), ACL_ERROR_RT_PARAM_INVALID); /* not bound to a model */

    aclmdlRI m = NULL;
    CHECK_OK(aclmdlRIBuildBegin(&m, 0));
    aclrtStream main_s = persistent(), s1 = persistent(), s2 = persistent();
    CHECK_OK(aclmdlRIBindStream(m, main_s, FLAG_HEAD));
    CHECK_OK(aclmdlRIBindStream(m, s1, FLAG_DEFAULT));
    CHECK_OK(aclmdlRIBindStream(m, s2, FLAG_DEFAULT));
    void *idx = NULL, *out = NULL;
    CHECK_OK(aclrtMalloc(&idx, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&out, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    char host_word[8];
    CHECK_EQ(aclrtSwitchLabelByIndex(host_word, 2, list, main_s), ACL_ERROR_RT_PARAM_INVALID); /* not device */
    CHECK_EQ(aclrtSwitchLabelByIndex(idx, 3, list, main_s), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtSwitchLabelByIndex(idx, 2, list, main_s));
    CHECK_OK(aclrtValueWrite(out, 666, 0, main_s)); /* never reached: the stream stops at the switch */
    CHECK_OK(aclrtSetLabel(l1, s1));
    CHECK_EQ(aclrtSetLabel(l1, s1), ACL_ERROR_RT_PARAM_INVALID); /* EE1018: set once */
    CHECK_OK(aclrtValueWrite(out, 100, 0, s1));
    CHECK_OK(aclrtSetLabel(l2, s2));
    CHECK_OK(aclrtValueWrite(out, 200, 0, s2));
    CHECK_OK(aclmdlRIBuildEnd(m, NULL));
    CHECK_EQ(aclrtSetLabel(spare, s1), ACL_ERROR_RT_PARAM_INVALID); /* building finished */

    write_u32(idx, 0);
    CHECK_OK(aclmdlRIExecute(m, -1));
    CHECK_EQ(read_u64(out), 100);
    write_u32(idx, 1);
    CHECK_OK(aclmdlRIExecute(m, -1));
    CHECK_EQ(read_u64(out), 200);
    write_u32(idx, 0);
    CHECK_OK(aclmdlRIExecute(m, -1));
    CHECK_EQ(read_u64(out), 100);
    write_u32(idx, 7); /* past the end: the last label */
    CHECK_OK(aclmdlRIExecute(m, -1));
    CHECK_EQ(read_u64(out), 200);

    CHECK_OK(aclrtDestroyLabelList(list)); /* the model keeps what it uses */
    CHECK_EQ(aclrtDestroyLabelList(list), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtDestroyLabel(l1));
    CHECK_OK(aclrtDestroyLabel(l2));
    CHECK_OK(aclrtDestroyLabel(spare));
    CHECK_EQ(aclrtDestroyLabel(spare), ACL_ERROR_RT_PARAM_INVALID);
    write_u32(idx, 0);
    CHECK_OK(aclmdlRIExecute(m, -1));
    CHECK_EQ(read_u64(out), 100);
    CHECK_OK(aclmdlRIDestroy(m));
    CHECK_OK(aclrtDestroyStream(main_s));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
    CHECK_OK(aclrtDestroyStream(plain));
    CHECK_OK(aclrtFree(idx));
    CHECK_OK(aclrtFree(out));
}

/* §4 aclrtSwitchStream: the true stream runs when the condition holds and the
 * current stream stops; otherwise the current stream continues. A switch to a
 * label on the switching stream itself jumps within that stream. */
static void test_switch_stream_and_loop(void)
{
    aclmdlRI m = NULL;
    CHECK_OK(aclmdlRIBuildBegin(&m, 0));
    aclrtStream main_s = persistent(), t = persistent();
    CHECK_OK(aclmdlRIBindStream(m, main_s, FLAG_HEAD));
    CHECK_OK(aclmdlRIBindStream(m, t, FLAG_DEFAULT));
    void *left = NULL, *right = NULL, *out = NULL;
    CHECK_OK(aclrtMalloc(&left, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&right, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&out, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(aclrtSwitchStream(left, ACL_RT_GREATER, right, ACL_RT_SWITCH_INT32, t, t, main_s),
             ACL_ERROR_INVALID_PARAM); /* falseStream must be NULL */
    CHECK_EQ(aclrtSwitchStream(left, (aclrtCondition)9, right, ACL_RT_SWITCH_INT32, t, NULL, main_s),
             ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtSwitchStream(left, ACL_RT_GREATER, right, ACL_RT_SWITCH_INT32, t, NULL, main_s));
    CHECK_OK(aclrtValueWrite(out, 1, 0, main_s)); /* the false path */
    CHECK_OK(aclrtValueWrite(out, 2, 0, t));      /* the true path */
    CHECK_OK(aclmdlRIBuildEnd(m, NULL));
    write_u32(left, 5);
    write_u32(right, 3);
    CHECK_OK(aclmdlRIExecute(m, -1));
    CHECK_EQ(read_u64(out), 2);
    write_u32(left, (uint32_t)-1); /* signed compare: -1 > 3 is false */
    CHECK_OK(aclmdlRIExecute(m, -1));
    CHECK_EQ(read_u64(out), 1);
    CHECK_OK(aclmdlRIDestroy(m));

    /* a jump forward on the same stream: idx 0 -> both writes, idx 1 -> the second only */
    aclrtLabel la = NULL, lb = NULL;
    CHECK_OK(aclrtCreateLabel(&la));
    CHECK_OK(aclrtCreateLabel(&lb));
    aclrtLabel v[2] = {la, lb};
    aclrtLabelList list = NULL;
    CHECK_OK(aclrtCreateLabelList(v, 2, &list));
    CHECK_OK(aclmdlRIBuildBegin(&m, 0));
    aclrtStream solo = persistent();
    CHECK_OK(aclmdlRIBindStream(m, solo, FLAG_HEAD));
    CHECK_OK(aclrtSwitchLabelByIndex(left, 2, list, solo));
    CHECK_OK(aclrtSetLabel(la, solo));
    CHECK_OK(aclrtValueWrite(out, 10, 0, solo));
    CHECK_OK(aclrtSetLabel(lb, solo));
    CHECK_OK(aclrtValueWrite(right, 20, 0, solo));
    CHECK_OK(aclmdlRIBuildEnd(m, NULL));
    CHECK_OK(aclrtMemset(out, 64, 0, 64));
    CHECK_OK(aclrtMemset(right, 64, 0, 64));
    write_u32(left, 1);
    CHECK_OK(aclmdlRIExecute(m, -1));
    CHECK_EQ(read_u64(out), 0);
    CHECK_EQ(read_u64(right), 20);
    write_u32(left, 0);
    CHECK_OK(aclmdlRIExecute(m, -1));
    CHECK_EQ(read_u64(out), 10);
    CHECK_OK(aclmdlRIDestroy(m));
    CHECK_OK(aclrtDestroyLabelList(list));
    CHECK_OK(aclrtDestroyLabel(la));
    CHECK_OK(aclrtDestroyLabel(lb));
    CHECK_OK(aclrtDestroyStream(solo));
    CHECK_OK(aclrtDestroyStream(main_s));
    CHECK_OK(aclrtDestroyStream(t));
    CHECK_OK(aclrtFree(left));
    CHECK_OK(aclrtFree(right));
    CHECK_OK(aclrtFree(out));
}

/* §2.7: an IF with two branches (ASSIGN_DEFAULT resets the word every run),
 * and a WHILE whose body counts its condition word down through a SWITCH with
 * one case per value (nested conditional tasks). */
static void test_cond_tasks(void)
{
    aclrtStream s = NULL, exec = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateStream(&exec));
    void *out = NULL;
    CHECK_OK(aclrtMalloc(&out, 64, ACL_MEM_MALLOC_HUGE_FIRST));

    /* built models have no condition handles */
    aclmdlRI built = NULL;
    CHECK_OK(aclmdlRIBuildBegin(&built, 0));
    aclmdlRICondHandle h = NULL;
    CHECK_EQ(aclmdlRICondHandleCreate(built, 0, 0, &h), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclmdlRIDestroy(built));

    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    aclmdlRI root = NULL;
    aclmdlRICaptureStatus st;
    CHECK_OK(aclmdlRICaptureGetInfo(s, &st, &root));
    CHECK_OK(aclmdlRICondHandleCreate(root, 1, ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT, &h));
    uint64_t *cond = NULL;
    CHECK_OK(aclmdlRICondHandleGetCondPtr(h, &cond));
    aclmdlRI br[2] = {NULL, NULL};
    aclmdlRICondTaskParams p = {h, ACL_MODEL_RI_COND_TYPE_IF, 2, br};
    CHECK_EQ(aclmdlRIAddCondTask(p, s, 1), ACL_ERROR_INVALID_PARAM); /* flags */
    aclmdlRICondTaskParams bad = {h, ACL_MODEL_RI_COND_TYPE_WHILE, 2, br};
    CHECK_EQ(aclmdlRIAddCondTask(bad, s, 0), ACL_ERROR_INVALID_PARAM); /* WHILE takes 1 */
    CHECK_OK(aclmdlRIAddCondTask(p, s, 0));
    CHECK_EQ(aclmdlRIAddCondTask(p, s, 0), ACL_ERROR_INVALID_PARAM); /* handle used */
    CHECK(br[0] != NULL && br[1] != NULL);
    CHECK_EQ(aclmdlRIDestroy(br[0]), ACL_ERROR_RT_PARAM_INVALID); /* freed with the root */
    aclrtStream bs = NULL;
    CHECK_OK(aclrtCreateStream(&bs));
    /* the parent cannot end while a branch captures (107045) */
    CHECK_OK(aclmdlRICaptureToModelRIBegin(bs, br[0], ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    aclmdlRI ended = NULL;
    CHECK_EQ(aclmdlRICaptureEnd(s, &ended), ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING);
    CHECK_OK(aclrtValueWrite(out, 111, 0, bs));
    CHECK_OK(aclmdlRICaptureEnd(bs, NULL));
    CHECK_EQ(aclmdlRICaptureToModelRIBegin(bs, br[0], ACL_MODEL_RI_CAPTURE_MODE_GLOBAL),
             ACL_ERROR_RT_PARAM_INVALID); /* captured once */
    CHECK_OK(aclmdlRICaptureToModelRIBegin(bs, br[1], ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclrtValueWrite(out, 222, 0, bs));
    CHECK_OK(aclmdlRICaptureEnd(bs, NULL));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    CHECK(ri == root);
    CHECK_EQ(aclmdlRICondHandleCreate(ri, 0, 0, &h), ACL_ERROR_INVALID_PARAM); /* capture ended */

    CHECK_OK(aclmdlRIExecuteAsync(ri, exec)); /* ASSIGN_DEFAULT: cond = 1 -> branch 0 */
    CHECK_OK(aclrtSynchronizeStream(exec));
    CHECK_EQ(read_u64(out), 111);
    CHECK_EQ(read_u64(cond), 1);
    CHECK_OK(aclmdlRIDestroy(ri));

    /* WHILE: the body counts a word down through a SWITCH on it (0 ends the loop) */
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclmdlRICaptureGetInfo(s, &st, &root));
    aclmdlRICondHandle wh = NULL, sh = NULL;
    CHECK_OK(aclmdlRICondHandleCreate(root, 0, 0, &wh));
    CHECK_OK(aclmdlRICondHandleCreate(root, 0, 0, &sh));
    uint64_t *wptr = NULL, *sptr = NULL;
    CHECK_OK(aclmdlRICondHandleGetCondPtr(wh, &wptr));
    CHECK_OK(aclmdlRICondHandleGetCondPtr(sh, &sptr));
    aclmdlRI body[1] = {NULL};
    aclmdlRICondTaskParams wp = {wh, ACL_MODEL_RI_COND_TYPE_WHILE, 1, body};
    CHECK_OK(aclmdlRIAddCondTask(wp, s, 0));
    /* the body: copy the while word into the switch word, switch on it */
    CHECK_OK(aclmdlRICaptureToModelRIBegin(bs, body[0], ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclrtMemcpyAsync(sptr, 8, wptr, 8, ACL_MEMCPY_DEVICE_TO_DEVICE, bs));
    aclmdlRI cases[4] = {NULL, NULL, NULL, NULL};
    aclmdlRICondTaskParams sp = {sh, ACL_MODEL_RI_COND_TYPE_SWITCH, 4, cases};
    CHECK_OK(aclmdlRIAddCondTask(sp, bs, 0));
    CHECK_OK(aclmdlRICaptureEnd(bs, NULL));
    aclrtStream cs = NULL;
    CHECK_OK(aclrtCreateStream(&cs));
    for (int i = 0; i < 4; i++) { /* case i: the while word becomes i - 1, out += 1 << i */
        CHECK_OK(aclmdlRICaptureToModelRIBegin(cs, cases[i], ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
        CHECK_OK(aclrtValueWrite(wptr, (uint64_t)(i > 0 ? i - 1 : 0), 0, cs));
        CHECK_OK(aclmdlRICaptureEnd(cs, NULL));
    }
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    CHECK_OK(aclrtMemset(wptr, 8, 0, 8));
    uint64_t three = 3;
    CHECK_OK(aclrtMemcpy(wptr, 8, &three, 8, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclmdlRIExecute(ri, -1));
    CHECK_EQ(read_u64(wptr), 0); /* 3 -> 2 -> 1 -> 0 */
    CHECK_EQ(read_u64(sptr), 1); /* the last switch value */
    CHECK_OK(aclmdlRIDestroy(ri));

    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(bs));
    CHECK_OK(aclrtDestroyStream(cs));
    CHECK_OK(aclrtDestroyStream(exec));
    CHECK_OK(aclrtFree(out));
}

int main(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_build_and_execute);
    RUN_TEST(test_labels);
    RUN_TEST(test_switch_stream_and_loop);
    RUN_TEST(test_cond_tasks);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
