/*
 * config.c - the switches of the diagnostics subsystem, read once from the
 * environment (README "Timing model", "Profiling", "Race sanitizer", "Device log"):
 *
 *   ASCEND_MOCK_TIMING          real (default) | virtual | paced
 *   ASCEND_MOCK_TIMING_MODEL    a JSON object (inline, starting with '{', or a file
 *                               path) overriding numbers of the SoC's model
 *   ASCEND_MOCK_SANITIZE        0/off (default) | 1/on/report | fail | abort
 *   ASCEND_PROFILER_FLAGS       enable: profile the whole process (seed switches)
 *   ASCEND_PROFILER_OUTPUT      the result directory (default: the current one)
 *   ASCEND_PROFILER_START_STEP / ASCEND_PROFILER_STOP_STEP   the step window
 *   ASCEND_GLOBAL_LOG_LEVEL, ASCEND_LOG_PRINT_TO_STDOUT (ASCEND_SLOG_PRINT_TO_STDOUT),
 *   ASCEND_PROCESS_LOG_PATH, ASCEND_WORK_PATH   where the device log is written
 *
 * A bad value prints one line on stderr (like core/config.c) and the fallback is
 * used. The SoC figures are the mock's model, not measurements of a card: they are
 * chosen so that the relations that matter (pinned vs pageable PCIe, PCIe vs HBM,
 * launch and allocation overheads) have realistic orders of magnitude.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "diag/diag_private.h"

#define MODEL_FILE_MAX (1024u * 1024u)

static diag_config g_cfg;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static uint64_t g_epoch_ns;

static void warn(const char *var, const char *value, const char *problem, const char *fallback)
{
    fprintf(stderr, "mock_libascendcl: %s='%s' %s; %s\n", var, value, problem, fallback);
    fflush(stderr);
}

/* ------------------------------------------------------------- SoC models */

void diag_model_defaults(const char *soc, diag_model *m)
{
    /* Atlas A2 (Ascend910B*): PCIe 5.0 x16, HBM2e; the figures every other SoC
     * starts from. */
    *m = (diag_model){
        .h2d_gbps = 24.0,
        .d2h_gbps = 24.0,
        .pageable_gbps = 8.0,
        .hbm_gbps = 1600.0,
        .peer_gbps = 56.0,
        .host_gbps = 10.0,
        .latency_ns = 2000,
        .kernel_ns = 10000,
        .launch_ns = 4000,
        .sync_ns = 10000,
        .malloc_ns = 50000,
        .free_ns = 50000,
        .compute_lanes = 1,
        .pace = 1.0,
    };
    if (strncmp(soc, "Ascend910_93", 12) == 0) { /* Atlas A3: more HBM, faster links */
        m->h2d_gbps = m->d2h_gbps = 32.0;
        m->hbm_gbps = 1800.0;
        m->peer_gbps = 196.0;
    } else if (strncmp(soc, "Ascend310P", 10) == 0) { /* inference card: PCIe 4.0, LPDDR */
        m->h2d_gbps = m->d2h_gbps = 12.0;
        m->pageable_gbps = 5.0;
        m->hbm_gbps = 200.0;
        m->peer_gbps = 12.0;
        m->latency_ns = 3000;
        m->kernel_ns = 20000;
    }
}

/* One key of ASCEND_MOCK_TIMING_MODEL; false when the value is bad. */
static bool apply_model_key(diag_model *m, const mock_json *kv)
{
    if (kv->t != MOCK_JSON_NUMBER) {
        return false;
    }
    char *end;
    errno = 0;
    double v = strtod(kv->str, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v)) {
        return false;
    }
    struct {
        const char *key;
        double *d;
        uint64_t *u;
    } keys[] = {
        {"h2d_gbps", &m->h2d_gbps, NULL},     {"d2h_gbps", &m->d2h_gbps, NULL},
        {"pageable_gbps", &m->pageable_gbps, NULL}, {"hbm_gbps", &m->hbm_gbps, NULL},
        {"peer_gbps", &m->peer_gbps, NULL},   {"host_gbps", &m->host_gbps, NULL},
        {"pace", &m->pace, NULL},             {"latency_ns", NULL, &m->latency_ns},
        {"kernel_ns", NULL, &m->kernel_ns},   {"launch_ns", NULL, &m->launch_ns},
        {"sync_ns", NULL, &m->sync_ns},       {"malloc_ns", NULL, &m->malloc_ns},
        {"free_ns", NULL, &m->free_ns},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strcmp(kv->key, keys[i].key) != 0) {
            continue;
        }
        if (keys[i].d != NULL) {
            if (v <= 0.0 || v > 1e9) { /* bandwidths and the pace factor are > 0 */
                return false;
            }
            *keys[i].d = v;
        } else {
            if (v < 0.0 || v > 1e15 || v != floor(v)) {
                return false;
            }
            *keys[i].u = (uint64_t)v;
        }
        return true;
    }
    if (strcmp(kv->key, "compute_lanes") == 0) {
        if (v < 1.0 || v > 64.0 || v != floor(v)) {
            return false;
        }
        m->compute_lanes = (uint32_t)v;
        return true;
    }
    return false;
}

static void read_model_override(diag_model *m)
{
    static const char var[] = "ASCEND_MOCK_TIMING_MODEL";
    const char *v = getenv(var);
    if (v == NULL || v[0] == '\0') {
        return;
    }
    char *text = NULL;
    size_t len = 0;
    if (v[0] == 0x7b) { /* an inline object */
        text = strdup(v);
        len = text != NULL ? strlen(text) : 0;
    } else {
        FILE *f = fopen(v, "rb");
        struct stat st;
        if (f == NULL || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)MODEL_FILE_MAX) {
            if (f != NULL) {
                fclose(f);
            }
            warn(var, v, "is neither an inline JSON object nor a readable JSON file of at most 1 MiB",
                 "the SoC's model is used");
            return;
        }
        text = malloc((size_t)st.st_size + 1);
        len = text != NULL ? fread(text, 1, (size_t)st.st_size, f) : 0;
        if (text != NULL) {
            text[len] = '\0';
        }
        fclose(f);
    }
    if (text == NULL) {
        return;
    }
    char err[160];
    mock_json *root = core_json_parse(text, len, err, sizeof err);
    if (root == NULL || root->t != MOCK_JSON_OBJECT) {
        char problem[256];
        snprintf(problem, sizeof problem, "is not a JSON object (%s)", root == NULL ? err : "not an object");
        warn(var, v, problem, "the SoC's model is used");
    } else {
        for (const mock_json *kv = root->kids; kv != NULL; kv = kv->next) {
            diag_model before = *m;
            if (!apply_model_key(m, kv)) {
                *m = before;
                char problem[256];
                snprintf(problem, sizeof problem, "has an unknown key or a bad value for \"%s\"", kv->key);
                warn(var, v, problem, "that key keeps its default");
            }
        }
    }
    core_json_free(root);
    free(text);
}

/* ----------------------------------------------------------------- reading */

static bool is_word(const char *s, const char *const *words)
{
    for (size_t i = 0; words[i] != NULL; i++) {
        if (strcasecmp(s, words[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* A non-negative integer (decimal); false when malformed. */
static bool parse_u64(const char *s, uint64_t *out)
{
    if (s[0] < '0' || s[0] > '9') {
        return false;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return false;
    }
    *out = v;
    return true;
}

static void read_steps(diag_config *c)
{
    const char *a = getenv("ASCEND_PROFILER_START_STEP");
    const char *b = getenv("ASCEND_PROFILER_STOP_STEP");
    if (a != NULL && a[0] != '\0' && !parse_u64(a, &c->prof_start_step)) {
        warn("ASCEND_PROFILER_START_STEP", a, "is not a non-negative integer", "0 (from the start)");
        c->prof_start_step = 0;
    }
    if (b != NULL && b[0] != '\0') {
        uint64_t v = 0;
        if (!parse_u64(b, &v) || v <= c->prof_start_step) {
            warn("ASCEND_PROFILER_STOP_STEP", b, "is not an integer above the start step",
                 "no stop step (until the end)");
        } else {
            c->prof_stop_step = v;
        }
    }
}

static void read_logs(diag_config *c)
{
    const char *lv = getenv("ASCEND_GLOBAL_LOG_LEVEL");
    c->log_level = DIAG_LOG_ERROR;
    if (lv != NULL && lv[0] >= '0' && lv[0] <= '4' && lv[1] == '\0') {
        c->log_level = lv[0] - '0';
    }
    /* ASCEND_LOG_PRINT_TO_STDOUT replaces the deprecated ASCEND_SLOG_PRINT_TO_STDOUT
     * and wins when both are set (acl_next_semantics.md §8) */
    const char *con = getenv("ASCEND_LOG_PRINT_TO_STDOUT");
    if (con == NULL) {
        con = getenv("ASCEND_SLOG_PRINT_TO_STDOUT");
    }
    c->log_console = con != NULL && strcmp(con, "1") == 0;
    /* ASCEND_PROCESS_LOG_PATH > ASCEND_WORK_PATH (§8); CANN's last fallback,
     * $HOME/ascend/log, is not used: the mock writes no files unless asked */
    const char *dir = getenv("ASCEND_PROCESS_LOG_PATH");
    if (dir != NULL && dir[0] != '\0') {
        snprintf(c->log_dir, sizeof c->log_dir, "%s", dir);
    } else if ((dir = getenv("ASCEND_WORK_PATH")) != NULL && dir[0] != '\0') {
        snprintf(c->log_dir, sizeof c->log_dir, "%s/log", dir);
    }
}

static void read_config(void)
{
    diag_config *c = &g_cfg;
    g_epoch_ns = core_now_ns();
    const char *v = getenv("ASCEND_MOCK_TIMING");
    if (v != NULL && v[0] != '\0') {
        if (strcasecmp(v, "real") == 0) {
            c->timing = DIAG_TIMING_REAL;
        } else if (strcasecmp(v, "virtual") == 0) {
            c->timing = DIAG_TIMING_VIRTUAL;
        } else if (strcasecmp(v, "paced") == 0) {
            c->timing = DIAG_TIMING_PACED;
        } else {
            warn("ASCEND_MOCK_TIMING", v, "is not real, virtual or paced", "real");
        }
    }
    diag_model_defaults(core_config_get()->soc_name, &c->model);
    read_model_override(&c->model);

    static const char *const off[] = {"0", "off", "false", "no", NULL};
    static const char *const on[] = {"1", "on", "true", "yes", "report", NULL};
    v = getenv("ASCEND_MOCK_SANITIZE");
    if (v != NULL && v[0] != '\0') {
        if (is_word(v, off)) {
            c->sanitize = DIAG_SANITIZE_OFF;
        } else if (is_word(v, on)) {
            c->sanitize = DIAG_SANITIZE_REPORT;
        } else if (strcasecmp(v, "fail") == 0) {
            c->sanitize = DIAG_SANITIZE_FAIL;
        } else if (strcasecmp(v, "abort") == 0) {
            c->sanitize = DIAG_SANITIZE_ABORT;
        } else {
            warn("ASCEND_MOCK_SANITIZE", v, "is not 0/1/report/fail/abort", "0 (off)");
        }
    }

    v = getenv("ASCEND_PROFILER_FLAGS");
    if (v != NULL && v[0] != '\0') {
        if (strcasecmp(v, "enable") == 0) {
            c->prof_env = true;
        } else if (strcasecmp(v, "disable") != 0) {
            warn("ASCEND_PROFILER_FLAGS", v, "is not enable or disable", "disable");
        }
    }
    v = getenv("ASCEND_PROFILER_OUTPUT");
    snprintf(c->prof_dir, sizeof c->prof_dir, "%s", v != NULL && v[0] != '\0' ? v : ".");
    read_steps(c);
    read_logs(c);
}

const diag_config *diag_config_get(void)
{
    pthread_once(&g_once, read_config);
    return &g_cfg;
}

uint64_t diag_wall_ns(void)
{
    (void)diag_config_get();
    return core_now_ns() - g_epoch_ns;
}

/* ------------------------------------------------------------------ helpers */

int diag_make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        return ENAMETOOLONG;
    }
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/') {
        buf[--len] = '\0';
    }
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0750) != 0 && errno != EEXIST) {
                return errno;
            }
            *p = '/';
        }
    }
    if (mkdir(buf, 0750) != 0 && errno != EEXIST) {
        return errno;
    }
    struct stat st;
    if (stat(buf, &st) != 0) {
        return errno;
    }
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

const char *diag_kind_name(int kind, int link)
{
    switch (kind) {
    case MOCK_TASK_COPY:
        switch (link) {
        case MOCK_LINK_H2D:
            return "copy_h2d";
        case MOCK_LINK_D2H:
            return "copy_d2h";
        case MOCK_LINK_D2D:
            return "copy_d2d";
        case MOCK_LINK_PEER:
            return "copy_peer";
        default:
            return "copy_h2h";
        }
    case MOCK_TASK_MEMSET:
        return "memset";
    case MOCK_TASK_VALUE:
        return "value";
    case MOCK_TASK_KERNEL:
        return "kernel";
    case MOCK_TASK_EVENT_RECORD:
        return "event_record";
    case MOCK_TASK_EVENT_WAIT:
        return "event_wait";
    case MOCK_TASK_EVENT_RESET:
        return "event_reset";
    case MOCK_TASK_CALLBACK:
        return "callback";
    case MOCK_TASK_MARKER:
        return "marker";
    default:
        return "other";
    }
}
