/*
 * test_env_lazy.c - the ASCEND_MOCK_* configuration is read at the first ACL call,
 * not when the library is loaded: a C program may setenv() at the start of main()
 * (what users try first) and the mock follows it. Nothing here may call into the
 * library before the setenv() calls.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static void *count_devices(void *arg)
{
    uint32_t *n = (uint32_t *)arg;
    if (aclrtGetDeviceCount(n) != ACL_SUCCESS) {
        *n = 0;
    }
    return NULL;
}

int main(void)
{
    /* first thing: configure through the environment */
    setenv("ASCEND_MOCK_DEVICE_COUNT", "3", 1);
    setenv("ASCEND_MOCK_FAULTS", "aclrtSetDevice:2:507033", 1);

    /* the first calls race from several threads: parsing happens exactly once */
    pthread_t t[4];
    uint32_t counts[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(pthread_create(&t[i], NULL, count_devices, &counts[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(counts[i], 3);
    }
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(n, 3);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_PHYSICAL_DEVICE_COUNT), 3);
    CHECK_EQ(aclrtSetDevice(3), ACL_ERROR_RT_INVALID_DEVICEID);

    /* the fault list from the environment is armed too (2nd aclrtSetDevice fails) */
    CHECK_OK(aclrtSetDevice(0));
    CHECK_EQ(aclrtSetDevice(1), 507033);
    CHECK_EQ(aclmockGetFaultHits("aclrtSetDevice"), 1);
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtResetDevice(1));
    CHECK_OK(aclrtResetDevice(0));

    /* read once: later changes are not seen */
    setenv("ASCEND_MOCK_DEVICE_COUNT", "5", 1);
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(n, 3);
    return TEST_REPORT();
}
