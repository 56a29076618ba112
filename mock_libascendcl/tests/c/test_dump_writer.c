/* test_dump_writer.c - the data dump writer (mock README "Dump"): kernel launches
 * matching the dump config (aclmdlSetDump, DUMP_CONFIG_PATH) write their inputs and
 * outputs as .npy files with a JSON index; dump_list layers by kernel name,
 * dump_op_switch, dump_mode, dump_data "stats", dump_step; the output path priority
 * ASCEND_DUMP_PATH > ASCEND_WORK_PATH > dump_path (acl_next_semantics.md §7.5). */
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
static float g_in[32];
static void *g_din, *g_dout;

typedef struct twin_args {
    const float *in;
    float *out;
} twin_args;

static aclError double_twin(void *p)
{
    twin_args *a = p;
    for (int i = 0; i < 32; i++) {
        a->out[i] = 2.0f * a->in[i];
    }
    return ACL_SUCCESS;
}

static void launch(const char *name)
{
    static twin_args args;
    args.in = g_din;
    args.out = g_dout;
    aclmockOpArg a[2] = {
        {g_din, sizeof g_in, ACLMOCK_ACCESS_READ, ACL_FLOAT, 2, {4, 8}},
        {g_dout, sizeof g_in, ACLMOCK_ACCESS_WRITE, ACL_FLOAT, 2, {4, 8}},
    };
    aclmockOpDesc op = {name, 1000, a, 2, double_twin, &args};
    CHECK_OK(aclmockLaunchOp(&op, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
}

static void write_cfg(const char *path, const char *dump_body)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fprintf(f, "{\"dump\": {%s}}", dump_body);
        fclose(f);
    }
}

static size_t slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        buf[0] = '\0';
        return 0;
    }
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n;
}

/* The folder of the current configuration: <root>/mock_dump_<pid>_<n> (the newest). */
static void dump_folder(const char *root, char *out, size_t len)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -td '%s'/mock_dump_%ld_* 2>/dev/null | head -1", root, (long)getpid());
    FILE *p = popen(cmd, "r");
    out[0] = '\0';
    if (p != NULL) {
        if (fgets(out, (int)len, p) != NULL) {
            out[strcspn(out, "\n")] = '\0';
        }
        pclose(p);
    }
}

/* Checks a .npy file: format 1.0, the header's dtype and shape, then the data. */
static void check_npy(const char *path, const char *shape, const float *expect)
{
    static char buf[4096];
    size_t n = slurp(path, buf, sizeof buf);
    CHECK_GT(n, 10);
    if (n <= 10) {
        fprintf(stderr, "missing %s\n", path);
        return;
    }
    CHECK(memcmp(buf, "\x93NUMPY\x01\x00", 8) == 0);
    size_t hlen = (unsigned char)buf[8] | ((size_t)(unsigned char)buf[9] << 8);
    CHECK_EQ((10 + hlen) % 64, 0);
    char header[512];
    snprintf(header, sizeof header, "%.*s", (int)hlen, buf + 10);
    CHECK_STR_CONTAINS(header, "'descr': '<f4'");
    CHECK_STR_CONTAINS(header, "'fortran_order': False");
    CHECK_STR_CONTAINS(header, shape);
    CHECK_EQ(n, 10 + hlen + 32 * sizeof(float));
    if (n == 10 + hlen + 32 * sizeof(float)) {
        CHECK(memcmp(buf + 10 + hlen, expect, 32 * sizeof(float)) == 0);
    }
}

static void test_set_dump_all(void)
{
    char cfg[512], folder[1024], path[1400], body[1024], index[8192];
    snprintf(cfg, sizeof cfg, "%s/all.json", g_dir);
    snprintf(body, sizeof body,
             "\"dump_path\": \"%s/out\", \"dump_mode\": \"all\", \"dump_list\": [{\"model_name\": \"m\", \"layer\": [\"scale\"]}]",
             g_dir);
    write_cfg(cfg, body);
    CHECK_OK(aclmdlInitDump());
    CHECK_OK(aclmdlSetDump(cfg));
    launch("scale");
    launch("other"); /* not in the layer list */
    snprintf(path, sizeof path, "%s/out", g_dir);
    dump_folder(path, folder, sizeof folder);
    CHECK(folder[0] != '\0');
    snprintf(path, sizeof path, "%s/index.json", folder);
    slurp(path, index, sizeof index);
    CHECK(index[0] == '[');
    CHECK_STR_CONTAINS(index, "\"op\": \"scale\"");
    CHECK_STR_CONTAINS(index, "\"io\": \"input\"");
    CHECK_STR_CONTAINS(index, "\"io\": \"output\"");
    CHECK_STR_CONTAINS(index, "\"dtype\": \"float32\", \"shape\": [4, 8], \"bytes\": 128");
    CHECK(strstr(index, "\"op\": \"other\"") == NULL);
    /* the files the index names */
    const char *f = strstr(index, "\"file\": \"device_0/step_0/");
    CHECK(f != NULL);
    char rel[256];
    if (f != NULL && sscanf(f, "\"file\": \"%255[^\"]\"", rel) == 1) {
        CHECK_STR_CONTAINS(rel, "_scale.input.0.npy");
        snprintf(path, sizeof path, "%s/%s", folder, rel);
        check_npy(path, "'shape': (4, 8)", g_in);
        float out[32];
        for (int i = 0; i < 32; i++) {
            out[i] = 2.0f * g_in[i];
        }
        char *dot = strstr(path, ".input.0.npy");
        if (dot != NULL) {
            memcpy(dot, ".output.0.npy", sizeof ".output.0.npy");
            check_npy(path, "'shape': (4, 8)", out);
        }
    }
    snprintf(path, sizeof path, "%s/out", g_dir);
    CHECK_STR_EQ(acldumpGetPath(DATA_DUMP), path);
    CHECK_OK(aclmdlFinalizeDump());
}

static void test_mode_step_stats_and_priority(void)
{
    char cfg[512], folder[1024], path[1400], body[1024], index[8192];
    snprintf(cfg, sizeof cfg, "%s/steps.json", g_dir);
    /* every op (dump_op_switch), outputs only (the default mode), steps 1..2, stats */
    snprintf(body, sizeof body,
             "\"dump_path\": \"%s/unused\", \"dump_op_switch\": \"on\", \"dump_step\": \"1-2\", \"dump_data\": \"stats\"",
             g_dir);
    write_cfg(cfg, body);
    char envdir[512];
    snprintf(envdir, sizeof envdir, "%s/env", g_dir);
    setenv("ASCEND_WORK_PATH", "/nonexistent-work-path", 1);
    setenv("ASCEND_DUMP_PATH", envdir, 1); /* wins over ASCEND_WORK_PATH and dump_path */
    CHECK_OK(aclmdlInitDump());
    CHECK_OK(aclmdlSetDump(cfg));
    CHECK_STR_EQ(acldumpGetPath(DATA_DUMP), envdir);
    uint64_t step0 = aclmockProfGetStep();
    while (aclmockProfGetStep() < 1) {
        (void)aclmockProfStep();
    }
    CHECK_EQ(step0, 0);
    launch("in-step-1");
    (void)aclmockProfStep();
    (void)aclmockProfStep(); /* step 3: outside 1-2 */
    launch("in-step-3");
    dump_folder(envdir, folder, sizeof folder);
    CHECK(folder[0] != '\0');
    snprintf(path, sizeof path, "%s/index.json", folder);
    slurp(path, index, sizeof index);
    CHECK_STR_CONTAINS(index, "\"op\": \"in-step-1\"");
    CHECK_STR_CONTAINS(index, "\"step\": 1");
    CHECK(strstr(index, "in-step-3") == NULL);
    CHECK(strstr(index, "\"io\": \"input\"") == NULL); /* output is the default mode */
    CHECK_STR_CONTAINS(index, "\"file\": null, \"stats\": {\"count\": 32, \"min\": 0,");
    CHECK_STR_CONTAINS(index, "\"max\": 62,");
    CHECK_STR_CONTAINS(index, "\"mean\": 31,");
    struct stat st;
    snprintf(path, sizeof path, "%s/unused", g_dir);
    CHECK(stat(path, &st) != 0); /* dump_path lost to ASCEND_DUMP_PATH */
    unsetenv("ASCEND_DUMP_PATH");
    CHECK_STR_EQ(acldumpGetPath(DATA_DUMP), "/nonexistent-work-path"); /* then ASCEND_WORK_PATH */
    unsetenv("ASCEND_WORK_PATH");
    CHECK_STR_CONTAINS(acldumpGetPath(DATA_DUMP), "/unused");
    CHECK_OK(aclmdlFinalizeDump());
    /* after FinalizeDump nothing is dumped */
    launch("after-finalize");
    slurp(path, index, sizeof index);
    CHECK(strstr(index, "after-finalize") == NULL);
}

static void test_invalid_configs(void)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s/bad.json", g_dir);
    CHECK_OK(aclmdlInitDump());
    write_cfg(cfg, "\"dump_list\": [{\"layer\": [\"a\"]}]"); /* no dump_path */
    CHECK_EQ(aclmdlSetDump(cfg), ACL_ERROR_INVALID_DUMP_CONFIG);
    write_cfg(cfg, "\"dump_path\": \"/tmp\", \"dump_list\": [], \"dump_mode\": \"everything\"");
    CHECK_EQ(aclmdlSetDump(cfg), ACL_ERROR_INVALID_DUMP_CONFIG);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "dump_mode");
    write_cfg(cfg, "\"dump_path\": \"/tmp\", \"dump_list\": [], \"dump_step\": \"3-1\"");
    CHECK_EQ(aclmdlSetDump(cfg), ACL_ERROR_INVALID_DUMP_CONFIG);
    CHECK_OK(aclmdlFinalizeDump());
}

/* DUMP_CONFIG_PATH: the seed's switch, applied by aclInit. */
static void child_env_config(void)
{
    char cfg[512], body[1024], folder[1024], path[1400], index[8192];
    snprintf(cfg, sizeof cfg, "%s/env.json", g_dir);
    snprintf(body, sizeof body, "\"dump_path\": \"%s/envcfg\", \"dump_list\": [{\"layer\": [\"scale\"]}]", g_dir);
    write_cfg(cfg, body);
    mt_mock_env("DUMP_CONFIG_PATH", cfg, (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtMalloc(&g_din, sizeof g_in, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&g_dout, sizeof g_in, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemcpy(g_din, sizeof g_in, g_in, sizeof g_in, ACL_MEMCPY_HOST_TO_DEVICE));
    launch("scale");
    snprintf(path, sizeof path, "%s/envcfg", g_dir);
    dump_folder(path, folder, sizeof folder);
    snprintf(path, sizeof path, "%s/index.json", folder);
    slurp(path, index, sizeof index);
    CHECK_STR_CONTAINS(index, "\"op\": \"scale\", \"device\": 0");
    CHECK_OK(aclrtFree(g_din));
    CHECK_OK(aclrtFree(g_dout));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
}

static void child_env_config_invalid(void)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s/env_bad.json", g_dir);
    write_cfg(cfg, "\"dump_path\": 3");
    mt_mock_env("DUMP_CONFIG_PATH", cfg, (const char *)NULL);
    CHECK_EQ(aclInit(NULL), ACL_ERROR_INVALID_DUMP_CONFIG);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "dump_path");
}

static void test_dump_config_path(void)
{
    CHECK_EQ(mt_run_child_fn(child_env_config), 0);
    CHECK_EQ(mt_run_child_fn(child_env_config_invalid), 0);
}

int main(void)
{
    if (mt_make_tmpdir(g_dir, sizeof g_dir, "dumpw") != 0) {
        return 1;
    }
    for (int i = 0; i < 32; i++) {
        g_in[i] = (float)i;
    }
    RUN_TEST(test_dump_config_path); /* children first: before this process's first ACL call */
    mt_mock_env((const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtMalloc(&g_din, sizeof g_in, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&g_dout, sizeof g_in, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemcpy(g_din, sizeof g_in, g_in, sizeof g_in, ACL_MEMCPY_HOST_TO_DEVICE));
    RUN_TEST(test_set_dump_all);
    RUN_TEST(test_mode_step_stats_and_priority);
    RUN_TEST(test_invalid_configs);
    CHECK_OK(aclrtFree(g_din));
    CHECK_OK(aclrtFree(g_dout));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    mt_remove_tree(g_dir);
    return TEST_REPORT();
}
