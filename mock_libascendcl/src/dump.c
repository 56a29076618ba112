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
 * the key). A host simulator runs no operators, so no dump data is written;
 * the accepted configuration is kept and reported by acldumpGetPath
 * (libascend_dump.so) through aclmockDumpGetPath below.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "misc_internal.h"

#define DUMP_MAX_FILE_SIZE (10u * 1024u * 1024u)
#define DUMP_MAX_DEPTH 128
#define DUMP_PATH_MAX 4096

/* ================================================================== JSON */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jnode {
    jtype t;
    char *key;          /* member name when the parent is an object */
    char *str;          /* J_STR value */
    bool b;             /* J_BOOL value */
    struct jnode *kids; /* J_ARR / J_OBJ children, in order */
    struct jnode *next;
} jnode;

typedef struct jparser {
    const char *s;
    size_t n, i;
    int depth;
    char err[256];
} jparser;

static void jfree(jnode *n)
{
    while (n != NULL) {
        jnode *next = n->next;
        jfree(n->kids);
        free(n->key);
        free(n->str);
        free(n);
        n = next;
    }
}

static void jerr(jparser *p, const char *what)
{
    if (p->err[0] != '\0') {
        return;
    }
    size_t line = 1, col = 1;
    for (size_t k = 0; k < p->i && k < p->n; k++) {
        if (p->s[k] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    snprintf(p->err, sizeof p->err, "line %zu column %zu: %s", line, col, what);
}

static void jws(jparser *p)
{
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            p->i++;
        } else {
            break;
        }
    }
}

static int jhex(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool jhex4(jparser *p, uint32_t *out)
{
    if (p->i + 4 > p->n) {
        jerr(p, "truncated \\u escape");
        return false;
    }
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = jhex(p->s[p->i + (size_t)k]);
        if (h < 0) {
            jerr(p, "invalid hex digit in \\u escape");
            return false;
        }
        v = (v << 4) | (uint32_t)h;
    }
    p->i += 4;
    *out = v;
    return true;
}

/* Parses a string starting at '"'; returns a malloc'd UTF-8 copy. */
static char *jstring(jparser *p)
{
    p->i++; /* opening quote */
    size_t cap = 16, len = 0;
    char *out = (char *)malloc(cap);
    if (out == NULL) {
        jerr(p, "out of memory");
        return NULL;
    }
    for (;;) {
        if (p->i >= p->n) {
            jerr(p, "unterminated string");
            free(out);
            return NULL;
        }
        unsigned char c = (unsigned char)p->s[p->i];
        char buf[4];
        size_t blen = 0;
        if (c == '"') {
            p->i++;
            break;
        }
        if (c < 0x20) {
            jerr(p, "control character in string");
            free(out);
            return NULL;
        }
        if (c == '\\') {
            p->i++;
            if (p->i >= p->n) {
                jerr(p, "unterminated escape");
                free(out);
                return NULL;
            }
            char e = p->s[p->i++];
            uint32_t cp = 0;
            switch (e) {
            case '"': buf[0] = '"'; blen = 1; break;
            case '\\': buf[0] = '\\'; blen = 1; break;
            case '/': buf[0] = '/'; blen = 1; break;
            case 'b': buf[0] = '\b'; blen = 1; break;
            case 'f': buf[0] = '\f'; blen = 1; break;
            case 'n': buf[0] = '\n'; blen = 1; break;
            case 'r': buf[0] = '\r'; blen = 1; break;
            case 't': buf[0] = '\t'; blen = 1; break;
            case 'u':
                if (!jhex4(p, &cp)) {
                    free(out);
                    return NULL;
                }
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    uint32_t lo = 0;
                    if (p->i + 2 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') {
                        jerr(p, "unpaired UTF-16 surrogate in \\u escape");
                        free(out);
                        return NULL;
                    }
                    p->i += 2;
                    if (!jhex4(p, &lo)) {
                        free(out);
                        return NULL;
                    }
                    if (lo < 0xdc00 || lo > 0xdfff) {
                        jerr(p, "invalid UTF-16 low surrogate in \\u escape");
                        free(out);
                        return NULL;
                    }
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                    jerr(p, "unpaired UTF-16 surrogate in \\u escape");
                    free(out);
                    return NULL;
                }
                if (cp < 0x80) {
                    buf[0] = (char)cp;
                    blen = 1;
                } else if (cp < 0x800) {
                    buf[0] = (char)(0xc0 | (cp >> 6));
                    buf[1] = (char)(0x80 | (cp & 0x3f));
                    blen = 2;
                } else if (cp < 0x10000) {
                    buf[0] = (char)(0xe0 | (cp >> 12));
                    buf[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                    buf[2] = (char)(0x80 | (cp & 0x3f));
                    blen = 3;
                } else {
                    buf[0] = (char)(0xf0 | (cp >> 18));
                    buf[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
                    buf[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
                    buf[3] = (char)(0x80 | (cp & 0x3f));
                    blen = 4;
                }
                break;
            default:
                p->i--;
                jerr(p, "invalid escape sequence in string");
                free(out);
                return NULL;
            }
        } else {
            buf[0] = (char)c;
            blen = 1;
            p->i++;
        }
        if (len + blen + 1 > cap) {
            while (len + blen + 1 > cap) {
                cap *= 2;
            }
            char *grown = (char *)realloc(out, cap);
            if (grown == NULL) {
                jerr(p, "out of memory");
                free(out);
                return NULL;
            }
            out = grown;
        }
        memcpy(out + len, buf, blen);
        len += blen;
    }
    out[len] = '\0';
    return out;
}

static bool jnumber(jparser *p)
{
    size_t i = p->i;
    if (i < p->n && p->s[i] == '-') i++;
    if (i >= p->n) goto bad;
    if (p->s[i] == '0') {
        i++;
    } else if (p->s[i] >= '1' && p->s[i] <= '9') {
        while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') i++;
    } else {
        goto bad;
    }
    if (i < p->n && p->s[i] == '.') {
        i++;
        if (i >= p->n || p->s[i] < '0' || p->s[i] > '9') goto bad;
        while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->n && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->n || p->s[i] < '0' || p->s[i] > '9') goto bad;
        while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    p->i = i;
    return true;
bad:
    p->i = i;
    jerr(p, "invalid number");
    return false;
}

static jnode *jvalue(jparser *p);

static jnode *jnew(jparser *p, jtype t)
{
    jnode *n = (jnode *)calloc(1, sizeof *n);
    if (n == NULL) {
        jerr(p, "out of memory");
        return NULL;
    }
    n->t = t;
    return n;
}

static bool jliteral(jparser *p, const char *lit)
{
    size_t l = strlen(lit);
    if (p->n - p->i >= l && memcmp(p->s + p->i, lit, l) == 0) {
        p->i += l;
        return true;
    }
    jerr(p, "invalid literal (expected a JSON value)");
    return false;
}

static jnode *jcontainer(jparser *p, bool is_obj)
{
    if (++p->depth > DUMP_MAX_DEPTH) {
        jerr(p, "nesting too deep");
        return NULL;
    }
    jnode *n = jnew(p, is_obj ? J_OBJ : J_ARR);
    if (n == NULL) {
        return NULL;
    }
    jnode **tail = &n->kids;
    char close = is_obj ? '}' : ']';
    p->i++; /* '{' or '[' */
    jws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        p->depth--;
        return n;
    }
    for (;;) {
        char *key = NULL;
        jws(p);
        if (is_obj) {
            if (p->i >= p->n || p->s[p->i] != '"') {
                jerr(p, "expected a string key");
                goto fail;
            }
            key = jstring(p);
            if (key == NULL) {
                goto fail;
            }
            jws(p);
            if (p->i >= p->n || p->s[p->i] != ':') {
                free(key);
                jerr(p, "expected ':' after key");
                goto fail;
            }
            p->i++;
        }
        jnode *v = jvalue(p);
        if (v == NULL) {
            free(key);
            goto fail;
        }
        v->key = key;
        *tail = v;
        tail = &v->next;
        jws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            break;
        }
        jerr(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
        goto fail;
    }
    p->depth--;
    return n;
fail:
    jfree(n);
    return NULL;
}

static jnode *jvalue(jparser *p)
{
    jws(p);
    if (p->i >= p->n) {
        jerr(p, "unexpected end of file (expected a JSON value)");
        return NULL;
    }
    char c = p->s[p->i];
    jnode *n;
    switch (c) {
    case '{':
        return jcontainer(p, true);
    case '[':
        return jcontainer(p, false);
    case '"': {
        char *s = jstring(p);
        if (s == NULL) {
            return NULL;
        }
        n = jnew(p, J_STR);
        if (n == NULL) {
            free(s);
            return NULL;
        }
        n->str = s;
        return n;
    }
    case 't':
    case 'f':
        if (!jliteral(p, c == 't' ? "true" : "false")) {
            return NULL;
        }
        n = jnew(p, J_BOOL);
        if (n != NULL) {
            n->b = (c == 't');
        }
        return n;
    case 'n':
        if (!jliteral(p, "null")) {
            return NULL;
        }
        return jnew(p, J_NULL);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            if (!jnumber(p)) {
                return NULL;
            }
            return jnew(p, J_NUM);
        }
        jerr(p, "unexpected character (expected a JSON value)");
        return NULL;
    }
}

/* Parses a whole document; NULL with p->err set on a syntax error. */
static jnode *jparse(jparser *p)
{
    /* a UTF-8 BOM is tolerated */
    if (p->n >= 3 && (unsigned char)p->s[0] == 0xef && (unsigned char)p->s[1] == 0xbb &&
        (unsigned char)p->s[2] == 0xbf) {
        p->i = 3;
    }
    jnode *root = jvalue(p);
    if (root == NULL) {
        return NULL;
    }
    jws(p);
    if (p->i < p->n) {
        jerr(p, "unexpected content after the top-level value");
        jfree(root);
        return NULL;
    }
    return root;
}

/* Last member named `key` (JSON allows duplicates; the last one wins). */
static const jnode *jget(const jnode *obj, const char *key)
{
    const jnode *found = NULL;
    if (obj == NULL || obj->t != J_OBJ) {
        return NULL;
    }
    for (const jnode *k = obj->kids; k != NULL; k = k->next) {
        if (k->key != NULL && strcmp(k->key, key) == 0) {
            found = k;
        }
    }
    return found;
}

static const char *jtype_name(jtype t)
{
    switch (t) {
    case J_NULL: return "null";
    case J_BOOL: return "a boolean";
    case J_NUM: return "a number";
    case J_STR: return "a string";
    case J_ARR: return "an array";
    case J_OBJ: return "an object";
    }
    return "?";
}

/* ================================================================== state */

typedef struct dump_state {
    pthread_mutex_t mu;
    bool inited;
    bool configured;
    bool data_dump;      /* dump_list non-empty or dump_op_switch "on" */
    bool overflow_dump;  /* dump_debug "on" */
    int exception_level; /* 0 none, 1 brief, 2 norm, 3 detail (dump_scene) */
    char path[DUMP_PATH_MAX];
} dump_state;

static dump_state g_dump = { PTHREAD_MUTEX_INITIALIZER, false, false, false, false, 0, { 0 } };

/* Called with g_dump.mu held: forget a dump session that outlived aclFinalize
 * (aclFinalize ends dumping in CANN too). */
static void dump_sync_with_init_locked(void)
{
    if (g_dump.inited && !mock_is_initialized()) {
        g_dump.inited = false;
        g_dump.configured = false;
        g_dump.data_dump = g_dump.overflow_dump = false;
        g_dump.exception_level = 0;
        g_dump.path[0] = '\0';
    }
}

MOCK_HIDDEN void mock_dump_finalize(void)
{
    pthread_mutex_lock(&g_dump.mu);
    g_dump.inited = false;
    g_dump.configured = false;
    g_dump.data_dump = g_dump.overflow_dump = false;
    g_dump.exception_level = 0;
    g_dump.path[0] = '\0';
    pthread_mutex_unlock(&g_dump.mu);
}

aclError aclmdlInitDump(void)
{
    static const char fn[] = "aclmdlInitDump";
    MOCK_ENTER(fn);
    if (!mock_is_initialized()) {
        return mock_error(fn, ACL_ERROR_UNINITIALIZE, "aclInit has not been called");
    }
    pthread_mutex_lock(&g_dump.mu);
    dump_sync_with_init_locked();
    if (g_dump.inited) {
        pthread_mutex_unlock(&g_dump.mu);
        return mock_error(fn, ACL_ERROR_REPEAT_INITIALIZE,
                          "dump is already initialized (call aclmdlFinalizeDump first)");
    }
    g_dump.inited = true;
    g_dump.configured = false;
    pthread_mutex_unlock(&g_dump.mu);
    return ACL_SUCCESS;
}

aclError aclmdlFinalizeDump(void)
{
    static const char fn[] = "aclmdlFinalizeDump";
    MOCK_ENTER(fn);
    pthread_mutex_lock(&g_dump.mu);
    dump_sync_with_init_locked();
    if (!g_dump.inited) {
        pthread_mutex_unlock(&g_dump.mu);
        return mock_error(fn, ACL_ERROR_DUMP_NOT_RUN, "aclmdlInitDump has not been called");
    }
    g_dump.inited = false;
    g_dump.configured = false;
    g_dump.data_dump = g_dump.overflow_dump = false;
    g_dump.exception_level = 0;
    g_dump.path[0] = '\0';
    pthread_mutex_unlock(&g_dump.mu);
    return ACL_SUCCESS;
}

/* ============================================================ validation */

typedef struct dump_cfg {
    bool data_dump;
    bool overflow_dump;
    int exception_level;
    char path[DUMP_PATH_MAX];
} dump_cfg;

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
static aclError check_enum_key(const char *fn, const char *file, const jnode *dump, const char *key,
                               const char *const *options, const char **out)
{
    const jnode *v = jget(dump, key);
    *out = NULL;
    if (v == NULL) {
        return ACL_SUCCESS;
    }
    if (v->t != J_STR) {
        return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG, "dump config '%s': key 'dump.%s' must be a string, not %s",
                          file, key, jtype_name(v->t));
    }
    if (!str_in(v->str, options)) {
        char allowed[256] = "";
        for (size_t k = 0; options[k] != NULL; k++) {
            size_t used = strlen(allowed);
            snprintf(allowed + used, sizeof allowed - used, "%s\"%s\"", k ? ", " : "", options[k]);
        }
        return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
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

static aclError validate_dump_object(const char *fn, const char *file, const jnode *root, dump_cfg *cfg)
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
    if (root->t != J_OBJ) {
        return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                          "dump config '%s': the top-level value must be an object, not %s", file,
                          jtype_name(root->t));
    }
    const jnode *dump = jget(root, "dump");
    if (dump == NULL) {
        return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG, "dump config '%s': missing key 'dump'", file);
    }
    if (dump->t != J_OBJ) {
        return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG, "dump config '%s': key 'dump' must be an object, not %s",
                          file, jtype_name(dump->t));
    }

    /* dump_list: array of objects with optional model_name (string), layer (array of strings) */
    const jnode *list = jget(dump, "dump_list");
    size_t list_len = 0;
    if (list != NULL) {
        if (list->t != J_ARR) {
            return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': key 'dump.dump_list' must be an array, not %s", file,
                              jtype_name(list->t));
        }
        size_t idx = 0;
        for (const jnode *item = list->kids; item != NULL; item = item->next, idx++) {
            if (item->t != J_OBJ) {
                return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                                  "dump config '%s': 'dump.dump_list[%zu]' must be an object, not %s", file, idx,
                                  jtype_name(item->t));
            }
            const jnode *mn = jget(item, "model_name");
            if (mn != NULL && mn->t != J_STR) {
                return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                                  "dump config '%s': 'dump.dump_list[%zu].model_name' must be a string", file, idx);
            }
            const jnode *layer = jget(item, "layer");
            if (layer != NULL) {
                if (layer->t != J_ARR) {
                    return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                                      "dump config '%s': 'dump.dump_list[%zu].layer' must be an array", file, idx);
                }
                size_t li = 0;
                for (const jnode *l = layer->kids; l != NULL; l = l->next, li++) {
                    if (l->t != J_STR) {
                        return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                                          "dump config '%s': 'dump.dump_list[%zu].layer[%zu]' must be a string",
                                          file, idx, li);
                    }
                }
            }
        }
        list_len = idx;
    }

    const char *op_switch = NULL, *debug = NULL, *scene = NULL;
    if ((rc = check_enum_key(fn, file, dump, "dump_op_switch", on_off, &op_switch)) != ACL_SUCCESS) return rc;
    if ((rc = check_enum_key(fn, file, dump, "dump_debug", on_off, &debug)) != ACL_SUCCESS) return rc;
    if ((rc = check_enum_key(fn, file, dump, "dump_mode", modes, &s)) != ACL_SUCCESS) return rc;
    if ((rc = check_enum_key(fn, file, dump, "dump_data", datas, &s)) != ACL_SUCCESS) return rc;
    if ((rc = check_enum_key(fn, file, dump, "dump_level", levels, &s)) != ACL_SUCCESS) return rc;
    if ((rc = check_enum_key(fn, file, dump, "dump_scene", scenes, &scene)) != ACL_SUCCESS) return rc;

    const jnode *step = jget(dump, "dump_step");
    if (step != NULL) {
        if (step->t != J_STR) {
            return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': key 'dump.dump_step' must be a string, not %s", file,
                              jtype_name(step->t));
        }
        if (!valid_step_spec(step->str)) {
            return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': key 'dump.dump_step' has invalid value \"%s\" "
                              "(expected steps or ranges like \"0|3-5|10\")",
                              file, step->str);
        }
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
        return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                          "dump config '%s': 'dump.dump_debug' \"on\" (overflow dump) cannot be combined with "
                          "data dump ('dump.dump_list' or 'dump.dump_op_switch' \"on\")",
                          file);
    }

    const jnode *path = jget(dump, "dump_path");
    if (path != NULL) {
        if (path->t != J_STR) {
            return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': key 'dump.dump_path' must be a string, not %s", file,
                              jtype_name(path->t));
        }
        if (path->str[0] == '\0' || strlen(path->str) >= DUMP_PATH_MAX) {
            return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': key 'dump.dump_path' must be a non-empty path shorter than %d bytes",
                              file, DUMP_PATH_MAX);
        }
        struct stat st;
        if (stat(path->str, &st) == 0 && !S_ISDIR(st.st_mode)) {
            return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                              "dump config '%s': 'dump.dump_path' \"%s\" exists but is not a directory", file,
                              path->str);
        }
        snprintf(cfg->path, sizeof cfg->path, "%s", path->str);
    } else if (cfg->data_dump || cfg->overflow_dump || cfg->exception_level > 0) {
        return mock_error(fn, ACL_ERROR_INVALID_DUMP_CONFIG,
                          "dump config '%s': missing key 'dump.dump_path' (required when dump is enabled)", file);
    }
    return ACL_SUCCESS;
}

/* Reads and validates the file; fills `cfg` on success. */
static aclError load_dump_config(const char *fn, const char *file, dump_cfg *cfg)
{
    struct stat st;
    if (file[0] == '\0') {
        return mock_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dumpCfgPath' is an empty string");
    }
    if (stat(file, &st) != 0) {
        return mock_error(fn, ACL_ERROR_INVALID_FILE, "dump config file '%s' cannot be accessed: %s", file,
                          strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        return mock_error(fn, ACL_ERROR_INVALID_FILE, "dump config '%s' is not a regular file", file);
    }
    if (st.st_size == 0) {
        return mock_error(fn, ACL_ERROR_PARSE_FILE, "dump config file '%s' is empty (expected a JSON object)", file);
    }
    if ((uint64_t)st.st_size > DUMP_MAX_FILE_SIZE) {
        return mock_error(fn, ACL_ERROR_INVALID_FILE_SIZE, "dump config file '%s' is %lld bytes (limit %u)", file,
                          (long long)st.st_size, DUMP_MAX_FILE_SIZE);
    }
    FILE *f = fopen(file, "rb");
    if (f == NULL) {
        return mock_error(fn, ACL_ERROR_INVALID_FILE, "dump config file '%s' cannot be opened: %s", file,
                          strerror(errno));
    }
    size_t cap = (size_t)st.st_size;
    char *buf = (char *)malloc(cap + 1);
    if (buf == NULL) {
        fclose(f);
        return mock_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory reading dump config '%s'", file);
    }
    size_t n = fread(buf, 1, cap, f);
    bool read_err = ferror(f) != 0;
    fclose(f);
    if (read_err) {
        free(buf);
        return mock_error(fn, ACL_ERROR_INVALID_FILE, "dump config file '%s' cannot be read", file);
    }
    buf[n] = '\0';
    jparser p = { buf, n, 0, 0, { 0 } };
    jnode *root = jparse(&p);
    aclError rc;
    if (root == NULL) {
        rc = mock_error(fn, ACL_ERROR_PARSE_FILE, "dump config '%s' is not valid JSON: %s", file, p.err);
    } else {
        rc = validate_dump_object(fn, file, root, cfg);
    }
    jfree(root);
    free(buf);
    return rc;
}

aclError aclmdlSetDump(const char *dumpCfgPath)
{
    static const char fn[] = "aclmdlSetDump";
    if (dumpCfgPath == NULL) {
        return mock_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dumpCfgPath' is NULL");
    }
    MOCK_ENTER(fn);
    pthread_mutex_lock(&g_dump.mu);
    dump_sync_with_init_locked();
    bool inited = g_dump.inited;
    pthread_mutex_unlock(&g_dump.mu);
    if (!inited) {
        return mock_error(fn, ACL_ERROR_DUMP_NOT_RUN, "aclmdlInitDump has not been called");
    }
    dump_cfg *cfg = (dump_cfg *)malloc(sizeof *cfg);
    if (cfg == NULL) {
        return mock_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    aclError rc = load_dump_config(fn, dumpCfgPath, cfg);
    if (rc == ACL_SUCCESS) {
        pthread_mutex_lock(&g_dump.mu);
        if (!g_dump.inited) {
            rc = mock_error(fn, ACL_ERROR_DUMP_NOT_RUN, "dump was finalized while the config was being read");
        } else {
            g_dump.configured = true;
            g_dump.data_dump = cfg->data_dump;
            g_dump.overflow_dump = cfg->overflow_dump;
            g_dump.exception_level = cfg->exception_level;
            memcpy(g_dump.path, cfg->path, sizeof g_dump.path);
        }
        pthread_mutex_unlock(&g_dump.mu);
    }
    free(cfg);
    return rc;
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
    pthread_mutex_lock(&g_dump.mu);
    dump_sync_with_init_locked();
    if (g_dump.inited && g_dump.configured) {
        bool on = false;
        switch (dumpType) {
        case 1: on = g_dump.exception_level == 1; break;
        case 2: on = g_dump.exception_level == 2; break;
        case 3: on = g_dump.exception_level == 3; break;
        case 4: on = g_dump.data_dump; break;
        case 5: on = g_dump.overflow_dump; break;
        default: break;
        }
        if (on && g_dump.path[0] != '\0') {
            /* g_path_out changes only when the configured path changes, so
             * concurrent callers holding the returned pointer in steady state
             * never see it rewritten */
            if (strcmp(g_path_out, g_dump.path) != 0) {
                memcpy(g_path_out, g_dump.path, sizeof g_path_out);
            }
            res = g_path_out;
        }
    }
    pthread_mutex_unlock(&g_dump.mu);
    return res;
}
