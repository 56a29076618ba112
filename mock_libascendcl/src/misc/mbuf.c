/*
 * mbuf.c - shared buffers (aclrtAllocBuf ... aclrtGetBufChainNum; acl_next_semantics.md
 * section 5.5).
 *
 * CANN documents this family as reserved: the real runtime does not support it yet and
 * refuses the calls. The mock implements the documented rules (README "Shared buffers")
 * so that code written for them can be tested:
 *   - aclrtAllocBuf(&buf, size): size 1..4 GiB (100000 otherwise); the data area is
 *     device memory of the current context's device (107002 without one), counted like
 *     an aclrtMalloc; aclrtGetBufData gives its device address and size;
 *   - the valid-data length starts at 0; aclrtSetBufDataLen takes a length smaller than
 *     the data area (100000 otherwise);
 *   - a private user-data area of 96 bytes per buffer: offset + size <= 96 (100000);
 *   - aclrtCopyBufRef makes a new buffer object sharing the data area (a reference, not
 *     a copy), with a copy of the data length and user data; the area is freed with its
 *     last buffer;
 *   - chains: aclrtAppendBufChain(head, buf) appends a buffer that is in no chain to the
 *     chain of `head` (a buffer that is not itself a chain member); a chain holds at most
 *     128 buffers, the head included (107000 beyond); aclrtGetBufChainNum counts them and
 *     aclrtGetBufFromChain(head, i) returns buffer i (0 = the head);
 *   - aclrtFreeBuf frees a buffer, or a head with its whole chain; a chain member is freed
 *     with its head (freeing it alone is 107000, mock choice).
 * Buffers are validated handles (a stale or foreign pointer is 100000, never a crash).
 * aclFinalize frees every buffer still alive.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "mem/mem.h"
#include "misc/misc.h"
#include "misc/misc_private.h"

#define MBUF_MAX_SIZE ((size_t)4 << 30) /* 4 GiB */
#define MBUF_USER_DATA 96u
#define MBUF_CHAIN_MAX 128u
#define MBUF_MAGIC 0x6d62756642756631ULL

typedef struct mbuf_area {
    void *dev; /* device memory (mem_malloc) */
    size_t size;
    atomic_long refs; /* buffers using it */
} mbuf_area;

typedef struct mock_mbuf {
    uint64_t magic;
    mbuf_area *area;
    size_t data_len;
    unsigned char user[MBUF_USER_DATA];
    struct mock_mbuf *chain_head; /* set on chain members (not on the head) */
    struct mock_mbuf *next;       /* next buffer of the chain (head and members) */
    uint32_t chain_len;           /* on a head: buffers in its chain, itself included */
} mock_mbuf;

static mock_handle_set g_mbufs = MOCK_HANDLE_SET_INIT(MOCK_LOCK_MBUFS);

static aclError bad_buf(const char *fn, const char *what, const void *b)
{
    if (b == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", what);
    }
    return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' (%p) is not a live buffer (aclrtAllocBuf)", what, b);
}

static void area_unref(const char *fn, mbuf_area *a)
{
    if (atomic_fetch_sub(&a->refs, 1) == 1) {
        (void)mem_free(fn, a->dev);
        free(a);
    }
}

aclError aclrtAllocBuf(aclrtMbuf *buf, size_t size)
{
    const char *fn = "aclrtAllocBuf";
    MOCK_REQUIRE_NONNULL(fn, buf);
    if (size == 0 || size > MBUF_MAX_SIZE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' %zu is not in [1, 4 GiB]", size);
    }
    mock_mbuf *b = calloc(1, sizeof(*b));
    mbuf_area *a = calloc(1, sizeof(*a));
    if (b == NULL || a == NULL) {
        free(b);
        free(a);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory");
    }
    aclError rc = mem_malloc(fn, &a->dev, size); /* MOCK_ENTER, context, capacity */
    if (rc != ACL_SUCCESS) {
        free(b);
        free(a);
        return rc;
    }
    a->size = size;
    atomic_init(&a->refs, 1);
    b->magic = MBUF_MAGIC;
    b->area = a;
    b->chain_len = 1;
    if (!core_handle_set_add(&g_mbufs, b)) {
        area_unref(fn, a);
        free(b);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory");
    }
    *buf = b;
    return ACL_SUCCESS;
}

aclError aclrtFreeBuf(aclrtMbuf buf)
{
    const char *fn = "aclrtFreeBuf";
    MOCK_ENTER(fn);
    mock_mbuf *b = buf;
    const mock_mbuf *head = NULL; /* read under the lock: a freed head frees b too */
    int why = 0;                  /* 1 not live, 2 chain member */
    core_handle_set_lock(&g_mbufs);
    if (b == NULL || !core_handle_set_contains_locked(&g_mbufs, b)) {
        why = 1;
    } else if (b->chain_head != NULL) {
        why = 2;
        head = b->chain_head;
    } else {
        for (mock_mbuf *m = b; m != NULL; m = m->next) {
            core_handle_set_remove_locked(&g_mbufs, m);
        }
    }
    core_handle_set_unlock(&g_mbufs);
    if (why == 1) {
        return bad_buf(fn, "buf", buf);
    }
    if (why == 2) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "buffer %p is a member of the chain of %p: free the chain's head", buf,
                          (const void *)head);
    }
    while (b != NULL) {
        mock_mbuf *next = b->next;
        area_unref(fn, b->area);
        b->magic = 0;
        free(b);
        b = next;
    }
    return ACL_SUCCESS;
}

/* The buffer fields are read and written under the set's lock, so that a buffer freed by
 * another thread at the same time is an error, never a use after free. */

aclError aclrtGetBufData(const aclrtMbuf buf, void **dataPtr, size_t *size)
{
    const char *fn = "aclrtGetBufData";
    MOCK_REQUIRE_NONNULL(fn, dataPtr);
    MOCK_REQUIRE_NONNULL(fn, size);
    bool ok = false;
    core_handle_set_lock(&g_mbufs);
    if (buf != NULL && core_handle_set_contains_locked(&g_mbufs, buf)) {
        const mock_mbuf *b = buf;
        *dataPtr = b->area->dev;
        *size = b->area->size;
        ok = true;
    }
    core_handle_set_unlock(&g_mbufs);
    return ok ? ACL_SUCCESS : bad_buf(fn, "buf", buf);
}

aclError aclrtSetBufDataLen(aclrtMbuf buf, size_t len)
{
    const char *fn = "aclrtSetBufDataLen";
    int why = 1; /* 1 not live, 2 too long */
    size_t area = 0;
    core_handle_set_lock(&g_mbufs);
    if (buf != NULL && core_handle_set_contains_locked(&g_mbufs, buf)) {
        mock_mbuf *b = buf;
        area = b->area->size;
        why = len < area ? 0 : 2;
        if (why == 0) {
            b->data_len = len;
        }
    }
    core_handle_set_unlock(&g_mbufs);
    if (why == 1) {
        return bad_buf(fn, "buf", buf);
    }
    if (why == 2) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'len' %zu must be smaller than the %zu-byte data area", len, area);
    }
    return ACL_SUCCESS;
}

aclError aclrtGetBufDataLen(aclrtMbuf buf, size_t *len)
{
    const char *fn = "aclrtGetBufDataLen";
    MOCK_REQUIRE_NONNULL(fn, len);
    bool ok = false;
    core_handle_set_lock(&g_mbufs);
    if (buf != NULL && core_handle_set_contains_locked(&g_mbufs, buf)) {
        *len = ((const mock_mbuf *)buf)->data_len;
        ok = true;
    }
    core_handle_set_unlock(&g_mbufs);
    return ok ? ACL_SUCCESS : bad_buf(fn, "buf", buf);
}

/* Copies user data into (set) or out of (get) the buffer's 96-byte area. */
static aclError user_data(const char *fn, const void *buf, void *data, size_t size, size_t offset, bool set)
{
    if (data == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'dataPtr' is NULL");
    }
    if (offset > MBUF_USER_DATA || size > MBUF_USER_DATA - offset) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "offset %zu + size %zu exceed the %u-byte user data", offset,
                          size, MBUF_USER_DATA);
    }
    bool ok = false;
    core_handle_set_lock(&g_mbufs);
    if (buf != NULL && core_handle_set_contains_locked(&g_mbufs, buf)) {
        mock_mbuf *b = (mock_mbuf *)(uintptr_t)buf;
        if (set) {
            memcpy(b->user + offset, data, size);
        } else {
            memcpy(data, b->user + offset, size);
        }
        ok = true;
    }
    core_handle_set_unlock(&g_mbufs);
    return ok ? ACL_SUCCESS : bad_buf(fn, "buf", buf);
}

aclError aclrtSetBufUserData(aclrtMbuf buf, const void *dataPtr, size_t size, size_t offset)
{
    return user_data("aclrtSetBufUserData", buf, (void *)(uintptr_t)dataPtr, size, offset, true);
}

aclError aclrtGetBufUserData(const aclrtMbuf buf, void *dataPtr, size_t size, size_t offset)
{
    return user_data("aclrtGetBufUserData", buf, dataPtr, size, offset, false);
}

aclError aclrtCopyBufRef(const aclrtMbuf buf, aclrtMbuf *newBuf)
{
    const char *fn = "aclrtCopyBufRef";
    MOCK_REQUIRE_NONNULL(fn, newBuf);
    mock_mbuf *n = calloc(1, sizeof(*n));
    if (n == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory");
    }
    bool ok = false;
    core_handle_set_lock(&g_mbufs);
    if (buf != NULL && core_handle_set_contains_locked(&g_mbufs, buf)) {
        const mock_mbuf *b = buf;
        *n = (mock_mbuf){MBUF_MAGIC, b->area, b->data_len, {0}, NULL, NULL, 1};
        memcpy(n->user, b->user, sizeof n->user);
        atomic_fetch_add(&b->area->refs, 1);
        ok = core_handle_set_add_locked(&g_mbufs, n);
        if (!ok) {
            atomic_fetch_sub(&b->area->refs, 1); /* buf still holds it */
        }
    }
    core_handle_set_unlock(&g_mbufs);
    if (!ok) {
        bool was_live = n->area != NULL;
        free(n);
        return was_live ? core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory") : bad_buf(fn, "buf", buf);
    }
    *newBuf = n;
    return ACL_SUCCESS;
}

aclError aclrtAppendBufChain(aclrtMbuf headBuf, aclrtMbuf buf)
{
    const char *fn = "aclrtAppendBufChain";
    mock_mbuf *h = headBuf, *b = buf;
    int why = 0; /* 1 head not live, 2 buf not live, 3 head is a member, 4 buf chained, 5 same, 6 full */
    core_handle_set_lock(&g_mbufs);
    if (h == NULL || !core_handle_set_contains_locked(&g_mbufs, h)) {
        why = 1;
    } else if (b == NULL || !core_handle_set_contains_locked(&g_mbufs, b)) {
        why = 2;
    } else if (h->chain_head != NULL) {
        why = 3;
    } else if (b == h) {
        why = 5;
    } else if (b->chain_head != NULL || b->next != NULL) {
        why = 4;
    } else if (h->chain_len >= MBUF_CHAIN_MAX) {
        why = 6;
    } else {
        mock_mbuf *tail = h;
        while (tail->next != NULL) {
            tail = tail->next;
        }
        tail->next = b;
        b->chain_head = h;
        h->chain_len++;
    }
    core_handle_set_unlock(&g_mbufs);
    switch (why) {
    case 1:
        return bad_buf(fn, "headBuf", headBuf);
    case 2:
        return bad_buf(fn, "buf", buf);
    case 3:
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "headBuf %p is a member of another chain", headBuf);
    case 4:
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "buf %p is already in a chain", buf);
    case 5:
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "a buffer cannot be appended to itself");
    case 6:
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the chain already holds %u buffers (the maximum)",
                          MBUF_CHAIN_MAX);
    }
    return ACL_SUCCESS;
}

aclError aclrtGetBufChainNum(aclrtMbuf headBuf, uint32_t *num)
{
    const char *fn = "aclrtGetBufChainNum";
    MOCK_REQUIRE_NONNULL(fn, num);
    mock_mbuf *h = headBuf;
    int why = 0;
    core_handle_set_lock(&g_mbufs);
    if (h == NULL || !core_handle_set_contains_locked(&g_mbufs, h)) {
        why = 1;
    } else if (h->chain_head != NULL) {
        why = 2;
    } else {
        *num = h->chain_len;
    }
    core_handle_set_unlock(&g_mbufs);
    if (why == 1) {
        return bad_buf(fn, "headBuf", headBuf);
    }
    if (why == 2) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "headBuf %p is a chain member, not a head", headBuf);
    }
    return ACL_SUCCESS;
}

aclError aclrtGetBufFromChain(aclrtMbuf headBuf, uint32_t index, aclrtMbuf *buf)
{
    const char *fn = "aclrtGetBufFromChain";
    MOCK_REQUIRE_NONNULL(fn, buf);
    mock_mbuf *h = headBuf;
    int why = 0;
    uint32_t len = 0;
    core_handle_set_lock(&g_mbufs);
    if (h == NULL || !core_handle_set_contains_locked(&g_mbufs, h)) {
        why = 1;
    } else if (h->chain_head != NULL) {
        why = 2;
    } else if (index >= h->chain_len) {
        why = 3;
        len = h->chain_len;
    } else {
        mock_mbuf *m = h;
        for (uint32_t i = 0; i < index; i++) {
            m = m->next;
        }
        *buf = m;
    }
    core_handle_set_unlock(&g_mbufs);
    switch (why) {
    case 1:
        return bad_buf(fn, "headBuf", headBuf);
    case 2:
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "headBuf %p is a chain member, not a head", headBuf);
    case 3:
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'index' %u is not below the chain length %u", index,
                          len);
    }
    return ACL_SUCCESS;
}

void misc_mbuf_release_all(void)
{
    /* take the whole set, then free its buffers without the lock (nothing to allocate) */
    core_handle_set_lock(&g_mbufs);
    mock_registry reg = g_mbufs.reg;
    g_mbufs.reg = (mock_registry)MOCK_REGISTRY_EMPTY;
    core_handle_set_unlock(&g_mbufs);
    for (size_t i = 0; i < reg.cap; i++) {
        mock_mbuf *b = core_registry_slot(&reg, i);
        if (b != NULL) {
            area_unref("aclFinalize", b->area);
            b->magic = 0;
            free(b);
        }
    }
    core_registry_release(&reg);
}
