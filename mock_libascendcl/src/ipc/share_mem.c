/*
 * share_mem.c - IPC memory (acl_next_semantics.md §3.1; IPC, G-IPC#进程间共享内存,
 * FAQ-IPC): aclrtIpcMemGetExportKey / aclrtIpcMemSetImportPid /
 * aclrtIpcMemImportPidInterServer / aclrtIpcMemSetAttr / aclrtIpcMemImportByKey /
 * aclrtIpcMemClose, and the key helpers the other share_ files use.
 *
 * The exporter pins a page-aligned range of its device memory (mem/ipc.c) under a key;
 * an importer maps the very same pages into its own device address range (zero-copy).
 * Order (G-IPC): importers close before the exporter closes, and the exporter closes
 * before it frees. When that order is broken the mock never lets a process touch freed
 * memory: an exporter's close ends the key (imports after it fail: 507022) while the
 * ranges already imported stay valid until their importers close; an exporter's aclrtFree
 * ends new imports too (507022), and the pages live on, unused by new allocations, until
 * the exporter has closed and every importer has closed (or exited).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "mem/mem.h"
#include "ipc/ipc.h"
#include "ipc/ipc_private.h"

/* --------------------------------------------------------------- helpers */

void ipc_key_format(char *buf, char k, const ipc_addr *a)
{
    snprintf(buf, IPC_KEY_LEN, "acl-ipc-%c-%d-%016" PRIx64 "-%016" PRIx64, k, (int)a->pid, a->nonce, a->id);
}

bool ipc_key_parse(const char *key, char k, ipc_addr *a)
{
    char kind = 0;
    int pid = 0, used = 0;
    unsigned long long nonce = 0, id = 0;
    if (strnlen(key, IPC_KEY_LEN) >= IPC_KEY_LEN ||
        sscanf(key, "acl-ipc-%c-%d-%16llx-%16llx%n", &kind, &pid, &nonce, &id, &used) != 4 ||
        (size_t)used != strlen(key) || kind != k || pid <= 0) {
        return false;
    }
    a->pid = pid;
    a->nonce = nonce;
    a->id = id;
    return true;
}

bool ipc_addr_is_self(const ipc_addr *a)
{
    int32_t pid;
    uint64_t nonce;
    ipc_self(&pid, &nonce);
    return a->pid == pid;
}

aclError ipc_check_pids(const char *fn, const int32_t *pid, size_t num, const char *what)
{
    if (pid == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", what);
    }
    if (num == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'num' is 0");
    }
    for (size_t i = 0; i < num; i++) {
        if (pid[i] <= 0) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s[%zu] is %d, not a process id", what, i, (int)pid[i]);
        }
    }
    return ACL_SUCCESS;
}

aclError ipc_flatten_server_pids(const char *fn, const aclrtServerPid *arr, size_t num, int32_t **out, size_t *n)
{
    if (arr == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'serverPids' is NULL");
    }
    if (num == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'num' is 0");
    }
    size_t total = 0;
    for (size_t i = 0; i < num; i++) {
        aclError rc = ipc_check_pids(fn, arr[i].pid, arr[i].num, "serverPids[].pid");
        if (rc != ACL_SUCCESS) {
            return rc;
        }
        total += arr[i].num;
    }
    int32_t *all = malloc(total * sizeof(*all));
    if (all == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < num; i++) {
        /* every super-device id is this (simulated, single) server */
        memcpy(all + k, arr[i].pid, arr[i].num * sizeof(*all));
        k += arr[i].num;
    }
    *out = all;
    *n = total;
    return ACL_SUCCESS;
}

/* The families that have IPC memory (§3.1): all but 310B. */
#define MEM_SOCS (CORE_SOC_950 | CORE_SOC_BIT(CORE_SOC_A3) | CORE_SOC_BIT(CORE_SOC_A2) | CORE_SOC_BIT(CORE_SOC_310P) | \
                  CORE_SOC_BIT(CORE_SOC_910))

static bool match_key(const ipc_export *e, const void *arg)
{
    return strcmp(e->key, (const char *)arg) == 0;
}

/* ------------------------------------------------------------- imports */

/* What this process imported by key (one import per key and process). */
typedef struct mem_import {
    char key[IPC_KEY_LEN];
    void *ptr;
    struct mem_import *next;
} mem_import;

static mock_mutex g_imports_mu = MOCK_MUTEX_INIT(MOCK_LOCK_IPC_IMPORTS);
static mem_import *g_imports;

/* ------------------------------------------------------------- exporter */

aclError aclrtIpcMemGetExportKey(void *devPtr, size_t size, char *key, size_t len, uint64_t flags)
{
    static const char fn[] = "aclrtIpcMemGetExportKey";
    MOCK_REQUIRE_NONNULL(fn, devPtr);
    MOCK_REQUIRE_NONNULL(fn, key);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    if (len != IPC_KEY_LEN) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'len' is %zu; it must be %d", len, IPC_KEY_LEN);
    }
    if (flags != ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT && flags != ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'flags' is 0x%llx (ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT 0x0 or "
                          "..._DISABLE_PID_VALIDATION 0x1)",
                          (unsigned long long)flags);
    }
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, MEM_SOCS);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    ipc_export *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    rc = mem_ipc_export_range(fn, devPtr, size, &e->range);
    if (rc == ACL_SUCCESS) {
        rc = ipc_broker_start(fn);
        if (rc != ACL_SUCCESS) {
            mem_ipc_unpin(e->range.pin, false);
        }
    }
    if (rc != ACL_SUCCESS) {
        free(e);
        return rc;
    }
    e->kind = IPC_KIND_MEM;
    e->check_pid = flags == ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT;
    char text[IPC_KEY_LEN];
    ipc_export_add(e, 'm', text); /* gives it an id and its key */
    memcpy(key, text, IPC_KEY_LEN);
    return ACL_SUCCESS;
}

/* Appends a whitelist to the export with key `key`. */
typedef struct pid_list {
    const int32_t *pids;
    size_t n;
    bool ok;
} pid_list;

static void add_pids(ipc_export *e, void *arg)
{
    pid_list *l = arg;
    l->ok = ipc_export_add_pids(e, l->pids, l->n);
}

typedef struct key_pids {
    const char *key;
    pid_list list;
} key_pids;

static bool match_key_pids(const ipc_export *e, const void *arg)
{
    return match_key(e, ((const key_pids *)arg)->key);
}

static void add_key_pids(ipc_export *e, void *arg)
{
    add_pids(e, &((key_pids *)arg)->list);
}

static aclError whitelist_key(const char *fn, const char *key, const int32_t *pids, size_t n)
{
    key_pids kp = {key, {pids, n, false}};
    if (!ipc_export_with(IPC_KIND_MEM, match_key_pids, add_key_pids, &kp)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "key '%.64s' is not exported by this process (or was closed)", key);
    }
    if (!kp.list.ok) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    return ACL_SUCCESS;
}

aclError aclrtIpcMemSetImportPid(const char *key, int32_t *pid, size_t num)
{
    static const char fn[] = "aclrtIpcMemSetImportPid";
    MOCK_REQUIRE_NONNULL(fn, key);
    aclError rc = ipc_check_pids(fn, pid, num, "pid");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    rc = core_soc_require(fn, MEM_SOCS);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return whitelist_key(fn, key, pid, num);
}

aclError aclrtIpcMemImportPidInterServer(const char *key, aclrtServerPid *serverPids, size_t num)
{
    static const char fn[] = "aclrtIpcMemImportPidInterServer";
    MOCK_REQUIRE_NONNULL(fn, key);
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, CORE_SOC_BIT(CORE_SOC_A3)); /* A3 super-nodes only (§3.1) */
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int32_t *all = NULL;
    size_t n = 0;
    rc = ipc_flatten_server_pids(fn, serverPids, num, &all, &n);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = whitelist_key(fn, key, all, n);
    free(all);
    return rc;
}

typedef struct key_attr {
    const char *key;
    uint64_t attr;
} key_attr;

static bool match_key_attr(const ipc_export *e, const void *arg)
{
    return match_key(e, ((const key_attr *)arg)->key);
}

static void set_attr(ipc_export *e, void *arg)
{
    e->attr_link = ((key_attr *)arg)->attr;
}

aclError aclrtIpcMemSetAttr(const char *key, aclrtIpcMemAttrType type, uint64_t attr)
{
    static const char fn[] = "aclrtIpcMemSetAttr";
    MOCK_REQUIRE_NONNULL(fn, key);
    if ((int)type != ACL_RT_IPC_MEM_ATTR_ACCESS_LINK) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'type' %d is not ACL_RT_IPC_MEM_ATTR_ACCESS_LINK (0)",
                          (int)type);
    }
    if (attr > ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_UB_MULTI_PORT_PATH) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'attr' %llu is not a link (SIO 0, HCCS 1, UB_ONE_PORT_PATH 2, UB_MULTI_PORT_PATH 3)",
                          (unsigned long long)attr);
    }
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, CORE_SOC_BIT(CORE_SOC_A3)); /* cross-die links: A3 (§3.1) */
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* The doc asks for the call before GetExportKey "with the same key", which only
     * GetExportKey gives: the mock takes it on an exported key. The link is kept; the
     * simulated memory is the same whichever link reaches it. */
    key_attr ka = {key, attr};
    if (!ipc_export_with(IPC_KIND_MEM, match_key_attr, set_attr, &ka)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "key '%.64s' is not exported by this process (or was closed)", key);
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------- importer */

aclError aclrtIpcMemImportByKey(void **devPtr, const char *key, uint64_t flags)
{
    static const char fn[] = "aclrtIpcMemImportByKey";
    MOCK_REQUIRE_NONNULL(fn, devPtr);
    MOCK_REQUIRE_NONNULL(fn, key);
    if (flags != ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT && flags != ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'flags' is 0x%llx (ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT 0x0 or "
                          "..._ENABLE_PEER_ACCESS 0x1)",
                          (unsigned long long)flags);
    }
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, MEM_SOCS);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_context *ctx = NULL;
    rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    ipc_addr a;
    if (!ipc_key_parse(key, 'm', &a)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'key' ('%.64s') is not a key from aclrtIpcMemGetExportKey", key);
    }
    mem_import *im = calloc(1, sizeof(*im));
    if (im == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    snprintf(im->key, sizeof im->key, "%s", key);
    /* one import per key and process (mock choice): claim the key first */
    bool dup = false;
    core_mutex_lock(&g_imports_mu);
    for (mem_import *x = g_imports; x != NULL && !dup; x = x->next) {
        dup = strcmp(x->key, im->key) == 0;
    }
    if (!dup) {
        im->next = g_imports;
        g_imports = im; /* ptr NULL: import in progress */
    }
    core_mutex_unlock(&g_imports_mu);
    if (dup) {
        free(im);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "key '%.64s' is already imported by this process (close it first; use the pointer of the "
                          "first import)",
                          key);
    }
    int fd = -1;
    ipc_grant g;
    void *token = NULL;
    void *ptr = NULL;
    rc = ipc_client_acquire(fn, &a, IPC_KIND_MEM, false, &fd, &g, &token);
    int32_t cur = core_ctx_device(ctx);
    if (rc == ACL_SUCCESS) {
        /* The memory is device memory of the exporter's physical device when this process
         * sees that device, else of the current one (mock choice); a copy between it and
         * another device needs peer access, enabled now with ..._ENABLE_PEER_ACCESS. */
        int32_t dev = cur;
        const mock_config *cfg = core_config_get();
        for (uint32_t u = 0; u < cfg->visible_count; u++) {
            if (cfg->visible_map[u] == g.phys_device) {
                dev = (int32_t)u;
            }
        }
        rc = mem_ipc_import_map(fn, dev, fd, g.offset, g.length, g.page_size, ipc_client_release, token, &ptr);
        close(fd);
        if (rc != ACL_SUCCESS) {
            ipc_client_release(token);
        } else if (flags == ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS && dev != cur) {
            mem_peer_enable(cur, dev);
        }
    }
    core_mutex_lock(&g_imports_mu);
    if (rc == ACL_SUCCESS) {
        im->ptr = ptr;
    } else {
        for (mem_import **pp = &g_imports; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == im) {
                *pp = im->next;
                break;
            }
        }
    }
    core_mutex_unlock(&g_imports_mu);
    if (rc != ACL_SUCCESS) {
        free(im);
        return rc;
    }
    *devPtr = ptr;
    return ACL_SUCCESS;
}

/* ----------------------------------------------------------------- close */

aclError aclrtIpcMemClose(const char *key)
{
    static const char fn[] = "aclrtIpcMemClose";
    MOCK_REQUIRE_NONNULL(fn, key);
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, MEM_SOCS);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* The exporter's close ends the key; the importers keep their mappings (and the
     * pages their pins) until they close. */
    ipc_export *e = ipc_export_take(IPC_KIND_MEM, match_key, key);
    if (e != NULL) {
        ipc_export_free(e, false);
        return ACL_SUCCESS;
    }
    mem_import *im = NULL;
    core_mutex_lock(&g_imports_mu);
    for (mem_import **pp = &g_imports; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->ptr != NULL && strcmp((*pp)->key, key) == 0) {
            im = *pp;
            *pp = im->next;
            break;
        }
    }
    core_mutex_unlock(&g_imports_mu);
    if (im == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "key '%.64s' is neither exported nor imported by this process (or already closed)", key);
    }
    /* unmapped at once unless a copy still runs on it; the exporter hears of it then */
    mem_ipc_import_unmap(im->ptr);
    free(im);
    return ACL_SUCCESS;
}

void ipc_mem_finalize(void)
{
    core_mutex_lock(&g_imports_mu);
    mem_import *all = g_imports;
    g_imports = NULL;
    core_mutex_unlock(&g_imports_mu);
    while (all != NULL) {
        mem_import *n = all->next;
        if (all->ptr != NULL) {
            mem_ipc_import_unmap(all->ptr);
        }
        free(all);
        all = n;
    }
}
