/*
 * thread_streams.c - one worker thread per device (pthreads), each with two
 * streams: a "copy-in" stream uploads a batch and records an event, a
 * "compute/copy-out" stream waits for that event, transforms the data on the
 * device (memset of a region + device-to-device copy) and downloads the
 * result. Several rounds per thread reuse the same events; the result of each
 * round is verified on the host.
 *
 * Written against the public AscendCL headers only, the way a CANN user writes it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        aclError check_rc_ = (expr);                                                         \
        if (check_rc_ != ACL_SUCCESS) {                                                      \
            const char *check_msg_ = aclGetRecentErrMsg();                                   \
            fprintf(stderr, "%s:%d: %s failed with %d: %s\n", __FILE__, __LINE__, #expr,     \
                    (int)check_rc_, check_msg_ != NULL ? check_msg_ : "(no message)");        \
            return (void *)1;                                                                \
        }                                                                                    \
    } while (0)

#define MAX_THREADS 8
#define ROUNDS 20
#define BYTES (256 * 1024)

typedef struct worker {
    int32_t device;
    int index;
} worker;

static void *worker_main(void *arg)
{
    const worker *w = (const worker *)arg;
    CHECK(aclrtSetDevice(w->device));
    int32_t current = -1;
    CHECK(aclrtGetDevice(&current));
    if (current != w->device) {
        fprintf(stderr, "thread %d: current device %d, expected %d\n", w->index, current, w->device);
        return (void *)1;
    }
    aclrtStream in_stream = NULL, out_stream = NULL;
    CHECK(aclrtCreateStream(&in_stream));
    CHECK(aclrtCreateStreamWithConfig(&out_stream, 0, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC));
    aclrtEvent uploaded = NULL, done = NULL;
    CHECK(aclrtCreateEventWithFlag(&uploaded, ACL_EVENT_SYNC));
    CHECK(aclrtCreateEvent(&done));

    void *dev_in = NULL, *dev_out = NULL, *host_in = NULL, *host_out = NULL;
    CHECK(aclrtMalloc(&dev_in, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dev_out, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMallocHost(&host_in, BYTES));
    CHECK(aclrtMallocHost(&host_out, BYTES));

    int failures = 0;
    for (int round = 0; round < ROUNDS; round++) {
        unsigned char seed = (unsigned char)(w->index * 31 + round);
        unsigned char *in = (unsigned char *)host_in;
        for (size_t i = 0; i < BYTES; i++) {
            in[i] = (unsigned char)(seed + i);
        }
        /* stream 1: upload, then signal */
        CHECK(aclrtMemcpyAsync(dev_in, BYTES, host_in, BYTES, ACL_MEMCPY_HOST_TO_DEVICE, in_stream));
        CHECK(aclrtRecordEvent(uploaded, in_stream));
        /* stream 2: wait for the upload, "compute", download */
        CHECK(aclrtStreamWaitEvent(out_stream, uploaded));
        CHECK(aclrtMemcpyAsync(dev_out, BYTES, dev_in, BYTES, ACL_MEMCPY_DEVICE_TO_DEVICE, out_stream));
        CHECK(aclrtMemsetAsync(dev_out, BYTES, 0xA5, BYTES / 4, out_stream)); /* first quarter */
        CHECK(aclrtMemcpyAsync(host_out, BYTES, dev_out, BYTES, ACL_MEMCPY_DEVICE_TO_HOST, out_stream));
        CHECK(aclrtRecordEvent(done, out_stream));
        CHECK(aclrtSynchronizeEvent(done));

        aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_NOT_READY;
        CHECK(aclrtQueryEventStatus(done, &st));
        if (st != ACL_EVENT_RECORDED_STATUS_COMPLETE) {
            fprintf(stderr, "thread %d round %d: event not complete after synchronize\n", w->index, round);
            failures++;
        }
        const unsigned char *out = (const unsigned char *)host_out;
        for (size_t i = 0; i < BYTES; i++) {
            unsigned char want = i < BYTES / 4 ? 0xA5 : (unsigned char)(seed + i);
            if (out[i] != want) {
                if (failures++ < 3) {
                    fprintf(stderr, "thread %d round %d byte %zu: got %02x want %02x\n", w->index, round, i,
                            out[i], want);
                }
                break;
            }
        }
    }
    CHECK(aclrtSynchronizeStream(in_stream));
    CHECK(aclrtRecordEvent(uploaded, in_stream));
    CHECK(aclrtSynchronizeEvent(uploaded));

    CHECK(aclrtFree(dev_in));
    CHECK(aclrtFree(dev_out));
    CHECK(aclrtFreeHost(host_in));
    CHECK(aclrtFreeHost(host_out));
    CHECK(aclrtDestroyEvent(uploaded));
    CHECK(aclrtDestroyEvent(done));
    CHECK(aclrtDestroyStream(in_stream));
    CHECK(aclrtDestroyStream(out_stream));
    CHECK(aclrtResetDevice(w->device));
    return failures == 0 ? NULL : (void *)1;
}

int main(void)
{
    if (aclInit(NULL) != ACL_SUCCESS) {
        fprintf(stderr, "aclInit failed: %s\n", aclGetRecentErrMsg());
        return 1;
    }
    uint32_t count = 0;
    if (aclrtGetDeviceCount(&count) != ACL_SUCCESS || count == 0) {
        fprintf(stderr, "no device\n");
        return 1;
    }
    int nthreads = MAX_THREADS;
    pthread_t tids[MAX_THREADS];
    worker workers[MAX_THREADS];
    for (int i = 0; i < nthreads; i++) {
        workers[i].device = (int32_t)((uint32_t)i % count);
        workers[i].index = i;
        if (pthread_create(&tids[i], NULL, worker_main, &workers[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    int failed = 0;
    for (int i = 0; i < nthreads; i++) {
        void *res = NULL;
        pthread_join(tids[i], &res);
        if (res != NULL) {
            failed++;
        }
    }
    /* the main thread never selected a device */
    int32_t dev = -1;
    if (aclrtGetDevice(&dev) != ACL_ERROR_RT_CONTEXT_NULL) {
        fprintf(stderr, "main thread unexpectedly has a current device\n");
        failed++;
    }
    if (aclFinalize() != ACL_SUCCESS) {
        failed++;
    }
    if (failed != 0) {
        fprintf(stderr, "%d worker(s) failed\n", failed);
        return 1;
    }
    printf("thread_streams: %d threads over %u devices, %d rounds each, verified\n", nthreads, count, ROUNDS);
    return 0;
}
