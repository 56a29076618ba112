/* test_mbuf.c - the shared-buffer calls of acl_rt.h (aclrtAllocBuf ... aclrtGetBufChainNum):
 * documented as reserved (the real runtime refuses them); the mock implements the
 * documented rules of acl_next_semantics.md section 5.5. */
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static void test_alloc_data_and_length(void)
{
    aclrtMbuf buf = NULL;
    CHECK_EQ(aclrtAllocBuf(&buf, 64), ACL_ERROR_RT_CONTEXT_NULL); /* device memory: needs a context */
    CHECK_OK(aclrtSetDevice(0));
    int64_t allocs = aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS);
    CHECK_EQ(aclrtAllocBuf(&buf, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtAllocBuf(&buf, ((size_t)4 << 30) + 1), ACL_ERROR_INVALID_PARAM); /* <= 4 GB */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtAllocBuf: argument 'size'");
    CHECK_EQ(aclrtAllocBuf(NULL, 64), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtAllocBuf(&buf, 100));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), allocs + 1);
    void *data = NULL;
    size_t size = 0;
    CHECK_OK(aclrtGetBufData(buf, &data, &size));
    CHECK_EQ(size, 100);
    aclrtPtrAttributes attr;
    CHECK_OK(aclrtPointerGetAttributes(data, &attr));
    CHECK_EQ(attr.location.type, ACL_MEM_LOCATION_TYPE_DEVICE); /* a device-side address */
    /* fill the data area, then set the valid length (smaller than the area) */
    char host[100];
    memset(host, 'x', sizeof host);
    CHECK_OK(aclrtMemcpy(data, size, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
    size_t len = 9;
    CHECK_OK(aclrtGetBufDataLen(buf, &len));
    CHECK_EQ(len, 0); /* 0 until set */
    CHECK_OK(aclrtSetBufDataLen(buf, 99));
    CHECK_EQ(aclrtSetBufDataLen(buf, 100), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtGetBufDataLen(buf, &len));
    CHECK_EQ(len, 99);
    CHECK_OK(aclrtFreeBuf(buf));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), allocs);
    /* stale and foreign handles: errors, never crashes */
    CHECK_EQ(aclrtFreeBuf(buf), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetBufData(buf, &data, &size), ACL_ERROR_INVALID_PARAM);
    int junk = 0;
    CHECK_EQ(aclrtSetBufDataLen(&junk, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "is not a live buffer");
}

static void test_user_data(void)
{
    aclrtMbuf buf = NULL;
    CHECK_OK(aclrtAllocBuf(&buf, 16));
    unsigned char in[96], out[96];
    for (int i = 0; i < 96; i++) {
        in[i] = (unsigned char)(i + 1);
    }
    CHECK_OK(aclrtSetBufUserData(buf, in, 96, 0));
    CHECK_OK(aclrtGetBufUserData(buf, out, 96, 0));
    CHECK(memcmp(in, out, 96) == 0);
    CHECK_OK(aclrtSetBufUserData(buf, in, 6, 90)); /* offset + size == 96 */
    CHECK_OK(aclrtGetBufUserData(buf, out, 6, 90));
    CHECK(memcmp(in, out, 6) == 0);
    CHECK_EQ(aclrtSetBufUserData(buf, in, 7, 90), ACL_ERROR_INVALID_PARAM); /* > 96 */
    CHECK_EQ(aclrtGetBufUserData(buf, out, 1, 96), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetBufUserData(buf, out, SIZE_MAX, 1), ACL_ERROR_INVALID_PARAM); /* no overflow */
    CHECK_EQ(aclrtSetBufUserData(buf, NULL, 1, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtFreeBuf(buf));
}

static void test_copy_ref_shares_data(void)
{
    aclrtMbuf a = NULL, b = NULL;
    CHECK_OK(aclrtAllocBuf(&a, 32));
    CHECK_OK(aclrtSetBufDataLen(a, 5));
    uint32_t tag = 0xfeedu;
    CHECK_OK(aclrtSetBufUserData(a, &tag, sizeof tag, 0));
    int64_t allocs = aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS);
    CHECK_OK(aclrtCopyBufRef(a, &b));
    CHECK(b != NULL && b != a);
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), allocs); /* a reference, not a copy */
    void *da = NULL, *db = NULL;
    size_t sa = 0, sb = 0, len = 0;
    CHECK_OK(aclrtGetBufData(a, &da, &sa));
    CHECK_OK(aclrtGetBufData(b, &db, &sb));
    CHECK(da == db && sa == sb);
    CHECK_OK(aclrtGetBufDataLen(b, &len));
    CHECK_EQ(len, 5);
    uint32_t got = 0;
    CHECK_OK(aclrtGetBufUserData(b, &got, sizeof got, 0));
    CHECK_EQ(got, 0xfeedu);
    /* the data area lives until its last buffer goes */
    CHECK_OK(aclrtFreeBuf(a));
    char byte = 7;
    CHECK_OK(aclrtMemcpy(db, sb, &byte, 1, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), allocs);
    CHECK_OK(aclrtFreeBuf(b));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), allocs - 1);
    CHECK_EQ(aclrtCopyBufRef(a, &b), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCopyBufRef(NULL, &b), ACL_ERROR_INVALID_PARAM);
}

static void test_chains(void)
{
    aclrtMbuf head = NULL, bufs[128];
    CHECK_OK(aclrtAllocBuf(&head, 8));
    uint32_t n = 0;
    CHECK_OK(aclrtGetBufChainNum(head, &n));
    CHECK_EQ(n, 1);
    for (int i = 0; i < 127; i++) {
        CHECK_OK(aclrtAllocBuf(&bufs[i], 8));
        CHECK_OK(aclrtAppendBufChain(head, bufs[i]));
    }
    CHECK_OK(aclrtGetBufChainNum(head, &n));
    CHECK_EQ(n, 128);
    /* at most 128 buffers in a chain */
    CHECK_OK(aclrtAllocBuf(&bufs[127], 8));
    CHECK_EQ(aclrtAppendBufChain(head, bufs[127]), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "128");
    aclrtMbuf got = NULL;
    CHECK_OK(aclrtGetBufFromChain(head, 0, &got));
    CHECK(got == head);
    CHECK_OK(aclrtGetBufFromChain(head, 5, &got));
    CHECK(got == bufs[4]);
    CHECK_EQ(aclrtGetBufFromChain(head, 128, &got), ACL_ERROR_INVALID_PARAM);
    /* a member is not a head and cannot be chained again or freed alone */
    CHECK_EQ(aclrtGetBufChainNum(bufs[0], &n), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtAppendBufChain(bufs[127], bufs[0]), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtAppendBufChain(head, head), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtFreeBuf(bufs[3]), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "free the chain's head");
    /* freeing the head frees the chain */
    int64_t allocs = aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS);
    CHECK_OK(aclrtFreeBuf(head));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), allocs - 128);
    size_t len = 0;
    CHECK_EQ(aclrtGetBufDataLen(bufs[10], &len), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtFreeBuf(bufs[127]));
}

/* aclFinalize frees buffers still alive (no leak report, no crash). */
static void test_finalize_frees_buffers(void)
{
    aclrtMbuf a = NULL;
    CHECK_OK(aclrtAllocBuf(&a, 64));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_ALLOCATIONS), 0);
    CHECK_EQ(aclrtFreeBuf(a), ACL_ERROR_INVALID_PARAM);
}

int main(void)
{
    mt_mock_env((const char *)NULL);
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_alloc_data_and_length);
    RUN_TEST(test_user_data);
    RUN_TEST(test_copy_ref_shares_data);
    RUN_TEST(test_chains);
    RUN_TEST(test_finalize_frees_buffers);
    return TEST_REPORT();
}
