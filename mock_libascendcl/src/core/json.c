/*
 * json.c - a small strict JSON (RFC 8259) parser building a tree.
 *
 * Used to validate configuration files (the dump config of aclmdlSetDump;
 * usable for the aclInit config too). Errors carry the line and column of the
 * problem. Depth is limited so that hostile files cannot exhaust the stack.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

#define MOCK_JSON_MAX_DEPTH 128

typedef struct jparser {
    const char *s;
    size_t n, i;
    int depth;
    char err[256];
} jparser;

void core_json_free(mock_json *n)
{
    while (n != NULL) {
        mock_json *next = n->next;
        core_json_free(n->kids);
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

static mock_json *jvalue(jparser *p);

static mock_json *jnew(jparser *p, mock_json_type t)
{
    mock_json *n = (mock_json *)calloc(1, sizeof *n);
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

static mock_json *jcontainer(jparser *p, bool is_obj)
{
    if (++p->depth > MOCK_JSON_MAX_DEPTH) {
        jerr(p, "nesting too deep");
        return NULL;
    }
    mock_json *n = jnew(p, is_obj ? MOCK_JSON_OBJECT : MOCK_JSON_ARRAY);
    if (n == NULL) {
        return NULL;
    }
    mock_json **tail = &n->kids;
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
        mock_json *v = jvalue(p);
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
    core_json_free(n);
    return NULL;
}

static mock_json *jvalue(jparser *p)
{
    jws(p);
    if (p->i >= p->n) {
        jerr(p, "unexpected end of file (expected a JSON value)");
        return NULL;
    }
    char c = p->s[p->i];
    mock_json *n;
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
        n = jnew(p, MOCK_JSON_STRING);
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
        n = jnew(p, MOCK_JSON_BOOL);
        if (n != NULL) {
            n->boolean = (c == 't');
        }
        return n;
    case 'n':
        if (!jliteral(p, "null")) {
            return NULL;
        }
        return jnew(p, MOCK_JSON_NULL);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            size_t from = p->i;
            if (!jnumber(p)) {
                return NULL;
            }
            n = jnew(p, MOCK_JSON_NUMBER);
            if (n == NULL) {
                return NULL;
            }
            n->str = (char *)malloc(p->i - from + 1);
            if (n->str == NULL) {
                free(n);
                jerr(p, "out of memory");
                return NULL;
            }
            memcpy(n->str, p->s + from, p->i - from);
            n->str[p->i - from] = '\0';
            return n;
        }
        jerr(p, "unexpected character (expected a JSON value)");
        return NULL;
    }
}

static mock_json *jparse(jparser *p)
{
    /* a UTF-8 BOM is tolerated */
    if (p->n >= 3 && (unsigned char)p->s[0] == 0xef && (unsigned char)p->s[1] == 0xbb &&
        (unsigned char)p->s[2] == 0xbf) {
        p->i = 3;
    }
    mock_json *root = jvalue(p);
    if (root == NULL) {
        return NULL;
    }
    jws(p);
    if (p->i < p->n) {
        jerr(p, "unexpected content after the top-level value");
        core_json_free(root);
        return NULL;
    }
    return root;
}

mock_json *core_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    jparser p = { text, len, 0, 0, { 0 } };
    mock_json *root = jparse(&p);
    if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "%s", root == NULL ? p.err : "");
    }
    return root;
}

const mock_json *core_json_get(const mock_json *obj, const char *key)
{
    const mock_json *found = NULL;
    if (obj == NULL || obj->t != MOCK_JSON_OBJECT) {
        return NULL;
    }
    for (const mock_json *k = obj->kids; k != NULL; k = k->next) {
        if (k->key != NULL && strcmp(k->key, key) == 0) {
            found = k;
        }
    }
    return found;
}

const char *core_json_type_name(mock_json_type t)
{
    switch (t) {
    case MOCK_JSON_NULL: return "null";
    case MOCK_JSON_BOOL: return "a boolean";
    case MOCK_JSON_NUMBER: return "a number";
    case MOCK_JSON_STRING: return "a string";
    case MOCK_JSON_ARRAY: return "an array";
    case MOCK_JSON_OBJECT: return "an object";
    }
    return "?";
}


/* ------------------------------------------------------------ file loading */

aclError core_json_load_file(const char *fn, const char *what, const char *path, size_t max_bytes, char **text,
                        size_t *len, mock_json **root)
{
    *text = NULL;
    *len = 0;
    *root = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return core_error(fn, ACL_ERROR_INVALID_FILE, "cannot open %s '%s': %s", what, path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return core_error(fn, ACL_ERROR_INVALID_FILE, "%s '%s' is not a regular file", what, path);
    }
    if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
        close(fd);
        return core_error(fn, ACL_ERROR_INVALID_FILE_SIZE, "%s '%s' is %lld bytes (limit %zu)", what, path,
                          (long long)st.st_size, max_bytes);
    }
    if (st.st_size == 0) {
        close(fd);
        return core_error(fn, ACL_ERROR_PARSE_FILE, "%s '%s' is empty (expected a JSON object)", what, path);
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (buf == NULL) {
        close(fd);
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory reading %s '%s'", what, path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (got != size) {
        free(buf);
        return core_error(fn, ACL_ERROR_INVALID_FILE, "cannot read %s '%s'", what, path);
    }
    buf[size] = '\0';
    char err[256];
    mock_json *tree = core_json_parse(buf, size, err, sizeof err);
    if (tree == NULL) {
        aclError rc = core_error(fn, ACL_ERROR_PARSE_FILE, "%s '%s' is not valid JSON: %s", what, path, err);
        free(buf);
        return rc;
    }
    *text = buf;
    *len = size;
    *root = tree;
    return ACL_SUCCESS;
}
