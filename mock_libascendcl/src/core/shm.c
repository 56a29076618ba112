/*
 * shm.c - process-shared words: the state of objects another process may map (IPC
 * events, notifies) lives in 64-byte slots of memfd-backed arenas mapped MAP_SHARED,
 * so that a process that receives the arena's file descriptor (src/ipc/) maps the very
 * same bytes; and futex wait/wake on such words, shared (no FUTEX_PRIVATE_FLAG), so
 * that a record in one process wakes a wait in another.
 *
 * Arenas are chunks of SHM_CHUNK_BYTES (sparse: a page is only allocated when a slot in
 * it is used), created on demand and kept for the life of the process (at most
 * SHM_MAX_CHUNKS). A slot is zeroed when handed out. Where memfd_create is not
 * available the chunk is anonymous shared memory (fd -1): the objects work in this
 * process but cannot be exported.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/core.h"

#define SHM_CHUNK_BYTES ((size_t)1 << 20)
#define SHM_SLOTS_PER_CHUNK ((uint32_t)(SHM_CHUNK_BYTES / CORE_SHM_SLOT_BYTES))
#define SHM_MAX_CHUNKS 256u /* 4M slots: more than 64 devices x 65535 notifies */

typedef struct shm_chunk {
    int fd;
    uint8_t *base;
} shm_chunk;

static mock_mutex g_shm_mu = MOCK_MUTEX_INIT(MOCK_LOCK_SHM_SLOTS);
static shm_chunk g_chunks[SHM_MAX_CHUNKS]; /* under g_shm_mu */
static uint32_t g_nchunks;
static uint32_t *g_free; /* stack of free slot numbers: chunk * SLOTS_PER_CHUNK + index */
static size_t g_nfree, g_capfree;

/* Maps a new chunk and pushes its slots. g_shm_mu held. */
static bool chunk_add_locked(void)
{
    if (g_nchunks == SHM_MAX_CHUNKS) {
        return false;
    }
    /* room for every slot of every chunk: all of them may be free at once */
    size_t need = (size_t)(g_nchunks + 1) * SHM_SLOTS_PER_CHUNK;
    if (need > g_capfree) {
        uint32_t *n = realloc(g_free, need * sizeof(*n));
        if (n == NULL) {
            return false;
        }
        g_free = n;
        g_capfree = need;
    }
    int fd = memfd_create("acl_mock_shared_words", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, (off_t)SHM_CHUNK_BYTES) != 0) {
        close(fd);
        fd = -1;
    }
    void *p = fd >= 0 ? mmap(NULL, SHM_CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                      : mmap(NULL, SHM_CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        if (fd >= 0) {
            close(fd);
        }
        return false;
    }
    uint32_t c = g_nchunks++;
    g_chunks[c].fd = fd;
    g_chunks[c].base = p;
    /* pushed in reverse so that slots are handed out in address order */
    for (uint32_t i = SHM_SLOTS_PER_CHUNK; i > 0; i--) {
        g_free[g_nfree++] = c * SHM_SLOTS_PER_CHUNK + (i - 1);
    }
    return true;
}

bool core_shm_slot_alloc(core_shm_slot *out)
{
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    core_mutex_lock(&g_shm_mu);
    bool ok = g_nfree > 0 || chunk_add_locked();
    if (ok) {
        uint32_t n = g_free[--g_nfree];
        shm_chunk *c = &g_chunks[n / SHM_SLOTS_PER_CHUNK];
        size_t off = (size_t)(n % SHM_SLOTS_PER_CHUNK) * CORE_SHM_SLOT_BYTES;
        out->addr = c->base + off;
        out->fd = c->fd;
        out->offset = off;
        out->number = n;
    }
    core_mutex_unlock(&g_shm_mu);
    if (ok) {
        memset(out->addr, 0, CORE_SHM_SLOT_BYTES);
    }
    return ok;
}

void core_shm_slot_free(const core_shm_slot *slot)
{
    if (slot->addr == NULL) {
        return;
    }
    core_mutex_lock(&g_shm_mu);
    g_free[g_nfree++] = slot->number; /* cannot overflow: capacity covers every slot */
    core_mutex_unlock(&g_shm_mu);
}

/* ----------------------------------------------------------------- futex */

int core_futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *deadline)
{
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline (NULL = none). */
    long r = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET, expected, deadline, NULL,
                     FUTEX_BITSET_MATCH_ANY);
    if (r == 0) {
        return 0;
    }
    return errno == ETIMEDOUT ? ETIMEDOUT : 0; /* EAGAIN (value changed), EINTR: recheck */
}

void core_futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
