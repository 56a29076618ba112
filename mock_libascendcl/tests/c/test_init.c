/* test_init.c - aclInit/aclFinalize/aclFinalizeReference, init/finalize callbacks,
 * version queries, CANN attributes, leak report (mock-core). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static char g_dir[256];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

static void path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", g_dir, name);
}

static void test_init_finalize_basic(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_EQ(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclInit");
    CHECK_OK(aclFinalize());
    CHECK_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclFinalize");
    /* re-init after finalize is allowed; "" behaves like NULL */
    CHECK_OK(aclInit(""));
    CHECK_OK(aclFinalize());
}

static void test_init_config_files(void)
{
    char p[512];
    path_in(p, sizeof p, "missing.json");
    CHECK_EQ(aclInit(p), ACL_ERROR_INVALID_FILE);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "missing.json");
    CHECK_EQ(aclInit(g_dir), ACL_ERROR_INVALID_FILE); /* a directory */

    path_in(p, sizeof p, "bad.json");
    write_file(p, "{\n  \"a\": [1, 2,\n}\n");
    CHECK_EQ(aclInit(p), ACL_ERROR_PARSE_FILE);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "line 3");
    write_file(p, "");
    CHECK_EQ(aclInit(p), ACL_ERROR_PARSE_FILE);
    write_file(p, "{} trailing");
    CHECK_EQ(aclInit(p), ACL_ERROR_PARSE_FILE);
    write_file(p, "[1, 2]");
    CHECK_EQ(aclInit(p), ACL_ERROR_PARSE_FILE);
    write_file(p, "{\"s\": \"bad \\q escape\"}");
    CHECK_EQ(aclInit(p), ACL_ERROR_PARSE_FILE);
    write_file(p, "{\"x\": tru}");
    CHECK_EQ(aclInit(p), ACL_ERROR_PARSE_FILE);
    /* deep nesting is rejected, not a stack overflow */
    char deep[400];
    memset(deep, '[', 300);
    deep[300] = '\0';
    char wrapped[420];
    snprintf(wrapped, sizeof wrapped, "{\"d\": %s}", deep);
    write_file(p, wrapped);
    CHECK_EQ(aclInit(p), ACL_ERROR_PARSE_FILE);
    CHECK(!0); /* still alive */

    /* a "dump" section is validated at init (dump.c); a bad one fails aclInit */
    write_file(p, "{\"dump\": {\"dump_mode\": \"sideways\"}}");
    CHECK_NE(aclInit(p), ACL_SUCCESS);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "dump_mode");
    CHECK_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE); /* not initialised */

    path_in(p, sizeof p, "good.json");
    write_file(p, "{\n \"dump\": {\"dump_path\": \"/tmp\", \"n\": [1, -2.5e3, true, null]},\n"
                  " \"s\": \"caf\\u00e9\"\n}\n");
    CHECK_OK(aclInit(p));
    CHECK_EQ(aclInit(p), ACL_ERROR_REPEAT_INITIALIZE);
    char other[512];
    path_in(other, sizeof other, "other.json");
    write_file(other, "{}");
    CHECK_EQ(aclInit(other), ACL_ERROR_INVALID_PARAM); /* different content */
    CHECK_EQ(aclInit(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclFinalize());
}

static void test_finalize_reference(void)
{
    uint64_t ref = 99;
    CHECK_EQ(aclFinalizeReference(NULL), ACL_ERROR_REPEAT_FINALIZE);
    CHECK_EQ(aclFinalizeReference(&ref), ACL_ERROR_REPEAT_FINALIZE);
    CHECK_OK(aclInit(NULL));
    CHECK_EQ(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    CHECK_EQ(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    CHECK_OK(aclFinalizeReference(&ref));
    CHECK_EQ(ref, 2);
    CHECK_OK(aclFinalizeReference(&ref));
    CHECK_EQ(ref, 1);
    CHECK_OK(aclFinalizeReference(&ref));
    CHECK_EQ(ref, 0);
    CHECK_EQ(aclFinalizeReference(&ref), ACL_ERROR_REPEAT_FINALIZE);
    CHECK_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    /* aclFinalize ends everything whatever the count */
    CHECK_OK(aclInit(NULL));
    CHECK_EQ(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    CHECK_OK(aclFinalize());
    CHECK_EQ(aclFinalizeReference(&ref), ACL_ERROR_REPEAT_FINALIZE);
}

/* `refCount` is optional: aclFinalizeReference(NULL) drops a reference, and on the last
 * one de-initialises like aclFinalize. */
static void test_finalize_reference_null(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_EQ(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclFinalizeReference(NULL)); /* 2 -> 1 */
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_CONTEXTS), 1); /* still initialised */
    CHECK_OK(aclFinalizeReference(NULL)); /* the last one */
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_CONTEXTS), 0); /* released like aclFinalize */
    CHECK_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    CHECK_EQ(aclFinalizeReference(NULL), ACL_ERROR_REPEAT_FINALIZE);
    CHECK_OK(aclInit(NULL)); /* a fresh start, not a repeat */
    CHECK_OK(aclFinalize());
}

/* aclInit config {"defaultDevice": {"default_device": "N"}}: a thread that has not set a
 * device reports N from aclrtGetDevice and uses N's default context for work. */
static void *default_device_thread(void *arg)
{
    int32_t *out = arg;
    out[0] = aclrtGetDevice(&out[1]);
    void *p = NULL;
    out[2] = aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST);
    if (p != NULL) {
        out[3] = aclrtFree(p);
    }
    return NULL;
}

static void test_default_device(void)
{
    char p[512];
    path_in(p, sizeof p, "default_device.json");
    write_file(p, "{\"defaultDevice\": {\"default_device\": \"3\"}}");
    int32_t dev = -1;
    CHECK_OK(aclInit(p));
    CHECK_OK(aclrtGetDevice(&dev));
    CHECK_EQ(dev, 3);
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 0); /* the query alone creates nothing */
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s)); /* needs a context: device 3 is used implicitly */
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 1);
    CHECK_OK(aclrtDestroyStream(s));
    int32_t t_out[4] = {-1, -1, -1, -1};
    pthread_t th;
    CHECK_OK(pthread_create(&th, NULL, default_device_thread, t_out));
    pthread_join(th, NULL);
    CHECK_OK(t_out[0]);
    CHECK_EQ(t_out[1], 3);
    CHECK_OK(t_out[2]);
    CHECK_OK(t_out[3]);
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 1); /* both threads share it */
    /* an explicit aclrtSetDevice still wins on its thread */
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtGetDevice(&dev));
    CHECK_EQ(dev, 1);
    CHECK_OK(aclrtResetDevice(1));
    CHECK_OK(aclFinalize());
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 0);
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL); /* forgotten at finalize */

    /* a number is accepted as well as a string; bad values fail aclInit */
    write_file(p, "{\"defaultDevice\": {\"default_device\": 5}}");
    CHECK_OK(aclInit(p));
    CHECK_OK(aclrtGetDevice(&dev));
    CHECK_EQ(dev, 5);
    CHECK_OK(aclFinalize());
    static const char *const bad[] = {
        "{\"defaultDevice\": {\"default_device\": \"8\"}}",
        "{\"defaultDevice\": {\"default_device\": \"-1\"}}",
        "{\"defaultDevice\": {\"default_device\": \"one\"}}",
        "{\"defaultDevice\": {\"default_device\": true}}",
        "{\"defaultDevice\": \"3\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(p, bad[i]);
        CHECK_EQ(aclInit(p), ACL_ERROR_INVALID_PARAM);
        CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "default");
        CHECK_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE); /* not initialised */
    }
    /* an empty section leaves the default device unset */
    write_file(p, "{\"defaultDevice\": {}}");
    CHECK_OK(aclInit(p));
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_OK(aclFinalize());
}

static int g_init_calls, g_fini_calls;
static size_t g_init_len;
static aclError g_init_rc;

static aclError on_init(const char *configStr, size_t len, void *user)
{
    g_init_calls++;
    g_init_len = len;
    CHECK(configStr != NULL);
    CHECK(user == &g_init_calls);
    return g_init_rc;
}

static aclError on_fini(void *user)
{
    g_fini_calls++;
    CHECK(user == &g_fini_calls);
    return ACL_SUCCESS;
}

static void test_callbacks(void)
{
    CHECK_EQ(aclInitCallbackRegister(ACL_REG_TYPE_OTHER, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclInitCallbackRegister((aclRegisterCallbackType)1234, on_init, NULL),
             ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclFinalizeCallbackRegister(ACL_REG_TYPE_OTHER, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclInitCallbackRegister(ACL_REG_TYPE_OTHER, on_init, &g_init_calls));
    CHECK_OK(aclFinalizeCallbackRegister(ACL_REG_TYPE_OTHER, on_fini, &g_fini_calls));

    char p[512];
    path_in(p, sizeof p, "cb.json");
    write_file(p, "{\"k\": 1}");
    CHECK_OK(aclInit(p));
    CHECK_EQ(g_init_calls, 1);
    CHECK_EQ(g_init_len, strlen("{\"k\": 1}"));
    CHECK_EQ(aclInit(p), ACL_ERROR_REPEAT_INITIALIZE);
    CHECK_EQ(g_init_calls, 1); /* only the real initialisation runs callbacks */
    CHECK_OK(aclFinalize());
    CHECK_EQ(g_fini_calls, 1);

    /* a failing init callback fails aclInit and leaves ACL uninitialised */
    g_init_rc = ACL_ERROR_INVALID_PARAM;
    CHECK_EQ(aclInit(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    g_init_rc = ACL_SUCCESS;

    CHECK_OK(aclInitCallbackUnRegister(ACL_REG_TYPE_OTHER, on_init));
    CHECK_OK(aclInitCallbackUnRegister(ACL_REG_TYPE_OTHER, on_init)); /* unknown: no-op */
    CHECK_OK(aclFinalizeCallbackUnRegister(ACL_REG_TYPE_OTHER, on_fini));
    CHECK_EQ(aclFinalizeCallbackUnRegister(ACL_REG_TYPE_OTHER, NULL), ACL_ERROR_INVALID_PARAM);
    int before_i = g_init_calls, before_f = g_fini_calls;
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclFinalize());
    CHECK_EQ(g_init_calls, before_i);
    CHECK_EQ(g_fini_calls, before_f);
}

static void test_versions(void)
{
    int32_t ma = -1, mi = -1, pa = -1;
    CHECK_EQ(aclrtGetVersion(NULL, &mi, &pa), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetVersion(&ma, &mi, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtGetVersion(&ma, &mi, &pa));
    CHECK_EQ(ma, ACL_MAJOR_VERSION);
    CHECK_EQ(mi, ACL_MINOR_VERSION);
    CHECK_EQ(pa, ACL_PATCH_VERSION);

    /* Without ASCEND_HOME_PATH: the configured mock version. */
    unsetenv("ASCEND_HOME_PATH");
    aclCANNPackageVersion v;
    CHECK_EQ(aclsysGetCANNVersion(ACL_PKG_NAME_CANN, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclsysGetCANNVersion((aclCANNPackageName)99, &v), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclsysGetCANNVersion(ACL_PKG_NAME_CANN, &v));
    CHECK_STR_EQ(v.version, aclmockGetCannVersion());
    CHECK_STR_EQ(v.version, "8.5.0");
    CHECK_STR_EQ(v.majorVersion, "8");
    CHECK_STR_EQ(v.minorVersion, "5");
    CHECK_STR_EQ(v.releaseVersion, "0");
    CHECK_STR_EQ(v.patchVersion, "");
    char s[ACL_PKG_VERSION_MAX_SIZE];
    char runtime[] = "runtime";
    char bad[] = "../etc";
    char empty[] = "";
    CHECK_OK(aclsysGetVersionStr(runtime, s));
    CHECK_STR_EQ(s, "8.5.0");
    CHECK_EQ(aclsysGetVersionStr(NULL, s), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclsysGetVersionStr(runtime, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclsysGetVersionStr(bad, s), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclsysGetVersionStr(empty, s), ACL_ERROR_INVALID_PARAM);
    int32_t num = 0;
    CHECK_OK(aclsysGetVersionNum(runtime, &num));
    CHECK_EQ(num, 8050000);
    CHECK_EQ(aclsysGetVersionNum(runtime, NULL), ACL_ERROR_INVALID_PARAM);

    /* With ASCEND_HOME_PATH: share/info/<pkg>/version.info like CANN. */
    char d[512];
    path_in(d, sizeof d, "cann");
    mkdir(d, 0755);
    path_in(d, sizeof d, "cann/share");
    mkdir(d, 0755);
    path_in(d, sizeof d, "cann/share/info");
    mkdir(d, 0755);
    path_in(d, sizeof d, "cann/share/info/runtime");
    mkdir(d, 0755);
    path_in(d, sizeof d, "cann/share/info/ops_legacy");
    mkdir(d, 0755);
    path_in(d, sizeof d, "cann/share/info/runtime/version.info");
    write_file(d, "package_name=runtime\nVersion=8.3.RC1.alpha002\n");
    path_in(d, sizeof d, "cann/share/info/ops_legacy/version.info");
    write_file(d, "Version= 9.1.0-beta.3  \n");
    path_in(d, sizeof d, "cann");
    setenv("ASCEND_HOME_PATH", d, 1);
    CHECK_OK(aclsysGetCANNVersion(ACL_PKG_NAME_RUNTIME, &v));
    CHECK_STR_EQ(v.version, "8.3.RC1.alpha002");
    CHECK_STR_EQ(v.majorVersion, "8");
    CHECK_STR_EQ(v.minorVersion, "3");
    CHECK_STR_EQ(v.releaseVersion, "RC1");
    CHECK_STR_EQ(v.patchVersion, "alpha002");
    CHECK_OK(aclsysGetCANNVersion(ACL_PKG_NAME_OPP, &v)); /* ops-legacy -> ops_legacy */
    CHECK_STR_EQ(v.version, "9.1.0-beta.3");
    CHECK_EQ(aclsysGetCANNVersion(ACL_PKG_NAME_HCCL, &v), ACL_ERROR_INVALID_FILE);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "hccl");
    char opsl[] = "ops-legacy";
    CHECK_OK(aclsysGetVersionStr(opsl, s));
    CHECK_STR_EQ(s, "9.1.0-beta.3");
    CHECK_OK(aclsysGetVersionNum(runtime, &num));
    CHECK_EQ(num, 8029962); /* 8.3.RC1.alpha002: a pre-release of 8.3.0 (test_version_num_order) */
    char nope[] = "nope";
    CHECK_EQ(aclsysGetVersionStr(nope, s), ACL_ERROR_INVALID_FILE);
    unsetenv("ASCEND_HOME_PATH");
}

/* The number of a version string (package "order" under ASCEND_HOME_PATH). */
static int32_t version_num(const char *version)
{
    char d[512], text[256];
    path_in(d, sizeof d, "order/share/info/order/version.info");
    snprintf(text, sizeof text, "Version=%s\n", version);
    write_file(d, text);
    char pkg[] = "order";
    int32_t num = -1;
    CHECK_OK(aclsysGetVersionNum(pkg, &num));
    return num;
}

/* aclsysGetVersionNum: pre-releases sort before their release, alpha < beta < rc < release,
 * in both the new (a.b.c-beta.N, a.b.c.rcN) and the old (a.b.RCn[.alphaM]) schemes. */
static void test_version_num_order(void)
{
    static const char *const dirs[] = {"order", "order/share", "order/share/info",
                                       "order/share/info/order"};
    char d[512];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        path_in(d, sizeof d, dirs[i]);
        mkdir(d, 0755);
    }
    path_in(d, sizeof d, "order");
    setenv("ASCEND_HOME_PATH", d, 1);
    static const char *const ascending[] = {
        "8.4.99",        "8.5.0-alpha",  "8.5.0-alpha.2", "8.5.0.alpha3", "8.5.0-beta",
        "8.5.0-beta.1",  "8.5.0.beta2",  "8.5.0-rc",      "8.5.0-rc.1",   "8.5.0.rc2",
        "8.5.0",         "8.5.1-alpha.1", "8.5.1",        "9.0.RC1.alpha001", "9.0.RC1",
        "9.0.RC2.alpha001", "9.0.RC2", "9.0.0",          "9.1.0-beta.3", "9.1.0",
    };
    int32_t prev = -1;
    for (size_t i = 0; i < sizeof ascending / sizeof ascending[0]; i++) {
        int32_t num = version_num(ascending[i]);
        if (num <= prev) {
            fprintf(stderr, "version '%s' -> %d, not above the previous one (%d)\n", ascending[i],
                    num, prev);
        }
        CHECK_GT(num, prev);
        prev = num;
    }
    CHECK_EQ(version_num("8.5.0"), 8050000); /* releases keep a*1000000 + b*10000 + c*100 */
    CHECK_EQ(version_num("8.5.0-beta.1"), 8049932);
    CHECK_EQ(version_num("8.5.0-RC.1"), 8049963); /* case-insensitive */
    unsetenv("ASCEND_HOME_PATH");
}

static void test_cann_attributes(void)
{
    const aclCannAttr *list = NULL;
    size_t n = 0;
    CHECK_EQ(aclGetCannAttributeList(NULL, &n), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclGetCannAttributeList(&list, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclGetCannAttributeList(&list, &n));
    CHECK_EQ(n, 3);
    CHECK(list != NULL);
    int32_t val = -1;
    for (size_t i = 0; list != NULL && i < n; i++) {
        CHECK_OK(aclGetCannAttribute(list[i], &val));
        CHECK_EQ(val, 1);
    }
    CHECK_EQ(aclGetCannAttribute(ACL_CANN_ATTR_UNDEFINED, &val), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclGetCannAttribute(ACL_CANN_ATTR_BF16, NULL), ACL_ERROR_INVALID_PARAM);
}

static void test_finalize_releases_and_reports(void)
{
    char buf[512];
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtSetDevice(1));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_CONTEXTS), 1);
    CHECK_GE(aclmockGetStat(1, ACLMOCK_STAT_STREAMS), 1);
    int need = aclmockGetLeakReport(NULL, 0, ACLMOCK_REPORT_NOW);
    CHECK_GT(need, 0);
    CHECK_EQ(aclmockGetLeakReport(buf, sizeof buf, ACLMOCK_REPORT_NOW), need);
    CHECK_STR_CONTAINS(buf, "device 0: only the runtime's own: 1 default context, 1 default stream\n");
    CHECK_STR_CONTAINS(buf, "device 1: only the runtime's own: 1 default context, 1 default stream\n");
    CHECK_OK(aclFinalize());
    /* aclFinalize released the devices and their contexts */
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_CONTEXTS), 0);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_STREAMS), 0);
    int32_t dev = -1;
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    aclmockGetLeakReport(buf, sizeof buf, ACLMOCK_REPORT_LAST_FINALIZE);
    CHECK_STR_CONTAINS(buf, "device 1: only the runtime's own: 1 default context");
    aclmockGetLeakReport(buf, sizeof buf, ACLMOCK_REPORT_NOW);
    CHECK_STR_CONTAINS(buf, "no leaks");
    /* truncation follows snprintf rules */
    char small[8];
    CHECK_EQ(aclmockGetLeakReport(small, sizeof small, ACLMOCK_REPORT_NOW), need > 0 ? (int)strlen(buf) : 0);
    CHECK_EQ(strlen(small), 7);
    CHECK_EQ(aclmockGetLeakReport(buf, sizeof buf, 42), -1);
    /* runtime APIs work without aclInit (acl_abi.md §5.1) */
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtResetDevice(0));
}

/* The report and the stats tell what the program created from what the runtime keeps
 * (default contexts of aclrtSetDevice, every context's default stream), with singular
 * and plural names ("1 contexts 1 streams" read like a leak of two objects). */
static void test_report_separates_created_from_runtime_own(void)
{
    char buf[1024];
    aclrtStream s1 = NULL;
    aclrtStream s2 = NULL;
    aclrtEvent e = NULL;
    aclrtContext c = NULL;
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(1));
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_CONTEXTS), 1);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_DEFAULT_CONTEXTS), 1);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_STREAMS), 1);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_DEFAULT_STREAMS), 1);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_DEFAULT_STREAMS), 1);
    CHECK_EQ(aclmockGetStat(1, (aclmockStat)9), -1); /* past the last kind */
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_STREAMS), 2);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_DEFAULT_STREAMS), 1);
    aclmockGetLeakReport(buf, sizeof buf, ACLMOCK_REPORT_NOW);
    CHECK_STR_EQ(buf, "mock_libascendcl leak report: device 1: 1 stream (plus the runtime's own: "
                      "1 default context, 1 default stream)\n");
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateEvent(&e));
    aclmockGetLeakReport(buf, sizeof buf, ACLMOCK_REPORT_NOW);
    CHECK_STR_EQ(buf, "mock_libascendcl leak report: device 1: 2 streams, 1 event (plus the "
                      "runtime's own: 1 default context, 1 default stream)\n");
    CHECK_OK(aclrtDestroyEvent(e));
    CHECK_OK(aclrtDestroyStream(s2));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtCreateContext(&c, 1));
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_CONTEXTS), 2);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_DEFAULT_CONTEXTS), 1);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_DEFAULT_STREAMS), 2);
    aclmockGetLeakReport(buf, sizeof buf, ACLMOCK_REPORT_NOW);
    CHECK_STR_EQ(buf, "mock_libascendcl leak report: device 1: 1 context (plus the runtime's own: "
                      "1 default context, 2 default streams)\n");
    CHECK_OK(aclrtDestroyContext(c));
    aclmockGetLeakReport(buf, sizeof buf, ACLMOCK_REPORT_NOW);
    CHECK_STR_EQ(buf, "mock_libascendcl leak report: device 1: only the runtime's own: "
                      "1 default context, 1 default stream\n");
    CHECK_OK(aclrtResetDevice(1));
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_DEFAULT_CONTEXTS), 0);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_DEFAULT_STREAMS), 0);
    aclmockGetLeakReport(buf, sizeof buf, ACLMOCK_REPORT_NOW);
    CHECK_STR_EQ(buf, "mock_libascendcl leak report: no leaks\n");
    CHECK_OK(aclFinalize());
}

#define LIFE_THREADS 8
#define LIFE_ITERS 50
static int g_life_bad;

static void *lifecycle_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < LIFE_ITERS; i++) {
        aclError a = aclInit(NULL);
        if (a != ACL_SUCCESS && a != ACL_ERROR_REPEAT_INITIALIZE) {
            __atomic_fetch_add(&g_life_bad, 1, __ATOMIC_RELAXED);
        }
        uint64_t ref = 0;
        aclError f = (i % 2) ? aclFinalize() : aclFinalizeReference(&ref);
        if (f != ACL_SUCCESS && f != ACL_ERROR_REPEAT_FINALIZE) {
            __atomic_fetch_add(&g_life_bad, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

static void test_concurrent_init_finalize(void)
{
    pthread_t t[LIFE_THREADS];
    for (int i = 0; i < LIFE_THREADS; i++) {
        CHECK_OK(pthread_create(&t[i], NULL, lifecycle_thread, NULL));
    }
    for (int i = 0; i < LIFE_THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    CHECK_EQ(g_life_bad, 0);
    /* whatever the interleaving, one more init + finalize leaves a clean state */
    aclError a = aclInit(NULL);
    CHECK(a == ACL_SUCCESS || a == ACL_ERROR_REPEAT_INITIALIZE);
    CHECK_OK(aclFinalize());
    CHECK_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
}

int main(void)
{
    if (mt_make_tmpdir(g_dir, sizeof g_dir, "init") != 0) {
        return 1;
    }
    RUN_TEST(test_init_finalize_basic);
    RUN_TEST(test_init_config_files);
    RUN_TEST(test_finalize_reference);
    RUN_TEST(test_finalize_reference_null);
    RUN_TEST(test_default_device);
    RUN_TEST(test_version_num_order);
    RUN_TEST(test_callbacks);
    RUN_TEST(test_versions);
    RUN_TEST(test_cann_attributes);
    RUN_TEST(test_finalize_releases_and_reports);
    RUN_TEST(test_report_separates_created_from_runtime_own);
    RUN_TEST(test_concurrent_init_finalize);
    mt_remove_tree(g_dir);
    return TEST_REPORT();
}
