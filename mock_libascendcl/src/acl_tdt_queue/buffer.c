/*
 * buffer.c - libacl_tdt_queue.so: the shared-buffer functions of acl/acl_tdt_queue.h
 * (acltdtAllocBuf ... acltdtSetBufUserData; acl_next_semantics.md section 5.5).
 *
 * The docs support them on 310B only, and acltdtAllocBuf / acltdtCopyBufRef only in RC
 * mode (the program runs on the device's own CPU). The mock models a host with attached
 * devices (EP mode: aclrtGetRunMode answers ACL_HOST), so on every SoC those two answer
 * ACL_ERROR_RT_FEATURE_NOT_SUPPORT (207000), and on SoCs other than Ascend310B* so do
 * the other nine. On Ascend310B* the other nine share the implementation of the
 * aclrt*Buf functions of libascendcl.so (the same rules: 96-byte user data, chains of at
 * most 128 buffers, ...); their errors are recorded under the acltdt* name.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_tdt_queue.h"

static bool soc_is_310b(void)
{
    return strncmp(aclmockGetSocName(), "Ascend310B", 10) == 0;
}

static aclError unsupported(const char *fn, const char *why)
{
    return aclmockSetError(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "not supported %s (ASCEND_MOCK_SOC_NAME=%s)", why,
                           aclmockGetSocName());
}

/* The result of the aclrt*Buf call `rc` as the result of `fn`: a failure is recorded
 * again under fn, with the message of the aclrt* function minus its name. */
static aclError relabel(const char *fn, aclError rc)
{
    if (rc == ACL_SUCCESS) {
        return rc;
    }
    const char *msg = aclGetRecentErrMsg();
    const char *text = msg != NULL ? strstr(msg, ": ") : NULL;
    char copy[512];
    snprintf(copy, sizeof copy, "%s", text != NULL ? text + 2 : "failed");
    return aclmockSetError(fn, rc, "%s", copy);
}

#define SHARED(fn, call)                                                        \
    do {                                                                        \
        if (!soc_is_310b()) {                                                   \
            return unsupported(fn, "on this SoC (shared buffers: 310B only)");  \
        }                                                                       \
        return relabel(fn, call);                                               \
    } while (0)

aclError acltdtAllocBuf(size_t size, uint32_t type, acltdtBuf *buf)
{
    (void)size;
    (void)type;
    (void)buf;
    return unsupported("acltdtAllocBuf", "in EP mode (RC mode on 310B only; the mock's run mode is ACL_HOST)");
}

aclError acltdtCopyBufRef(const acltdtBuf buf, acltdtBuf *newBuf)
{
    (void)buf;
    (void)newBuf;
    return unsupported("acltdtCopyBufRef", "in EP mode (RC mode on 310B only; the mock's run mode is ACL_HOST)");
}

aclError acltdtFreeBuf(acltdtBuf buf)
{
    SHARED("acltdtFreeBuf", aclrtFreeBuf(buf));
}

aclError acltdtGetBufData(const acltdtBuf buf, void **dataPtr, size_t *size)
{
    SHARED("acltdtGetBufData", aclrtGetBufData(buf, dataPtr, size));
}

aclError acltdtSetBufDataLen(acltdtBuf buf, size_t len)
{
    SHARED("acltdtSetBufDataLen", aclrtSetBufDataLen(buf, len));
}

aclError acltdtGetBufDataLen(acltdtBuf buf, size_t *len)
{
    SHARED("acltdtGetBufDataLen", aclrtGetBufDataLen(buf, len));
}

aclError acltdtAppendBufChain(acltdtBuf headBuf, acltdtBuf buf)
{
    SHARED("acltdtAppendBufChain", aclrtAppendBufChain(headBuf, buf));
}

aclError acltdtGetBufChainNum(acltdtBuf headBuf, uint32_t *num)
{
    SHARED("acltdtGetBufChainNum", aclrtGetBufChainNum(headBuf, num));
}

aclError acltdtGetBufFromChain(acltdtBuf headBuf, uint32_t index, acltdtBuf *buf)
{
    SHARED("acltdtGetBufFromChain", aclrtGetBufFromChain(headBuf, index, buf));
}

aclError acltdtGetBufUserData(const acltdtBuf buf, void *dataPtr, size_t size, size_t offset)
{
    SHARED("acltdtGetBufUserData", aclrtGetBufUserData(buf, dataPtr, size, offset));
}

aclError acltdtSetBufUserData(acltdtBuf buf, const void *dataPtr, size_t size, size_t offset)
{
    SHARED("acltdtSetBufUserData", aclrtSetBufUserData(buf, dataPtr, size, offset));
}
