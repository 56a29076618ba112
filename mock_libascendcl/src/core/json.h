/*
 * mock_json.h - strict JSON parser of the mock (mock_json.c): parse a document
 * into a tree, look members up, free it. Internal (hidden) to libascendcl.so.
 */
#ifndef MOCK_JSON_H
#define MOCK_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "acl/acl_base.h"

#ifndef MOCK_HIDDEN
#define MOCK_HIDDEN __attribute__((visibility("hidden")))
#endif

typedef enum mock_json_type {
    MOCK_JSON_NULL,
    MOCK_JSON_BOOL,
    MOCK_JSON_NUMBER,
    MOCK_JSON_STRING,
    MOCK_JSON_ARRAY,
    MOCK_JSON_OBJECT
} mock_json_type;

typedef struct mock_json {
    mock_json_type t;
    char *key;              /* member name when the parent is an object, else NULL */
    char *str;              /* STRING: decoded UTF-8 value; NUMBER: the literal text */
    bool boolean;           /* BOOL value */
    struct mock_json *kids; /* ARRAY / OBJECT children, in document order */
    struct mock_json *next; /* next sibling */
} mock_json;

/* Parses text[0..len) (a UTF-8 BOM is skipped). Returns the root, or NULL with
 * "line L column C: <what>" written to err (errlen bytes, may be 0). */
MOCK_HIDDEN mock_json *core_json_parse(const char *text, size_t len, char *err, size_t errlen);
MOCK_HIDDEN void core_json_free(mock_json *root);
/* The last member named `key` of an object (JSON allows duplicates; the last
 * wins, as in common parsers), or NULL (also when obj is not an object). */
MOCK_HIDDEN const mock_json *core_json_get(const mock_json *obj, const char *key);
/* "null", "a boolean", "a number", "a string", "an array", "an object". */
MOCK_HIDDEN const char *core_json_type_name(mock_json_type t);

/* Reads the JSON file `path` (a regular file of at most `max_bytes`) and parses
 * it: the one loader of the aclInit config and the aclmdlSetDump config. `what`
 * names the file in messages ("config file", "dump config file"). On success
 * *text is the malloc'd, NUL-terminated content (*len bytes; free it) and *root
 * the tree (core_json_free). Errors, recorded under `fn` (acl_abi.md §5.1/§5.10):
 * ACL_ERROR_INVALID_FILE (cannot open/read, not a regular file),
 * ACL_ERROR_INVALID_FILE_SIZE (larger than max_bytes), ACL_ERROR_PARSE_FILE
 * (empty, or not JSON: the message has line and column), ACL_ERROR_BAD_ALLOC. */
MOCK_HIDDEN aclError core_json_load_file(const char *fn, const char *what, const char *path, size_t max_bytes,
                                         char **text, size_t *len, mock_json **root);

#endif /* MOCK_JSON_H */
