/*
 * test_kernel.c - kernel binaries, host twins, argument lists and launches
 * (acl_next_semantics.md §1; mock README "Kernels and host twins").
 *
 * Uses twins.so (tests/kernels/twins.c, built by CMake into MOCK_TEST_KERNEL_DIR), twins
 * declared in this program (aclrtGetFuncBySymbol), twins registered at run time, and
 * a synthetic device ELF written by the test (ELF64 and ELF32, both byte orders).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_mock_kernel.h"
#include "mock_test.h"
#include "streams_util.h"

#define TWINS MOCK_TEST_KERNEL_DIR "/twins.so"

static aclrtStream g_s;
static char g_tmp[128];

/* The recent error message (reading it clears it: several checks on one message use
 * the copy kept in g_msg). */
static char g_msg[1024];
static const char *recent(void)
{
    const char *m = aclGetRecentErrMsg();
    snprintf(g_msg, sizeof g_msg, "%s", m != NULL ? m : "");
    return g_msg;
}

static void *dev_alloc(size_t n)
{
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, n, ACL_MEM_MALLOC_HUGE_FIRST));
    return p;
}

static void to_dev(void *d, const void *h, size_t n)
{
    CHECK_OK(aclrtMemcpy(d, n, h, n, ACL_MEMCPY_HOST_TO_DEVICE));
}

static void from_dev(void *h, const void *d, size_t n)
{
    CHECK_OK(aclrtMemcpy(h, n, d, n, ACL_MEMCPY_DEVICE_TO_HOST));
}

static aclrtBinHandle load_twins(void)
{
    aclrtBinHandle b = NULL;
    CHECK_OK(aclrtBinaryLoadFromFile(TWINS, NULL, &b));
    return b;
}

static aclrtFuncHandle func(aclrtBinHandle b, const char *name)
{
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtBinaryGetFunction(b, name, &f));
    return f;
}

static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static void write_all(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f != NULL) {
        CHECK_EQ(fwrite(data, 1, n, f), n);
        fclose(f);
    }
}

/* ------------------------------------------------------- a synthetic device ELF */

/* A relocatable object for a machine that is not the host (e_machine 0x3a4c), with
 * .text (three kernel symbols: vector_add, and the MIX pair scale_mix_aic /
 * scale_mix_aiv), .data (g_factor = 3.0f), .bss (g_counter, 8 bytes), .symtab,
 * .strtab, .shstrtab. Returns its size. */
typedef struct elf_w {
    uint8_t *p;
    bool le;
} elf_w;

static void put(elf_w *w, size_t off, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        w->p[off + i] = (uint8_t)(v >> (8 * (w->le ? i : n - 1 - i)));
    }
}

#define ELF_SYMS 7
static size_t build_elf(uint8_t *buf, size_t cap, bool is64, bool le)
{
    memset(buf, 0, cap);
    elf_w w = {buf, le};
    const char strtab[] = "\0vector_add\0scale_mix_aic\0scale_mix_aiv\0g_factor\0g_counter\0extern_fn\0";
    const char shstr[] = "\0.text\0.data\0.bss\0.symtab\0.strtab\0.shstrtab\0";
    size_t ehsize = is64 ? 64 : 52, shsize = is64 ? 64 : 40, symsize = is64 ? 24 : 16;
    size_t text = 0x100, data = text + 64, sym = data + 16, str = sym + ELF_SYMS * symsize;
    size_t shs = str + sizeof strtab, sh = (shs + sizeof shstr + 7) & ~(size_t)7, total = sh + 7 * shsize;
    if (total > cap) {
        return 0;
    }
    memcpy(buf, "\x7f" "ELF", 4);
    buf[4] = is64 ? 2 : 1;
    buf[5] = le ? 1 : 2;
    buf[6] = 1;
    put(&w, 16, 1, 2);      /* ET_REL */
    put(&w, 18, 0x3a4c, 2); /* not this host */
    put(&w, 20, 1, 4);
    put(&w, is64 ? 40 : 32, sh, is64 ? 8 : 4);
    put(&w, is64 ? 52 : 40, ehsize, 2);
    put(&w, is64 ? 58 : 46, shsize, 2);
    put(&w, is64 ? 60 : 48, 7, 2);
    put(&w, is64 ? 62 : 50, 6, 2);
    for (size_t i = 0; i < 64; i++) {
        buf[text + i] = (uint8_t)(0x90 + i);
    }
    float three = 3.0f;
    uint32_t bits;
    memcpy(&bits, &three, 4);
    put(&w, data, bits, 4);
    memcpy(buf + str, strtab, sizeof strtab);
    memcpy(buf + shs, shstr, sizeof shstr);
    /* symbols: name offset, type (FUNC 2 / OBJECT 1 / NOTYPE 0), section, value, size */
    static const struct { uint32_t name; uint8_t type; uint16_t shndx; uint64_t value, size; } syms[ELF_SYMS] = {
        {0, 0, 0, 0, 0},   {1, 2, 1, 0, 32},  {12, 2, 1, 32, 16}, {26, 2, 1, 48, 16},
        {40, 1, 2, 0, 4},  {49, 1, 3, 0, 8},  {59, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < ELF_SYMS; i++) {
        size_t o = sym + i * symsize;
        uint8_t info = i == 0 ? 0 : (uint8_t)((1u << 4) | syms[i].type); /* STB_GLOBAL */
        put(&w, o, syms[i].name, 4);
        if (is64) {
            buf[o + 4] = info;
            put(&w, o + 6, syms[i].shndx, 2);
            put(&w, o + 8, syms[i].value, 8);
            put(&w, o + 16, syms[i].size, 8);
        } else {
            put(&w, o + 4, syms[i].value, 4);
            put(&w, o + 8, syms[i].size, 4);
            buf[o + 12] = info;
            put(&w, o + 14, syms[i].shndx, 2);
        }
    }
    /* sections: name, type, offset, size, link, align, entsize */
    const struct { uint32_t name, type; size_t off, size; uint32_t link; uint64_t align, entsize; } secs[7] = {
        {0, 0, 0, 0, 0, 0, 0},
        {1, 1, text, 64, 0, 4, 0},
        {7, 1, data, 16, 0, 4, 0},
        {13, 8, 0, 32, 0, 8, 0}, /* NOBITS */
        {18, 2, sym, ELF_SYMS * symsize, 5, 8, symsize},
        {26, 3, str, sizeof strtab, 0, 1, 0},
        {34, 3, shs, sizeof shstr, 0, 1, 0},
    };
    for (size_t i = 0; i < 7; i++) {
        size_t o = sh + i * shsize;
        unsigned a = is64 ? 8 : 4;
        put(&w, o, secs[i].name, 4);
        put(&w, o + 4, secs[i].type, 4);
        put(&w, o + (is64 ? 24 : 16), secs[i].off, a);
        put(&w, o + (is64 ? 32 : 20), secs[i].size, a);
        put(&w, o + (is64 ? 40 : 24), secs[i].link, 4);
        put(&w, o + (is64 ? 48 : 32), secs[i].align, a);
        put(&w, o + (is64 ? 56 : 36), secs[i].entsize, a);
    }
    return total;
}

/* ------------------------------------------------------- twins of this program */

/* Writes the address its placeholder slot (argument 1) was patched with, and where
 * that memory lives (a test-only shortcut: twins do not call the runtime, but this
 * query takes no lock a running twin could hold). */
ACLMOCK_KERNEL(local_placeholder_addr, 0, ACLMOCK_PTR_OUT, ACLMOCK_PTR_IN)
{
    (void)userData;
    (void)blockIdx;
    (void)blockDim;
    uint64_t *out = ACLMOCK_ARG_AT(args, uint64_t *, 0);
    void *ph = ACLMOCK_ARG_AT(args, void *, 8);
    aclrtPtrAttributes attr;
    memset(&attr, 0, sizeof attr);
    out[0] = (uint64_t)(uintptr_t)ph;
    out[1] = aclrtPointerGetAttributes(ph, &attr) == ACL_SUCCESS ? (uint64_t)attr.location.type : 99u;
    return 0;
}

/* A registered twin of the device ELF's vector_add (the parameters described). */
static atomic_int g_reg_calls;
static int32_t reg_vector_add(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData)
{
    (void)blockDim;
    atomic_fetch_add(&g_reg_calls, 1);
    const float *x = ACLMOCK_ARG_AT(args, const float *, 0);
    const float *y = ACLMOCK_ARG_AT(args, const float *, 8);
    float *z = ACLMOCK_ARG_AT(args, float *, 16);
    uint32_t n = ACLMOCK_ARG_AT(args, uint32_t, 24);
    float bias = userData != NULL ? *(const float *)userData : 0.0f;
    for (uint32_t i = blockIdx; i < n; i += blockDim) {
        z[i] = x[i] + y[i] + bias;
    }
    return 0;
}

static const aclmockKernelParam k_vadd_params[] = {ACLMOCK_PTR_IN, ACLMOCK_PTR_IN, ACLMOCK_PTR_OUT,
                                                   ACLMOCK_VALUE(uint32_t)};

static aclmockKernelDesc vadd_desc(void *user)
{
    aclmockKernelDesc d;
    memset(&d, 0, sizeof d);
    d.version = ACLMOCK_KERNEL_DESC_VERSION;
    d.flags = ACLMOCK_KERNEL_BLOCKS_INDEPENDENT;
    d.name = "vector_add";
    d.fn = reg_vector_add;
    d.userData = user;
    d.numParams = 4;
    d.params = k_vadd_params;
    return d;
}

static int32_t noop_twin(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData)
{
    (void)args;
    (void)blockIdx;
    (void)blockDim;
    (void)userData;
    return 0;
}

/* ============================================================== loading */

static void test_load_errors(void)
{
    aclrtBinHandle b = NULL;
    CHECK_EQ(aclrtBinaryLoadFromFile(NULL, NULL, &b), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtBinaryLoadFromFile(TWINS, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    /* KRN#aclrtBinaryLoadFromFile: the path must be absolute */
    CHECK_EQ(aclrtBinaryLoadFromFile("twins.so", NULL, &b), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "absolute");
    char missing[200];
    snprintf(missing, sizeof missing, "%s/missing.o", g_tmp);
    CHECK_EQ(aclrtBinaryLoadFromFile(missing, NULL, &b), ACL_ERROR_INVALID_FILE);
    CHECK_STR_CONTAINS(recent(), "missing.o");
    char text[200];
    snprintf(text, sizeof text, "%s/text.o", g_tmp);
    write_all(text, "not an ELF file\n", 16);
    CHECK_EQ(aclrtBinaryLoadFromFile(text, NULL, &b), ACL_ERROR_PARSE_FILE);
    CHECK_STR_CONTAINS(recent(), "not an ELF file");
    CHECK_EQ(aclrtBinaryLoadFromFile(g_tmp, NULL, &b), ACL_ERROR_INVALID_FILE); /* a directory */

    aclrtBinaryLoadOption opt[2];
    memset(opt, 0, sizeof opt);
    aclrtBinaryLoadOptions opts = {NULL, 1};
    CHECK_EQ(aclrtBinaryLoadFromFile(TWINS, &opts, &b), ACL_ERROR_INVALID_PARAM);
    opts.options = opt;
    opt[0].type = (aclrtBinaryLoadOptionType)9;
    CHECK_EQ(aclrtBinaryLoadFromFile(TWINS, &opts, &b), ACL_ERROR_INVALID_PARAM);
    opt[0].type = ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD;
    opt[0].value.isLazyLoad = 2;
    CHECK_EQ(aclrtBinaryLoadFromFile(TWINS, &opts, &b), ACL_ERROR_INVALID_PARAM);
    opt[0].type = ACL_RT_BINARY_LOAD_OPT_MAGIC;
    opt[0].value.magic = 0x1234;
    CHECK_EQ(aclrtBinaryLoadFromFile(TWINS, &opts, &b), ACL_ERROR_INVALID_PARAM);
    /* AI CPU op-info JSON (modes 0, 1) is not simulated; mode 2 is for data only */
    opt[0].type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
    opt[0].value.cpuKernelMode = 1;
    CHECK_EQ(aclrtBinaryLoadFromFile(TWINS, &opts, &b), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    opt[0].value.cpuKernelMode = 2;
    CHECK_EQ(aclrtBinaryLoadFromFile(TWINS, &opts, &b), ACL_ERROR_RT_PARAM_INVALID);

    uint8_t byte = 0;
    CHECK_EQ(aclrtBinaryLoadFromData(NULL, 1, NULL, &b), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtBinaryLoadFromData(&byte, 0, NULL, &b), ACL_ERROR_INVALID_PARAM); /* KRN: length > 0 */
    CHECK_EQ(aclrtBinaryLoadFromData(&byte, 1, NULL, &b), ACL_ERROR_PARSE_FILE);
    /* KRN#aclrtBinaryLoadFromData, RTS-E/EE1017: from data the AI CPU mode must be 2 */
    opt[0].value.cpuKernelMode = 1;
    CHECK_EQ(aclrtBinaryLoadFromData(&byte, 1, &opts, &b), ACL_ERROR_RT_PARAM_INVALID);

    CHECK_EQ(aclrtCreateBinary(NULL, 4), NULL);
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCreateBinary(&byte, 0), NULL);
    CHECK_EQ(aclrtDestroyBinary(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDestroyBinary((aclrtBinary)&byte), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtBinaryLoad((aclrtBinary)&byte, &b), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtBinaryUnLoad((aclrtBinHandle)&byte), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtBinaryUnLoad(NULL), ACL_ERROR_INVALID_PARAM);
}

static void *load_without_context(void *arg)
{
    aclrtBinHandle b = NULL;
    *(aclError *)arg = aclrtBinaryLoadFromFile(TWINS, NULL, &b);
    return NULL;
}

static void test_load_needs_context(void)
{
    pthread_t t;
    aclError rc = 0;
    pthread_create(&t, NULL, load_without_context, &rc);
    pthread_join(t, NULL);
    CHECK_EQ(rc, ACL_ERROR_RT_CONTEXT_NULL);
}

/* ============================================================ host twins */

static void test_host_binary_functions(void)
{
    aclrtBinHandle b = load_twins();
    aclrtFuncHandle f = NULL;
    CHECK_EQ(aclrtBinaryGetFunction(b, "no_such_kernel", &f), ACL_ERROR_RT_SYMBOL_NOT_FOUND);
    CHECK_STR_CONTAINS(recent(), "no_such_kernel");
    CHECK_STR_CONTAINS(g_msg, "vector_add"); /* the message lists the kernels */
    CHECK_EQ(aclrtBinaryGetFunction(b, NULL, &f), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtBinaryGetFunction(NULL, "vector_add", &f), ACL_ERROR_INVALID_PARAM);
    aclrtFuncHandle va = func(b, "vector_add");
    CHECK(va == func(b, "vector_add")); /* one handle per name */
    aclrtBinHandle owner = NULL;
    CHECK_OK(aclrtFunctionGetBinary(va, &owner));
    CHECK(owner == b);

    char name[32];
    CHECK_OK(aclrtGetFunctionName(va, sizeof name, name));
    CHECK_STR_EQ(name, "vector_add");
    CHECK_EQ(aclrtGetFunctionName(va, 10, name), ACL_ERROR_INVALID_PARAM); /* 11 bytes needed */

    /* ENUM#aclrtFuncAttribute: the kernel type, the core ratio, the schedule mode */
    int64_t v = -1;
    CHECK_OK(aclrtGetFunctionAttribute(va, ACL_FUNC_ATTR_KERNEL_TYPE, &v));
    CHECK_EQ(v, ACL_KERNEL_TYPE_VECTOR);
    CHECK_OK(aclrtGetFunctionAttribute(func(b, "scale"), ACL_FUNC_ATTR_KERNEL_TYPE, &v));
    CHECK_EQ(v, ACL_KERNEL_TYPE_AICORE);
    CHECK_OK(aclrtGetFunctionAttribute(func(b, "returns"), ACL_FUNC_ATTR_KERNEL_TYPE, &v));
    CHECK_EQ(v, ACL_KERNEL_TYPE_CUBE);
    aclrtFuncHandle nothing = func(b, "nothing");
    CHECK_OK(aclrtGetFunctionAttribute(nothing, ACL_FUNC_ATTR_KERNEL_TYPE, &v));
    CHECK_EQ(v, ACL_KERNEL_TYPE_MIX);
    CHECK_OK(aclrtGetFunctionAttribute(nothing, ACL_FUNC_ATTR_KERNEL_SCHED_MODE, &v));
    CHECK_EQ(v, 1);
    CHECK_OK(aclrtGetFunctionAttribute(va, ACL_FUNC_ATTR_KERNEL_SCHED_MODE, &v));
    CHECK_EQ(v, 0);
    CHECK_OK(aclrtGetFunctionAttribute(nothing, ACL_FUNC_ATTR_KERNEL_RATIO, &v));
    CHECK_EQ((v >> 16) & 0xffff, 1); /* [1] cube share */
    CHECK_EQ(v & 0xffff, 2);         /* [0] vector share */
    CHECK_EQ(aclrtGetFunctionAttribute(va, (aclrtFuncAttribute)4, &v), ACL_ERROR_INVALID_PARAM);

    /* KRN#aclrtFunctionGetParamCount/Info: from the twin's description, 8-byte slots */
    size_t count = 0, off = 0, size = 0;
    CHECK_OK(aclrtFunctionGetParamCount(va, &count));
    CHECK_EQ(count, 4);
    for (size_t i = 0; i < 4; i++) {
        CHECK_OK(aclrtFunctionGetParamInfo(va, i, &off, &size));
        CHECK_EQ(off, 8 * i);
        CHECK_EQ(size, i == 3 ? 4 : 8);
    }
    CHECK_EQ(aclrtFunctionGetParamInfo(va, 4, &off, &size), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtFunctionGetParamCount(nothing, &count));
    CHECK_EQ(count, 0);
    CHECK_EQ(aclrtFunctionGetParamCount(func(b, "many_args"), &count), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_STR_CONTAINS(recent(), "does not describe its parameters");

    /* KRN#aclrtFunctionGetAvailDynUbufPerBlock: 0 for a non-SIMT kernel, flags 0 */
    size_t ub = 99;
    CHECK_OK(aclrtFunctionGetAvailDynUbufPerBlock(va, 0, &ub));
    CHECK_EQ(ub, 0);
    CHECK_OK(aclrtFunctionGetAvailDynUbufPerBlock(func(b, "launch_info"), 0, &ub));
    CHECK_EQ(ub, 192 * 1024); /* a SIMT kernel: the UB of a vector core */
    CHECK_EQ(aclrtFunctionGetAvailDynUbufPerBlock(va, 1, &ub), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtFunctionGetAvailDynUbufPerBlock(NULL, 0, &ub), ACL_ERROR_INVALID_PARAM);

    /* device copy, function addresses inside it */
    void *dev = NULL;
    size_t bsize = 0;
    CHECK_OK(aclrtBinaryGetDevAddress(b, &dev, &bsize));
    CHECK(dev != NULL);
    aclrtPtrAttributes attr;
    CHECK_OK(aclrtPointerGetAttributes(dev, &attr));
    CHECK_EQ(attr.location.type, ACL_MEM_LOCATION_TYPE_DEVICE);
    size_t fsize = 0;
    uint8_t *image = read_all(TWINS, &fsize);
    CHECK(image != NULL);
    CHECK_GE(bsize, fsize); /* the image, then room for its .bss */
    uint8_t *copy = malloc(fsize);
    from_dev(copy, dev, fsize);
    CHECK(image != NULL && memcmp(copy, image, fsize) == 0);
    free(copy);
    free(image);
    void *aic = NULL, *aiv = NULL;
    CHECK_OK(aclrtGetFunctionAddr(va, &aic, &aiv));
    CHECK(aic == NULL);                      /* a vector kernel */
    CHECK((uint8_t *)aiv > (uint8_t *)dev && (uint8_t *)aiv < (uint8_t *)dev + bsize);
    size_t aics = 1, aivs = 0;
    CHECK_OK(aclrtGetFunctionSize(va, &aics, &aivs));
    CHECK_EQ(aics, 0);
    CHECK_GT(aivs, 0);

    /* the object's own global: its host variable (the twins read it) */
    void *g = NULL;
    size_t gs = 0;
    CHECK_OK(aclrtBinaryGetGlobal(b, "twins_scale_factor", &g, &gs));
    CHECK_EQ(gs, sizeof(float));
    CHECK(g != NULL && *(float *)g == 2.0f);
    CHECK_OK(aclrtBinaryGetGlobal(b, "twins_scale_factor", NULL, &gs));
    CHECK_EQ(aclrtBinaryGetGlobal(b, "twins_scale_factor", NULL, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtBinaryGetGlobal(b, "no_such_global", &g, &gs), ACL_ERROR_RT_SYMBOL_NOT_FOUND);
    CHECK_STR_CONTAINS(recent(), "check the global name");
    CHECK_OK(aclrtBinaryUnLoad(b));
    /* handles die with the unload */
    CHECK_EQ(aclrtBinaryGetFunction(b, "vector_add", &f), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtGetFunctionName(va, sizeof name, name), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtBinaryUnLoad(b), ACL_ERROR_RT_PARAM_INVALID);
}

/* The same object from memory (a memfd) and through aclrtCreateBinary/aclrtBinaryLoad. */
static void test_host_binary_from_data(void)
{
    size_t n = 0;
    uint8_t *image = read_all(TWINS, &n);
    CHECK(image != NULL);
    aclrtBinHandle b = NULL;
    CHECK_OK(aclrtBinaryLoadFromData(image, n, NULL, &b));
    aclrtFuncHandle f = func(b, "scale");
    float h[4] = {1, 2, 3, 4};
    float *d = dev_alloc(sizeof h);
    to_dev(d, h, sizeof h);
    struct { float *x; float factor; uint32_t pad; uint64_t n; } a = {d, 1.5f, 0, 4};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 2, g_s, NULL, &a, sizeof a, NULL, 0));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    from_dev(h, d, sizeof h);
    CHECK(h[0] == 3.0f && h[3] == 12.0f); /* x * 1.5 * twins_scale_factor */
    CHECK_OK(aclrtBinaryUnLoad(b));

    aclrtBinary desc = aclrtCreateBinary(image, n);
    CHECK(desc != NULL);
    CHECK_OK(aclrtBinaryLoad(desc, &b));
    CHECK_OK(aclrtDestroyBinary(desc)); /* only the descriptor: the binary stays loaded */
    CHECK_EQ(aclrtDestroyBinary(desc), ACL_ERROR_RT_PARAM_INVALID);
    free(image);
    f = func(b, "scale");
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 1, g_s, NULL, &a, sizeof a, NULL, 0));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    from_dev(h, d, sizeof h);
    CHECK(h[0] == 9.0f);
    CHECK_OK(aclrtBinaryUnLoad(b));
    CHECK_OK(aclrtFree(d));
}

/* ============================================================ launches */

#define VN 1000u

typedef struct vadd_bufs {
    float hx[VN], hy[VN], hz[VN];
    float *x, *y, *z;
} vadd_bufs;

static void vadd_setup(vadd_bufs *v)
{
    for (uint32_t i = 0; i < VN; i++) {
        v->hx[i] = (float)i;
        v->hy[i] = (float)(2 * i + 1);
    }
    v->x = dev_alloc(sizeof v->hx);
    v->y = dev_alloc(sizeof v->hy);
    v->z = dev_alloc(sizeof v->hz);
    to_dev(v->x, v->hx, sizeof v->hx);
    to_dev(v->y, v->hy, sizeof v->hy);
    CHECK_OK(aclrtMemset(v->z, sizeof v->hz, 0, sizeof v->hz));
}

/* z == x + y + bias, then z cleared again */
static bool vadd_check(vadd_bufs *v, float bias)
{
    CHECK_OK(aclrtSynchronizeStream(g_s));
    from_dev(v->hz, v->z, sizeof v->hz);
    bool ok = true;
    for (uint32_t i = 0; i < VN; i++) {
        ok = ok && v->hz[i] == v->hx[i] + v->hy[i] + bias;
    }
    CHECK_OK(aclrtMemset(v->z, sizeof v->hz, 0, sizeof v->hz));
    return ok;
}

static void vadd_free(vadd_bufs *v)
{
    CHECK_OK(aclrtFree(v->x));
    CHECK_OK(aclrtFree(v->y));
    CHECK_OK(aclrtFree(v->z));
}

/* Every launch variant of KRN §1.5 runs the twin with the right arguments. */
static void test_launch_variants(void)
{
    vadd_bufs *v = calloc(1, sizeof *v);
    vadd_setup(v);
    uint32_t n = VN;
    aclrtBinHandle b = load_twins();
    aclrtFuncHandle f = func(b, "vector_add");

    /* WithConfig + an argument list */
    aclrtArgsHandle args = NULL;
    aclrtParamHandle p = NULL;
    CHECK_OK(aclrtKernelArgsInit(f, &args));
    CHECK_OK(aclrtKernelArgsAppend(args, &v->x, sizeof v->x, &p));
    CHECK_OK(aclrtKernelArgsAppend(args, &v->y, sizeof v->y, &p));
    CHECK_OK(aclrtKernelArgsAppend(args, &v->z, sizeof v->z, &p));
    CHECK_OK(aclrtKernelArgsAppend(args, &n, sizeof n, &p));
    CHECK_OK(aclrtKernelArgsFinalize(args));
    CHECK_OK(aclrtLaunchKernelWithConfig(f, 7, g_s, NULL, args, NULL));
    CHECK(vadd_check(v, 0));
    CHECK_EQ(aclrtLaunchKernelWithConfig(f, 7, g_s, NULL, args, (void *)1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtLaunchKernelWithConfig(f, 7, g_s, NULL, NULL, NULL), ACL_ERROR_INVALID_PARAM);

    /* WithHostArgs: one packed block */
    struct { float *x, *y, *z; uint64_t n; } host = {v->x, v->y, v->z, VN};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 3, g_s, NULL, &host, sizeof host, NULL, 0));
    CHECK(vadd_check(v, 0));
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 3, g_s, NULL, &host, 24, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "smaller than the 28 bytes");
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 3, g_s, NULL, NULL, 32, NULL, 0), ACL_ERROR_INVALID_PARAM);

    /* V2: the arguments in device memory (read when the kernel runs) */
    void *dargs = dev_alloc(sizeof host);
    to_dev(dargs, &host, sizeof host);
    CHECK_OK(aclrtLaunchKernelV2(f, 5, dargs, sizeof host, NULL, g_s));
    CHECK(vadd_check(v, 0));
    CHECK_EQ(aclrtLaunchKernelV2(f, 5, &host, sizeof host, NULL, g_s), ACL_ERROR_RT_PARAM_INVALID); /* host */
    CHECK_EQ(aclrtLaunchKernelV2(f, 5, dargs, 1 << 20, NULL, g_s), ACL_ERROR_RT_PARAM_INVALID);     /* overrun */
    /* KRN#aclrtBinaryLoadFromFile: a file binary is not launched with aclrtLaunchKernel */
    CHECK_EQ(aclrtLaunchKernel(f, 5, dargs, sizeof host, g_s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(recent(), "aclrtLaunchKernelV2");

    /* aclrtLaunchKernel with a binary loaded from data */
    size_t len = 0;
    uint8_t *image = read_all(TWINS, &len);
    aclrtBinHandle bd = NULL;
    CHECK_OK(aclrtBinaryLoadFromData(image, len, NULL, &bd));
    free(image);
    aclrtFuncHandle fd = func(bd, "vector_add");
    CHECK_OK(aclrtLaunchKernel(fd, 4, dargs, sizeof host, g_s));
    CHECK(vadd_check(v, 0));

    /* WithArgsArray: one host pointer per parameter (by handle and by symbol below) */
    void *arr[4] = {&v->x, &v->y, &v->z, &n};
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 2, g_s, NULL, arr));
    CHECK(vadd_check(v, 0));
    CHECK_EQ(aclrtLaunchKernelWithArgsArray(f, 2, g_s, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    arr[2] = NULL;
    CHECK_EQ(aclrtLaunchKernelWithArgsArray(f, 2, g_s, NULL, arr), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtLaunchKernelWithArgsArray(func(b, "many_args"), 1, g_s, NULL, arr),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT);

    /* SIMT launches: Ascend 950 only (KRN#aclrtLaunchSIMTKernelWithArgsArray) */
    dim3 one = {1, 1, 1};
    CHECK_EQ(aclrtLaunchSIMTKernelWithArgsArray(f, one, one, 0, g_s, NULL, arr), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_STR_CONTAINS(recent(), "950");
    CHECK_EQ(aclrtLaunchSIMTKernelWithHostArgs(f, one, one, 0, g_s, NULL, &host, sizeof host, NULL, 0),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT);

    /* numBlocks: 1..65535 */
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 0, g_s, NULL, &host, sizeof host, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 65536, g_s, NULL, &host, sizeof host, NULL, 0),
             ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(NULL, 1, g_s, NULL, &host, sizeof host, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtLaunchKernelWithHostArgs((aclrtFuncHandle)&host, 1, g_s, NULL, &host, sizeof host, NULL, 0),
             ACL_ERROR_RT_PARAM_INVALID);

    /* the NULL stream is the current context's default stream */
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 1, NULL, NULL, &host, sizeof host, NULL, 0));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK(vadd_check(v, 0));

    CHECK_OK(aclrtBinaryUnLoad(bd));
    CHECK_OK(aclrtBinaryUnLoad(b));
    CHECK_OK(aclrtFree(dargs));
    vadd_free(v);
    free(v);
}

/* Launches are tasks in stream order; blocks of a dependent twin run in order. */
static void test_stream_order(void)
{
    aclrtBinHandle b = load_twins();
    aclrtFuncHandle f = func(b, "record_order");
    uint32_t *d = dev_alloc(64 * sizeof(uint32_t));
    gate g;
    gate_init(&g);
    hold_stream(g_s, &g); /* nothing runs before the gate opens */
    CHECK_OK(aclrtMemsetAsync(d, 64 * sizeof(uint32_t), 0, 64 * sizeof(uint32_t), g_s));
    struct { uint32_t *order; } a = {d};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 10, g_s, NULL, &a, sizeof a, NULL, 0));
    uint32_t *h = NULL; /* pinned: an async copy to pageable memory would wait */
    CHECK_OK(aclrtMallocHost((void **)&h, 64 * sizeof(uint32_t)));
    memset(h, 0xff, 64 * sizeof(uint32_t));
    CHECK_OK(aclrtMemcpyAsync(h, 64 * sizeof(uint32_t), d, 64 * sizeof(uint32_t), ACL_MEMCPY_DEVICE_TO_HOST, g_s));
    aclrtStreamStatus st;
    CHECK_OK(aclrtStreamQuery(g_s, &st));
    CHECK_EQ(st, ACL_STREAM_STATUS_NOT_READY); /* asynchronous */
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeStream(g_s));
    gate_destroy(&g);
    CHECK_EQ(h[0], 10);
    bool in_order = true;
    for (uint32_t i = 0; i < 10; i++) {
        in_order = in_order && h[1 + i] == i;
    }
    CHECK(in_order);
    CHECK_OK(aclrtFreeHost(h));
    CHECK_OK(aclrtBinaryUnLoad(b));
    CHECK_OK(aclrtFree(d));
}

/* ============================================================ argument lists */

static void test_args_limits(void)
{
    aclrtBinHandle b = load_twins();
    aclrtFuncHandle many = func(b, "many_args");
    aclrtArgsHandle args = NULL;
    aclrtParamHandle p = NULL;
    CHECK_OK(aclrtKernelArgsInit(many, &args));
    /* KRN#Kernel加载与执行接口调用流程: at most 128 arguments */
    for (uint64_t i = 0; i < 128; i++) {
        uint64_t val = i == 0 ? 128 : i;
        CHECK_OK(aclrtKernelArgsAppend(args, &val, sizeof val, &p));
    }
    uint64_t extra = 1;
    CHECK_EQ(aclrtKernelArgsAppend(args, &extra, sizeof extra, &p), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(recent(), "128");
    CHECK_EQ(aclrtKernelArgsAppendPlaceHolder(args, &p), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtKernelArgsFinalize(args));
    CHECK_OK(aclrtLaunchKernelWithConfig(many, 1, g_s, NULL, args, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s)); /* the twin checked all 128 values */

    /* 8-byte rounding (KRN#aclrtKernelArgsGetMemSize) */
    size_t actual = 0, hsize = 0;
    CHECK_OK(aclrtKernelArgsGetMemSize(many, 13, &actual));
    CHECK_EQ(actual, 16);
    CHECK_OK(aclrtKernelArgsGetMemSize(many, 24, &actual));
    CHECK_EQ(actual, 24);
    CHECK_OK(aclrtKernelArgsGetHandleMemSize(many, &hsize));
    CHECK_GT(hsize, 0);
    CHECK_EQ(aclrtKernelArgsGetMemSize(NULL, 8, &actual), ACL_ERROR_INVALID_PARAM);

    /* values narrower than 8 bytes take a whole slot: uint8 then uint64 at offset 8 */
    aclrtArgsHandle a2 = NULL;
    CHECK_OK(aclrtKernelArgsInit(many, &a2));
    uint8_t cnt = 2;
    uint64_t one = 1;
    CHECK_OK(aclrtKernelArgsAppend(a2, &cnt, 1, &p));
    CHECK_OK(aclrtKernelArgsAppend(a2, &one, 8, &p));
    CHECK_OK(aclrtKernelArgsFinalize(a2));
    CHECK_OK(aclrtLaunchKernelWithConfig(many, 1, g_s, NULL, a2, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s)); /* v[0] = 2 (zero padding), v[1] = 1 */
    CHECK_OK(aclrtBinaryUnLoad(b));
}

static void test_args_rules(void)
{
    aclrtBinHandle b = load_twins();
    aclrtFuncHandle sc = func(b, "scale");
    aclrtArgsHandle a = NULL;
    aclrtParamHandle px = NULL, pf = NULL, pn = NULL, ph = NULL;
    float *d = dev_alloc(16);
    float h[4] = {1, 1, 1, 1};
    to_dev(d, h, sizeof h);
    float factor = 1.0f;
    uint64_t n = 4;
    CHECK_OK(aclrtKernelArgsInit(sc, &a));
    CHECK_EQ(aclrtKernelArgsAppend(a, NULL, 8, &px), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtKernelArgsAppend(a, &d, 0, &px), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtKernelArgsAppend((aclrtArgsHandle)h, &d, 8, &px), ACL_ERROR_RT_PARAM_INVALID);
    /* the twin describes the parameters: sizes and kinds are checked in order */
    CHECK_EQ(aclrtKernelArgsAppend(a, &factor, sizeof factor, &px), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(recent(), "argument 0 of kernel 'scale' is a pointer");
    CHECK_OK(aclrtKernelArgsAppend(a, &d, sizeof d, &px));
    CHECK_EQ(aclrtKernelArgsAppendPlaceHolder(a, &ph), ACL_ERROR_RT_PARAM_INVALID); /* a value comes next */
    CHECK_OK(aclrtKernelArgsAppend(a, &factor, sizeof factor, &pf));
    CHECK_EQ(aclrtKernelArgsFinalize(a), ACL_ERROR_RT_PARAM_INVALID); /* one short */
    CHECK_STR_CONTAINS(recent(), "takes 3 arguments but 2");
    CHECK_EQ(aclrtLaunchKernelWithConfig(sc, 1, g_s, NULL, a, NULL), ACL_ERROR_RT_PARAM_INVALID); /* not final */
    CHECK_STR_CONTAINS(recent(), "not finalized");
    CHECK_OK(aclrtKernelArgsAppend(a, &n, sizeof n, &pn));
    CHECK_EQ(aclrtKernelArgsAppend(a, &n, sizeof n, &pn), ACL_ERROR_RT_PARAM_INVALID); /* a fourth */
    CHECK_OK(aclrtKernelArgsFinalize(a));
    CHECK_EQ(aclrtKernelArgsAppend(a, &n, sizeof n, &pn), ACL_ERROR_RT_PARAM_INVALID); /* finalized */
    CHECK_STR_CONTAINS(recent(), "finalized");
    CHECK_OK(aclrtLaunchKernelWithConfig(sc, 1, g_s, NULL, a, NULL)); /* x *= 1 * 2 */

    /* ParaUpdate after Finalize: Finalize again before the next launch */
    factor = 3.0f;
    CHECK_OK(aclrtKernelArgsParaUpdate(a, pf, &factor, sizeof factor));
    CHECK_EQ(aclrtKernelArgsParaUpdate(a, pf, &factor, 8), ACL_ERROR_RT_PARAM_INVALID); /* size differs */
    CHECK_EQ(aclrtKernelArgsParaUpdate(a, (aclrtParamHandle)h, &factor, 4), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtLaunchKernelWithConfig(sc, 1, g_s, NULL, a, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtKernelArgsFinalize(a));
    CHECK_OK(aclrtLaunchKernelWithConfig(sc, 1, g_s, NULL, a, NULL)); /* x *= 3 * 2 */
    CHECK_OK(aclrtSynchronizeStream(g_s));
    from_dev(h, d, sizeof h);
    CHECK(h[0] == 12.0f && h[3] == 12.0f);

    /* a list belongs to its function */
    CHECK_EQ(aclrtLaunchKernelWithConfig(func(b, "vector_add"), 1, g_s, NULL, a, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(recent(), "list of kernel 'scale'");
    CHECK_OK(aclrtBinaryUnLoad(b));
    /* lists die with their binary */
    CHECK_EQ(aclrtKernelArgsFinalize(a), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(d));
}

/* ============================================================ placeholders */

static void test_placeholders(void)
{
    aclrtBinHandle b = load_twins();
    aclrtFuncHandle f = func(b, "placeholder_sum");
    int32_t *out = dev_alloc(16);
    int32_t got = 0;
    uint32_t k = 5;

    /* runtime-owned list: the buffer is asked for after every argument */
    aclrtArgsHandle a = NULL;
    aclrtParamHandle po = NULL, pp = NULL, pk = NULL;
    CHECK_OK(aclrtKernelArgsInit(f, &a));
    CHECK_OK(aclrtKernelArgsAppend(a, &out, sizeof out, &po));
    CHECK_OK(aclrtKernelArgsAppendPlaceHolder(a, &pp));
    CHECK_OK(aclrtKernelArgsAppend(a, &k, sizeof k, &pk));
    void *buf = NULL;
    CHECK_EQ(aclrtKernelArgsFinalize(a), ACL_ERROR_RT_PARAM_INVALID); /* no buffer yet */
    CHECK_STR_CONTAINS(recent(), "placeholder argument 1 has no buffer");
    CHECK_EQ(aclrtKernelArgsGetPlaceHolderBuffer(a, po, 8, &buf), ACL_ERROR_RT_PARAM_INVALID); /* not one */
    CHECK_EQ(aclrtKernelArgsGetPlaceHolderBuffer(a, pp, 0, &buf), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtKernelArgsGetPlaceHolderBuffer(a, pp, 8, &buf));
    void *again = NULL;
    CHECK_OK(aclrtKernelArgsGetPlaceHolderBuffer(a, pp, 8, &again));
    CHECK(again == buf);
    CHECK_EQ(aclrtKernelArgsGetPlaceHolderBuffer(a, pp, 16, &again), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtKernelArgsAppend(a, &k, sizeof k, &pk), ACL_ERROR_RT_PARAM_INVALID); /* after a buffer */
    CHECK_EQ(aclrtKernelArgsParaUpdate(a, pp, &k, 8), ACL_ERROR_RT_PARAM_INVALID);     /* a placeholder */
    int32_t pair[2] = {30, 7};
    memcpy(buf, pair, sizeof pair);
    CHECK_OK(aclrtKernelArgsFinalize(a));
    CHECK_OK(aclrtLaunchKernelWithConfig(f, 1, g_s, NULL, a, NULL));
    pair[0] = 1000; /* the launch copied the data already */
    memcpy(buf, pair, sizeof pair);
    CHECK_OK(aclrtSynchronizeStream(g_s));
    from_dev(&got, out, sizeof got);
    CHECK_EQ(got, 42);

    /* a list in user memory: slots, then the placeholder data */
    size_t hsize = 0, msize = 0;
    CHECK_OK(aclrtKernelArgsGetHandleMemSize(f, &hsize));
    CHECK_OK(aclrtKernelArgsGetMemSize(f, 24 + 8, &msize));
    CHECK_EQ(msize, 32);
    uint64_t *hmem = calloc(1, hsize + 8);
    uint64_t *umem = calloc(1, msize);
    CHECK_EQ(aclrtKernelArgsInitByUserMem(f, (char *)hmem + 4, umem, msize), ACL_ERROR_INVALID_PARAM); /* align */
    CHECK_EQ(aclrtKernelArgsInitByUserMem(f, hmem, NULL, msize), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtKernelArgsInitByUserMem(f, hmem, umem, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtKernelArgsInitByUserMem(f, hmem, umem, msize));
    CHECK_EQ(aclrtKernelArgsInitByUserMem(f, hmem, umem, msize), ACL_ERROR_RT_PARAM_INVALID); /* live */
    aclrtArgsHandle ua = hmem;
    CHECK_OK(aclrtKernelArgsAppend(ua, &out, sizeof out, &po));
    CHECK_OK(aclrtKernelArgsAppendPlaceHolder(ua, &pp));
    CHECK_OK(aclrtKernelArgsAppend(ua, &k, sizeof k, &pk));
    CHECK_EQ(aclrtKernelArgsGetPlaceHolderBuffer(ua, pp, 16, &buf), ACL_ERROR_RT_PARAM_INVALID); /* too small */
    CHECK_STR_CONTAINS(recent(), "userArgsSize");
    CHECK_OK(aclrtKernelArgsGetPlaceHolderBuffer(ua, pp, 8, &buf));
    CHECK((uint8_t *)buf == (uint8_t *)umem + 24); /* right after the slots */
    pair[0] = 100;
    pair[1] = 20;
    memcpy(buf, pair, sizeof pair);
    CHECK_OK(aclrtKernelArgsFinalize(ua));
    CHECK_OK(aclrtLaunchKernelWithConfig(f, 1, g_s, NULL, ua, NULL));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    from_dev(&got, out, sizeof got);
    CHECK_EQ(got, 125);

    /* WithHostArgs: placeholder info {addrOffset, dataOffset} (ST#aclrtPlaceHolderInfo) */
    struct { int32_t *out; void *ph; uint64_t k; int32_t data[2]; } host = {out, NULL, 3, {4, 5}};
    aclrtPlaceHolderInfo info = {8, 24};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 1, g_s, NULL, &host, sizeof host, &info, 1));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    from_dev(&got, out, sizeof got);
    CHECK_EQ(got, 12);
    aclrtPlaceHolderInfo bad = {4, 24}; /* not a pointer slot */
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, NULL, &host, sizeof host, &bad, 1), ACL_ERROR_INVALID_PARAM);
    bad = (aclrtPlaceHolderInfo){8, 8}; /* the data before the end of the slots */
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, NULL, &host, sizeof host, &bad, 1), ACL_ERROR_INVALID_PARAM);
    bad = (aclrtPlaceHolderInfo){8, 32}; /* outside hostArgs */
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, NULL, &host, sizeof host, &bad, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, NULL, &host, sizeof host, NULL, 1), ACL_ERROR_INVALID_PARAM);

    /* the patched slot holds device memory (a twin of this program reports it) */
    aclrtFuncHandle addr = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)local_placeholder_addr, &addr));
    uint64_t *dout = dev_alloc(2 * sizeof(uint64_t));
    struct { uint64_t *out; void *ph; uint64_t data; } h2 = {dout, NULL, 77};
    aclrtPlaceHolderInfo i2 = {8, 16};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(addr, 1, g_s, NULL, &h2, sizeof h2, &i2, 1));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    uint64_t seen[2] = {0, 0};
    from_dev(seen, dout, sizeof seen);
    CHECK(seen[0] != 0 && seen[0] != (uint64_t)(uintptr_t)&h2.data);
    CHECK_EQ(seen[1], ACL_MEM_LOCATION_TYPE_DEVICE);

    CHECK_OK(aclrtBinaryUnLoad(b));
    free(hmem);
    free(umem);
    CHECK_OK(aclrtFree(out));
    CHECK_OK(aclrtFree(dout));
}

/* ============================================================ launch attributes */

static void test_launch_cfg(void)
{
    aclrtBinHandle b = load_twins();
    aclrtFuncHandle f = func(b, "nothing");
    aclrtLaunchKernelAttr at[4];
    memset(at, 0, sizeof at);
    aclrtLaunchKernelCfg cfg = {NULL, 1};
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    cfg.attrs = at;
    at[0].id = (aclrtLaunchKernelAttrId)0;
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    at[0].id = (aclrtLaunchKernelAttrId)10;
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    /* every flag attribute is 0 or 1, the reserved bytes 0 */
    at[0].id = ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE;
    at[0].value.schemMode = 2;
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    at[0].value.schemMode = 1;
    at[0].value.rsv[3] = 1;
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "reserved");
    at[0].value.rsv[3] = 0;
    /* TIMEOUT and TIMEOUT_US together are an error (ST#aclrtLaunchKernelAttrValue) */
    at[1].id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
    at[1].value.timeout = 10;
    at[2].id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US;
    at[2].value.timeoutUs.timeoutLow = 1000;
    cfg.numAttrs = 3;
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "both TIMEOUT and TIMEOUT_US");
    at[2].id = ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE; /* repeated */
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    /* other products' attributes */
    at[2].id = ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE;
    at[2].value.engineType = ACL_RT_ENGINE_TYPE_AIV;
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    at[2].id = ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET;
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    at[2].id = ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE;
    at[2].value.engineType = (aclrtEngineType)0;
    at[2].value.dynUBufSize = 1024;
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    at[2].value.dynUBufSize = 0; /* 0 is fine everywhere */
    at[3].id = ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP;
    at[3].value.isDataDump = 1;
    cfg.numAttrs = 4;
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 1, g_s, &cfg, NULL, 0, NULL, 0));
    CHECK_OK(aclrtLaunchKernelV2(f, 1, NULL, 0, &cfg, g_s));
    CHECK_OK(aclrtSynchronizeStream(g_s));

    /* a kernel running longer than TIMEOUT_US fails with the AI Core timeout */
    aclrtLaunchKernelAttr to;
    memset(&to, 0, sizeof to);
    to.id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US;
    to.value.timeoutUs.timeoutLow = 1000; /* 1 ms; the twin sleeps 3 ms */
    aclrtLaunchKernelCfg tcfg = {&to, 1};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(func(b, "sleepy"), 1, g_s, &tcfg, NULL, 0, NULL, 0));
    CHECK_EQ(aclrtSynchronizeStream(g_s), ACL_ERROR_RT_AICORE_TIMEOUT);
    CHECK_STR_CONTAINS(recent(), "timeout of 1000 us");
    to.value.timeoutUs.timeoutLow = 0; /* both halves 0: forever */
    CHECK_OK(aclrtLaunchKernelWithHostArgs(func(b, "sleepy"), 1, g_s, &tcfg, NULL, 0, NULL, 0));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    CHECK_OK(aclrtBinaryUnLoad(b));
}

/* ============================================================ faults */

static atomic_int g_bin_cb, g_proc_cb;
static aclrtFuncHandle g_cb_func;
static uint32_t g_cb_args_len, g_cb_code;
static int g_cb_order; /* 1 when the binary's callback ran before the process one */

static void bin_cb(aclrtExceptionInfo *info, void *user)
{
    CHECK(user == (void *)&g_bin_cb);
    atomic_fetch_add(&g_bin_cb, 1);
    void *args = NULL;
    CHECK_OK(aclrtGetFuncHandleFromExceptionInfo(info, &g_cb_func));
    CHECK_OK(aclrtGetArgsFromExceptionInfo(info, &args, &g_cb_args_len));
    CHECK(args != NULL);
    g_cb_code = aclrtGetErrorCodeFromExceptionInfo(info);
    g_cb_order = atomic_load(&g_proc_cb) == 0;
}

static aclrtFuncHandle g_proc_func;
static void proc_cb(aclrtExceptionInfo *info)
{
    atomic_fetch_add(&g_proc_cb, 1);
    CHECK_OK(aclrtGetFuncHandleFromExceptionInfo(info, &g_proc_func));
}

static void test_faults(void)
{
    aclrtBinHandle b = load_twins();
    uint8_t *d = dev_alloc(4096);
    struct { void *p; } a = {d};

    /* a wild write: caught, the stream reports the vector-core exception, nothing crashes */
    CHECK_OK(aclrtBinarySetExceptionCallback(b, bin_cb, &g_bin_cb));
    CHECK_OK(aclrtExceptionInfoCallbackRegister(proc_cb));
    aclrtFuncHandle wild = func(b, "wild_write");
    CHECK_OK(aclrtLaunchKernelWithHostArgs(wild, 4, g_s, NULL, &a, sizeof a, NULL, 0));
    CHECK_EQ(aclrtSynchronizeStream(g_s), ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    CHECK_STR_CONTAINS(recent(), "wild_write");
    CHECK_STR_CONTAINS(g_msg, "SIGSEGV");
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    CHECK_EQ(atomic_load(&g_bin_cb), 1);
    CHECK_EQ(atomic_load(&g_proc_cb), 1);
    CHECK(g_cb_func == wild);
    CHECK(g_proc_func == wild);
    CHECK_EQ(g_cb_args_len, sizeof a);
    CHECK_EQ(g_cb_code, ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    CHECK_EQ(g_cb_order, 1);
    /* outside a callback the accessors refuse */
    void *args = NULL;
    uint32_t len = 0;
    CHECK_EQ(aclrtGetArgsFromExceptionInfo(NULL, &args, &len), ACL_ERROR_INVALID_PARAM);

    /* the stream stays usable (ACL_CONTINUE_ON_FAILURE) */
    CHECK_OK(aclrtLaunchKernelWithHostArgs(func(b, "nothing"), 2, g_s, NULL, NULL, 0, NULL, 0));
    CHECK_OK(aclrtSynchronizeStream(g_s));

    /* the twin returns an error: the exception of its type (cube: AI Core) */
    aclrtFuncHandle ret = func(b, "returns");
    struct { int32_t rc; } r = {7};
    CHECK_OK(aclrtBinarySetExceptionCallback(b, NULL, NULL)); /* removed */
    CHECK_OK(aclrtLaunchKernelWithHostArgs(ret, 3, g_s, NULL, &r, sizeof r, NULL, 0));
    CHECK_EQ(aclrtSynchronizeStream(g_s), ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK_STR_CONTAINS(recent(), "returned 7");
    CHECK(g_proc_func == ret);
    CHECK_EQ(atomic_load(&g_bin_cb), 1);
    CHECK_EQ(atomic_load(&g_proc_cb), 2);
    r.rc = ACL_ERROR_RT_AICORE_TRAP_EXCEPTION; /* a twin may name the code */
    CHECK_OK(aclrtLaunchKernelWithHostArgs(ret, 1, g_s, NULL, &r, sizeof r, NULL, 0));
    CHECK_EQ(aclrtSynchronizeStream(g_s), ACL_ERROR_RT_AICORE_TRAP_EXCEPTION);
    CHECK_OK(aclrtExceptionInfoCallbackUnregister(proc_cb));

    /* a declared pointer argument that is not device memory: refused before running */
    uint8_t host_buf[16];
    struct { void *p; } hb = {host_buf};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(wild, 1, g_s, NULL, &hb, sizeof hb, NULL, 0));
    CHECK_EQ(aclrtSynchronizeStream(g_s), ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    CHECK_STR_CONTAINS(recent(), "argument 0");
    CHECK_STR_CONTAINS(g_msg, "not device memory");
    void *freed = dev_alloc(64);
    CHECK_OK(aclrtFree(freed));
    struct { void *p; } fb = {freed};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(wild, 1, g_s, NULL, &fb, sizeof fb, NULL, 0));
    CHECK_EQ(aclrtSynchronizeStream(g_s), ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    CHECK_STR_CONTAINS(recent(), "not a live allocation");

    /* ACL_STOP_ON_FAILURE: a fault discards what follows (in a context of its own: the
     * mode applies to every stream of a context) */
    aclrtContext mine = NULL, stop_ctx = NULL;
    CHECK_OK(aclrtGetCurrentContext(&mine));
    CHECK_OK(aclrtCreateContext(&stop_ctx, 0));
    aclrtStream s2 = NULL;
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtSetStreamFailureMode(s2, ACL_STOP_ON_FAILURE));
    int32_t *flag = dev_alloc(4);
    CHECK_OK(aclrtLaunchKernelWithHostArgs(wild, 1, s2, NULL, &a, sizeof a, NULL, 0));
    aclError rc = aclrtMemsetAsync(flag, 4, 1, 4, s2);
    CHECK(rc == ACL_SUCCESS || rc == ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    CHECK_EQ(aclrtSynchronizeStream(s2), ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    int32_t hv = -1;
    from_dev(&hv, flag, 4);
    CHECK_EQ(hv, 0); /* the memset never ran */
    CHECK_OK(aclrtStreamAbort(s2));
    CHECK_OK(aclrtDestroyStream(s2));
    CHECK_OK(aclrtFree(flag));
    CHECK_OK(aclrtDestroyContext(stop_ctx));
    CHECK_OK(aclrtSetCurrentContext(mine));

    /* faults in many blocks of an independent twin on the pool: one report */
    struct { float *x, *y, *z; uint64_t n; } va = {(float *)(void *)host_buf, NULL, NULL, 0};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(func(b, "vector_add"), 64, g_s, NULL, &va, sizeof va, NULL, 0));
    CHECK_EQ(aclrtSynchronizeStream(g_s), ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    CHECK_OK(aclrtSynchronizeStream(g_s));

    CHECK_OK(aclrtBinaryUnLoad(b));
    CHECK_OK(aclrtFree(d));
    CHECK_EQ(aclmockKernelGetLaunchInfo(NULL), ACL_ERROR_INVALID_PARAM);
    aclmockKernelLaunchInfo li;
    CHECK_EQ(aclmockKernelGetLaunchInfo(&li), ACL_ERROR_INVALID_PARAM); /* not in a twin */
}

/* ============================================================ device ELF */

static void test_device_elf(void)
{
    static uint8_t image[4096];
    size_t n = build_elf(image, sizeof image, true, true);
    CHECK_GT(n, 0);
    char path[200];
    snprintf(path, sizeof path, "%s/kernels.o", g_tmp);
    write_all(path, image, n);
    aclrtBinHandle b = NULL;
    CHECK_OK(aclrtBinaryLoadFromFile(path, NULL, &b));

    /* names from the symbol table; a MIX kernel from its _mix_aic/_mix_aiv pair */
    aclrtFuncHandle va = func(b, "vector_add");
    aclrtFuncHandle sc = func(b, "scale");
    aclrtFuncHandle f = NULL;
    CHECK_EQ(aclrtBinaryGetFunction(b, "g_factor", &f), ACL_ERROR_RT_SYMBOL_NOT_FOUND); /* an object */
    CHECK_EQ(aclrtBinaryGetFunction(b, "extern_fn", &f), ACL_ERROR_RT_SYMBOL_NOT_FOUND); /* undefined */
    int64_t type = -1;
    CHECK_OK(aclrtGetFunctionAttribute(sc, ACL_FUNC_ATTR_KERNEL_TYPE, &type));
    CHECK_EQ(type, ACL_KERNEL_TYPE_MIX);
    void *dev = NULL, *aic = NULL, *aiv = NULL;
    size_t bsize = 0, aics = 0, aivs = 0;
    CHECK_OK(aclrtBinaryGetDevAddress(b, &dev, &bsize));
    CHECK_OK(aclrtGetFunctionAddr(sc, &aic, &aiv));
    CHECK((uint8_t *)aic == (uint8_t *)dev + 0x100 + 32); /* .text at file offset 0x100 */
    CHECK((uint8_t *)aiv == (uint8_t *)dev + 0x100 + 48);
    CHECK_OK(aclrtGetFunctionSize(sc, &aics, &aivs));
    CHECK(aics == 16 && aivs == 16);
    uint8_t code[4];
    from_dev(code, (uint8_t *)dev + 0x100 + 32, sizeof code);
    CHECK_EQ(code[0], 0x90 + 32);

    /* globals: in the device copy (.data with its value, .bss zeroed) */
    void *g = NULL;
    size_t gs = 0;
    float factor = 0;
    CHECK_OK(aclrtBinaryGetGlobal(b, "g_factor", &g, &gs));
    CHECK_EQ(gs, 4);
    from_dev(&factor, g, sizeof factor);
    CHECK(factor == 3.0f);
    uint64_t counter = 1;
    CHECK_OK(aclrtBinaryGetGlobal(b, "g_counter", &g, &gs));
    CHECK_EQ(gs, 8);
    CHECK((uint8_t *)g >= (uint8_t *)dev + n && (uint8_t *)g + 8 <= (uint8_t *)dev + bsize);
    from_dev(&counter, g, sizeof counter);
    CHECK_EQ(counter, 0);
    CHECK_EQ(aclrtBinaryGetGlobal(b, "vector_add", &g, &gs), ACL_ERROR_RT_SYMBOL_NOT_FOUND); /* a kernel */

    /* no twin: the launch fails at once, naming the kernel */
    vadd_bufs *v = calloc(1, sizeof *v);
    vadd_setup(v);
    struct { float *x, *y, *z; uint64_t n; } host = {v->x, v->y, v->z, VN};
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(va, 4, g_s, NULL, &host, sizeof host, NULL, 0),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_STR_CONTAINS(recent(), "kernel 'vector_add'");
    CHECK_STR_CONTAINS(g_msg, "no host twin");
    CHECK_EQ(aclrtFunctionGetParamCount(va, &gs), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);

    /* a twin registered by name (after GetFunction: resolved at launch) */
    float bias = 0.25f;
    aclmockKernelDesc d = vadd_desc(&bias);
    CHECK_OK(aclmockRegisterKernelDesc(&d));
    CHECK_EQ(aclmockKernelIsRegistered("vector_add"), 1);
    size_t count = 0;
    CHECK_OK(aclrtFunctionGetParamCount(va, &count));
    CHECK_EQ(count, 4);
    atomic_store(&g_reg_calls, 0);
    CHECK_OK(aclrtLaunchKernelWithHostArgs(va, 4, g_s, NULL, &host, sizeof host, NULL, 0));
    CHECK(vadd_check(v, 0.25f));
    CHECK_EQ(atomic_load(&g_reg_calls), 4);
    /* queued launches keep the twin they resolved */
    gate gt;
    gate_init(&gt);
    hold_stream(g_s, &gt);
    CHECK_OK(aclrtLaunchKernelWithHostArgs(va, 2, g_s, NULL, &host, sizeof host, NULL, 0));
    CHECK_OK(aclmockUnregisterKernel("vector_add"));
    CHECK_EQ(aclmockKernelIsRegistered("vector_add"), 0);
    gate_open(&gt);
    CHECK(vadd_check(v, 0.25f));
    gate_destroy(&gt);
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(va, 4, g_s, NULL, &host, sizeof host, NULL, 0),
             ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtBinaryUnLoad(b));

    /* the MAGIC option gives the core type; LAZY_LOAD defers the device copy */
    aclrtBinaryLoadOption opt[2];
    memset(opt, 0, sizeof opt);
    opt[0].type = ACL_RT_BINARY_LOAD_OPT_MAGIC;
    opt[0].value.magic = ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE;
    opt[1].type = ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD;
    opt[1].value.isLazyLoad = 1;
    aclrtBinaryLoadOptions opts = {opt, 2};
    CHECK_OK(aclrtBinaryLoadFromData(image, n, &opts, &b));
    CHECK_OK(aclrtBinaryGetDevAddress(b, &dev, &bsize));
    CHECK(dev == NULL); /* KRN: NULL under lazy load */
    va = func(b, "vector_add");
    CHECK_OK(aclrtBinaryGetDevAddress(b, &dev, &bsize));
    CHECK(dev != NULL); /* the first GetFunction copied it */
    CHECK_OK(aclrtGetFunctionAttribute(va, ACL_FUNC_ATTR_KERNEL_TYPE, &type));
    CHECK_EQ(type, ACL_KERNEL_TYPE_VECTOR);
    CHECK_OK(aclrtGetFunctionAddr(va, &aic, &aiv));
    CHECK(aic == NULL && (uint8_t *)aiv == (uint8_t *)dev + 0x100);
    CHECK_OK(aclrtBinaryUnLoad(b));

    /* aclrtRegisterCpuFunc: AI CPU kernels of a binary loaded from data (mode 2) */
    opt[0].type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
    opt[0].value.cpuKernelMode = 2;
    opts.numOpt = 1;
    CHECK_OK(aclrtBinaryLoadFromData(image, n, &opts, &b));
    CHECK_EQ(aclrtBinaryGetFunction(b, "vector_add", &f), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(recent(), "aclrtRegisterCpuFunc");
    CHECK_OK(aclrtRegisterCpuFunc(b, "vector_add", "VectorAdd", &f));
    CHECK_OK(aclrtGetFunctionAttribute(f, ACL_FUNC_ATTR_KERNEL_TYPE, &type));
    CHECK_EQ(type, ACL_KERNEL_TYPE_AICPU);
    CHECK_OK(aclmockRegisterKernelDesc(&d));
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 2, g_s, NULL, &host, sizeof host, NULL, 0));
    CHECK(vadd_check(v, 0.25f));
    CHECK_OK(aclmockUnregisterKernel("vector_add"));
    CHECK_EQ(aclrtRegisterCpuFunc(b, "vector_add", "Other", &f), ACL_ERROR_RT_KERNEL_DUPLICATE);
    CHECK_OK(aclrtBinaryUnLoad(b));
    CHECK_OK(aclrtBinaryLoadFromFile(path, NULL, &b));
    CHECK_EQ(aclrtRegisterCpuFunc(b, "vector_add", "VectorAdd", &f), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtBinaryUnLoad(b));

    /* ELF32 and big-endian objects parse too */
    for (int k = 0; k < 3; k++) {
        size_t m = build_elf(image, sizeof image, k == 2, k == 1);
        CHECK_OK(aclrtBinaryLoadFromData(image, m, NULL, &b));
        CHECK_OK(aclrtBinaryGetFunction(b, "vector_add", &f));
        CHECK_OK(aclrtBinaryGetFunction(b, "scale", &f));
        CHECK_OK(aclrtBinaryUnLoad(b));
    }
    vadd_free(v);
    free(v);
}

/* Truncated and corrupted images are errors, never crashes. */
static void test_elf_robustness(void)
{
    static uint8_t image[4096], bad[4096];
    size_t n = build_elf(image, sizeof image, true, true);
    aclrtBinHandle b = NULL;
    int failed = 0;
    for (size_t len = 1; len < n; len++) {
        aclError rc = aclrtBinaryLoadFromData(image, len, NULL, &b);
        failed += rc == ACL_ERROR_PARSE_FILE;
        if (rc == ACL_SUCCESS) {
            CHECK_OK(aclrtBinaryUnLoad(b));
        }
    }
    CHECK_EQ(failed, (int)n - 1); /* every prefix is short of the section headers at the end */
    uint32_t seed = 12345;
    int loaded = 0;
    for (int round = 0; round < 2000; round++) {
        memcpy(bad, image, n);
        for (int k = 0; k < 4; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = 16 + (seed >> 8) % (n - 16);
            seed = seed * 1103515245u + 12345u;
            bad[at] = (uint8_t)(seed >> 16);
        }
        aclError rc = aclrtBinaryLoadFromData(bad, n, NULL, &b);
        CHECK(rc == ACL_SUCCESS || rc == ACL_ERROR_PARSE_FILE || rc == ACL_ERROR_RT_MEMORY_ALLOCATION);
        if (rc == ACL_SUCCESS) {
            loaded++;
            aclrtFuncHandle f = NULL;
            (void)aclrtBinaryGetFunction(b, "vector_add", &f);
            void *g = NULL;
            size_t gs = 0;
            (void)aclrtBinaryGetGlobal(b, "g_factor", &g, &gs);
            CHECK_OK(aclrtBinaryUnLoad(b));
        }
    }
    CHECK_GT(loaded, 0);
    /* a huge .bss is refused, not allocated */
    memcpy(bad, image, n);
    uint64_t shoff = 0;
    memcpy(&shoff, image + 40, 8);
    uint64_t huge = 1ull << 40;
    memcpy(bad + shoff + 3 * 64 + 32, &huge, 8);
    CHECK_EQ(aclrtBinaryLoadFromData(bad, n, NULL, &b), ACL_ERROR_PARSE_FILE);
}

/* ============================================================ symbols, registry */

static void test_func_by_symbol(void)
{
    aclrtFuncHandle f = NULL, g = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)local_placeholder_addr, &f));
    CHECK_OK(aclrtGetFuncBySymbol((const void *)local_placeholder_addr, &g));
    CHECK(f == g);
    char name[64];
    CHECK_OK(aclrtGetFunctionName(f, sizeof name, name));
    CHECK_STR_EQ(name, "local_placeholder_addr");
    CHECK_EQ(aclrtGetFuncBySymbol((const void *)test_func_by_symbol, &f), ACL_ERROR_RT_INVALID_SYMBOL);
    CHECK_EQ(aclrtGetFuncBySymbol(NULL, &f), ACL_ERROR_INVALID_PARAM);
    /* a registered twin's function works as a symbol as well */
    CHECK_OK(aclmockRegisterKernel("noop_symbol", noop_twin, NULL, 0));
    CHECK_OK(aclrtGetFuncBySymbol((const void *)noop_twin, &f));
    CHECK_OK(aclrtGetFunctionName(f, sizeof name, name));
    CHECK_STR_EQ(name, "noop_symbol");
    /* WithArgsArray takes the symbol directly (KRN#aclrtLaunchKernelWithArgsArray) */
    uint64_t *out = dev_alloc(16);
    void *ph = out;
    void *arr[2] = {&out, &ph};
    CHECK_OK(aclrtLaunchKernelWithArgsArray((void *)local_placeholder_addr, 1, g_s, NULL, arr));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    uint64_t got[2] = {0, 0};
    from_dev(got, out, sizeof got);
    CHECK(got[0] == (uint64_t)(uintptr_t)out && got[1] == ACL_MEM_LOCATION_TYPE_DEVICE);
    CHECK_OK(aclmockUnregisterKernel("noop_symbol"));
    CHECK_OK(aclrtFree(out));
}

static void test_registry_errors(void)
{
    CHECK_EQ(aclmockRegisterKernel(NULL, noop_twin, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockRegisterKernel("x", NULL, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockRegisterKernel("", noop_twin, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockRegisterKernel("x", noop_twin, NULL, 0x8000), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "flag");
    char longname[300];
    memset(longname, 'k', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_EQ(aclmockRegisterKernel(longname, noop_twin, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclmockRegisterKernel("dup", noop_twin, NULL, 0));
    CHECK_EQ(aclmockRegisterKernel("dup", noop_twin, NULL, 0), ACL_ERROR_RT_KERNEL_DUPLICATE);
    CHECK_OK(aclmockUnregisterKernel("dup"));
    CHECK_EQ(aclmockUnregisterKernel("dup"), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockUnregisterKernel(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockKernelIsRegistered(NULL), 0);

    aclmockKernelDesc d = vadd_desc(NULL);
    CHECK_EQ(aclmockRegisterKernelDesc(NULL), ACL_ERROR_INVALID_PARAM);
    d.version = 3;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    d = vadd_desc(NULL);
    d.params = NULL;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    d = vadd_desc(NULL);
    d.numParams = 129;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    aclmockKernelParam bad[2] = {{4, ACLMOCK_ACCESS_READ}, {0, 0}};
    d = vadd_desc(NULL);
    d.params = bad;
    d.numParams = 1;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM); /* a 4-byte pointer */
    d.numParams = 2;
    bad[0].size = 8;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM); /* size 0 */
    bad[1] = (aclmockKernelParam){4, 7};
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM); /* access mode 7 */
    d = vadd_desc(NULL);
    d.reserved[2] = &d;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockKernelIsRegistered("vector_add"), 0);
}

/* ============================================================ extents */

/* x (n floats, parameter 3), y (16 bytes), z (its extentFn: n floats, or unknown for a
 * zero n: then its table entry, 4 bytes). */
static uint64_t vadd_extent_fn(const void *args, size_t argsSize, uint32_t i, void *userData)
{
    (void)userData;
    uint32_t n = 0;
    CHECK_GE(argsSize, 28);
    memcpy(&n, (const char *)args + 24, sizeof n);
    return i == 2 && n != 0 ? (uint64_t)n * 4u : ACLMOCK_EXTENT_UNKNOWN;
}

static void test_extents(void)
{
    static const aclmockKernelExtent ok[] = {ACLMOCK_EXTENT_ELEMS(float, 3), ACLMOCK_EXTENT_BYTES(16),
                                             ACLMOCK_EXTENT_BYTES(4), ACLMOCK_EXTENT_NONE};
    static const aclmockKernelExtent on_value[] = {ACLMOCK_EXTENT_NONE, ACLMOCK_EXTENT_NONE, ACLMOCK_EXTENT_NONE,
                                                   ACLMOCK_EXTENT_BYTES(4)};
    static const aclmockKernelExtent bad_count[] = {ACLMOCK_EXTENT_ELEMS(float, 1), ACLMOCK_EXTENT_NONE,
                                                    ACLMOCK_EXTENT_NONE, ACLMOCK_EXTENT_NONE};
    static const aclmockKernelExtent count_past[] = {ACLMOCK_EXTENT_ELEMS(float, 9), ACLMOCK_EXTENT_NONE,
                                                     ACLMOCK_EXTENT_NONE, ACLMOCK_EXTENT_NONE};
    static const aclmockKernelExtent no_elem[] = {{0u, 0u, 3u}, ACLMOCK_EXTENT_NONE, ACLMOCK_EXTENT_NONE,
                                                  ACLMOCK_EXTENT_NONE};
    /* descriptor checks */
    aclmockKernelDescExt ext = {NULL, NULL, {NULL, NULL}};
    aclmockKernelDesc d = vadd_desc(NULL);
    d.reserved[ACLMOCK_KERNEL_DESC_EXT_SLOT] = &ext;
    ext.extents = on_value;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "parameter 3 is a value");
    ext.extents = bad_count;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "counts elements with parameter 1");
    ext.extents = count_past;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    ext.extents = no_elem;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    ext.reserved[1] = &ext;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "reserved");
    ext = (aclmockKernelDescExt){NULL, vadd_extent_fn, {NULL, NULL}};
    d = vadd_desc(NULL);
    d.reserved[ACLMOCK_KERNEL_DESC_EXT_SLOT] = &ext;
    d.numParams = ACLMOCK_PARAMS_UNKNOWN;
    d.params = NULL;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "declares extents but not its parameters");

    /* version 1: the slots are reserved (NULL); version 2 accepts its extents there */
    d = vadd_desc(NULL);
    d.version = 1;
    CHECK_OK(aclmockRegisterKernelDesc(&d));
    CHECK_OK(aclmockUnregisterKernel("vector_add"));
    ext = (aclmockKernelDescExt){ok, NULL, {NULL, NULL}};
    d.reserved[ACLMOCK_KERNEL_DESC_EXT_SLOT] = &ext;
    CHECK_EQ(aclmockRegisterKernelDesc(&d), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "reserved");

    /* declared extents: the launch faults an argument whose extent runs past the end of
     * its allocation, naming it */
    d = vadd_desc(NULL);
    ext = (aclmockKernelDescExt){ok, vadd_extent_fn, {NULL, NULL}};
    d.reserved[ACLMOCK_KERNEL_DESC_EXT_SLOT] = &ext;
    CHECK_OK(aclmockRegisterKernelDesc(&d));
    ext.extents = NULL; /* copied at registration */
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)reg_vector_add, &f));
    float *x = dev_alloc(64 * sizeof(float));
    float *y = dev_alloc(64 * sizeof(float));
    float *z = dev_alloc(64 * sizeof(float));
    size_t usable = 0;
    void *base = NULL;
    CHECK_OK(aclrtMemGetAddressRange(x, &base, &usable));
    uint32_t n = 16;
    void *arr[4] = {&x, &y, &z, &n};
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 2, g_s, NULL, arr));
    CHECK_OK(aclrtSynchronizeStream(g_s)); /* 64 bytes each: inside */
    n = 0; /* z's extentFn says unknown: its table entry (4 bytes) */
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 2, g_s, NULL, arr));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    n = (uint32_t)(usable / sizeof(float)) + 1; /* x runs one float past its allocation */
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 1, g_s, NULL, arr));
    CHECK_EQ(aclrtSynchronizeStream(g_s), ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK_STR_CONTAINS(recent(), "argument 0");
    CHECK_STR_CONTAINS(g_msg, "declares an extent of");
    CHECK_OK(aclrtDestroyStream(g_s));
    CHECK_OK(aclrtCreateStream(&g_s));
    float *y_end = (float *)(void *)((char *)y + usable - 16); /* 16 declared bytes: exactly to the end */
    void *arr2[4] = {&x, &y_end, &z, &n};
    n = 1;
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 1, g_s, NULL, arr2));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    y_end += 1;
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 1, g_s, NULL, arr2));
    CHECK_EQ(aclrtSynchronizeStream(g_s), ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK_STR_CONTAINS(recent(), "argument 1");
    CHECK_OK(aclrtDestroyStream(g_s));
    CHECK_OK(aclrtCreateStream(&g_s));
    CHECK_OK(aclmockUnregisterKernel("vector_add"));

    /* the launch extents of the calling thread and the regions: argument checks */
    uint64_t w[2] = {8, 8};
    CHECK_EQ(aclmockSetNextLaunchExtents(NULL, 2), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockSetNextLaunchExtents(w, 129), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclmockSetNextLaunchExtents(w, 2));
    CHECK_OK(aclmockSetNextLaunchExtents(NULL, 0));
    CHECK_EQ(aclmockMemRegionRegister(NULL, 8), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockMemRegionRegister(x, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockMemRegionRegister(w, 8), ACL_ERROR_INVALID_PARAM); /* host memory */
    CHECK_STR_CONTAINS(recent(), "not in a live device allocation");
    CHECK_EQ(aclmockMemRegionRegister(x, usable + 1), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "runs past the end of its allocation");
    CHECK_OK(aclmockMemRegionRegister(x, 64));
    CHECK_OK(aclmockMemRegionRegister(x + 16, 64));
    CHECK_OK(aclmockMemRegionRegister(x + 8, 64)); /* replaces both */
    CHECK_EQ(aclmockMemRegionUnregister(x), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockMemRegionUnregister(x + 16), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(recent(), "no region starts at");
    CHECK_OK(aclmockMemRegionUnregister(x + 8));
    CHECK_EQ(aclmockMemRegionUnregister(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclmockMemRegionRegister(y, 64));
    CHECK_OK(aclrtFree(x));
    CHECK_OK(aclrtFree(y)); /* its region goes with it */
    CHECK_OK(aclrtFree(z));
}

/* ============================================================ unload, devices */

static void test_unload_with_queued_launches(void)
{
    aclrtBinHandle b = load_twins();
    aclrtFuncHandle f = func(b, "scale");
    float h[2] = {1, 2};
    float *d = dev_alloc(sizeof h);
    to_dev(d, h, sizeof h);
    struct { float *x; float factor; uint32_t pad; uint64_t n; } a = {d, 0.5f, 0, 2};
    gate g;
    gate_init(&g);
    hold_stream(g_s, &g);
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 1, g_s, NULL, &a, sizeof a, NULL, 0));
    CHECK_OK(aclrtBinaryUnLoad(b)); /* the queued launch keeps the binary */
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, g_s, NULL, &a, sizeof a, NULL, 0), ACL_ERROR_RT_PARAM_INVALID);
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeStream(g_s));
    gate_destroy(&g);
    from_dev(h, d, sizeof h);
    CHECK(h[0] == 1.0f && h[1] == 2.0f); /* x * 0.5 * 2 */
    CHECK_OK(aclrtFree(d));

    /* another device: unload there is refused, launches on its streams too */
    b = load_twins();
    f = func(b, "nothing");
    aclrtContext c0 = NULL;
    CHECK_OK(aclrtGetCurrentContext(&c0));
    CHECK_OK(aclrtSetDevice(1));
    aclrtStream s1 = NULL;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(f, 1, s1, NULL, NULL, 0, NULL, 0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(recent(), "device 0");
    CHECK_EQ(aclrtBinaryUnLoad(b), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtSetCurrentContext(c0));
    CHECK_OK(aclrtBinaryUnLoad(b));
}

/* ============================================================ threads */

#define THREADS 4
#define ROUNDS 30

static aclrtBinHandle g_shared_bin;

static void *launch_loop(void *arg)
{
    int idx = (int)(intptr_t)arg;
    if (aclrtSetDevice(0) != ACL_SUCCESS) {
        return (void *)1;
    }
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtBinaryGetFunction(g_shared_bin, "vector_add", &f));
    float hx[256], hz[256];
    for (int i = 0; i < 256; i++) {
        hx[i] = (float)(i + idx);
    }
    float *x = dev_alloc(sizeof hx), *z = dev_alloc(sizeof hz);
    CHECK_OK(aclrtMemcpyAsync(x, sizeof hx, hx, sizeof hx, ACL_MEMCPY_HOST_TO_DEVICE, s));
    char name[32];
    snprintf(name, sizeof name, "thread_twin_%d", idx);
    for (int r = 0; r < ROUNDS; r++) {
        CHECK_OK(aclmockRegisterKernel(name, noop_twin, NULL, ACLMOCK_KERNEL_BLOCKS_INDEPENDENT));
        aclrtArgsHandle a = NULL;
        aclrtParamHandle p = NULL;
        uint32_t n = 256;
        CHECK_OK(aclrtKernelArgsInit(f, &a));
        CHECK_OK(aclrtKernelArgsAppend(a, &x, sizeof x, &p));
        CHECK_OK(aclrtKernelArgsAppend(a, &x, sizeof x, &p));
        CHECK_OK(aclrtKernelArgsAppend(a, &z, sizeof z, &p));
        CHECK_OK(aclrtKernelArgsAppend(a, &n, sizeof n, &p));
        CHECK_OK(aclrtKernelArgsFinalize(a));
        CHECK_OK(aclrtLaunchKernelWithConfig(f, 8, s, NULL, a, NULL));
        CHECK_OK(aclmockUnregisterKernel(name));
    }
    CHECK_OK(aclrtMemcpyAsync(hz, sizeof hz, z, sizeof hz, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    bool ok = true;
    for (int i = 0; i < 256; i++) {
        ok = ok && hz[i] == 2 * hx[i];
    }
    CHECK(ok);
    CHECK_OK(aclrtFree(x));
    CHECK_OK(aclrtFree(z));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(0));
    return NULL;
}

static void test_threads(void)
{
    g_shared_bin = load_twins();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        pthread_create(&t[i], NULL, launch_loop, (void *)(intptr_t)i);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    CHECK_OK(aclrtBinaryUnLoad(g_shared_bin));
}

int main(void)
{
    mt_mock_env((const char *)NULL);
    if (mt_make_tmpdir(g_tmp, sizeof g_tmp, "kernel") != 0) {
        return 1;
    }
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtCreateStream(&g_s));
    RUN_TEST(test_load_errors);
    RUN_TEST(test_load_needs_context);
    RUN_TEST(test_host_binary_functions);
    RUN_TEST(test_host_binary_from_data);
    RUN_TEST(test_launch_variants);
    RUN_TEST(test_stream_order);
    RUN_TEST(test_args_limits);
    RUN_TEST(test_args_rules);
    RUN_TEST(test_placeholders);
    RUN_TEST(test_launch_cfg);
    RUN_TEST(test_faults);
    RUN_TEST(test_device_elf);
    RUN_TEST(test_elf_robustness);
    RUN_TEST(test_func_by_symbol);
    RUN_TEST(test_registry_errors);
    RUN_TEST(test_extents);
    RUN_TEST(test_unload_with_queued_launches);
    RUN_TEST(test_threads);
    CHECK_OK(aclrtDestroyStream(g_s));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclrtResetDevice(1));
    CHECK_OK(aclFinalize());
    char report[256];
    aclmockGetLeakReport(report, sizeof report, ACLMOCK_REPORT_LAST_FINALIZE);
    CHECK_STR_CONTAINS(report, "no leaks");
    mt_remove_tree(g_tmp);
    return TEST_REPORT();
}
