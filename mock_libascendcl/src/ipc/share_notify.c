/*
 * share_notify.c - IPC notifies (acl_next_semantics.md §3.4; NTF,
 * G-IPC#进程间共享Notify): aclrtNotifyGetExportKey / aclrtNotifySetImportPid /
 * aclrtNotifySetImportPidInterServer / aclrtNotifyImportByKey.
 *
 * The notify's word is shared (src/notify/notify.c); the key names (pid, nonce, id) like
 * a memory key ("acl-ipc-n-..."), `len` must be at least 65. Export flags DEFAULT 0x0
 * (whitelist) or DISABLE_PID_VALIDATION 0x2, import flags DEFAULT 0x0 or
 * ENABLE_PEER_ACCESS 0x2 (a notify has nothing to reach across devices in the mock: the
 * flag is accepted). The importer may only record; the creator waits. A second export
 * of a notify gives the same key (with the newer flags). The creator must not destroy
 * before the import: it fails then (507022). Support: 950PR, A3, A2, 310P, 910;
 * ...InterServer on A3 only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "notify/notify.h"
#include "ipc/ipc.h"
#include "ipc/ipc_private.h"

#define NOTIFY_SOCS                                                                                       \
    (CORE_SOC_BIT(CORE_SOC_950PR) | CORE_SOC_BIT(CORE_SOC_A3) | CORE_SOC_BIT(CORE_SOC_A2) |             \
     CORE_SOC_BIT(CORE_SOC_310P) | CORE_SOC_BIT(CORE_SOC_910))

typedef struct notify_match {
    aclrtNotify notify;
    uint32_t gen;
    bool check_pid;
    char key[IPC_KEY_LEN];
    const int32_t *pids;
    size_t n;
    bool ok;
} notify_match;

static bool match_notify(const ipc_export *e, const void *arg)
{
    const notify_match *m = arg;
    return e->handle == m->notify && e->gen == m->gen;
}

static void reexport(ipc_export *e, void *arg)
{
    notify_match *m = arg;
    e->check_pid = m->check_pid;
    memcpy(m->key, e->key, IPC_KEY_LEN);
}

aclError aclrtNotifyGetExportKey(aclrtNotify notify, char *key, size_t len, uint64_t flags)
{
    static const char fn[] = "aclrtNotifyGetExportKey";
    MOCK_REQUIRE_NONNULL(fn, notify);
    MOCK_REQUIRE_NONNULL(fn, key);
    if (len < IPC_KEY_LEN) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'len' is %zu; it must be at least %d", len,
                          IPC_KEY_LEN);
    }
    if (flags != ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT && flags != ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'flags' is 0x%llx (ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT 0x0 or "
                          "..._DISABLE_PID_VALIDATION 0x2)",
                          (unsigned long long)flags);
    }
    MOCK_ENTER(fn);
    notify_match m;
    memset(&m, 0, sizeof m);
    m.notify = notify;
    m.check_pid = flags == ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT;
    aclError rc = core_soc_require(fn, NOTIFY_SOCS);
    if (rc == ACL_SUCCESS) {
        rc = notify_ipc_export(fn, notify, &m.gen);
    }
    if (rc == ACL_SUCCESS) {
        rc = ipc_broker_start(fn);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (!ipc_export_with(IPC_KIND_NOTIFY, match_notify, reexport, &m)) {
        ipc_export *e = calloc(1, sizeof(*e));
        if (e == NULL) {
            return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
        }
        e->kind = IPC_KIND_NOTIFY;
        e->check_pid = m.check_pid;
        e->handle = notify;
        e->gen = m.gen;
        ipc_export_add(e, 'n', m.key);
    }
    memcpy(key, m.key, IPC_KEY_LEN);
    return ACL_SUCCESS;
}

static void add_pids(ipc_export *e, void *arg)
{
    notify_match *m = arg;
    m->ok = ipc_export_add_pids(e, m->pids, m->n);
}

static aclError whitelist(const char *fn, aclrtNotify notify, const int32_t *pids, size_t n)
{
    notify_match m;
    memset(&m, 0, sizeof m);
    m.notify = notify;
    m.pids = pids;
    m.n = n;
    aclError rc = notify_ipc_export(fn, notify, &m.gen); /* a live notify of this process */
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (!ipc_export_with(IPC_KIND_NOTIFY, match_notify, add_pids, &m)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'notify' has no export key yet: call aclrtNotifyGetExportKey first");
    }
    if (!m.ok) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    return ACL_SUCCESS;
}

aclError aclrtNotifySetImportPid(aclrtNotify notify, int32_t *pid, size_t num)
{
    static const char fn[] = "aclrtNotifySetImportPid";
    MOCK_REQUIRE_NONNULL(fn, notify);
    aclError rc = ipc_check_pids(fn, pid, num, "pid");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    rc = core_soc_require(fn, NOTIFY_SOCS);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return whitelist(fn, notify, pid, num);
}

aclError aclrtNotifySetImportPidInterServer(aclrtNotify notify, aclrtServerPid *serverPids, size_t num)
{
    static const char fn[] = "aclrtNotifySetImportPidInterServer";
    MOCK_REQUIRE_NONNULL(fn, notify);
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, CORE_SOC_BIT(CORE_SOC_A3));
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int32_t *all = NULL;
    size_t n = 0;
    rc = ipc_flatten_server_pids(fn, serverPids, num, &all, &n);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = whitelist(fn, notify, all, n);
    free(all);
    return rc;
}

aclError aclrtNotifyImportByKey(aclrtNotify *notify, const char *key, uint64_t flags)
{
    static const char fn[] = "aclrtNotifyImportByKey";
    MOCK_REQUIRE_NONNULL(fn, notify);
    MOCK_REQUIRE_NONNULL(fn, key);
    if (flags != ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT && flags != ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'flags' is 0x%llx (ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT 0x0 or "
                          "..._ENABLE_PEER_ACCESS 0x2)",
                          (unsigned long long)flags);
    }
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, NOTIFY_SOCS);
    mock_context *ctx = NULL;
    if (rc == ACL_SUCCESS) {
        rc = core_ctx_require(fn, &ctx);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    ipc_addr a;
    if (!ipc_key_parse(key, 'n', &a)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'key' ('%.64s') is not a key from aclrtNotifyGetExportKey", key);
    }
    ipc_word_ref *o = NULL;
    rc = ipc_word_open(fn, &a, IPC_KIND_NOTIFY, "notify's shared word", &o);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = notify_ipc_open(fn, o->word, ipc_word_close, o, notify);
    if (rc != ACL_SUCCESS) {
        ipc_word_close(o);
    }
    return rc;
}
