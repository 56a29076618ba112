/*
 * mock_registry.h - the one set of live handle pointers used by every subsystem
 * (streams, events, data buffers, allocator descriptors, exception infos,
 * profiling configs/step infos/stamps).
 *
 * A handle given to the user is a pointer to a heap object; every public entry
 * point looks the pointer up here *before* dereferencing it, so a garbage or
 * already destroyed handle gets an error instead of a crash. Lookups compare
 * pointer values only.
 *
 * Header-only (static inline) because libmsprofiler.so and libascend_dump.so are
 * built from their own sources and cannot call hidden helpers of libascendcl.so.
 * Depends on nothing but libc and pthreads.
 *
 *   mock_registry    the bare set: open addressing, linear probing, backward-shift
 *                    deletion (no tombstones). Not locked: the owner guards it with
 *                    its own mutex (streams and events keep counters under it too).
 *   mock_handle_set  a mock_registry with its own mutex, for owners that need
 *                    nothing else under the lock.
 */
#ifndef MOCK_REGISTRY_H
#define MOCK_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* ------------------------------------------------------------ bare set */

typedef struct mock_registry {
    uintptr_t *slots; /* 0 = empty */
    size_t cap;       /* power of two, or 0 before the first insert */
    size_t count;     /* live entries */
} mock_registry;

#define MOCK_REGISTRY_EMPTY { NULL, 0, 0 }

static inline size_t core_registry_hash_(uintptr_t p, size_t cap)
{
    uint64_t h = (uint64_t)p;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h & (cap - 1);
}

static inline bool core_registry_contains(const mock_registry *r, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (p == 0 || r->cap == 0) {
        return false;
    }
    for (size_t i = core_registry_hash_(p, r->cap);; i = (i + 1) & (r->cap - 1)) {
        if (r->slots[i] == 0) {
            return false;
        }
        if (r->slots[i] == p) {
            return true;
        }
    }
}

/* `ptr` as a live handle, or NULL. */
static inline void *core_registry_find(const mock_registry *r, const void *ptr)
{
    return core_registry_contains(r, ptr) ? (void *)(uintptr_t)ptr : NULL;
}

static inline bool core_registry_grow_(mock_registry *r)
{
    size_t ncap = r->cap ? r->cap * 2 : 64;
    uintptr_t *ns = (uintptr_t *)calloc(ncap, sizeof(uintptr_t));
    if (ns == NULL) {
        return false;
    }
    for (size_t j = 0; j < r->cap; j++) {
        uintptr_t p = r->slots[j];
        if (p != 0) {
            size_t i = core_registry_hash_(p, ncap);
            while (ns[i] != 0) {
                i = (i + 1) & (ncap - 1);
            }
            ns[i] = p;
        }
    }
    free(r->slots);
    r->slots = ns;
    r->cap = ncap;
    return true;
}

/* false only when out of memory (inserting a present pointer is a no-op). */
static inline bool core_registry_insert(mock_registry *r, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if ((r->count + 1) * 2 > r->cap && !core_registry_grow_(r)) {
        return false;
    }
    size_t i = core_registry_hash_(p, r->cap);
    while (r->slots[i] != 0) {
        if (r->slots[i] == p) {
            return true;
        }
        i = (i + 1) & (r->cap - 1);
    }
    r->slots[i] = p;
    r->count++;
    return true;
}

/* false if `ptr` was not in the set. Do not erase while walking the slots
 * (entries move back): collect first, then erase. */
static inline bool core_registry_erase(mock_registry *r, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (p == 0 || r->cap == 0) {
        return false;
    }
    size_t mask = r->cap - 1;
    size_t i = core_registry_hash_(p, r->cap);
    while (r->slots[i] != p) {
        if (r->slots[i] == 0) {
            return false;
        }
        i = (i + 1) & mask;
    }
    /* backward-shift deletion keeps every probe chain intact */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (r->slots[j] == 0) {
            break;
        }
        size_t home = core_registry_hash_(r->slots[j], r->cap);
        /* can slots[j] move to i?  yes unless home lies cyclically in (i, j] */
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            r->slots[i] = r->slots[j];
            i = j;
        }
    }
    r->slots[i] = 0;
    r->count--;
    return true;
}

/* Iteration: for (size_t i = 0; i < r->cap; i++) { void *h = core_registry_slot(r, i); if (h) ... } */
static inline void *core_registry_slot(const mock_registry *r, size_t i)
{
    return (void *)r->slots[i];
}

/* Empties the set and frees its storage. */
static inline void core_registry_release(mock_registry *r)
{
    free(r->slots);
    r->slots = NULL;
    r->cap = 0;
    r->count = 0;
}

/* ---------------------------------------------------- set with its lock */

typedef struct mock_handle_set {
    pthread_mutex_t mu;
    mock_registry reg;
} mock_handle_set;

#define MOCK_HANDLE_SET_INIT { PTHREAD_MUTEX_INITIALIZER, MOCK_REGISTRY_EMPTY }

static inline void core_handle_set_lock(mock_handle_set *s) { pthread_mutex_lock(&s->mu); }
static inline void core_handle_set_unlock(mock_handle_set *s) { pthread_mutex_unlock(&s->mu); }

/* Caller holds the lock. */
static inline bool core_handle_set_contains_locked(const mock_handle_set *s, const void *ptr)
{
    return core_registry_contains(&s->reg, ptr);
}
static inline bool core_handle_set_add_locked(mock_handle_set *s, const void *ptr)
{
    return core_registry_insert(&s->reg, ptr);
}
static inline bool core_handle_set_remove_locked(mock_handle_set *s, const void *ptr)
{
    return core_registry_erase(&s->reg, ptr);
}

/* Locking variants. add: false only when out of memory; remove: false if absent. */
static inline bool core_handle_set_add(mock_handle_set *s, const void *ptr)
{
    core_handle_set_lock(s);
    bool ok = core_handle_set_add_locked(s, ptr);
    core_handle_set_unlock(s);
    return ok;
}
static inline bool core_handle_set_remove(mock_handle_set *s, const void *ptr)
{
    core_handle_set_lock(s);
    bool ok = core_handle_set_remove_locked(s, ptr);
    core_handle_set_unlock(s);
    return ok;
}
static inline bool core_handle_set_contains(mock_handle_set *s, const void *ptr)
{
    core_handle_set_lock(s);
    bool ok = core_handle_set_contains_locked(s, ptr);
    core_handle_set_unlock(s);
    return ok;
}

#endif /* MOCK_REGISTRY_H */
