/*
 * test_isolation.c - ASCEND_MOCK_ISOLATION=1: device pages are inaccessible to
 * the host outside runtime operations, so a host dereference of a device
 * pointer faults at once (checked in forked children), while every runtime
 * operation on the same memory keeps working.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

/* Runs fn(arg) in a child; returns the signal that killed it, or 0. */
static int child_signal(void (*fn)(void *), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        /* die by the signal itself, not by a sanitizer's report */
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
        fn(arg);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static void read_byte(void *p)
{
    volatile unsigned char *b = p;
    unsigned char v = *b;
    (void)v;
}

static void write_byte(void *p)
{
    volatile unsigned char *b = p;
    *b = 1;
}

static void test_config(void)
{
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_ISOLATION), 1);
}

static void test_host_deref_faults(void)
{
    void *d = NULL;
    CHECK_OK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(child_signal(read_byte, d), SIGSEGV);
    CHECK_EQ(child_signal(write_byte, (char *)d + 100), SIGSEGV);
    /* after runtime operations the pages are closed again */
    char src[4096], out[4096];
    memset(src, 9, sizeof(src));
    CHECK_OK(aclrtMemcpy(d, 4096, src, 4096, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_EQ(child_signal(read_byte, d), SIGSEGV);
    memset(out, 0, sizeof(out));
    CHECK_OK(aclrtMemcpy(out, 4096, d, 4096, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(out, src, 4096) == 0);
    CHECK_EQ(child_signal(read_byte, (char *)d + 4000), SIGSEGV);
    /* host memory is never isolated; control case */
    void *pin = NULL;
    CHECK_OK(aclrtMallocHost(&pin, 64));
    CHECK_EQ(child_signal(write_byte, pin), 0);
    CHECK_OK(aclrtFreeHost(pin));
    CHECK_OK(aclrtFree(d));
    /* freed device memory faults too */
    CHECK_EQ(child_signal(read_byte, d), SIGSEGV);
}

static void test_runtime_ops_work(void)
{
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    void *d1 = NULL, *d2 = NULL, *pin = NULL;
    CHECK_OK(aclrtMalloc(&d1, 1 << 16, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&d2, 1 << 16, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&pin, 1 << 16));
    for (int i = 0; i < (1 << 16); i++) {
        ((unsigned char *)pin)[i] = (unsigned char)(i * 13);
    }
    unsigned char *ref = malloc(1 << 16);
    memcpy(ref, pin, 1 << 16);
    CHECK_OK(aclrtMemcpyAsync(d1, 1 << 16, pin, 1 << 16, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK_OK(aclrtMemcpyAsync(d2, 1 << 16, d1, 1 << 16, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    CHECK_OK(aclrtMemsetAsync(d1, 1 << 16, 0, 1 << 16, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    memset(pin, 0, 1 << 16);
    CHECK_OK(aclrtMemcpyAsync(pin, 1 << 16, d2, 1 << 16, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK(memcmp(pin, ref, 1 << 16) == 0);
    /* 2D, memset and value ops on isolated memory */
    CHECK_OK(aclrtMemcpy2d(d1, 256, ref, 128, 100, 50, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemsetD32(d2, 1 << 16, 0x01020304u, 16));
    uint32_t w = 0;
    CHECK_OK(aclrtMemcpy(&w, 4, (char *)d2 + 60, 4, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(w, 0x01020304u);
    CHECK_OK(aclrtValueWrite(d1, 5, 0, s));
    CHECK_OK(aclrtValueWait(d1, 5, ACL_STREAM_WAIT_VALUE_EQ, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    uint64_t v = 0;
    CHECK_OK(aclrtMemcpy(&v, 8, d1, 8, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(v, 5);
    CHECK_EQ(child_signal(read_byte, d1), SIGSEGV);
    CHECK_EQ(child_signal(read_byte, d2), SIGSEGV);
    free(ref);
    CHECK_OK(aclrtFree(d1));
    CHECK_OK(aclrtFree(d2));
    CHECK_OK(aclrtFreeHost(pin));
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_vmm_isolated(void)
{
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    void *va = NULL;
    aclrtDrvMemHandle h = NULL;
    size_t two = 2u << 20;
    CHECK_OK(aclrtReserveMemAddress(&va, two, 0, NULL, 0));
    CHECK_OK(aclrtMallocPhysical(&h, two, &prop, 0));
    CHECK_OK(aclrtMapMem(va, two, 0, h, 0));
    CHECK_EQ(child_signal(read_byte, va), SIGSEGV);
    uint64_t x = 77, y = 0;
    CHECK_OK(aclrtMemcpy(va, 8, &x, 8, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(&y, 8, va, 8, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(y, 77);
    CHECK_EQ(child_signal(write_byte, va), SIGSEGV);
    CHECK_OK(aclrtUnmapMem(va));
    CHECK_OK(aclrtFreePhysical(h));
    CHECK_OK(aclrtReleaseMemAddress(va));
}

int main(void)
{
    mt_mock_env("ASCEND_MOCK_ISOLATION", "1", "ASCEND_MOCK_MEM_PER_DEVICE", "1G", (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_config);
    RUN_TEST(test_host_deref_faults);
    RUN_TEST(test_runtime_ops_work);
    RUN_TEST(test_vmm_isolated);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
