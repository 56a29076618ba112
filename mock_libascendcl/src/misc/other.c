/*
 * other.c - the "other" group (aclAppLog, the aclrtReduceAsync built-in task,
 * aclrtCacheLastTaskOpInfo/ExtendInfo; the other built-in task, aclrtRandomNumAsync,
 * is in random.c) and aclrtProfTrace (profiling group, but exported by
 * libascendcl.so per the TSV `lib` column).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "misc/misc_private.h"

/* ================================================================ aclAppLog */

/* ASCEND_GLOBAL_LOG_LEVEL: 0 debug, 1 info, 2 warning, 3 error (default),
 * 4 null (nothing). Read at every call so that a program (or test) may change
 * it at run time; the cost is a getenv, negligible next to formatting. */
static int app_log_threshold(void)
{
    const char *v = getenv("ASCEND_GLOBAL_LOG_LEVEL");
    if (v == NULL || v[0] < '0' || v[0] > '4' || v[1] != '\0') {
        return ACL_ERROR;
    }
    return v[0] - '0';
}

/* CANN writes application logs to ~/ascend/log unless
 * ASCEND_SLOG_PRINT_TO_STDOUT=1 asks for the console; the mock keeps no log
 * files, so without it the message is dropped. Console output goes to stderr
 * so that it never mixes with a program's own stdout. */
static bool app_log_to_console(void)
{
    const char *v = getenv("ASCEND_SLOG_PRINT_TO_STDOUT");
    return v != NULL && strcmp(v, "1") == 0;
}

void aclAppLog(aclLogLevel logLevel, const char *func, const char *file, uint32_t line, const char *fmt, ...)
{
    static const char *const names[] = { "DEBUG", "INFO", "WARNING", "ERROR" };
    if (fmt == NULL || (int)logLevel < ACL_DEBUG || (int)logLevel > ACL_ERROR) {
        return;
    }
    int threshold = app_log_threshold();
    if (threshold == 4 || (int)logLevel < threshold || !app_log_to_console()) {
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) {
        snprintf(msg, sizeof msg, "(unformattable log message)");
    }
    const char *base = file != NULL ? strrchr(file, '/') : NULL;
    base = base != NULL ? base + 1 : (file != NULL ? file : "?");

    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    char stamp[64];
    snprintf(stamp, sizeof stamp, "%04d-%02d-%02d-%02d:%02d:%02d.%03ld.%03ld", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, (ts.tv_nsec / 1000L) % 1000L);
    /* one fprintf call: lines from concurrent threads do not interleave */
    fprintf(stderr, "[%s] APP(%ld,%s):%s [%s:%u]%ld %s: %s\n", names[logLevel], (long)getpid(),
            program_invocation_short_name, stamp, base, line, (long)syscall(SYS_gettid),
            func != NULL ? func : "?", msg);
}

/* ========================================================== aclrtReduceAsync */

typedef struct reduce_task {
    void *dst;
    const void *src;
    size_t count; /* bytes */
    int kind;
    int type;
    bool saturate;
} reduce_task;

/* Combines two finite-or-not floats; in saturation mode an overflow to
 * infinity from finite inputs is clamped to the largest finite value `max`. */
static inline float reduce_f(int kind, float a, float b, bool saturate, float max)
{
    float r;
    switch (kind) {
    case ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX: r = (a >= b || b != b) ? a : b; break;
    case ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN: r = (a <= b || b != b) ? a : b; break;
    default: r = a + b; break;
    }
    if (saturate && (r > max || r < -max) && a - a == 0.0f && b - b == 0.0f) {
        r = r > 0 ? max : -max;
    }
    return r;
}

#define REDUCE_INT(T, UT)                                                        \
    do {                                                                         \
        T *d = (T *)t->dst;                                                      \
        const T *s = (const T *)t->src;                                          \
        size_t n = t->count / sizeof(T);                                         \
        for (size_t i = 0; i < n; i++) {                                         \
            T a = d[i], b = s[i];                                                \
            switch (t->kind) {                                                   \
            case ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX: d[i] = a > b ? a : b; break;  \
            case ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN: d[i] = a < b ? a : b; break;  \
            default: d[i] = (T)(UT)((UT)a + (UT)b); break; /* wraps */           \
            }                                                                    \
        }                                                                        \
    } while (0)

static aclError run_reduce(void *arg)
{
    reduce_task *t = (reduce_task *)arg;
    mem_access_begin(t->src, t->count);
    mem_access_begin(t->dst, t->count);
    int type = t->type;
    if (t->kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL) {
        /* mock choice (the reference does not define EQUAL): dst becomes equal to src */
        memmove(t->dst, t->src, t->count);
        type = -1; /* nothing more to do */
    }
    switch (type) {
    case ACL_FLOAT: {
        float *d = (float *)t->dst;
        const float *s = (const float *)t->src;
        size_t n = t->count / sizeof(float);
        for (size_t i = 0; i < n; i++) {
            d[i] = reduce_f(t->kind, d[i], s[i], t->saturate, 3.40282347e+38f);
        }
        break;
    }
    case ACL_FLOAT16:
    case ACL_BF16: {
        uint16_t *d = (uint16_t *)t->dst;
        const uint16_t *s = (const uint16_t *)t->src;
        size_t n = t->count / sizeof(uint16_t);
        bool half = t->type == ACL_FLOAT16;
        for (size_t i = 0; i < n; i++) {
            float a = half ? misc_half_to_float(d[i]) : misc_bf16_to_float(d[i]);
            float b = half ? misc_half_to_float(s[i]) : misc_bf16_to_float(s[i]);
            float r = reduce_f(t->kind, a, b, false, 0.0f);
            uint16_t out = half ? misc_float_to_half(r) : misc_float_to_bf16(r);
            if (t->saturate && (out & 0x7fffu) == (half ? 0x7c00u : 0x7f80u) && a - a == 0.0f && b - b == 0.0f) {
                out = (uint16_t)((out & 0x8000u) | (half ? 0x7bffu : 0x7f7fu)); /* largest finite */
            }
            d[i] = out;
        }
        break;
    }
    case ACL_INT8: REDUCE_INT(int8_t, uint8_t); break;
    case ACL_INT16: REDUCE_INT(int16_t, uint16_t); break;
    case ACL_INT32: REDUCE_INT(int32_t, uint32_t); break;
    case ACL_UINT32: REDUCE_INT(uint32_t, uint32_t); break;
    default: break; /* validated at enqueue (or EQUAL, done above) */
    }
    mem_access_end(t->dst, t->count);
    mem_access_end(t->src, t->count);
    return ACL_SUCCESS;
}

/* The kinds and data types each product supports (ENUM#aclrtReduceKind,
 * EXE#aclrtReduceAsync): 310P and 910 only SUM; 950 int8/16/32, uint32, fp16, fp32,
 * bf16; A3/A2 the same without uint32; 310B int8/16/32, fp16, fp32; 310P fp32, fp16,
 * int16; 910 fp32. Another product's kind or type is ACL_ERROR_RT_FEATURE_NOT_SUPPORT. */
static aclError reduce_supported(const char *fn, int kind, int type)
{
    core_soc_family soc = core_soc_family_get();
    const char *name = core_config_get()->soc_name;
    if ((soc == CORE_SOC_310P || soc == CORE_SOC_910) && kind != ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "%s supports only the SUM reduce (kind %d)", name,
                          kind);
    }
    bool ok;
    switch (soc) {
    case CORE_SOC_950PR:
    case CORE_SOC_950DT: ok = true; break;
    case CORE_SOC_310B: ok = type != ACL_UINT32 && type != ACL_BF16; break;
    case CORE_SOC_310P: ok = type == ACL_FLOAT || type == ACL_FLOAT16 || type == ACL_INT16; break;
    case CORE_SOC_910: ok = type == ACL_FLOAT; break;
    default: ok = type != ACL_UINT32; break; /* A2, A3 */
    }
    if (!ok) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "%s does not reduce data type %d", name, type);
    }
    return ACL_SUCCESS;
}

/* Checks that [ptr, ptr+len) lies in one device allocation of `device` (EXE#aclrtReduceAsync:
 * dst, src and the stream are on the same device). */
static aclError check_device_range(const char *fn, const char *name, const void *ptr, size_t len, int32_t device)
{
    mock_mem_info mi;
    if (!mem_lookup(ptr, &mi) || mi.kind != MOCK_MEM_DEVICE) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument '%s' (%p) is not device memory", name, ptr);
    }
    if (mi.device >= 0 && mi.device != device) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument '%s' (%p) is memory of device %d, but the stream is on device %d", name, ptr,
                          mi.device, device);
    }
    size_t off = (size_t)((uintptr_t)ptr - mi.base);
    if (len > mi.size - off) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'count' (%zu bytes) exceeds the %zu bytes left in the allocation at '%s'", len,
                          mi.size - off, name);
    }
    return ACL_SUCCESS;
}

aclError aclrtReduceAsync(void *dst, const void *src, uint64_t count, aclrtReduceKind kind, aclDataType type,
                          aclrtStream stream, void *reserve)
{
    static const char fn[] = "aclrtReduceAsync";
    MOCK_REQUIRE_NONNULL(fn, dst);
    MOCK_REQUIRE_NONNULL(fn, src);
    if (reserve != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'reserve' must be NULL");
    }
    int k = (int)kind;
    if (k != ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM && k != ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX &&
        k != ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN && k != ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'kind' (%d) is not an aclrtReduceKind (SUM=10, MAX=11, MIN=12, EQUAL=13)", k);
    }
    int ty = (int)type;
    size_t esize;
    switch (ty) {
    case ACL_INT8: esize = 1; break;
    case ACL_INT16:
    case ACL_FLOAT16:
    case ACL_BF16: esize = 2; break;
    case ACL_INT32:
    case ACL_UINT32:
    case ACL_FLOAT: esize = 4; break;
    default:
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'type' (%d) is not supported by reduce (int8, int16, int32, uint32, float16, "
                          "bf16, float)",
                          ty);
    }
    aclError rc = reduce_supported(fn, k, ty);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (count % esize != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'count' (%llu bytes) is not a multiple of the element size %zu",
                          (unsigned long long)count, esize);
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (count == 0) {
        return ACL_SUCCESS;
    }
    if (count > SIZE_MAX) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'count' is too large");
    }
    if ((rc = check_device_range(fn, "dst", dst, (size_t)count, stream_device(s))) != ACL_SUCCESS ||
        (rc = check_device_range(fn, "src", src, (size_t)count, stream_device(s))) != ACL_SUCCESS) {
        return rc;
    }
    reduce_task *t = (reduce_task *)malloc(sizeof *t);
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    t->dst = dst;
    t->src = src;
    t->count = (size_t)count;
    t->kind = k;
    t->type = ty;
    t->saturate = misc_device_sat_mode(stream_device(s)) == ACL_RT_OVERFLOW_MODE_SATURATION;
    /* an operator for the diagnostics: reads src, reads and writes dst */
    mock_access acc[2] = {{.ptr = src, .size = (size_t)count, .mode = MOCK_ACCESS_READ, .dtype = ty},
                          {.ptr = dst, .size = (size_t)count, .mode = MOCK_ACCESS_READ | MOCK_ACCESS_WRITE, .dtype = ty}};
    mock_task_desc desc = {.kind = MOCK_TASK_KERNEL, .name = fn, .bytes = 2 * (uint64_t)count, .peer_device = -1,
                           .access = acc, .naccess = 2};
    rc = stream_enqueue_desc(s, run_reduce, t, free, &desc);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the task (stream failed or being destroyed)");
    }
    return ACL_SUCCESS;
}

/* ============================================================ aclrtProfTrace */

aclError aclrtProfTrace(void *userdata, int32_t length, aclrtStream stream)
{
    static const char fn[] = "aclrtProfTrace";
    MOCK_REQUIRE_NONNULL(fn, userdata);
    if (length <= 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'length' (%d) must be positive", (int)length);
    }
    /* a stream-ordered marker: the profiler shows it on the stream's track */
    return misc_enqueue_noop(fn, stream, MOCK_TASK_MARKER);
}
