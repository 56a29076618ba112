/*
 * repair.c - device error queries and repair: aclrtGetMemUceInfo, aclrtMemUceRepair,
 * aclrtGetErrorVerbose, aclrtRepairError (torch_npu imports all four; acl_abi.md §1.9,
 * §4.3).
 *
 * The mock's device memory never has uncorrectable errors and its devices report no
 * hardware error, so (README "Device errors and repair"):
 *   - aclrtGetMemUceInfo answers *retSize = 0 (memUceInfoArray may be NULL when
 *     arraySize is 0);
 *   - aclrtGetErrorVerbose fills errorInfo with errorType ACL_RT_NO_ERROR, tryRepair 0,
 *     hasDetail 0;
 *   - aclrtMemUceRepair checks its entries (at most MAX_MEM_UCE_INFO_ARRAY_SIZE, each a
 *     non-NULL address with len > 0) and has nothing to repair;
 *   - aclrtRepairError of ACL_RT_NO_ERROR succeeds; of any other aclrtErrorType it fails
 *     with ACL_ERROR_RT_PARAM_INVALID (107000): the device reported no such error.
 * All four validate the device id (107001) and, for a lost device (aclmockSetDeviceLost),
 * return its sticky code like every device query.
 */
#include <string.h>

#include "core/core.h"
#include "misc/misc.h"
#include "misc/misc_private.h"

aclError aclrtGetMemUceInfo(int32_t deviceId, aclrtMemUceInfo *memUceInfoArray, size_t arraySize, size_t *retSize)
{
    const char *fn = "aclrtGetMemUceInfo";
    MOCK_REQUIRE_NONNULL(fn, retSize);
    if (memUceInfoArray == NULL && arraySize > 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'memUceInfoArray' is NULL with arraySize %zu",
                          arraySize);
    }
    MOCK_ENTER(fn);
    aclError rc = core_device_check(fn, deviceId);
    if (rc == ACL_SUCCESS) {
        *retSize = 0;
    }
    return rc;
}

aclError aclrtMemUceRepair(int32_t deviceId, aclrtMemUceInfo *memUceInfoArray, size_t arraySize)
{
    const char *fn = "aclrtMemUceRepair";
    if (memUceInfoArray == NULL && arraySize > 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'memUceInfoArray' is NULL with arraySize %zu",
                          arraySize);
    }
    if (arraySize > MAX_MEM_UCE_INFO_ARRAY_SIZE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'arraySize' %zu exceeds %u", arraySize,
                          (unsigned)MAX_MEM_UCE_INFO_ARRAY_SIZE);
    }
    for (size_t i = 0; i < arraySize; i++) {
        if (memUceInfoArray[i].addr == NULL || memUceInfoArray[i].len == 0) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "entry %zu has a NULL address or a length of 0", i);
        }
    }
    MOCK_ENTER(fn);
    return core_device_check(fn, deviceId); /* no uncorrectable error to repair */
}

aclError aclrtGetErrorVerbose(int32_t deviceId, aclrtErrorInfo *errorInfo)
{
    const char *fn = "aclrtGetErrorVerbose";
    MOCK_REQUIRE_NONNULL(fn, errorInfo);
    MOCK_ENTER(fn);
    aclError rc = core_device_check(fn, deviceId);
    if (rc == ACL_SUCCESS) {
        memset(errorInfo, 0, sizeof(*errorInfo));
        errorInfo->errorType = ACL_RT_NO_ERROR;
    }
    return rc;
}

aclError aclrtRepairError(int32_t deviceId, const aclrtErrorInfo *errorInfo)
{
    const char *fn = "aclrtRepairError";
    MOCK_REQUIRE_NONNULL(fn, errorInfo);
    aclrtErrorType t = errorInfo->errorType;
    bool known = (t >= ACL_RT_NO_ERROR && t <= ACL_RT_ERROR_L3_PORT) || t == ACL_RT_ERROR_OTHERS;
    if (!known) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "errorType %d is not an aclrtErrorType", (int)t);
    }
    MOCK_ENTER(fn);
    aclError rc = core_device_check(fn, deviceId);
    if (rc == ACL_SUCCESS && t != ACL_RT_NO_ERROR) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                        "device %d reported no error of type %d (aclrtGetErrorVerbose answers ACL_RT_NO_ERROR)",
                        (int)deviceId, (int)t);
    }
    return rc;
}
