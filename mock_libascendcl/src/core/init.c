/*
 * init.c - aclInit / aclFinalize / aclFinalizeReference, init/finalize callbacks,
 * version queries, the leak report.
 *
 * acl_abi.md §5.1 (mocking the RT implementation, acl.cpp):
 *  - aclInit(NULL) or aclInit("") is legal; a path must name a readable regular file
 *    (else ACL_ERROR_INVALID_FILE 100003; larger than 10 MiB: ACL_ERROR_INVALID_FILE_SIZE
 *    100005) holding valid JSON (else ACL_ERROR_PARSE_FILE 100006).
 *  - a second aclInit increments an internal count and returns
 *    ACL_ERROR_REPEAT_INITIALIZE (100002); with a config whose content differs from the
 *    first one it returns ACL_ERROR_INVALID_PARAM.
 *  - aclFinalize de-initialises at once whatever the count; again ->
 *    ACL_ERROR_REPEAT_FINALIZE (100037). aclFinalizeReference decrements and only the
 *    last reference finalises; with no reference left -> 100037. Its refCount output is
 *    optional (NULL drops the reference all the same). Re-init is allowed.
 *  - "err_msg_mode": "1" in the JSON switches aclGetRecentErrMsg to process level; a
 *    "dump" section configures dumping like aclmdlSetDump (validated by dump.c).
 * The JSON is parsed with the mock's shared parser (core/json.c).
 * §6.2: aclsysGetCANNVersion / aclsysGetVersionStr / aclsysGetVersionNum read
 * $ASCEND_HOME_PATH/share/info/<pkg>/version.info ("Version=" line) like CANN. Mock
 * choice: when ASCEND_HOME_PATH is unset (no CANN installed, the usual CI case) they
 * answer the configured ASCEND_MOCK_CANN_VERSION instead of failing with 100003.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "core/core_private.h"

#define CONFIG_MAX_BYTES (10u * 1024u * 1024u)
#define MAX_INIT_CALLBACKS 64

/* {"defaultDevice": {"default_device": "N"}} (a string or a number; acl_abi.md §5.2):
 * *device = N, or -1 when the key is absent. N must be a visible device id, else
 * ACL_ERROR_INVALID_PARAM (mock choice, README). */
static aclError config_default_device(const char *fn, const char *path, const mock_json *root,
                                      int32_t *device)
{
    *device = -1;
    const mock_json *section = core_json_get(root, "defaultDevice");
    if (section == NULL) {
        return ACL_SUCCESS;
    }
    if (section->t != MOCK_JSON_OBJECT) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "config file '%s': \"defaultDevice\" must be an object, not %s", path,
                          core_json_type_name(section->t));
    }
    const mock_json *v = core_json_get(section, "default_device");
    if (v == NULL) {
        return ACL_SUCCESS;
    }
    long long id = -1;
    char *end = NULL;
    if (v->t == MOCK_JSON_STRING || v->t == MOCK_JSON_NUMBER) {
        errno = 0;
        id = isdigit((unsigned char)v->str[0]) ? strtoll(v->str, &end, 10) : -1;
        if (errno != 0 || end == NULL || *end != '\0') {
            id = -1;
        }
    }
    if (id < 0 || id >= (long long)core_visible_count()) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "config file '%s': \"defaultDevice\".\"default_device\" (%s%s) is not a "
                          "visible device id [0, %u)", path,
                          v->t == MOCK_JSON_STRING || v->t == MOCK_JSON_NUMBER ? v->str : "",
                          v->t == MOCK_JSON_STRING || v->t == MOCK_JSON_NUMBER ? "" : core_json_type_name(v->t),
                          core_visible_count());
    }
    *device = (int32_t)id;
    return ACL_SUCCESS;
}

/* Reads and validates an aclInit config file. On success *content is malloc'd. */
static aclError load_config_file(const char *fn, const char *path, char **content, int *err_mode,
                                 int32_t *default_device)
{
    char *buf = NULL;
    size_t size = 0;
    mock_json *root = NULL;
    aclError rc = core_json_load_file(fn, "config file", path, CONFIG_MAX_BYTES, &buf, &size, &root);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (root->t != MOCK_JSON_OBJECT) {
        core_json_free(root);
        free(buf);
        return core_error(fn, ACL_ERROR_PARSE_FILE,
                          "config file '%s': the top-level JSON value must be an object", path);
    }
    const mock_json *mode = core_json_get(root, "err_msg_mode");
    *err_mode = mode != NULL && (mode->t == MOCK_JSON_STRING || mode->t == MOCK_JSON_NUMBER) &&
                        strcmp(mode->str, "1") == 0
                    ? 1
                    : 0;
    rc = config_default_device(fn, path, root, default_device);
    core_json_free(root);
    if (rc != ACL_SUCCESS) {
        free(buf);
        return rc;
    }
    *content = buf;
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------------ state */

typedef struct init_cb {
    aclRegisterCallbackType type;
    aclInitCallbackFunc init_fn;
    aclFinalizeCallbackFunc fini_fn;
    void *user;
} init_cb;

/* Serialises aclInit / aclFinalize / aclFinalizeReference as a whole (including the
 * callbacks and the teardown), so an aclInit racing with a finalisation waits for it;
 * guards g_refcount, g_config and the transitions of g_initialized (which other
 * threads read without it). Recursive: init/finalize callbacks may call these
 * functions again. */
static mock_mutex g_lifecycle = MOCK_RECURSIVE_MUTEX_INIT(MOCK_LOCK_LIFECYCLE);
static atomic_bool g_initialized;
static uint64_t g_refcount;
static char *g_config; /* content of the first config, NULL for none */

static mock_mutex g_cb_lock = MOCK_MUTEX_INIT(MOCK_LOCK_INIT_CALLBACKS);
static init_cb g_init_cbs[MAX_INIT_CALLBACKS];
static size_t g_init_cb_count;
static init_cb g_fini_cbs[MAX_INIT_CALLBACKS];
static size_t g_fini_cb_count;

/* Leak snapshot taken when the last aclFinalize started. */
static mock_mutex g_leak_lock = MOCK_MUTEX_INIT(MOCK_LOCK_LEAK_SNAPSHOT);
static int64_t g_leak_snap[MOCK_MAX_DEVICES + 1][MOCK_STAT_COUNT];

bool core_is_initialized(void)
{
    return atomic_load(&g_initialized);
}

static bool same_config(const char *a, const char *b)
{
    if (a == NULL || b == NULL) {
        return a == b;
    }
    return strcmp(a, b) == 0;
}

static aclError init_impl(const char *configPath)
{
    static const char fn[] = "aclInit";
    MOCK_ENTER(fn);
    char *content = NULL;
    int err_mode = -1;
    int32_t default_device = -1;
    if (configPath != NULL && configPath[0] != '\0') {
        aclError rc = load_config_file(fn, configPath, &content, &err_mode, &default_device);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
    }
    if (atomic_load(&g_initialized)) {
        bool same = same_config(g_config, content);
        free(content);
        if (!same) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "already initialized with a different configuration");
        }
        g_refcount++;
        return core_error(fn, ACL_ERROR_REPEAT_INITIALIZE,
                          "already initialized (this call only takes a reference)");
    }
    /* The subsystems apply their parts of the config (e.g. a "dump" section); a failing
     * one leaves nothing behind. */
    core_init_info info = {fn, content != NULL ? configPath : NULL, content, content != NULL ? strlen(content) : 0};
    aclError sub_rc = core_subsystems_init(&info);
    if (sub_rc != ACL_SUCCESS) {
        free(content);
        return sub_rc;
    }
    g_config = content;
    g_refcount = 1;
    atomic_store(&g_initialized, true);
    core_error_set_process_mode(err_mode == 1);
    core_default_device_set(default_device);

    /* Init callbacks get the configuration text. */
    init_cb snap[MAX_INIT_CALLBACKS];
    core_mutex_lock(&g_cb_lock);
    size_t n = g_init_cb_count;
    memcpy(snap, g_init_cbs, n * sizeof snap[0]);
    core_mutex_unlock(&g_cb_lock);
    const char *text = content != NULL ? content : "";
    for (size_t i = 0; i < n; i++) {
        aclError rc = snap[i].init_fn(text, strlen(text), snap[i].user);
        if (rc != ACL_SUCCESS) {
            atomic_store(&g_initialized, false);
            g_refcount = 0;
            free(g_config);
            g_config = NULL;
            /* undo what this aclInit applied, so a later aclInit starts clean */
            core_subsystems_init_undo();
            core_error_set_process_mode(false);
            core_default_device_set(-1);
            return core_error(fn, rc, "init callback %zu (type %d) failed with %d", i,
                              (int)snap[i].type, rc);
        }
    }
    return ACL_SUCCESS;
}

static void take_snapshot(int64_t snap[MOCK_MAX_DEVICES + 1][MOCK_STAT_COUNT])
{
    for (int d = -1; d < MOCK_MAX_DEVICES; d++) {
        for (int k = 0; k < MOCK_STAT_COUNT; k++) {
            snap[d + 1][k] = core_stat_get(d, (mock_stat)k);
        }
    }
    /* slot 0 holds the totals (core_stat_get(-1) sums); keep only host-side objects
     * there: subtract the per-device parts. */
    for (int k = 0; k < MOCK_STAT_COUNT; k++) {
        for (int d = 0; d < MOCK_MAX_DEVICES; d++) {
            snap[0][k] -= snap[d + 1][k];
        }
    }
}

/* One part of a report line: singular and plural names of a count. */
typedef struct report_item {
    const char *one;
    const char *many;
} report_item;

/* What the program created (contexts and streams without the runtime's default ones)
 * and, apart, what the runtime keeps on its own (default contexts of aclrtSetDevice,
 * default streams of every context), with singular/plural names. */
static int format_report(char *buf, size_t len, int64_t snap[MOCK_MAX_DEVICES + 1][MOCK_STAT_COUNT])
{
    static const report_item created_items[] = {
        {"context", "contexts"},
        {"stream", "streams"},
        {"event", "events"},
        {"device allocation", "device allocations"},
        {"device byte", "device bytes"},
        {"host allocation", "host allocations"},
        {"host byte", "host bytes"},
    };
    static const report_item own_items[] = {
        {"default context", "default contexts"},
        {"default stream", "default streams"},
    };
    size_t used = 0;
    int total = 0;
#define EMIT(...)                                                                  \
    do {                                                                           \
        int w_ = snprintf(buf != NULL && used < len ? buf + used : NULL,           \
                          buf != NULL && used < len ? len - used : 0, __VA_ARGS__); \
        if (w_ > 0) {                                                              \
            used += (size_t)w_;                                                    \
            total += w_;                                                           \
        }                                                                          \
    } while (0)
    bool any = false;
    for (int slot = 0; slot <= MOCK_MAX_DEVICES; slot++) {
        const int64_t *v = snap[slot];
        const int64_t created[] = {
            v[MOCK_STAT_CONTEXTS] - v[MOCK_STAT_DEFAULT_CONTEXTS],
            v[MOCK_STAT_STREAMS] - v[MOCK_STAT_DEFAULT_STREAMS],
            v[MOCK_STAT_EVENTS],
            v[MOCK_STAT_ALLOCATIONS],
            v[MOCK_STAT_BYTES],
            v[MOCK_STAT_HOST_ALLOCATIONS],
            v[MOCK_STAT_HOST_BYTES],
        };
        const int64_t own[] = {v[MOCK_STAT_DEFAULT_CONTEXTS], v[MOCK_STAT_DEFAULT_STREAMS]};
        const size_t n_created = sizeof created / sizeof created[0];
        const size_t n_own = sizeof own / sizeof own[0];
        _Static_assert(sizeof created_items / sizeof created_items[0] == 7, "one name per count");
        _Static_assert(sizeof own_items / sizeof own_items[0] == 2, "one name per count");
        bool has_created = false;
        bool has_own = false;
        for (size_t k = 0; k < n_created; k++) {
            has_created = has_created || created[k] != 0;
        }
        for (size_t k = 0; k < n_own; k++) {
            has_own = has_own || own[k] != 0;
        }
        if (!has_created && !has_own) {
            continue;
        }
        if (slot == 0) {
            EMIT("mock_libascendcl leak report: host:");
        } else {
            EMIT("mock_libascendcl leak report: device %d:", slot - 1);
        }
        const char *sep = " ";
        for (size_t k = 0; k < n_created; k++) {
            if (created[k] != 0) {
                EMIT("%s%lld %s", sep, (long long)created[k],
                     created[k] == 1 ? created_items[k].one : created_items[k].many);
                sep = ", ";
            }
        }
        if (has_own) {
            EMIT(has_created ? " (plus the runtime's own:" : " only the runtime's own:");
            sep = " ";
            for (size_t k = 0; k < n_own; k++) {
                if (own[k] != 0) {
                    EMIT("%s%lld %s", sep, (long long)own[k], own[k] == 1 ? own_items[k].one : own_items[k].many);
                    sep = ", ";
                }
            }
            if (has_created) {
                EMIT(")");
            }
        }
        EMIT("\n");
        any = true;
    }
    if (!any) {
        EMIT("mock_libascendcl leak report: no leaks\n");
    }
#undef EMIT
    if (buf != NULL && len > 0 && used >= len) {
        buf[len - 1] = '\0';
    }
    return total;
}

static void finalize_now(void)
{
    /* Finalize callbacks first (the runtime is still usable inside them). */
    init_cb snap[MAX_INIT_CALLBACKS];
    core_mutex_lock(&g_cb_lock);
    size_t n = g_fini_cb_count;
    memcpy(snap, g_fini_cbs, n * sizeof snap[0]);
    core_mutex_unlock(&g_cb_lock);
    for (size_t i = 0; i < n; i++) {
        (void)snap[i].fini_fn(snap[i].user);
    }

    int64_t leaks[MOCK_MAX_DEVICES + 1][MOCK_STAT_COUNT];
    take_snapshot(leaks);
    core_mutex_lock(&g_leak_lock);
    memcpy(g_leak_snap, leaks, sizeof leaks);
    core_mutex_unlock(&g_leak_lock);

    core_subsystems_quiesce();  /* e.g. report subscriptions end */
    core_devices_finalize();    /* every context with its streams */
    core_subsystems_release();  /* what outlives contexts: events, memory, dump state */
    core_error_set_process_mode(false);

    if (core_config_get()->leak_report) {
        char text[4096];
        format_report(text, sizeof text, leaks);
        if (strstr(text, "no leaks") == NULL) {
            fputs(text, stderr);
            fflush(stderr);
        }
    }
}

static aclError finalize_impl(void)
{
    static const char fn[] = "aclFinalize";
    MOCK_ENTER(fn);
    if (!atomic_load(&g_initialized)) {
        return core_error(fn, ACL_ERROR_REPEAT_FINALIZE, "not initialized (aclInit not called, "
                          "or already finalized)");
    }
    if (core_worker_stream() != NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "called from a stream task: finalizing would wait "
                          "for that task (deadlock)");
    }
    atomic_store(&g_initialized, false);
    g_refcount = 0;
    free(g_config);
    g_config = NULL;
    finalize_now();
    return ACL_SUCCESS;
}

static aclError finalize_reference_impl(uint64_t *refCount)
{
    static const char fn[] = "aclFinalizeReference";
    /* refCount is an optional output: NULL still drops the reference (and finalises
     * on the last one). */
    MOCK_ENTER(fn);
    if (!atomic_load(&g_initialized) || g_refcount < 1) {
        return core_error(fn, ACL_ERROR_REPEAT_FINALIZE, "no aclInit reference is left");
    }
    if (g_refcount == 1 && core_worker_stream() != NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "called from a stream task: the last reference "
                          "would finalize and wait for that task (deadlock)");
    }
    g_refcount--;
    uint64_t left = g_refcount;
    bool last = left == 0;
    if (last) {
        atomic_store(&g_initialized, false);
        free(g_config);
        g_config = NULL;
    }
    if (refCount != NULL) {
        *refCount = left;
    }
    if (last) {
        finalize_now();
    }
    return ACL_SUCCESS;
}

aclError aclInit(const char *configPath)
{
    core_mutex_lock(&g_lifecycle);
    aclError rc = init_impl(configPath);
    core_mutex_unlock(&g_lifecycle);
    return rc;
}

aclError aclFinalize(void)
{
    core_mutex_lock(&g_lifecycle);
    aclError rc = finalize_impl();
    core_mutex_unlock(&g_lifecycle);
    return rc;
}

aclError aclFinalizeReference(uint64_t *refCount)
{
    core_mutex_lock(&g_lifecycle);
    aclError rc = finalize_reference_impl(refCount);
    core_mutex_unlock(&g_lifecycle);
    return rc;
}

/* ------------------------------------------------------- init callbacks */

static bool reg_type_ok(aclRegisterCallbackType type)
{
    int t = (int)type;
    return (t >= ACL_REG_TYPE_ACL_MODEL && t <= ACL_REG_TYPE_ACL_RETR) || t == ACL_REG_TYPE_OTHER;
}

/* Argument checks shared by the (un)register calls. */
static aclError cb_args_check(const char *fn, aclRegisterCallbackType type, bool has_fn)
{
    if (!reg_type_ok(type)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'type' (%d) is not an aclRegisterCallbackType", (int)type);
    }
    if (!has_fn) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'cbFunc' is NULL");
    }
    return ACL_SUCCESS;
}

/* Index of the entry with the same type and function in table[0..count), or count. */
static size_t cb_find_locked(const init_cb *table, size_t count, const init_cb *entry)
{
    size_t i = 0;
    while (i < count && !(table[i].type == entry->type && table[i].init_fn == entry->init_fn &&
                          table[i].fini_fn == entry->fini_fn)) {
        i++;
    }
    return i;
}

static aclError cb_register(const char *fn, init_cb *table, size_t *count, init_cb entry,
                            bool has_fn)
{
    aclError rc = cb_args_check(fn, entry.type, has_fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    core_mutex_lock(&g_cb_lock);
    size_t i = cb_find_locked(table, *count, &entry);
    if (i < *count) {
        table[i].user = entry.user; /* re-registration updates userData */
    } else if (*count < MAX_INIT_CALLBACKS) {
        table[(*count)++] = entry;
    } else {
        rc = ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    core_mutex_unlock(&g_cb_lock);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "too many callbacks (max %d)", MAX_INIT_CALLBACKS);
    }
    return ACL_SUCCESS;
}

static aclError cb_unregister(const char *fn, init_cb *table, size_t *count, init_cb entry,
                              bool has_fn)
{
    aclError rc = cb_args_check(fn, entry.type, has_fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    core_mutex_lock(&g_cb_lock);
    size_t i = cb_find_locked(table, *count, &entry);
    if (i < *count) {
        memmove(&table[i], &table[i + 1], (*count - i - 1) * sizeof table[0]);
        (*count)--;
    }
    core_mutex_unlock(&g_cb_lock);
    return ACL_SUCCESS; /* unregistering an unknown callback is a no-op */
}

aclError aclInitCallbackRegister(aclRegisterCallbackType type, aclInitCallbackFunc cbFunc,
                                 void *userData)
{
    init_cb e = {.type = type, .init_fn = cbFunc, .fini_fn = NULL, .user = userData};
    return cb_register("aclInitCallbackRegister", g_init_cbs, &g_init_cb_count, e,
                       cbFunc != NULL);
}

aclError aclInitCallbackUnRegister(aclRegisterCallbackType type, aclInitCallbackFunc cbFunc)
{
    init_cb e = {.type = type, .init_fn = cbFunc, .fini_fn = NULL, .user = NULL};
    return cb_unregister("aclInitCallbackUnRegister", g_init_cbs, &g_init_cb_count, e,
                         cbFunc != NULL);
}

aclError aclFinalizeCallbackRegister(aclRegisterCallbackType type, aclFinalizeCallbackFunc cbFunc,
                                     void *userData)
{
    init_cb e = {.type = type, .init_fn = NULL, .fini_fn = cbFunc, .user = userData};
    return cb_register("aclFinalizeCallbackRegister", g_fini_cbs, &g_fini_cb_count, e,
                       cbFunc != NULL);
}

aclError aclFinalizeCallbackUnRegister(aclRegisterCallbackType type, aclFinalizeCallbackFunc cbFunc)
{
    init_cb e = {.type = type, .init_fn = NULL, .fini_fn = cbFunc, .user = NULL};
    return cb_unregister("aclFinalizeCallbackUnRegister", g_fini_cbs, &g_fini_cb_count, e,
                         cbFunc != NULL);
}

/* ------------------------------------------------------------ leak report */

int aclmockGetLeakReport(char *buf, size_t len, int when)
{
    int64_t snap[MOCK_MAX_DEVICES + 1][MOCK_STAT_COUNT];
    if (when == ACLMOCK_REPORT_NOW) {
        take_snapshot(snap);
    } else if (when == ACLMOCK_REPORT_LAST_FINALIZE) {
        core_mutex_lock(&g_leak_lock);
        memcpy(snap, g_leak_snap, sizeof snap);
        core_mutex_unlock(&g_leak_lock);
    } else {
        return -1;
    }
    if (buf == NULL) {
        len = 0;
    }
    return format_report(buf, len, snap);
}

/* ------------------------------------------------------------ versions */

aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion)
{
    static const char fn[] = "aclrtGetVersion";
    if (majorVersion == NULL || minorVersion == NULL || patchVersion == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL",
                          majorVersion == NULL ? "majorVersion"
                          : minorVersion == NULL ? "minorVersion" : "patchVersion");
    }
    MOCK_ENTER(fn);
    *majorVersion = ACL_MAJOR_VERSION;
    *minorVersion = ACL_MINOR_VERSION;
    *patchVersion = ACL_PATCH_VERSION;
    return ACL_SUCCESS;
}

/* Reads the value of "<key>" (e.g. "Version=") from a key=value file, trimmed. */
static bool read_key(const char *path, const char *key, char *out, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return false;
    }
    char line[1024];
    bool found = false;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f) != NULL) {
        char *p = line;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (strncmp(p, key, klen) != 0) {
            continue;
        }
        p += klen;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        size_t n = strlen(p);
        while (n > 0 && isspace((unsigned char)p[n - 1])) {
            p[--n] = '\0';
        }
        if (n == 0 || n >= cap) {
            break;
        }
        memcpy(out, p, n + 1);
        found = true;
        break;
    }
    fclose(f);
    return found;
}

static bool pkg_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= 128 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!(isalnum(c) || c == '-' || c == '_' || c == '.')) {
            return false;
        }
    }
    return true;
}

/* <pkg>/version.info under $ASCEND_HOME_PATH/share/info, trying the name as given,
 * then with '-' -> '_' and '_' -> '-'. "driver"/"firmware" come from
 * /etc/ascend_install.info (acl_abi.md §6.2). Returns an ACL error (not recorded). */
static aclError read_pkg_version(const char *home, const char *pkg, char *out, size_t cap)
{
    char path[PATH_MAX + 256];
    if (strcmp(pkg, "driver") == 0 || strcmp(pkg, "firmware") == 0) {
        char base[PATH_MAX];
        const char *key = pkg[0] == 'd' ? "Driver_Install_Path_Param=" : "Firmware_Install_Path_Param=";
        if (!read_key("/etc/ascend_install.info", key, base, sizeof base)) {
            return ACL_ERROR_INVALID_FILE;
        }
        snprintf(path, sizeof path, "%s/%s/version.info", base, pkg);
        return read_key(path, "Version=", out, cap) ? ACL_SUCCESS : ACL_ERROR_INVALID_FILE;
    }
    char real[PATH_MAX];
    if (realpath(home, real) == NULL) {
        return ACL_ERROR_INVALID_FILE;
    }
    char alt[128];
    for (int attempt = 0; attempt < 3; attempt++) {
        snprintf(alt, sizeof alt, "%s", pkg);
        for (char *p = alt; *p != '\0'; p++) {
            if (attempt == 1 && *p == '-') {
                *p = '_';
            } else if (attempt == 2 && *p == '_') {
                *p = '-';
            }
        }
        if (attempt > 0 && strcmp(alt, pkg) == 0) {
            continue;
        }
        snprintf(path, sizeof path, "%s/share/info/%s/version.info", real, alt);
        if (read_key(path, "Version=", out, cap)) {
            return ACL_SUCCESS;
        }
    }
    return ACL_ERROR_INVALID_FILE;
}

/* Version of a package, or the mock version when ASCEND_HOME_PATH is unset. */
static aclError pkg_version(const char *fn, const char *pkg, char *out, size_t cap)
{
    const char *home = getenv("ASCEND_HOME_PATH");
    if (home == NULL || home[0] == '\0') {
        snprintf(out, cap, "%s", core_config_get()->cann_version);
        return ACL_SUCCESS;
    }
    aclError rc = read_pkg_version(home, pkg, out, cap);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc,
                          "no readable 'Version=' line for package '%s' (looked under "
                          "$ASCEND_HOME_PATH/share/info/%s/version.info or /etc/ascend_install.info)",
                          pkg, pkg);
    }
    return ACL_SUCCESS;
}

aclError aclsysGetCANNVersion(aclCANNPackageName name, aclCANNPackageVersion *version)
{
    static const char fn[] = "aclsysGetCANNVersion";
    static const char *const pkgs[] = {
        "runtime", "runtime", "bisheng-compiler", "hccl", "oam-tools", "ops-legacy", "ops-legacy",
        "driver",
    };
    MOCK_REQUIRE_NONNULL(fn, version);
    if ((int)name < 0 || (int)name >= (int)(sizeof pkgs / sizeof pkgs[0])) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'name' (%d) is not an aclCANNPackageName", (int)name);
    }
    MOCK_ENTER(fn);
    char v[ACL_PKG_VERSION_MAX_SIZE];
    aclError rc = pkg_version(fn, pkgs[name], v, sizeof v);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    memset(version, 0, sizeof *version);
    snprintf(version->version, sizeof version->version, "%s", v);
    char *parts[4] = {version->majorVersion, version->minorVersion, version->releaseVersion,
                      version->patchVersion};
    const char *p = v;
    for (int i = 0; i < 4 && *p != '\0'; i++) {
        const char *dot = i < 3 ? strchr(p, '.') : NULL;
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (len >= ACL_PKG_VERSION_PARTS_MAX_SIZE) {
            len = ACL_PKG_VERSION_PARTS_MAX_SIZE - 1;
        }
        memcpy(parts[i], p, len);
        parts[i][len] = '\0';
        if (dot == NULL) {
            break;
        }
        p = dot + 1;
    }
    return ACL_SUCCESS;
}

/* Shared front of aclsysGetVersion{Str,Num}: both pointers non-NULL, a well-formed package
 * name, the fault hook, then the version string of the package into v
 * (ACL_PKG_VERSION_MAX_SIZE bytes). */
static aclError version_front(const char *fn, const char *pkgName, const void *out, const char *out_name,
                              char *v)
{
    if (pkgName == NULL || out == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL",
                          pkgName == NULL ? "pkgName" : out_name);
    }
    if (!pkg_name_ok(pkgName)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'pkgName' is not a package name ([A-Za-z0-9._-], 1..127 chars)");
    }
    MOCK_ENTER(fn);
    return pkg_version(fn, pkgName, v, ACL_PKG_VERSION_MAX_SIZE);
}

aclError aclsysGetVersionStr(char *pkgName, char *versionStr)
{
    static const char fn[] = "aclsysGetVersionStr";
    char v[ACL_PKG_VERSION_MAX_SIZE];
    aclError rc = version_front(fn, pkgName, versionStr, "versionStr", v);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    memcpy(versionStr, v, strlen(v) + 1); /* caller buffer: ACL_PKG_VERSION_MAX_SIZE */
    return ACL_SUCCESS;
}

/* Leading decimal digits of s (at most 4), or -1 when s does not start with a digit. */
static long leading_number(const char *s)
{
    if (!isdigit((unsigned char)*s)) {
        return -1;
    }
    long x = 0;
    for (int digits = 0; digits < 4 && isdigit((unsigned char)*s); digits++, s++) {
        x = x * 10 + (*s - '0');
    }
    return x;
}

/* Finds the pre-release tag `tag` ("alpha", "beta", "rc"; case-insensitive, not inside a
 * longer word) in v; returns its number (the digits after it, optionally after '.' or
 * '-'; 0 without digits) or -1 when absent. */
static long prerelease_tag(const char *v, const char *tag)
{
    size_t n = strlen(tag);
    for (const char *p = v; *p != '\0'; p++) {
        if ((p != v && isalpha((unsigned char)p[-1])) || strncasecmp(p, tag, n) != 0 ||
            isalpha((unsigned char)p[n])) {
            continue;
        }
        const char *q = p + n;
        if ((*q == '.' || *q == '-') && isdigit((unsigned char)q[1])) {
            q++;
        }
        long x = leading_number(q);
        return x < 0 ? 0 : x;
    }
    return -1;
}

/* Mock encoding (the reference gives no formula): a release "a.b.c" is
 * a * 1000000 + b * 10000 + c * 100 ("8.5.0" -> 8050000; leading digits of each part).
 * A pre-release sits just below its release, in the 99 numbers above the previous
 * patch release (c <= 99): number - 100 + rank, with rank alpha N = 1 + N (N <= 29),
 * beta N = 31 + N (N <= 28), rc N = 61 + 2N (N <= 18), and one less for an alpha/beta
 * of an rc (old scheme "a.b.RCn.alphaM"; "a.b.RCn" is a pre-release of a.b.0). So
 * alpha < beta < rc < release, in both the "8.5.0-beta.1" / "8.5.0.rc2" and the
 * "8.3.RC1.alpha002" schemes. */
aclError aclsysGetVersionNum(char *pkgName, int32_t *versionNum)
{
    static const char fn[] = "aclsysGetVersionNum";
    char v[ACL_PKG_VERSION_MAX_SIZE];
    aclError rc = version_front(fn, pkgName, versionNum, "versionNum", v);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    long nums[3] = {0, 0, 0};
    const char *p = v;
    for (int i = 0; i < 3 && p != NULL; i++) {
        long x = leading_number(p);
        if (i == 0 && x < 0) {
            return core_error(fn, ACL_ERROR_INVALID_FILE, "version '%s' of '%s' is not numeric", v,
                              pkgName);
        }
        nums[i] = x < 0 ? 0 : (i == 0 ? (x > 2000 ? 2000 : x) : x % 100);
        p = strchr(p, '.');
        if (p != NULL) {
            p++;
        }
    }
    long num = nums[0] * 1000000 + nums[1] * 10000 + nums[2] * 100;
    long alpha = prerelease_tag(v, "alpha");
    long beta = prerelease_tag(v, "beta");
    long rcn = prerelease_tag(v, "rc");
    long rank = 0;
    if (rcn >= 0) {
        rank = 61 + 2 * (rcn > 18 ? 18 : rcn) - (alpha >= 0 || beta >= 0 ? 1 : 0);
    } else if (beta >= 0) {
        rank = 31 + (beta > 28 ? 28 : beta);
    } else if (alpha >= 0) {
        rank = 1 + (alpha > 29 ? 29 : alpha);
    }
    if (rank > 0) {
        num = num - 100 + rank;
    }
    *versionNum = (int32_t)(num < 0 ? 0 : num);
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ CANN attributes */

static const aclCannAttr k_attrs_910[] = {ACL_CANN_ATTR_INF_NAN, ACL_CANN_ATTR_BF16,
                                          ACL_CANN_ATTR_JIT_COMPILE};
static const aclCannAttr k_attrs_310p[] = {ACL_CANN_ATTR_JIT_COMPILE};

static bool soc_is_310p(void)
{
    return strncmp(core_config_get()->soc_name, "Ascend310", 9) == 0;
}

aclError aclGetCannAttributeList(const aclCannAttr **cannAttrList, size_t *num)
{
    static const char fn[] = "aclGetCannAttributeList";
    if (cannAttrList == NULL || num == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL",
                          cannAttrList == NULL ? "cannAttrList" : "num");
    }
    MOCK_ENTER(fn);
    if (soc_is_310p()) {
        *cannAttrList = k_attrs_310p;
        *num = sizeof k_attrs_310p / sizeof k_attrs_310p[0];
    } else {
        *cannAttrList = k_attrs_910;
        *num = sizeof k_attrs_910 / sizeof k_attrs_910[0];
    }
    return ACL_SUCCESS;
}

aclError aclGetCannAttribute(aclCannAttr cannAttr, int32_t *value)
{
    static const char fn[] = "aclGetCannAttribute";
    MOCK_REQUIRE_NONNULL(fn, value);
    int a = (int)cannAttr;
    if (a != ACL_CANN_ATTR_INF_NAN && a != ACL_CANN_ATTR_BF16 && a != ACL_CANN_ATTR_JIT_COMPILE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'cannAttr' (%d) is not a supported aclCannAttr", a);
    }
    MOCK_ENTER(fn);
    if (soc_is_310p()) {
        *value = a == ACL_CANN_ATTR_JIT_COMPILE ? 1 : 0;
    } else {
        *value = 1;
    }
    return ACL_SUCCESS;
}
