/*
 * allocator.c - external allocator descriptors (acl_rt_allocator.h).
 *
 * A descriptor collects the user's allocator object and its callbacks;
 * aclrtAllocatorRegister attaches a copy of it to a stream (NULL = default
 * stream of the current context), aclrtAllocatorGetByStream returns what was
 * registered, aclrtAllocatorUnregister detaches it. The mock runs no
 * operators that would allocate workspace, so the callbacks are stored and
 * returned, never called. A registration disappears with its stream
 * (mem_allocator_stream_destroyed, called by stream.c).
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "mem/mem_private.h"

#define ALLOC_DESC_MAGIC 0x616c6c6f63446573ULL

typedef struct alloc_desc {
    uint64_t magic;
    aclrtAllocator obj;
    aclrtAllocatorAllocFunc alloc_fn;
    aclrtAllocatorFreeFunc free_fn;
    aclrtAllocatorAllocAdviseFunc advise_fn;
    aclrtAllocatorGetAddrFromBlockFunc addr_fn;
} alloc_desc;

typedef struct alloc_reg {
    mock_stream *stream;
    aclrtAllocatorDesc handle; /* the descriptor handle given to Register */
    alloc_desc copy;           /* its content at registration time */
    struct alloc_reg *next;
} alloc_reg;

static mock_handle_set g_descs = MOCK_HANDLE_SET_INIT(MOCK_LOCK_ALLOCATOR_DESCS); /* its lock also guards g_regs */
static alloc_reg *g_regs = NULL;

aclrtAllocatorDesc aclrtAllocatorCreateDesc(void)
{
    if (core_fault_check("aclrtAllocatorCreateDesc") != ACL_SUCCESS) {
        return NULL;
    }
    alloc_desc *d = (alloc_desc *)calloc(1, sizeof *d);
    if (d == NULL) {
        (void)core_error("aclrtAllocatorCreateDesc", ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    d->magic = ALLOC_DESC_MAGIC;
    if (!core_handle_set_add(&g_descs, d)) {
        free(d);
        (void)core_error("aclrtAllocatorCreateDesc", ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    return (aclrtAllocatorDesc)d;
}

aclError aclrtAllocatorDestroyDesc(aclrtAllocatorDesc allocatorDesc)
{
    static const char fn[] = "aclrtAllocatorDestroyDesc";
    MOCK_REQUIRE_NONNULL(fn, allocatorDesc);
    MOCK_ENTER(fn);
    if (!core_handle_set_remove(&g_descs, allocatorDesc)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'allocatorDesc' (%p) is not a live allocator descriptor "
                          "(never created or already destroyed)",
                          allocatorDesc);
    }
    alloc_desc *d = (alloc_desc *)allocatorDesc;
    d->magic = 0;
    free(d);
    return ACL_SUCCESS;
}

/* Common body of the five setters: which = 0 obj, 1 alloc, 2 free, 3 advise, 4 addr. */
static aclError desc_set(const char *fn, aclrtAllocatorDesc desc, const void *value, void (*fnptr)(void),
                         int which)
{
    if (desc == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'allocatorDesc' is NULL");
    }
    if (value == NULL && fnptr == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", which == 0 ? "allocator" : "func");
    }
    MOCK_ENTER(fn);
    core_handle_set_lock(&g_descs);
    bool live = core_handle_set_contains_locked(&g_descs, desc);
    if (live) {
        alloc_desc *d = (alloc_desc *)desc;
        switch (which) {
        case 0: d->obj = (aclrtAllocator)(uintptr_t)value; break;
        case 1: d->alloc_fn = (aclrtAllocatorAllocFunc)fnptr; break;
        case 2: d->free_fn = (aclrtAllocatorFreeFunc)fnptr; break;
        case 3: d->advise_fn = (aclrtAllocatorAllocAdviseFunc)fnptr; break;
        default: d->addr_fn = (aclrtAllocatorGetAddrFromBlockFunc)fnptr; break;
        }
    }
    core_handle_set_unlock(&g_descs);
    if (!live) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'allocatorDesc' (%p) is not a live allocator descriptor",
                          desc);
    }
    return ACL_SUCCESS;
}

aclError aclrtAllocatorSetObjToDesc(aclrtAllocatorDesc allocatorDesc, aclrtAllocator allocator)
{
    return desc_set("aclrtAllocatorSetObjToDesc", allocatorDesc, allocator, NULL, 0);
}

aclError aclrtAllocatorSetAllocFuncToDesc(aclrtAllocatorDesc allocatorDesc, aclrtAllocatorAllocFunc func)
{
    return desc_set("aclrtAllocatorSetAllocFuncToDesc", allocatorDesc, NULL, (void (*)(void))func, 1);
}

aclError aclrtAllocatorSetFreeFuncToDesc(aclrtAllocatorDesc allocatorDesc, aclrtAllocatorFreeFunc func)
{
    return desc_set("aclrtAllocatorSetFreeFuncToDesc", allocatorDesc, NULL, (void (*)(void))func, 2);
}

aclError aclrtAllocatorSetAllocAdviseFuncToDesc(aclrtAllocatorDesc allocatorDesc, aclrtAllocatorAllocAdviseFunc func)
{
    return desc_set("aclrtAllocatorSetAllocAdviseFuncToDesc", allocatorDesc, NULL, (void (*)(void))func, 3);
}

aclError aclrtAllocatorSetGetAddrFromBlockFuncToDesc(aclrtAllocatorDesc allocatorDesc,
                                                     aclrtAllocatorGetAddrFromBlockFunc func)
{
    return desc_set("aclrtAllocatorSetGetAddrFromBlockFuncToDesc", allocatorDesc, NULL, (void (*)(void))func, 4);
}

aclError aclrtAllocatorRegister(aclrtStream stream, aclrtAllocatorDesc allocatorDesc)
{
    static const char fn[] = "aclrtAllocatorRegister";
    MOCK_REQUIRE_NONNULL(fn, allocatorDesc);
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    alloc_reg *fresh = (alloc_reg *)calloc(1, sizeof *fresh);
    if (fresh == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    core_handle_set_lock(&g_descs);
    const char *missing = NULL;
    bool live = core_handle_set_contains_locked(&g_descs, allocatorDesc);
    if (live) {
        const alloc_desc *d = (const alloc_desc *)allocatorDesc;
        missing = d->obj == NULL             ? "allocator object (aclrtAllocatorSetObjToDesc)"
                  : d->alloc_fn == NULL      ? "alloc function (aclrtAllocatorSetAllocFuncToDesc)"
                  : d->free_fn == NULL       ? "free function (aclrtAllocatorSetFreeFuncToDesc)"
                  : d->addr_fn == NULL       ? "get-address function (aclrtAllocatorSetGetAddrFromBlockFuncToDesc)"
                                             : NULL;
    }
    if (live && missing == NULL) {
        alloc_reg *r = g_regs;
        while (r != NULL && r->stream != s) {
            r = r->next;
        }
        if (r == NULL) { /* a second registration on a stream replaces the first */
            r = fresh;
            fresh = NULL;
            r->stream = s;
            r->next = g_regs;
            g_regs = r;
        }
        r->handle = allocatorDesc;
        r->copy = *(const alloc_desc *)allocatorDesc;
    }
    core_handle_set_unlock(&g_descs);
    free(fresh);
    if (!live) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'allocatorDesc' (%p) is not a live allocator descriptor",
                          allocatorDesc);
    }
    if (missing != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'allocatorDesc' has no %s", missing);
    }
    return ACL_SUCCESS;
}

aclError aclrtAllocatorUnregister(aclrtStream stream)
{
    static const char fn[] = "aclrtAllocatorUnregister";
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_handle_set_lock(&g_descs);
    alloc_reg **pp = &g_regs;
    while (*pp != NULL && (*pp)->stream != s) {
        pp = &(*pp)->next;
    }
    alloc_reg *r = *pp;
    if (r != NULL) {
        *pp = r->next;
    }
    core_handle_set_unlock(&g_descs);
    if (r == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "no allocator is registered on stream %p", stream);
    }
    free(r);
    return ACL_SUCCESS;
}

aclError aclrtAllocatorGetByStream(aclrtStream stream, aclrtAllocatorDesc *allocatorDesc, aclrtAllocator *allocator,
                                   aclrtAllocatorAllocFunc *allocFunc, aclrtAllocatorFreeFunc *freeFunc,
                                   aclrtAllocatorAllocAdviseFunc *allocAdviseFunc,
                                   aclrtAllocatorGetAddrFromBlockFunc *getAddrFromBlockFunc)
{
    static const char fn[] = "aclrtAllocatorGetByStream";
    const char *null_arg = allocatorDesc == NULL    ? "allocatorDesc"
                           : allocator == NULL      ? "allocator"
                           : allocFunc == NULL      ? "allocFunc"
                           : freeFunc == NULL       ? "freeFunc"
                           : allocAdviseFunc == NULL ? "allocAdviseFunc"
                           : getAddrFromBlockFunc == NULL ? "getAddrFromBlockFunc"
                                                          : NULL;
    if (null_arg != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", null_arg);
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_handle_set_lock(&g_descs);
    const alloc_reg *r = g_regs;
    while (r != NULL && r->stream != s) {
        r = r->next;
    }
    if (r != NULL) {
        *allocatorDesc = r->handle;
        *allocator = r->copy.obj;
        *allocFunc = r->copy.alloc_fn;
        *freeFunc = r->copy.free_fn;
        *allocAdviseFunc = r->copy.advise_fn;
        *getAddrFromBlockFunc = r->copy.addr_fn;
    }
    core_handle_set_unlock(&g_descs);
    if (r == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "no allocator is registered on stream %p", stream);
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------- stream teardown hook */

/* Called by stream.c for a stream being destroyed (declared in mem/mem.h). */
MOCK_HIDDEN void mem_allocator_stream_destroyed(mock_stream *s)
{
    core_handle_set_lock(&g_descs);
    alloc_reg **pp = &g_regs;
    alloc_reg *dead = NULL;
    while (*pp != NULL) {
        if ((*pp)->stream == s) {
            alloc_reg *r = *pp;
            *pp = r->next;
            r->next = dead;
            dead = r;
        } else {
            pp = &(*pp)->next;
        }
    }
    core_handle_set_unlock(&g_descs);
    while (dead != NULL) {
        alloc_reg *next = dead->next;
        free(dead);
        dead = next;
    }
}
