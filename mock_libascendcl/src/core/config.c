/*
 * config.c - ASCEND_MOCK_* environment configuration and ASCEND_RT_VISIBLE_DEVICES.
 *
 * The environment is read once (pthread_once) at the first use. A bad value prints one
 * line on stderr naming the variable, the value and the fallback, and never aborts.
 * See mock_libascendcl/README.md for the documented variables and fallbacks.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "core/core_private.h"

#define DEFAULT_DEVICE_COUNT 8u
#define DEFAULT_MEM_PER_DEVICE (64ull << 30) /* 64 GiB */
#define DEFAULT_SOC_NAME "Ascend910B1"
#define DEFAULT_CANN_VERSION "8.5.0"
/* 2^32 ns: 254 steps = 1090.9 s, the documented default of Atlas A2/A3 (device.c). */
#define DEFAULT_OP_TIMEOUT_INTERVAL_US 4294967ull
#define MAX_OP_TIMEOUT_INTERVAL_US (UINT64_MAX / 254u) /* 254 steps must not overflow */

static mock_config g_cfg;
static core_fault_spec g_faults[CORE_MAX_FAULTS];
static size_t g_fault_count;
static aclError g_lost[MOCK_MAX_DEVICES];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void warn(const char *var, const char *value, const char *problem, const char *fallback)
{
    fprintf(stderr, "mock_libascendcl: %s='%s' %s; %s\n", var, value, problem, fallback);
}

/* Parses the decimal unsigned integer at the start of s (a digit first); *end = what follows. */
static bool parse_u64_prefix(const char *s, unsigned long long *v, char **end)
{
    if (s == NULL || !isdigit((unsigned char)s[0])) {
        return false;
    }
    errno = 0;
    *end = NULL;
    *v = strtoull(s, end, 10);
    return errno == 0 && *end != s;
}

/* Parses a decimal unsigned integer that must span the whole string. */
static bool parse_u64(const char *s, uint64_t *out)
{
    unsigned long long v;
    char *end;
    if (!parse_u64_prefix(s, &v, &end) || *end != '\0') {
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

static bool parse_i32(const char *s, int32_t *out)
{
    if (s == NULL || s[0] == '\0') {
        return false;
    }
    errno = 0;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < INT32_MIN || v > INT32_MAX) {
        return false;
    }
    *out = (int32_t)v;
    return true;
}

/* Bytes with an optional binary suffix: K, M, G, T (also KB/KiB, MB/MiB, ...), all
 * meaning powers of 1024, case-insensitive. */
static bool parse_size(const char *s, uint64_t *out)
{
    unsigned long long v;
    char *end;
    if (!parse_u64_prefix(s, &v, &end)) {
        return false;
    }
    unsigned shift = 0;
    if (*end != '\0') {
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        default: return false;
        }
        const char *rest = end + 1;
        if (!(rest[0] == '\0' || strcasecmp(rest, "B") == 0 || strcasecmp(rest, "iB") == 0)) {
            return false;
        }
    }
    if (shift != 0 && v > (UINT64_MAX >> shift)) {
        return false;
    }
    *out = (uint64_t)v << shift;
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

/* NULL if s is one word of 1..max_len-1 visible ASCII characters (no spaces); else why
 * not, written into why (the rule itself, so that the warning names it). */
static const char *token_problem(const char *s, size_t max_len, char *why, size_t why_len)
{
    size_t n = strlen(s);
    if (n >= max_len) {
        snprintf(why, why_len, "is %zu characters long (at most %zu)", n, max_len - 1);
        return why;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isspace(c)) {
            snprintf(why, why_len,
                     "contains a space (character %zu): it must be one word of visible ASCII "
                     "characters, without spaces",
                     i + 1);
            return why;
        }
        if (!isgraph(c)) {
            snprintf(why, why_len,
                     "contains byte 0x%02x (character %zu): only visible ASCII characters "
                     "are allowed",
                     (unsigned)c, i + 1);
            return why;
        }
    }
    return NULL;
}

static bool func_name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= CORE_FUNC_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(isalnum(c) || c == '_')) {
            return false;
        }
    }
    return true;
}

/* ASCEND_RT_VISIBLE_DEVICES: comma-separated physical ids. Like CANN, the list ends at
 * the first bad entry - not a plain decimal number (spaces included), empty, or a device
 * that does not exist - and the ids before it stay visible (one warning names the entry;
 * nothing valid before it = no device). Duplicates and descending ids make the whole
 * list invalid and aclrtGetDeviceCount reports ACL_ERROR_RT_NO_DEVICE (acl_abi.md §5.2). */
static void parse_visible(const char *s)
{
    char why[128] = "";
    bool invalid = false;
    int32_t map[MOCK_MAX_DEVICES];
    uint32_t n = 0;
    const char *p = s;
    int64_t prev = -1;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        uint64_t id = 0;
        if (len == 0 || len >= sizeof item) {
            snprintf(why, sizeof why, "has an empty or overlong entry");
            break;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (!parse_u64(item, &id)) {
            snprintf(why, sizeof why, "entry '%s' is not a device id", item);
            break;
        }
        if (id >= g_cfg.physical_count) {
            snprintf(why, sizeof why, "device %s does not exist (%u devices)", item,
                     g_cfg.physical_count);
            break;
        }
        if ((int64_t)id == prev) {
            snprintf(why, sizeof why, "device %s is listed twice", item);
            invalid = true;
            break;
        }
        if ((int64_t)id < prev) {
            snprintf(why, sizeof why, "ids are not in ascending order");
            invalid = true;
            break;
        }
        prev = (int64_t)id;
        map[n++] = (int32_t)id;
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    if (invalid || n == 0) {
        g_cfg.visible_invalid = true;
        g_cfg.visible_count = 0;
        warn("ASCEND_RT_VISIBLE_DEVICES", s, why,
             "aclrtGetDeviceCount fails with ACL_ERROR_RT_NO_DEVICE (207004)");
        return;
    }
    if (why[0] != '\0') {
        char kept[64];
        snprintf(kept, sizeof kept, "using the %u device(s) listed before it", n);
        warn("ASCEND_RT_VISIBLE_DEVICES", s, why, kept);
    }
    g_cfg.visible_count = n;
    memcpy(g_cfg.visible_map, map, n * sizeof map[0]);
}

static void parse_faults(const char *s)
{
    const char *p = s;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[160];
        if (len > 0 && len < sizeof item) {
            memcpy(item, p, len);
            item[len] = '\0';
            char *c1 = strchr(item, ':');
            char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            uint64_t nth = 0;
            int32_t code = 0;
            bool ok = c1 && c2 && strchr(c2 + 1, ':') == NULL;
            if (ok) {
                *c1 = '\0';
                *c2 = '\0';
                ok = func_name_ok(item, strlen(item)) && parse_u64(c1 + 1, &nth) &&
                     nth <= UINT32_MAX && parse_i32(c2 + 1, &code) && code != 0;
            }
            if (ok && g_fault_count < CORE_MAX_FAULTS) {
                core_fault_spec *f = &g_faults[g_fault_count++];
                snprintf(f->func, sizeof f->func, "%.*s", (int)(sizeof f->func - 1), item);
                f->nth = (uint32_t)nth;
                f->code = code;
            } else {
                char shown[160];
                snprintf(shown, sizeof shown, "%.*s", (int)(len < 150 ? len : 150), p);
                warn("ASCEND_MOCK_FAULTS", shown,
                     ok ? "exceeds the table of 64 faults"
                        : "is not func:nth:code (nth >= 0, code a nonzero integer)",
                     "entry ignored");
            }
        } else if (len > 0) {
            warn("ASCEND_MOCK_FAULTS", "(overlong entry)", "is not func:nth:code", "entry ignored");
        }
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
}

static void parse_lost(const char *s)
{
    const char *p = s;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[64];
        bool ok = false;
        uint64_t dev = 0;
        int32_t code = CORE_DEFAULT_LOST_CODE;
        if (len > 0 && len < sizeof item) {
            memcpy(item, p, len);
            item[len] = '\0';
            char *colon = strchr(item, ':');
            if (colon) {
                *colon = '\0';
                ok = parse_u64(item, &dev) && parse_i32(colon + 1, &code) && code != 0;
            } else {
                ok = parse_u64(item, &dev);
            }
            ok = ok && dev < g_cfg.visible_count;
        }
        if (ok) {
            g_lost[dev] = code;
        } else if (len > 0) {
            char shown[80];
            snprintf(shown, sizeof shown, "%.*s", (int)(len < 70 ? len : 70), p);
            warn("ASCEND_MOCK_DEVICE_LOST", shown,
                 "is not dev[:code] with a visible device id and a nonzero code", "entry ignored");
        }
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
}

static void load_config(void)
{
    const char *v;

    g_cfg.physical_count = DEFAULT_DEVICE_COUNT;
    v = getenv("ASCEND_MOCK_DEVICE_COUNT");
    if (v != NULL && v[0] != '\0') {
        uint64_t n = 0;
        if (parse_u64(v, &n) && n <= MOCK_MAX_DEVICES) {
            g_cfg.physical_count = (uint32_t)n;
        } else {
            warn("ASCEND_MOCK_DEVICE_COUNT", v, "is not an integer in 0..64", "using 8");
        }
    }

    g_cfg.mem_per_device = DEFAULT_MEM_PER_DEVICE;
    v = getenv("ASCEND_MOCK_MEM_PER_DEVICE");
    if (v != NULL && v[0] != '\0') {
        uint64_t bytes = 0;
        if (parse_size(v, &bytes) && bytes > 0) {
            g_cfg.mem_per_device = bytes;
        } else {
            warn("ASCEND_MOCK_MEM_PER_DEVICE", v,
                 "is not a positive size (bytes, or with a K/M/G/T[iB] suffix)", "using 64GiB");
        }
    }

    snprintf(g_cfg.soc_name, sizeof g_cfg.soc_name, "%s", DEFAULT_SOC_NAME);
    v = getenv("ASCEND_MOCK_SOC_NAME");
    if (v != NULL && v[0] != '\0') {
        char why[160];
        const char *problem = token_problem(v, sizeof g_cfg.soc_name, why, sizeof why);
        if (problem == NULL) {
            snprintf(g_cfg.soc_name, sizeof g_cfg.soc_name, "%s", v);
        } else {
            warn("ASCEND_MOCK_SOC_NAME", v, problem, "using " DEFAULT_SOC_NAME);
        }
    }

    snprintf(g_cfg.cann_version, sizeof g_cfg.cann_version, "%s", DEFAULT_CANN_VERSION);
    v = getenv("ASCEND_MOCK_CANN_VERSION");
    if (v != NULL && v[0] != '\0') {
        char why[160];
        const char *problem = token_problem(v, sizeof g_cfg.cann_version, why, sizeof why);
        if (problem == NULL) {
            snprintf(g_cfg.cann_version, sizeof g_cfg.cann_version, "%s", v);
        } else {
            warn("ASCEND_MOCK_CANN_VERSION", v, problem, "using " DEFAULT_CANN_VERSION);
        }
    }

    g_cfg.op_timeout_interval_us = DEFAULT_OP_TIMEOUT_INTERVAL_US;
    v = getenv("ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US");
    if (v != NULL && v[0] != '\0') {
        uint64_t us = 0;
        if (parse_u64(v, &us) && us > 0 && us <= MAX_OP_TIMEOUT_INTERVAL_US) {
            g_cfg.op_timeout_interval_us = us;
        } else {
            warn("ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US", v,
                 "is not an integer in 1..72624976668147841 (microseconds)", "using 4294967");
        }
    }

    g_cfg.isolation = false;
    v = getenv("ASCEND_MOCK_ISOLATION");
    if (v != NULL && v[0] != '\0' && !parse_bool(v, &g_cfg.isolation)) {
        warn("ASCEND_MOCK_ISOLATION", v, "is not 0/1/true/false/yes/no/on/off", "using 0");
        g_cfg.isolation = false;
    }

    g_cfg.leak_report = false;
    v = getenv("ASCEND_MOCK_LEAK_REPORT");
    if (v != NULL && v[0] != '\0' && !parse_bool(v, &g_cfg.leak_report)) {
        warn("ASCEND_MOCK_LEAK_REPORT", v, "is not 0/1/true/false/yes/no/on/off", "using 0");
        g_cfg.leak_report = false;
    }

    /* Visible devices: identity map unless ASCEND_RT_VISIBLE_DEVICES says otherwise.
     * An empty value is treated like an unset one. */
    g_cfg.visible_invalid = false;
    g_cfg.visible_count = g_cfg.physical_count;
    for (uint32_t i = 0; i < MOCK_MAX_DEVICES; i++) {
        g_cfg.visible_map[i] = (int32_t)i;
    }
    v = getenv("ASCEND_RT_VISIBLE_DEVICES");
    if (v != NULL && v[0] != '\0') {
        parse_visible(v);
    }

    v = getenv("ASCEND_MOCK_FAULTS");
    if (v != NULL && v[0] != '\0') {
        parse_faults(v);
    }
    v = getenv("ASCEND_MOCK_DEVICE_LOST");
    if (v != NULL && v[0] != '\0') {
        parse_lost(v);
    }
}

const mock_config *core_config_get(void)
{
    pthread_once(&g_once, load_config);
    return &g_cfg;
}

const core_fault_spec *core_config_faults(size_t *count)
{
    pthread_once(&g_once, load_config);
    *count = g_fault_count;
    return g_faults;
}

aclError core_config_lost_code(int32_t device)
{
    pthread_once(&g_once, load_config);
    if (device < 0 || device >= MOCK_MAX_DEVICES) {
        return 0;
    }
    return g_lost[device];
}

/* ------------------------------------------------------------ aclmock config */

int64_t aclmockGetConfig(aclmockConfigKey key)
{
    const mock_config *c = core_config_get();
    switch (key) {
    case ACLMOCK_CONFIG_PHYSICAL_DEVICE_COUNT: return c->physical_count;
    case ACLMOCK_CONFIG_VISIBLE_DEVICE_COUNT: return c->visible_count;
    case ACLMOCK_CONFIG_MEM_PER_DEVICE:
        return c->mem_per_device > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)c->mem_per_device;
    case ACLMOCK_CONFIG_ISOLATION: return c->isolation ? 1 : 0;
    case ACLMOCK_CONFIG_LEAK_REPORT: return c->leak_report ? 1 : 0;
    case ACLMOCK_CONFIG_VISIBLE_INVALID: return c->visible_invalid ? 1 : 0;
    }
    return -1;
}

const char *aclmockGetSocName(void)
{
    return core_config_get()->soc_name;
}

const char *aclmockGetCannVersion(void)
{
    return core_config_get()->cann_version;
}

int32_t aclmockGetPhysicalDevice(int32_t device)
{
    const mock_config *c = core_config_get();
    if (device < 0 || (uint32_t)device >= c->visible_count) {
        return -1;
    }
    return c->visible_map[device];
}
