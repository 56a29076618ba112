/*
 * util.c - datatype_util group: aclDataTypeSize, IEEE binary16 <-> binary32
 * conversions and aclDataBuffer handles.
 *
 * None of these functions needs aclInit or a current context (they are pure
 * host helpers in CANN too).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "misc/misc_private.h"

/* Fault injection for entry points that do not return aclError. */
#define UTIL_ENTER_OR(func, failval)                   \
    do {                                               \
        if (core_fault_check(func) != ACL_SUCCESS) {   \
            return (failval);                          \
        }                                              \
    } while (0)

/* ------------------------------------------------------------ aclDataTypeSize */

size_t aclDataTypeSize(aclDataType dataType)
{
    UTIL_ENTER_OR("aclDataTypeSize", 0);
    switch ((int)dataType) {
    case ACL_BOOL:
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_HIFLOAT8:
    case ACL_FLOAT8_E5M2:
    case ACL_FLOAT8_E4M3FN:
    case ACL_FLOAT8_E8M0:
        return 1;
    /* Sub-byte types: one element does not occupy a whole byte; the size of
     * the smallest addressable unit (1 byte) is reported so that buffers
     * sized with it are never too small. (Not pinned down by the reference.) */
    case ACL_INT4:
    case ACL_UINT1:
    case ACL_FLOAT6_E3M2:
    case ACL_FLOAT6_E2M3:
    case ACL_FLOAT4_E2M1:
    case ACL_FLOAT4_E1M2:
        return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16:
    case ACL_UINT16:
        return 2;
    case ACL_FLOAT:
    case ACL_INT32:
    case ACL_UINT32:
    case ACL_COMPLEX32:
        return 4;
    case ACL_INT64:
    case ACL_UINT64:
    case ACL_DOUBLE:
    case ACL_COMPLEX64:
        return 8;
    case ACL_COMPLEX128:
        return 16;
    case ACL_STRING: /* variable length: no element size */
        return 0;
    default:
        (void)core_error("aclDataTypeSize", ACL_ERROR_INVALID_PARAM,
                         "argument 'dataType' (%d) is not a supported aclDataType", (int)dataType);
        return 0;
    }
}

/* ------------------------------------------------------------ float16 */

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float misc_bf16_to_float(uint16_t b)
{
    return f32_from_bits((uint32_t)b << 16);
}

uint16_t misc_float_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    }
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* Exact binary16 -> binary32 (every half value is representable). */
MOCK_HIDDEN float misc_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign; /* +-0 */
        } else {
            /* subnormal: man * 2^-24; normalise */
            uint32_t e = 0;
            while ((man & 0x400u) == 0) {
                man <<= 1;
                e++;
            }
            /* value = 1.xxx * 2^(-14 - e) */
            bits = sign | ((127u - 14u - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf / nan (payload kept) */
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    return f32_from_bits(bits);
}

/* binary32 -> binary16, round to nearest, ties to even; overflow -> inf;
 * NaN stays NaN (quiet, top payload bits kept). */
MOCK_HIDDEN uint16_t misc_float_to_half(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        if (a > 0x7f800000u) {
            return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
        }
        return (uint16_t)(sign | 0x7c00u);
    }
    if (a >= 0x477ff000u) { /* >= 65520: rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (a >= 0x38800000u) { /* >= 2^-14: normal half */
        uint32_t odd = (a >> 13) & 1u;
        a += 0xfffu + odd;
        return (uint16_t)(sign | (uint16_t)((a - 0x38000000u) >> 13));
    }
    /* subnormal or zero: let the FPU round (RNE) at the 2^-24 quantum by
     * adding 0.5 (whose ulp is exactly 2^-24); the ulps above 0.5 are the
     * half mantissa (0x400 = smallest normal, which is still encoded right). */
    volatile float sum = f32_from_bits(a) + 0.5f;
    return (uint16_t)(sign | (uint16_t)(f32_bits(sum) - 0x3f000000u));
}

float aclFloat16ToFloat(aclFloat16 value)
{
    UTIL_ENTER_OR("aclFloat16ToFloat", 0.0f);
    return misc_half_to_float((uint16_t)value);
}

aclFloat16 aclFloatToFloat16(float value)
{
    UTIL_ENTER_OR("aclFloatToFloat16", (aclFloat16)0);
    return (aclFloat16)misc_float_to_half(value);
}

/* ------------------------------------------------------------ aclDataBuffer */

#define DATA_BUFFER_MAGIC 0x61636c4442756652ULL

struct aclDataBuffer {
    uint64_t magic;
    void *data;
    size_t size;
};

static mock_handle_set g_buffers = MOCK_HANDLE_SET_INIT(MOCK_LOCK_DATA_BUFFERS);

aclDataBuffer *aclCreateDataBuffer(void *data, size_t size)
{
    /* CANN accepts any (data, size) pair, including NULL/0 (empty tensors). */
    UTIL_ENTER_OR("aclCreateDataBuffer", NULL);
    struct aclDataBuffer *b = (struct aclDataBuffer *)malloc(sizeof *b);
    if (b == NULL) {
        (void)core_error("aclCreateDataBuffer", ACL_ERROR_BAD_ALLOC,
                         "out of host memory allocating an aclDataBuffer");
        return NULL;
    }
    b->magic = DATA_BUFFER_MAGIC;
    b->data = data;
    b->size = size;
    if (!core_handle_set_add(&g_buffers, b)) {
        free(b);
        (void)core_error("aclCreateDataBuffer", ACL_ERROR_BAD_ALLOC,
                         "out of host memory registering an aclDataBuffer");
        return NULL;
    }
    return b;
}

aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer)
{
    static const char fn[] = "aclDestroyDataBuffer";
    MOCK_REQUIRE_NONNULL(fn, dataBuffer);
    MOCK_ENTER(fn);
    if (!core_handle_set_remove(&g_buffers, dataBuffer)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'dataBuffer' (%p) is not a live aclDataBuffer "
                          "(never created or already destroyed)",
                          (const void *)dataBuffer);
    }
    struct aclDataBuffer *b = (struct aclDataBuffer *)(uintptr_t)dataBuffer;
    b->magic = 0;
    free(b);
    return ACL_SUCCESS;
}

aclError aclUpdateDataBuffer(aclDataBuffer *dataBuffer, void *data, size_t size)
{
    static const char fn[] = "aclUpdateDataBuffer";
    MOCK_REQUIRE_NONNULL(fn, dataBuffer);
    MOCK_ENTER(fn);
    core_handle_set_lock(&g_buffers);
    bool live = core_handle_set_contains_locked(&g_buffers, dataBuffer);
    if (live) {
        dataBuffer->data = data;
        dataBuffer->size = size;
    }
    core_handle_set_unlock(&g_buffers);
    if (!live) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'dataBuffer' (%p) is not a live aclDataBuffer", (void *)dataBuffer);
    }
    return ACL_SUCCESS;
}

/* Reads one field of a live buffer; false (error recorded) otherwise. */
static bool buffer_read(const char *fn, const aclDataBuffer *dataBuffer, void **data, size_t *size)
{
    if (dataBuffer == NULL) {
        (void)core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataBuffer' is NULL");
        return false;
    }
    core_handle_set_lock(&g_buffers);
    bool live = core_handle_set_contains_locked(&g_buffers, dataBuffer);
    if (live) {
        *data = dataBuffer->data;
        *size = dataBuffer->size;
    }
    core_handle_set_unlock(&g_buffers);
    if (!live) {
        (void)core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataBuffer' (%p) is not a live aclDataBuffer",
                         (const void *)dataBuffer);
    }
    return live;
}

void *aclGetDataBufferAddr(const aclDataBuffer *dataBuffer)
{
    void *data = NULL;
    size_t size = 0;
    UTIL_ENTER_OR("aclGetDataBufferAddr", NULL);
    if (!buffer_read("aclGetDataBufferAddr", dataBuffer, &data, &size)) {
        return NULL;
    }
    return data;
}

uint32_t aclGetDataBufferSize(const aclDataBuffer *dataBuffer)
{
    void *data = NULL;
    size_t size = 0;
    UTIL_ENTER_OR("aclGetDataBufferSize", 0);
    if (!buffer_read("aclGetDataBufferSize", dataBuffer, &data, &size)) {
        return 0;
    }
    /* deprecated 32-bit accessor: the size is truncated like CANN's cast */
    return (uint32_t)size;
}

size_t aclGetDataBufferSizeV2(const aclDataBuffer *dataBuffer)
{
    void *data = NULL;
    size_t size = 0;
    UTIL_ENTER_OR("aclGetDataBufferSizeV2", 0);
    if (!buffer_read("aclGetDataBufferSizeV2", dataBuffer, &data, &size)) {
        return 0;
    }
    return size;
}
