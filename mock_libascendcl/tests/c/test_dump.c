/* test_dump.c - aclmdlInitDump/SetDump/FinalizeDump state machine, dump config
 * validation, and libascend_dump.so (acldumpGetPath, callbacks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_dump.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static char g_dir[256];

static const char *write_cfg(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return NULL;
    }
    fputs(text, f);
    fclose(f);
    return path;
}

/* SetDump with `text` must fail with `code` and a message containing `needle`. */
static void expect_bad(const char *text, aclError code, const char *needle)
{
    const char *p = write_cfg("bad.json", text);
    (void)aclGetRecentErrMsg();
    aclError rc = aclmdlSetDump(p);
    CHECK_EQ(rc, code);
    const char *msg = aclGetRecentErrMsg();
    CHECK_STR_CONTAINS(msg, needle);
    if (rc != code || msg == NULL || strstr(msg, needle) == NULL) {
        fprintf(stderr, "  config was: %s\n  message: %s\n", text, msg ? msg : "(null)");
    }
}

static void test_state_before_init(void)
{
    CHECK_EQ(aclmdlInitDump(), ACL_ERROR_UNINITIALIZE);
    CHECK_EQ(aclmdlSetDump("/nonexistent"), ACL_ERROR_DUMP_NOT_RUN);
    CHECK_EQ(aclmdlFinalizeDump(), ACL_ERROR_DUMP_NOT_RUN);
}

static void test_state_machine(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_EQ(aclmdlSetDump(write_cfg("ok0.json", "{\"dump\":{}}")), ACL_ERROR_DUMP_NOT_RUN);
    CHECK_EQ(aclmdlFinalizeDump(), ACL_ERROR_DUMP_NOT_RUN);
    CHECK_OK(aclmdlInitDump());
    CHECK_EQ(aclmdlInitDump(), ACL_ERROR_REPEAT_INITIALIZE);
    CHECK_EQ(aclmdlSetDump(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclmdlSetDump(write_cfg("ok1.json", "{\"dump\":{}}")));
    CHECK_OK(aclmdlFinalizeDump());
    CHECK_EQ(aclmdlFinalizeDump(), ACL_ERROR_DUMP_NOT_RUN);
    CHECK_EQ(aclmdlSetDump(write_cfg("ok2.json", "{\"dump\":{}}")), ACL_ERROR_DUMP_NOT_RUN);
    /* re-init after finalize */
    CHECK_OK(aclmdlInitDump());
    CHECK_OK(aclmdlFinalizeDump());
}

static void test_file_errors(void)
{
    CHECK_OK(aclmdlInitDump());
    char missing[300];
    snprintf(missing, sizeof missing, "%s/does_not_exist.json", g_dir);
    (void)aclGetRecentErrMsg();
    CHECK_EQ(aclmdlSetDump(missing), ACL_ERROR_INVALID_FILE);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "does_not_exist.json");
    CHECK_EQ(aclmdlSetDump(g_dir), ACL_ERROR_INVALID_FILE); /* a directory */
    CHECK_EQ(aclmdlSetDump(""), ACL_ERROR_INVALID_PARAM);
    expect_bad("", ACL_ERROR_PARSE_FILE, "empty");
    CHECK_OK(aclmdlFinalizeDump());
}

static void test_json_syntax(void)
{
    CHECK_OK(aclmdlInitDump());
    expect_bad("{\"dump\": {\"dump_path\": \"x\",}}", ACL_ERROR_PARSE_FILE, "line 1 column 28: expected a string key");
    expect_bad("{\"dump\": [}", ACL_ERROR_PARSE_FILE, "line 1");
    expect_bad("{\n  \"dump\": {\n    \"dump_path\": \"unterminated\n  }\n}", ACL_ERROR_PARSE_FILE, "line 3");
    expect_bad("{\"dump\": {}} trailing", ACL_ERROR_PARSE_FILE, "after the top-level value");
    expect_bad("{'dump': {}}", ACL_ERROR_PARSE_FILE, "string key");
    expect_bad("{\"dump\": {\"a\": 01}}", ACL_ERROR_PARSE_FILE, "expected ','");
    expect_bad("{\"dump\": {\"a\": -}}", ACL_ERROR_PARSE_FILE, "invalid number");
    expect_bad("{\"dump\": {\"a\": 1.}}", ACL_ERROR_PARSE_FILE, "invalid number");
    expect_bad("{\"dump\": {\"a\": tru}}", ACL_ERROR_PARSE_FILE, "literal");
    expect_bad("{\"dump\": {\"a\": \"\\x\"}}", ACL_ERROR_PARSE_FILE, "escape");
    expect_bad("{\"dump\": {\"a\": \"\\ud800\"}}", ACL_ERROR_PARSE_FILE, "surrogate");
    expect_bad("{\"dump\" {}}", ACL_ERROR_PARSE_FILE, "':'");
    expect_bad("{\"dump\": {}", ACL_ERROR_PARSE_FILE, "expected ',' or '}'");
    expect_bad("{\"a\":\"tab\there\"}", ACL_ERROR_PARSE_FILE, "control character");
    /* nesting bomb */
    char deep[1200];
    size_t n = 0;
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"dump\":{},\"x\":");
    for (int i = 0; i < 300; i++) deep[n++] = '[';
    for (int i = 0; i < 300; i++) deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = '\0';
    expect_bad(deep, ACL_ERROR_PARSE_FILE, "nesting too deep");
    CHECK_OK(aclmdlFinalizeDump());
}

static void test_dump_semantics(void)
{
    CHECK_OK(aclmdlInitDump());
    expect_bad("[]", ACL_ERROR_INVALID_DUMP_CONFIG, "top-level value must be an object");
    expect_bad("{\"other\": {}}", ACL_ERROR_INVALID_DUMP_CONFIG, "missing key 'dump'");
    expect_bad("{\"dump\": []}", ACL_ERROR_INVALID_DUMP_CONFIG, "key 'dump' must be an object");
    expect_bad("{\"dump\": {\"dump_mode\": \"everything\", \"dump_path\": \"/tmp\"}}", ACL_ERROR_INVALID_DUMP_CONFIG,
               "'dump.dump_mode'");
    expect_bad("{\"dump\": {\"dump_mode\": 3}}", ACL_ERROR_INVALID_DUMP_CONFIG, "must be a string");
    expect_bad("{\"dump\": {\"dump_list\": {}}}", ACL_ERROR_INVALID_DUMP_CONFIG, "'dump.dump_list' must be an array");
    expect_bad("{\"dump\": {\"dump_list\": [1]}}", ACL_ERROR_INVALID_DUMP_CONFIG, "dump.dump_list[0]");
    expect_bad("{\"dump\": {\"dump_list\": [{\"layer\": [\"a\", 2]}], \"dump_path\": \"/tmp\"}}",
               ACL_ERROR_INVALID_DUMP_CONFIG, "dump.dump_list[0].layer[1]");
    expect_bad("{\"dump\": {\"dump_list\": [{\"model_name\": \"m\"}]}}", ACL_ERROR_INVALID_DUMP_CONFIG,
               "'dump.dump_path'");
    expect_bad("{\"dump\": {\"dump_op_switch\": \"yes\"}}", ACL_ERROR_INVALID_DUMP_CONFIG, "dump.dump_op_switch");
    expect_bad("{\"dump\": {\"dump_debug\": \"on\", \"dump_op_switch\": \"on\", \"dump_path\": \"/tmp\"}}",
               ACL_ERROR_INVALID_DUMP_CONFIG, "cannot be combined");
    expect_bad("{\"dump\": {\"dump_step\": \"5-3\"}}", ACL_ERROR_INVALID_DUMP_CONFIG, "dump.dump_step");
    expect_bad("{\"dump\": {\"dump_step\": \"1||2\"}}", ACL_ERROR_INVALID_DUMP_CONFIG, "dump.dump_step");
    char cfg[600];
    const char *file = write_cfg("plainfile", "x");
    char filepath[512];
    snprintf(filepath, sizeof filepath, "%s", file);
    snprintf(cfg, sizeof cfg, "{\"dump\": {\"dump_op_switch\": \"on\", \"dump_path\": \"%s\"}}", filepath);
    expect_bad(cfg, ACL_ERROR_INVALID_DUMP_CONFIG, "not a directory");
    CHECK_OK(aclmdlFinalizeDump());
}

static void test_valid_configs_and_paths(void)
{
    char out[300], cfg[1024];
    snprintf(out, sizeof out, "%s/dump_out", g_dir);
    CHECK_OK(aclmdlInitDump());
    /* not configured yet: no path */
    CHECK(acldumpGetPath(DATA_DUMP) == NULL);
    snprintf(cfg, sizeof cfg,
             "\xef\xbb\xbf{\n  \"comment\": \"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" \\n\",\n"
             "  \"numbers\": [0, -1.5e3, 2E+2, 0.25, true, false, null],\n"
             "  \"dump\": {\n    \"dump_path\": \"%s\",\n    \"dump_mode\": \"all\",\n"
             "    \"dump_list\": [{\"model_name\": \"resnet\", \"layer\": [\"conv1\", \"fc\"]}],\n"
             "    \"dump_step\": \"0|3-5|10\",\n    \"dump_data\": \"stats\",\n    \"dump_level\": \"op\"\n  }\n}\n",
             out);
    CHECK_OK(aclmdlSetDump(write_cfg("good.json", cfg)));
    CHECK_STR_EQ(acldumpGetPath(DATA_DUMP), out);
    (void)aclGetRecentErrMsg();
    CHECK(acldumpGetPath(OVERFLOW_DUMP) == NULL);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "acldumpGetPath");
    CHECK(acldumpGetPath((acldumpType)0) == NULL);
    CHECK(acldumpGetPath((acldumpType)99) == NULL);

    /* a failed SetDump keeps the previous configuration */
    expect_bad("{\"dump\": 5}", ACL_ERROR_INVALID_DUMP_CONFIG, "must be an object");
    CHECK_STR_EQ(acldumpGetPath(DATA_DUMP), out);

    snprintf(cfg, sizeof cfg, "{\"dump\": {\"dump_debug\": \"on\", \"dump_path\": \"%s\"}}", out);
    CHECK_OK(aclmdlSetDump(write_cfg("overflow.json", cfg)));
    CHECK_STR_EQ(acldumpGetPath(OVERFLOW_DUMP), out);
    CHECK(acldumpGetPath(DATA_DUMP) == NULL);

    snprintf(cfg, sizeof cfg, "{\"dump\": {\"dump_scene\": \"aic_err_detail_dump\", \"dump_path\": \"%s\"}}", out);
    CHECK_OK(aclmdlSetDump(write_cfg("exc.json", cfg)));
    CHECK_STR_EQ(acldumpGetPath(AIC_ERR_DETAIL_DUMP), out);
    CHECK(acldumpGetPath(AIC_ERR_BRIEF_DUMP) == NULL);

    CHECK_OK(aclmdlFinalizeDump());
    CHECK(acldumpGetPath(AIC_ERR_DETAIL_DUMP) == NULL);
}

static void test_finalize_ends_dump(void)
{
    CHECK_OK(aclmdlInitDump());
    CHECK_OK(aclFinalize());
    CHECK_EQ(aclmdlSetDump(write_cfg("ok3.json", "{\"dump\":{}}")), ACL_ERROR_DUMP_NOT_RUN);
    CHECK_EQ(aclmdlInitDump(), ACL_ERROR_UNINITIALIZE);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclmdlInitDump()); /* the old session ended with aclFinalize */
    CHECK_OK(aclmdlFinalizeDump());
}

/* A "dump" section in the aclInit config enables dumping at init. */
static void test_dump_from_acl_init(void)
{
    char out[300], cfg[600];
    snprintf(out, sizeof out, "%s/init_dump", g_dir);
    CHECK_OK(aclFinalize());
    CHECK(acldumpGetPath(DATA_DUMP) == NULL);

    snprintf(cfg, sizeof cfg, "{\"dump\": {\"dump_op_switch\": \"on\", \"dump_path\": \"%s\"}}", out);
    CHECK_OK(aclInit(write_cfg("acl_with_dump.json", cfg)));
    CHECK_STR_EQ(acldumpGetPath(DATA_DUMP), out);
    CHECK(acldumpGetPath(OVERFLOW_DUMP) == NULL);
    /* an aclmdlSetDump session takes precedence, and ends with aclmdlFinalizeDump */
    CHECK_OK(aclmdlInitDump());
    snprintf(cfg, sizeof cfg, "{\"dump\": {\"dump_debug\": \"on\", \"dump_path\": \"%s/x\"}}", g_dir);
    CHECK_OK(aclmdlSetDump(write_cfg("session.json", cfg)));
    CHECK(acldumpGetPath(DATA_DUMP) == NULL);
    CHECK(acldumpGetPath(OVERFLOW_DUMP) != NULL);
    CHECK_OK(aclmdlFinalizeDump());
    CHECK_STR_EQ(acldumpGetPath(DATA_DUMP), out);
    CHECK_OK(aclFinalize());
    CHECK(acldumpGetPath(DATA_DUMP) == NULL);

    /* an invalid dump section makes aclInit fail, naming the key */
    (void)aclGetRecentErrMsg();
    CHECK_EQ(aclInit(write_cfg("acl_bad_dump.json", "{\"dump\": {\"dump_mode\": \"sideways\"}}")),
             ACL_ERROR_INVALID_DUMP_CONFIG);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "dump.dump_mode");
    CHECK_EQ(aclmdlInitDump(), ACL_ERROR_UNINITIALIZE);
    /* a config without a dump section leaves dumping off */
    CHECK_OK(aclInit(write_cfg("acl_plain.json", "{\"err_msg_mode\": \"0\"}")));
    CHECK(acldumpGetPath(DATA_DUMP) == NULL);
}

static aclError failing_init_cb(const char *configStr, size_t len, void *userData)
{
    (void)configStr;
    (void)len;
    (void)userData;
    return ACL_ERROR_INTERNAL_ERROR;
}

/* aclInit applies the "dump" section and then fails (an init callback fails):
 * nothing of that dump config may survive into the next aclInit. */
static void test_failed_init_drops_dump_config(void)
{
    char out[300], cfg[600];
    snprintf(out, sizeof out, "%s/failed_init_dump", g_dir);
    snprintf(cfg, sizeof cfg, "{\"dump\": {\"dump_op_switch\": \"on\", \"dump_path\": \"%s\"}}", out);
    CHECK_OK(aclFinalize());
    CHECK_OK(aclInitCallbackRegister(ACL_REG_TYPE_OTHER, failing_init_cb, NULL));
    CHECK_EQ(aclInit(write_cfg("acl_dump_cb_fails.json", cfg)), ACL_ERROR_INTERNAL_ERROR);
    CHECK_OK(aclInitCallbackUnRegister(ACL_REG_TYPE_OTHER, failing_init_cb));
    CHECK(acldumpGetPath(DATA_DUMP) == NULL);
    CHECK_OK(aclInit(NULL));
    CHECK(acldumpGetPath(DATA_DUMP) == NULL);
    CHECK_OK(aclmdlInitDump()); /* no stale session either */
    CHECK_OK(aclmdlFinalizeDump());
}

static int32_t dump_cb(const acldumpChunk *chunk, int32_t len)
{
    (void)chunk;
    return len;
}

static void test_dump_callbacks(void)
{
    CHECK_EQ(acldumpRegCallback(NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(acldumpRegCallback(dump_cb, 0));
    CHECK_OK(acldumpRegCallback(dump_cb, 1)); /* re-registration replaces */
    acldumpUnregCallback();
    acldumpUnregCallback(); /* harmless */
}

static void test_fault_injection(void)
{
    CHECK_OK(aclmockInjectFault("aclmdlInitDump", 1, ACL_ERROR_INTERNAL_ERROR));
    CHECK_EQ(aclmdlInitDump(), ACL_ERROR_INTERNAL_ERROR);
    CHECK_OK(aclmdlInitDump());
    CHECK_OK(aclmdlFinalizeDump());
    aclmockClearFaults();
}

int main(void)
{
    if (mt_make_tmpdir(g_dir, sizeof g_dir, "dump") != 0) {
        return 1;
    }
    RUN_TEST(test_state_before_init);
    RUN_TEST(test_state_machine);
    RUN_TEST(test_file_errors);
    RUN_TEST(test_json_syntax);
    RUN_TEST(test_dump_semantics);
    RUN_TEST(test_valid_configs_and_paths);
    RUN_TEST(test_finalize_ends_dump);
    RUN_TEST(test_dump_from_acl_init);
    RUN_TEST(test_failed_init_drops_dump_config);
    RUN_TEST(test_dump_callbacks);
    RUN_TEST(test_fault_injection);
    CHECK_OK(aclFinalize());
    mt_remove_tree(g_dir);
    return TEST_REPORT();
}
