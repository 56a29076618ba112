/*
 * dump.c - aclmdlInitDump / aclmdlSetDump / aclmdlFinalizeDump.
 *
 * State machine (acl_abi.md §5.1, RT impl toolchain/dump.cpp):
 *   aclmdlInitDump before aclInit            -> ACL_ERROR_UNINITIALIZE (100001)
 *   aclmdlInitDump twice                     -> ACL_ERROR_REPEAT_INITIALIZE (100002)
 *   aclmdlSetDump / aclmdlFinalizeDump
 *       before aclmdlInitDump                -> ACL_ERROR_DUMP_NOT_RUN (100045)
 * The configuration file given to aclmdlSetDump is validated like CANN's
 * acl.json: it must exist and be readable (ACL_ERROR_INVALID_FILE 100003,
 * ACL_ERROR_INVALID_FILE_SIZE 100005), be valid JSON (ACL_ERROR_PARSE_FILE
 * 100006, message gives line/column) and contain a "dump" object whose known
 * keys have valid values (ACL_ERROR_INVALID_DUMP_CONFIG 100009, message names
 * the key). The reference pins down only the state machine above: the file
 * error codes and the checked keys (dump_list, dump_path, dump_mode,
 * dump_op_switch, dump_debug, dump_data, dump_level, dump_scene, dump_step;
 * unknown keys are ignored) follow CANN's acl.json documentation as we know
 * it. JSON syntax is checked by core/json.c. The "dump" section of an aclInit
 * config is applied by misc_dump_configure_from_init.
 * A host simulator runs no operators, so no dump data is written;
 * the accepted configuration is kept and reported by acldumpGetPath
 * (libascend_dump.so) through aclmockDumpGetPath below.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "misc/misc.h"
#include "misc/misc_private.h"

#define DUMP_MAX_FILE_SIZE (10u * 1024u * 1024u)
#define DUMP_PATH_MAX 4096

/* ================================================================== state */

#define DUMP_LAYERS_MAX 8192 /* bytes of op names kept from dump_list[*].layer */
#define DUMP_STEPS_MAX 256

typedef struct dump_cfg {
    bool data_dump;      /* dump_list non-empty or dump_op_switch "on" */
    bool overflow_dump;  /* dump_debug "on" */
    int exception_level; /* 0 none, 1 brief, 2 norm, 3 detail (dump_scene) */
    char path[DUMP_PATH_MAX];
    /* what the dump writer (src/diag, misc_dump_match) needs */
    bool inputs, outputs;   /* dump_mode: "output" (default), "input", "all" */
    bool stats;             /* dump_data "stats": statistics instead of tensors */
    bool all_ops;           /* dump_op_switch "on", or a dump_list entry without layers */
    size_t nlayers;         /* op names in `layers`, each NUL-terminated */
    char layers[DUMP_LAYERS_MAX];
    char steps[DUMP_STEPS_MAX]; /* dump_step ("0|3-5"), "" = every step */
} dump_cfg;

typedef struct dump_state {
    mock_mutex mu;
    bool inited;     /* between aclmdlInitDump and aclmdlFinalizeDump */
    bool configured; /* aclmdlSetDump succeeded in this session */
    dump_cfg cfg;
    bool init_on;    /* the aclInit config had a valid "dump" section */
    dump_cfg init_cfg;
} dump_state;

static dump_state g_dump = { .mu = MOCK_MUTEX_INIT(MOCK_LOCK_DUMP) };
/* Bumped whenever the effective config changes (g_dump.mu): the writer starts a new
 * output folder per configuration. */
static uint64_t g_generation;

/* The data dump needs every kernel launch observed (core_observing) while it is on. */
static void update_observing_locked(void)
{
    g_generation++;
    /* not effective_locked(): aclInit applies its config before it marks ACL initialized */
    bool on = (g_dump.inited && g_dump.configured && g_dump.cfg.data_dump) ||
              (g_dump.init_on && g_dump.init_cfg.data_dump);
    core_set_observing(CORE_OBSERVE_DUMP, on);
}

/* Ends the aclmdlInitDump session (g_dump.mu held). */
static void end_session_locked(void)
{
    g_dump.inited = false;
    g_dump.configured = false;
    memset(&g_dump.cfg, 0, sizeof g_dump.cfg);
    update_observing_locked();
}

static void dump_reset_locked(void)
{
    end_session_locked();
    g_dump.init_on = false;
    memset(&g_dump.init_cfg, 0, sizeof g_dump.init_cfg);
    update_observing_locked();
}

/* Called with g_dump.mu held: forget dump state that outlived aclFinalize
 * (aclFinalize ends dumping in CANN too; aclFinalize also calls
 * misc_dump_finalize, this is the safety net). */
static void dump_sync_with_init_locked(void)
{
    /* Only the aclmdlInitDump session is dropped here: the aclInit-config part
     * is stored by aclInit just before it marks ACL initialized, so it must not
     * be reset in that window; it is ignored while ACL is not initialized
     * (aclmockDumpGetPath) and cleared by misc_dump_finalize. */
    if (g_dump.inited && !core_is_initialized()) {
        end_session_locked();
    }
}

MOCK_HIDDEN void misc_dump_finalize(void)
{
    core_mutex_lock(&g_dump.mu);
    dump_reset_locked();
    core_mutex_unlock(&g_dump.mu);
}

aclError aclmdlInitDump(void)
{
    static const char fn[] = "aclmdlInitDump";
    MOCK_ENTER(fn);
    if (!core_is_initialized()) {
        return core_error(fn, ACL_ERROR_UNINITIALIZE, "aclInit has not been called");
    }
    core_mutex_lock(&g_dump.mu);
    dump_sync_with_init_locked();
    bool again = g_dump.inited;
    if (!again) {
        g_dump.inited = true;
        g_dump.configured = false;
    }
    core_mutex_unlock(&g_dump.mu);
    if (again) {
        return core_error(fn, ACL_ERROR_REPEAT_INITIALIZE,
                          "dump is already initialized (call aclmdlFinalizeDump first)");
    }
    return ACL_SUCCESS;
}

aclError aclmdlFinalizeDump(void)
{
    static const char fn[] = "aclmdlFinalizeDump";
    MOCK_ENTER(fn);
    core_mutex_lock(&g_dump.mu);
    dump_sync_with_init_locked();
    if (!g_dump.inited) {
        core_mutex_unlock(&g_dump.mu);
        return core_error(fn, ACL_ERROR_DUMP_NOT_RUN, "aclmdlInitDump has not been called");
    }
    end_session_locked();
    core_mutex_unlock(&g_dump.mu);
    return ACL_SUCCESS;
}

/* ============================================================ validation */

static bool str_in(const char *s, const char *const *options)
{
    for (size_t k = 0; options[k] != NULL; k++) {
        if (strcmp(s, options[k]) == 0) {
            return true;
        }
    }
    return false;
}

/* Optional string member with an enumerated value. */
static aclError check_enum_key(const char *fn, const char *file, const mock_json *dump, const char *key,
                               const char *const *options, const char **out)
{
    const mock_json *v = core_json_get(dump, key);
    *out = NULL;
    if (v == NULL) {
        return ACL_SUCCESS;
    }
    if (v->t != MOCK_JSON_STRING) {
        return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG, "dump config '%s': key 'dump.%s' must be a string, not %s",
                          file, key, core_json_type_name(v->t));
    }
    if (!str_in(v->str, options)) {
        char allowed[256] = "";
        for (size_t k = 0; options[k] != NULL; k++) {
            size_t used = strlen(allowed);
            snprintf(allowed + used, sizeof allowed - used, "%s\"%s\"", k ? ", " : "", options[k]);
        }
        return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                          "dump config '%s': key 'dump.%s' has invalid value \"%s\" (allowed: %s)", file, key,
                          v->str, allowed);
    }
    *out = v->str;
    return ACL_SUCCESS;
}

/* "0|3-5|10": non-negative integers or ascending ranges separated by '|'. */
static bool valid_step_spec(const char *s)
{
    if (*s == '\0') {
        return false;
    }
    while (*s != '\0') {
        if (*s < '0' || *s > '9') {
            return false;
        }
        unsigned long long lo = strtoull(s, (char **)&s, 10);
        if (*s == '-') {
            s++;
            if (*s < '0' || *s > '9') {
                return false;
            }
            unsigned long long hi = strtoull(s, (char **)&s, 10);
            if (hi < lo) {
                return false;
            }
        }
        if (*s == '|') {
            s++;
            if (*s == '\0') {
                return false;
            }
        } else if (*s != '\0') {
            return false;
        }
    }
    return true;
}

static aclError validate_dump_object(const char *fn, const char *file, const mock_json *root, dump_cfg *cfg)
{
    static const char *const on_off[] = { "on", "off", NULL };
    static const char *const modes[] = { "input", "output", "all", NULL };
    static const char *const datas[] = { "tensor", "stats", NULL };
    static const char *const levels[] = { "op", "kernel", "all", NULL };
    static const char *const scenes[] = { "normal", "lite_exception", "aic_err_brief_dump",
                                          "aic_err_norm_dump", "aic_err_detail_dump", NULL };
    aclError rc;
    const char *s;

    memset(cfg, 0, sizeof *cfg);
    if (root->t != MOCK_JSON_OBJECT) {
        return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                          "dump config '%s': the top-level value must be an object, not %s", file,
                          core_json_type_name(root->t));
    }
    const mock_json *dump = core_json_get(root, "dump");
    if (dump == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG, "dump config '%s': missing key 'dump'", file);
    }
    if (dump->t != MOCK_JSON_OBJECT) {
        return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG, "dump config '%s': key 'dump' must be an object, not %s",
                          file, core_json_type_name(dump->t));
    }

    /* dump_list: array of objects with optional model_name (string), layer (array of strings) */
    const mock_json *list = core_json_get(dump, "dump_list");
    size_t list_len = 0;
    if (list != NULL) {
        if (list->t != MOCK_JSON_ARRAY) {
            return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': key 'dump.dump_list' must be an array, not %s", file,
                              core_json_type_name(list->t));
        }
        size_t idx = 0;
        for (const mock_json *item = list->kids; item != NULL; item = item->next, idx++) {
            if (item->t != MOCK_JSON_OBJECT) {
                return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                                  "dump config '%s': 'dump.dump_list[%zu]' must be an object, not %s", file, idx,
                                  core_json_type_name(item->t));
            }
            const mock_json *mn = core_json_get(item, "model_name");
            if (mn != NULL && mn->t != MOCK_JSON_STRING) {
                return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                                  "dump config '%s': 'dump.dump_list[%zu].model_name' must be a string", file, idx);
            }
            const mock_json *layer = core_json_get(item, "layer");
            if (layer != NULL) {
                if (layer->t != MOCK_JSON_ARRAY) {
                    return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                                      "dump config '%s': 'dump.dump_list[%zu].layer' must be an array", file, idx);
                }
                size_t li = 0;
                for (const mock_json *l = layer->kids; l != NULL; l = l->next, li++) {
                    if (l->t != MOCK_JSON_STRING) {
                        return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                                          "dump config '%s': 'dump.dump_list[%zu].layer[%zu]' must be a string",
                                          file, idx, li);
                    }
                }
            }
        }
        list_len = idx;
    }

    /* the op names to dump: the union of every entry's "layer" list; an entry without
     * one (or with an empty one) dumps every op (model names are accepted and not
     * matched: the mock runs kernels outside models) */
    for (const mock_json *item = list != NULL ? list->kids : NULL; item != NULL; item = item->next) {
        const mock_json *layer = core_json_get(item, "layer");
        if (layer == NULL || layer->kids == NULL) {
            cfg->all_ops = true;
            continue;
        }
        for (const mock_json *l = layer->kids; l != NULL; l = l->next) {
            size_t used = 0;
            for (size_t k = 0; k < cfg->nlayers; k++) {
                used += strlen(cfg->layers + used) + 1;
            }
            size_t need = strlen(l->str) + 1;
            if (used + need + 1 > sizeof cfg->layers) {
                return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                                  "dump config '%s': the op names of 'dump.dump_list[*].layer' exceed the mock's "
                                  "limit of %d bytes",
                                  file, DUMP_LAYERS_MAX);
            }
            memcpy(cfg->layers + used, l->str, need);
            cfg->nlayers++;
        }
    }

    const char *op_switch = NULL, *debug = NULL, *scene = NULL, *mode = NULL, *data = NULL;
    if ((rc = check_enum_key(fn, file, dump, "dump_op_switch", on_off, &op_switch)) != ACL_SUCCESS) return rc;
    if ((rc = check_enum_key(fn, file, dump, "dump_debug", on_off, &debug)) != ACL_SUCCESS) return rc;
    if ((rc = check_enum_key(fn, file, dump, "dump_mode", modes, &mode)) != ACL_SUCCESS) return rc;
    if ((rc = check_enum_key(fn, file, dump, "dump_data", datas, &data)) != ACL_SUCCESS) return rc;
    cfg->inputs = mode != NULL && strcmp(mode, "output") != 0;
    cfg->outputs = mode == NULL || strcmp(mode, "input") != 0;
    cfg->stats = data != NULL && strcmp(data, "stats") == 0;
    if (op_switch != NULL && strcmp(op_switch, "on") == 0) {
        cfg->all_ops = true;
    }
    if ((rc = check_enum_key(fn, file, dump, "dump_level", levels, &s)) != ACL_SUCCESS) return rc;
    if ((rc = check_enum_key(fn, file, dump, "dump_scene", scenes, &scene)) != ACL_SUCCESS) return rc;

    const mock_json *step = core_json_get(dump, "dump_step");
    if (step != NULL) {
        if (step->t != MOCK_JSON_STRING) {
            return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': key 'dump.dump_step' must be a string, not %s", file,
                              core_json_type_name(step->t));
        }
        if (!valid_step_spec(step->str) || strlen(step->str) >= DUMP_STEPS_MAX) {
            return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': key 'dump.dump_step' has invalid value \"%s\" "
                              "(expected steps or ranges like \"0|3-5|10\", at most %d characters)",
                              file, step->str, DUMP_STEPS_MAX - 1);
        }
        snprintf(cfg->steps, sizeof cfg->steps, "%s", step->str);
    }

    cfg->data_dump = list_len > 0 || (op_switch != NULL && strcmp(op_switch, "on") == 0);
    cfg->overflow_dump = debug != NULL && strcmp(debug, "on") == 0;
    if (scene != NULL) {
        if (strcmp(scene, "aic_err_brief_dump") == 0) cfg->exception_level = 1;
        else if (strcmp(scene, "aic_err_norm_dump") == 0 || strcmp(scene, "lite_exception") == 0)
            cfg->exception_level = 2;
        else if (strcmp(scene, "aic_err_detail_dump") == 0) cfg->exception_level = 3;
    }
    if (cfg->data_dump && cfg->overflow_dump) {
        return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                          "dump config '%s': 'dump.dump_debug' \"on\" (overflow dump) cannot be combined with "
                          "data dump ('dump.dump_list' or 'dump.dump_op_switch' \"on\")",
                          file);
    }

    const mock_json *path = core_json_get(dump, "dump_path");
    if (path != NULL) {
        if (path->t != MOCK_JSON_STRING) {
            return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': key 'dump.dump_path' must be a string, not %s", file,
                              core_json_type_name(path->t));
        }
        if (path->str[0] == '\0' || strlen(path->str) >= DUMP_PATH_MAX) {
            return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': key 'dump.dump_path' must be a non-empty path shorter than %d bytes",
                              file, DUMP_PATH_MAX);
        }
        struct stat st;
        if (stat(path->str, &st) == 0 && !S_ISDIR(st.st_mode)) {
            return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': 'dump.dump_path' \"%s\" exists but is not a directory", file,
                              path->str);
        }
        snprintf(cfg->path, sizeof cfg->path, "%s", path->str);
    } else if (cfg->data_dump || cfg->overflow_dump || cfg->exception_level > 0) {
        return core_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                          "dump config '%s': missing key 'dump.dump_path' (required when dump is enabled)", file);
    }
    return ACL_SUCCESS;
}

/* Reads and validates the file; fills `cfg` on success. */
static aclError load_dump_config(const char *fn, const char *file, dump_cfg *cfg)
{
    if (file[0] == '\0') {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dumpCfgPath' is an empty string");
    }
    char *buf = NULL;
    size_t n = 0;
    mock_json *root = NULL;
    aclError rc = core_json_load_file(fn, "dump config file", file, DUMP_MAX_FILE_SIZE, &buf, &n, &root);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = validate_dump_object(fn, file, root, cfg);
    core_json_free(root);
    free(buf);
    return rc;
}

aclError aclmdlSetDump(const char *dumpCfgPath)
{
    static const char fn[] = "aclmdlSetDump";
    MOCK_REQUIRE_NONNULL(fn, dumpCfgPath);
    MOCK_ENTER(fn);
    core_mutex_lock(&g_dump.mu);
    dump_sync_with_init_locked();
    bool inited = g_dump.inited;
    core_mutex_unlock(&g_dump.mu);
    if (!inited) {
        return core_error(fn, ACL_ERROR_DUMP_NOT_RUN, "aclmdlInitDump has not been called");
    }
    dump_cfg *cfg = (dump_cfg *)malloc(sizeof *cfg);
    if (cfg == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    aclError rc = load_dump_config(fn, dumpCfgPath, cfg);
    if (rc == ACL_SUCCESS) {
        core_mutex_lock(&g_dump.mu);
        if (!g_dump.inited) {
            rc = core_error(fn, ACL_ERROR_DUMP_NOT_RUN, "dump was finalized while the config was being read");
        } else {
            g_dump.configured = true;
            g_dump.cfg = *cfg;
            update_observing_locked();
        }
        core_mutex_unlock(&g_dump.mu);
    }
    free(cfg);
    return rc;
}

/* ================================================== the dump writer's view */

/* The config in effect (g_dump.mu held): an aclmdlSetDump session takes precedence
 * over the aclInit config (or DUMP_CONFIG_PATH), which counts only while ACL is
 * initialized. */
static const dump_cfg *effective_locked(void)
{
    if (g_dump.inited && g_dump.configured) {
        return &g_dump.cfg;
    }
    if (g_dump.init_on && core_is_initialized()) {
        return &g_dump.init_cfg;
    }
    return NULL;
}

/* Where kernel data goes (acl_next_semantics.md §7.5 "Output path priority":
 * ASCEND_DUMP_PATH > ASCEND_WORK_PATH > dump_path; empty variables do not count). */
static const char *data_dump_root(const dump_cfg *c)
{
    const char *v = getenv("ASCEND_DUMP_PATH");
    if (v != NULL && v[0] != '\0') {
        return v;
    }
    v = getenv("ASCEND_WORK_PATH");
    if (v != NULL && v[0] != '\0') {
        return v;
    }
    return c->path;
}

/* True when `step` is in the "0|3-5|10" list (already validated); "" = every step. */
static bool step_selected(const char *spec, uint64_t step)
{
    if (spec[0] == '\0') {
        return true;
    }
    const char *p = spec;
    while (*p != '\0') {
        char *end;
        unsigned long long lo = strtoull(p, &end, 10);
        unsigned long long hi = lo;
        p = end;
        if (*p == '-') {
            hi = strtoull(p + 1, &end, 10);
            p = end;
        }
        if (step >= lo && step <= hi) {
            return true;
        }
        if (*p == '|') {
            p++;
        }
    }
    return false;
}

bool misc_dump_match(const char *op_name, uint64_t step, bool forced, misc_dump_plan *out)
{
    bool hit = false;
    core_mutex_lock(&g_dump.mu);
    dump_sync_with_init_locked();
    const dump_cfg *c = effective_locked();
    if (c != NULL && c->data_dump && step_selected(c->steps, step)) {
        hit = c->all_ops || forced;
        for (size_t k = 0, off = 0; !hit && k < c->nlayers; k++) {
            hit = strcmp(c->layers + off, op_name) == 0;
            off += strlen(c->layers + off) + 1;
        }
        if (hit) {
            out->inputs = c->inputs;
            out->outputs = c->outputs;
            out->stats = c->stats;
            out->generation = g_generation;
            snprintf(out->dir, sizeof out->dir, "%s", data_dump_root(c));
        }
    }
    core_mutex_unlock(&g_dump.mu);
    return hit;
}

/* ============================================== bridge to libascend_dump.so */

/*
 * aclmockDumpGetPath: the configured dump directory for an acldumpType
 * (AIC_ERR_BRIEF_DUMP=1, AIC_ERR_NORM_DUMP=2, AIC_ERR_DETAIL_DUMP=3,
 * DATA_DUMP=4, OVERFLOW_DUMP=5), or NULL when that kind of dump is not
 * enabled. Exported (aclmock prefix) so that libascend_dump.so's
 * acldumpGetPath can answer from the state kept here. The returned string
 * stays valid until the next aclmdlSetDump/aclmdlFinalizeDump.
 */
__attribute__((visibility("default"))) const char *aclmockDumpGetPath(int32_t dumpType);

static char g_path_out[DUMP_PATH_MAX];

const char *aclmockDumpGetPath(int32_t dumpType)
{
    const char *res = NULL;
    core_mutex_lock(&g_dump.mu);
    dump_sync_with_init_locked();
    const dump_cfg *c = effective_locked();
    if (c != NULL) {
        bool on = false;
        switch (dumpType) {
        case 1: on = c->exception_level == 1; break;
        case 2: on = c->exception_level == 2; break;
        case 3: on = c->exception_level == 3; break;
        case 4: on = c->data_dump; break;
        case 5: on = c->overflow_dump; break;
        default: break;
        }
        const char *path = dumpType == 4 ? data_dump_root(c) : c->path;
        if (on && path[0] != '\0') {
            /* g_path_out changes only when the configured path changes, so
             * concurrent callers holding the returned pointer in steady state
             * never see it rewritten */
            if (strcmp(g_path_out, path) != 0) {
                snprintf(g_path_out, sizeof g_path_out, "%s", path);
            }
            res = g_path_out;
        }
    }
    core_mutex_unlock(&g_dump.mu);
    return res;
}

/* ======================================================= aclInit config */

/* Makes `cfg` (validated) the aclInit dump config. */
static void set_init_config(const dump_cfg *cfg)
{
    core_mutex_lock(&g_dump.mu);
    g_dump.init_on = true;
    g_dump.init_cfg = *cfg;
    update_observing_locked();
    core_mutex_unlock(&g_dump.mu);
}

aclError misc_dump_configure_from_env(const char *fn)
{
    const char *file = getenv("DUMP_CONFIG_PATH");
    if (file == NULL || file[0] == '\0') {
        return ACL_SUCCESS;
    }
    dump_cfg *cfg = (dump_cfg *)malloc(sizeof *cfg);
    if (cfg == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    aclError rc = load_dump_config(fn, file, cfg);
    if (rc == ACL_SUCCESS) {
        set_init_config(cfg);
    }
    free(cfg);
    return rc;
}

MOCK_HIDDEN aclError misc_dump_configure_from_init(const char *fn, const char *path, const char *text, size_t len,
                                                   bool *has_dump)
{
    *has_dump = false;
    char err[256];
    mock_json *root = core_json_parse(text, len, err, sizeof err);
    if (root == NULL) {
        return core_error(fn, ACL_ERROR_PARSE_FILE, "config file '%s' is not valid JSON: %s", path, err);
    }
    aclError rc = ACL_SUCCESS;
    core_mutex_lock(&g_dump.mu);
    g_dump.init_on = false; /* a new aclInit config replaces the previous one */
    memset(&g_dump.init_cfg, 0, sizeof g_dump.init_cfg);
    update_observing_locked();
    core_mutex_unlock(&g_dump.mu);
    if (root->t == MOCK_JSON_OBJECT && core_json_get(root, "dump") != NULL) {
        *has_dump = true;
        dump_cfg *cfg = (dump_cfg *)malloc(sizeof *cfg);
        if (cfg == NULL) {
            rc = core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        } else {
            rc = validate_dump_object(fn, path, root, cfg);
            if (rc == ACL_SUCCESS) {
                set_init_config(cfg);
            }
            free(cfg);
        }
    }
    core_json_free(root);
    return rc;
}
