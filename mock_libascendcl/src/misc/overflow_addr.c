/*
 * overflow_addr.c - aclrtCtxGetFloatOverflowAddr: the device address of the current
 * context's float-overflow status area, which kernels write and the overflow queries
 * read on a real card.
 *
 * The mock gives each context, at its first call, 64 bytes of device memory of its
 * device (zero-filled: "no overflow", which is what a host simulator always reports;
 * counted like an aclrtMalloc of the context) and frees it with the context (ctx_teardown
 * hook). Every later call on that context returns the same address. Needs a current
 * context (107002).
 */
#include <stdlib.h>

#include "core/core.h"
#include "mem/mem.h"
#include "misc/misc.h"
#include "misc/misc_private.h"

#define OVERFLOW_AREA_BYTES 64u

typedef struct overflow_area {
    const mock_context *ctx;
    void *dev;
    struct overflow_area *next;
} overflow_area;

static mock_mutex g_area_mu = MOCK_MUTEX_INIT(MOCK_LOCK_OVERFLOW_AREAS);
static overflow_area *g_areas;

static void *area_find_locked(const mock_context *ctx)
{
    for (overflow_area *a = g_areas; a != NULL; a = a->next) {
        if (a->ctx == ctx) {
            return a->dev;
        }
    }
    return NULL;
}

aclError aclrtCtxGetFloatOverflowAddr(void **overflowAddr)
{
    const char *fn = "aclrtCtxGetFloatOverflowAddr";
    MOCK_REQUIRE_NONNULL(fn, overflowAddr);
    MOCK_ENTER(fn);
    mock_context *ctx;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&g_area_mu);
    void *dev = area_find_locked(ctx);
    core_mutex_unlock(&g_area_mu);
    if (dev != NULL) {
        *overflowAddr = dev;
        return ACL_SUCCESS;
    }
    /* allocate outside the lock (memory locks come before it), then publish */
    overflow_area *a = malloc(sizeof(*a));
    if (a == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory");
    }
    rc = mem_malloc(fn, &a->dev, OVERFLOW_AREA_BYTES);
    if (rc != ACL_SUCCESS) {
        free(a);
        return rc;
    }
    a->ctx = ctx;
    core_mutex_lock(&g_area_mu);
    dev = area_find_locked(ctx); /* another thread of this context may have won */
    if (dev == NULL) {
        a->next = g_areas;
        g_areas = a;
        dev = a->dev;
        a = NULL;
    }
    core_mutex_unlock(&g_area_mu);
    if (a != NULL) {
        (void)mem_free(fn, a->dev);
        free(a);
    }
    *overflowAddr = dev;
    return ACL_SUCCESS;
}

void misc_overflow_area_teardown(mock_context *ctx)
{
    overflow_area *found = NULL;
    core_mutex_lock(&g_area_mu);
    for (overflow_area **p = &g_areas; *p != NULL; p = &(*p)->next) {
        if ((*p)->ctx == ctx) {
            found = *p;
            *p = found->next;
            break;
        }
    }
    core_mutex_unlock(&g_area_mu);
    if (found != NULL) {
        (void)mem_free("aclrtDestroyContext", found->dev);
        free(found);
    }
}
