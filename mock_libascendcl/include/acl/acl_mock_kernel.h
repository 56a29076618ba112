/*
 * acl_mock_kernel.h - host twins of device kernels for mock_libascendcl.
 *
 * A host twin is a host implementation of a device kernel that the mock runs under the
 * kernel's name, so that the same application code launches the real binary on a card
 * and the twin in CI. A twin is a C function called once per block:
 *
 *     int32_t twin(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData);
 *
 *   args      the kernel's argument block: every argument in its own slot of a multiple
 *             of 8 bytes, in declaration order (the layout aclrtKernelArgsAppend builds;
 *             padding is zero), placeholders already replaced by device addresses
 *   blockIdx  this block, 0 .. blockDim-1
 *   blockDim  the number of blocks of the launch (numBlocks)
 *   userData  what was registered with the kernel (NULL for ACLMOCK_KERNEL)
 *   returns   0, or nonzero for a kernel fault (the stream then fails like on a card
 *             with an AI Core exception: see the mock README "Kernels and host twins")
 *
 * Twins in a shared object (the `.so` stands in for the device binary; build it with
 * `cc -shared -fPIC -I<prefix>/include twins.c -o twins.so`, no library needed):
 *
 *     #include "acl/acl_mock_kernel.h"
 *
 *     ACLMOCK_KERNEL(vector_add, ACLMOCK_KERNEL_BLOCKS_INDEPENDENT,
 *                    ACLMOCK_PTR_IN, ACLMOCK_PTR_IN, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint32_t))
 *     {
 *         const struct { const float *x, *y; float *z; uint64_t n; } *a = args;
 *         uint64_t per = (a->n + blockDim - 1) / blockDim;
 *         for (uint64_t i = blockIdx * per; i < a->n && i < (blockIdx + 1) * per; i++)
 *             a->z[i] = a->x[i] + a->y[i];
 *         return 0;
 *     }
 *
 * aclrtBinaryLoadFromFile("/abs/twins.so", NULL, &bin) then aclrtBinaryGetFunction(bin,
 * "vector_add", &f) finds it. The same macro in the application itself makes
 * `aclrtGetFuncBySymbol((const void *)vector_add, &f)` work (mixed compilation). Twins
 * can also be registered at run time by name (aclmockRegisterKernel in acl/acl_mock.h):
 * those run for the kernels of real device binaries (ELF) loaded on the mock.
 *
 * The descriptor (aclmockKernelDesc) carries what the runtime needs besides the code:
 * the parameters (sizes for aclrtFunctionGetParamCount/Info and
 * aclrtLaunchKernelWithArgsArray; the access mode of each pointer argument, which the
 * mock uses to validate and open the buffers a launch may touch, and optionally its
 * extent: how many bytes from the pointer on the kernel touches), the kernel type, block
 * independence and a cost for the timing model. This header needs only <stdint.h> and
 * <stddef.h>; it works in C (C99 and later) and C++.
 *
 * Extents (descriptor version 2): a pointer argument whose extent is declared is checked
 * and observed over exactly [ptr, ptr + extent): the launch faults, naming the argument,
 * when the extent runs past the end of its allocation; the race sanitizer, the dump and
 * the profile (the kernel task's bytes) use the extent. Without one, the mock assumes the
 * kernel may touch everything from the pointer to the end of the sub-allocation region
 * the pointer lies in (aclmockMemRegionRegister in acl/acl_mock.h), else of its
 * allocation. Declared per parameter, in a table or by a function:
 *
 *     static const aclmockKernelExtent add_extents[] = {
 *         ACLMOCK_EXTENT_ELEMS(float, 3), ACLMOCK_EXTENT_ELEMS(float, 3),
 *         ACLMOCK_EXTENT_ELEMS(float, 3), ACLMOCK_EXTENT_NONE };
 *     ACLMOCK_KERNEL_EXTENTS(vector_add, ACLMOCK_KERNEL_BLOCKS_INDEPENDENT, 0u, add_extents,
 *                            ACLMOCK_PTR_IN, ACLMOCK_PTR_IN, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint32_t))
 *     { ... }
 *
 * (x, y and z are sizeof(float) x the value of parameter 3 bytes long.) A descriptor
 * written by hand points its reserved[ACLMOCK_KERNEL_DESC_EXT_SLOT] to a static
 * aclmockKernelDescExt (the extents table and/or an extentFn).
 */
#ifndef ACL_MOCK_KERNEL_H_
#define ACL_MOCK_KERNEL_H_

#include <stddef.h>
#include <stdint.h>

#ifndef ACLMOCK_API
#define ACLMOCK_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------- the twin */

/* One block of a kernel (see above). Must not call the runtime (device code cannot). */
typedef int32_t (*aclmockKernelFn)(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData);

/* Optional cost of a launch for the timing model, in simulated nanoseconds for the whole
 * launch; called by the launching thread when the launch is submitted (the model schedules
 * tasks at submission), only while the mock's diagnostics observe tasks. Must not call
 * the runtime. */
typedef uint64_t (*aclmockKernelCostFn)(const void *args, size_t argsSize, uint32_t blockDim, void *userData);

/* Optional extent of pointer parameter `paramIndex` of a launch, in bytes from the
 * pointer on (see "Extents" above), or ACLMOCK_EXTENT_UNKNOWN: then the parameter's
 * entry of the descriptor's `extents` table (if any) applies. Called by the launching
 * thread when the launch is submitted (while the mock's diagnostics observe tasks) and by
 * the thread running it, before its first block. Must not call the runtime. */
typedef uint64_t (*aclmockKernelExtentFn)(const void *args, size_t argsSize, uint32_t paramIndex, void *userData);
#define ACLMOCK_EXTENT_UNKNOWN UINT64_MAX

/* ------------------------------------------------------------ the parameters */

/* How a kernel uses one argument. VALUE: a scalar or struct passed by value. The others:
 * a device pointer the kernel reads, writes or both (the mock checks it is NULL or in a
 * live allocation of the launch's device, and makes that allocation accessible for the
 * kernel under ASCEND_MOCK_ISOLATION=1; the race sanitizer reads the mode). */
#define ACLMOCK_ACCESS_VALUE 0u
#define ACLMOCK_ACCESS_READ 1u
#define ACLMOCK_ACCESS_WRITE 2u
#define ACLMOCK_ACCESS_READ_WRITE 3u

typedef struct aclmockKernelParam {
    uint32_t size;   /* bytes of the argument (8 for a pointer); its slot is size rounded up to 8 */
    uint32_t access; /* ACLMOCK_ACCESS_* */
} aclmockKernelParam;

/* Parameter list items for ACLMOCK_KERNEL. */
#define ACLMOCK_PTR_IN { 8u, ACLMOCK_ACCESS_READ }
#define ACLMOCK_PTR_OUT { 8u, ACLMOCK_ACCESS_WRITE }
#define ACLMOCK_PTR_INOUT { 8u, ACLMOCK_ACCESS_READ_WRITE }
#define ACLMOCK_VALUE(type) { (uint32_t)sizeof(type), ACLMOCK_ACCESS_VALUE }
#define ACLMOCK_VALUE_BYTES(n) { (uint32_t)(n), ACLMOCK_ACCESS_VALUE }

/* The extent of one pointer parameter: `bytes` + `elemSize` x the value of parameter
 * `countParam` (an unsigned integer VALUE parameter of 1, 2, 4 or 8 bytes), in bytes.
 * All zero: not declared (the region / allocation rule); entries of VALUE parameters
 * must be all zero. */
typedef struct aclmockKernelExtent {
    uint64_t bytes;      /* fixed bytes */
    uint32_t elemSize;   /* bytes per element counted by countParam; 0 = no counted part */
    uint32_t countParam; /* index of the VALUE parameter holding the element count */
} aclmockKernelExtent;

/* Extent table items: not declared; exactly n bytes; n elements of `type` where n is the
 * value of parameter `param`. */
#define ACLMOCK_EXTENT_NONE { 0u, 0u, 0u }
#define ACLMOCK_EXTENT_BYTES(n) { (uint64_t)(n), 0u, 0u }
#define ACLMOCK_EXTENT_ELEMS(type, param) { 0u, (uint32_t)sizeof(type), (uint32_t)(param) }

/* numParams when the parameters are not described (aclmockRegisterKernel): the kernel
 * accepts any argument block; aclrtFunctionGetParamCount and
 * aclrtLaunchKernelWithArgsArray then fail with a message saying so. */
#define ACLMOCK_PARAMS_UNKNOWN 0xFFFFFFFFu
/* At most this many parameters (the runtime's argument limit). */
#define ACLMOCK_MAX_PARAMS 128u

/* ------------------------------------------------------------------ the flags */

/* Blocks do not depend on each other: the mock may run them concurrently on a small
 * worker pool (otherwise they run one after the other, in order, on the stream's worker). */
#define ACLMOCK_KERNEL_BLOCKS_INDEPENDENT 0x1u
/* aclrtGetFunctionAttribute(ACL_FUNC_ATTR_KERNEL_SCHED_MODE) = 1 (batch). */
#define ACLMOCK_KERNEL_SCHED_BATCH 0x2u
/* A SIMT kernel (Ascend 950): accepts a dynamic UB size and the SIMT launches. */
#define ACLMOCK_KERNEL_SIMT 0x4u
/* Kernel type (aclrtGetFunctionAttribute(ACL_FUNC_ATTR_KERNEL_TYPE), the fault code):
 * one of these, default AI Core. */
#define ACLMOCK_KERNEL_AICORE 0x000u /* ACL_KERNEL_TYPE_AICORE 0 */
#define ACLMOCK_KERNEL_CUBE 0x100u   /* ACL_KERNEL_TYPE_CUBE 1   */
#define ACLMOCK_KERNEL_VECTOR 0x200u /* ACL_KERNEL_TYPE_VECTOR 2 */
#define ACLMOCK_KERNEL_MIX 0x300u    /* ACL_KERNEL_TYPE_MIX 3    */
#define ACLMOCK_KERNEL_AICPU 0x400u  /* ACL_KERNEL_TYPE_AICPU 100 */
#define ACLMOCK_KERNEL_TYPE_MASK 0xF00u
/* Every defined flag bit (the others must be 0). */
#define ACLMOCK_KERNEL_FLAGS_MASK 0xF07u

/* ------------------------------------------------------------- the descriptor */

/* 2: reserved[0] may point to an aclmockKernelDescExt (the extents). Descriptors of
 * version 1 (compiled against an older header: every reserved slot NULL) are still
 * accepted; the descriptor's layout is the same. */
#define ACLMOCK_KERNEL_DESC_VERSION 2u

/* The extents of a version 2 descriptor, pointed to by its reserved[0]
 * (ACLMOCK_KERNEL_DESC_EXT_SLOT); read when the twin is registered or loaded. */
typedef struct aclmockKernelDescExt {
    const aclmockKernelExtent *extents; /* numParams entries (NULL: none declared) */
    aclmockKernelExtentFn extentFn;     /* overrides `extents` where it returns a size */
    void *reserved[2];                  /* must be NULL */
} aclmockKernelDescExt;
#define ACLMOCK_KERNEL_DESC_EXT_SLOT 0

typedef struct aclmockKernelDesc {
    uint32_t version;                 /* ACLMOCK_KERNEL_DESC_VERSION */
    uint32_t flags;                   /* ACLMOCK_KERNEL_* */
    const char *name;                 /* the kernel name aclrtBinaryGetFunction looks up */
    aclmockKernelFn fn;               /* the twin */
    void *userData;                   /* passed to fn and costFn */
    uint32_t numParams;               /* 0..128, or ACLMOCK_PARAMS_UNKNOWN */
    uint32_t reserved0;               /* must be 0 */
    const aclmockKernelParam *params; /* numParams entries (NULL when 0 or unknown) */
    uint64_t costNsPerBlock;          /* timing model: simulated ns per block and wave of blocks on the
                                         AI cores (0 = unknown: the model's default) */
    aclmockKernelCostFn costFn;       /* timing model: overrides costNsPerBlock when set */
    void *reserved[4];                /* NULL; version 2: reserved[0] may point to an
                                         aclmockKernelDescExt */
} aclmockKernelDesc;

/* ------------------------------------------------------------ declaring twins */

/* The section of a shared object (or executable) that lists its twins: the mock reads it
 * from the ELF file (aclrtBinaryLoadFromFile/FromData, aclrtGetFuncBySymbol). */
#define ACLMOCK_KERNEL_SECTION "aclmock_kernels"

#if defined(__has_attribute)
#if __has_attribute(retain)
#define ACLMOCK_RETAIN_ __attribute__((retain))
#endif
#endif
#ifndef ACLMOCK_RETAIN_
#define ACLMOCK_RETAIN_
#endif

/* Lists a descriptor (a static aclmockKernelDesc defined by hand) in this object's table. */
#define ACLMOCK_KERNEL_EXPORT(desc)                                                          \
    static const aclmockKernelDesc *aclmock_entry_##desc                                     \
        __attribute__((used, section(ACLMOCK_KERNEL_SECTION))) ACLMOCK_RETAIN_ = &(desc)

/* ACLMOCK_KERNEL_WITH_COST(name, flags, costNsPerBlock, params...) { body }: defines the
 * twin `static int32_t name(void *args, uint32_t blockIdx, uint32_t blockDim, void
 * *userData)` with the body that follows, its parameter list and its descriptor, and
 * lists it. `params` are ACLMOCK_PTR_IN/OUT/INOUT and ACLMOCK_VALUE(type) items (none
 * for a kernel without arguments). */
#define ACLMOCK_KERNEL_WITH_COST(name, flags, cost, ...)                                     \
    ACLMOCK_KERNEL_DEFINE_(name, flags, cost, NULL, __VA_ARGS__)

/* ACLMOCK_KERNEL_EXTENTS(name, flags, costNsPerBlock, extents, params...) { body }: the
 * same with the extents of the parameters: `extents` names a static const
 * aclmockKernelExtent array with one entry per parameter, defined before. */
#define ACLMOCK_KERNEL_EXTENTS(name, flags, cost, extents, ...)                              \
    static const aclmockKernelDescExt aclmock_ext_##name = { (extents), NULL, { NULL, NULL } }; \
    ACLMOCK_KERNEL_DEFINE_(name, flags, cost, (void *)&aclmock_ext_##name, __VA_ARGS__);     \
    typedef char aclmock_extents_match_params_##name                                         \
        [sizeof(extents) / sizeof((extents)[0]) == sizeof aclmock_params_##name /            \
                                                       sizeof aclmock_params_##name[0] - 1u  \
             ? 1 : -1];                                                                      \
    static int32_t name(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData)

#define ACLMOCK_KERNEL_DEFINE_(name, flags, cost, ext, ...)                                  \
    static int32_t name(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData);  \
    static const aclmockKernelParam aclmock_params_##name[] = { { 0u, 0u }, __VA_ARGS__ };   \
    static const aclmockKernelDesc aclmock_desc_##name = {                                   \
        ACLMOCK_KERNEL_DESC_VERSION, (flags), #name, name, NULL,                             \
        (uint32_t)(sizeof aclmock_params_##name / sizeof aclmock_params_##name[0] - 1u), 0u, \
        aclmock_params_##name + 1, (cost), NULL, { (ext), NULL, NULL, NULL } };              \
    ACLMOCK_KERNEL_EXPORT(aclmock_desc_##name);                                              \
    static int32_t name(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData)

/* ACLMOCK_KERNEL(name, flags, params...) { body }: the same without a cost. */
#define ACLMOCK_KERNEL(name, flags, ...) ACLMOCK_KERNEL_WITH_COST(name, flags, 0u, __VA_ARGS__)

/* Reads the argument at byte offset `off` of the argument block as a `type`. */
#define ACLMOCK_ARG_AT(args, type, off) (*(type *)(void *)((char *)(args) + (off)))

/* ---------------------------------------------------- inside a running twin */

typedef struct aclmockKernelLaunchInfo {
    const char *name;     /* the kernel's name */
    uint32_t blockIdx;    /* the block being run (the twin's blockIdx) */
    uint32_t numBlocks;   /* the twin's blockDim */
    uint32_t gridDim[3];  /* SIMT launches: the grid; otherwise {numBlocks, 1, 1} */
    uint32_t blockDim[3]; /* SIMT launches: threads per block; otherwise {1, 1, 1} */
    uint64_t dynUbufSize; /* SIMT dynamic UB bytes (the argument or the DYN_UBUF_SIZE attribute) */
    int32_t device;       /* user device id of the stream */
    uint32_t reserved0;
    void *stream;         /* the aclrtStream the kernel was launched on */
    const void *args;     /* the argument block and its size in bytes */
    size_t argsSize;
    uint64_t reserved[4];
} aclmockKernelLaunchInfo;

/* Fills *info for the block the calling thread is running. Only valid inside a twin
 * (exported by the mock libascendcl.so); returns 0, or ACL_ERROR_INVALID_PARAM (100000)
 * when info is NULL or the caller is not running a twin. */
ACLMOCK_API int32_t aclmockKernelGetLaunchInfo(aclmockKernelLaunchInfo *info);

#ifdef __cplusplus
}
#endif

#endif /* ACL_MOCK_KERNEL_H_ */
