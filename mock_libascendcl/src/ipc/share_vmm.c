/*
 * share_vmm.c - VMM shareable handles (acl_next_semantics.md §3.2; VMM):
 * aclrtMemExportToShareableHandle(V2) / aclrtMemSetPidToShareableHandle(V2) /
 * aclrtMemImportFromShareableHandle(V2) for physical memory from aclrtMallocPhysical.
 *
 * A shareable handle is a uint64 (V1, V2 ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT):
 * (exporter pid << 32) | export id; or (V2 ..._FABRIC, A3 only) an aclrtMemFabricHandle
 * whose 128 bytes hold the same plus the exporter's nonce. Rules: the handle comes from
 * aclrtMallocPhysical in this process and is exported once (1:1); handleType must be
 * ACL_MEM_HANDLE_TYPE_NONE; the whitelist applies unless exported with
 * ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION; import in the exporting process is not
 * supported (207000); V1 and V2 calls are not mixed (107000); every process frees its
 * handle with aclrtFreePhysical and the memory goes with the last one (an importer keeps
 * the exporter's memory and capacity alive); an import after the exporter freed fails
 * (507022). The imported handle is memory of `deviceId` (V1) or of the current device
 * (V2, mock choice), mapped with aclrtMapMem as usual (zero-copy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "mem/mem.h"
#include "ipc/ipc.h"
#include "ipc/ipc_private.h"

static const char k_fabric_magic[8] = {'A', 'M', 'F', 'A', 'B', 'R', 'I', 'C'};

typedef struct fabric_payload {
    char magic[8];
    int32_t pid;
    uint32_t pad;
    uint64_t nonce;
    uint64_t id;
} fabric_payload;
_Static_assert(sizeof(fabric_payload) <= sizeof(((aclrtMemFabricHandle *)0)->data), "fabric payload too large");

static uint64_t handle_value(const ipc_addr *a)
{
    return ((uint64_t)(uint32_t)a->pid << 32) | (a->id & 0xffffffffu);
}

/* Decodes a shareable handle of `type` (V1: DEFAULT); false when it names nothing. */
static bool parse_handle(const void *shareable, int type, ipc_addr *a)
{
    if (type == ACL_MEM_SHARE_HANDLE_TYPE_FABRIC) {
        fabric_payload f;
        memcpy(&f, shareable, sizeof f);
        if (memcmp(f.magic, k_fabric_magic, sizeof f.magic) != 0 || f.pid <= 0 || f.id == 0) {
            return false;
        }
        a->pid = f.pid;
        a->nonce = f.nonce;
        a->id = f.id;
        return true;
    }
    uint64_t v;
    memcpy(&v, shareable, sizeof v);
    a->pid = (int32_t)(v >> 32);
    a->nonce = 0; /* a uint64 has no room for it: a recycled pid is caught by the random id */
    a->id = v & 0xffffffffu;
    return a->pid > 0 && a->id != 0;
}

static aclError check_share_type(const char *fn, int type)
{
    if (type != ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT && type != ACL_MEM_SHARE_HANDLE_TYPE_FABRIC) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'shareType' %d is not an aclrtMemSharedHandleType (DEFAULT 1, FABRIC 2)", type);
    }
    return ACL_SUCCESS;
}

/* FABRIC handles cross servers: A3 only (§3.2). After the fault hook. */
static aclError check_type_supported(const char *fn, int type)
{
    return type == ACL_MEM_SHARE_HANDLE_TYPE_FABRIC ? core_soc_require(fn, CORE_SOC_BIT(CORE_SOC_A3)) : ACL_SUCCESS;
}

/* ---------------------------------------------------------------- export */

static aclError export_common(const char *fn, aclrtDrvMemHandle handle, uint64_t flags, bool v2, ipc_addr *a)
{
    if (flags != ACL_RT_VMM_EXPORT_FLAG_DEFAULT && flags != ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'flags' is 0x%llx (ACL_RT_VMM_EXPORT_FLAG_DEFAULT 0x0 or "
                          "..._DISABLE_PID_VALIDATION 0x1)",
                          (unsigned long long)flags);
    }
    aclError rc = ipc_broker_start(fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    ipc_export *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    mem_vmm_share_info info;
    rc = mem_vmm_share_export(fn, handle, &info);
    if (rc != ACL_SUCCESS) {
        free(e);
        return rc;
    }
    e->kind = IPC_KIND_VMM;
    e->check_pid = flags == ACL_RT_VMM_EXPORT_FLAG_DEFAULT;
    e->v2 = v2;
    e->handle = handle;
    e->gen = info.gen;
    ipc_self(&a->pid, &a->nonce);
    a->id = ipc_export_add(e, 0, NULL);
    return ACL_SUCCESS;
}

aclError aclrtMemExportToShareableHandle(aclrtDrvMemHandle handle, aclrtMemHandleType handleType, uint64_t flags,
                                         uint64_t *shareableHandle)
{
    static const char fn[] = "aclrtMemExportToShareableHandle";
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_REQUIRE_NONNULL(fn, shareableHandle);
    if ((int)handleType != ACL_MEM_HANDLE_TYPE_NONE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'handleType' %d must be ACL_MEM_HANDLE_TYPE_NONE (0)",
                          (int)handleType);
    }
    MOCK_ENTER(fn);
    ipc_addr a;
    aclError rc = export_common(fn, handle, flags, false, &a);
    if (rc == ACL_SUCCESS) {
        *shareableHandle = handle_value(&a);
    }
    return rc;
}

aclError aclrtMemExportToShareableHandleV2(aclrtDrvMemHandle handle, uint64_t flags, aclrtMemSharedHandleType shareType,
                                           void *shareableHandle)
{
    static const char fn[] = "aclrtMemExportToShareableHandleV2";
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_REQUIRE_NONNULL(fn, shareableHandle);
    aclError rc = check_share_type(fn, (int)shareType);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    rc = check_type_supported(fn, (int)shareType);
    ipc_addr a;
    if (rc == ACL_SUCCESS) {
        rc = export_common(fn, handle, flags, true, &a);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if ((int)shareType == ACL_MEM_SHARE_HANDLE_TYPE_FABRIC) {
        aclrtMemFabricHandle h;
        memset(&h, 0, sizeof h);
        fabric_payload f = {{0}, a.pid, 0, a.nonce, a.id};
        memcpy(f.magic, k_fabric_magic, sizeof f.magic);
        memcpy(h.data, &f, sizeof f);
        memcpy(shareableHandle, &h, sizeof h);
    } else {
        uint64_t v = handle_value(&a);
        memcpy(shareableHandle, &v, sizeof v);
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------- whitelist */

typedef struct vmm_pids {
    uint64_t id;
    bool v2;
    bool mixed;
    const int32_t *pids;
    size_t n;
    bool ok;
} vmm_pids;

static bool match_vmm(const ipc_export *e, const void *arg)
{
    return e->id == ((const vmm_pids *)arg)->id;
}

static void add_vmm_pids(ipc_export *e, void *arg)
{
    vmm_pids *p = arg;
    p->mixed = e->v2 != p->v2;
    p->ok = !p->mixed && ipc_export_add_pids(e, p->pids, p->n);
}

static aclError set_pids_common(const char *fn, const void *shareable, int type, bool v2, const int32_t *pid,
                                size_t num)
{
    ipc_addr a;
    int32_t self;
    uint64_t nonce;
    ipc_self(&self, &nonce);
    vmm_pids p = {0, v2, false, pid, num, false};
    bool found = parse_handle(shareable, type, &a) && a.pid == self && (a.nonce == 0 || a.nonce == nonce);
    if (found) {
        p.id = a.id;
        found = ipc_export_with(IPC_KIND_VMM, match_vmm, add_vmm_pids, &p);
    }
    if (!found) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "the shareable handle was not exported by this process (the exporter sets the pids)");
    }
    if (p.mixed) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the shareable handle was exported with the V%d call: use "
                          "the V%d calls (V1 and V2 are not mixed)", v2 ? 1 : 2, v2 ? 1 : 2);
    }
    if (!p.ok) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    return ACL_SUCCESS;
}

aclError aclrtMemSetPidToShareableHandle(uint64_t shareableHandle, int32_t *pid, size_t pidNum)
{
    static const char fn[] = "aclrtMemSetPidToShareableHandle";
    aclError rc = ipc_check_pids(fn, pid, pidNum, "pid");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    return set_pids_common(fn, &shareableHandle, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, false, pid, pidNum);
}

aclError aclrtMemSetPidToShareableHandleV2(void *shareableHandle, aclrtMemSharedHandleType shareType, int32_t *pid,
                                           size_t pidNum)
{
    static const char fn[] = "aclrtMemSetPidToShareableHandleV2";
    MOCK_REQUIRE_NONNULL(fn, shareableHandle);
    aclError rc = check_share_type(fn, (int)shareType);
    if (rc == ACL_SUCCESS) {
        rc = ipc_check_pids(fn, pid, pidNum, "pid");
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    rc = check_type_supported(fn, (int)shareType);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return set_pids_common(fn, shareableHandle, (int)shareType, true, pid, pidNum);
}

/* ---------------------------------------------------------------- import */

static aclError import_common(const char *fn, const void *shareable, int type, bool v2, int32_t device,
                              aclrtDrvMemHandle *handle)
{
    ipc_addr a;
    if (!parse_handle(shareable, type, &a)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the shareable handle does not name an export");
    }
    int fd = -1;
    ipc_grant g;
    void *token = NULL;
    aclError rc = ipc_client_acquire(fn, &a, IPC_KIND_VMM, v2, &fd, &g, &token);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mem_vmm_share_info info;
    memset(&info, 0, sizeof info);
    info.size = g.length;
    info.prop = g.prop;
    info.device = g.device;
    rc = mem_vmm_share_import(fn, fd, &info, device, ipc_client_release, token, handle);
    if (rc != ACL_SUCCESS) {
        close(fd);
        ipc_client_release(token);
    }
    return rc;
}

aclError aclrtMemImportFromShareableHandle(uint64_t shareableHandle, int32_t deviceId, aclrtDrvMemHandle *handle)
{
    static const char fn[] = "aclrtMemImportFromShareableHandle";
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_ENTER(fn);
    aclError rc = core_device_check(fn, deviceId); /* [0, count-1]: may be another device (§3.2) */
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return import_common(fn, &shareableHandle, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, false, deviceId, handle);
}

aclError aclrtMemImportFromShareableHandleV2(void *shareableHandle, aclrtMemSharedHandleType shareType, uint64_t flags,
                                             aclrtDrvMemHandle *handle)
{
    static const char fn[] = "aclrtMemImportFromShareableHandleV2";
    MOCK_REQUIRE_NONNULL(fn, shareableHandle);
    MOCK_REQUIRE_NONNULL(fn, handle);
    aclError rc = check_share_type(fn, (int)shareType);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (flags != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flags' must be 0, got 0x%llx",
                          (unsigned long long)flags);
    }
    MOCK_ENTER(fn);
    rc = check_type_supported(fn, (int)shareType);
    mock_context *ctx = NULL;
    if (rc == ACL_SUCCESS) {
        rc = core_ctx_require(fn, &ctx); /* V2 has no device argument: the current device */
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return import_common(fn, shareableHandle, (int)shareType, true, core_ctx_device(ctx), handle);
}
