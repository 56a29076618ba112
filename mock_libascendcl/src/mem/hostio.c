/*
 * hostio.c - the runtime itself reading and writing device memory from the host: small
 * reads/writes (descriptors, pointer slots) and the memory image of a process snapshot
 * (aclrtSnapShotProcessBackup / Restore, misc/snapshot.c). Every access is inside the
 * isolation bracket, and writes are announced to value waits (mem_write_begin/end).
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "mem/mem.h"
#include "mem/mem_private.h"

/* The record holding [p, p+n) with a reference, or NULL. */
static mem_rec *acquire_range(const void *p, size_t n)
{
    mem_rec *r = mem_acquire(p);
    if (r != NULL && n > r->size - ((uintptr_t)p - r->base)) {
        mem_release(r);
        r = NULL;
    }
    return r;
}

static void write_rec(mem_rec *r, void *dst, const void *src, size_t n)
{
    bool dev = mem_rec_is_device(r);
    mem_rec_access_begin(r);
    if (dev) {
        mem_write_begin();
    }
    memcpy(dst, src, n);
    if (dev) {
        mem_write_end();
    }
    mem_rec_access_end(r);
}

bool mem_read(const void *p, void *out, size_t n)
{
    mem_rec *r = acquire_range(p, n);
    if (r == NULL) {
        return false;
    }
    mem_rec_access_begin(r);
    memcpy(out, p, n);
    mem_rec_access_end(r);
    mem_release(r);
    return true;
}

bool mem_write(void *p, const void *in, size_t n)
{
    mem_rec *r = acquire_range(p, n);
    if (r == NULL) {
        return false;
    }
    write_rec(r, p, in, n);
    mem_release(r);
    return true;
}

/* ------------------------------------------------------------ snapshot image */

typedef struct image_entry {
    uintptr_t base;
    size_t size;
    mem_rec_kind kind;
    unsigned char *bytes;
} image_entry;

struct mem_image {
    image_entry *v;
    size_t n;
};

mem_image *mem_image_save(void)
{
    mem_image *img = calloc(1, sizeof(*img));
    if (img == NULL) {
        return NULL;
    }
    size_t n = 0;
    mem_rec **recs = mem_registry_collect((1u << MEM_REC_DEVICE) | (1u << MEM_REC_VMM_MAP), &n);
    img->v = n > 0 ? calloc(n, sizeof(*img->v)) : NULL;
    bool ok = n == 0 || img->v != NULL;
    for (size_t i = 0; i < n; i++) {
        mem_rec *r = recs[i];
        unsigned char *copy = ok ? malloc(r->size > 0 ? r->size : 1) : NULL;
        if (copy == NULL) {
            ok = false;
        } else {
            mem_rec_access_begin(r);
            memcpy(copy, (const void *)r->base, r->size);
            mem_rec_access_end(r);
            img->v[img->n++] = (image_entry){r->base, r->size, r->kind, copy};
        }
        mem_release(r);
    }
    free(recs);
    if (!ok) {
        mem_image_free(img);
        return NULL;
    }
    return img;
}

void mem_image_restore(const mem_image *img)
{
    for (size_t i = 0; img != NULL && i < img->n; i++) {
        const image_entry *e = &img->v[i];
        mem_rec *r = mem_acquire((const void *)e->base);
        if (r != NULL && r->base == e->base && r->size == e->size && r->kind == e->kind) {
            write_rec(r, (void *)r->base, e->bytes, e->size);
        }
        mem_release(r);
    }
}

void mem_image_free(mem_image *img)
{
    if (img == NULL) {
        return;
    }
    for (size_t i = 0; i < img->n; i++) {
        free(img->v[i].bytes);
    }
    free(img->v);
    free(img);
}
