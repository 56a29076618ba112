/*
 * twin.c - host twins: descriptor checks, twin objects, and the registry of twins by
 * name (aclmockRegisterKernel / aclmockRegisterKernelDesc / aclmockUnregisterKernel,
 * acl/acl_mock.h), which the kernels of device binaries resolve against at launch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernel/kernel.h"
#include "kernel/kernel_private.h"

#define TWIN_NAME_MAX 255u

/* The registry (kernel_mu): twins with one reference each. */
static kernel_twin **g_twins;
static size_t g_ntwins, g_cap;

/* The extents table of a version 2 descriptor with described parameters. */
static aclError check_extents(const char *fn, const aclmockKernelDesc *d, const aclmockKernelExtent *extents,
                              const char *where)
{
    for (uint32_t i = 0; i < d->numParams; i++) {
        const aclmockKernelExtent *e = &extents[i];
        bool declared = e->bytes != 0 || e->elemSize != 0;
        if (d->params[i].access == ACLMOCK_ACCESS_VALUE) {
            if (declared || e->countParam != 0) {
                return core_error(fn, ACL_ERROR_INVALID_PARAM,
                                  "%s: kernel '%s': parameter %u is a value but its extent is not "
                                  "ACLMOCK_EXTENT_NONE", where, d->name, i);
            }
            continue;
        }
        if (e->elemSize == 0) {
            if (e->countParam != 0) {
                return core_error(fn, ACL_ERROR_INVALID_PARAM,
                                  "%s: kernel '%s': the extent of parameter %u names count parameter %u but its "
                                  "elemSize is 0", where, d->name, i, e->countParam);
            }
            continue;
        }
        uint32_t c = e->countParam;
        if (c >= d->numParams || d->params[c].access != ACLMOCK_ACCESS_VALUE ||
            (d->params[c].size != 1 && d->params[c].size != 2 && d->params[c].size != 4 && d->params[c].size != 8)) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "%s: kernel '%s': the extent of parameter %u counts elements with parameter %u, which "
                              "is not an integer value parameter of 1, 2, 4 or 8 bytes", where, d->name, i, c);
        }
    }
    return ACL_SUCCESS;
}

aclError kernel_twin_check(const char *fn, const aclmockKernelDesc *d, const char *where)
{
    if (d->version != 1u && d->version != ACLMOCK_KERNEL_DESC_VERSION) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s: version %u is not ACLMOCK_KERNEL_DESC_VERSION (%u) or 1",
                          where, d->version, ACLMOCK_KERNEL_DESC_VERSION);
    }
    if (d->name == NULL || d->name[0] == '\0') {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s: the kernel name is NULL or empty", where);
    }
    if (strlen(d->name) > TWIN_NAME_MAX) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s: the kernel name is longer than %u bytes", where,
                          TWIN_NAME_MAX);
    }
    if (d->fn == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s: kernel '%s' has no function (fn is NULL)", where, d->name);
    }
    if ((d->flags & ~ACLMOCK_KERNEL_FLAGS_MASK) != 0 || (d->flags & ACLMOCK_KERNEL_TYPE_MASK) > ACLMOCK_KERNEL_AICPU) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s: kernel '%s' has undefined flag bits (0x%x)", where, d->name,
                          d->flags);
    }
    const aclmockKernelDescExt *ext = d->version >= 2u ? d->reserved[ACLMOCK_KERNEL_DESC_EXT_SLOT] : NULL;
    if (d->reserved0 != 0 || (d->version < 2u && d->reserved[ACLMOCK_KERNEL_DESC_EXT_SLOT] != NULL) ||
        d->reserved[1] != NULL || d->reserved[2] != NULL || d->reserved[3] != NULL ||
        (ext != NULL && (ext->reserved[0] != NULL || ext->reserved[1] != NULL))) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s: kernel '%s': reserved fields must be 0", where, d->name);
    }
    if (d->numParams == ACLMOCK_PARAMS_UNKNOWN) {
        if (ext != NULL && (ext->extents != NULL || ext->extentFn != NULL)) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "%s: kernel '%s' declares extents but not its parameters (numParams is "
                              "ACLMOCK_PARAMS_UNKNOWN)", where, d->name);
        }
        return ACL_SUCCESS;
    }
    if (d->numParams > ACLMOCK_MAX_PARAMS) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s: kernel '%s' has %u parameters (at most %u)", where, d->name,
                          d->numParams, ACLMOCK_MAX_PARAMS);
    }
    if (d->numParams > 0 && d->params == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s: kernel '%s': params is NULL but numParams is %u", where,
                          d->name, d->numParams);
    }
    for (uint32_t i = 0; i < d->numParams; i++) {
        const aclmockKernelParam *p = &d->params[i];
        if (p->size == 0 || p->size > (1u << 20)) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s: kernel '%s': parameter %u has size %u (1..1048576)",
                              where, d->name, i, p->size);
        }
        if (p->access > ACLMOCK_ACCESS_READ_WRITE) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s: kernel '%s': parameter %u has access mode %u", where,
                              d->name, i, p->access);
        }
        if (p->access != ACLMOCK_ACCESS_VALUE && p->size != 8) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "%s: kernel '%s': parameter %u is a pointer (access %u) of size %u (must be 8)", where,
                              d->name, i, p->access, p->size);
        }
    }
    return ext != NULL && ext->extents != NULL ? check_extents(fn, d, ext->extents, where) : ACL_SUCCESS;
}

kernel_twin *kernel_twin_new(const aclmockKernelDesc *d)
{
    kernel_twin *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return NULL;
    }
    atomic_init(&t->refs, 1);
    t->desc = *d;
    const aclmockKernelDescExt *ext = d->version >= 2u ? d->reserved[ACLMOCK_KERNEL_DESC_EXT_SLOT] : NULL;
    t->desc.reserved[ACLMOCK_KERNEL_DESC_EXT_SLOT] = NULL; /* the twin keeps its own copy */
    if (ext != NULL && d->numParams != ACLMOCK_PARAMS_UNKNOWN) {
        t->extent_fn = ext->extentFn;
        if (ext->extents != NULL) {
            memcpy(t->extents, ext->extents, d->numParams * sizeof t->extents[0]);
            t->has_extents = true;
        }
    }
    snprintf(t->name, sizeof t->name, "%s", d->name);
    t->desc.name = t->name;
    if (d->numParams != ACLMOCK_PARAMS_UNKNOWN) {
        size_t off = 0;
        for (uint32_t i = 0; i < d->numParams; i++) {
            t->params[i] = d->params[i];
            t->offsets[i] = (uint32_t)off;
            off += ((size_t)d->params[i].size + 7u) & ~(size_t)7u;
        }
        t->params_size = off;
        t->params_min = d->numParams > 0 ? t->offsets[d->numParams - 1] + d->params[d->numParams - 1].size : 0;
        t->desc.params = d->numParams > 0 ? t->params : NULL;
    } else {
        t->desc.params = NULL;
    }
    return t;
}

void kernel_twin_ref(kernel_twin *t)
{
    atomic_fetch_add(&t->refs, 1);
}

void kernel_twin_put(kernel_twin *t)
{
    if (t != NULL && atomic_fetch_sub(&t->refs, 1) == 1) {
        free(t);
    }
}

int32_t kernel_type_of_flags(uint32_t flags)
{
    switch (flags & ACLMOCK_KERNEL_TYPE_MASK) {
    case ACLMOCK_KERNEL_CUBE: return ACL_KERNEL_TYPE_CUBE;
    case ACLMOCK_KERNEL_VECTOR: return ACL_KERNEL_TYPE_VECTOR;
    case ACLMOCK_KERNEL_MIX: return ACL_KERNEL_TYPE_MIX;
    case ACLMOCK_KERNEL_AICPU: return ACL_KERNEL_TYPE_AICPU;
    default: return ACL_KERNEL_TYPE_AICORE;
    }
}

kernel_twin *kernel_twin_find_locked(const char *name)
{
    for (size_t i = 0; i < g_ntwins; i++) {
        if (strcmp(g_twins[i]->name, name) == 0) {
            return g_twins[i];
        }
    }
    return NULL;
}

kernel_twin *kernel_twin_find_symbol_locked(const void *symbol)
{
    for (size_t i = 0; i < g_ntwins; i++) {
        if ((const void *)(uintptr_t)g_twins[i]->desc.fn == symbol) {
            return g_twins[i];
        }
    }
    return NULL;
}

/* ------------------------------------------------------------- aclmock API */

static aclError register_desc(const char *fn, const aclmockKernelDesc *d)
{
    aclError rc = kernel_twin_check(fn, d, "desc");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_twin *t = kernel_twin_new(d);
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    enum { ADDED, DUPLICATE, NO_MEMORY } got = ADDED;
    core_mutex_lock(&kernel_mu);
    if (kernel_twin_find_locked(t->name) != NULL) {
        got = DUPLICATE;
    } else if (g_ntwins == g_cap) {
        size_t ncap = g_cap ? g_cap * 2 : 16;
        kernel_twin **n = realloc(g_twins, ncap * sizeof *n);
        if (n == NULL) {
            got = NO_MEMORY;
        } else {
            g_twins = n;
            g_cap = ncap;
        }
    }
    if (got == ADDED) {
        g_twins[g_ntwins++] = t;
    }
    core_mutex_unlock(&kernel_mu);
    if (got == DUPLICATE) {
        rc = core_error(fn, ACL_ERROR_RT_KERNEL_DUPLICATE,
                        "a twin of kernel '%s' is registered already (aclmockUnregisterKernel it first)", t->name);
    } else if (got == NO_MEMORY) {
        rc = core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    if (got != ADDED) {
        kernel_twin_put(t);
    }
    return rc;
}

aclError aclmockRegisterKernel(const char *name, aclmockKernelFn fn, void *userData, uint32_t flags)
{
    static const char f[] = "aclmockRegisterKernel";
    MOCK_REQUIRE_NONNULL(f, name);
    MOCK_REQUIRE_NONNULL(f, fn);
    aclmockKernelDesc d;
    memset(&d, 0, sizeof d);
    d.version = ACLMOCK_KERNEL_DESC_VERSION;
    d.flags = flags;
    d.name = name;
    d.fn = fn;
    d.userData = userData;
    d.numParams = ACLMOCK_PARAMS_UNKNOWN;
    return register_desc(f, &d);
}

aclError aclmockRegisterKernelDesc(const aclmockKernelDesc *desc)
{
    static const char f[] = "aclmockRegisterKernelDesc";
    MOCK_REQUIRE_NONNULL(f, desc);
    return register_desc(f, desc);
}

aclError aclmockUnregisterKernel(const char *name)
{
    static const char f[] = "aclmockUnregisterKernel";
    MOCK_REQUIRE_NONNULL(f, name);
    kernel_twin *gone = NULL;
    core_mutex_lock(&kernel_mu);
    for (size_t i = 0; i < g_ntwins; i++) {
        if (strcmp(g_twins[i]->name, name) == 0) {
            gone = g_twins[i];
            g_twins[i] = g_twins[--g_ntwins];
            break;
        }
    }
    if (g_ntwins == 0) {
        free(g_twins);
        g_twins = NULL;
        g_cap = 0;
    }
    core_mutex_unlock(&kernel_mu);
    if (gone == NULL) {
        return core_error(f, ACL_ERROR_INVALID_PARAM, "no twin of kernel '%.256s' is registered", name);
    }
    kernel_twin_put(gone);
    return ACL_SUCCESS;
}

int32_t aclmockKernelIsRegistered(const char *name)
{
    if (name == NULL) {
        return 0;
    }
    core_mutex_lock(&kernel_mu);
    bool found = kernel_twin_find_locked(name) != NULL;
    core_mutex_unlock(&kernel_mu);
    return found ? 1 : 0;
}

/* ---------------------------------------------------------------- extents */

bool kernel_twin_extent(const kernel_twin *t, const uint8_t *block, size_t size, uint32_t i, uint64_t *bytes)
{
    if (t->desc.numParams == ACLMOCK_PARAMS_UNKNOWN || i >= t->desc.numParams ||
        t->params[i].access == ACLMOCK_ACCESS_VALUE) {
        return false;
    }
    if (t->extent_fn != NULL) {
        uint64_t n = t->extent_fn(block, size, i, t->desc.userData);
        if (n != ACLMOCK_EXTENT_UNKNOWN) {
            *bytes = n;
            return true;
        }
    }
    if (!t->has_extents) {
        return false;
    }
    const aclmockKernelExtent *e = &t->extents[i];
    if (e->bytes == 0 && e->elemSize == 0) {
        return false;
    }
    uint64_t count = 0;
    if (e->elemSize != 0) {
        uint32_t c = e->countParam; /* checked at registration: an integer value parameter */
        uint32_t w = t->params[c].size;
        if (t->offsets[c] + w > size) {
            return false; /* a short block: the launch refused it already */
        }
        switch (w) {
        case 1: count = block[t->offsets[c]]; break;
        case 2: { uint16_t v; memcpy(&v, block + t->offsets[c], 2); count = v; break; }
        case 4: { uint32_t v; memcpy(&v, block + t->offsets[c], 4); count = v; break; }
        default: memcpy(&count, block + t->offsets[c], 8); break;
        }
    }
    uint64_t n = e->elemSize != 0 && count > UINT64_MAX / e->elemSize ? UINT64_MAX : count * e->elemSize;
    *bytes = n > UINT64_MAX - e->bytes ? UINT64_MAX : n + e->bytes;
    return true;
}
