/*
 * binary.c - kernel binaries and their functions: aclrtBinaryLoadFromFile / FromData,
 * aclrtCreateBinary / aclrtDestroyBinary / aclrtBinaryLoad, aclrtBinaryUnLoad,
 * aclrtBinaryGetFunction, aclrtRegisterCpuFunc, aclrtGetFuncBySymbol,
 * aclrtBinaryGetDevAddress / GetGlobal, aclrtBinarySetExceptionCallback and the
 * function queries (acl_next_semantics.md §1.2, §1.3).
 *
 * What a binary is on the mock (README "Kernels and host twins"):
 *   - a host shared object whose ELF has an `aclmock_kernels` section
 *     (acl/acl_mock_kernel.h): dlopen'ed (from a memfd when loaded from data); its
 *     kernels are the twins of that table;
 *   - any other ELF (a device .o for the AI Core, an AI CPU .so): its kernel names are
 *     the defined symbols of its .symtab/.dynsym; a launch runs the twin registered
 *     under the name (aclmockRegisterKernel), resolved at launch time;
 *   - a module of the process itself (aclrtGetFuncBySymbol): the twins declared in the
 *     program or a library it loaded, or registered ones, found by their address.
 * Every loaded binary gets a device copy of its image (runtime memory on the device of
 * the loading context, followed by zeroed space for its NOBITS sections), so that
 * aclrtBinaryGetDevAddress, aclrtBinaryGetGlobal and aclrtGetFunctionAddr return device
 * addresses; with the LAZY_LOAD option the copy is made by the first GetFunction.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "mem/mem.h"
#include "kernel/kernel.h"
#include "kernel/kernel_private.h"

#define BIN_MAGIC 0x4b4e4c42494e4152ull  /* "KNLBINAR" */
#define FUNC_MAGIC 0x4b4e4c46554e4354ull /* "KNLFUNCT" */
#define DESC_MAGIC 0x4b4e4c4445534352ull /* "KNLDESCR" */
#define MAX_IMAGE (1ull << 30)           /* larger binaries are refused (1 GiB) */

mock_mutex kernel_mu = MOCK_MUTEX_INIT(MOCK_LOCK_KERNEL);

/* live handles (kernel_mu) */
static mock_registry g_bins = MOCK_REGISTRY_EMPTY;
static mock_registry g_funcs = MOCK_REGISTRY_EMPTY;
static mock_registry g_descs = MOCK_REGISTRY_EMPTY;
/* module binaries of aclrtGetFuncBySymbol, per device (kernel_mu); not user handles */
static kernel_binary *g_modules[MOCK_MAX_DEVICES];

typedef struct bin_desc {
    uint64_t magic;
    const void *data;
    size_t size;
} bin_desc;

/* ------------------------------------------------------------ objects */

void kernel_binary_ref(kernel_binary *b)
{
    atomic_fetch_add(&b->refs, 1);
}

static void binary_free(kernel_binary *b)
{
    for (kernel_func *f = b->funcs; f != NULL;) {
        kernel_func *next = f->next;
        kernel_twin_put(f->own);
        free(f->name);
        free(f->op_type);
        f->magic = 0;
        free(f);
        f = next;
    }
    kernel_args_free_list(b->lists);
    for (size_t i = 0; i < b->nown; i++) {
        kernel_twin_put(b->own[i]);
    }
    free(b->own);
    mem_runtime_free(b->dev_copy);
    if (b->dl != NULL) {
        dlclose(b->dl);
    }
    kernel_elf_free(&b->elf);
    free(b->image);
    free(b->path);
    b->magic = 0;
    free(b);
}

void kernel_binary_put(kernel_binary *b)
{
    if (b != NULL && atomic_fetch_sub(&b->refs, 1) == 1) {
        binary_free(b);
    }
}

kernel_func *kernel_func_find_locked(const void *handle)
{
    kernel_func *f = core_registry_find(&g_funcs, handle);
    return (f != NULL && f->magic == FUNC_MAGIC) ? f : NULL;
}

aclError kernel_func_acquire(const char *fn, const char *arg, const void *handle, kernel_func **out)
{
    if (handle == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", arg);
    }
    core_mutex_lock(&kernel_mu);
    kernel_func *f = kernel_func_find_locked(handle);
    if (f != NULL) {
        kernel_binary_ref(f->bin);
    }
    core_mutex_unlock(&kernel_mu);
    if (f == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument '%s' (%p) is not a live function handle (its binary unloaded?)", arg, handle);
    }
    *out = f;
    return ACL_SUCCESS;
}

kernel_twin *kernel_func_twin(const kernel_func *f)
{
    kernel_twin *t = f->own;
    core_mutex_lock(&kernel_mu);
    if (t == NULL) {
        t = kernel_twin_find_locked(f->name);
    }
    if (t != NULL) {
        kernel_twin_ref(t);
    }
    core_mutex_unlock(&kernel_mu);
    return t;
}

int32_t kernel_func_type(const kernel_func *f, const kernel_twin *twin)
{
    if (f->type >= 0) {
        return f->type;
    }
    return twin != NULL ? kernel_type_of_flags(twin->desc.flags) : ACL_KERNEL_TYPE_AICORE;
}

/* The binary behind a handle, with a reference; records the error. */
static aclError bin_acquire(const char *fn, const void *handle, kernel_binary **out)
{
    if (handle == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'binHandle' is NULL");
    }
    core_mutex_lock(&kernel_mu);
    kernel_binary *b = core_registry_find(&g_bins, handle);
    if (b != NULL) {
        kernel_binary_ref(b);
    }
    core_mutex_unlock(&kernel_mu);
    if (b == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'binHandle' (%p) is not a loaded binary",
                          handle);
    }
    *out = b;
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ device copy */

/* Makes the device copy of b if it has none yet (lazy load); errors under fn. */
static aclError ensure_device_copy(const char *fn, kernel_binary *b)
{
    core_mutex_lock(&kernel_mu);
    bool have = b->dev_copy != NULL || b->kind == KERNEL_BIN_MODULE;
    core_mutex_unlock(&kernel_mu);
    if (have) {
        return ACL_SUCCESS;
    }
    void *dev = NULL;
    aclError rc = mem_runtime_alloc(fn, b->device, b->dev_size, &dev);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mem_access_begin(dev, b->image_size);
    memcpy(dev, b->image, b->image_size);
    mem_access_end(dev, b->image_size);
    core_mutex_lock(&kernel_mu);
    bool lost_race = b->dev_copy != NULL;
    if (!lost_race) {
        b->dev_copy = dev;
    }
    core_mutex_unlock(&kernel_mu);
    if (lost_race) {
        mem_runtime_free(dev);
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ loading */

typedef struct load_opts {
    bool lazy;
    uint32_t magic;
    int32_t cpu_mode; /* -1 = not given */
} load_opts;

static aclError parse_options(const char *fn, const aclrtBinaryLoadOptions *o, load_opts *out)
{
    out->lazy = false;
    out->magic = 0;
    out->cpu_mode = -1;
    if (o == NULL) {
        return ACL_SUCCESS;
    }
    if (o->numOpt > 0 && o->options == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'options->options' is NULL but numOpt is %zu",
                          o->numOpt);
    }
    if (o->numOpt > 16) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'options->numOpt' (%zu) is larger than 16", o->numOpt);
    }
    for (size_t i = 0; i < o->numOpt; i++) {
        const aclrtBinaryLoadOption *x = &o->options[i];
        switch ((int)x->type) {
        case ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD:
            if (x->value.isLazyLoad > 1) {
                return core_error(fn, ACL_ERROR_INVALID_PARAM, "options[%zu]: isLazyLoad %u is not 0 or 1", i,
                                  x->value.isLazyLoad);
            }
            out->lazy = x->value.isLazyLoad == 1;
            break;
        case ACL_RT_BINARY_LOAD_OPT_MAGIC:
            if (x->value.magic != ACL_RT_BINARY_MAGIC_ELF_AICORE && x->value.magic != ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE &&
                x->value.magic != ACL_RT_BINARY_MAGIC_ELF_CUBE_CORE) {
                return core_error(fn, ACL_ERROR_INVALID_PARAM,
                                  "options[%zu]: magic 0x%x is not ACL_RT_BINARY_MAGIC_ELF_AICORE, _VECTOR_CORE or "
                                  "_CUBE_CORE",
                                  i, x->value.magic);
            }
            out->magic = x->value.magic;
            break;
        case ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE:
            if (x->value.cpuKernelMode < 0 || x->value.cpuKernelMode > 2) {
                return core_error(fn, ACL_ERROR_INVALID_PARAM, "options[%zu]: cpuKernelMode %d is not 0, 1 or 2", i,
                                  x->value.cpuKernelMode);
            }
            out->cpu_mode = x->value.cpuKernelMode;
            break;
        default:
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "options[%zu]: type %d is not an aclrtBinaryLoadOptionType (1..3)", i, (int)x->type);
        }
    }
    return ACL_SUCCESS;
}

/* Reads a whole regular file (at most MAX_IMAGE bytes). */
static aclError read_file(const char *fn, const char *path, uint8_t **data, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return core_error(fn, ACL_ERROR_INVALID_FILE, "cannot open '%s': %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return core_error(fn, ACL_ERROR_INVALID_FILE, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > MAX_IMAGE) {
        close(fd);
        return core_error(fn, ACL_ERROR_INVALID_FILE_SIZE, "'%s' is larger than 1 GiB", path);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL) {
        close(fd);
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory for %zu bytes", n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        free(buf);
        return core_error(fn, ACL_ERROR_INVALID_FILE, "cannot read '%s'", path);
    }
    *data = buf;
    *size = n;
    return ACL_SUCCESS;
}

/* dlopen of a host object given as bytes: through a memfd (or a temporary file). */
static void *dlopen_image(const uint8_t *image, size_t size, char *err, size_t errlen)
{
    int fd = memfd_create("aclmock_twins", MFD_CLOEXEC);
    char path[64];
    bool tmp = false;
    if (fd < 0) {
        snprintf(path, sizeof path, "/tmp/aclmock_twins_XXXXXX");
        fd = mkstemp(path);
        tmp = true;
    }
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a file for the object: %s", strerror(errno));
        return NULL;
    }
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, image + done, size - done);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            break;
        }
        done += (size_t)w;
    }
    void *h = NULL;
    if (done == size) {
        char name[64];
        if (!tmp) {
            snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
        }
        h = dlopen(tmp ? path : name, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            const char *e = dlerror();
            snprintf(err, errlen, "%s", e != NULL ? e : "dlopen failed");
        }
    } else {
        snprintf(err, errlen, "cannot write the object: %s", strerror(errno));
    }
    if (tmp) {
        unlink(path);
    }
    close(fd);
    return h;
}

/* Reads the twin table of a loaded host object: the `aclmock_kernels` section at
 * `bias` + its address. Each entry is a pointer to a descriptor, checked like a
 * registered one. Errors under fn. */
static aclError read_table(const char *fn, kernel_binary *b, uintptr_t bias)
{
    const kernel_elf_section *sec = kernel_elf_section_named(&b->elf, ACLMOCK_KERNEL_SECTION);
    size_t n = sec != NULL ? (size_t)(sec->size / sizeof(void *)) : 0;
    if (n == 0) {
        return ACL_SUCCESS;
    }
    b->own = calloc(n, sizeof *b->own);
    if (b->own == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    const aclmockKernelDesc *const *entries = (const aclmockKernelDesc *const *)(bias + (uintptr_t)sec->addr);
    for (size_t i = 0; i < n; i++) {
        const aclmockKernelDesc *d = entries[i];
        if (d == NULL) {
            continue;
        }
        char where[300];
        snprintf(where, sizeof where, "twin %zu of '%.200s'", i, b->path);
        aclError rc = kernel_twin_check(fn, d, where);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
        for (size_t k = 0; k < b->nown; k++) {
            if (strcmp(b->own[k]->name, d->name) == 0) {
                return core_error(fn, ACL_ERROR_RT_KERNEL_DUPLICATE, "'%s' declares kernel '%s' twice", b->path,
                                  d->name);
            }
        }
        kernel_twin *t = kernel_twin_new(d);
        if (t == NULL) {
            return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        }
        b->own[b->nown++] = t;
    }
    return ACL_SUCCESS;
}

/* Loads a host twin object (b->image parsed, with the table section). */
static aclError load_host(const char *fn, kernel_binary *b, const char *path)
{
    char err[256];
    err[0] = '\0';
    if (path != NULL) {
        b->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (b->dl == NULL) {
            const char *e = dlerror();
            snprintf(err, sizeof err, "%s", e != NULL ? e : "dlopen failed");
        }
    } else {
        b->dl = dlopen_image(b->image, b->image_size, err, sizeof err);
    }
    if (b->dl == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_FILE, "cannot load the host twin object '%s': %s", b->path, err);
    }
    struct link_map *lm = NULL;
    if (dlinfo(b->dl, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_FILE, "cannot locate the host twin object '%s' in memory", b->path);
    }
    return read_table(fn, b, (uintptr_t)lm->l_addr);
}

/* The common part of every load: parse, classify, device copy, publish. Takes the
 * ownership of `image` (freed on failure). `path` is the absolute file name, or NULL
 * for data. */
static aclError load_common(const char *fn, const char *path, uint8_t *image, size_t size, const load_opts *o,
                            aclrtBinHandle *out)
{
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        free(image);
        return rc;
    }
    kernel_binary *b = calloc(1, sizeof *b);
    if (b == NULL) {
        free(image);
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    b->magic = BIN_MAGIC;
    atomic_init(&b->refs, 1);
    b->device = core_ctx_device(ctx);
    b->from_file = path != NULL;
    b->cpu_kernels = o->cpu_mode == 2;
    b->magic_opt = o->magic;
    b->image = image;
    b->image_size = size;
    b->path = strdup(path != NULL ? path : "<data>");
    char err[256];
    if (b->path == NULL) {
        rc = core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        goto fail;
    }
    if (!kernel_elf_parse(image, size, &b->elf, err, sizeof err)) {
        rc = core_error(fn, ACL_ERROR_PARSE_FILE, "'%s' is not a valid kernel binary: %s", b->path, err);
        goto fail;
    }
    bool host = kernel_elf_is_host(&b->elf) && b->elf.type == ET_DYN &&
                kernel_elf_section_named(&b->elf, ACLMOCK_KERNEL_SECTION) != NULL;
    b->kind = host ? KERNEL_BIN_HOST : KERNEL_BIN_DEVICE;
    if (host && (rc = load_host(fn, b, path)) != ACL_SUCCESS) {
        goto fail;
    }
    if (size > SIZE_MAX - b->elf.nobits_size - 64) {
        rc = core_error(fn, ACL_ERROR_INVALID_FILE_SIZE, "'%s' is too large", b->path);
        goto fail;
    }
    b->dev_size = size + (size_t)b->elf.nobits_size;
    if (b->elf.nobits_size != 0) {
        b->dev_size = ((size + 63) & ~(size_t)63) + (size_t)b->elf.nobits_size;
    }
    if (!o->lazy && (rc = ensure_device_copy(fn, b)) != ACL_SUCCESS) {
        goto fail;
    }
    core_mutex_lock(&kernel_mu);
    bool ok = core_registry_insert(&g_bins, b);
    core_mutex_unlock(&kernel_mu);
    if (!ok) {
        rc = core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        goto fail;
    }
    *out = b;
    return ACL_SUCCESS;
fail:
    binary_free(b);
    return rc;
}

aclError aclrtBinaryLoadFromFile(const char *binPath, aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle)
{
    static const char fn[] = "aclrtBinaryLoadFromFile";
    MOCK_REQUIRE_NONNULL(fn, binPath);
    MOCK_REQUIRE_NONNULL(fn, binHandle);
    if (binPath[0] != '/') {
        /* KRN#aclrtBinaryLoadFromFile: the path must be absolute */
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'binPath' ('%.200s') is not an absolute path",
                          binPath);
    }
    load_opts o;
    aclError rc = parse_options(fn, options, &o);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (o.cpu_mode == 0 || o.cpu_mode == 1) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "AI CPU op-info JSON files (cpuKernelMode %d) are not simulated by the mock", o.cpu_mode);
    }
    if (o.cpu_mode == 2) {
        /* RTS-E/EE1017: mode 2 is for aclrtBinaryLoadFromData */
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "cpuKernelMode 2 is only valid with aclrtBinaryLoadFromData");
    }
    MOCK_ENTER(fn);
    uint8_t *image = NULL;
    size_t size = 0;
    rc = read_file(fn, binPath, &image, &size);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return load_common(fn, binPath, image, size, &o, binHandle);
}

static aclError load_data(const char *fn, const void *data, size_t length, const load_opts *o,
                          aclrtBinHandle *binHandle)
{
    if ((uint64_t)length > MAX_IMAGE) {
        return core_error(fn, ACL_ERROR_INVALID_FILE_SIZE, "the binary (%zu bytes) is larger than 1 GiB", length);
    }
    uint8_t *image = malloc(length);
    if (image == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory for %zu bytes", length);
    }
    memcpy(image, data, length);
    return load_common(fn, NULL, image, length, o, binHandle);
}

aclError aclrtBinaryLoadFromData(const void *data, size_t length, const aclrtBinaryLoadOptions *options,
                                 aclrtBinHandle *binHandle)
{
    static const char fn[] = "aclrtBinaryLoadFromData";
    MOCK_REQUIRE_NONNULL(fn, data);
    MOCK_REQUIRE_NONNULL(fn, binHandle);
    if (length == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'length' is 0");
    }
    load_opts o;
    aclError rc = parse_options(fn, options, &o);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (o.cpu_mode == 0 || o.cpu_mode == 1) {
        /* KRN#aclrtBinaryLoadFromData, RTS-E/EE1017: from data the mode must be 2 */
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "cpuKernelMode %d is not valid with aclrtBinaryLoadFromData (must be 2)", o.cpu_mode);
    }
    MOCK_ENTER(fn);
    return load_data(fn, data, length, &o, binHandle);
}

aclrtBinary aclrtCreateBinary(const void *data, size_t dataLen)
{
    static const char fn[] = "aclrtCreateBinary";
    if (data == NULL) {
        (void)core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'data' is NULL");
        return NULL;
    }
    if (dataLen == 0) {
        (void)core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataLen' is 0");
        return NULL;
    }
    if (core_fault_check(fn) != ACL_SUCCESS) {
        return NULL;
    }
    bin_desc *d = calloc(1, sizeof *d);
    if (d == NULL) {
        (void)core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    d->magic = DESC_MAGIC;
    d->data = data; /* not copied: the caller keeps (and frees) the data */
    d->size = dataLen;
    core_mutex_lock(&kernel_mu);
    bool ok = core_registry_insert(&g_descs, d);
    core_mutex_unlock(&kernel_mu);
    if (!ok) {
        free(d);
        (void)core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    return d;
}

aclError aclrtDestroyBinary(aclrtBinary binary)
{
    static const char fn[] = "aclrtDestroyBinary";
    MOCK_REQUIRE_NONNULL(fn, binary);
    MOCK_ENTER(fn);
    core_mutex_lock(&kernel_mu);
    bool ok = core_registry_erase(&g_descs, binary);
    core_mutex_unlock(&kernel_mu);
    if (!ok) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'binary' (%p) is not a live aclrtBinary", binary);
    }
    bin_desc *d = binary;
    d->magic = 0;
    free(d);
    return ACL_SUCCESS;
}

aclError aclrtBinaryLoad(const aclrtBinary binary, aclrtBinHandle *binHandle)
{
    static const char fn[] = "aclrtBinaryLoad";
    MOCK_REQUIRE_NONNULL(fn, binary);
    MOCK_REQUIRE_NONNULL(fn, binHandle);
    MOCK_ENTER(fn);
    core_mutex_lock(&kernel_mu);
    bin_desc *d = core_registry_find(&g_descs, binary);
    const void *data = d != NULL ? d->data : NULL;
    size_t size = d != NULL ? d->size : 0;
    core_mutex_unlock(&kernel_mu);
    if (d == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'binary' (%p) is not a live aclrtBinary", binary);
    }
    load_opts o = {false, 0, -1};
    return load_data(fn, data, size, &o, binHandle);
}

/* Forgets the handles of b's functions and lists (kernel_mu held). */
static void forget_handles_locked(kernel_binary *b);

aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle)
{
    static const char fn[] = "aclrtBinaryUnLoad";
    MOCK_REQUIRE_NONNULL(fn, binHandle);
    MOCK_ENTER(fn);
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int32_t dev = core_ctx_device(ctx);
    enum { GONE, NOT_LOADED, OTHER_DEVICE } got = GONE;
    int32_t bdev = -1;
    core_mutex_lock(&kernel_mu);
    kernel_binary *b = core_registry_find(&g_bins, binHandle);
    if (b == NULL) {
        got = NOT_LOADED;
    } else if (b->device != dev) {
        got = OTHER_DEVICE;
        bdev = b->device;
    } else {
        core_registry_erase(&g_bins, b);
        forget_handles_locked(b);
    }
    core_mutex_unlock(&kernel_mu);
    if (got == NOT_LOADED) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'binHandle' (%p) is not a loaded binary (unloaded already?)", binHandle);
    }
    if (got == OTHER_DEVICE) {
        /* KRN#aclrtBinaryUnLoad: unload in the context of the load (mock: on its device) */
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "the binary was loaded on device %d but the current context is on device %d", bdev, dev);
    }
    kernel_binary_put(b); /* launches still queued keep it until they ran */
    return ACL_SUCCESS;
}

static void forget_handles_locked(kernel_binary *b)
{
    for (kernel_func *f = b->funcs; f != NULL; f = f->next) {
        core_registry_erase(&g_funcs, f);
    }
    kernel_args_forget_locked(b->lists);
}

void kernel_binaries_finalize(void)
{
    kernel_binary *all[256];
    for (;;) {
        size_t n = 0;
        core_mutex_lock(&kernel_mu);
        for (size_t i = 0; i < g_bins.cap && n < 256; i++) {
            kernel_binary *b = core_registry_slot(&g_bins, i);
            if (b != NULL) {
                all[n++] = b;
            }
        }
        for (size_t i = 0; i < n; i++) {
            core_registry_erase(&g_bins, all[i]);
            forget_handles_locked(all[i]);
        }
        for (int32_t d = 0; d < MOCK_MAX_DEVICES && n < 256; d++) {
            if (g_modules[d] != NULL) {
                forget_handles_locked(g_modules[d]);
                all[n++] = g_modules[d];
                g_modules[d] = NULL;
            }
        }
        if (n == 0) {
            core_registry_release(&g_bins);
            core_registry_release(&g_funcs);
        }
        core_mutex_unlock(&kernel_mu);
        if (n == 0) {
            break;
        }
        for (size_t i = 0; i < n; i++) {
            kernel_binary_put(all[i]);
        }
    }
}

/* ------------------------------------------------------------ functions */

/* A new function of b (kernel_mu held); NULL when out of memory. */
static kernel_func *func_new_locked(kernel_binary *b, const char *name)
{
    kernel_func *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return NULL;
    }
    f->name = strdup(name);
    if (f->name == NULL || !core_registry_insert(&g_funcs, f)) {
        free(f->name);
        free(f);
        return NULL;
    }
    f->magic = FUNC_MAGIC;
    f->bin = b;
    f->type = -1;
    f->next = b->funcs;
    b->funcs = f;
    return f;
}

static kernel_func *func_by_name_locked(kernel_binary *b, const char *name)
{
    for (kernel_func *f = b->funcs; f != NULL; f = f->next) {
        if (strcmp(f->name, name) == 0) {
            return f;
        }
    }
    return NULL;
}

/* Code location of a symbol in the device copy. */
static bool code_of(const kernel_binary *b, const kernel_elf_sym *y, uint64_t *off, uint64_t *size)
{
    uint64_t nobits_base = ((b->image_size + 63) & ~(size_t)63);
    if (y == NULL || !kernel_elf_symbol_offset(&b->elf, y, nobits_base, off)) {
        return false;
    }
    *size = y->size;
    return true;
}

/* Up to `len` bytes of ", "-separated kernel names of b, for messages. */
static void list_names(const kernel_binary *b, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    if (b->kind != KERNEL_BIN_DEVICE) {
        for (size_t i = 0; i < b->nown && used + 1 < len; i++) {
            used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", b->own[i]->name);
        }
    } else {
        size_t k = 0;
        for (size_t i = 0; i < b->elf.nsyms && used + 1 < len; i++) {
            if (b->elf.syms[i].type == STT_FUNC) {
                used += (size_t)snprintf(buf + used, len - used, "%s%s", k++ ? ", " : "", b->elf.syms[i].name);
            }
        }
    }
    if (buf[0] == '\0') {
        snprintf(buf, len, "none");
    }
}

/* Creates (or finds) the function `name` of b (kernel_mu held). *missing: not in b. */
static kernel_func *func_get_locked(kernel_binary *b, const char *name, bool *missing)
{
    *missing = false;
    kernel_func *f = func_by_name_locked(b, name);
    if (f != NULL) {
        return f;
    }
    if (b->kind != KERNEL_BIN_DEVICE) {
        kernel_twin *t = NULL;
        for (size_t i = 0; i < b->nown && t == NULL; i++) {
            t = strcmp(b->own[i]->name, name) == 0 ? b->own[i] : NULL;
        }
        if (t == NULL) {
            *missing = true;
            return NULL;
        }
        f = func_new_locked(b, name);
        if (f == NULL) {
            return NULL;
        }
        kernel_twin_ref(t);
        f->own = t;
        uint64_t off = 0, size = 0;
        int32_t type = kernel_type_of_flags(t->desc.flags);
        bool located = code_of(b, kernel_elf_symbol(&b->elf, name, true), &off, &size);
        f->has_aic = type != ACL_KERNEL_TYPE_VECTOR && type != ACL_KERNEL_TYPE_AICPU;
        f->has_aiv = type == ACL_KERNEL_TYPE_VECTOR || type == ACL_KERNEL_TYPE_MIX;
        f->aic_off = f->aiv_off = located ? off : 0;
        f->aic_size = f->aiv_size = located ? size : 0;
        return f;
    }
    /* a device ELF: the name, or a MIX kernel's "<name>_mix_aic" / "<name>_mix_aiv" pair */
    const kernel_elf_sym *y = kernel_elf_symbol(&b->elf, name, true);
    char mix[300];
    snprintf(mix, sizeof mix, "%s_mix_aic", name);
    const kernel_elf_sym *aic = y == NULL ? kernel_elf_symbol(&b->elf, mix, true) : NULL;
    snprintf(mix, sizeof mix, "%s_mix_aiv", name);
    const kernel_elf_sym *aiv = y == NULL ? kernel_elf_symbol(&b->elf, mix, true) : NULL;
    if (y == NULL && aic == NULL && aiv == NULL) {
        *missing = true;
        return NULL;
    }
    f = func_new_locked(b, name);
    if (f == NULL) {
        return NULL;
    }
    if (y == NULL) {
        f->type = ACL_KERNEL_TYPE_MIX;
    } else if (b->magic_opt == ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE) {
        f->type = ACL_KERNEL_TYPE_VECTOR;
    } else if (b->magic_opt == ACL_RT_BINARY_MAGIC_ELF_CUBE_CORE) {
        f->type = ACL_KERNEL_TYPE_CUBE;
    } else if (b->magic_opt == ACL_RT_BINARY_MAGIC_ELF_AICORE) {
        f->type = ACL_KERNEL_TYPE_AICORE;
    }
    if (y != NULL) {
        bool vec = f->type == ACL_KERNEL_TYPE_VECTOR;
        uint64_t off = 0, size = 0;
        bool ok = code_of(b, y, &off, &size);
        f->has_aic = !vec;
        f->has_aiv = vec;
        f->aic_off = f->aiv_off = ok ? off : 0;
        f->aic_size = f->aiv_size = ok ? size : 0;
    } else {
        f->has_aic = code_of(b, aic, &f->aic_off, &f->aic_size);
        f->has_aiv = code_of(b, aiv, &f->aiv_off, &f->aiv_size);
    }
    return f;
}

aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char *kernelName, aclrtFuncHandle *funcHandle)
{
    static const char fn[] = "aclrtBinaryGetFunction";
    MOCK_REQUIRE_NONNULL(fn, kernelName);
    MOCK_REQUIRE_NONNULL(fn, funcHandle);
    MOCK_ENTER(fn);
    kernel_binary *b = NULL;
    aclError rc = bin_acquire(fn, binHandle, &b);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (b->cpu_kernels) {
        kernel_binary_put(b);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "the binary was loaded with cpuKernelMode 2: register its AI CPU kernels with "
                          "aclrtRegisterCpuFunc");
    }
    /* KRN#aclrtBinaryGetFunction: the first call copies a lazily loaded binary */
    rc = ensure_device_copy(fn, b);
    if (rc != ACL_SUCCESS) {
        kernel_binary_put(b);
        return rc;
    }
    bool missing = false;
    char names[200];
    core_mutex_lock(&kernel_mu);
    kernel_func *f = func_get_locked(b, kernelName, &missing);
    if (missing) {
        list_names(b, names, sizeof names);
    }
    core_mutex_unlock(&kernel_mu);
    if (missing) {
        /* mock choice: ACL_ERROR_RT_SYMBOL_NOT_FOUND for a name the binary lacks */
        rc = core_error(fn, ACL_ERROR_RT_SYMBOL_NOT_FOUND, "binary '%.200s' has no kernel '%.200s' (its kernels: %s)",
                        b->path, kernelName, names);
    } else if (f == NULL) {
        rc = core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    } else {
        *funcHandle = f;
    }
    kernel_binary_put(b);
    return rc;
}

aclError aclrtRegisterCpuFunc(const aclrtBinHandle handle, const char *funcName, const char *kernelName,
                              aclrtFuncHandle *funcHandle)
{
    static const char fn[] = "aclrtRegisterCpuFunc";
    MOCK_REQUIRE_NONNULL(fn, funcName);
    MOCK_REQUIRE_NONNULL(fn, kernelName);
    MOCK_REQUIRE_NONNULL(fn, funcHandle);
    MOCK_ENTER(fn);
    kernel_binary *b = NULL;
    aclError rc = bin_acquire(fn, handle, &b);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (!b->cpu_kernels) {
        kernel_binary_put(b);
        /* KRN#aclrtRegisterCpuFunc: AI CPU binaries (loaded from data, mode 2) only */
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "the binary is not an AI CPU binary loaded from data with cpuKernelMode 2");
    }
    bool bad_type = false;
    core_mutex_lock(&kernel_mu);
    kernel_func *f = func_by_name_locked(b, funcName);
    if (f == NULL) {
        f = func_new_locked(b, funcName);
        if (f != NULL) {
            f->type = ACL_KERNEL_TYPE_AICPU;
            f->op_type = strdup(kernelName);
        }
    } else {
        bad_type = f->op_type == NULL || strcmp(f->op_type, kernelName) != 0;
    }
    core_mutex_unlock(&kernel_mu);
    if (f == NULL) {
        rc = core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    } else if (bad_type) {
        rc = core_error(fn, ACL_ERROR_RT_KERNEL_DUPLICATE, "'%s' is registered already with another kernelName",
                        funcName);
    } else {
        *funcHandle = f;
    }
    kernel_binary_put(b);
    return rc;
}

/* ------------------------------------------------------ aclrtGetFuncBySymbol */

typedef struct module_find {
    uintptr_t addr;
    char path[4096];
    uintptr_t bias;
    bool found;
} module_find;

static int module_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    module_find *m = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && m->addr >= start && m->addr < start + ph->p_memsz) {
            snprintf(m->path, sizeof m->path, "%s", info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe");
            m->bias = info->dlpi_addr;
            m->found = true;
            return 1;
        }
    }
    return 0;
}

/* The module binary of `device` (kernel_mu held), created empty on first use. */
static kernel_binary *module_locked(int32_t device)
{
    if (g_modules[device] == NULL) {
        kernel_binary *b = calloc(1, sizeof *b);
        if (b == NULL || (b->path = strdup("<program>")) == NULL) {
            free(b);
            return NULL;
        }
        b->magic = BIN_MAGIC;
        atomic_init(&b->refs, 1);
        b->kind = KERNEL_BIN_MODULE;
        b->device = device;
        g_modules[device] = b;
    }
    return g_modules[device];
}

/* Finds the descriptor of the twin at `symbol` in the aclmock_kernels table of the
 * module containing it (read from its ELF file). A new twin, or NULL. */
static kernel_twin *twin_in_module(const void *symbol)
{
    module_find m;
    memset(&m, 0, sizeof m);
    m.addr = (uintptr_t)symbol;
    dl_iterate_phdr(module_cb, &m);
    if (!m.found) {
        return NULL;
    }
    uint8_t *image = NULL;
    size_t size = 0;
    int fd = open(m.path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        return NULL;
    }
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= MAX_IMAGE) {
        size = (size_t)st.st_size;
        image = malloc(size ? size : 1);
        if (image != NULL && pread(fd, image, size, 0) != (ssize_t)size) {
            free(image);
            image = NULL;
        }
    }
    close(fd);
    kernel_twin *t = NULL;
    kernel_elf e;
    char err[128];
    if (image != NULL && kernel_elf_parse(image, size, &e, err, sizeof err)) {
        const kernel_elf_section *sec = kernel_elf_section_named(&e, ACLMOCK_KERNEL_SECTION);
        size_t n = sec != NULL ? (size_t)(sec->size / sizeof(void *)) : 0;
        uintptr_t bias = e.type == ET_DYN ? m.bias : 0;
        const aclmockKernelDesc *const *entries =
            n ? (const aclmockKernelDesc *const *)(bias + (uintptr_t)sec->addr) : NULL;
        for (size_t i = 0; i < n && t == NULL; i++) {
            const aclmockKernelDesc *d = entries[i];
            if (d != NULL && ((const void *)(uintptr_t)d->fn == symbol || (const void *)d == symbol) &&
                kernel_twin_check("aclrtGetFuncBySymbol", d, "the declared twin") == ACL_SUCCESS) {
                t = kernel_twin_new(d);
            }
        }
        kernel_elf_free(&e);
    }
    free(image);
    return t;
}

/* The function of the twin at `symbol` on the current device (module binary), with a
 * reference on that binary; errors under fn. */
static aclError func_by_symbol(const char *fn, const void *symbol, kernel_func **out)
{
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int32_t dev = core_ctx_device(ctx);
    /* a twin already known, a registered twin, or one declared in a module */
    kernel_twin *found = NULL;
    kernel_func *f = NULL;
    core_mutex_lock(&kernel_mu);
    kernel_binary *mod = module_locked(dev);
    for (kernel_func *x = mod != NULL ? mod->funcs : NULL; x != NULL && f == NULL; x = x->next) {
        if ((const void *)(uintptr_t)x->own->desc.fn == symbol) {
            f = x;
        }
    }
    if (f == NULL && mod != NULL) {
        found = kernel_twin_find_symbol_locked(symbol);
        if (found != NULL) {
            kernel_twin_ref(found);
        }
    }
    if (f != NULL) {
        kernel_binary_ref(mod);
    }
    core_mutex_unlock(&kernel_mu);
    if (mod == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    if (f == NULL && found == NULL) {
        found = twin_in_module(symbol);
    }
    if (f == NULL && found == NULL) {
        return core_error(fn, ACL_ERROR_RT_INVALID_SYMBOL,
                          "no kernel twin is declared at %p (declare it with ACLMOCK_KERNEL or register it with "
                          "aclmockRegisterKernel)",
                          symbol);
    }
    if (f == NULL) {
        core_mutex_lock(&kernel_mu);
        for (kernel_func *x = mod->funcs; x != NULL && f == NULL; x = x->next) {
            f = x->own->desc.fn == found->desc.fn ? x : NULL; /* another thread was quicker */
        }
        if (f == NULL) {
            f = func_new_locked(mod, found->name);
            if (f != NULL) {
                f->own = found;
                found = NULL;
                f->has_aic = true;
            }
        }
        if (f != NULL) {
            kernel_binary_ref(mod);
        }
        core_mutex_unlock(&kernel_mu);
        kernel_twin_put(found);
    }
    if (f == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    *out = f;
    return ACL_SUCCESS;
}

/* 950, A3, A2 and 310P have aclrtGetFuncBySymbol (and mixed compilation). */
static aclError symbols_supported(const char *fn)
{
    return core_soc_require(fn, CORE_SOC_950 | CORE_SOC_BIT(CORE_SOC_A3) | CORE_SOC_BIT(CORE_SOC_A2) |
                                    CORE_SOC_BIT(CORE_SOC_310P));
}

aclError aclrtGetFuncBySymbol(const void *symbol, aclrtFuncHandle *funcHandle)
{
    static const char fn[] = "aclrtGetFuncBySymbol";
    MOCK_REQUIRE_NONNULL(fn, symbol);
    MOCK_REQUIRE_NONNULL(fn, funcHandle);
    aclError rc = symbols_supported(fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    rc = func_by_symbol(fn, symbol, &f);
    if (rc == ACL_SUCCESS) {
        *funcHandle = f;
        kernel_binary_put(f->bin);
    }
    return rc;
}

aclError kernel_func_or_symbol(const char *fn, const void *func, kernel_func **out)
{
    if (func == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'func' is NULL");
    }
    core_mutex_lock(&kernel_mu);
    kernel_func *f = kernel_func_find_locked(func);
    if (f != NULL) {
        kernel_binary_ref(f->bin);
    }
    core_mutex_unlock(&kernel_mu);
    if (f != NULL) {
        *out = f;
        return ACL_SUCCESS;
    }
    aclError rc = symbols_supported(fn);
    return rc != ACL_SUCCESS ? rc : func_by_symbol(fn, func, out);
}

/* ------------------------------------------------------------ binary info */

aclError aclrtBinaryGetDevAddress(const aclrtBinHandle binHandle, void **binAddr, size_t *binSize)
{
    static const char fn[] = "aclrtBinaryGetDevAddress";
    MOCK_REQUIRE_NONNULL(fn, binAddr);
    MOCK_REQUIRE_NONNULL(fn, binSize);
    MOCK_ENTER(fn);
    kernel_binary *b = NULL;
    aclError rc = bin_acquire(fn, binHandle, &b);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&kernel_mu);
    *binAddr = b->dev_copy; /* NULL while a lazily loaded binary is not copied yet */
    *binSize = b->dev_size;
    core_mutex_unlock(&kernel_mu);
    kernel_binary_put(b);
    return ACL_SUCCESS;
}

aclError aclrtBinaryGetGlobal(aclrtBinHandle binHandle, const char *name, void **dptr, size_t *size)
{
    static const char fn[] = "aclrtBinaryGetGlobal";
    MOCK_REQUIRE_NONNULL(fn, name);
    if (dptr == NULL && size == NULL) {
        /* KRN#aclrtBinaryGetGlobal: either output may be NULL, not both */
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "arguments 'dptr' and 'size' are both NULL");
    }
    MOCK_ENTER(fn);
    kernel_binary *b = NULL;
    aclError rc = bin_acquire(fn, binHandle, &b);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    void *addr = NULL;
    uint64_t bytes = 0;
    bool found = false;
    const kernel_elf_sym *y = kernel_elf_symbol(&b->elf, name, false);
    if (y != NULL && y->type == STT_FUNC) {
        y = NULL; /* a kernel, not a global */
    }
    if (b->kind == KERNEL_BIN_HOST) {
        /* the twins use the object's own (host) globals */
        addr = y != NULL ? dlsym(b->dl, name) : NULL;
        found = addr != NULL;
        bytes = y != NULL ? y->size : 0;
    } else if (y != NULL && (rc = ensure_device_copy(fn, b)) == ACL_SUCCESS) {
        uint64_t off = 0;
        found = code_of(b, y, &off, &bytes) && off + bytes <= b->dev_size;
        core_mutex_lock(&kernel_mu);
        addr = found ? (uint8_t *)b->dev_copy + off : NULL;
        core_mutex_unlock(&kernel_mu);
    }
    kernel_binary_put(b);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (!found) {
        return core_error(fn, ACL_ERROR_RT_SYMBOL_NOT_FOUND,
                          "the binary has no global variable '%.200s' (check the global name)", name);
    }
    if (dptr != NULL) {
        *dptr = addr;
    }
    if (size != NULL) {
        *size = (size_t)bytes;
    }
    return ACL_SUCCESS;
}

aclError aclrtBinarySetExceptionCallback(aclrtBinHandle binHandle, aclrtOpExceptionCallback callback, void *userData)
{
    static const char fn[] = "aclrtBinarySetExceptionCallback";
    MOCK_ENTER(fn);
    kernel_binary *b = NULL;
    aclError rc = bin_acquire(fn, binHandle, &b);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&kernel_mu);
    b->cb = callback; /* the last registration wins; NULL removes it */
    b->cb_data = userData;
    core_mutex_unlock(&kernel_mu);
    kernel_binary_put(b);
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ function info */

aclError aclrtFunctionGetBinary(const aclrtFuncHandle funcHandle, aclrtBinHandle *binHandle)
{
    static const char fn[] = "aclrtFunctionGetBinary";
    MOCK_REQUIRE_NONNULL(fn, binHandle);
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "funcHandle", funcHandle, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *binHandle = f->bin;
    kernel_binary_put(f->bin);
    return ACL_SUCCESS;
}

/* The twin of f that describes its parameters, or an error naming what is missing. */
static aclError described_twin(const char *fn, const kernel_func *f, kernel_twin **out)
{
    kernel_twin *t = kernel_func_twin(f);
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "kernel '%s' has no host twin, so the mock does not know its parameters", f->name);
    }
    if (t->desc.numParams == ACLMOCK_PARAMS_UNKNOWN) {
        kernel_twin_put(t);
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "the twin of kernel '%s' does not describe its parameters (register it with "
                          "aclmockRegisterKernelDesc)",
                          f->name);
    }
    *out = t;
    return ACL_SUCCESS;
}

aclError aclrtFunctionGetParamCount(const void *func, size_t *paramCount)
{
    static const char fn[] = "aclrtFunctionGetParamCount";
    MOCK_REQUIRE_NONNULL(fn, paramCount);
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "func", func, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_twin *t = NULL;
    rc = described_twin(fn, f, &t);
    if (rc == ACL_SUCCESS) {
        *paramCount = t->desc.numParams;
        kernel_twin_put(t);
    }
    kernel_binary_put(f->bin);
    return rc;
}

aclError aclrtFunctionGetParamInfo(const void *func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    static const char fn[] = "aclrtFunctionGetParamInfo";
    MOCK_REQUIRE_NONNULL(fn, paramOffset);
    MOCK_REQUIRE_NONNULL(fn, paramSize);
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "func", func, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_twin *t = NULL;
    rc = described_twin(fn, f, &t);
    if (rc == ACL_SUCCESS) {
        if (paramIndex >= t->desc.numParams) {
            /* KRN#aclrtFunctionGetParamInfo: the index is in [0, count-1] */
            rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'paramIndex' (%zu) is not below the count (%u)",
                            paramIndex, t->desc.numParams);
        } else {
            *paramOffset = t->offsets[paramIndex];
            *paramSize = t->params[paramIndex].size;
        }
        kernel_twin_put(t);
    }
    kernel_binary_put(f->bin);
    return rc;
}

aclError aclrtFunctionGetAvailDynUbufPerBlock(void *func, uint32_t flags, size_t *dynamicUbufSize)
{
    static const char fn[] = "aclrtFunctionGetAvailDynUbufPerBlock";
    MOCK_REQUIRE_NONNULL(fn, func);
    MOCK_REQUIRE_NONNULL(fn, dynamicUbufSize);
    if (flags != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flags' (%u) must be 0", flags);
    }
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "func", func, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_twin *t = kernel_func_twin(f);
    bool simt = t != NULL && (t->desc.flags & ACLMOCK_KERNEL_SIMT) != 0;
    int32_t dev = f->bin->device;
    kernel_twin_put(t);
    kernel_binary_put(f->bin);
    int64_t ub = 0;
    /* KRN#...GetAvailDynUbufPerBlock: 0 for a non-SIMT kernel; a SIMT kernel may use the
     * unified buffer of a vector core (mock choice: all of it) */
    if (simt && (rc = aclrtGetDeviceInfo((uint32_t)dev, ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE, &ub)) != ACL_SUCCESS) {
        return rc;
    }
    *dynamicUbufSize = (size_t)ub;
    return ACL_SUCCESS;
}

aclError aclrtGetFunctionAddr(aclrtFuncHandle funcHandle, void **aicAddr, void **aivAddr)
{
    static const char fn[] = "aclrtGetFunctionAddr";
    MOCK_REQUIRE_NONNULL(fn, aicAddr);
    MOCK_REQUIRE_NONNULL(fn, aivAddr);
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "funcHandle", funcHandle, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_binary *b = f->bin;
    if (b->kind == KERNEL_BIN_MODULE) {
        /* a twin of the program itself has no device image: its host address */
        *aicAddr = (void *)(uintptr_t)f->own->desc.fn;
        *aivAddr = NULL;
    } else {
        core_mutex_lock(&kernel_mu);
        uint8_t *base = b->dev_copy;
        core_mutex_unlock(&kernel_mu);
        *aicAddr = (f->has_aic && base != NULL) ? base + f->aic_off : NULL;
        *aivAddr = (f->has_aiv && base != NULL) ? base + f->aiv_off : NULL;
    }
    kernel_binary_put(b);
    return ACL_SUCCESS;
}

aclError aclrtGetFunctionSize(aclrtFuncHandle funcHandle, size_t *aicSize, size_t *aivSize)
{
    static const char fn[] = "aclrtGetFunctionSize";
    MOCK_REQUIRE_NONNULL(fn, aicSize);
    MOCK_REQUIRE_NONNULL(fn, aivSize);
    /* KRN#aclrtGetFunctionSize: 950, A3, A2, 310P */
    aclError soc_rc = core_soc_require(fn, CORE_SOC_950 | CORE_SOC_BIT(CORE_SOC_A3) | CORE_SOC_BIT(CORE_SOC_A2) |
                                               CORE_SOC_BIT(CORE_SOC_310P));
    if (soc_rc != ACL_SUCCESS) {
        return soc_rc;
    }
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "funcHandle", funcHandle, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *aicSize = f->has_aic ? (size_t)f->aic_size : 0; /* 0 for a core type it does not use */
    *aivSize = f->has_aiv ? (size_t)f->aiv_size : 0;
    kernel_binary_put(f->bin);
    return ACL_SUCCESS;
}

aclError aclrtGetFunctionName(aclrtFuncHandle funcHandle, uint32_t maxLen, char *name)
{
    static const char fn[] = "aclrtGetFunctionName";
    MOCK_REQUIRE_NONNULL(fn, name);
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "funcHandle", funcHandle, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    size_t len = strlen(f->name);
    if ((size_t)maxLen <= len) {
        /* mock choice: too small a buffer is an error, never a truncated name */
        rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'maxLen' (%u) is too small for '%s' (%zu bytes needed)",
                        maxLen, f->name, len + 1);
    } else {
        memcpy(name, f->name, len + 1);
    }
    kernel_binary_put(f->bin);
    return rc;
}

aclError aclrtGetFunctionAttribute(aclrtFuncHandle funcHandle, aclrtFuncAttribute attrType, int64_t *attrValue)
{
    static const char fn[] = "aclrtGetFunctionAttribute";
    MOCK_REQUIRE_NONNULL(fn, attrValue);
    int a = (int)attrType;
    if (a < ACL_FUNC_ATTR_KERNEL_TYPE || a > ACL_FUNC_ATTR_KERNEL_SCHED_MODE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'attrType' (%d) is not an aclrtFuncAttribute (1..3)",
                          a);
    }
    core_soc_family soc = core_soc_family_get();
    if (a == ACL_FUNC_ATTR_KERNEL_RATIO && soc != CORE_SOC_A2 && soc != CORE_SOC_A3 && soc != CORE_SOC_310P) {
        /* ENUM#aclrtFuncAttribute: only A3, A2 and 310P have the ratio */
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "ACL_FUNC_ATTR_KERNEL_RATIO is not available on %s",
                          core_config_get()->soc_name);
    }
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "funcHandle", funcHandle, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_twin *t = kernel_func_twin(f);
    int32_t type = kernel_func_type(f, t);
    bool batch = t != NULL && (t->desc.flags & ACLMOCK_KERNEL_SCHED_BATCH) != 0;
    kernel_twin_put(t);
    kernel_binary_put(f->bin);
    switch (a) {
    case ACL_FUNC_ATTR_KERNEL_TYPE:
        *attrValue = type;
        break;
    case ACL_FUNC_ATTR_KERNEL_RATIO: {
        /* element [1] = cube share, [0] = vector share (mock choice: a MIX kernel uses
         * one cube and two vector cores, as the AI cores of A2/A3 are built) */
        uint16_t cube = 0, vec = 0;
        switch (type) {
        case ACL_KERNEL_TYPE_MIX: cube = 1; vec = 2; break;
        case ACL_KERNEL_TYPE_VECTOR: vec = 1; break;
        case ACL_KERNEL_TYPE_AICPU: break;
        default: cube = 1; break;
        }
        *attrValue = (int64_t)(((uint32_t)cube << 16) | vec);
        break;
    }
    default:
        *attrValue = batch ? 1 : 0;
        break;
    }
    return ACL_SUCCESS;
}
