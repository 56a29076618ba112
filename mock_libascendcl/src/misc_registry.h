/*
 * misc_registry.h - a tiny, header-only set of live handle pointers.
 *
 * Used by the misc subsystems (data buffers, allocator descriptors, profiling
 * configs/step infos/stamps, exception infos) so that a garbage or already
 * destroyed handle is recognised *before* it is dereferenced: every public
 * entry point looks the pointer up under the set's lock and only then reads
 * the object. Header-only because libmsprofiler.so and libascend_dump.so are
 * built from their own sources and cannot call hidden helpers of
 * libascendcl.so.
 *
 * Open addressing, linear probing, backward-shift deletion; no tombstones.
 */
#ifndef MISC_REGISTRY_H
#define MISC_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct misc_registry {
    pthread_mutex_t mu;
    uintptr_t *slots; /* 0 = empty */
    size_t cap;       /* power of two or 0 */
    size_t count;
} misc_registry;

#define MISC_REGISTRY_INIT { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0 }

static inline size_t misc_registry_hash_(uintptr_t p, size_t cap)
{
    uint64_t h = (uint64_t)p;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h & (cap - 1);
}

static inline void misc_registry_lock(misc_registry *r) { pthread_mutex_lock(&r->mu); }
static inline void misc_registry_unlock(misc_registry *r) { pthread_mutex_unlock(&r->mu); }

/* Caller holds the lock. */
static inline bool misc_registry_contains_locked(const misc_registry *r, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (p == 0 || r->cap == 0) {
        return false;
    }
    for (size_t i = misc_registry_hash_(p, r->cap);; i = (i + 1) & (r->cap - 1)) {
        if (r->slots[i] == 0) {
            return false;
        }
        if (r->slots[i] == p) {
            return true;
        }
    }
}

static inline bool misc_registry_grow_(misc_registry *r)
{
    size_t ncap = r->cap ? r->cap * 2 : 64;
    uintptr_t *ns = (uintptr_t *)calloc(ncap, sizeof(uintptr_t));
    if (ns == NULL) {
        return false;
    }
    for (size_t j = 0; j < r->cap; j++) {
        uintptr_t p = r->slots[j];
        if (p != 0) {
            size_t i = misc_registry_hash_(p, ncap);
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

/* Caller holds the lock. false only on out-of-memory. */
static inline bool misc_registry_add_locked(misc_registry *r, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if ((r->count + 1) * 2 > r->cap && !misc_registry_grow_(r)) {
        return false;
    }
    size_t i = misc_registry_hash_(p, r->cap);
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

/* Caller holds the lock. false if `ptr` was not in the set. */
static inline bool misc_registry_remove_locked(misc_registry *r, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (p == 0 || r->cap == 0) {
        return false;
    }
    size_t mask = r->cap - 1;
    size_t i = misc_registry_hash_(p, r->cap);
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
        size_t home = misc_registry_hash_(r->slots[j], r->cap);
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

static inline bool misc_registry_add(misc_registry *r, const void *ptr)
{
    misc_registry_lock(r);
    bool ok = misc_registry_add_locked(r, ptr);
    misc_registry_unlock(r);
    return ok;
}

static inline bool misc_registry_remove(misc_registry *r, const void *ptr)
{
    misc_registry_lock(r);
    bool ok = misc_registry_remove_locked(r, ptr);
    misc_registry_unlock(r);
    return ok;
}

static inline bool misc_registry_contains(misc_registry *r, const void *ptr)
{
    misc_registry_lock(r);
    bool ok = misc_registry_contains_locked(r, ptr);
    misc_registry_unlock(r);
    return ok;
}

#endif /* MISC_REGISTRY_H */
