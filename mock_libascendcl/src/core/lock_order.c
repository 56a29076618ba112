/*
 * lock_order.c - the run-time lock-order checker of the test builds (core/lock_order.h).
 *
 * Each thread keeps the list of locks it holds (id and address, in the order taken).
 * Taking lock L while holding H is allowed only when H is in L's "may hold" set of
 * MOCK_LOCK_TABLE; a recursive mutex may be taken again by its holder. A condition
 * wait must be on the innermost lock held. A violation prints both locks and aborts,
 * so a test run fails at the first inversion instead of deadlocking some day.
 * Compiled to nothing unless MOCK_LOCK_CHECK is set (CMake option, ON in the builds
 * that have tests).
 */
#include "core/lock_order.h"

#if MOCK_LOCK_CHECK

#include <stdio.h>
#include <stdlib.h>

#define MAX_HELD 16

typedef struct held_lock {
    mock_lock_id id;
    const void *lock;
    mock_lock_mode mode;
} held_lock;

static __thread held_lock t_held[MAX_HELD];
static __thread int t_nheld;

static const char *const k_names[MOCK_LOCK_COUNT] = {
#define MOCK_LOCK_NAME_(id, where, guards, may_hold) #id " (" where ")",
    MOCK_LOCK_TABLE(MOCK_LOCK_NAME_)
#undef MOCK_LOCK_NAME_
};

static const uint64_t k_may_hold[MOCK_LOCK_COUNT] = {
#define MOCK_LOCK_MASK_(id, where, guards, may_hold) may_hold,
    MOCK_LOCK_TABLE(MOCK_LOCK_MASK_)
#undef MOCK_LOCK_MASK_
};

static __attribute__((noreturn)) void violation(const char *what, mock_lock_id id, mock_lock_id other)
{
    fprintf(stderr, "mock_libascendcl: lock order violation: %s %s while holding %s (core/lock_order.h)\n", what,
            k_names[id], k_names[other]);
    fflush(stderr);
    abort();
}

void core_lock_check_take(mock_lock_id id, const void *lock, mock_lock_mode mode)
{
    for (int i = 0; i < t_nheld; i++) {
        if (t_held[i].lock == lock &&
            (mode == MOCK_LOCK_RECURSIVE || (mode == MOCK_LOCK_SHARED && t_held[i].mode == MOCK_LOCK_SHARED))) {
            continue; /* its holder takes a recursive mutex, or a read lock, again */
        }
        if (t_held[i].lock == lock || (k_may_hold[id] & MOCK_HOLDS(t_held[i].id)) == 0) {
            violation("taking", id, t_held[i].id);
        }
    }
    if (t_nheld == MAX_HELD) {
        fprintf(stderr, "mock_libascendcl: more than %d locks held by one thread\n", MAX_HELD);
        abort();
    }
    t_held[t_nheld++] = (held_lock){id, lock, mode};
}

void core_lock_check_drop(mock_lock_id id, const void *lock)
{
    for (int i = t_nheld - 1; i >= 0; i--) { /* the most recent hold of this lock */
        if (t_held[i].lock == lock) {
            for (int j = i; j + 1 < t_nheld; j++) {
                t_held[j] = t_held[j + 1];
            }
            t_nheld--;
            return;
        }
    }
    fprintf(stderr, "mock_libascendcl: releasing %s, which this thread does not hold\n", k_names[id]);
    abort();
}

void core_lock_check_wait(mock_lock_id id, const void *lock)
{
    if (t_nheld == 0 || t_held[t_nheld - 1].lock != lock) {
        if (t_nheld == 0) {
            fprintf(stderr, "mock_libascendcl: condition wait on %s, which this thread does not hold\n",
                    k_names[id]);
            abort();
        }
        violation("waiting on", id, t_held[t_nheld - 1].id);
    }
}

void core_lock_check_none(const char *what)
{
    for (int i = 0; i < t_nheld; i++) {
        if (t_held[i].id != MOCK_LOCK_LIFECYCLE) {
            fprintf(stderr, "mock_libascendcl: %s while holding %s (core/lock_order.h: no lock is held while "
                    "user code runs)\n", what, k_names[t_held[i].id]);
            fflush(stderr);
            abort();
        }
    }
}

#endif /* MOCK_LOCK_CHECK */
