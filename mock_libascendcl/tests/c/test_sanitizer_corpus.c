/* test_sanitizer_corpus.c - the race sanitizer (mock README "Race sanitizer") against a
 * corpus of seeded ordering bugs: each bug is a small program fragment with a missing
 * or wrong synchronization, and each has a corrected twin. Every bug must be reported
 * (with the expected kind, both tasks, their streams and tags), no corrected twin may
 * be. Runs with ASCEND_MOCK_SANITIZE=1; the fail and abort modes run in children.
 *
 * The racing pairs are built so that at most one side really moves bytes (the other is
 * an aclmockLaunchOp with declared accesses and no host twin, or a declared host
 * access): the sanitizer judges the order of submission, so the bug is found whether
 * or not the two tasks overlap in this run, and ThreadSanitizer / AddressSanitizer
 * builds see no real race in the test itself. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_mock_kernel.h"
#include "mock_test.h"

#define BUF ((size_t)64 * 1024)

static aclrtStream s1, s2, s3;
static void *d1, *d2, *d3, *h1;
static aclrtEvent ev, ev2;

static void op(const char *name, void *p, size_t n, uint32_t access, aclrtStream s)
{
    aclmockOpArg a = {p, n, access, ACL_UINT8, 0, {0}};
    aclmockOpDesc o = {name, 1000, &a, 1, NULL, NULL};
    CHECK_OK(aclmockLaunchOp(&o, s));
}

static void h2d(void *dst, aclrtStream s)
{
    CHECK_OK(aclrtMemcpyAsync(dst, BUF, h1, BUF, ACL_MEMCPY_HOST_TO_DEVICE, s));
}

/* ------------------------------------------------------------------ the corpus */
/* Each entry: the bug, its fix, and the kind of report the bug gives. */

/* 1. H2D on s1, a kernel reading the data on s2: no ordering. */
static void bug_h2d_then_read(void)
{
    aclmockSetNextTaskTag("corpus.c:h2d");
    h2d(d1, s1);
    aclmockSetNextTaskTag("corpus.c:read");
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}
static void fix_h2d_then_read(void)
{
    h2d(d1, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}

/* 2. A kernel writes on s1, the D2H reading the result runs on s2. */
static void bug_write_then_d2h(void)
{
    op("writer", d1, BUF, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtMemcpyAsync(h1, BUF, d1, BUF, ACL_MEMCPY_DEVICE_TO_HOST, s2));
}
static void fix_write_then_d2h(void)
{
    op("writer", d1, BUF, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtSynchronizeStream(s1));
    CHECK_OK(aclrtMemcpyAsync(h1, BUF, d1, BUF, ACL_MEMCPY_DEVICE_TO_HOST, s2));
}

/* 3. Two kernels on two streams write the same buffer. */
static void bug_write_write(void)
{
    op("w1", d1, BUF, ACLMOCK_ACCESS_WRITE, s1);
    op("w2", d1, BUF, ACLMOCK_ACCESS_WRITE, s2);
}
static void fix_write_write(void)
{
    op("w1", d1, BUF, ACLMOCK_ACCESS_WRITE, s1);
    op("w2", d1, BUF, ACLMOCK_ACCESS_WRITE, s1); /* same stream: in order */
}

/* 4. A memset on s1, a D2D copy reading it on s2. */
static void bug_memset_then_copy(void)
{
    CHECK_OK(aclrtMemsetAsync(d1, BUF, 0, BUF, s1));
    op("copy-like", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}
static void fix_memset_then_copy(void)
{
    CHECK_OK(aclrtMemsetAsync(d1, BUF, 0, BUF, s1));
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtSynchronizeEvent(ev));
    op("copy-like", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}

/* 5. The event is recorded before the write it should cover. */
static void bug_event_too_early(void)
{
    CHECK_OK(aclrtRecordEvent(ev, s1));
    h2d(d1, s1);
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}
static void fix_event_too_early(void)
{
    h2d(d1, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}

/* 6. The wait is issued before the event is re-recorded after the write (a wait
 *    binds to the record latest at the time of the call). */
static void bug_wait_before_rerecord(void)
{
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    h2d(d1, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}
static void fix_wait_before_rerecord(void)
{
    CHECK_OK(aclrtRecordEvent(ev, s1));
    h2d(d1, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}

/* 7. The wrong stream waits for the event. */
static void bug_wrong_stream_waits(void)
{
    h2d(d1, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s3, ev));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}
static void fix_wrong_stream_waits(void)
{
    h2d(d1, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}

/* 8. Write after read: s2 overwrites what a kernel on s1 still reads. */
static void bug_write_after_read(void)
{
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s1);
    h2d(d1, s2);
}
static void fix_write_after_read(void)
{
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    h2d(d1, s2);
}

/* 9. The host synchronizes the wrong stream before handing the data on. */
static void bug_sync_wrong_stream(void)
{
    h2d(d1, s1);
    CHECK_OK(aclrtSynchronizeStream(s2));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s3);
}
static void fix_sync_wrong_stream(void)
{
    h2d(d1, s1);
    CHECK_OK(aclrtSynchronizeStream(s1));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s3);
}

/* 10. The host reads pinned memory while the D2H into it is pending. */
static void bug_host_reads_pending_d2h(void)
{
    op("writer", d1, BUF, ACLMOCK_ACCESS_WRITE, s1); /* (declared only: no bytes move) */
    CHECK_OK(aclrtMemcpyAsync(h1, BUF, d1, BUF, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    aclmockSetNextTaskTag("corpus.c:numpy-view");
    CHECK_OK(aclmockSanitizerHostAccess(h1, BUF, ACLMOCK_ACCESS_READ));
}
static void fix_host_reads_pending_d2h(void)
{
    CHECK_OK(aclrtMemcpyAsync(h1, BUF, d1, BUF, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    CHECK_OK(aclrtSynchronizeStream(s1));
    CHECK_OK(aclmockSanitizerHostAccess(h1, BUF, ACLMOCK_ACCESS_READ));
}

/* 11. The host refills pinned memory that an H2D still reads. */
static void bug_host_writes_pending_h2d(void)
{
    h2d(d1, s1);
    CHECK_OK(aclmockSanitizerHostAccess(h1, BUF, ACLMOCK_ACCESS_WRITE));
}
static void fix_host_writes_pending_h2d(void)
{
    h2d(d1, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtSynchronizeEvent(ev));
    CHECK_OK(aclmockSanitizerHostAccess(h1, BUF, ACLMOCK_ACCESS_WRITE));
}

/* 12. A synchronous aclrtMemcpy reads device memory a kernel still writes. */
static void bug_sync_copy_of_pending_write(void)
{
    op("writer", d2, BUF, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtMemcpy(h1, BUF, d2, BUF, ACL_MEMCPY_DEVICE_TO_HOST));
}
static void fix_sync_copy_of_pending_write(void)
{
    op("writer", d2, BUF, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_OK(aclrtMemcpy(h1, BUF, d2, BUF, ACL_MEMCPY_DEVICE_TO_HOST));
}

/* 13. Device memory freed while a kernel still reads it. */
static void bug_free_while_pending(void)
{
    void *tmp = NULL;
    CHECK_OK(aclrtMalloc(&tmp, BUF, ACL_MEM_MALLOC_HUGE_FIRST));
    op("reader", tmp, BUF, ACLMOCK_ACCESS_READ, s1);
    aclmockSetNextTaskTag("corpus.c:free");
    CHECK_OK(aclrtFree(tmp));
}
static void fix_free_while_pending(void)
{
    void *tmp = NULL;
    CHECK_OK(aclrtMalloc(&tmp, BUF, ACL_MEM_MALLOC_HUGE_FIRST));
    op("reader", tmp, BUF, ACLMOCK_ACCESS_READ, s1);
    CHECK_OK(aclrtSynchronizeStream(s1));
    CHECK_OK(aclrtFree(tmp));
}

/* 14. Pinned memory freed while a task still writes it. */
static void bug_free_host_while_pending(void)
{
    void *tmp = NULL;
    CHECK_OK(aclrtMallocHost(&tmp, BUF));
    op("writer-of-pinned", tmp, BUF, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtFreeHost(tmp)); /* the task on s1 may still write it */
}
static void fix_free_host_while_pending(void)
{
    void *tmp = NULL;
    CHECK_OK(aclrtMallocHost(&tmp, BUF));
    op("writer-of-pinned", tmp, BUF, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtSynchronizeStream(s1));
    CHECK_OK(aclrtFreeHost(tmp));
}

/* 15. A copy reads host memory already released by aclrtFreeHost. */
static void bug_copy_from_freed_host(void)
{
    void *tmp = NULL;
    CHECK_OK(aclrtMallocHost(&tmp, BUF));
    CHECK_OK(aclrtFreeHost(tmp));
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* AddressSanitizer / ThreadSanitizer would stop at the real use after free the bug
     * performs: the race sanitizer is asked about the same access instead */
    CHECK_OK(aclmockSanitizerHostAccess(tmp, BUF, ACLMOCK_ACCESS_READ));
#else
    CHECK_OK(aclrtMemcpyAsync(d1, BUF, tmp, BUF, ACL_MEMCPY_HOST_TO_DEVICE, s1));
#endif
}
static void fix_copy_from_freed_host(void)
{
    void *tmp = NULL;
    CHECK_OK(aclrtMallocHost(&tmp, BUF));
    CHECK_OK(aclrtMemcpyAsync(d1, BUF, tmp, BUF, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    CHECK_OK(aclrtSynchronizeStream(s1));
    CHECK_OK(aclrtFreeHost(tmp));
}

/* 16. A value written on s1 read by a kernel on s2 without a value wait. */
static void bug_value_write_read(void)
{
    CHECK_OK(aclrtValueWrite(d2, 7, 0, s1));
    op("flag-reader", d2, 8, ACLMOCK_ACCESS_READ, s2);
}
static void fix_value_write_read(void)
{
    CHECK_OK(aclrtValueWrite(d2, 7, 0, s1));
    CHECK_OK(aclrtValueWait(d2, 7, ACL_STREAM_WAIT_VALUE_EQ, s1));
    op("flag-reader", d2, 8, ACLMOCK_ACCESS_READ, s1);
}

/* 17. Partially overlapping writes: only the shared bytes are reported. */
static void bug_partial_overlap(void)
{
    op("left", d1, 4096, ACLMOCK_ACCESS_WRITE, s1);
    op("right", (char *)d1 + 2048, 4096, ACLMOCK_ACCESS_WRITE, s2);
}
static void fix_partial_overlap(void)
{
    op("left", d1, 2048, ACLMOCK_ACCESS_WRITE, s1);
    op("right", (char *)d1 + 2048, 4096, ACLMOCK_ACCESS_WRITE, s2); /* disjoint */
}

/* 18. A batch copy on s1 writes what a kernel on s2 reads. */
static void bug_batch_copy(void)
{
    void *dsts[2] = {d1, d2};
    void *srcs[2] = {h1, (char *)h1 + 1024};
    size_t sizes[2] = {1024, 1024}, maxs[2] = {BUF, BUF}, idx[1] = {0};
    aclrtMemcpyBatchAttr attr;
    memset(&attr, 0, sizeof attr);
    attr.srcLoc.type = ACL_MEM_LOCATION_TYPE_HOST;
    attr.dstLoc.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    attr.dstLoc.id = 0;
    size_t fail = 0;
    CHECK_OK(aclrtMemcpyBatchAsync(dsts, maxs, srcs, sizes, 2, &attr, idx, 1, &fail, s1));
    op("reader", d2, 512, ACLMOCK_ACCESS_READ, s2);
}
static void fix_batch_copy(void)
{
    void *dsts[2] = {d1, d2};
    void *srcs[2] = {h1, (char *)h1 + 1024};
    size_t sizes[2] = {1024, 1024}, maxs[2] = {BUF, BUF}, idx[1] = {0};
    aclrtMemcpyBatchAttr attr;
    memset(&attr, 0, sizeof attr);
    attr.srcLoc.type = ACL_MEM_LOCATION_TYPE_HOST;
    attr.dstLoc.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    attr.dstLoc.id = 0;
    size_t fail = 0;
    CHECK_OK(aclrtMemcpyBatchAsync(dsts, maxs, srcs, sizes, 2, &attr, idx, 1, &fail, s1));
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    op("reader", d2, 512, ACLMOCK_ACCESS_READ, s2);
}

/* 19. A 2D copy on s1 and a kernel writing the same rows on s2. */
static void bug_copy_2d(void)
{
    CHECK_OK(aclrtMemcpy2dAsync(d1, 256, h1, 128, 128, 16, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    op("rows", (char *)d1 + 256, 128, ACLMOCK_ACCESS_WRITE, s2);
}
static void fix_copy_2d(void)
{
    CHECK_OK(aclrtMemcpy2dAsync(d1, 256, h1, 128, 128, 16, ACL_MEMCPY_HOST_TO_DEVICE, s1));
    op("rows", (char *)d1 + 256, 128, ACLMOCK_ACCESS_WRITE, s1);
}

static void noop_host(void *arg)
{
    (void)arg;
}

/* 20. A host function on the other stream does not order the two streams. */
static void bug_host_func_wrong_stream(void)
{
    op("writer", d1, BUF, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtLaunchHostFunc(s2, noop_host, NULL));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2);
}
static void fix_host_func_wrong_stream(void)
{
    op("writer", d1, BUF, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtLaunchHostFunc(s1, noop_host, NULL));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s1);
}

/* 21. The default stream does not synchronize with other streams. */
static void bug_default_stream(void)
{
    h2d(d1, NULL);
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s1);
}
static void fix_default_stream(void)
{
    h2d(d1, NULL);
    CHECK_OK(aclrtRecordEvent(ev2, NULL));
    CHECK_OK(aclrtStreamWaitEvent(s1, ev2));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s1);
}

/* 22. aclrtReduceAsync reads and writes dst; a kernel on another stream reads it. */
static void bug_reduce(void)
{
    CHECK_OK(aclrtReduceAsync(d3, d2, 1024, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, s1, NULL));
    op("reader", d3, 1024, ACLMOCK_ACCESS_READ, s2);
}
static void fix_reduce(void)
{
    CHECK_OK(aclrtReduceAsync(d3, d2, 1024, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, s1, NULL));
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    op("reader", d3, 1024, ACLMOCK_ACCESS_READ, s2);
}

/* 23. The host writes device memory (synchronous memset) a kernel still reads. */
static void bug_sync_memset(void)
{
    op("reader", d2, BUF, ACLMOCK_ACCESS_READ, s1);
    CHECK_OK(aclrtMemset(d2, BUF, 0, BUF));
}
static void fix_sync_memset(void)
{
    op("reader", d2, BUF, ACLMOCK_ACCESS_READ, s1);
    CHECK_OK(aclrtSynchronizeStream(s1));
    CHECK_OK(aclrtMemset(d2, BUF, 0, BUF));
}

/* 24. A chain that looks ordered but skips a link: s1 -> s2 is ordered, s3 reads after
 *     s2's wait without waiting itself. */
static void bug_transitive_gap(void)
{
    h2d(d1, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    CHECK_OK(aclrtRecordEvent(ev2, s2));
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s3);
}
static void fix_transitive_gap(void)
{
    h2d(d1, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    CHECK_OK(aclrtRecordEvent(ev2, s2));
    CHECK_OK(aclrtStreamWaitEvent(s3, ev2)); /* ordered through s2 */
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s3);
}

/* Kernel launches (aclrtLaunchKernelWithArgsArray of host twins declared here): their
 * declared pointer arguments are checked with their modes. The twins touch nothing. */
ACLMOCK_KERNEL(corpus_kernel_in, 0, ACLMOCK_PTR_IN)
{
    (void)args;
    (void)blockIdx;
    (void)blockDim;
    (void)userData;
    return 0;
}
ACLMOCK_KERNEL(corpus_kernel_out, 0, ACLMOCK_PTR_OUT)
{
    (void)args;
    (void)blockIdx;
    (void)blockDim;
    (void)userData;
    return 0;
}

static void kernel(int32_t (*twin)(void *, uint32_t, uint32_t, void *), void *p, aclrtStream s)
{
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)twin, &f));
    void *arr[1] = {&p};
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 1, s, NULL, arr));
}

/* 25. An H2D on s1, a kernel launch reading the data on s2. */
static void bug_kernel_reads_h2d(void)
{
    h2d(d1, s1);
    kernel(corpus_kernel_in, d1, s2);
}
static void fix_kernel_reads_h2d(void)
{
    h2d(d1, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    kernel(corpus_kernel_in, d1, s2);
}

/* 26. A kernel writes on s1, another kernel reads the result on s2. */
static void bug_kernel_write_read(void)
{
    kernel(corpus_kernel_out, d2, s1);
    kernel(corpus_kernel_in, d2, s2);
}
static void fix_kernel_write_read(void)
{
    kernel(corpus_kernel_out, d2, s1);
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    kernel(corpus_kernel_in, d2, s2);
}

/* Kernels on parts of one allocation (the caching allocator's segments). A twin that
 * declares the extent of its pointer (n bytes, n its second parameter) is checked over
 * exactly [p, p+n); one that declares none, up to the end of the sub-allocation region
 * its pointer lies in (aclmockMemRegionRegister), or over the window the launching
 * thread gives (aclmockSetNextLaunchExtents). */
static const aclmockKernelExtent k_sized_extents[] = {ACLMOCK_EXTENT_ELEMS(uint8_t, 1), ACLMOCK_EXTENT_NONE};
ACLMOCK_KERNEL_EXTENTS(corpus_sized_in, 0, 0u, k_sized_extents, ACLMOCK_PTR_IN, ACLMOCK_VALUE(uint64_t))
{
    (void)args;
    (void)blockIdx;
    (void)blockDim;
    (void)userData;
    return 0;
}
ACLMOCK_KERNEL_EXTENTS(corpus_sized_out, 0, 0u, k_sized_extents, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint64_t))
{
    (void)args;
    (void)blockIdx;
    (void)blockDim;
    (void)userData;
    return 0;
}

static void sized(int32_t (*twin)(void *, uint32_t, uint32_t, void *), void *p, uint64_t n, aclrtStream s)
{
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)twin, &f));
    void *arr[2] = {&p, &n};
    CHECK_OK(aclrtLaunchKernelWithArgsArray(f, 1, s, NULL, arr));
}

/* 27. Two kernels with declared extents on two streams: their windows of one allocation
 * overlap (the fix: disjoint windows, next to each other). */
static void bug_extent_overlap(void)
{
    sized(corpus_sized_out, d1, BUF / 2, s1);
    sized(corpus_sized_in, (char *)d1 + BUF / 4, BUF / 2, s2);
}
static void fix_extent_overlap(void)
{
    sized(corpus_sized_out, d1, BUF / 2, s1);
    sized(corpus_sized_in, (char *)d1 + BUF / 2, BUF / 2, s2);
}

/* 28. Two blocks of one allocation handed out as regions: a kernel on s2 reads inside
 * the block a kernel on s1 writes (the fix reads the other block). */
static void bug_region_overlap(void)
{
    CHECK_OK(aclmockMemRegionRegister(d1, BUF / 2));
    CHECK_OK(aclmockMemRegionRegister((char *)d1 + BUF / 2, BUF / 2));
    kernel(corpus_kernel_out, d1, s1);
    kernel(corpus_kernel_in, (char *)d1 + BUF / 4, s2);
    CHECK_OK(aclmockMemRegionUnregister(d1));
    CHECK_OK(aclmockMemRegionUnregister((char *)d1 + BUF / 2));
}
static void fix_region_overlap(void)
{
    CHECK_OK(aclmockMemRegionRegister(d1, BUF / 2));
    CHECK_OK(aclmockMemRegionRegister((char *)d1 + BUF / 2, BUF / 2));
    kernel(corpus_kernel_out, d1, s1);
    kernel(corpus_kernel_in, (char *)d1 + BUF / 2, s2);
    CHECK_OK(aclmockMemRegionUnregister(d1));
    CHECK_OK(aclmockMemRegionUnregister((char *)d1 + BUF / 2));
}

/* 29. The launching thread gives the windows (a buffer view's size): they overlap. */
static void windowed(int32_t (*twin)(void *, uint32_t, uint32_t, void *), void *p, uint64_t n, aclrtStream s)
{
    CHECK_OK(aclmockSetNextLaunchExtents(&n, 1));
    kernel(twin, p, s);
}
static void bug_window_overlap(void)
{
    windowed(corpus_kernel_out, d1, BUF / 2 + 1, s1);
    windowed(corpus_kernel_in, (char *)d1 + BUF / 2, 64, s2);
}
static void fix_window_overlap(void)
{
    windowed(corpus_kernel_out, d1, BUF / 2, s1);
    windowed(corpus_kernel_in, (char *)d1 + BUF / 2, 64, s2);
}

static void copy_back(void *arg);

static void fix_host_function_copy(void)
{
    op("writer", d2, BUF, ACLMOCK_ACCESS_WRITE, s1);
    CHECK_OK(aclrtLaunchHostFunc(s1, copy_back, NULL));
}

static void bug_host_thread_copy(void)
{
    op("writer", d2, BUF, ACLMOCK_ACCESS_WRITE, s1);
    copy_back(NULL);
}

typedef struct corpus_entry {
    const char *name;
    void (*bug)(void);
    void (*fix)(void);
    uint32_t kind;
} corpus_entry;

#define ENTRY(n, k) {#n, bug_##n, fix_##n, k}
static const corpus_entry k_corpus[] = {
    ENTRY(h2d_then_read, ACLMOCK_SANITIZER_RACE),
    ENTRY(write_then_d2h, ACLMOCK_SANITIZER_RACE),
    ENTRY(write_write, ACLMOCK_SANITIZER_RACE),
    ENTRY(memset_then_copy, ACLMOCK_SANITIZER_RACE),
    ENTRY(event_too_early, ACLMOCK_SANITIZER_RACE),
    ENTRY(wait_before_rerecord, ACLMOCK_SANITIZER_RACE),
    ENTRY(wrong_stream_waits, ACLMOCK_SANITIZER_RACE),
    ENTRY(write_after_read, ACLMOCK_SANITIZER_RACE),
    ENTRY(sync_wrong_stream, ACLMOCK_SANITIZER_RACE),
    ENTRY(host_reads_pending_d2h, ACLMOCK_SANITIZER_HOST_RACE),
    ENTRY(host_writes_pending_h2d, ACLMOCK_SANITIZER_HOST_RACE),
    ENTRY(sync_copy_of_pending_write, ACLMOCK_SANITIZER_HOST_RACE),
    ENTRY(free_while_pending, ACLMOCK_SANITIZER_USE_AFTER_FREE),
    ENTRY(free_host_while_pending, ACLMOCK_SANITIZER_USE_AFTER_FREE),
    ENTRY(copy_from_freed_host, ACLMOCK_SANITIZER_USE_AFTER_FREE),
    ENTRY(value_write_read, ACLMOCK_SANITIZER_RACE),
    ENTRY(partial_overlap, ACLMOCK_SANITIZER_RACE),
    ENTRY(batch_copy, ACLMOCK_SANITIZER_RACE),
    ENTRY(copy_2d, ACLMOCK_SANITIZER_RACE),
    ENTRY(host_func_wrong_stream, ACLMOCK_SANITIZER_RACE),
    ENTRY(default_stream, ACLMOCK_SANITIZER_RACE),
    ENTRY(reduce, ACLMOCK_SANITIZER_RACE),
    ENTRY(sync_memset, ACLMOCK_SANITIZER_HOST_RACE),
    ENTRY(transitive_gap, ACLMOCK_SANITIZER_RACE),
    ENTRY(kernel_reads_h2d, ACLMOCK_SANITIZER_RACE),
    ENTRY(kernel_write_read, ACLMOCK_SANITIZER_RACE),
    ENTRY(extent_overlap, ACLMOCK_SANITIZER_RACE),
    ENTRY(region_overlap, ACLMOCK_SANITIZER_RACE),
    ENTRY(window_overlap, ACLMOCK_SANITIZER_RACE),
};
#define CORPUS_SIZE (sizeof k_corpus / sizeof k_corpus[0])

/* ------------------------------------------------------------------ harness */

static void setup(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateStream(&s3));
    CHECK_OK(aclrtMalloc(&d1, BUF, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&d2, BUF, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&d3, BUF, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&h1, BUF));
    memset(h1, 0, BUF);
    CHECK_OK(aclrtCreateEvent(&ev));
    CHECK_OK(aclrtCreateEvent(&ev2));
}

static void teardown(void)
{
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_OK(aclrtDestroyEvent(ev));
    CHECK_OK(aclrtDestroyEvent(ev2));
    CHECK_OK(aclrtFree(d1));
    CHECK_OK(aclrtFree(d2));
    CHECK_OK(aclrtFree(d3));
    CHECK_OK(aclrtFreeHost(h1));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
    CHECK_OK(aclrtDestroyStream(s3));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
}

/* Runs fn, then synchronizes the device (nothing of fn stays unordered with what
 * follows); returns the reports fn produced. */
static uint64_t reports_of(void (*fn)(void))
{
    uint64_t before = aclmockSanitizerGetReportCount();
    fn();
    CHECK_OK(aclrtSynchronizeDevice());
    return aclmockSanitizerGetReportCount() - before;
}

static void test_corpus(void)
{
    CHECK_GE(CORPUS_SIZE, 20);
    CHECK_EQ(aclmockSanitizerGetMode(), 1);
    for (size_t i = 0; i < CORPUS_SIZE; i++) {
        const corpus_entry *e = &k_corpus[i];
        uint64_t first = aclmockSanitizerGetReportCount();
        uint64_t n = reports_of(e->bug);
        if (n == 0) {
            fprintf(stderr, "corpus: bug '%s' was not reported\n", e->name);
        }
        CHECK_GE(n, 1);
        aclmockSanitizerReport r;
        if (n > 0 && aclmockSanitizerGetReports(&r, 1, first) == 1) {
            if (r.kind != e->kind) {
                fprintf(stderr, "corpus: bug '%s' reported as kind %u (expected %u): %s\n", e->name, r.kind, e->kind,
                        r.message);
            }
            CHECK_EQ(r.kind, e->kind);
        }
        uint64_t f = reports_of(e->fix);
        if (f != 0) {
            aclmockSanitizerReport fr;
            if (aclmockSanitizerGetReports(&fr, 1, (size_t)(aclmockSanitizerGetReportCount() - f)) == 1) {
                fprintf(stderr, "corpus: the fix of '%s' was reported: %s\n", e->name, fr.message);
            }
        }
        CHECK_EQ(f, 0);
    }
}

/* The first report names both tasks, streams, tags, the bytes and the access modes. */
static void test_report_contents(void)
{
    aclmockSanitizerClearReports();
    CHECK_EQ(reports_of(bug_h2d_then_read), 1);
    aclmockSanitizerReport r;
    CHECK_EQ(aclmockSanitizerGetReports(&r, 1, 0), 1);
    int32_t id1 = -1, id2 = -1;
    CHECK_OK(aclrtStreamGetId(s1, &id1));
    CHECK_OK(aclrtStreamGetId(s2, &id2));
    CHECK_EQ(r.kind, ACLMOCK_SANITIZER_RACE);
    CHECK_EQ(r.device, 0);
    CHECK_EQ(r.address, (uint64_t)(uintptr_t)d1);
    CHECK_EQ(r.size, BUF);
    CHECK_EQ(r.current.streamId, id2);
    CHECK(r.current.stream == s2);
    CHECK_EQ(r.current.access, ACLMOCK_ACCESS_READ);
    CHECK_STR_EQ(r.current.name, "reader");
    CHECK_STR_EQ(r.current.tag, "corpus.c:read");
    CHECK_EQ(r.previous.streamId, id1);
    CHECK_EQ(r.previous.access, ACLMOCK_ACCESS_WRITE);
    CHECK_STR_EQ(r.previous.name, "aclrtMemcpyAsync");
    CHECK_STR_EQ(r.previous.tag, "corpus.c:h2d");
    CHECK_LT(r.previous.taskId, r.current.taskId);
    CHECK_STR_CONTAINS(r.message, "race between two streams");
    CHECK_STR_CONTAINS(r.message, "[corpus.c:read]");

    /* partial overlap: exactly the shared bytes */
    aclmockSanitizerClearReports();
    CHECK_EQ(reports_of(bug_partial_overlap), 1);
    CHECK_EQ(aclmockSanitizerGetReports(&r, 1, 0), 1);
    CHECK_EQ(r.address, (uint64_t)(uintptr_t)d1 + 2048);
    CHECK_EQ(r.size, 2048);

    /* the host read: the host is the current access */
    aclmockSanitizerClearReports();
    CHECK_EQ(reports_of(bug_host_reads_pending_d2h), 1);
    CHECK_EQ(aclmockSanitizerGetReports(&r, 1, 0), 1);
    CHECK_EQ(r.current.streamId, -1);
    CHECK_STR_EQ(r.current.tag, "corpus.c:numpy-view");
    CHECK_STR_EQ(r.previous.name, "aclrtMemcpyAsync");

    /* a free: the free is the current access */
    aclmockSanitizerClearReports();
    CHECK_EQ(reports_of(bug_free_while_pending), 1);
    CHECK_EQ(aclmockSanitizerGetReports(&r, 1, 0), 1);
    CHECK_STR_EQ(r.current.name, "aclrtFree");
    CHECK_STR_EQ(r.current.tag, "corpus.c:free");
    CHECK_STR_EQ(r.previous.name, "reader");

    /* the device log has them too */
    char log[16384];
    CHECK_GT(aclmockGetDeviceLog(0, log, sizeof log), 0);
    CHECK_STR_CONTAINS(log, "race sanitizer");
    CHECK_EQ(aclmockSanitizerHostAccess(NULL, 1, ACLMOCK_ACCESS_READ), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockSanitizerHostAccess(h1, 1, 9), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockSetNextTaskTag(NULL), ACL_SUCCESS);
    aclmockSanitizerClearReports();
    CHECK_EQ(aclmockSanitizerGetReportCount(), 0);
}

/* Lines the process wrote on stderr while fn ran (captured through a file). */
static void stderr_of(void (*fn)(void), char *out, size_t len)
{
    char path[] = "/tmp/corpus_stderr_XXXXXX";
    int fd = mkstemp(path);
    CHECK_GE(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    CHECK_GE(saved, 0);
    CHECK_GE(dup2(fd, 2), 0);
    CHECK_GE(reports_of(fn), 1);
    fflush(stderr);
    CHECK_GE(dup2(saved, 2), 0);
    close(saved);
    ssize_t n = pread(fd, out, len - 1, 0);
    out[n > 0 ? (size_t)n : 0] = '\0';
    close(fd);
    unlink(path);
}

/* A binding that shows the reports itself turns the printing off: each report is shown
 * once; it is still kept and counted. */
static void test_stderr_switch(void)
{
    char text[4096];
    aclmockSanitizerClearReports();
    CHECK_EQ(aclmockSanitizerSetStderr(0), 1);
    stderr_of(bug_write_write, text, sizeof text);
    CHECK(strstr(text, "race sanitizer") == NULL);
    CHECK_GE(aclmockSanitizerGetReportCount(), 1);
    CHECK_EQ(aclmockSanitizerSetStderr(1), 0);
    aclmockSanitizerClearReports();
    stderr_of(bug_write_write, text, sizeof text);
    CHECK_STR_CONTAINS(text, "mock_libascendcl: race sanitizer: race between two streams");
    aclmockSanitizerClearReports();
}

/* A host function acts as the task it is: its synchronous copy of what the tasks before
 * it on its stream wrote is ordered after them (no report); the same copy from the host
 * thread, unsynchronized, is a host race. */
static aclrtContext g_ctx;

static void copy_back(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetCurrentContext(g_ctx)); /* a host function's thread has none of its own */
    CHECK_OK(aclrtMemcpy(h1, BUF, d2, BUF, ACL_MEMCPY_DEVICE_TO_HOST));
}

static void test_host_function_acts_as_its_task(void)
{
    CHECK_OK(aclrtGetCurrentContext(&g_ctx));
    uint64_t n = reports_of(fix_host_function_copy);
    CHECK_EQ(n, 0);
    n = reports_of(bug_host_thread_copy);
    CHECK_EQ(n, 1);
}

/* Addresses of freed pinned memory that malloc hands out again are live memory, not a
 * use after free: while the sanitizer is on, freed pinned addresses stay reserved for
 * longer than it remembers them (a bytearray / numpy array used to land there). */
static void test_heap_reuse_of_freed_pinned_memory_is_not_reported(void)
{
    enum { N = 64, SMALL = 2048 };
    void *pinned[N];
    for (int i = 0; i < N; i++) {
        CHECK_OK(aclrtMallocHost(&pinned[i], SMALL));
    }
    for (int i = 0; i < N; i++) {
        CHECK_OK(aclrtFreeHost(pinned[i]));
    }
    uint64_t before = aclmockSanitizerGetReportCount();
    void *heap[N];
    int overlaps = 0;
    for (int i = 0; i < N; i++) {
        heap[i] = malloc(SMALL);
        CHECK(heap[i] != NULL);
        for (int k = 0; k < N; k++) {
            overlaps += (char *)heap[i] < (char *)pinned[k] + SMALL && (char *)pinned[k] < (char *)heap[i] + SMALL;
        }
        memset(heap[i], 1, SMALL);
        CHECK_OK(aclrtMemcpyAsync(d1, BUF, heap[i], SMALL, ACL_MEMCPY_HOST_TO_DEVICE, s1));
        CHECK_OK(aclrtSynchronizeStream(s1));
    }
    CHECK_EQ(overlaps, 0);
    CHECK_EQ(aclmockSanitizerGetReportCount() - before, 0);
    for (int i = 0; i < N; i++) {
        free(heap[i]);
    }
}

/* aclrtDestroyStream waits for the stream's tasks: work after it is ordered after them
 * (also when the stream is destroyed on another thread), and so is a device
 * synchronize that no longer sees the destroyed stream. */
static void test_destroyed_stream_orders_its_tasks(void)
{
    aclrtStream tmp = NULL;
    CHECK_OK(aclrtCreateStream(&tmp));
    uint64_t before = aclmockSanitizerGetReportCount();
    CHECK_OK(aclrtMemsetAsync(d1, BUF, 3, BUF, tmp));
    CHECK_OK(aclrtDestroyStream(tmp));
    CHECK_OK(aclrtMemcpyAsync(d2, BUF, d1, BUF, ACL_MEMCPY_DEVICE_TO_DEVICE, s2));
    CHECK_OK(aclrtSynchronizeStream(s2));
    CHECK_EQ(aclmockSanitizerGetReportCount() - before, 0);
}

static void child_report(void)
{
    mt_mock_env("ASCEND_MOCK_SANITIZE", "1", (const char *)NULL);
    setup();
    RUN_TEST(test_corpus);
    RUN_TEST(test_report_contents);
    RUN_TEST(test_stderr_switch);
    RUN_TEST(test_host_function_acts_as_its_task);
    RUN_TEST(test_heap_reuse_of_freed_pinned_memory_is_not_reported);
    RUN_TEST(test_destroyed_stream_orders_its_tasks);
    teardown();
}

/* fail: the racing task fails on its stream (ACL_ERROR_RT_AICORE_EXCEPTION); a racing
 * host access returns the error. */
static void child_fail(void)
{
    mt_mock_env("ASCEND_MOCK_SANITIZE", "fail", (const char *)NULL);
    setup();
    CHECK_EQ(aclmockSanitizerGetMode(), 2);
    h2d(d1, s1);
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2);
    CHECK_OK(aclrtSynchronizeStream(s1));
    CHECK_EQ(aclrtSynchronizeStream(s2), ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK_OK(aclrtSynchronizeStream(s2)); /* reported once (continue-on-failure) */
    CHECK_OK(aclrtMemcpyAsync(h1, BUF, d1, BUF, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    CHECK_EQ(aclmockSanitizerHostAccess(h1, BUF, ACLMOCK_ACCESS_READ), ACL_ERROR_RT_AICORE_EXCEPTION);
    teardown();
}

static void child_abort(void)
{
    mt_mock_env("ASCEND_MOCK_SANITIZE", "abort", (const char *)NULL);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    setup();
    h2d(d1, s1);
    op("reader", d1, BUF, ACLMOCK_ACCESS_READ, s2); /* aborts here */
    _exit(0);
}

/* Off (the default): nothing is checked. */
static void child_off(void)
{
    mt_mock_env((const char *)NULL);
    setup();
    CHECK_EQ(aclmockSanitizerGetMode(), 0);
    for (size_t i = 0; i < CORPUS_SIZE; i++) {
        if (k_corpus[i].bug != bug_copy_from_freed_host) {
            k_corpus[i].bug();
        }
        CHECK_OK(aclrtSynchronizeDevice());
    }
    CHECK_EQ(aclmockSanitizerGetReportCount(), 0);
    teardown();
}

static void test_report_mode(void)
{
    CHECK_EQ(mt_run_child_fn(child_report), 0);
}

static void test_fail_mode(void)
{
    CHECK_EQ(mt_run_child_fn(child_fail), 0);
}

static void test_abort_mode(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        child_abort();
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

static void test_off(void)
{
    CHECK_EQ(mt_run_child_fn(child_off), 0);
}

int main(void)
{
    RUN_TEST(test_report_mode);
    RUN_TEST(test_fail_mode);
    RUN_TEST(test_abort_mode);
    RUN_TEST(test_off);
    return TEST_REPORT();
}
