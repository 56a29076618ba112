/*
 * random.c - aclrtRandomNumAsync, the built-in random-number task
 * (acl_next_semantics.md §5.2; EXE#aclrtRandomNumAsync, ST#aclrtRandomNumTaskInfo).
 *
 * A stream task fills `randomResultAddr` with `randomNum` values of `dataType` drawn
 * from the distribution of `randomNumFuncParaInfo`. Deterministic per seed and counter
 * (mock choice of the generator: Philox4x32-10, the counter-based generator of cuRAND
 * and PyTorch): value i of a task uses Philox(key = seed, counter = C + i), where C is
 * the 64-bit little-endian value at `randomCounterAddr` when the task runs, and the task
 * writes C + randomNum back there, so consecutive tasks continue the sequence (the
 * counter advances). Parameters given inline (isAddr 0) are taken at the call; given by
 * address (isAddr 1) they are read from device memory when the task runs.
 *
 * Distributions (mock choices where the reference is silent):
 *   DROPOUT_BITMASK      one bit per value, 1 = kept, set with probability 1 - ratio
 *                        (bit i is bit i%8 of byte i/8); `ratio` of a float dataType
 *   UNIFORM_DIS          [min, max): integers min + (draw mod (max - min)), floats
 *                        min + u (max - min) with u in [0, 1) (24 random bits), rounded
 *                        to the dataType (a result rounded up to max becomes min)
 *   NORMAL_DIS           mean + stddev z, z from Box-Muller (float dataTypes)
 *   TRUNCATED_NORMAL_DIS the same, z redrawn until |z| <= 2 (two standard deviations)
 * Inline values take N bytes (2 for FLOAT16/BF16, 4 for 32-bit types, 8 for 64-bit ones;
 * `size` must say so); the seed and the count are unsigned integers of 4 or 8 bytes.
 * The optional `randomParaAddr` (device memory for the parameters) is checked, not used.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "misc/misc.h"
#include "misc/misc_private.h"

#define RNG_MAX_COUNT (1ull << 32) /* values per task */

/* ----------------------------------------------------------------- Philox */

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* Philox4x32-10 of counter (lo, hi, sub, 0) under key `seed`. */
static void philox(uint64_t seed, uint64_t ctr, uint32_t sub, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = sub, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* [0, 1) from 24 bits; (0, 1] from 24 bits */
static inline double unit(uint32_t x)
{
    return (double)(x >> 8) * (1.0 / 16777216.0);
}
static inline double unit_open0(uint32_t x)
{
    return ((double)(x >> 8) + 1.0) * (1.0 / 16777216.0);
}

/* ------------------------------------------------------------ data types */

typedef enum { RK_INT, RK_UINT, RK_FLOAT } rng_kind;

typedef struct rng_type {
    int type;
    size_t size;
    rng_kind kind;
} rng_type;

static bool type_of(int t, rng_type *out)
{
    switch (t) {
    case ACL_INT32: *out = (rng_type){t, 4, RK_INT}; return true;
    case ACL_INT64: *out = (rng_type){t, 8, RK_INT}; return true;
    case ACL_UINT32: *out = (rng_type){t, 4, RK_UINT}; return true;
    case ACL_UINT64: *out = (rng_type){t, 8, RK_UINT}; return true;
    case ACL_FLOAT16:
    case ACL_BF16: *out = (rng_type){t, 2, RK_FLOAT}; return true;
    case ACL_FLOAT: *out = (rng_type){t, 4, RK_FLOAT}; return true;
    default: return false;
    }
}

/* A parameter value: inline bytes, or a device address read at run time. */
typedef struct rng_param {
    bool by_addr;
    uint8_t bytes[8];
    const void *addr;
    uint8_t size;
} rng_param;

/* Little-endian bytes of a value as a double (floats) or integer (in *i / *u). */
static double as_double(const rng_type *t, const uint8_t *b)
{
    uint16_t h = (uint16_t)(b[0] | (b[1] << 8));
    if (t->type == ACL_FLOAT16) {
        return misc_half_to_float(h);
    }
    if (t->type == ACL_BF16) {
        return misc_bf16_to_float(h);
    }
    float f;
    memcpy(&f, b, 4);
    return f;
}

static int64_t as_int(const rng_type *t, const uint8_t *b)
{
    uint64_t u = 0;
    for (size_t i = 0; i < t->size; i++) {
        u |= (uint64_t)b[i] << (8 * i);
    }
    if (t->kind == RK_INT && t->size == 4) {
        return (int64_t)(int32_t)(uint32_t)u;
    }
    return (int64_t)u;
}

static uint64_t as_unsigned(const uint8_t *b, size_t size)
{
    uint64_t u = 0;
    for (size_t i = 0; i < size; i++) {
        u |= (uint64_t)b[i] << (8 * i);
    }
    return u;
}

static void store(const rng_type *t, uint8_t *dst, double f, uint64_t bits)
{
    switch (t->type) {
    case ACL_FLOAT16: {
        uint16_t h = misc_float_to_half((float)f);
        memcpy(dst, &h, 2);
        break;
    }
    case ACL_BF16: {
        uint16_t h = misc_float_to_bf16((float)f);
        memcpy(dst, &h, 2);
        break;
    }
    case ACL_FLOAT: {
        float x = (float)f;
        memcpy(dst, &x, 4);
        break;
    }
    default:
        memcpy(dst, &bits, t->size); /* little-endian host */
        break;
    }
}

/* --------------------------------------------------------------- the task */

typedef struct rng_task {
    rng_type t;
    int func;
    rng_param p0, p1;     /* ratio / min,max / mean,stddev */
    rng_param seed, num;
    uint8_t *result;
    uint64_t *counter;
} rng_task;

/* Reads an address parameter (device memory, checked at enqueue) into p->bytes. */
static void fetch(rng_param *p)
{
    if (!p->by_addr) {
        return;
    }
    mem_access_begin(p->addr, p->size);
    memcpy(p->bytes, p->addr, p->size);
    mem_access_end(p->addr, p->size);
}

static double normal(uint64_t seed, uint64_t ctr, bool truncated)
{
    for (uint32_t sub = 0;; sub++) {
        uint32_t r[4];
        philox(seed, ctr, sub, r);
        double z = sqrt(-2.0 * log(unit_open0(r[0]))) * cos(6.283185307179586 * unit(r[1]));
        if (!truncated || fabs(z) <= 2.0) {
            return z;
        }
    }
}

static aclError run_random(void *arg)
{
    rng_task *k = arg;
    rng_param p0 = k->p0, p1 = k->p1, seed = k->seed, num = k->num;
    fetch(&p0);
    fetch(&p1);
    fetch(&seed);
    fetch(&num);
    uint64_t s = as_unsigned(seed.bytes, seed.size);
    uint64_t n = as_unsigned(num.bytes, num.size);
    size_t bytes = k->func == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK ? (size_t)((n + 7) / 8) : (size_t)n * k->t.size;
    mock_mem_info mi;
    if (n > RNG_MAX_COUNT || !mem_lookup(k->result, &mi) || bytes > mi.size - (size_t)((uintptr_t)k->result - mi.base)) {
        return ACL_ERROR_RT_PARAM_INVALID; /* a count read at run time that does not fit */
    }
    mem_access_begin(k->counter, 8);
    uint64_t c0;
    memcpy(&c0, k->counter, 8);
    mem_access_end(k->counter, 8);
    mem_access_begin(k->result, bytes);
    uint8_t *out = k->result;
    if (k->func == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK) {
        double ratio = as_double(&k->t, p0.bytes);
        memset(out, 0, bytes);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t r[4];
            philox(s, c0 + i, 0, r);
            if (unit(r[0]) >= ratio) {
                out[i / 8] |= (uint8_t)(1u << (i % 8));
            }
        }
    } else if (k->func == ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS) {
        for (uint64_t i = 0; i < n; i++) {
            uint32_t r[4];
            philox(s, c0 + i, 0, r);
            uint64_t draw = ((uint64_t)r[1] << 32) | r[0];
            if (k->t.kind == RK_FLOAT) {
                double lo = as_double(&k->t, p0.bytes), hi = as_double(&k->t, p1.bytes);
                double v = lo + unit(r[0]) * (hi - lo);
                uint8_t tmp[4];
                store(&k->t, tmp, v, 0);
                if (as_double(&k->t, tmp) >= hi) {
                    v = lo; /* rounded up to the excluded bound */
                }
                store(&k->t, out + i * k->t.size, v, 0);
            } else {
                int64_t lo = as_int(&k->t, p0.bytes), hi = as_int(&k->t, p1.bytes);
                uint64_t span = k->t.kind == RK_UINT ? (uint64_t)hi - (uint64_t)lo : (uint64_t)(hi - lo);
                uint64_t v = (uint64_t)lo + (span != 0 ? draw % span : 0);
                store(&k->t, out + i * k->t.size, 0, v);
            }
        }
    } else {
        bool trunc = k->func == ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS;
        double mean = as_double(&k->t, p0.bytes), sd = as_double(&k->t, p1.bytes);
        for (uint64_t i = 0; i < n; i++) {
            store(&k->t, out + i * k->t.size, mean + sd * normal(s, c0 + i, trunc), 0);
        }
    }
    mem_access_end(k->result, bytes);
    uint64_t c1 = c0 + n; /* the counter advances */
    mem_access_begin(k->counter, 8);
    memcpy(k->counter, &c1, 8);
    mem_access_end(k->counter, 8);
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------- the call */

/* Device memory of `len` bytes at p (recorded error naming `what`). */
static aclError device_range(const char *fn, const char *what, const void *p, size_t len)
{
    mock_mem_info mi;
    if (p == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "'%s' is NULL", what);
    }
    if (!mem_lookup(p, &mi) || mi.kind != MOCK_MEM_DEVICE) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "'%s' (%p) is not device memory", what, p);
    }
    if (len > mi.size - (size_t)((uintptr_t)p - mi.base)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "'%s' (%p) has %zu bytes left, %zu are needed", what, p,
                          mi.size - (size_t)((uintptr_t)p - mi.base), len);
    }
    return ACL_SUCCESS;
}

/* ST#aclrtRandomParaInfo: isAddr 0 -> `size` inline bytes; 1 -> an 8-byte device address. */
static aclError param(const char *fn, const char *what, const aclrtRandomParaInfo *in, size_t need_min,
                      size_t need_max, rng_param *out)
{
    memset(out, 0, sizeof *out);
    if (in->isAddr > 1) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s.isAddr is %u (0 or 1)", what, in->isAddr);
    }
    if (in->size != need_min && in->size != need_max) {
        if (need_min == need_max) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s.size is %u bytes (must be %zu for the dataType)", what,
                              in->size, need_min);
        }
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s.size is %u bytes (must be %zu or %zu)", what, in->size,
                          need_min, need_max);
    }
    out->size = in->size;
    if (in->isAddr == 0) {
        memcpy(out->bytes, in->valueOrAddr, in->size);
        return ACL_SUCCESS;
    }
    out->by_addr = true;
    memcpy(&out->addr, in->valueOrAddr, sizeof out->addr);
    return device_range(fn, what, out->addr, in->size);
}

aclError aclrtRandomNumAsync(const aclrtRandomNumTaskInfo *taskInfo, const aclrtStream stream, void *reserve)
{
    static const char fn[] = "aclrtRandomNumAsync";
    MOCK_REQUIRE_NONNULL(fn, taskInfo);
    if (reserve != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'reserve' must be NULL");
    }
    core_soc_family soc = core_soc_family_get();
    if (soc != CORE_SOC_A2 && soc != CORE_SOC_A3) {
        /* EXE#aclrtRandomNumAsync: Atlas A3 and A2 only */
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "random number tasks are only supported on Atlas A2 "
                          "and A3, not on %s", core_config_get()->soc_name);
    }
    rng_task k;
    memset(&k, 0, sizeof k);
    if (!type_of((int)taskInfo->dataType, &k.t)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "taskInfo->dataType %d is not INT32, INT64, UINT32, UINT64, BF16, FLOAT16 or FLOAT",
                          (int)taskInfo->dataType);
    }
    const aclrtRandomNumFuncParaInfo *fp = &taskInfo->randomNumFuncParaInfo;
    k.func = (int)fp->funcType;
    if (k.func < ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK || k.func > ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "funcType %d is not an aclrtRandomNumFuncType (0..3)", k.func);
    }
    if (k.func != ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS && k.t.kind != RK_FLOAT) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "funcType %d needs a floating-point dataType (FLOAT16, BF16 or FLOAT) for its parameters",
                          k.func);
    }
    for (size_t i = 0; i < sizeof taskInfo->rsv; i++) {
        if (taskInfo->rsv[i] != 0) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "taskInfo->rsv must be 0");
        }
    }
    aclError rc;
    size_t n = k.t.size;
    switch (k.func) {
    case ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK:
        rc = param(fn, "dropoutRation", &fp->paramInfo.dropoutBitmaskInfo.dropoutRation, n, n, &k.p0);
        break;
    case ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS:
        if ((rc = param(fn, "min", &fp->paramInfo.uniformDisInfo.min, n, n, &k.p0)) == ACL_SUCCESS) {
            rc = param(fn, "max", &fp->paramInfo.uniformDisInfo.max, n, n, &k.p1);
        }
        break;
    default:
        if ((rc = param(fn, "mean", &fp->paramInfo.normalDisInfo.mean, n, n, &k.p0)) == ACL_SUCCESS) {
            rc = param(fn, "stddev", &fp->paramInfo.normalDisInfo.stddev, n, n, &k.p1);
        }
        break;
    }
    if (rc == ACL_SUCCESS) {
        rc = param(fn, "randomSeed", &taskInfo->randomSeed, 4, 8, &k.seed);
    }
    if (rc == ACL_SUCCESS) {
        rc = param(fn, "randomNum", &taskInfo->randomNum, 4, 8, &k.num);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* inline values are checked now, the others when the task runs */
    if (k.func == ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS && !k.p0.by_addr && !k.p1.by_addr) {
        bool empty = k.t.kind == RK_FLOAT ? !(as_double(&k.t, k.p0.bytes) < as_double(&k.t, k.p1.bytes))
                     : k.t.kind == RK_UINT ? as_unsigned(k.p0.bytes, n) >= as_unsigned(k.p1.bytes, n)
                                           : as_int(&k.t, k.p0.bytes) >= as_int(&k.t, k.p1.bytes);
        if (empty) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "the uniform range [min, max) is empty");
        }
    }
    if (k.func == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK && !k.p0.by_addr) {
        double r = as_double(&k.t, k.p0.bytes);
        if (!(r >= 0.0 && r <= 1.0)) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "dropoutRation %g is not in [0, 1]", r);
        }
    }
    if ((k.func == ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS || k.func == ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS) &&
        !k.p1.by_addr && !(as_double(&k.t, k.p1.bytes) >= 0.0)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "stddev %g is negative", as_double(&k.t, k.p1.bytes));
    }
    uint64_t count = k.num.by_addr ? 0 : as_unsigned(k.num.bytes, k.num.size);
    if (count > RNG_MAX_COUNT) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "randomNum %llu is larger than 2^32", (unsigned long long)count);
    }
    size_t bytes = k.func == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK ? (size_t)((count + 7) / 8) : (size_t)count * n;
    k.result = taskInfo->randomResultAddr;
    k.counter = taskInfo->randomCounterAddr;
    if ((rc = device_range(fn, "randomResultAddr", k.result, bytes ? bytes : 1)) != ACL_SUCCESS ||
        (rc = device_range(fn, "randomCounterAddr", k.counter, 8)) != ACL_SUCCESS ||
        (taskInfo->randomParaAddr != NULL &&
         (rc = device_range(fn, "randomParaAddr", taskInfo->randomParaAddr, 16)) != ACL_SUCCESS)) {
        return rc;
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    if ((rc = stream_resolve(fn, stream, &s)) != ACL_SUCCESS) {
        return rc;
    }
    rng_task *t = malloc(sizeof *t);
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    *t = k;
    /* an operator for the diagnostics (timing model, profiler, race sanitizer, dump):
     * writes the result (to the end of its allocation when the count is read at run
     * time), reads and writes the counter, reads the parameters given by address */
    mock_access acc[6];
    size_t nacc = 0;
    if (core_observing()) {
        size_t rbytes = bytes;
        mock_mem_info mi;
        if (k.num.by_addr && mem_lookup(k.result, &mi)) {
            rbytes = mi.size - (size_t)((uintptr_t)k.result - mi.base);
        }
        acc[nacc++] = (mock_access){.ptr = k.result, .size = rbytes ? rbytes : 1, .mode = MOCK_ACCESS_WRITE,
                                    .dtype = k.func == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK ? ACL_UINT8
                                                                                                   : k.t.type};
        acc[nacc++] = (mock_access){.ptr = k.counter, .size = 8, .mode = MOCK_ACCESS_READ | MOCK_ACCESS_WRITE,
                                    .dtype = ACL_UINT64};
        const rng_param *byaddr[4] = {&k.p0, &k.p1, &k.seed, &k.num};
        for (size_t i = 0; i < 4; i++) {
            if (byaddr[i]->by_addr) {
                acc[nacc++] = (mock_access){.ptr = byaddr[i]->addr, .size = byaddr[i]->size,
                                            .mode = MOCK_ACCESS_READ, .dtype = ACL_DT_UNDEFINED};
            }
        }
    }
    mock_task_desc desc = {.kind = MOCK_TASK_KERNEL, .name = fn, .bytes = bytes, .peer_device = -1,
                           .access = acc, .naccess = nacc};
    rc = stream_enqueue_desc(s, run_random, t, free, &desc);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the task (stream failed or being destroyed)");
    }
    return ACL_SUCCESS;
}
