/*
 * groups.c - compute groups and the task-scheduler selection: aclrtGetGroupCount,
 * aclrtCreateGroupInfo / aclrtDestroyGroupInfo, aclrtGetAllGroupInfo,
 * aclrtGetGroupInfoDetail, aclrtSetGroup, aclrtSetTsDevice.
 *
 * The mock's devices are not partitioned into compute groups (mock choice; README
 * "Compute groups"): aclrtGetGroupCount answers 0 for the current context's device,
 * aclrtGetAllGroupInfo fills nothing, aclrtGetGroupInfoDetail has no valid index
 * (ACL_ERROR_RT_GROUP_NOT_CREATE 107014 after the argument checks) and aclrtSetGroup of
 * any id fails with 107014. Group-info handles are real, validated objects.
 * aclrtSetTsDevice records the calling thread's task scheduler (ACL_TS_ID_AICORE or
 * ACL_TS_ID_AIVECTOR; anything else 100000); the mock runs every task on its streams'
 * workers whatever it is.
 */
#include <stdint.h>
#include <stdlib.h>

#include "core/core.h"
#include "misc/misc.h"
#include "misc/misc_private.h"

#define GROUP_INFO_MAGIC 0x677270496e666f31ULL

struct tagRtGroupInfo {
    uint64_t magic;
    uint32_t count; /* groups it describes (aclrtGetAllGroupInfo) */
};

static mock_handle_set g_infos = MOCK_HANDLE_SET_INIT(MOCK_LOCK_GROUP_INFOS);
/* The calling thread's task scheduler (aclrtSetTsDevice); nothing in the mock depends on it. */
static _Thread_local aclrtTsId tls_ts = ACL_TS_ID_AICORE;

/* Compute groups of the current context's device: none. */
static aclError group_count(const char *fn, uint32_t *count)
{
    mock_context *ctx;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc == ACL_SUCCESS) {
        *count = 0;
    }
    return rc;
}

aclError aclrtGetGroupCount(uint32_t *count)
{
    const char *fn = "aclrtGetGroupCount";
    MOCK_REQUIRE_NONNULL(fn, count);
    MOCK_ENTER(fn);
    return group_count(fn, count);
}

aclrtGroupInfo *aclrtCreateGroupInfo(void)
{
    const char *fn = "aclrtCreateGroupInfo";
    if (core_fault_check(fn) != ACL_SUCCESS) {
        return NULL;
    }
    aclrtGroupInfo *g = calloc(1, sizeof(*g));
    if (g == NULL || !core_handle_set_add(&g_infos, g)) {
        free(g);
        core_error(fn, ACL_ERROR_BAD_ALLOC, "host out of memory");
        return NULL;
    }
    g->magic = GROUP_INFO_MAGIC;
    return g;
}

aclError aclrtDestroyGroupInfo(aclrtGroupInfo *groupInfo)
{
    const char *fn = "aclrtDestroyGroupInfo";
    MOCK_REQUIRE_NONNULL(fn, groupInfo);
    MOCK_ENTER(fn);
    if (!core_handle_set_remove(&g_infos, groupInfo)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'groupInfo' (%p) is not a live group info (destroyed twice?)", (void *)groupInfo);
    }
    groupInfo->magic = 0;
    free(groupInfo);
    return ACL_SUCCESS;
}

static aclError check_info(const char *fn, const aclrtGroupInfo *g)
{
    if (g == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'groupInfo' is NULL");
    }
    if (!core_handle_set_contains(&g_infos, g)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'groupInfo' (%p) is not a live group info (aclrtCreateGroupInfo)", (const void *)g);
    }
    return ACL_SUCCESS;
}

aclError aclrtGetAllGroupInfo(aclrtGroupInfo *groupInfo)
{
    const char *fn = "aclrtGetAllGroupInfo";
    aclError rc = check_info(fn, groupInfo);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    uint32_t n = 0;
    rc = group_count(fn, &n);
    if (rc == ACL_SUCCESS) {
        core_handle_set_lock(&g_infos); /* a destroy racing with this call finds it or not */
        if (core_handle_set_contains_locked(&g_infos, groupInfo)) {
            groupInfo->count = n;
        }
        core_handle_set_unlock(&g_infos);
    }
    return rc;
}

aclError aclrtGetGroupInfoDetail(const aclrtGroupInfo *groupInfo, int32_t groupIndex, aclrtGroupAttr attr,
                                 void *attrValue, size_t valueLen, size_t *paramRetSize)
{
    const char *fn = "aclrtGetGroupInfoDetail";
    aclError rc = check_info(fn, groupInfo);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_REQUIRE_NONNULL(fn, attrValue);
    MOCK_REQUIRE_NONNULL(fn, paramRetSize);
    if ((int)attr < (int)ACL_GROUP_AICORE_INT || (int)attr > (int)ACL_GROUP_GROUPID_INT) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'attr' %d is not an aclrtGroupAttr", (int)attr);
    }
    if (valueLen < sizeof(int32_t)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'valueLen' %zu is smaller than 4 bytes", valueLen);
    }
    MOCK_ENTER(fn);
    /* groupInfo->count is always 0: no index is valid */
    return core_error(fn, ACL_ERROR_RT_GROUP_NOT_CREATE,
                      "group index %d does not exist (%u compute groups: the device is not partitioned)",
                      (int)groupIndex, groupInfo->count);
}

aclError aclrtSetGroup(int32_t groupId)
{
    const char *fn = "aclrtSetGroup";
    MOCK_ENTER(fn);
    uint32_t n = 0;
    aclError rc = group_count(fn, &n);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return core_error(fn, ACL_ERROR_RT_GROUP_NOT_CREATE,
                      "compute group %d does not exist (the device is not partitioned into groups)", (int)groupId);
}

aclError aclrtSetTsDevice(aclrtTsId tsId)
{
    const char *fn = "aclrtSetTsDevice";
    if (tsId != ACL_TS_ID_AICORE && tsId != ACL_TS_ID_AIVECTOR) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'tsId' %d is not ACL_TS_ID_AICORE (0) or ACL_TS_ID_AIVECTOR (1)", (int)tsId);
    }
    MOCK_ENTER(fn);
    tls_ts = tsId;
    return ACL_SUCCESS;
}
