/*
 * test_ipc_vmm.c - VMM shareable handles across real processes (src/ipc/share_vmm.c,
 * src/mem/vmm.c; acl_next_semantics.md §3.2, VMM#aclrtMemExportToShareableHandle and
 * the V2 pages): physical memory from aclrtMallocPhysical exported once (1:1), imported
 * by another process as its own handle on the same memory (zero-copy once mapped), the
 * pid whitelist, same-process import refused, V1/V2 not mixed, lifetimes (the memory
 * goes after the last aclrtFreePhysical of every process), the mapping rules for
 * imported handles, and fabric handles (A3 only).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "ipc_util.h"
#include "mock_test.h"

#define GRAN ((size_t)2 << 20)

static aclrtPhysicalMemProp prop_of(int32_t dev)
{
    aclrtPhysicalMemProp p;
    memset(&p, 0, sizeof p);
    p.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    p.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    p.memAttr = ACL_HBM_MEM_HUGE;
    p.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = (uint32_t)dev;
    return p;
}

/* Maps a handle at a new reservation with read/write access; returns the address. */
static void *map_handle(aclrtDrvMemHandle h, size_t size)
{
    void *va = NULL;
    if (aclrtReserveMemAddress(&va, size, 0, NULL, 0) != ACL_SUCCESS || aclrtMapMem(va, size, 0, h, 0) != ACL_SUCCESS) {
        return NULL;
    }
    return va;
}

static void unmap(void *va)
{
    aclrtUnmapMem(va);
    aclrtReleaseMemAddress(va);
}

static size_t free_bytes(void)
{
    size_t fr = 0, total = 0;
    aclrtGetMemInfo(ACL_HBM_MEM, &fr, &total);
    return fr;
}

static size_t count_not(void *dev, size_t n, int byte)
{
    unsigned char *h = malloc(n);
    aclError rc = aclrtMemcpy(h, n, dev, n, ACL_MEMCPY_DEVICE_TO_HOST);
    size_t bad = rc == ACL_SUCCESS ? 0 : n;
    for (size_t i = 0; rc == ACL_SUCCESS && i < n; i++) {
        bad += h[i] != (unsigned char)byte;
    }
    free(h);
    return bad;
}

/* ================================================================ child shell */

static int child_shell(void)
{
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        return 2;
    }
    aclrtDrvMemHandle h = NULL;
    void *va = NULL;
    char line[512];
    while (mt_parent_recv(line, sizeof line) == 0) {
        char cmd[32] = "";
        unsigned long long a = 0;
        int b = 0;
        sscanf(line, "%31s %llx %d", cmd, &a, &b);
        if (strcmp(cmd, "exit") == 0) {
            break;
        } else if (strcmp(cmd, "pid") == 0) {
            int32_t pid = 0;
            aclrtDeviceGetBareTgid(&pid);
            mt_parent_send("%d", pid);
        } else if (strcmp(cmd, "import") == 0) { /* import <handle hex> <device> */
            aclError rc = aclrtMemImportFromShareableHandle((uint64_t)a, b, &h);
            const char *msg = rc != ACL_SUCCESS ? aclGetRecentErrMsg() : NULL;
            mt_parent_send("%d %s", rc, msg != NULL ? msg : "");
        } else if (strcmp(cmd, "importv2") == 0) {
            uint64_t v = (uint64_t)a;
            aclError rc = aclrtMemImportFromShareableHandleV2(&v, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 0, &h);
            mt_parent_send("%d", rc);
        } else if (strcmp(cmd, "reexport") == 0) { /* an imported handle cannot be exported */
            uint64_t s = 0;
            mt_parent_send("%d", aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 1, &s));
        } else if (strcmp(cmd, "map") == 0) {
            va = map_handle(h, GRAN);
            mt_parent_send("%d", va != NULL ? 0 : 1);
        } else if (strcmp(cmd, "mixmap") == 0) {
            /* VMM#aclrtMapMem: one reserved range does not mix local and imported handles */
            aclrtPhysicalMemProp p = prop_of(0);
            aclrtDrvMemHandle local = NULL;
            void *r = NULL;
            aclrtMallocPhysical(&local, GRAN, &p, 0);
            aclrtReserveMemAddress(&r, 2 * GRAN, 0, NULL, 0);
            aclError m1 = aclrtMapMem(r, GRAN, 0, local, 0);
            aclError m2 = aclrtMapMem((char *)r + GRAN, GRAN, 0, h, 0);
            aclrtUnmapMem(r);
            aclrtReleaseMemAddress(r);
            aclrtFreePhysical(local);
            mt_parent_send("%d %d", m1, m2);
        } else if (strcmp(cmd, "check") == 0) { /* check <byte> */
            mt_parent_send("%zu", count_not(va, GRAN, (int)a));
        } else if (strcmp(cmd, "fill") == 0) {
            mt_parent_send("%d", aclrtMemset(va, GRAN, (int)a, GRAN));
        } else if (strcmp(cmd, "unmap") == 0) {
            unmap(va);
            va = NULL;
            mt_parent_send("0");
        } else if (strcmp(cmd, "free") == 0) {
            mt_parent_send("%d", aclrtFreePhysical(h));
        } else if (strcmp(cmd, "fabric") == 0) { /* A3 child: export a fabric handle, import it back here */
            aclrtPhysicalMemProp p = prop_of(0);
            aclrtDrvMemHandle x = NULL;
            aclrtMallocPhysical(&x, GRAN, &p, 0);
            aclrtMemFabricHandle fh;
            aclError rc = aclrtMemExportToShareableHandleV2(x, 1, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &fh);
            aclrtDrvMemHandle y = NULL;
            aclError rc2 = aclrtMemImportFromShareableHandleV2(&fh, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0, &y);
            aclrtFreePhysical(x);
            mt_parent_send("%d %d", rc, rc2);
        } else {
            mt_parent_send("unknown");
        }
    }
    aclFinalize();
    return 0;
}

/* ================================================================ parent side */

/* §3.2: export, import in another process, map there: both see the same bytes; the
 * memory lives until every process freed its handle (the importer keeps the exporter's
 * capacity in use). */
static void test_share_and_lifetime(void)
{
    aclrtPhysicalMemProp p = prop_of(0);
    size_t before = free_bytes();
    aclrtDrvMemHandle h = NULL;
    CHECK_OK(aclrtMallocPhysical(&h, GRAN, &p, 0));
    void *va = map_handle(h, GRAN);
    CHECK(va != NULL);
    CHECK_OK(aclrtMemset(va, GRAN, 0x3C, GRAN));
    uint64_t s = 0;
    CHECK_OK(aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE,
                                             ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION, &s));
    CHECK_EQ((int32_t)(s >> 32), getpid());
    uint64_t again = 0; /* 1:1: a handle is exported once */
    CHECK_EQ(aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 1, &again), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "1:1");
    CHECK_EQ(aclrtMemExportToShareableHandleV2(h, 1, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, &again),
             ACL_ERROR_RT_PARAM_INVALID);
    aclrtDrvMemHandle mine = NULL; /* not in the exporting process */
    CHECK_EQ(aclrtMemImportFromShareableHandle(s, 0, &mine), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);

    mt_child c;
    if (mt_child_start(&c, "shell", NULL, (const char *)NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "import %" PRIx64 " 5", s);
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_INVALID_DEVICEID); /* deviceId in [0, count-1] */
    mt_child_ask(&c, ans, sizeof ans, "import %" PRIx64 " 1", s);
    CHECK_EQ(atoi(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "reexport");
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_PARAM_INVALID);
    mt_child_ask(&c, ans, sizeof ans, "free");
    CHECK_EQ(atoi(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "import %" PRIx64 " 0", s); /* a second import, on device 0 */
    CHECK_EQ(atoi(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "map");
    CHECK_STR_EQ(ans, "0");
    mt_child_ask(&c, ans, sizeof ans, "check 3c");
    CHECK_STR_EQ(ans, "0");
    mt_child_ask(&c, ans, sizeof ans, "fill 4d");
    CHECK_STR_EQ(ans, "0");
    CHECK_EQ(count_not(va, GRAN, 0x4D), 0); /* zero-copy */
    mt_child_ask(&c, ans, sizeof ans, "mixmap");
    CHECK_STR_EQ(ans, "0 107000");

    /* the exporter frees first: the importer keeps the memory, and it stays counted */
    unmap(va);
    CHECK_OK(aclrtFreePhysical(h));
    CHECK(free_bytes() + GRAN <= before);
    mt_child_ask(&c, ans, sizeof ans, "check 4d");
    CHECK_STR_EQ(ans, "0");
    mt_child_ask(&c, ans, sizeof ans, "unmap");
    mt_child_ask(&c, ans, sizeof ans, "free");
    CHECK_EQ(atoi(ans), ACL_SUCCESS);
    CHECK_EQ(free_bytes(), before); /* the last free: the memory goes */
    /* an import after the exporter freed fails */
    mt_child_ask(&c, ans, sizeof ans, "import %" PRIx64 " 0", s);
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_IPC_ERROR);
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
}

/* §3.2: the whitelist; V1 and V2 calls are not mixed; argument checks. */
static void test_whitelist_v2_and_errors(void)
{
    aclrtPhysicalMemProp p = prop_of(0);
    aclrtDrvMemHandle h1 = NULL, h2 = NULL;
    CHECK_OK(aclrtMallocPhysical(&h1, GRAN, &p, 0));
    CHECK_OK(aclrtMallocPhysical(&h2, GRAN, &p, 0));
    uint64_t s1 = 0, s2 = 0;
    CHECK_EQ(aclrtMemExportToShareableHandle(h1, ACL_MEM_HANDLE_TYPE_POSIX, 0, &s1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemExportToShareableHandle(h1, ACL_MEM_HANDLE_TYPE_NONE, 2, &s1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemExportToShareableHandle(h1, ACL_MEM_HANDLE_TYPE_NONE, 0, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemExportToShareableHandle((aclrtDrvMemHandle)&p, ACL_MEM_HANDLE_TYPE_NONE, 0, &s1),
             ACL_ERROR_RT_INVALID_HANDLE);
    CHECK_EQ(aclrtMemExportToShareableHandleV2(h2, 0, (aclrtMemSharedHandleType)3, &s2), ACL_ERROR_INVALID_PARAM);
    aclrtMemFabricHandle fh; /* fabric handles: A3 only */
    CHECK_EQ(aclrtMemExportToShareableHandleV2(h2, 0, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &fh),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtMemExportToShareableHandle(h1, ACL_MEM_HANDLE_TYPE_NONE, ACL_RT_VMM_EXPORT_FLAG_DEFAULT, &s1));
    CHECK_OK(aclrtMemExportToShareableHandleV2(h2, 0, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, &s2));
    int32_t bad = 0;
    CHECK_EQ(aclrtMemSetPidToShareableHandle(s1, &bad, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemSetPidToShareableHandle(s1, NULL, 1), ACL_ERROR_INVALID_PARAM);
    int32_t someone = 4242;
    CHECK_EQ(aclrtMemSetPidToShareableHandle(s2, &someone, 1), ACL_ERROR_RT_PARAM_INVALID); /* V2 export */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "V2");
    CHECK_EQ(aclrtMemSetPidToShareableHandleV2(&s1, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, &someone, 1),
             ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtMemSetPidToShareableHandle(((uint64_t)1 << 32) | 5, &someone, 1), ACL_ERROR_RT_PARAM_INVALID);

    mt_child c;
    if (mt_child_start(&c, "shell", NULL, (const char *)NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "import %" PRIx64 " 0", s1);
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_NO_PERMISSION);
    mt_child_ask(&c, ans, sizeof ans, "pid");
    int32_t child = atoi(ans);
    CHECK_OK(aclrtMemSetPidToShareableHandle(s1, &child, 1));
    mt_child_ask(&c, ans, sizeof ans, "importv2 %" PRIx64, s1); /* V1 export, V2 import */
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_PARAM_INVALID);
    mt_child_ask(&c, ans, sizeof ans, "import %" PRIx64 " 0", s1);
    CHECK_EQ(atoi(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "free");
    mt_child_ask(&c, ans, sizeof ans, "importv2 %" PRIx64, s2);
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_NO_PERMISSION);
    CHECK_OK(aclrtMemSetPidToShareableHandleV2(&s2, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, &child, 1));
    mt_child_ask(&c, ans, sizeof ans, "import %" PRIx64 " 0", s2); /* V2 export, V1 import */
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_PARAM_INVALID);
    mt_child_ask(&c, ans, sizeof ans, "importv2 %" PRIx64, s2);
    CHECK_EQ(atoi(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "free");
    mt_child_ask(&c, ans, sizeof ans, "import 100000005 0"); /* pid 1: no such exporter */
    CHECK_EQ(atoi(ans), ACL_ERROR_RT_IPC_ERROR);
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_OK(aclrtFreePhysical(h1));
    CHECK_OK(aclrtFreePhysical(h2));
}

/* Fabric handles work on A3. */
static void test_fabric_on_a3(void)
{
    const char *const a3[] = {"ASCEND_MOCK_SOC_NAME=Ascend910_9391", NULL};
    mt_child c;
    if (mt_child_start(&c, "shell", a3, (const char *)NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[64];
    mt_child_ask(&c, ans, sizeof ans, "fabric");
    CHECK_STR_EQ(ans, "0 207000"); /* exported; the import is refused in the same process */
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
}

int main(int argc, char **argv)
{
    if (mt_is_child(argc, argv)) {
        return child_shell();
    }
    mt_mock_env("ASCEND_MOCK_DEVICE_COUNT", "2", (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_share_and_lifetime);
    RUN_TEST(test_whitelist_v2_and_errors);
    RUN_TEST(test_fabric_on_a3);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
