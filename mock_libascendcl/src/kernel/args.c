/*
 * args.c - argument lists (aclrtArgsHandle, acl_next_semantics.md §1.4):
 * aclrtKernelArgsInit / InitByUserMem / GetHandleMemSize / GetMemSize / Append /
 * AppendPlaceHolder / GetPlaceHolderBuffer / ParaUpdate / Finalize, and the snapshot a
 * launch takes of a finalized list.
 *
 * Layout (KRN#Kernel加载与执行接口调用流程): arguments are appended left to right, each
 * in a slot of its size rounded up to 8 bytes (the padding is zero), at most 128 of
 * them. A placeholder is an 8-byte pointer slot whose data the user writes into the
 * buffer of aclrtKernelArgsGetPlaceHolderBuffer (asked for only after every argument
 * is appended); a launch copies that data to device memory and writes its address into
 * the slot. ParaUpdate may change a value after Finalize, which must then be called
 * again. When the kernel's twin describes its parameters, every Append is checked
 * against the declared size and kind, and Finalize against the count.
 *
 * Ownership (mock choices; the reference documents no destroy call): a list belongs to
 * its function and dies with its binary (aclrtBinaryUnLoad). A list from
 * aclrtKernelArgsInitByUserMem keeps its slots and placeholder data in the user's
 * memory (slots first, placeholder data after them, 8-byte aligned; userArgsSize of
 * aclrtKernelArgsGetMemSize must count both) and a small header in the handle memory;
 * the runtime never touches that memory outside the calls made with the handle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernel/kernel.h"
#include "kernel/kernel_private.h"

#define ARGS_MAGIC 0x4b4e4c4152475321ull   /* "KNLARGS!" */
#define HDR_MAGIC 0x4b4e4c5553524844ull    /* "KNLUSRHD" */
#define INITIAL_CAP 256u

/* What InitByUserMem writes into the user's handle memory. */
typedef struct user_hdr {
    uint64_t magic;
    kernel_args *obj;
} user_hdr;

/* live handles (kernel_mu): runtime-owned lists, and the user handle addresses */
static mock_registry g_lists = MOCK_REGISTRY_EMPTY;
static mock_registry g_user = MOCK_REGISTRY_EMPTY;

static size_t round8(size_t v)
{
    return (v + 7u) & ~(size_t)7u;
}

/* The list behind a handle (kernel_mu held), or NULL. */
static kernel_args *find_locked(const void *handle)
{
    kernel_args *a = core_registry_find(&g_lists, handle);
    if (a != NULL) {
        return a->magic == ARGS_MAGIC ? a : NULL;
    }
    if (core_registry_contains(&g_user, handle)) {
        const user_hdr *h = handle;
        if (h->magic == HDR_MAGIC && h->obj != NULL && h->obj->magic == ARGS_MAGIC && h->obj->user_handle == handle) {
            return h->obj;
        }
    }
    return NULL;
}

void kernel_args_forget_locked(kernel_args *head)
{
    for (kernel_args *a = head; a != NULL; a = a->next) {
        if (a->user_handle != NULL) {
            core_registry_erase(&g_user, a->user_handle);
        } else {
            core_registry_erase(&g_lists, a);
        }
        a->magic = 0;
    }
}

void kernel_args_free_list(kernel_args *head)
{
    while (head != NULL) {
        kernel_args *next = head->next;
        if (!head->user_mem) {
            for (uint32_t i = 0; i < head->n; i++) {
                free(head->params[i].data);
            }
            free(head->buf);
        }
        free(head);
        head = next;
    }
}

/* The twin describing f's parameters (with a reference), or NULL. */
static kernel_twin *described(const kernel_func *f)
{
    kernel_twin *t = kernel_func_twin(f);
    if (t != NULL && t->desc.numParams == ACLMOCK_PARAMS_UNKNOWN) {
        kernel_twin_put(t);
        t = NULL;
    }
    return t;
}

/* ------------------------------------------------------------ creation */

aclError aclrtKernelArgsGetHandleMemSize(aclrtFuncHandle funcHandle, size_t *memSize)
{
    static const char fn[] = "aclrtKernelArgsGetHandleMemSize";
    MOCK_REQUIRE_NONNULL(fn, memSize);
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "funcHandle", funcHandle, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_binary_put(f->bin);
    *memSize = sizeof(user_hdr);
    return ACL_SUCCESS;
}

aclError aclrtKernelArgsGetMemSize(aclrtFuncHandle funcHandle, size_t userArgsSize, size_t *actualArgsSize)
{
    static const char fn[] = "aclrtKernelArgsGetMemSize";
    MOCK_REQUIRE_NONNULL(fn, actualArgsSize);
    if (userArgsSize > ((size_t)1 << 30)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'userArgsSize' (%zu) is larger than 1 GiB",
                          userArgsSize);
    }
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "funcHandle", funcHandle, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_binary_put(f->bin);
    /* the slots and placeholder data themselves (mock: no hidden header), at least 8 */
    *actualArgsSize = userArgsSize == 0 ? 8 : round8(userArgsSize);
    return ACL_SUCCESS;
}

/* Links a new list into f's binary and the registry (kernel_mu held). */
static bool publish_locked(kernel_args *a)
{
    bool ok = a->user_handle != NULL ? core_registry_insert(&g_user, a->user_handle)
                                     : core_registry_insert(&g_lists, a);
    if (ok) {
        a->next = a->func->bin->lists;
        a->func->bin->lists = a;
    }
    return ok;
}

aclError aclrtKernelArgsInit(aclrtFuncHandle funcHandle, aclrtArgsHandle *argsHandle)
{
    static const char fn[] = "aclrtKernelArgsInit";
    MOCK_REQUIRE_NONNULL(fn, argsHandle);
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "funcHandle", funcHandle, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_args *a = calloc(1, sizeof *a);
    uint8_t *buf = calloc(1, INITIAL_CAP);
    bool ok = a != NULL && buf != NULL;
    if (ok) {
        a->magic = ARGS_MAGIC;
        a->func = f;
        a->buf = buf;
        a->cap = INITIAL_CAP;
        core_mutex_lock(&kernel_mu);
        /* the binary may have been unloaded meanwhile: then its lists are not freed
         * through it any more */
        ok = kernel_func_find_locked(f) == f && publish_locked(a);
        core_mutex_unlock(&kernel_mu);
    }
    kernel_binary_put(f->bin);
    if (!ok) {
        free(buf);
        free(a);
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory (or the binary was unloaded)");
    }
    *argsHandle = a;
    return ACL_SUCCESS;
}

aclError aclrtKernelArgsInitByUserMem(aclrtFuncHandle funcHandle, aclrtArgsHandle argsHandle, void *userHostMem,
                                      size_t actualArgsSize)
{
    static const char fn[] = "aclrtKernelArgsInitByUserMem";
    MOCK_REQUIRE_NONNULL(fn, argsHandle);
    MOCK_REQUIRE_NONNULL(fn, userHostMem);
    if (actualArgsSize == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'actualArgsSize' is 0");
    }
    if (((uintptr_t)argsHandle & 7u) != 0 || ((uintptr_t)userHostMem & 7u) != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "arguments 'argsHandle' (%p) and 'userHostMem' (%p) must be 8-byte aligned", argsHandle,
                          userHostMem);
    }
    MOCK_ENTER(fn);
    kernel_func *f = NULL;
    aclError rc = kernel_func_acquire(fn, "funcHandle", funcHandle, &f);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_args *a = calloc(1, sizeof *a);
    enum { OK, NO_MEMORY, IN_USE } got = a == NULL ? NO_MEMORY : OK;
    if (got == OK) {
        a->magic = ARGS_MAGIC;
        a->func = f;
        a->user_handle = argsHandle;
        a->user_mem = true;
        a->buf = userHostMem;
        a->cap = actualArgsSize;
        memset(userHostMem, 0, actualArgsSize);
        core_mutex_lock(&kernel_mu);
        if (core_registry_contains(&g_user, argsHandle)) {
            got = IN_USE; /* a live list already lives there */
        } else if (kernel_func_find_locked(f) != f || !publish_locked(a)) {
            got = NO_MEMORY;
        } else {
            user_hdr *h = argsHandle;
            h->magic = HDR_MAGIC;
            h->obj = a;
        }
        core_mutex_unlock(&kernel_mu);
    }
    kernel_binary_put(f->bin);
    if (got != OK) {
        free(a);
    }
    if (got == IN_USE) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'argsHandle' (%p) already holds a live argument list", argsHandle);
    }
    if (got == NO_MEMORY) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory (or the binary was unloaded)");
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ building */

/* The outcome of an operation decided under kernel_mu, reported after it. */
typedef struct verdict {
    aclError code;
    char msg[640];
} verdict;

#define REFUSE(v, c, ...)                                           \
    do {                                                            \
        (v)->code = (c);                                            \
        snprintf((v)->msg, sizeof (v)->msg, __VA_ARGS__);           \
    } while (0)

static aclError report(const char *fn, const verdict *v)
{
    return v->code == ACL_SUCCESS ? ACL_SUCCESS : core_error(fn, v->code, "%s", v->msg);
}

/* Reserves the next slot of `size` bytes (kernel_mu held). */
static kernel_param_slot *next_slot_locked(kernel_args *a, size_t size, bool placeholder, const kernel_twin *t,
                                           verdict *v)
{
    if (a->finalized) {
        REFUSE(v, ACL_ERROR_RT_PARAM_INVALID, "the list is finalized: no more arguments can be appended");
        return NULL;
    }
    if (a->buffers_started) {
        REFUSE(v, ACL_ERROR_RT_PARAM_INVALID,
               "a placeholder buffer was requested already: every argument must be appended before");
        return NULL;
    }
    if (a->n == KERNEL_MAX_ARGS) {
        /* KRN#Kernel加载与执行接口调用流程: at most 128 arguments */
        REFUSE(v, ACL_ERROR_RT_PARAM_INVALID, "the list has %u arguments already (at most %u)", a->n,
               KERNEL_MAX_ARGS);
        return NULL;
    }
    if (t != NULL) {
        if (a->n >= t->desc.numParams) {
            REFUSE(v, ACL_ERROR_RT_PARAM_INVALID, "kernel '%s' takes %u arguments; this would be argument %u", t->name,
                   t->desc.numParams, a->n + 1);
            return NULL;
        }
        const aclmockKernelParam *p = &t->params[a->n];
        if (placeholder ? p->access == ACLMOCK_ACCESS_VALUE : p->size != size) {
            REFUSE(v, ACL_ERROR_RT_PARAM_INVALID, "argument %u of kernel '%s' is %s of %u bytes, not %s of %zu bytes",
                   a->n, t->name, p->access == ACLMOCK_ACCESS_VALUE ? "a value" : "a pointer", p->size,
                   placeholder ? "a placeholder" : "a value", size);
            return NULL;
        }
    }
    size_t slot = round8(size);
    if (a->used + slot > a->cap) {
        if (a->user_mem) {
            REFUSE(v, ACL_ERROR_RT_PARAM_INVALID,
                   "userHostMem (%zu bytes) is too small for argument %u (%zu bytes after %zu used)", a->cap, a->n,
                   slot, a->used);
            return NULL;
        }
        size_t ncap = a->cap;
        while (a->used + slot > ncap) {
            ncap *= 2;
        }
        uint8_t *nb = realloc(a->buf, ncap);
        if (nb == NULL) {
            REFUSE(v, ACL_ERROR_BAD_ALLOC, "out of host memory");
            return NULL;
        }
        memset(nb + a->cap, 0, ncap - a->cap);
        a->buf = nb;
        a->cap = ncap;
    }
    kernel_param_slot *p = &a->params[a->n++];
    memset(p, 0, sizeof *p);
    p->offset = (uint32_t)a->used;
    p->size = (uint32_t)size;
    p->placeholder = placeholder;
    memset(a->buf + a->used, 0, slot);
    a->used += slot;
    return p;
}

static verdict args_bad_handle(const void *h)
{
    verdict v;
    REFUSE(&v, ACL_ERROR_RT_PARAM_INVALID, "argument 'argsHandle' (%p) is not a live argument list", h);
    return v;
}

/* A list held across the unlocked twin lookup: its function's binary is referenced (so the
 * function outlives the lookup) and `twin` is the function's parameter description (a
 * reference, or NULL when unknown). The list itself may die meanwhile: callers recheck
 * find_locked(handle) == a under kernel_mu before touching it. */
typedef struct pinned_args {
    kernel_args *a;
    kernel_func *f;
    kernel_twin *twin;
} pinned_args;

/* Pins the list behind `handle` (kernel_mu not held); false when it is not live. */
static bool args_pin(const void *handle, pinned_args *pin)
{
    core_mutex_lock(&kernel_mu);
    pin->a = find_locked(handle);
    pin->f = pin->a != NULL ? pin->a->func : NULL;
    if (pin->f != NULL) {
        kernel_binary_ref(pin->f->bin);
    }
    core_mutex_unlock(&kernel_mu);
    if (pin->f == NULL) {
        return false;
    }
    pin->twin = described(pin->f);
    return true;
}

/* Drops what args_pin took (kernel_mu not held). */
static void args_unpin(pinned_args *pin)
{
    kernel_twin_put(pin->twin);
    kernel_binary_put(pin->f->bin);
}

aclError aclrtKernelArgsAppend(aclrtArgsHandle argsHandle, void *param, size_t paramSize,
                               aclrtParamHandle *paramHandle)
{
    static const char fn[] = "aclrtKernelArgsAppend";
    MOCK_REQUIRE_NONNULL(fn, argsHandle);
    MOCK_REQUIRE_NONNULL(fn, param);
    if (paramSize == 0 || paramSize > ((size_t)1 << 20)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'paramSize' (%zu) is not in 1..1048576", paramSize);
    }
    MOCK_ENTER(fn);
    verdict v = {ACL_SUCCESS, ""};
    pinned_args pin;
    if (!args_pin(argsHandle, &pin)) {
        v = args_bad_handle(argsHandle);
        return report(fn, &v);
    }
    kernel_args *a = pin.a;
    const kernel_twin *t = pin.twin;
    core_mutex_lock(&kernel_mu);
    kernel_param_slot *p = find_locked(argsHandle) == a ? next_slot_locked(a, paramSize, false, t, &v) : NULL;
    if (p != NULL) {
        memcpy(a->buf + p->offset, param, paramSize);
        if (paramHandle != NULL) {
            *paramHandle = p;
        }
    } else if (v.code == ACL_SUCCESS) {
        v = args_bad_handle(argsHandle);
    }
    core_mutex_unlock(&kernel_mu);
    args_unpin(&pin);
    return report(fn, &v);
}

aclError aclrtKernelArgsAppendPlaceHolder(aclrtArgsHandle argsHandle, aclrtParamHandle *paramHandle)
{
    static const char fn[] = "aclrtKernelArgsAppendPlaceHolder";
    MOCK_REQUIRE_NONNULL(fn, argsHandle);
    MOCK_REQUIRE_NONNULL(fn, paramHandle);
    MOCK_ENTER(fn);
    verdict v = {ACL_SUCCESS, ""};
    pinned_args pin;
    if (!args_pin(argsHandle, &pin)) {
        v = args_bad_handle(argsHandle);
        return report(fn, &v);
    }
    kernel_args *a = pin.a;
    const kernel_twin *t = pin.twin;
    core_mutex_lock(&kernel_mu);
    kernel_param_slot *p = find_locked(argsHandle) == a ? next_slot_locked(a, 8, true, t, &v) : NULL;
    if (p != NULL) {
        *paramHandle = p;
    } else if (v.code == ACL_SUCCESS) {
        v = args_bad_handle(argsHandle);
    }
    core_mutex_unlock(&kernel_mu);
    args_unpin(&pin);
    return report(fn, &v);
}

/* The slot behind a param handle of list a (kernel_mu held), or NULL. */
static kernel_param_slot *slot_of_locked(kernel_args *a, const void *ph)
{
    uintptr_t base = (uintptr_t)a->params, p = (uintptr_t)ph;
    if (p < base || (p - base) % sizeof(kernel_param_slot) != 0 || (p - base) / sizeof(kernel_param_slot) >= a->n) {
        return NULL;
    }
    return &a->params[(p - base) / sizeof(kernel_param_slot)];
}

aclError aclrtKernelArgsGetPlaceHolderBuffer(aclrtArgsHandle argsHandle, aclrtParamHandle paramHandle,
                                             size_t dataSize, void **bufferAddr)
{
    static const char fn[] = "aclrtKernelArgsGetPlaceHolderBuffer";
    MOCK_REQUIRE_NONNULL(fn, argsHandle);
    MOCK_REQUIRE_NONNULL(fn, paramHandle);
    MOCK_REQUIRE_NONNULL(fn, bufferAddr);
    if (dataSize == 0 || dataSize > ((size_t)1 << 30)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataSize' (%zu) is not in 1..1 GiB", dataSize);
    }
    MOCK_ENTER(fn);
    verdict v = {ACL_SUCCESS, ""};
    void *buf = NULL;
    void *fresh = NULL;
    core_mutex_lock(&kernel_mu);
    kernel_args *a = find_locked(argsHandle);
    kernel_param_slot *p = a != NULL ? slot_of_locked(a, paramHandle) : NULL;
    if (a == NULL) {
        v = args_bad_handle(argsHandle);
    } else if (p == NULL || !p->placeholder) {
        /* KRN#aclrtKernelArgsGetPlaceHolderBuffer: the handle comes from AppendPlaceHolder */
        REFUSE(&v, ACL_ERROR_RT_PARAM_INVALID, "argument 'paramHandle' (%p) is not a placeholder of this list",
               paramHandle);
    } else if (p->data != NULL) {
        if (p->data_size == dataSize) {
            buf = p->data;
        } else {
            REFUSE(&v, ACL_ERROR_RT_PARAM_INVALID, "the placeholder has a buffer of %zu bytes already (asked for %zu)",
                   p->data_size, dataSize);
        }
    } else if (a->user_mem) {
        size_t off = round8(a->used) + a->ph_used;
        if (off > a->cap || round8(dataSize) > a->cap - off) {
            REFUSE(&v, ACL_ERROR_RT_PARAM_INVALID,
                   "userHostMem (%zu bytes) is too small for %zu bytes of placeholder data after %zu bytes "
                   "(count the placeholder data in userArgsSize of aclrtKernelArgsGetMemSize)",
                   a->cap, dataSize, off);
        } else {
            buf = a->buf + off;
            memset(buf, 0, dataSize);
            a->ph_used += round8(dataSize);
        }
    } else {
        buf = fresh = calloc(1, dataSize);
        if (buf == NULL) {
            REFUSE(&v, ACL_ERROR_BAD_ALLOC, "out of host memory for %zu bytes", dataSize);
        }
    }
    if (buf != NULL) {
        p->data = buf;
        p->data_size = dataSize;
        a->buffers_started = true;
        *bufferAddr = buf;
    }
    core_mutex_unlock(&kernel_mu);
    return report(fn, &v);
}

aclError aclrtKernelArgsParaUpdate(aclrtArgsHandle argsHandle, aclrtParamHandle paramHandle, void *param,
                                   size_t paramSize)
{
    static const char fn[] = "aclrtKernelArgsParaUpdate";
    MOCK_REQUIRE_NONNULL(fn, argsHandle);
    MOCK_REQUIRE_NONNULL(fn, paramHandle);
    MOCK_REQUIRE_NONNULL(fn, param);
    MOCK_ENTER(fn);
    verdict v = {ACL_SUCCESS, ""};
    core_mutex_lock(&kernel_mu);
    kernel_args *a = find_locked(argsHandle);
    kernel_param_slot *p = a != NULL ? slot_of_locked(a, paramHandle) : NULL;
    if (a == NULL) {
        v = args_bad_handle(argsHandle);
    } else if (p == NULL || p->placeholder) {
        /* KRN#aclrtKernelArgsParaUpdate: values added by Append, not placeholders */
        REFUSE(&v, ACL_ERROR_RT_PARAM_INVALID, "argument 'paramHandle' (%p) is not an appended value of this list",
               paramHandle);
    } else if (paramSize != p->size) {
        REFUSE(&v, ACL_ERROR_RT_PARAM_INVALID, "argument 'paramSize' (%zu) differs from the appended size (%u)",
               paramSize, p->size);
    } else {
        memcpy(a->buf + p->offset, param, paramSize);
        a->finalized = false; /* Finalize must be called again */
    }
    core_mutex_unlock(&kernel_mu);
    return report(fn, &v);
}

aclError aclrtKernelArgsFinalize(aclrtArgsHandle argsHandle)
{
    static const char fn[] = "aclrtKernelArgsFinalize";
    MOCK_REQUIRE_NONNULL(fn, argsHandle);
    MOCK_ENTER(fn);
    verdict v = {ACL_SUCCESS, ""};
    pinned_args pin;
    if (!args_pin(argsHandle, &pin)) {
        v = args_bad_handle(argsHandle);
        return report(fn, &v);
    }
    kernel_args *a = pin.a;
    const kernel_twin *t = pin.twin;
    core_mutex_lock(&kernel_mu);
    if (find_locked(argsHandle) != a) {
        v = args_bad_handle(argsHandle);
    } else if (t != NULL && a->n != t->desc.numParams) {
        REFUSE(&v, ACL_ERROR_RT_PARAM_INVALID, "kernel '%s' takes %u arguments but %u were appended", t->name,
               t->desc.numParams, a->n);
    } else {
        for (uint32_t i = 0; i < a->n && v.code == ACL_SUCCESS; i++) {
            if (a->params[i].placeholder && a->params[i].data == NULL) {
                REFUSE(&v, ACL_ERROR_RT_PARAM_INVALID,
                       "placeholder argument %u has no buffer (aclrtKernelArgsGetPlaceHolderBuffer)", i);
            }
        }
        a->finalized = v.code == ACL_SUCCESS;
    }
    core_mutex_unlock(&kernel_mu);
    args_unpin(&pin);
    return report(fn, &v);
}

/* ------------------------------------------------------------ launch view */

aclError kernel_args_snapshot(const char *fn, void *handle, const kernel_func *f, uint8_t **block, size_t *size,
                              kernel_ph **ph, size_t *nph)
{
    if (handle == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'argsHandle' is NULL");
    }
    verdict v = {ACL_SUCCESS, ""};
    uint8_t *copy = NULL;
    kernel_ph *list = NULL;
    size_t n = 0;
    core_mutex_lock(&kernel_mu);
    kernel_args *a = find_locked(handle);
    if (a == NULL) {
        v = args_bad_handle(handle);
    } else if (a->func != f) {
        REFUSE(&v, ACL_ERROR_RT_PARAM_INVALID, "argument 'argsHandle' is a list of kernel '%s', not of '%s'",
               a->func->name, f->name);
    } else if (!a->finalized) {
        /* KRN#aclrtKernelArgsFinalize: required before the launch (and after ParaUpdate) */
        REFUSE(&v, ACL_ERROR_RT_PARAM_INVALID, "the argument list is not finalized (aclrtKernelArgsFinalize)");
    } else {
        copy = malloc(a->used ? a->used : 1);
        list = calloc(a->n ? a->n : 1, sizeof *list);
        if (copy == NULL || list == NULL) {
            REFUSE(&v, ACL_ERROR_BAD_ALLOC, "out of host memory");
        } else {
            memcpy(copy, a->buf, a->used);
            for (uint32_t i = 0; i < a->n; i++) {
                if (a->params[i].placeholder) {
                    list[n].slot = a->params[i].offset;
                    list[n].data = a->params[i].data;
                    list[n].size = a->params[i].data_size;
                    n++;
                }
            }
            *size = a->used;
        }
    }
    core_mutex_unlock(&kernel_mu);
    if (v.code != ACL_SUCCESS) {
        free(copy);
        free(list);
        return report(fn, &v);
    }
    *block = copy;
    *ph = list;
    *nph = n;
    return ACL_SUCCESS;
}
