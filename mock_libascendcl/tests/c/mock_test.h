/*
 * mock_test.h - a tiny header-only test harness for the mock_libascendcl C tests.
 *
 * Usage:
 *     #include "mock_test.h"
 *     static void test_something(void) { CHECK_EQ(aclrtGetDeviceCount(&n), ACL_SUCCESS); ... }
 *     int main(void) { RUN_TEST(test_something); return TEST_REPORT(); }
 *
 * Every failed check prints "file:line: ..." with the expression and values on stderr.
 * TEST_REPORT() prints "N passed, N failed" on stdout and returns the process exit code
 * (0 when nothing failed). Counters are updated atomically, so checks may be used from
 * several threads. Works in C (C99 and later) and C++.
 */
#ifndef MOCK_TEST_H
#define MOCK_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int mt_passed_ __attribute__((unused)) = 0;
static int mt_failed_ __attribute__((unused)) = 0;

#define MT_PASS_() ((void)__atomic_fetch_add(&mt_passed_, 1, __ATOMIC_RELAXED))
#define MT_FAIL_() ((void)__atomic_fetch_add(&mt_failed_, 1, __ATOMIC_RELAXED))

/* CHECK(cond): cond must be true. */
#define CHECK(cond)                                                              \
    do {                                                                         \
        if (cond) {                                                              \
            MT_PASS_();                                                          \
        } else {                                                                 \
            MT_FAIL_();                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

/* Integer comparisons (values are compared as long long and printed on failure). */
#define MT_CMP_(a, op, b)                                                        \
    do {                                                                         \
        long long mt_a_ = (long long)(a);                                        \
        long long mt_b_ = (long long)(b);                                        \
        if (mt_a_ op mt_b_) {                                                    \
            MT_PASS_();                                                          \
        } else {                                                                 \
            MT_FAIL_();                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s %s %s (%lld vs %lld)\n",    \
                    __FILE__, __LINE__, #a, #op, #b, mt_a_, mt_b_);              \
        }                                                                        \
    } while (0)

#define CHECK_EQ(a, b) MT_CMP_(a, ==, b)
#define CHECK_NE(a, b) MT_CMP_(a, !=, b)
#define CHECK_LT(a, b) MT_CMP_(a, <, b)
#define CHECK_LE(a, b) MT_CMP_(a, <=, b)
#define CHECK_GT(a, b) MT_CMP_(a, >, b)
#define CHECK_GE(a, b) MT_CMP_(a, >=, b)
/* CHECK_OK(expr): expr returns 0 (ACL_SUCCESS). */
#define CHECK_OK(expr) MT_CMP_(expr, ==, 0)

/* String checks; a NULL string never matches. */
#define CHECK_STR_EQ(s, expected)                                                \
    do {                                                                         \
        const char *mt_s_ = (s);                                                 \
        const char *mt_e_ = (expected);                                          \
        if (mt_s_ != NULL && mt_e_ != NULL && strcmp(mt_s_, mt_e_) == 0) {       \
            MT_PASS_();                                                          \
        } else {                                                                 \
            MT_FAIL_();                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s == \"%s\" (got %s%s%s)\n",  \
                    __FILE__, __LINE__, #s, mt_e_ ? mt_e_ : "(null)",            \
                    mt_s_ ? "\"" : "", mt_s_ ? mt_s_ : "NULL", mt_s_ ? "\"" : ""); \
        }                                                                        \
    } while (0)

#define CHECK_STR_CONTAINS(s, needle)                                            \
    do {                                                                         \
        const char *mt_s_ = (s);                                                 \
        const char *mt_n_ = (needle);                                            \
        if (mt_s_ != NULL && mt_n_ != NULL && strstr(mt_s_, mt_n_) != NULL) {    \
            MT_PASS_();                                                          \
        } else {                                                                 \
            MT_FAIL_();                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s contains \"%s\" (got %s%s%s)\n", \
                    __FILE__, __LINE__, #s, mt_n_ ? mt_n_ : "(null)",            \
                    mt_s_ ? "\"" : "", mt_s_ ? mt_s_ : "NULL", mt_s_ ? "\"" : ""); \
        }                                                                        \
    } while (0)

/* RUN_TEST(fn): runs `void fn(void)` and prints its name and how many checks failed in it. */
#define RUN_TEST(fn)                                                             \
    do {                                                                         \
        int mt_before_ = __atomic_load_n(&mt_failed_, __ATOMIC_RELAXED);         \
        fn();                                                                    \
        int mt_after_ = __atomic_load_n(&mt_failed_, __ATOMIC_RELAXED);          \
        printf("[%s] %s\n", mt_after_ == mt_before_ ? " OK " : "FAIL", #fn);     \
        fflush(stdout);                                                          \
    } while (0)

/* Number of failed checks so far. */
#define TEST_FAILED_COUNT() (__atomic_load_n(&mt_failed_, __ATOMIC_RELAXED))

/* Prints the summary line and evaluates to the exit code (0 = all passed). */
#define TEST_REPORT()                                                            \
    (printf("%d passed, %d failed\n", __atomic_load_n(&mt_passed_, __ATOMIC_RELAXED), \
            __atomic_load_n(&mt_failed_, __ATOMIC_RELAXED)),                     \
     fflush(stdout), (__atomic_load_n(&mt_failed_, __ATOMIC_RELAXED) == 0 ? 0 : 1))

/* ------------------------------------------------------------ environment */

/* Gives the test the mock configuration it needs: unsets every ASCEND_MOCK_*
 * variable, ASCEND_RT_VISIBLE_DEVICES and the diagnostics' switches (so the
 * developer's shell cannot leak in), then sets the NAME, VALUE pairs given, e.g.
 *     mt_mock_env("ASCEND_MOCK_DEVICE_COUNT", "4", (const char *)NULL);
 * Call it first thing in main(): the mock reads its configuration at the first
 * ACL call (README "When variables are read"). */
static inline void mt_mock_env(const char *name, ...)
{
    static const char *const vars[] = {
        "ASCEND_MOCK_DEVICE_COUNT", "ASCEND_MOCK_MEM_PER_DEVICE", "ASCEND_MOCK_SOC_NAME",
        "ASCEND_MOCK_CANN_VERSION", "ASCEND_MOCK_ISOLATION",      "ASCEND_MOCK_FAULTS",
        "ASCEND_MOCK_DEVICE_LOST",  "ASCEND_MOCK_LEAK_REPORT",    "ASCEND_RT_VISIBLE_DEVICES",
        "ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US", "ASCEND_MOCK_TIMING", "ASCEND_MOCK_TIMING_MODEL",
        "ASCEND_MOCK_SANITIZE",     "ASCEND_PROFILER_FLAGS",      "ASCEND_PROFILER_OUTPUT",
        "ASCEND_PROFILER_START_STEP", "ASCEND_PROFILER_STOP_STEP", "DUMP_CONFIG_PATH",
        "ASCEND_DUMP_PATH",         "ASCEND_WORK_PATH",           "ASCEND_PROCESS_LOG_PATH",
        "ASCEND_LOG_PRINT_TO_STDOUT",
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        unsetenv(vars[i]);
    }
    va_list ap;
    va_start(ap, name);
    for (const char *n = name; n != NULL; n = va_arg(ap, const char *)) {
        const char *v = va_arg(ap, const char *);
        if (v != NULL) {
            setenv(n, v, 1);
        }
    }
    va_end(ap);
}

/* ------------------------------------------------------------ child runs */

/* Runs this test program again in a child process (fork + exec of /proc/self/exe),
 * with MT_CHILD=`scenario` and the NAME, VALUE pairs given added to its environment
 * (NULL-terminated), e.g. for another ASCEND_MOCK_SOC_NAME: the mock reads its
 * configuration once per process. The child's main() dispatches on mt_child_scenario().
 * Returns 1 when the child exited with status 0. */
#define mt_run_child(scenario, ...) mt_run_child_((scenario), __VA_ARGS__, (const char *)NULL)
static inline int mt_run_child_(const char *scenario, ...)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        va_list ap;
        va_start(ap, scenario);
        for (const char *n = va_arg(ap, const char *); n != NULL; n = va_arg(ap, const char *)) {
            const char *v = va_arg(ap, const char *);
            setenv(n, v, 1);
        }
        va_end(ap);
        setenv("MT_CHILD", scenario, 1);
        execl("/proc/self/exe", "mock_test_child", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child scenario '%s' failed\n", scenario);
        return 0;
    }
    return 1;
}

/* The scenario this process runs as a child of mt_run_child, or NULL in the parent. */
static inline const char *mt_child_scenario(void)
{
    return getenv("MT_CHILD");
}

/* Runs fn() in a forked child process, without exec (for switches the mock reads once
 * per process: call it before the parent's first ACL call; fn sets them with
 * mt_mock_env). The child's checks count in its own process: it exits with 1 when one
 * failed. Returns the child's exit status (-1 if it did not exit normally). */
static inline int mt_run_child_fn(void (*fn)(void))
{
    fflush(stdout);
    fflush(stderr);
    int before = __atomic_load_n(&mt_failed_, __ATOMIC_RELAXED); /* the parent's, inherited */
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        fflush(stdout);
        fflush(stderr);
        _exit(__atomic_load_n(&mt_failed_, __ATOMIC_RELAXED) == before ? 0 : 1);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ------------------------------------------------------------ scratch dirs */

/* Creates a fresh directory /tmp/mock_test_<tag>_XXXXXX in buf (len >= 64).
 * Returns 0, or -1 after printing why. */
static inline int mt_make_tmpdir(char *buf, size_t len, const char *tag)
{
    snprintf(buf, len, "/tmp/mock_test_%s_XXXXXX", tag);
    if (mkdtemp(buf) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

/* Removes a directory made by mt_make_tmpdir and everything in it (best effort). */
static inline void mt_remove_tree(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) {
        fprintf(stderr, "warning: could not remove %s\n", path);
    }
}

#endif /* MOCK_TEST_H */
