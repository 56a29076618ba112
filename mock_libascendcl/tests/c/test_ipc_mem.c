/*
 * test_ipc_mem.c - IPC memory across real processes (src/ipc/share_mem.c, src/mem/ipc.c;
 * acl_next_semantics.md §3.1, IPC, G-IPC#进程间共享内存, FAQ-IPC): zero-copy sharing in
 * both directions, the pid whitelist, the documented argument and alignment rules, the
 * mock's choices for a broken close order (nobody ever touches freed memory), lifetimes
 * when a process closes, frees, finalizes or exits, peer access, visible devices, SoC
 * support, and concurrent imports.
 *
 * The other process is this program again (ipc_util.h): a small "shell" that runs one
 * ACL call per line from the parent and answers with the results.
 */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "ipc_util.h"
#include "mock_test.h"

#define MIB ((size_t)1 << 20)

/* ================================================================ child shell */

static void *parse_ptr(const char *s)
{
    return (void *)(uintptr_t)strtoull(s, NULL, 16);
}

static sigjmp_buf g_jump;

static void on_segv(int sig)
{
    (void)sig;
    siglongjmp(g_jump, 1);
}

/* True when reading *p on the host faults (isolation mode). */
static bool host_read_faults(const void *p)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, &old);
    volatile bool faulted = true;
    if (sigsetjmp(g_jump, 1) == 0) {
        volatile unsigned char v = *(const volatile unsigned char *)p;
        (void)v;
        faulted = false;
    }
    sigaction(SIGSEGV, &old, NULL);
    return faulted;
}

/* Runs one command; writes the answer to `out`. false for "exit". */
static int shell_command(char *line, char *out, size_t len)
{
    char cmd[32] = "", a1[128] = "", a2[128] = "", a3[128] = "";
    sscanf(line, "%31s %127s %127s %127s", cmd, a1, a2, a3);
    aclError rc = ACL_SUCCESS;
    if (strcmp(cmd, "exit") == 0) {
        return 0;
    } else if (strcmp(cmd, "device") == 0) {
        rc = aclrtSetDevice(atoi(a1));
        snprintf(out, len, "%d", rc);
    } else if (strcmp(cmd, "pid") == 0) {
        int32_t pid = 0;
        rc = aclrtDeviceGetBareTgid(&pid);
        snprintf(out, len, "%d %d", rc, pid);
    } else if (strcmp(cmd, "malloc") == 0) { /* malloc <bytes> <policy> */
        void *p = NULL;
        rc = aclrtMalloc(&p, strtoull(a1, NULL, 0), (aclrtMemMallocPolicy)atoi(a2));
        snprintf(out, len, "%d %" PRIxPTR, rc, (uintptr_t)p);
    } else if (strcmp(cmd, "free") == 0) {
        rc = aclrtFree(parse_ptr(a1));
        snprintf(out, len, "%d", rc);
    } else if (strcmp(cmd, "export") == 0) { /* export <ptr> <bytes> <flags> */
        char key[65] = "";
        rc = aclrtIpcMemGetExportKey(parse_ptr(a1), strtoull(a2, NULL, 0), key, sizeof key, strtoull(a3, NULL, 0));
        snprintf(out, len, "%d %s", rc, rc == ACL_SUCCESS ? key : "-");
    } else if (strcmp(cmd, "setpid") == 0) { /* setpid <key> <pid> */
        int32_t pid = atoi(a2);
        rc = aclrtIpcMemSetImportPid(a1, &pid, 1);
        snprintf(out, len, "%d", rc);
    } else if (strcmp(cmd, "setattr") == 0) { /* setattr <key> <link> */
        rc = aclrtIpcMemSetAttr(a1, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, strtoull(a2, NULL, 0));
        snprintf(out, len, "%d", rc);
    } else if (strcmp(cmd, "interserver") == 0) { /* interserver <key> <pid> */
        int32_t pid = atoi(a2);
        aclrtServerPid sp = {0, &pid, 1};
        rc = aclrtIpcMemImportPidInterServer(a1, &sp, 1);
        snprintf(out, len, "%d", rc);
    } else if (strcmp(cmd, "import") == 0) { /* import <key> <flags> */
        void *p = NULL;
        rc = aclrtIpcMemImportByKey(&p, a1, strtoull(a2, NULL, 0));
        const char *msg = rc != ACL_SUCCESS ? aclGetRecentErrMsg() : NULL;
        snprintf(out, len, "%d %" PRIxPTR " %s", rc, (uintptr_t)p, msg != NULL ? msg : "");
    } else if (strcmp(cmd, "close") == 0) {
        rc = aclrtIpcMemClose(a1);
        snprintf(out, len, "%d", rc);
    } else if (strcmp(cmd, "fill") == 0) { /* fill <ptr> <bytes> <byte>: a device memset */
        size_t n = strtoull(a2, NULL, 0);
        rc = aclrtMemset(parse_ptr(a1), n, atoi(a3), n);
        snprintf(out, len, "%d", rc);
    } else if (strcmp(cmd, "check") == 0) { /* check <ptr> <bytes> <byte>: D2H and count the others */
        size_t n = strtoull(a2, NULL, 0);
        unsigned char *h = malloc(n);
        rc = aclrtMemcpy(h, n, parse_ptr(a1), n, ACL_MEMCPY_DEVICE_TO_HOST);
        size_t bad = 0;
        for (size_t i = 0; rc == ACL_SUCCESS && i < n; i++) {
            bad += h[i] != (unsigned char)atoi(a3);
        }
        free(h);
        snprintf(out, len, "%d %zu", rc, bad);
    } else if (strcmp(cmd, "attr") == 0) {
        aclrtPtrAttributes at;
        memset(&at, 0, sizeof at);
        rc = aclrtPointerGetAttributes(parse_ptr(a1), &at);
        snprintf(out, len, "%d %d %u %u", rc, (int)at.location.type, at.location.id, at.pageSize);
    } else if (strcmp(cmd, "d2d") == 0) { /* d2d <ptr> <bytes>: into a new buffer of the current device */
        size_t n = strtoull(a2, NULL, 0);
        void *local = NULL;
        rc = aclrtMalloc(&local, n, ACL_MEM_MALLOC_NORMAL_ONLY);
        aclError rc2 = rc == ACL_SUCCESS ? aclrtMemcpy(local, n, parse_ptr(a1), n, ACL_MEMCPY_DEVICE_TO_DEVICE) : rc;
        aclrtFree(local);
        snprintf(out, len, "%d", rc2);
    } else if (strcmp(cmd, "hosttouch") == 0) { /* reads the pointer on the host: faults? */
        snprintf(out, len, "%s", host_read_faults(parse_ptr(a1)) ? "faulted" : "read");
    } else if (strcmp(cmd, "finalize") == 0) {
        rc = aclFinalize();
        snprintf(out, len, "%d", rc);
    } else {
        snprintf(out, len, "unknown command '%s'", cmd);
    }
    return 1;
}

/* Each thread imports, reads and closes its own key many times. */
typedef struct stress_arg {
    char key[65];
    int failures;
} stress_arg;

static void *stress_thread(void *p)
{
    stress_arg *a = p;
    aclrtSetDevice(0);
    for (int i = 0; i < 50; i++) {
        void *d = NULL;
        unsigned char b = 0;
        if (aclrtIpcMemImportByKey(&d, a->key, 0) != ACL_SUCCESS ||
            aclrtMemcpy(&b, 1, d, 1, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS || b != 0x42 ||
            aclrtIpcMemClose(a->key) != ACL_SUCCESS) {
            a->failures++;
        }
    }
    aclrtResetDevice(0);
    return NULL;
}

static int run_child(const char *role, int argc, char **argv)
{
    if (strcmp(role, "stress") == 0) { /* stress <key>...: one thread per key */
        aclInit(NULL);
        pthread_t t[16];
        stress_arg a[16];
        int n = argc < 16 ? argc : 16;
        for (int i = 0; i < n; i++) {
            snprintf(a[i].key, sizeof a[i].key, "%s", argv[i]);
            a[i].failures = 0;
            pthread_create(&t[i], NULL, stress_thread, &a[i]);
        }
        int failures = 0;
        for (int i = 0; i < n; i++) {
            pthread_join(t[i], NULL);
            failures += a[i].failures;
        }
        mt_parent_send("%d", failures);
        aclFinalize();
        return failures == 0 ? 0 : 1;
    }
    /* "shell" */
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        return 2;
    }
    char line[512], out[512];
    while (mt_parent_recv(line, sizeof line) == 0) {
        out[0] = '\0';
        if (!shell_command(line, out, sizeof out)) {
            break;
        }
        mt_parent_send("%s", out);
    }
    aclFinalize(); /* 100037 after a "finalize" command: fine */
    return 0;
}

/* ================================================================ parent side */

/* Sends a command to the child and reads the answer into out. */
/* The aclError at the start of an answer. */
static int rc_of(const char *answer)
{
    return atoi(answer);
}

/* "rc ptr ..." -> ptr */
static void *ptr_of(const char *answer)
{
    const char *sp = strchr(answer, ' ');
    return sp != NULL ? parse_ptr(sp + 1) : NULL;
}

/* "rc n": the second number */
static long long second_of(const char *answer)
{
    const char *sp = strchr(answer, ' ');
    return sp != NULL ? atoll(sp + 1) : -1;
}

static void fill_host_to_dev(void *dev, size_t n, int byte)
{
    CHECK_OK(aclrtMemset(dev, n, byte, n));
}

static size_t count_not(void *dev, size_t n, int byte)
{
    unsigned char *h = malloc(n);
    CHECK_OK(aclrtMemcpy(h, n, dev, n, ACL_MEMCPY_DEVICE_TO_HOST));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad += h[i] != (unsigned char)byte;
    }
    free(h);
    return bad;
}

static int start_shell(mt_child *c, const char *const *env)
{
    return mt_child_start(c, "shell", env, (const char *)NULL);
}

/* §3.1: the importer maps the exporter's pages (a write on either side is seen by the
 * other after a synchronous copy), a real device pointer in its own process. */
static void test_zero_copy_both_ways(void)
{
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    fill_host_to_dev(p, MIB, 0x5A);
    char key[65];
    memset(key, 'x', sizeof key);
    CHECK_OK(aclrtIpcMemGetExportKey(p, MIB, key, sizeof key, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION));
    CHECK(strlen(key) < 65 && strncmp(key, "acl-ipc-m-", 10) == 0);

    mt_child c;
    if (start_shell(&c, NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    void *q = ptr_of(ans);
    CHECK(q != NULL);
    mt_child_ask(&c, ans, sizeof ans, "check %p %zu %d", q, MIB, 0x5A);
    CHECK_STR_EQ(ans, "0 0"); /* the exporter's bytes */
    mt_child_ask(&c, ans, sizeof ans, "attr %p", q);
    char expect[64];
    snprintf(expect, sizeof expect, "0 %d 0 4096", (int)ACL_MEM_LOCATION_TYPE_DEVICE);
    CHECK_STR_EQ(ans, expect); /* device memory of device 0, the exporter's page size */
    mt_child_ask(&c, ans, sizeof ans, "fill %p %d %d", q, 4096, 0x33);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    CHECK_EQ(count_not(p, 4096, 0x33), 0); /* the importer's write, seen here */
    CHECK_EQ(count_not((char *)p + 4096, MIB - 4096, 0x5A), 0);
    fill_host_to_dev((char *)p + 8192, 4096, 0x44);
    mt_child_ask(&c, ans, sizeof ans, "check %p %d %d", (char *)q + 8192, 4096, 0x44);
    CHECK_STR_EQ(ans, "0 0");
    /* bounds hold in the importer: past the exported size is an error, not a read */
    mt_child_ask(&c, ans, sizeof ans, "check %p %d %d", (char *)q + MIB - 16, 64, 0);
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_PARAM_INVALID);
    /* imported memory is not the importer's to free: aclrtIpcMemClose, not aclrtFree */
    mt_child_ask(&c, ans, sizeof ans, "free %p", q);
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_MEMORY_FREE);
    mt_child_ask(&c, ans, sizeof ans, "close %s", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "close %s", key);
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_PARAM_INVALID);
    mt_child_ask(&c, ans, sizeof ans, "check %p %d %d", q, 16, 0); /* closed: no longer mapped */
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_PARAM_INVALID);
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_OK(aclrtIpcMemClose(key));
    CHECK_EQ(aclrtIpcMemClose(key), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(count_not(p, 4096, 0x33), 0); /* the exporter's memory is untouched by the close */
    CHECK_OK(aclrtFree(p));
}

/* §3.1 argument rules, in the exporting process: key length 65, flags, page alignment
 * (FAQ-IPC: a slice of a larger block is refused), range, what memory can be exported;
 * importing one's own key, malformed and unknown keys. */
static void test_exporter_errors(void)
{
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, 16 * 4096, ACL_MEM_MALLOC_NORMAL_ONLY));
    char key[65];
    uint64_t dis = ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION;
    CHECK_EQ(aclrtIpcMemGetExportKey(p, 4096, key, 64, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtIpcMemGetExportKey");
    CHECK_EQ(aclrtIpcMemGetExportKey(p, 4096, key, 66, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemGetExportKey(p, 4096, NULL, 65, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemGetExportKey(NULL, 4096, key, 65, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemGetExportKey(p, 0, key, 65, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemGetExportKey(p, 4096, key, 65, 2), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemGetExportKey((char *)p + 32, 4096, key, 65, dis), ACL_ERROR_RT_ADDR_UNALIGNED);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "page boundary");
    CHECK_EQ(aclrtIpcMemGetExportKey(p, 17 * 4096, key, 65, dis), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtIpcMemGetExportKey((char *)p + 15 * 4096, 2 * 4096, key, 65, dis), ACL_ERROR_RT_PARAM_INVALID);
    char host[64];
    CHECK_EQ(aclrtIpcMemGetExportKey(host, sizeof host, key, 65, dis), ACL_ERROR_RT_PARAM_INVALID);
    void *pinned = NULL;
    CHECK_OK(aclrtMallocHost(&pinned, 4096));
    CHECK_EQ(aclrtIpcMemGetExportKey(pinned, 4096, key, 65, dis), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFreeHost(pinned));
    /* a whole page inside an allocation may be exported (it starts on a page) */
    CHECK_OK(aclrtIpcMemGetExportKey((char *)p + 4096, 4096, key, 65, dis));
    char key2[65];
    CHECK_OK(aclrtIpcMemGetExportKey(p, 16 * 4096, key2, 65, dis)); /* each export is a new key */
    CHECK(strcmp(key, key2) != 0);

    /* the importer side of the rules, here */
    void *d = NULL;
    CHECK_EQ(aclrtIpcMemImportByKey(&d, key, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT); /* own process */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "this process");
    CHECK_EQ(aclrtIpcMemImportByKey(&d, "not-a-key", 0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtIpcMemImportByKey(&d, "acl-ipc-n-1-0000000000000001-0000000000000001", 0),
             ACL_ERROR_RT_PARAM_INVALID); /* a notify key */
    CHECK_EQ(aclrtIpcMemImportByKey(NULL, key, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemImportByKey(&d, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemImportByKey(&d, key, 2), ACL_ERROR_INVALID_PARAM);
    /* pid 1 runs no mock broker: the exporter is gone */
    CHECK_EQ(aclrtIpcMemImportByKey(&d, "acl-ipc-m-1-0000000000000001-0000000000000001", 0), ACL_ERROR_RT_IPC_ERROR);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "not running");

    int32_t pid = 1234, bad = -5;
    CHECK_EQ(aclrtIpcMemSetImportPid(key, NULL, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemSetImportPid(key, &pid, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemSetImportPid(key, &bad, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemSetImportPid(NULL, &pid, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemSetImportPid("acl-ipc-m-1-0000000000000001-0000000000000001", &pid, 1),
             ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtIpcMemSetImportPid(key, &pid, 1));
    /* A3 only (§3.1): this is an A2 part */
    CHECK_EQ(aclrtIpcMemSetAttr(key, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_HCCS),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "Ascend910B1");
    CHECK_EQ(aclrtIpcMemSetAttr(key, (aclrtIpcMemAttrType)1, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemSetAttr(key, ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, 4), ACL_ERROR_INVALID_PARAM);
    aclrtServerPid sp = {0, &pid, 1};
    CHECK_EQ(aclrtIpcMemImportPidInterServer(key, &sp, 1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);

    CHECK_EQ(aclrtIpcMemClose(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtIpcMemClose("acl-ipc-m-1-0000000000000001-0000000000000001"), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtIpcMemClose(key));
    CHECK_OK(aclrtIpcMemClose(key2));
    CHECK_EQ(aclrtIpcMemSetImportPid(key, &pid, 1), ACL_ERROR_RT_PARAM_INVALID); /* closed */
    CHECK_OK(aclrtFree(p));
    CHECK_EQ(aclrtIpcMemGetExportKey(p, 4096, key, 65, dis), ACL_ERROR_RT_PARAM_INVALID); /* freed */
}

/* VMM memory is shared with the shareable-handle calls, not IPC keys. */
static void test_vmm_memory_is_not_an_ipc_key(void)
{
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof prop);
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    aclrtDrvMemHandle h = NULL;
    void *va = NULL;
    CHECK_OK(aclrtMallocPhysical(&h, 2 * MIB, &prop, 0));
    CHECK_OK(aclrtReserveMemAddress(&va, 2 * MIB, 0, NULL, 0));
    CHECK_OK(aclrtMapMem(va, 2 * MIB, 0, h, 0));
    char key[65];
    CHECK_EQ(aclrtIpcMemGetExportKey(va, 4096, key, 65, 1), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtMemExportToShareableHandle");
    CHECK_OK(aclrtUnmapMem(va));
    CHECK_OK(aclrtReleaseMemAddress(va));
    CHECK_OK(aclrtFreePhysical(h));
}

static void *import_without_context(void *arg)
{
    void *d = NULL;
    *(aclError *)arg = aclrtIpcMemImportByKey(&d, "acl-ipc-m-1-0000000000000001-0000000000000001", 0);
    return NULL;
}

static void test_import_needs_a_context(void)
{
    aclError rc = ACL_SUCCESS;
    pthread_t t;
    pthread_create(&t, NULL, import_without_context, &rc);
    pthread_join(t, NULL);
    CHECK_EQ(rc, ACL_ERROR_RT_CONTEXT_NULL);
}

/* §3.1: with the default flag only whitelisted pids (aclrtDeviceGetBareTgid) import. */
static void test_pid_whitelist(void)
{
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_NORMAL_ONLY));
    fill_host_to_dev(p, 4096, 7);
    char key[65];
    CHECK_OK(aclrtIpcMemGetExportKey(p, 4096, key, 65, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT));
    mt_child c;
    if (start_shell(&c, NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_NO_PERMISSION);
    CHECK(strstr(ans, "whitelist") != NULL);
    mt_child_ask(&c, ans, sizeof ans, "pid");
    int32_t child_pid = (int32_t)second_of(ans);
    CHECK_EQ(child_pid, c.pid);
    int32_t other = child_pid + 1;
    CHECK_OK(aclrtIpcMemSetImportPid(key, &other, 1));
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_NO_PERMISSION);
    CHECK_OK(aclrtIpcMemSetImportPid(key, &child_pid, 1)); /* added to the list */
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    void *q = ptr_of(ans);
    mt_child_ask(&c, ans, sizeof ans, "check %p %d %d", q, 4096, 7);
    CHECK_STR_EQ(ans, "0 0");
    /* one import per key and process (mock choice) */
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(strstr(ans, "already imported") != NULL);
    mt_child_ask(&c, ans, sizeof ans, "close %s", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", key); /* again after the close */
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "close %s", key);
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_OK(aclrtIpcMemClose(key));
    CHECK_OK(aclrtFree(p));
}

/* G-IPC: the exporter must not close before the importer imported, or the import fails;
 * an exporter that freed the memory ends new imports too (the memory must still exist). */
static void test_import_after_close_or_free_fails(void)
{
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_NORMAL_ONLY));
    char closed[65], freed[65];
    CHECK_OK(aclrtIpcMemGetExportKey(p, 4096, closed, 65, 1));
    CHECK_OK(aclrtIpcMemGetExportKey(p, 4096, freed, 65, 1));
    CHECK_OK(aclrtIpcMemClose(closed));
    CHECK_OK(aclrtFree(p));
    mt_child c;
    if (start_shell(&c, NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", closed);
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_IPC_ERROR);
    CHECK(strstr(ans, "closed") != NULL);
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", freed);
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_IPC_ERROR);
    CHECK(strstr(ans, "freed") != NULL);
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_OK(aclrtIpcMemClose(freed)); /* the exporter still closes its key */
}

/* Mock choice for a broken order: the exporter closes and frees while the importer still
 * maps the memory. The importer keeps reading and writing the same pages; this process
 * never hands them out again until the importer closed; then they are freed (zeros). */
static void test_exporter_frees_first(void)
{
    /* device 3 is used by no other test here: its region is fresh, so the first-fit
     * allocator's addresses show which pages are still held */
    CHECK_OK(aclrtSetDevice(3));
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, 8 * 4096, ACL_MEM_MALLOC_NORMAL_ONLY));
    fill_host_to_dev(p, 8 * 4096, 0x61);
    char key[65];
    CHECK_OK(aclrtIpcMemGetExportKey(p, 8 * 4096, key, 65, 1));
    mt_child c;
    if (start_shell(&c, NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    void *q = ptr_of(ans);
    CHECK_OK(aclrtIpcMemClose(key)); /* before the importer: the order the docs forbid */
    CHECK_OK(aclrtFree(p));
    void *p2 = NULL;
    CHECK_OK(aclrtMalloc(&p2, 8 * 4096, ACL_MEM_MALLOC_NORMAL_ONLY));
    CHECK(p2 != p); /* the pages are still the importer's */
    CHECK_EQ(count_not(p2, 8 * 4096, 0), 0);
    mt_child_ask(&c, ans, sizeof ans, "check %p %d %d", q, 8 * 4096, 0x61);
    CHECK_STR_EQ(ans, "0 0"); /* the importer reads the data, not freed or foreign memory */
    mt_child_ask(&c, ans, sizeof ans, "fill %p %d %d", q, 4096, 0x62);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "close %s", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS); /* the importer's close releases the pages */
    CHECK_OK(aclrtFree(p2));
    void *p3 = NULL;
    CHECK_OK(aclrtMalloc(&p3, 8 * 4096, ACL_MEM_MALLOC_NORMAL_ONLY));
    CHECK(p3 == p); /* handed out again, freed in between */
    CHECK_EQ(count_not(p3, 8 * 4096, 0), 0);
    CHECK_OK(aclrtFree(p3));
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtResetDevice(3));
}

/* An importer that exits without closing releases what it held (its connection ends). */
static void test_importer_exit_releases(void)
{
    mt_child ex, im;
    if (start_shell(&ex, NULL) != 0 || start_shell(&im, NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&ex, ans, sizeof ans, "malloc %d %d", 4 * 4096, (int)ACL_MEM_MALLOC_NORMAL_ONLY);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    void *p = ptr_of(ans);
    mt_child_ask(&ex, ans, sizeof ans, "fill %p %d %d", p, 4 * 4096, 0x11);
    mt_child_ask(&ex, ans, sizeof ans, "export %p %d 1", p, 4 * 4096);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    char key[80] = "";
    sscanf(ans, "%*d %79s", key);
    mt_child_ask(&im, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&ex, ans, sizeof ans, "close %s", key);
    mt_child_ask(&ex, ans, sizeof ans, "free %p", p);
    mt_child_ask(&ex, ans, sizeof ans, "malloc %d %d", 4 * 4096, (int)ACL_MEM_MALLOC_NORMAL_ONLY);
    CHECK(ptr_of(ans) != p); /* held by the importer */
    mt_child_ask(&ex, ans, sizeof ans, "free %p", ptr_of(ans));
    mt_child_send(&im, "exit"); /* no close: the process just goes */
    CHECK_EQ(mt_child_wait(&im), 0);
    /* the exporter's broker sees the connection end; wait until it has (bounded) */
    bool reused = false;
    for (int i = 0; i < 1000 && !reused; i++) {
        mt_child_ask(&ex, ans, sizeof ans, "malloc %d %d", 4 * 4096, (int)ACL_MEM_MALLOC_NORMAL_ONLY);
        reused = ptr_of(ans) == p;
        mt_child_ask(&ex, ans, sizeof ans, "free %p", ptr_of(ans));
        if (!reused) {
            usleep(10000);
        }
    }
    CHECK(reused);
    mt_child_send(&ex, "exit");
    CHECK_EQ(mt_child_wait(&ex), 0);
}

/* Mock choice: an exporter that finalizes (or exits) while the memory is imported leaves
 * the pages to the importer; imports after that fail (507022). */
static void test_exporter_finalizes_first(void)
{
    mt_child ex, im;
    if (start_shell(&ex, NULL) != 0 || start_shell(&im, NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&ex, ans, sizeof ans, "malloc %d %d", 4096, (int)ACL_MEM_MALLOC_NORMAL_ONLY);
    void *p = ptr_of(ans);
    mt_child_ask(&ex, ans, sizeof ans, "fill %p %d %d", p, 4096, 0x77);
    mt_child_ask(&ex, ans, sizeof ans, "export %p %d 1", p, 4096);
    char key[80] = "";
    sscanf(ans, "%*d %79s", key);
    mt_child_ask(&im, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    void *q = ptr_of(ans);
    mt_child_ask(&ex, ans, sizeof ans, "finalize");
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&im, ans, sizeof ans, "check %p %d %d", q, 4096, 0x77);
    CHECK_STR_EQ(ans, "0 0");
    mt_child_ask(&im, ans, sizeof ans, "fill %p %d %d", q, 4096, 0x78);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&im, ans, sizeof ans, "check %p %d %d", q, 4096, 0x78);
    CHECK_STR_EQ(ans, "0 0");
    mt_child_send(&ex, "exit");
    CHECK_EQ(mt_child_wait(&ex), 0);
    mt_child_ask(&im, ans, sizeof ans, "close %s", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS); /* the exporter is gone: a local close */
    mt_child_ask(&im, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_IPC_ERROR);
    mt_child_send(&im, "exit");
    CHECK_EQ(mt_child_wait(&im), 0);
}

/* A 1 GiB buffer is mapped, not copied (the benchmark scripts/bench_ipc.py times it). */
static void test_one_gib(void)
{
    size_t n = (size_t)1 << 30;
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, n, ACL_MEM_MALLOC_HUGE_ONLY));
    unsigned char head[16], tail[16];
    memset(head, 0xA1, sizeof head);
    memset(tail, 0xA2, sizeof tail);
    CHECK_OK(aclrtMemcpy(p, 16, head, 16, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy((char *)p + n - 16, 16, tail, 16, ACL_MEMCPY_HOST_TO_DEVICE));
    char key[65];
    CHECK_OK(aclrtIpcMemGetExportKey(p, n, key, 65, 1));
    mt_child c;
    if (start_shell(&c, NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    void *q = ptr_of(ans);
    CHECK_EQ((uintptr_t)q % (2 * MIB), 0); /* huge-page memory on a 2 MiB boundary */
    mt_child_ask(&c, ans, sizeof ans, "check %p %d %d", q, 16, 0xA1);
    CHECK_STR_EQ(ans, "0 0");
    mt_child_ask(&c, ans, sizeof ans, "check %p %d %d", (char *)q + n - 16, 16, 0xA2);
    CHECK_STR_EQ(ans, "0 0");
    mt_child_ask(&c, ans, sizeof ans, "attr %p", q);
    char expect[64];
    snprintf(expect, sizeof expect, "0 %d 0 %u", (int)ACL_MEM_LOCATION_TYPE_DEVICE, 2u << 20);
    CHECK_STR_EQ(ans, expect);
    mt_child_ask(&c, ans, sizeof ans, "close %s", key);
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_OK(aclrtIpcMemClose(key));
    CHECK_OK(aclrtFree(p));
}

/* §3.1 import flags: memory of another device needs peer access for copies between the
 * devices; ENABLE_PEER_ACCESS enables it at the import. A process that does not see the
 * exporter's device gets the memory on its current device (mock choice). */
static void test_peer_access_and_visible_devices(void)
{
    CHECK_OK(aclrtSetDevice(1));
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_NORMAL_ONLY));
    fill_host_to_dev(p, 4096, 0x21);
    char k1[65], k2[65], k3[65];
    CHECK_OK(aclrtIpcMemGetExportKey(p, 4096, k1, 65, 1));
    CHECK_OK(aclrtIpcMemGetExportKey(p, 4096, k2, 65, 1));
    CHECK_OK(aclrtIpcMemGetExportKey(p, 4096, k3, 65, 1));
    CHECK_OK(aclrtSetDevice(0));
    mt_child c, v;
    const char *const only_phys_2[] = {"ASCEND_RT_VISIBLE_DEVICES=2", NULL};
    if (start_shell(&c, NULL) != 0 || start_shell(&v, only_phys_2) != 0) {
        CHECK(0);
        return;
    }
    char ans[512], expect[64];
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", k1);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    void *q1 = ptr_of(ans);
    mt_child_ask(&c, ans, sizeof ans, "attr %p", q1);
    snprintf(expect, sizeof expect, "0 %d 1 4096", (int)ACL_MEM_LOCATION_TYPE_DEVICE);
    CHECK_STR_EQ(ans, expect); /* memory of device 1 */
    mt_child_ask(&c, ans, sizeof ans, "d2d %p %d", q1, 4096); /* into device 0: no peer access yet */
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_PARAM_INVALID);
    mt_child_ask(&c, ans, sizeof ans, "import %s 1", k2);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "d2d %p %d", ptr_of(ans), 4096);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "d2d %p %d", q1, 4096); /* the pair is enabled for both now */
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&c, ans, sizeof ans, "close %s", k1);
    mt_child_ask(&c, ans, sizeof ans, "close %s", k2);
    /* a process that sees physical device 2 only */
    mt_child_ask(&v, ans, sizeof ans, "import %s 1", k3);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    void *q3 = ptr_of(ans);
    mt_child_ask(&v, ans, sizeof ans, "attr %p", q3);
    snprintf(expect, sizeof expect, "0 %d 0 4096", (int)ACL_MEM_LOCATION_TYPE_DEVICE);
    CHECK_STR_EQ(ans, expect);
    mt_child_ask(&v, ans, sizeof ans, "check %p %d %d", q3, 4096, 0x21);
    CHECK_STR_EQ(ans, "0 0");
    mt_child_ask(&v, ans, sizeof ans, "close %s", k3);
    mt_child_send(&c, "exit");
    mt_child_send(&v, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_EQ(mt_child_wait(&v), 0);
    CHECK_OK(aclrtIpcMemClose(k1));
    CHECK_OK(aclrtIpcMemClose(k2));
    CHECK_OK(aclrtIpcMemClose(k3));
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtFree(p));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtResetDevice(1));
}

/* ASCEND_MOCK_ISOLATION=1 in the importer: the imported pages are inaccessible to host
 * code outside runtime operations, like the importer's own device memory, and the
 * runtime's copies still reach them. */
static void test_importer_isolation(void)
{
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, 2 * 4096, ACL_MEM_MALLOC_NORMAL_ONLY));
    fill_host_to_dev(p, 2 * 4096, 0x19);
    char key[65];
    CHECK_OK(aclrtIpcMemGetExportKey(p, 2 * 4096, key, 65, 1));
    const char *const iso[] = {"ASCEND_MOCK_ISOLATION=1", NULL};
    mt_child c;
    if (start_shell(&c, iso) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "import %s 0", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    void *q = ptr_of(ans);
    mt_child_ask(&c, ans, sizeof ans, "check %p %d %d", q, 2 * 4096, 0x19);
    CHECK_STR_EQ(ans, "0 0");
    mt_child_ask(&c, ans, sizeof ans, "fill %p %d %d", q, 4096, 0x1A);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    CHECK_EQ(count_not(p, 4096, 0x1A), 0);
    mt_child_ask(&c, ans, sizeof ans, "hosttouch %p", q);
    CHECK_STR_EQ(ans, "faulted");
    mt_child_ask(&c, ans, sizeof ans, "close %s", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_send(&c, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_OK(aclrtIpcMemClose(key));
    CHECK_OK(aclrtFree(p));
}

/* Support (§3.1): not on 310B; SetAttr and ImportPidInterServer on A3 only. */
static void test_soc_support(void)
{
    const char *const b310[] = {"ASCEND_MOCK_SOC_NAME=Ascend310B1", NULL};
    const char *const a3[] = {"ASCEND_MOCK_SOC_NAME=Ascend910_9391", NULL};
    mt_child c, d;
    if (start_shell(&c, b310) != 0 || start_shell(&d, a3) != 0) {
        CHECK(0);
        return;
    }
    char ans[512];
    mt_child_ask(&c, ans, sizeof ans, "malloc 4096 %d", (int)ACL_MEM_MALLOC_NORMAL_ONLY);
    void *p = ptr_of(ans);
    mt_child_ask(&c, ans, sizeof ans, "export %p 4096 1", p);
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    mt_child_ask(&c, ans, sizeof ans, "import acl-ipc-m-1-0000000000000001-0000000000000001 0");
    CHECK_EQ(rc_of(ans), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    mt_child_ask(&d, ans, sizeof ans, "malloc 4096 %d", (int)ACL_MEM_MALLOC_NORMAL_ONLY);
    void *q = ptr_of(ans);
    mt_child_ask(&d, ans, sizeof ans, "export %p 4096 0", q);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    char key[80] = "";
    sscanf(ans, "%*d %79s", key);
    mt_child_ask(&d, ans, sizeof ans, "setattr %s 1", key);
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    mt_child_ask(&d, ans, sizeof ans, "setattr %s 4", key);
    CHECK_EQ(rc_of(ans), ACL_ERROR_INVALID_PARAM);
    mt_child_ask(&d, ans, sizeof ans, "interserver %s %d", key, (int)getpid());
    CHECK_EQ(rc_of(ans), ACL_SUCCESS);
    void *mine = NULL; /* whitelisted through the InterServer call: this process imports */
    CHECK_OK(aclrtIpcMemImportByKey(&mine, key, 0));
    CHECK_OK(aclrtIpcMemClose(key));
    mt_child_send(&c, "exit");
    mt_child_send(&d, "exit");
    CHECK_EQ(mt_child_wait(&c), 0);
    CHECK_EQ(mt_child_wait(&d), 0);
}

/* Many threads of one importer import, read and close concurrently (TSAN run). */
static void test_concurrent_imports(void)
{
    enum { N = 6 };
    void *p[N];
    char keys[N][65];
    for (int i = 0; i < N; i++) {
        CHECK_OK(aclrtMalloc(&p[i], 4096, ACL_MEM_MALLOC_NORMAL_ONLY));
        fill_host_to_dev(p[i], 4096, 0x42);
        CHECK_OK(aclrtIpcMemGetExportKey(p[i], 4096, keys[i], 65, 1));
    }
    mt_child c;
    if (mt_child_start(&c, "stress", NULL, keys[0], keys[1], keys[2], keys[3], keys[4], keys[5],
                       (const char *)NULL) != 0) {
        CHECK(0);
        return;
    }
    char ans[64];
    CHECK_EQ(mt_child_recv(&c, ans, sizeof ans), 0);
    CHECK_STR_EQ(ans, "0");
    CHECK_EQ(mt_child_wait(&c), 0);
    for (int i = 0; i < N; i++) {
        CHECK_OK(aclrtIpcMemClose(keys[i]));
        CHECK_OK(aclrtFree(p[i]));
    }
}

int main(int argc, char **argv)
{
    if (mt_is_child(argc, argv)) {
        return run_child(argv[2], argc - 3, argv + 3);
    }
    mt_mock_env("ASCEND_MOCK_DEVICE_COUNT", "4", (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_zero_copy_both_ways);
    RUN_TEST(test_exporter_errors);
    RUN_TEST(test_vmm_memory_is_not_an_ipc_key);
    RUN_TEST(test_import_needs_a_context);
    RUN_TEST(test_pid_whitelist);
    RUN_TEST(test_import_after_close_or_free_fails);
    RUN_TEST(test_exporter_frees_first);
    RUN_TEST(test_importer_exit_releases);
    RUN_TEST(test_exporter_finalizes_first);
    RUN_TEST(test_one_gib);
    RUN_TEST(test_peer_access_and_visible_devices);
    RUN_TEST(test_importer_isolation);
    RUN_TEST(test_soc_support);
    RUN_TEST(test_concurrent_imports);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
