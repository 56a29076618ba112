/*
 * The C-level hit path of the caching allocator, shared by two extension modules:
 *
 *   pyacl_rt._cachecore  (pyacl_rt/_cachecore.c) fills this table and exports it as the
 *                        capsule pyacl_rt._cachecore._C_API;
 *   pyacl_rt._memcore    (pyacl_rt/_memcore.c) receives the capsule from the allocator
 *                        package (pyacl_rt/_allocator/__init__.py, a higher layer) and
 *                        calls these functions for buffers served from the cache, so that
 *                        a cached DeviceBuffer / HostBuffer life runs without Python frames.
 *
 * Every function runs with the GIL held, never releases it and never calls back into
 * Python. A 0 result with an exception set means out of host memory (caller clears it).
 */
#ifndef PYACL_RT_CACHEAPI_H
#define PYACL_RT_CACHEAPI_H

#include <Python.h>
#include <stdint.h>

#define PYACL_CACHE_API_CAPSULE "pyacl_rt._cachecore._C_API"
#define PYACL_CACHE_API_VERSION 1

typedef struct {
    int version;   /* PYACL_CACHE_API_VERSION */
    size_t size;   /* sizeof(PyaclCacheAPI) */
    /* 1 if `o` is a _cachecore.Core / _cachecore.HostCore. */
    int (*is_core)(PyObject *o);
    int (*is_host_core)(PyObject *o);
    /* Core: the address of a cached block of `stream`'s cache for `nbytes`, or 0 (a miss:
     * the caller takes the Python slow path, which allocates a segment). */
    uint64_t (*dev_alloc)(PyObject *core, uint64_t stream, uint64_t nbytes);
    /* Core: give back an allocated block: its size, negated when the cache is now over
     * its trim budget; 0 when `ptr` is not an allocated block. */
    int64_t (*dev_free)(PyObject *core, uint64_t ptr);
    /* HostCore: an idle pinned block for `nbytes`, or 0 (a miss, or blocks freed under
     * pending work wait to be checked: the Python slow path does that first); *slot is
     * the block's entry, for host_give. */
    uint64_t (*host_take)(PyObject *core, uint64_t nbytes, size_t *slot);
    /* HostCore: give back a block taken from it, idle at once: its size, or 0 when
     * `ptr` is not an allocated block (the pool was torn down meanwhile). `slot` is the
     * entry host_take gave (a stale one costs a lookup by address). */
    uint64_t (*host_give)(PyObject *core, uint64_t ptr, size_t slot);
} PyaclCacheAPI;

#endif /* PYACL_RT_CACHEAPI_H */
