/*
 * streams_util.h - helpers shared by test_stream.c, test_event.c and
 * test_callback.c: a gate (a host function that holds a stream until the test
 * opens it), a counter task and a FIFO log.
 */
#ifndef STREAMS_UTIL_H
#define STREAMS_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "acl/acl.h"
#include "mock_test.h"

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    atomic_int entered; /* number of host funcs that reached the gate */
} gate;

static inline void gate_init(gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = 0;
    atomic_init(&g->entered, 0);
}

static inline void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static inline void gate_destroy(gate *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

/* aclrtHostFunc: blocks its stream until the gate opens. */
static inline void gate_fn(void *arg)
{
    gate *g = (gate *)arg;
    atomic_fetch_add(&g->entered, 1);
    pthread_mutex_lock(&g->mu);
    while (!g->open) {
        pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

/* Holds `stream` until gate_open(g). */
static inline void hold_stream(aclrtStream stream, gate *g)
{
    CHECK_OK(aclrtLaunchHostFunc(stream, gate_fn, g));
}

/* Spins (politely) until the gate function is running on the stream. */
static inline void wait_entered(gate *g, int n)
{
    while (atomic_load(&g->entered) < n) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static inline void counter_fn(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

/* FIFO log: each task appends its index. */
typedef struct fifo_log {
    atomic_int pos;
    int *order;
} fifo_log;

typedef struct fifo_item {
    fifo_log *log;
    int idx;
} fifo_item;

static inline void fifo_fn(void *arg)
{
    fifo_item *it = (fifo_item *)arg;
    int p = atomic_fetch_add(&it->log->pos, 1);
    it->log->order[p] = it->idx;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif /* STREAMS_UTIL_H */
