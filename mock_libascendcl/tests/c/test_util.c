/* test_util.c - datatype_util group: aclDataTypeSize, fp16 conversions, aclDataBuffer. */
/* the deprecated aclGetDataBufferSize is tested on purpose */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static float bits_to_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* m * 2^e for a normal power of two (no libm needed) */
static float scaled(float m, int e)
{
    return m * bits_to_float((uint32_t)(e + 127) << 23);
}

static void test_datatype_size(void)
{
    static const struct { int type; size_t size; } table[] = {
        {ACL_FLOAT, 4}, {ACL_FLOAT16, 2}, {ACL_INT8, 1}, {ACL_INT32, 4}, {ACL_UINT8, 1},
        {ACL_INT16, 2}, {ACL_UINT16, 2}, {ACL_UINT32, 4}, {ACL_INT64, 8}, {ACL_UINT64, 8},
        {ACL_DOUBLE, 8}, {ACL_BOOL, 1}, {ACL_STRING, 0}, {ACL_COMPLEX64, 8}, {ACL_COMPLEX128, 16},
        {ACL_BF16, 2}, {ACL_INT4, 1}, {ACL_UINT1, 1}, {ACL_COMPLEX32, 4}, {ACL_HIFLOAT8, 1},
        {ACL_FLOAT8_E5M2, 1}, {ACL_FLOAT8_E4M3FN, 1}, {ACL_FLOAT8_E8M0, 1}, {ACL_FLOAT6_E3M2, 1},
        {ACL_FLOAT6_E2M3, 1}, {ACL_FLOAT4_E2M1, 1}, {ACL_FLOAT4_E1M2, 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        CHECK_EQ(aclDataTypeSize((aclDataType)table[i].type), table[i].size);
    }
    /* unknown / undefined types -> 0 with a recent-error message */
    static const int bad[] = {ACL_DT_UNDEFINED, 5, 14, 15, 18, 26, 28, 31, 32, 42, 1000, -7};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        (void)aclGetRecentErrMsg();
        CHECK_EQ(aclDataTypeSize((aclDataType)bad[i]), 0);
        CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclDataTypeSize");
    }
}

static void test_fp16_known_values(void)
{
    CHECK_EQ(aclFloatToFloat16(0.0f), 0x0000);
    CHECK_EQ(aclFloatToFloat16(-0.0f), 0x8000);
    CHECK_EQ(aclFloatToFloat16(1.0f), 0x3c00);
    CHECK_EQ(aclFloatToFloat16(-2.0f), 0xc000);
    CHECK_EQ(aclFloatToFloat16(0.5f), 0x3800);
    CHECK_EQ(aclFloatToFloat16(65504.0f), 0x7bff);     /* largest finite */
    CHECK_EQ(aclFloatToFloat16(65519.996f), 0x7bff);   /* just below the rounding point */
    CHECK_EQ(aclFloatToFloat16(65520.0f), 0x7c00);     /* tie rounds to even = infinity */
    CHECK_EQ(aclFloatToFloat16(1e10f), 0x7c00);
    CHECK_EQ(aclFloatToFloat16(-1e10f), 0xfc00);
    CHECK_EQ(aclFloatToFloat16(INFINITY), 0x7c00);
    CHECK_EQ(aclFloatToFloat16(-INFINITY), 0xfc00);
    aclFloat16 n = aclFloatToFloat16(NAN);
    CHECK_EQ(n & 0x7c00, 0x7c00);
    CHECK_NE(n & 0x03ff, 0);
    CHECK_EQ(aclFloatToFloat16(bits_to_float(0x7f800001u)) & 0x7c00, 0x7c00); /* signalling NaN stays NaN */
    CHECK_NE(aclFloatToFloat16(bits_to_float(0x7f800001u)) & 0x03ff, 0);
    /* subnormals and ties to even */
    CHECK_EQ(aclFloatToFloat16(scaled(1.0f, -24)), 0x0001);        /* smallest subnormal */
    CHECK_EQ(aclFloatToFloat16(scaled(1.0f, -25)), 0x0000);        /* half of it: tie -> even (0) */
    CHECK_EQ(aclFloatToFloat16(scaled(1.5f, -25)), 0x0001);        /* above the tie */
    CHECK_EQ(aclFloatToFloat16(scaled(3.0f, -25)), 0x0002);        /* 1.5 ulp: tie -> even (2) */
    CHECK_EQ(aclFloatToFloat16(scaled(5.0f, -25)), 0x0002);        /* 2.5 ulp: tie -> even (2) */
    CHECK_EQ(aclFloatToFloat16(scaled(1023.0f, -24)), 0x03ff);     /* largest subnormal */
    CHECK_EQ(aclFloatToFloat16(scaled(1.0f, -14)), 0x0400);        /* smallest normal */
    CHECK_EQ(aclFloatToFloat16(scaled(2047.0f, -25)), 0x0400);     /* rounds up into the normals */
    CHECK_EQ(aclFloatToFloat16(1.0f + scaled(1.0f, -11)), 0x3c00); /* tie at 1.0: even */
    CHECK_EQ(aclFloatToFloat16(1.0f + scaled(3.0f, -11)), 0x3c02); /* tie at 1+2^-10: even */
    CHECK_EQ(aclFloatToFloat16(scaled(1.0f, -30)), 0x0000);        /* underflow to zero */
    CHECK_EQ(aclFloatToFloat16(-scaled(1.0f, -30)), 0x8000);

    CHECK(aclFloat16ToFloat(0x3c00) == 1.0f);
    CHECK(aclFloat16ToFloat(0x7bff) == 65504.0f);
    CHECK(aclFloat16ToFloat(0x0001) == scaled(1.0f, -24));
    CHECK(aclFloat16ToFloat(0x03ff) == scaled(1023.0f, -24));
    CHECK(aclFloat16ToFloat(0x8000) == 0.0f && signbit(aclFloat16ToFloat(0x8000)));
    CHECK(isinf(aclFloat16ToFloat(0x7c00)) && aclFloat16ToFloat(0x7c00) > 0);
    CHECK(isinf(aclFloat16ToFloat(0xfc00)) && aclFloat16ToFloat(0xfc00) < 0);
    CHECK(isnan(aclFloat16ToFloat(0x7e00)));
    CHECK(isnan(aclFloat16ToFloat(0xfc01)));
}

/* Every half value converts to float and back to itself (NaNs stay NaN). */
static void test_fp16_roundtrip_exhaustive(void)
{
    int bad = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = aclFloat16ToFloat((aclFloat16)h);
        aclFloat16 back = aclFloatToFloat16(f);
        bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
        if (is_nan) {
            if (!isnan(f) || (back & 0x7c00) != 0x7c00 || (back & 0x3ff) == 0 || (back & 0x8000) != (h & 0x8000)) {
                bad++;
            }
        } else if (back != h) {
            bad++;
        }
    }
    CHECK_EQ(bad, 0);
}

/* Round-to-nearest-even against a double-precision reference on many floats. */
static void test_fp16_rne_property(void)
{
    uint64_t state = 0x9e3779b97f4a7c15ULL;
    int bad = 0;
    for (int i = 0; i < 400000; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        /* floats of magnitude up to ~2^17, covering subnormal halves too */
        uint32_t bits = (uint32_t)state;
        uint32_t exp = 100u + (uint32_t)((state >> 40) % 44u); /* 2^-27 .. 2^16 */
        bits = (bits & 0x807fffffu) | (exp << 23);
        float f = bits_to_float(bits);
        aclFloat16 h = aclFloatToFloat16(f);
        double hv = (double)aclFloat16ToFloat(h);
        double err = __builtin_fabs(hv - (double)f);
        /* neighbours (same sign direction) */
        uint16_t mag = h & 0x7fff;
        double up = mag < 0x7c00 ? __builtin_fabs((double)aclFloat16ToFloat((aclFloat16)((h & 0x8000) | (mag + 1)))) : INFINITY;
        double dn = mag > 0 ? __builtin_fabs((double)aclFloat16ToFloat((aclFloat16)((h & 0x8000) | (mag - 1)))) : 0.0;
        double af = __builtin_fabs((double)f);
        double eu = __builtin_fabs(up - af), ed = __builtin_fabs(dn - af);
        if (mag == 0x7c00) {
            /* overflowed: |f| must be >= 65520 */
            if (af < 65520.0) {
                bad++;
            }
            continue;
        }
        if (err > eu || err > ed) {
            bad++;
        } else if ((err == eu && mag < 0x7bff) || (err == ed && mag > 0)) {
            if (mag & 1) { /* a tie must pick the even mantissa */
                bad++;
            }
        }
    }
    CHECK_EQ(bad, 0);
}

static void test_data_buffer(void)
{
    char storage[64];
    aclDataBuffer *b = aclCreateDataBuffer(storage, sizeof storage);
    CHECK(b != NULL);
    CHECK(aclGetDataBufferAddr(b) == storage);
    CHECK_EQ(aclGetDataBufferSizeV2(b), sizeof storage);
    CHECK_EQ(aclGetDataBufferSize(b), sizeof storage);
    CHECK_OK(aclUpdateDataBuffer(b, storage + 8, 16));
    CHECK(aclGetDataBufferAddr(b) == storage + 8);
    CHECK_EQ(aclGetDataBufferSizeV2(b), 16);
    /* the deprecated 32-bit size truncates */
    CHECK_OK(aclUpdateDataBuffer(b, storage, ((size_t)1 << 32) + 5));
    CHECK_EQ(aclGetDataBufferSize(b), 5);
    CHECK_EQ(aclGetDataBufferSizeV2(b), ((size_t)1 << 32) + 5);
    CHECK_OK(aclDestroyDataBuffer(b));

    /* empty buffers are legal */
    aclDataBuffer *e = aclCreateDataBuffer(NULL, 0);
    CHECK(e != NULL);
    CHECK(aclGetDataBufferAddr(e) == NULL);
    CHECK_EQ(aclGetDataBufferSizeV2(e), 0);
    CHECK_OK(aclDestroyDataBuffer(e));
}

static void test_data_buffer_errors(void)
{
    (void)aclGetRecentErrMsg();
    CHECK_EQ(aclDestroyDataBuffer(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "dataBuffer");
    CHECK_EQ(aclUpdateDataBuffer(NULL, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK(aclGetDataBufferAddr(NULL) == NULL);
    CHECK_EQ(aclGetDataBufferSize(NULL), 0);
    CHECK_EQ(aclGetDataBufferSizeV2(NULL), 0);

    /* garbage and destroyed handles are recognised, never dereferenced */
    uint64_t junk[4] = {1, 2, 3, 4};
    aclDataBuffer *garbage = (aclDataBuffer *)(void *)junk;
    CHECK_EQ(aclDestroyDataBuffer(garbage), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclUpdateDataBuffer(garbage, junk, 8), ACL_ERROR_INVALID_PARAM);
    CHECK(aclGetDataBufferAddr(garbage) == NULL);
    CHECK_EQ(aclGetDataBufferSizeV2((aclDataBuffer *)(uintptr_t)0x10), 0);
    CHECK_EQ(junk[0], 1);

    aclDataBuffer *b = aclCreateDataBuffer(junk, 8);
    CHECK_OK(aclDestroyDataBuffer(b));
    (void)aclGetRecentErrMsg();
    CHECK_EQ(aclDestroyDataBuffer(b), ACL_ERROR_INVALID_PARAM); /* double destroy */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclDestroyDataBuffer");
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
}

static void test_many_buffers(void)
{
    enum { N = 5000 };
    static aclDataBuffer *bufs[N];
    static char data[N];
    for (int i = 0; i < N; i++) {
        bufs[i] = aclCreateDataBuffer(&data[i], (size_t)i);
    }
    int bad = 0;
    for (int i = 0; i < N; i += 2) {
        if (aclDestroyDataBuffer(bufs[i]) != ACL_SUCCESS) bad++;
    }
    for (int i = 1; i < N; i += 2) {
        if (aclGetDataBufferAddr(bufs[i]) != &data[i] || aclGetDataBufferSizeV2(bufs[i]) != (size_t)i) bad++;
    }
    for (int i = 1; i < N; i += 2) {
        if (aclDestroyDataBuffer(bufs[i]) != ACL_SUCCESS) bad++;
    }
    CHECK_EQ(bad, 0);
}

/* Concurrent create/update/read/destroy from several threads (run under TSAN too). */
static void *buffer_churn(void *arg)
{
    uintptr_t bad = 0;
    char *base = (char *)arg;
    for (int i = 0; i < 2000; i++) {
        aclDataBuffer *b = aclCreateDataBuffer(base + (i % 16), (size_t)i);
        if (b == NULL) {
            bad++;
            continue;
        }
        if (aclGetDataBufferSizeV2(b) != (size_t)i) bad++;
        if (aclUpdateDataBuffer(b, base, 7) != ACL_SUCCESS) bad++;
        if (aclGetDataBufferAddr(b) != base) bad++;
        if (aclDestroyDataBuffer(b) != ACL_SUCCESS) bad++;
    }
    return (void *)bad;
}

static void test_buffers_threads(void)
{
    static char areas[4][16];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK_EQ(pthread_create(&t[i], NULL, buffer_churn, areas[i]), 0);
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        CHECK(r == NULL);
    }
}

static void test_fault_injection(void)
{
    CHECK_OK(aclmockInjectFault("aclCreateDataBuffer", 1, ACL_ERROR_BAD_ALLOC));
    CHECK(aclCreateDataBuffer(NULL, 0) == NULL);
    aclDataBuffer *b = aclCreateDataBuffer(NULL, 0);
    CHECK(b != NULL);
    CHECK_OK(aclmockInjectFault("aclDestroyDataBuffer", 1, ACL_ERROR_INVALID_PARAM));
    CHECK_EQ(aclDestroyDataBuffer(b), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclDestroyDataBuffer(b)); /* the injected failure had no effect */
    aclmockClearFaults();
}

int main(void)
{
    RUN_TEST(test_datatype_size);
    RUN_TEST(test_fp16_known_values);
    RUN_TEST(test_fp16_roundtrip_exhaustive);
    RUN_TEST(test_fp16_rne_property);
    RUN_TEST(test_data_buffer);
    RUN_TEST(test_data_buffer_errors);
    RUN_TEST(test_many_buffers);
    RUN_TEST(test_buffers_threads);
    RUN_TEST(test_fault_injection);
    return TEST_REPORT();
}
