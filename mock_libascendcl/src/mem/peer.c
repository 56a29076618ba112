/*
 * peer.c - peer access between devices (acl_abi.md §1.6, §5.2 "Peer access"):
 * aclrtDeviceCanAccessPeer, aclrtDeviceEnablePeerAccess/DisablePeerAccess
 * (relative to the calling thread's current device, one-directional),
 * aclrtDevicePeerAccessStatus, aclrtGetDevicesTopo,
 * aclrtDeviceGetP2PAtomicCapabilities and aclrtDeviceGetHostAtomicCapabilities
 * (one table of atomic operations). The simulated server is 8 Ascend910B
 * cards on one HCCS mesh: every pair of distinct visible devices can reach
 * each other. Enabled pairs gate copies between devices (copy.c).
 */
#include "core/core.h"
#include "mem/mem.h"
#include "mem/mem_private.h"

#include <string.h>

static mock_mutex g_peer_mu = MOCK_MUTEX_INIT(MOCK_LOCK_PEER);
static bool g_peer[MOCK_MAX_DEVICES][MOCK_MAX_DEVICES]; /* [from][to], under g_peer_mu */

MOCK_HIDDEN bool mem_peer_enabled(int32_t dev, int32_t peer)
{
    if (dev < 0 || peer < 0 || dev >= MOCK_MAX_DEVICES || peer >= MOCK_MAX_DEVICES) {
        return false;
    }
    core_mutex_lock(&g_peer_mu);
    bool on = g_peer[dev][peer];
    core_mutex_unlock(&g_peer_mu);
    return on;
}

void mem_peer_enable(int32_t dev, int32_t peer)
{
    if (dev < 0 || peer < 0 || dev >= MOCK_MAX_DEVICES || peer >= MOCK_MAX_DEVICES || dev == peer) {
        return;
    }
    core_mutex_lock(&g_peer_mu);
    g_peer[dev][peer] = true;
    core_mutex_unlock(&g_peer_mu);
}

MOCK_HIDDEN void mem_peer_finalize(void)
{
    core_mutex_lock(&g_peer_mu);
    memset(g_peer, 0, sizeof(g_peer));
    core_mutex_unlock(&g_peer_mu);
}

/* Device-id check of the pair APIs: int32_t and uint32_t ids alike (a uint32_t
 * id above INT32_MAX is invalid before any range check). */
static aclError check_device_id(const char *fn, int64_t dev)
{
    if (dev > INT32_MAX) {
        return core_error(fn, ACL_ERROR_RT_INVALID_DEVICEID, "device id %lld is invalid", (long long)dev);
    }
    return core_device_check(fn, (int32_t)dev);
}

/* Two valid devices that differ (a device is not its own peer: RT impl memory.cpp);
 * na/nb name the arguments in the error message. */
static aclError check_device_pair(const char *fn, int64_t a, int64_t b, const char *na, const char *nb)
{
    aclError rc = check_device_id(fn, a);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = check_device_id(fn, b);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (a == b) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "'%s' and '%s' are both %lld", na, nb, (long long)a);
    }
    return ACL_SUCCESS;
}

aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId, int32_t peerDeviceId)
{
    const char *fn = "aclrtDeviceCanAccessPeer";
    MOCK_REQUIRE_NONNULL(fn, canAccessPeer);
    MOCK_ENTER(fn);
    aclError rc = check_device_pair(fn, deviceId, peerDeviceId, "deviceId", "peerDeviceId");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *canAccessPeer = 1;
    return ACL_SUCCESS;
}

/* Shared front of aclrtDevice{Enable,Disable}PeerAccess: fault hook, current context,
 * valid peer that is not the current device; *cur = the current device. */
static aclError peer_pair(const char *fn, int32_t peerDeviceId, int32_t *cur)
{
    MOCK_ENTER(fn);
    mock_context *ctx;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = core_device_check(fn, peerDeviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *cur = core_ctx_device(ctx);
    if (peerDeviceId == *cur) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "'peerDeviceId' %d is the current device", peerDeviceId);
    }
    return ACL_SUCCESS;
}

aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags)
{
    const char *fn = "aclrtDeviceEnablePeerAccess";
    if (flags != 0) {
        /* RT impl memory.cpp: flags is reserved and must be 0 */
        return core_error(fn, ACL_ERROR_FEATURE_UNSUPPORTED, "argument 'flags' must be 0, got %u", flags);
    }
    int32_t cur = -1;
    aclError rc = peer_pair(fn, peerDeviceId, &cur);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* Enabling an already enabled pair is accepted (the pair stays enabled):
     * the reference does not pin an error for it, and torch_npu enables
     * pairs from several threads. */
    core_mutex_lock(&g_peer_mu);
    g_peer[cur][peerDeviceId] = true;
    core_mutex_unlock(&g_peer_mu);
    return ACL_SUCCESS;
}

aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId)
{
    const char *fn = "aclrtDeviceDisablePeerAccess";
    int32_t cur = -1;
    aclError rc = peer_pair(fn, peerDeviceId, &cur);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&g_peer_mu);
    bool was = g_peer[cur][peerDeviceId];
    g_peer[cur][peerDeviceId] = false;
    core_mutex_unlock(&g_peer_mu);
    if (!was) {
        /* Not pinned down by the reference; a disable without a matching
         * enable is a parameter error of the runtime. */
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "peer access from device %d to device %d is not enabled",
                          cur, peerDeviceId);
    }
    return ACL_SUCCESS;
}

aclError aclrtDevicePeerAccessStatus(int32_t deviceId, int32_t peerDeviceId, int32_t *status)
{
    const char *fn = "aclrtDevicePeerAccessStatus";
    MOCK_REQUIRE_NONNULL(fn, status);
    MOCK_ENTER(fn);
    /* Doc 04_device_management.md, aclrtDevicePeerAccessStatus: a peer id that is not a
     * device is ACL_ERROR_RT_PARAM_INVALID (107000), not 107001 like `deviceId`. */
    uint32_t visible = core_visible_count();
    if (deviceId >= 0 && (uint32_t)deviceId < visible && (peerDeviceId < 0 || (uint32_t)peerDeviceId >= visible)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'peerDeviceId' (%d) is out of range [0, %u)",
                          (int)peerDeviceId, visible);
    }
    aclError rc = check_device_pair(fn, deviceId, peerDeviceId, "deviceId", "peerDeviceId");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *status = mem_peer_enabled(deviceId, peerDeviceId) ? 1 : 0;
    return ACL_SUCCESS;
}

aclError aclrtGetDevicesTopo(uint32_t deviceId, uint32_t otherDeviceId, uint64_t *value)
{
    const char *fn = "aclrtGetDevicesTopo";
    MOCK_REQUIRE_NONNULL(fn, value);
    MOCK_ENTER(fn);
    aclError rc = check_device_pair(fn, deviceId, otherDeviceId, "deviceId", "otherDeviceId");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* 8-card 910B server: all cards on one HCCS full mesh */
    *value = ACL_RT_DEVS_TOPOLOGY_HCCS;
    return ACL_SUCCESS;
}

/* Capabilities the simulated HCCS link reports per atomic operation. */
static uint32_t atomic_caps(int op)
{
    const uint32_t ints = ACL_RT_ATOMIC_CAPABILITY_SIGNED | ACL_RT_ATOMIC_CAPABILITY_UNSIGNED |
                          ACL_RT_ATOMIC_CAPABILITY_SCALAR32 | ACL_RT_ATOMIC_CAPABILITY_SCALAR64;
    switch (op) {
    case ACL_RT_ATOMIC_OPERATION_INTEGER_ADD:
    case ACL_RT_ATOMIC_OPERATION_INTEGER_MIN:
    case ACL_RT_ATOMIC_OPERATION_INTEGER_MAX:
    case ACL_RT_ATOMIC_OPERATION_INTEGER_INCREMENT:
    case ACL_RT_ATOMIC_OPERATION_INTEGER_DECREMENT:
    case ACL_RT_ATOMIC_OPERATION_AND:
    case ACL_RT_ATOMIC_OPERATION_OR:
    case ACL_RT_ATOMIC_OPERATION_XOR:
    case ACL_RT_ATOMIC_OPERATION_EXCHANGE:
    case ACL_RT_ATOMIC_OPERATION_CAS:
        return ints;
    case ACL_RT_ATOMIC_OPERATION_FLOAT_ADD:
    case ACL_RT_ATOMIC_OPERATION_FLOAT_MIN:
    case ACL_RT_ATOMIC_OPERATION_FLOAT_MAX:
        return ACL_RT_ATOMIC_CAPABILITY_SIGNED | ACL_RT_ATOMIC_CAPABILITY_SCALAR32;
    case ACL_RT_ATOMIC_OPERATION_DMA_ADD:
    case ACL_RT_ATOMIC_OPERATION_DMA_MIN:
    case ACL_RT_ATOMIC_OPERATION_DMA_MAX:
        return ACL_RT_ATOMIC_CAPABILITY_SIGNED | ACL_RT_ATOMIC_CAPABILITY_UNSIGNED |
               ACL_RT_ATOMIC_CAPABILITY_REDUCTION | ACL_RT_ATOMIC_CAPABILITY_SCALAR32;
    case ACL_RT_ATOMIC_OPERATION_SIMD_SCALAR_ADD:
    case ACL_RT_ATOMIC_OPERATION_SIMD_SCALAR_MIN:
    case ACL_RT_ATOMIC_OPERATION_SIMD_SCALAR_MAX:
    case ACL_RT_ATOMIC_OPERATION_SIMD_SCALAR_CAS:
    case ACL_RT_ATOMIC_OPERATION_SIMD_SCALAR_EXCH:
        return ints | ACL_RT_ATOMIC_CAPABILITY_VECTOR32X4;
    default:
        return 0xFFFFFFFFu; /* marker: not an operation */
    }
}

static bool atomic_op_valid(int op)
{
    return atomic_caps(op) != 0xFFFFFFFFu;
}

aclError aclrtDeviceGetP2PAtomicCapabilities(uint32_t *capabilities, const aclrtAtomicOperation *operations,
                                             const uint32_t count, int32_t srcDeviceId, int32_t dstDeviceId)
{
    const char *fn = "aclrtDeviceGetP2PAtomicCapabilities";
    MOCK_REQUIRE_NONNULL(fn, capabilities);
    MOCK_REQUIRE_NONNULL(fn, operations);
    if (count == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'count' is 0");
    }
    for (uint32_t i = 0; i < count; i++) {
        if (!atomic_op_valid((int)operations[i])) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "operations[%u] = %d is not an aclrtAtomicOperation", i,
                              (int)operations[i]);
        }
    }
    MOCK_ENTER(fn);
    aclError rc = check_device_pair(fn, srcDeviceId, dstDeviceId, "srcDeviceId", "dstDeviceId");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    for (uint32_t i = 0; i < count; i++) {
        capabilities[i] = atomic_caps((int)operations[i]);
    }
    return ACL_SUCCESS;
}

/* Lives beside aclrtDeviceGetP2PAtomicCapabilities: both answer from the same
 * operation table. */
aclError aclrtDeviceGetHostAtomicCapabilities(uint32_t *capabilities,
                                              const aclrtAtomicOperation *operations,
                                              const uint32_t count, int32_t deviceId)
{
    static const char fn[] = "aclrtDeviceGetHostAtomicCapabilities";
    if (capabilities == NULL || operations == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL",
                          capabilities == NULL ? "capabilities" : "operations");
    }
    if (count == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'count' is 0");
    }
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    for (uint32_t i = 0; i < count; i++) {
        int op = (int)operations[i];
        if (!atomic_op_valid(op)) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "operations[%u] (%d) is not an aclrtAtomicOperation", i, op);
        }
    }
    /* The simulated device and the host share no coherent atomics. */
    for (uint32_t i = 0; i < count; i++) {
        capabilities[i] = 0;
    }
    return ACL_SUCCESS;
}
