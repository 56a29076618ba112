/*
 * kernel/kernel_private.h - private glue of the kernel subsystem (elf.c, twin.c,
 * binary.c, args.c, launch.c, run.c, hooks.c); no file outside src/kernel/ includes
 * it. Every function declared here starts with kernel_.
 *
 * Objects and lifetimes
 *   kernel_twin    a host twin: a copy of its descriptor (name, parameters). Reference
 *                  counted: the name registry (aclmockRegisterKernel), a host binary's
 *                  table and every queued launch that resolved it hold one.
 *   kernel_binary  a loaded binary (aclrtBinHandle). Reference counted: the handle
 *                  registry holds one until aclrtBinaryUnLoad, every queued launch
 *                  another; its functions and argument lists live as long as it, but
 *                  their handles die with the unload.
 *   kernel_func    a kernel of a binary (aclrtFuncHandle): one per name and binary.
 *   kernel_args    an argument list (aclrtArgsHandle), runtime-owned or in user memory.
 * The live handles of all of them are in registries guarded by kernel_mu (the one lock
 * of the subsystem besides the block pool's; never held while user code runs, nor
 * while another subsystem is called, except to record an error).
 */
#ifndef MOCK_KERNEL_PRIVATE_H
#define MOCK_KERNEL_PRIVATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acl/acl_mock_kernel.h"
#include "core/core.h"
#include "kernel/kernel.h"

/* ------------------------------------------------------------------ elf.c */

typedef struct kernel_elf_section {
    const char *name; /* NULL when it has no valid name */
    uint32_t name_off;
    uint32_t type;    /* SHT_* */
    uint32_t link;
    uint64_t addr, offset, size, align, entsize;
    uint64_t nobits_off; /* NOBITS sections: offset after the image in a device copy */
} kernel_elf_section;

typedef struct kernel_elf_sym {
    const char *name; /* points into the image */
    uint64_t value, size;
    uint16_t shndx;
    uint8_t type, bind; /* STT_*, STB_* */
} kernel_elf_sym;

typedef struct kernel_elf {
    const uint8_t *data;
    size_t size;
    bool is64, little_endian;
    uint16_t type, machine; /* ET_*, EM_* */
    kernel_elf_section *sections;
    size_t nsections, shstrndx;
    kernel_elf_sym *syms; /* defined, named symbols of .symtab and .dynsym */
    size_t nsyms;
    uint64_t nobits_size; /* bytes of the zero-filled sections */
} kernel_elf;

/* Parses an ELF image (never reads outside [data, data+size)); false with a reason in
 * err otherwise. The result points into data. */
MOCK_HIDDEN bool kernel_elf_parse(const void *data, size_t size, kernel_elf *out, char *err, size_t errlen);
MOCK_HIDDEN void kernel_elf_free(kernel_elf *e);
/* True for an object of this host's machine, word size and byte order. */
MOCK_HIDDEN bool kernel_elf_is_host(const kernel_elf *e);
MOCK_HIDDEN const kernel_elf_section *kernel_elf_section_named(const kernel_elf *e, const char *name);
/* The defined symbol `name` (a global one in preference), functions only if asked. */
MOCK_HIDDEN const kernel_elf_sym *kernel_elf_symbol(const kernel_elf *e, const char *name, bool functions_only);
/* Offset of a symbol in a device copy laid out as the file image followed by the
 * NOBITS sections at nobits_base; false for symbols outside any section. */
MOCK_HIDDEN bool kernel_elf_symbol_offset(const kernel_elf *e, const kernel_elf_sym *y, uint64_t nobits_base,
                                          uint64_t *off);

/* ------------------------------------------------------------ the lock */

/* Guards the registries of binaries, functions, argument lists and twins, and the
 * mutable state of those objects (core/lock_order.h MOCK_LOCK_KERNEL). */
extern mock_mutex kernel_mu;

/* ------------------------------------------------------------------ twin.c */

typedef struct kernel_twin {
    atomic_int refs;
    aclmockKernelDesc desc; /* desc.name / desc.params point into this object */
    char name[256];
    aclmockKernelParam params[ACLMOCK_MAX_PARAMS];
    aclmockKernelExtent extents[ACLMOCK_MAX_PARAMS]; /* the declared extents (has_extents) */
    bool has_extents;
    aclmockKernelExtentFn extent_fn;                 /* the declared extentFn, or NULL */
    uint32_t offsets[ACLMOCK_MAX_PARAMS]; /* byte offset of each parameter's slot */
    size_t params_size;                   /* bytes of all slots */
    size_t params_min;                    /* bytes a block must have: up to the end of the last parameter */
} kernel_twin;

/* Validates a descriptor; records the error under fn (`where` names it in the
 * message, e.g. "desc" or "kernel 'x' of /path/t.so"). */
MOCK_HIDDEN aclError kernel_twin_check(const char *fn, const aclmockKernelDesc *d, const char *where);
/* A new twin (one reference) from a checked descriptor, or NULL (out of memory). */
MOCK_HIDDEN kernel_twin *kernel_twin_new(const aclmockKernelDesc *d);
MOCK_HIDDEN void kernel_twin_ref(kernel_twin *t);
MOCK_HIDDEN void kernel_twin_put(kernel_twin *t);
/* The twin registered under `name` (kernel_mu held), no reference; NULL if none. */
MOCK_HIDDEN kernel_twin *kernel_twin_find_locked(const char *name);
/* The registered twin whose function or descriptor is at `symbol` (kernel_mu held). */
MOCK_HIDDEN kernel_twin *kernel_twin_find_symbol_locked(const void *symbol);
/* aclrtKernelType of ACLMOCK_KERNEL_* flags. */
MOCK_HIDDEN int32_t kernel_type_of_flags(uint32_t flags);
/* The extent (bytes) the twin declares for pointer parameter i of the argument block
 * `block` of `size` bytes (its extentFn, else its extents table; saturating): false when
 * it declares none (acl_mock_kernel.h "Extents"). */
MOCK_HIDDEN bool kernel_twin_extent(const kernel_twin *t, const uint8_t *block, size_t size, uint32_t i,
                                    uint64_t *bytes);

/* ---------------------------------------------------------------- binary.c */

typedef enum kernel_bin_kind {
    KERNEL_BIN_HOST = 1,   /* a host shared object with an aclmock_kernels table: its own twins */
    KERNEL_BIN_DEVICE = 2, /* another machine's ELF (a device .o): registered twins by name */
    KERNEL_BIN_MODULE = 3  /* a module of this process (aclrtGetFuncBySymbol) */
} kernel_bin_kind;

typedef struct kernel_binary kernel_binary;
typedef struct kernel_func kernel_func;
typedef struct kernel_args kernel_args;

struct kernel_func {
    uint64_t magic;
    kernel_binary *bin;
    kernel_func *next; /* the binary's functions */
    char *name;
    char *op_type;   /* aclrtRegisterCpuFunc's kernelName, else NULL */
    kernel_twin *own; /* the binary's own twin (with a reference), or NULL: the registry */
    int32_t type;    /* aclrtKernelType fixed by the binary, or -1: the twin's */
    bool has_aic, has_aiv;
    uint64_t aic_off, aiv_off; /* offsets of the code in the device copy */
    uint64_t aic_size, aiv_size;
};

struct kernel_binary {
    uint64_t magic;
    atomic_int refs;
    kernel_bin_kind kind;
    int32_t device;   /* the device it is loaded on */
    bool from_file;   /* aclrtBinaryLoadFromFile (aclrtLaunchKernel refuses its kernels) */
    bool cpu_kernels; /* AI CPU binary loaded from data (aclrtRegisterCpuFunc) */
    uint32_t magic_opt; /* ACL_RT_BINARY_LOAD_OPT_MAGIC value, 0 = none */
    char *path;       /* the file, or "<data>" */
    uint8_t *image;   /* our copy of the bytes */
    size_t image_size;
    kernel_elf elf;   /* parsed image */
    void *dl;         /* dlopen handle of a host twin object */
    kernel_twin **own; /* its table (KERNEL_BIN_HOST / MODULE) */
    size_t nown;
    void *dev_copy;   /* device copy (runtime memory), NULL until copied (lazy load) */
    size_t dev_size;
    kernel_func *funcs;
    kernel_args *lists;
    aclrtOpExceptionCallback cb; /* aclrtBinarySetExceptionCallback */
    void *cb_data;
};

MOCK_HIDDEN void kernel_binary_ref(kernel_binary *b);
MOCK_HIDDEN void kernel_binary_put(kernel_binary *b);
/* The live function behind a handle (kernel_mu held), or NULL. */
MOCK_HIDDEN kernel_func *kernel_func_find_locked(const void *handle);
/* Resolves a function handle for an entry point: NULL -> 100000, not a live function
 * -> 107000 (recorded under fn). On success a reference on its binary is held
 * (kernel_binary_put(f->bin) when done). */
MOCK_HIDDEN aclError kernel_func_acquire(const char *fn, const char *arg, const void *handle, kernel_func **out);
/* aclrtKernelType of a function (binary, twin or default). */
MOCK_HIDDEN int32_t kernel_func_type(const kernel_func *f, const kernel_twin *twin);
/* The twin a launch of f runs now (with a reference), or NULL when it has none. */
MOCK_HIDDEN kernel_twin *kernel_func_twin(const kernel_func *f);
/* Resolves the `func` of aclrtLaunchKernelWithArgsArray / the SIMT launches: a function
 * handle, or a kernel symbol as aclrtGetFuncBySymbol takes it. A reference on the
 * binary is held on success; errors under fn. */
MOCK_HIDDEN aclError kernel_func_or_symbol(const char *fn, const void *func, kernel_func **out);
/* aclFinalize: unloads every binary still loaded. */
MOCK_HIDDEN void kernel_binaries_finalize(void);

/* ------------------------------------------------------------------ args.c */

#define KERNEL_MAX_ARGS 128u

typedef struct kernel_param_slot {
    uint32_t offset, size; /* slot in the argument block (size as appended) */
    bool placeholder;
    void *data;            /* placeholder buffer (GetPlaceHolderBuffer), or NULL */
    size_t data_size;
} kernel_param_slot;

struct kernel_args {
    uint64_t magic;
    kernel_func *func;
    kernel_args *next; /* the binary's lists */
    void *user_handle; /* aclrtKernelArgsInitByUserMem: the user's handle memory, else NULL */
    bool user_mem;     /* aclrtKernelArgsInitByUserMem: buf/cap are the user's */
    bool finalized;
    bool buffers_started; /* a placeholder buffer was handed out: no more appends */
    uint8_t *buf;
    size_t cap, used;  /* slots: [0, used) */
    size_t ph_used;    /* user memory: placeholder data carved after the slots */
    uint32_t n;
    kernel_param_slot params[KERNEL_MAX_ARGS];
};

/* A launch's view of a finalized list: a copy of its slots (heap, *block of *size
 * bytes) and, per placeholder, the slot offset and its data. Taken under kernel_mu.
 * Records the error under fn (107000 not finalized / not a list of this function). */
typedef struct kernel_ph {
    uint32_t slot;     /* offset of the pointer slot in the block */
    const void *data;  /* host data to copy to the device */
    size_t size;
} kernel_ph;
MOCK_HIDDEN aclError kernel_args_snapshot(const char *fn, void *handle, const kernel_func *f, uint8_t **block,
                                          size_t *size, kernel_ph **ph, size_t *nph);
/* Forgets the handles of a binary's lists (kernel_mu held; at unload). */
MOCK_HIDDEN void kernel_args_forget_locked(kernel_args *head);
/* Frees the lists of a binary being freed (never touches user memory). */
MOCK_HIDDEN void kernel_args_free_list(kernel_args *head);

/* ------------------------------------------------------------------- run.c */

/* One launch (kernel.h: the task object). */
typedef struct kernel_launch {
    kernel_binary *bin;    /* reference */
    kernel_func *func;
    kernel_twin *twin;     /* reference */
    int32_t device;
    void *stream;          /* the user's handle (launch info) */
    uint32_t num_blocks;
    uint32_t block_offset; /* BLOCKDIM_OFFSET attribute */
    uint32_t grid[3], block[3];
    uint64_t dyn_ubuf;
    uint64_t timeout_us;   /* TIMEOUT / TIMEOUT_US attribute, 0 = none */
    uint32_t attr_mask;    /* bit per aclrtLaunchKernelAttrId given */
    uint8_t sched_mode, prefetch, dump, profiling;
    uint8_t *args;         /* host block we own, or NULL when args_dev */
    void *args_dev;        /* aclrtLaunchKernel/V2: the user's device block */
    size_t args_size;
    void *ph_dev;          /* device copy of the placeholder data (runtime memory) */
    size_t ph_size;
    uint32_t *ph_slots;    /* slot offsets patched with addresses in ph_dev */
    size_t nph;
    uint64_t *hint;        /* aclmockSetNextLaunchExtents: bytes per parameter (0 = none), or NULL */
    uint32_t nhint;
} kernel_launch;

/* Builds the placeholder device block of l from ph (copies the data, patches the
 * slots of l->args); errors recorded under fn. */
MOCK_HIDDEN aclError kernel_launch_placeholders(const char *fn, kernel_launch *l, const kernel_ph *ph, size_t nph);
/* Block worker pool: shut down at aclFinalize (restarted on demand). */
MOCK_HIDDEN void kernel_pool_finalize(void);

/* ---------------------------------------------------------------- observe.c */

/* Takes the calling thread's aclmockSetNextLaunchExtents hint: a malloc'd array of *n
 * byte counts, or NULL (none, or no diagnostic observes tasks). Every launch call takes
 * it, whatever its outcome. */
MOCK_HIDDEN uint64_t *kernel_take_launch_hint(uint32_t *n);

/* Enqueues the launch task (arg: a kernel_launch) on s with its description for the
 * diagnostics (kind, name, cost, the memory of its declared pointer arguments);
 * launch.c uses it while core_observing() and s is not bound to a capture.
 * Frees the launch when the stream refuses it, like stream_enqueue. */
MOCK_HIDDEN aclError kernel_enqueue_observed(mock_stream *s, const stream_task *task);

#endif /* MOCK_KERNEL_PRIVATE_H */
