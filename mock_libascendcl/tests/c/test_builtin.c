/*
 * test_builtin.c - the built-in tasks that need no user binary (acl_next_semantics.md
 * §5.1 aclrtReduceAsync, §5.2 aclrtRandomNumAsync; mock README "Built-in tasks").
 * The basic reduce values and argument checks are in test_other.c; here: the
 * dev-guide accumulation, EQUAL, round-to-nearest-even of fp16/bf16, the per-product
 * kinds and types, and the random distributions, determinism and counter. The
 * per-product cases run in a child process per SoC (KERNEL_SOC_CASE).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static aclrtStream g_s;

static void *dev(size_t n)
{
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, n, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(p, n, 0, n));
    return p;
}

static void put(void *d, const void *h, size_t n)
{
    CHECK_OK(aclrtMemcpy(d, n, h, n, ACL_MEMCPY_HOST_TO_DEVICE));
}

static void get(void *h, const void *d, size_t n)
{
    CHECK_OK(aclrtMemcpy(h, n, d, n, ACL_MEMCPY_DEVICE_TO_HOST));
}

/* ================================================================ reduce */

static void test_reduce_accumulates(void)
{
    /* G-SYS#系统任务: dst {1,2,3,4} SUM src {1,2,3,4} gives {2,4,6,8} */
    int32_t a[4] = {1, 2, 3, 4}, r[4];
    int32_t *d = dev(sizeof a), *x = dev(sizeof a);
    put(d, a, sizeof a);
    put(x, a, sizeof a);
    CHECK_OK(aclrtReduceAsync(d, x, sizeof a, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT32, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    get(r, d, sizeof r);
    CHECK(r[0] == 2 && r[1] == 4 && r[2] == 6 && r[3] == 8);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(x));
}

static void test_reduce_equal(void)
{
    /* mock choice: EQUAL makes dst equal to src, bit for bit (NaN payloads too) */
    uint32_t a[4] = {0x3f800000u, 0x7fc01234u, 0x80000000u, 7}, b[4] = {1, 2, 3, 4}, r[4];
    uint32_t *d = dev(sizeof a), *x = dev(sizeof a);
    put(d, b, sizeof b);
    put(x, a, sizeof a);
    CHECK_OK(aclrtReduceAsync(d, x, sizeof a, ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL, ACL_FLOAT, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    get(r, d, sizeof r);
    CHECK(memcmp(r, a, sizeof a) == 0);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(x));
}

static void test_reduce_rounding(void)
{
    /* fp16: 2048 + 1 is a tie between 2048 and 2050 -> even (2048); 2048 + 3 -> 2052 */
    aclFloat16 ha[2] = {aclFloatToFloat16(2048.0f), aclFloatToFloat16(2048.0f)};
    aclFloat16 hb[2] = {aclFloatToFloat16(1.0f), aclFloatToFloat16(3.0f)}, hr[2];
    uint16_t *d = dev(16), *x = dev(16);
    put(d, ha, sizeof ha);
    put(x, hb, sizeof hb);
    CHECK_OK(aclrtReduceAsync(d, x, sizeof ha, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT16, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    get(hr, d, sizeof hr);
    CHECK(aclFloat16ToFloat(hr[0]) == 2048.0f);
    CHECK(aclFloat16ToFloat(hr[1]) == 2052.0f);
    /* bf16: 256 + 1 ties to 256, 256 + 3 to 260; MAX ignores a NaN operand */
    uint16_t ba[3] = {0x4380 /* 256 */, 0x4380, 0x3f80 /* 1 */}, bb[3] = {0x3f80 /* 1 */, 0x4040 /* 3 */, 0x7fc0}, br[3];
    put(d, ba, sizeof ba);
    put(x, bb, sizeof bb);
    CHECK_OK(aclrtReduceAsync(d, x, 4, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_BF16, g_s, NULL));
    CHECK_OK(aclrtReduceAsync((uint8_t *)d + 4, (uint8_t *)x + 4, 2, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX, ACL_BF16, g_s,
                              NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    get(br, d, sizeof br);
    CHECK_EQ(br[0], 0x4380);
    CHECK_EQ(br[1], 0x4382); /* 260 */
    CHECK_EQ(br[2], 0x3f80);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(x));
}

static void test_reduce_products_default(void)
{
    /* Atlas A2: no uint32 (EXE#aclrtReduceAsync) */
    void *d = dev(16), *x = dev(16);
    CHECK_EQ(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_UINT32, g_s, NULL),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(x));
}

/* ================================================================ random */

typedef struct rng_call {
    aclrtRandomNumTaskInfo info;
    void *result;
    uint64_t *counter;
} rng_call;

static void para(aclrtRandomParaInfo *p, const void *v, uint8_t size)
{
    memset(p, 0, sizeof *p);
    memcpy(p->valueOrAddr, v, size);
    p->size = size;
}

static void para_addr(aclrtRandomParaInfo *p, const void *addr, uint8_t size)
{
    memset(p, 0, sizeof *p);
    p->isAddr = 1;
    memcpy(p->valueOrAddr, &addr, sizeof addr);
    p->size = size;
}

/* A task of `n` values of `type` (element size `es`) with seed 1234. */
static void rng_init(rng_call *c, aclDataType type, size_t es, aclrtRandomNumFuncType f, uint64_t n)
{
    memset(c, 0, sizeof *c);
    c->info.dataType = type;
    c->info.randomNumFuncParaInfo.funcType = f;
    size_t bytes = f == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK ? (size_t)(n + 7) / 8 : (size_t)n * es;
    c->result = dev(bytes ? bytes : 8);
    c->counter = dev(8);
    c->info.randomResultAddr = c->result;
    c->info.randomCounterAddr = c->counter;
    uint64_t seed = 1234;
    para(&c->info.randomSeed, &seed, 8);
    para(&c->info.randomNum, &n, 8);
}

static void rng_free(rng_call *c)
{
    CHECK_OK(aclrtFree(c->result));
    CHECK_OK(aclrtFree(c->counter));
}

#define N_UNI 4096u
#define N_NORM 20000u

static void test_random_uniform_and_counter(void)
{
    rng_call c;
    rng_init(&c, ACL_FLOAT, 4, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, N_UNI);
    float lo = -1.0f, hi = 2.0f;
    para(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min, &lo, 4);
    para(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max, &hi, 4);
    static float a[N_UNI], b[N_UNI], again[N_UNI];
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    get(a, c.result, sizeof a);
    uint64_t ctr = 0;
    get(&ctr, c.counter, 8);
    CHECK_EQ(ctr, N_UNI); /* the counter advances by the values drawn */
    bool in_range = true;
    double sum = 0;
    for (uint32_t i = 0; i < N_UNI; i++) {
        in_range = in_range && a[i] >= lo && a[i] < hi;
        sum += a[i];
    }
    CHECK(in_range);
    CHECK(fabs(sum / N_UNI - 0.5) < 0.05);
    /* the next task continues the sequence; resetting the counter repeats it */
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    get(b, c.result, sizeof b);
    CHECK(memcmp(a, b, sizeof a) != 0);
    get(&ctr, c.counter, 8);
    CHECK_EQ(ctr, 2 * N_UNI);
    CHECK_OK(aclrtMemset(c.counter, 8, 0, 8));
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    get(again, c.result, sizeof again);
    CHECK(memcmp(a, again, sizeof a) == 0); /* deterministic per seed and counter */
    /* another seed, another sequence */
    CHECK_OK(aclrtMemset(c.counter, 8, 0, 8));
    uint32_t seed = 99;
    para(&c.info.randomSeed, &seed, 4);
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    get(b, c.result, sizeof b);
    CHECK(memcmp(a, b, sizeof a) != 0);
    rng_free(&c);

    /* integers: every value of [10, 20) appears, nothing else */
    rng_init(&c, ACL_INT32, 4, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, 1000);
    int32_t ilo = 10, ihi = 20;
    para(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min, &ilo, 4);
    para(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max, &ihi, 4);
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    int32_t iv[1000];
    get(iv, c.result, sizeof iv);
    int seen[10] = {0};
    bool ok = true;
    for (int i = 0; i < 1000; i++) {
        ok = ok && iv[i] >= 10 && iv[i] < 20;
        if (iv[i] >= 10 && iv[i] < 20) {
            seen[iv[i] - 10]++;
        }
    }
    CHECK(ok);
    for (int k = 0; k < 10; k++) {
        CHECK_GT(seen[k], 50);
    }
    rng_free(&c);

    /* uint64 with a negative-looking (huge) range, bf16 uniform */
    rng_init(&c, ACL_UINT64, 8, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, 64);
    uint64_t ulo = 1ull << 63, uhi = (1ull << 63) + 1000;
    para(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min, &ulo, 8);
    para(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max, &uhi, 8);
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    uint64_t uv[64];
    get(uv, c.result, sizeof uv);
    ok = true;
    for (int i = 0; i < 64; i++) {
        ok = ok && uv[i] >= ulo && uv[i] < uhi;
    }
    CHECK(ok);
    rng_free(&c);
    rng_init(&c, ACL_BF16, 2, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, 256);
    uint16_t blo = 0x3f80 /* 1 */, bhi = 0x4000 /* 2 */;
    para(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min, &blo, 2);
    para(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max, &bhi, 2);
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    uint16_t bv[256];
    get(bv, c.result, sizeof bv);
    ok = true;
    for (int i = 0; i < 256; i++) {
        ok = ok && bv[i] >= 0x3f80 && bv[i] < 0x4000; /* positive bf16 order like integers */
    }
    CHECK(ok);
    rng_free(&c);
}

static void test_random_normal(void)
{
    static float v[N_NORM];
    for (int trunc = 0; trunc < 2; trunc++) {
        rng_call c;
        rng_init(&c, ACL_FLOAT, 4,
                 trunc ? ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS : ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS,
                 N_NORM);
        float mean = 5.0f, sd = 2.0f;
        para(&c.info.randomNumFuncParaInfo.paramInfo.normalDisInfo.mean, &mean, 4);
        para(&c.info.randomNumFuncParaInfo.paramInfo.normalDisInfo.stddev, &sd, 4);
        CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
        CHECK_OK(aclrtSynchronizeStream(g_s));
        get(v, c.result, sizeof v);
        double s = 0, s2 = 0;
        bool within = true;
        for (uint32_t i = 0; i < N_NORM; i++) {
            s += v[i];
            s2 += (double)v[i] * v[i];
            within = within && v[i] >= 1.0f && v[i] <= 9.0f;
        }
        double m = s / N_NORM, var = s2 / N_NORM - m * m;
        CHECK(fabs(m - 5.0) < 0.05);
        /* a normal: sd 2; truncated at 2 sd: sd 2 * 0.8796 */
        CHECK(fabs(sqrt(var) - (trunc ? 1.7593 : 2.0)) < 0.05);
        if (trunc) {
            CHECK(within);
        }
        rng_free(&c);
    }
    /* fp16 output */
    rng_call c;
    rng_init(&c, ACL_FLOAT16, 2, ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, 1000);
    aclFloat16 mean = aclFloatToFloat16(-3.0f), sd = aclFloatToFloat16(0.5f);
    para(&c.info.randomNumFuncParaInfo.paramInfo.normalDisInfo.mean, &mean, 2);
    para(&c.info.randomNumFuncParaInfo.paramInfo.normalDisInfo.stddev, &sd, 2);
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    aclFloat16 hv[1000];
    get(hv, c.result, sizeof hv);
    double s = 0;
    for (int i = 0; i < 1000; i++) {
        s += aclFloat16ToFloat(hv[i]);
    }
    CHECK(fabs(s / 1000 + 3.0) < 0.1);
    rng_free(&c);
}

static void test_random_dropout_and_addresses(void)
{
    rng_call c;
    rng_init(&c, ACL_FLOAT, 4, ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK, 8000);
    float ratio = 0.25f;
    para(&c.info.randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation, &ratio, 4);
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    uint8_t bits[1000];
    get(bits, c.result, sizeof bits);
    int ones = 0;
    for (int i = 0; i < 1000; i++) {
        ones += __builtin_popcount(bits[i]);
    }
    CHECK(ones > 5800 && ones < 6200); /* kept with probability 0.75 */
    ratio = 0.0f;
    para(&c.info.randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation, &ratio, 4);
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    get(bits, c.result, sizeof bits);
    CHECK(bits[0] == 0xff && bits[999] == 0xff);
    rng_free(&c);

    /* seed, count and parameters by device address, read when the task runs */
    rng_init(&c, ACL_INT64, 8, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, 16);
    int64_t *pv = dev(32);
    int64_t lohi[2] = {-5, 5};
    uint64_t sn[2] = {1234, 16};
    put(pv, lohi, sizeof lohi);
    put(pv + 2, sn, sizeof sn);
    para_addr(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min, pv, 8);
    para_addr(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max, pv + 1, 8);
    para_addr(&c.info.randomSeed, pv + 2, 8);
    para_addr(&c.info.randomNum, pv + 3, 8);
    c.info.randomParaAddr = dev(64);
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    int64_t out[16];
    get(out, c.result, sizeof out);
    bool ok = true;
    for (int i = 0; i < 16; i++) {
        ok = ok && out[i] >= -5 && out[i] < 5;
    }
    CHECK(ok);
    /* a count read at run time that does not fit the result fails the task */
    uint64_t big = 1000;
    put(pv + 3, &big, 8);
    CHECK_OK(aclrtRandomNumAsync(&c.info, g_s, NULL));
    CHECK_EQ(aclrtSynchronizeStream(g_s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(c.info.randomParaAddr));
    CHECK_OK(aclrtFree(pv));
    rng_free(&c);
}

static void test_random_errors(void)
{
    rng_call c;
    rng_init(&c, ACL_FLOAT, 4, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, 16);
    float lo = 0.0f, hi = 1.0f;
    para(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min, &lo, 4);
    para(&c.info.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max, &hi, 4);
    aclrtRandomNumTaskInfo i = c.info;
    CHECK_EQ(aclrtRandomNumAsync(NULL, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, &i), ACL_ERROR_INVALID_PARAM); /* reserve */
    i.dataType = ACL_DOUBLE;
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    i.randomNumFuncParaInfo.funcType = (aclrtRandomNumFuncType)4;
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    i.dataType = ACL_INT32;
    i.randomNumFuncParaInfo.funcType = ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS; /* needs a float type */
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    i.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min.size = 2; /* N = 4 for FLOAT */
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    i.randomSeed.isAddr = 2;
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    i.randomSeed.size = 2;
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    para(&i.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max, &lo, 4); /* [0, 0) */
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    i.randomNumFuncParaInfo.funcType = ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK;
    float r = 1.5f;
    para(&i.randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation, &r, 4);
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    i.randomNumFuncParaInfo.funcType = ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS;
    float neg = -1.0f;
    para(&i.randomNumFuncParaInfo.paramInfo.normalDisInfo.stddev, &neg, 4);
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    float host[16];
    i.randomResultAddr = host;
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_RT_PARAM_INVALID);
    i = c.info;
    uint64_t many = 100;
    para(&i.randomNum, &many, 8); /* 400 bytes into a 64-byte result */
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_RT_PARAM_INVALID);
    i = c.info;
    i.randomCounterAddr = NULL;
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    i.rsv[3] = 1;
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_INVALID_PARAM);
    i = c.info;
    para_addr(&i.randomSeed, host, 8); /* an address that is not device memory */
    CHECK_EQ(aclrtRandomNumAsync(&i, g_s, NULL), ACL_ERROR_RT_PARAM_INVALID);
    rng_free(&c);
}

/* ============================================================ other products */

static void case_950(void)
{
    uint32_t a[2] = {4000000000u, 5}, b[2] = {1000000000u, 6}, r[2];
    uint32_t *d = dev(8), *x = dev(8);
    put(d, a, 8);
    put(x, b, 8);
    CHECK_OK(aclrtReduceAsync(d, x, 8, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_UINT32, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    get(r, d, 8);
    CHECK_EQ(r[0], 705032704u); /* wraps */
    CHECK_EQ(r[1], 11);
    aclrtRandomNumTaskInfo info;
    memset(&info, 0, sizeof info);
    CHECK_EQ(aclrtRandomNumAsync(&info, g_s, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT); /* A3 and A2 only */
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(x));
}

static void case_310p(void)
{
    void *d = dev(16), *x = dev(16);
    CHECK_EQ(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX, ACL_FLOAT, g_s, NULL),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT); /* SUM only */
    CHECK_EQ(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT32, g_s, NULL),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT16, g_s, NULL));
    CHECK_OK(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT16, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(x));
}

static void case_910(void)
{
    void *d = dev(16), *x = dev(16);
    CHECK_EQ(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT16, g_s, NULL),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT); /* fp32 only */
    CHECK_OK(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(x));
}

static void case_310b(void)
{
    void *d = dev(16), *x = dev(16);
    CHECK_EQ(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_BF16, g_s, NULL),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN, ACL_INT8, g_s, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(x));
}

static const struct { const char *name, *soc; void (*fn)(void); } k_cases[] = {
    {"950", "Ascend950PR_9599", case_950},
    {"310P", "Ascend310P3", case_310p},
    {"910", "Ascend910ProB", case_910},
    {"310B", "Ascend310B1", case_310b},
};

static void setup(const char *soc)
{
    if (soc != NULL) {
        mt_mock_env("ASCEND_MOCK_SOC_NAME", soc, (const char *)NULL);
    } else {
        mt_mock_env((const char *)NULL);
    }
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtCreateStream(&g_s));
}

static void teardown(void)
{
    CHECK_OK(aclrtDestroyStream(g_s));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *which = getenv("KERNEL_SOC_CASE");
    for (size_t i = 0; which != NULL && i < sizeof k_cases / sizeof k_cases[0]; i++) {
        if (strcmp(which, k_cases[i].name) == 0) {
            setup(k_cases[i].soc);
            printf("--- SoC %s\n", k_cases[i].soc);
            RUN_TEST(k_cases[i].fn);
            teardown();
            return TEST_REPORT();
        }
    }
    if (which != NULL) {
        return 1;
    }
    setup(NULL);
    RUN_TEST(test_reduce_accumulates);
    RUN_TEST(test_reduce_equal);
    RUN_TEST(test_reduce_rounding);
    RUN_TEST(test_reduce_products_default);
    RUN_TEST(test_random_uniform_and_counter);
    RUN_TEST(test_random_normal);
    RUN_TEST(test_random_dropout_and_addresses);
    RUN_TEST(test_random_errors);
    teardown();
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("KERNEL_SOC_CASE", k_cases[i].name, 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return TEST_REPORT();
}
