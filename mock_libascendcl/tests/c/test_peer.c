/*
 * test_peer.c - peer access between devices (peer.c): can-access queries,
 * enable/disable relative to the current device, status, topology, P2P
 * atomic capabilities, and the effect on copies between devices.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "mock_test.h"

static void test_can_access(void)
{
    int32_t can = -1;
    CHECK_OK(aclrtDeviceCanAccessPeer(&can, 0, 1));
    CHECK_EQ(can, 1);
    CHECK_OK(aclrtDeviceCanAccessPeer(&can, 3, 0));
    CHECK_EQ(can, 1);
    CHECK_EQ(aclrtDeviceCanAccessPeer(&can, 1, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceCanAccessPeer(NULL, 0, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceCanAccessPeer(&can, 0, 4), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtDeviceCanAccessPeer(&can, -1, 0), ACL_ERROR_RT_INVALID_DEVICEID);
}

static void *no_ctx(void *arg)
{
    (void)arg;
    CHECK_EQ(aclrtDeviceEnablePeerAccess(1, 0), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtDeviceDisablePeerAccess(1), ACL_ERROR_RT_CONTEXT_NULL);
    return NULL;
}

static void test_enable_disable(void)
{
    int32_t st = -1;
    pthread_t t;
    pthread_create(&t, NULL, no_ctx, NULL);
    pthread_join(t, NULL);

    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtDevicePeerAccessStatus(0, 1, &st));
    CHECK_EQ(st, 0);
    CHECK_EQ(aclrtDeviceEnablePeerAccess(1, 1), ACL_ERROR_FEATURE_UNSUPPORTED); /* flags must be 0 */
    CHECK_EQ(aclrtDeviceEnablePeerAccess(0, 0), ACL_ERROR_INVALID_PARAM);       /* self */
    CHECK_EQ(aclrtDeviceEnablePeerAccess(9, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_OK(aclrtDeviceEnablePeerAccess(1, 0));
    CHECK_OK(aclrtDeviceEnablePeerAccess(1, 0)); /* repeat: stays enabled */
    CHECK_OK(aclrtDevicePeerAccessStatus(0, 1, &st));
    CHECK_EQ(st, 1);
    /* one-directional */
    CHECK_OK(aclrtDevicePeerAccessStatus(1, 0, &st));
    CHECK_EQ(st, 0);
    CHECK_EQ(aclrtDevicePeerAccessStatus(1, 1, &st), ACL_ERROR_INVALID_PARAM);
    /* doc 04_device_management.md, aclrtDevicePeerAccessStatus: a peer id out of range is
     * ACL_ERROR_RT_PARAM_INVALID (107000); a bad deviceId stays 107001 */
    CHECK_EQ(aclrtDevicePeerAccessStatus(0, 4, &st), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtDevicePeerAccessStatus(0, -1, &st), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtDevicePeerAccessStatus(4, 0, &st), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtDevicePeerAccessStatus(0, 1, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtDeviceDisablePeerAccess(1));
    CHECK_EQ(aclrtDeviceDisablePeerAccess(1), ACL_ERROR_RT_PARAM_INVALID); /* not enabled */
    CHECK_EQ(aclrtDeviceDisablePeerAccess(0), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtDevicePeerAccessStatus(0, 1, &st));
    CHECK_EQ(st, 0);
    /* enabling from device 2 is relative to the new current device */
    CHECK_OK(aclrtSetDevice(2));
    CHECK_OK(aclrtDeviceEnablePeerAccess(0, 0));
    CHECK_OK(aclrtDevicePeerAccessStatus(2, 0, &st));
    CHECK_EQ(st, 1);
    CHECK_OK(aclrtDeviceDisablePeerAccess(0));
    CHECK_OK(aclrtResetDevice(2));
    CHECK_OK(aclrtSetDevice(0));
}

static void test_copies_follow_peer_state(void)
{
    void *a = NULL, *b = NULL;
    CHECK_OK(aclrtSetDevice(3));
    CHECK_OK(aclrtMalloc(&b, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(b, 256, 0x77, 256));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtMalloc(&a, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(aclrtMemcpy(a, 256, b, 256, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtDeviceEnablePeerAccess(3, 0));
    CHECK_OK(aclrtMemcpy(a, 256, b, 256, ACL_MEMCPY_DEVICE_TO_DEVICE));
    unsigned char o = 0;
    CHECK_OK(aclrtMemcpy(&o, 1, (char *)a + 255, 1, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(o, 0x77);
    CHECK_OK(aclrtDeviceDisablePeerAccess(3));
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtFree(b));
    CHECK_OK(aclrtResetDevice(3));
}

static void test_topology_and_atomics(void)
{
    uint64_t topo = 0;
    CHECK_OK(aclrtGetDevicesTopo(0, 1, &topo));
    CHECK_EQ(topo, ACL_RT_DEVS_TOPOLOGY_HCCS);
    CHECK_EQ(aclrtGetDevicesTopo(0, 0, &topo), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetDevicesTopo(0, 1, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetDevicesTopo(0, 40, &topo), ACL_ERROR_RT_INVALID_DEVICEID);

    aclrtAtomicOperation ops[3] = {ACL_RT_ATOMIC_OPERATION_INTEGER_ADD, ACL_RT_ATOMIC_OPERATION_FLOAT_ADD,
                                   ACL_RT_ATOMIC_OPERATION_DMA_ADD};
    uint32_t caps[3] = {0, 0, 0};
    CHECK_OK(aclrtDeviceGetP2PAtomicCapabilities(caps, ops, 3, 0, 1));
    CHECK(caps[0] & ACL_RT_ATOMIC_CAPABILITY_SCALAR64);
    CHECK(caps[1] & ACL_RT_ATOMIC_CAPABILITY_SCALAR32);
    CHECK(caps[2] & ACL_RT_ATOMIC_CAPABILITY_REDUCTION);
    CHECK_EQ(aclrtDeviceGetP2PAtomicCapabilities(caps, ops, 0, 0, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceGetP2PAtomicCapabilities(NULL, ops, 3, 0, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceGetP2PAtomicCapabilities(caps, ops, 3, 1, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceGetP2PAtomicCapabilities(caps, ops, 3, 0, 17), ACL_ERROR_RT_INVALID_DEVICEID);
    aclrtAtomicOperation bad = (aclrtAtomicOperation)99;
    CHECK_EQ(aclrtDeviceGetP2PAtomicCapabilities(caps, &bad, 1, 0, 1), ACL_ERROR_INVALID_PARAM);
}

static void test_finalize_clears(void)
{
    int32_t st = -1;
    CHECK_OK(aclrtDeviceEnablePeerAccess(2, 0));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtDevicePeerAccessStatus(0, 2, &st));
    CHECK_EQ(st, 0);
}

int main(void)
{
    mt_mock_env("ASCEND_MOCK_DEVICE_COUNT", "4", (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_can_access);
    RUN_TEST(test_enable_disable);
    RUN_TEST(test_copies_follow_peer_state);
    RUN_TEST(test_topology_and_atomics);
    RUN_TEST(test_finalize_clears);
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
