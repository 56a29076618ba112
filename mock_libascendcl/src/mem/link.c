/*
 * link.c - peer mapping and link selection of device memory: aclrtMemP2PMap,
 * aclrtMemMapSetLink, aclrtMemMapSelectedLink.
 *
 * The mock's devices share one host address space and have no interconnect, so these
 * calls change nothing; they check their arguments as the real runtime does (mock
 * choices where the reference is silent; README "Peer mapping and links"):
 *   - aclrtMemP2PMap(devPtr, size, dstDevId, flags): [devPtr, devPtr+size) inside one
 *     device allocation (107000), dstDevId a visible device other than the memory's own
 *     (107001 / 107000), flags 0 (100000). Copies between the two devices still need
 *     aclrtDeviceEnablePeerAccess, as everywhere in the mock;
 *   - aclrtMemMapSetLink(handle, adviceLink): a live physical memory handle
 *     (aclrtMallocPhysical; 100000), a link type of the SoC: SIO on A3 only, HCCS on 910,
 *     A2 and A3, the UB paths on 950 only; another supported enumerator is
 *     ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED (207021), a value outside the enum 100000;
 *   - aclrtMemMapSelectedLink(virPtrDst, size, virPtrSrc, linkIdx): both ranges in
 *     reserved virtual memory (aclrtReserveMemAddress; 107000), size > 0, linkIdx
 *     ACL_RT_MEM_LINK_IDX_0 or _1 (100000).
 */
#include <stdint.h>

#include "core/core.h"
#include "mem/mem.h"
#include "mem/mem_private.h"

aclError aclrtMemP2PMap(void *devPtr, size_t size, int32_t dstDevId, uint64_t flags)
{
    const char *fn = "aclrtMemP2PMap";
    MOCK_REQUIRE_NONNULL(fn, devPtr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    if (flags != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flags' is 0x%llx (must be 0)",
                          (unsigned long long)flags);
    }
    MOCK_ENTER(fn);
    aclError rc = core_device_check(fn, dstDevId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_mem_info info;
    if (!mem_lookup(devPtr, &info) || info.kind != MOCK_MEM_DEVICE || info.device < 0) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'devPtr' (%p) is not device memory", devPtr);
    }
    if (size > info.size - ((uintptr_t)devPtr - info.base)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "%zu bytes at %p overrun the %zu-byte allocation", size,
                          devPtr, info.size);
    }
    if (info.device == dstDevId) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'dstDevId' %d is the device of the memory itself", dstDevId);
    }
    return core_device_check(fn, info.device);
}

aclError aclrtMemMapSetLink(aclrtDrvMemHandle handle, aclrtMemLinkType adviceLink)
{
    const char *fn = "aclrtMemMapSetLink";
    MOCK_REQUIRE_NONNULL(fn, handle);
    if ((int)adviceLink < (int)ACL_RT_MEM_ACCESS_LINK_SIO || (int)adviceLink > (int)ACL_RT_MEM_ACCESS_UB_MULTI_PORT_PATH) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'adviceLink' %d is not an aclrtMemLinkType",
                          (int)adviceLink);
    }
    MOCK_ENTER(fn);
    if (!mem_vmm_handle_live(handle)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'handle' (%p) is not a live physical memory handle (aclrtMallocPhysical)", handle);
    }
    core_soc_family f = core_soc_family_get();
    unsigned have;
    switch (adviceLink) {
    case ACL_RT_MEM_ACCESS_LINK_SIO:
        have = CORE_SOC_BIT(CORE_SOC_A3);
        break;
    case ACL_RT_MEM_ACCESS_LINK_HCCS:
        have = CORE_SOC_BIT(CORE_SOC_910) | CORE_SOC_BIT(CORE_SOC_A2) | CORE_SOC_BIT(CORE_SOC_A3);
        break;
    default:
        have = CORE_SOC_950;
        break;
    }
    if ((have & CORE_SOC_BIT(f)) == 0) {
        return core_error(fn, ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED, "link type %d is not available on %s (%s)",
                          (int)adviceLink, core_config_get()->soc_name, core_soc_family_name(f));
    }
    return ACL_SUCCESS;
}

aclError aclrtMemMapSelectedLink(void *virPtrDst, size_t size, void *virPtrSrc, uint32_t linkIdx)
{
    const char *fn = "aclrtMemMapSelectedLink";
    MOCK_REQUIRE_NONNULL(fn, virPtrDst);
    MOCK_REQUIRE_NONNULL(fn, virPtrSrc);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    if (linkIdx != ACL_RT_MEM_LINK_IDX_0 && linkIdx != ACL_RT_MEM_LINK_IDX_1) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'linkIdx' %u is not ACL_RT_MEM_LINK_IDX_0/1",
                          linkIdx);
    }
    MOCK_ENTER(fn);
    if (!mem_vmm_in_reservation(virPtrDst, size) || !mem_vmm_in_reservation(virPtrSrc, size)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "both ranges must lie in reserved virtual memory (aclrtReserveMemAddress)");
    }
    return ACL_SUCCESS;
}
