/*
 * launch.c - the launch APIs (acl_next_semantics.md §1.5): aclrtLaunchKernel, V2,
 * WithConfig, WithHostArgs, WithArgsArray and the SIMT variants, with the launch
 * attributes of aclrtLaunchKernelCfg. Each call checks its arguments, resolves the
 * kernel's twin (a launch of a kernel without one fails here, synchronously, naming
 * it), builds one kernel_launch task object that owns its argument block (run.c) and
 * enqueues it on the stream: launches are asynchronous and run in stream order with
 * every other task.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "kernel/kernel.h"
#include "kernel/kernel_private.h"

/* Blocks of one launch: the device's maximum blocks per grid (ACL_DEV_ATTR_MAX_BLOCK_PER_GRID). */
#define MAX_BLOCKS 65535u
/* SIMT threads per block (ACL_DEV_ATTR_MAX_THREADS_PER_BLOCK). */
#define MAX_THREADS 2048u

/* ------------------------------------------------------------ attributes */

typedef struct launch_cfg {
    uint32_t mask; /* bit per attribute id given */
    uint8_t sched, prefetch, dump, profiling;
    uint32_t dyn_ubuf, engine, offset;
    uint64_t timeout_us;
} launch_cfg;

/* Bytes of the union member of an attribute (the rest of the 16 bytes is reserved). */
static size_t member_size(int id)
{
    switch (id) {
    case ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE:
    case ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH:
    case ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP:
    case ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING:
        return 1;
    case ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT:
        return 2;
    case ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US:
        return 8;
    default:
        return 4;
    }
}

static const char *attr_name(int id)
{
    static const char *const names[] = {"?", "SCHEM_MODE", "DYN_UBUF_SIZE", "ENGINE_TYPE", "BLOCKDIM_OFFSET",
                                        "BLOCK_TASK_PREFETCH", "DATA_DUMP", "TIMEOUT", "TIMEOUT_US",
                                        "ENABLE_PROFILING"};
    return (id >= 1 && id <= 9) ? names[id] : "?";
}

/* Checks every attribute against its documented rules (ST#aclrtLaunchKernelAttrValue,
 * ENUM#aclrtLaunchKernelAttrId). Mock choices: a repeated id is an error; attributes of
 * another product (ENGINE_TYPE and BLOCKDIM_OFFSET: 310P; a nonzero DYN_UBUF_SIZE:
 * 950) are ACL_ERROR_RT_FEATURE_NOT_SUPPORT. */
static aclError parse_cfg(const char *fn, const aclrtLaunchKernelCfg *cfg, launch_cfg *out)
{
    memset(out, 0, sizeof *out);
    if (cfg == NULL) {
        return ACL_SUCCESS;
    }
    if (cfg->numAttrs > 0 && cfg->attrs == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'cfg->attrs' is NULL but numAttrs is %zu",
                          cfg->numAttrs);
    }
    if (cfg->numAttrs > 9) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'cfg->numAttrs' (%zu) is larger than the 9 attribute ids (each at most once)",
                          cfg->numAttrs);
    }
    unsigned soc = CORE_SOC_BIT(core_soc_family_get());
    for (size_t i = 0; i < cfg->numAttrs; i++) {
        const aclrtLaunchKernelAttr *a = &cfg->attrs[i];
        int id = (int)a->id;
        if (id < ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE || id > ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "cfg->attrs[%zu].id %d is not an aclrtLaunchKernelAttrId",
                              i, id);
        }
        if (out->mask & (1u << id)) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "cfg->attrs[%zu]: attribute %s is given twice", i,
                              attr_name(id));
        }
        out->mask |= 1u << id;
        const uint8_t *raw = (const uint8_t *)&a->value;
        for (size_t b = member_size(id); b < sizeof a->value; b++) {
            if (raw[b] != 0) {
                return core_error(fn, ACL_ERROR_INVALID_PARAM,
                                  "cfg->attrs[%zu] (%s): byte %zu of the value is reserved and must be 0", i,
                                  attr_name(id), b);
            }
        }
        uint8_t flag = raw[0];
        switch (id) {
        case ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE:
        case ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH:
        case ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP:
        case ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING:
            if (flag > 1) {
                return core_error(fn, ACL_ERROR_INVALID_PARAM, "cfg->attrs[%zu] (%s): value %u is not 0 or 1", i,
                                  attr_name(id), flag);
            }
            if (id == ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE) {
                out->sched = flag;
            } else if (id == ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH) {
                out->prefetch = flag;
            } else if (id == ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP) {
                out->dump = flag;
            } else {
                out->profiling = flag;
            }
            break;
        case ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE:
            out->dyn_ubuf = a->value.dynUBufSize;
            if (out->dyn_ubuf != 0 && (soc & CORE_SOC_950) == 0) {
                return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                                  "cfg->attrs[%zu]: DYN_UBUF_SIZE (SIMT kernels) is only supported on Ascend 950, "
                                  "not on %s",
                                  i, core_config_get()->soc_name);
            }
            break;
        case ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE:
        case ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET:
            if (soc != CORE_SOC_BIT(CORE_SOC_310P)) {
                return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                                  "cfg->attrs[%zu]: %s is only supported on Atlas inference (310P) parts, not on %s",
                                  i, attr_name(id), core_config_get()->soc_name);
            }
            if (id == ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE) {
                if ((int)a->value.engineType != ACL_RT_ENGINE_TYPE_AIC &&
                    (int)a->value.engineType != ACL_RT_ENGINE_TYPE_AIV) {
                    return core_error(fn, ACL_ERROR_INVALID_PARAM,
                                      "cfg->attrs[%zu]: engineType %d is not ACL_RT_ENGINE_TYPE_AIC or _AIV", i,
                                      (int)a->value.engineType);
                }
                out->engine = (uint32_t)a->value.engineType;
            } else {
                out->offset = a->value.blockDimOffset;
            }
            break;
        case ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT:
            out->timeout_us = (uint64_t)a->value.timeout * 1000000u; /* seconds; 0 = forever */
            break;
        default: /* TIMEOUT_US */
            out->timeout_us = ((uint64_t)a->value.timeoutUs.timeoutHigh << 32) | a->value.timeoutUs.timeoutLow;
            break;
        }
    }
    if ((out->mask & (1u << ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT)) &&
        (out->mask & (1u << ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US))) {
        /* ST#aclrtLaunchKernelAttrValue: giving both is an error */
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "cfg gives both TIMEOUT and TIMEOUT_US (only one is allowed)");
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ the common part */

typedef struct launch_req {
    const char *fn;
    const void *func;      /* handle (or symbol when by_symbol) */
    bool by_symbol;        /* WithArgsArray / SIMT: a handle or a __global__ symbol */
    uint32_t num_blocks;
    aclrtStream stream;
    const aclrtLaunchKernelCfg *cfg;
    bool simt;
    dim3 grid, block;
    size_t dyn_ubuf;
} launch_req;

static aclError check_blocks(const char *fn, uint32_t n)
{
    if (n == 0 || n > MAX_BLOCKS) {
        /* the reference gives no limit; the mock uses the device's blocks per grid */
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'numBlocks' (%u) is not in 1..%u", n, MAX_BLOCKS);
    }
    return ACL_SUCCESS;
}

/* Resolves function, stream and twin and checks the attributes against them: a new
 * launch object (without arguments yet) and its stream. Errors under r->fn. */
static aclError prepare(const launch_req *r, kernel_launch **out, mock_stream **stream)
{
    uint32_t nhint = 0;
    uint64_t *hint = kernel_take_launch_hint(&nhint); /* every launch call uses it up */
    launch_cfg c;
    aclError rc = parse_cfg(r->fn, r->cfg, &c);
    if (rc == ACL_SUCCESS) {
        rc = core_fault_check(r->fn); /* MOCK_ENTER */
    }
    kernel_func *f = NULL;
    if (rc == ACL_SUCCESS) {
        rc = r->by_symbol ? kernel_func_or_symbol(r->fn, r->func, &f)
                          : kernel_func_acquire(r->fn, "funcHandle", r->func, &f);
    }
    if (rc != ACL_SUCCESS) {
        free(hint);
        return rc;
    }
    mock_stream *s = NULL;
    kernel_twin *t = NULL;
    if ((rc = stream_resolve(r->fn, r->stream, &s)) != ACL_SUCCESS) {
        goto fail;
    }
    if (stream_device(s) != f->bin->device) {
        rc = core_error(r->fn, ACL_ERROR_RT_PARAM_INVALID,
                        "kernel '%s' is loaded on device %d but the stream is on device %d", f->name, f->bin->device,
                        stream_device(s));
        goto fail;
    }
    t = kernel_func_twin(f);
    if (t == NULL) {
        /* README "Kernels and host twins": the name is resolved at launch (a twin may
         * be registered after aclrtBinaryGetFunction); without one the launch fails */
        rc = core_error(r->fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                        "kernel '%s' of binary '%.200s' has no host twin on the mock: register one with "
                        "aclmockRegisterKernel(\"%s\", ...) or load a host twin object",
                        f->name, f->bin->path, f->name);
        goto fail;
    }
    bool simt_kernel = (t->desc.flags & ACLMOCK_KERNEL_SIMT) != 0;
    uint64_t dyn = r->simt ? r->dyn_ubuf : c.dyn_ubuf; /* the SIMT argument overrides the attribute */
    if (r->simt && !simt_kernel) {
        rc = core_error(r->fn, ACL_ERROR_RT_PARAM_INVALID,
                        "kernel '%s' is not a SIMT kernel (its twin lacks ACLMOCK_KERNEL_SIMT)", f->name);
        goto fail;
    }
    if (dyn != 0 && !simt_kernel) {
        /* ST#aclrtLaunchKernelAttrValue: the dynamic UB size is 0 for a pure SIMD kernel */
        rc = core_error(r->fn, ACL_ERROR_INVALID_PARAM,
                        "a dynamic UB size of %llu bytes for kernel '%s', which is not a SIMT kernel (must be 0)",
                        (unsigned long long)dyn, f->name);
        goto fail;
    }
    if (dyn != 0) {
        int64_t ub = 0;
        if ((rc = aclrtGetDeviceInfo((uint32_t)f->bin->device, ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE, &ub)) !=
            ACL_SUCCESS) {
            goto fail;
        }
        if (dyn > (uint64_t)ub) {
            rc = core_error(r->fn, ACL_ERROR_INVALID_PARAM,
                            "dynamic UB size %llu is larger than the %lld bytes available per block "
                            "(aclrtFunctionGetAvailDynUbufPerBlock)",
                            (unsigned long long)dyn, (long long)ub);
            goto fail;
        }
    }
    kernel_launch *l = calloc(1, sizeof *l);
    if (l == NULL) {
        rc = core_error(r->fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        goto fail;
    }
    l->bin = f->bin; /* the reference kernel_func_acquire took */
    l->func = f;
    l->twin = t;
    l->device = f->bin->device;
    l->stream = (void *)s;
    l->num_blocks = r->num_blocks;
    l->block_offset = c.offset;
    l->grid[0] = r->simt ? r->grid.x : r->num_blocks;
    l->grid[1] = r->simt ? r->grid.y : 1;
    l->grid[2] = r->simt ? r->grid.z : 1;
    l->block[0] = r->simt ? r->block.x : 1;
    l->block[1] = r->simt ? r->block.y : 1;
    l->block[2] = r->simt ? r->block.z : 1;
    l->dyn_ubuf = dyn;
    l->timeout_us = c.timeout_us;
    l->attr_mask = c.mask;
    l->sched_mode = c.sched;
    l->prefetch = c.prefetch;
    l->dump = c.dump;
    l->profiling = c.profiling;
    l->hint = hint;
    l->nhint = nhint;
    *out = l;
    *stream = s;
    return ACL_SUCCESS;
fail:
    free(hint);
    kernel_twin_put(t);
    kernel_binary_put(f->bin);
    return rc;
}

/* What a launch is for a capture (aclmdlRITaskGetParams / SetParams, task groups):
 * a KERNEL task (kernel_task_get_params / kernel_task_set_params in run.c). The
 * arguments read back are the user's device block (aclrtLaunchKernel/V2) or the mock's
 * host copy of the block, with isHostArgs 0 as the reference reads (mock choice: the
 * real runtime gives its device copy; the graph subsystem treats the host copy given
 * back to SetParams as host arguments). */
static aclError launch_get_params(void *arg, aclmdlRITaskParams *p)
{
    kernel_task_get_params(arg, &p->kernelTaskParams);
    p->kernelTaskParams.isHostArgs = 0;
    return ACL_SUCCESS;
}

/* aclmdlRITaskSetParams + aclmdlRIUpdate (the model is not running): new arguments
 * and block count (kernel_task_set_params), and, when cfg is not NULL, new launch
 * attributes: cfg replaces the launch's attribute set, checked like a launch's (the
 * dynamic UB size of a SIMT launch keeps its launch argument unless DYN_UBUF_SIZE is
 * given: mock choice). Nothing changes when a check fails. */
static aclError launch_set_params(const char *fn, void *arg, const aclmdlRITaskParams *p)
{
    kernel_launch *l = arg;
    const aclmdlRIKernelTaskParams *k = &p->kernelTaskParams;
    launch_cfg c;
    if (k->cfg != NULL) {
        aclError rc = parse_cfg(fn, k->cfg, &c);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
        bool simt_kernel = (l->twin->desc.flags & ACLMOCK_KERNEL_SIMT) != 0;
        if (c.dyn_ubuf != 0 && !simt_kernel) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "a dynamic UB size of %u bytes for kernel '%s', which is not a SIMT kernel (must be 0)",
                              c.dyn_ubuf, l->func->name);
        }
    }
    aclError rc = kernel_task_set_params(fn, l, k);
    if (rc != ACL_SUCCESS || k->cfg == NULL) {
        return rc;
    }
    if (c.mask & (1u << ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE)) {
        l->dyn_ubuf = c.dyn_ubuf;
    }
    l->block_offset = c.offset;
    l->timeout_us = c.timeout_us;
    l->attr_mask = c.mask;
    l->sched_mode = c.sched;
    l->prefetch = c.prefetch;
    l->dump = c.dump;
    l->profiling = c.profiling;
    return ACL_SUCCESS;
}

aclError kernel_task_get_attr(const char *fn, const void *task, int id, aclrtLaunchKernelAttrValue *out)
{
    const kernel_launch *l = task;
    memset(out, 0, sizeof *out);
    switch (id) {
    case ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE:
        out->schemMode = l->sched_mode;
        return ACL_SUCCESS;
    case ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE:
        out->dynUBufSize = (uint32_t)l->dyn_ubuf;
        return ACL_SUCCESS;
    case ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP:
        out->isDataDump = l->dump;
        return ACL_SUCCESS;
    case ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT: {
        uint64_t s = (l->timeout_us + 999999u) / 1000000u; /* whole seconds, rounded up */
        out->timeout = (uint16_t)(s > UINT16_MAX ? UINT16_MAX : s);
        return ACL_SUCCESS;
    }
    case ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US:
        out->timeoutUs.timeoutLow = (uint32_t)l->timeout_us;
        out->timeoutUs.timeoutHigh = (uint32_t)(l->timeout_us >> 32);
        return ACL_SUCCESS;
    case ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING:
        out->enableProfiling = l->profiling;
        return ACL_SUCCESS;
    case ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE:
    case ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET:
    case ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH:
        /* MRI#aclmdlRIKernelTaskGetAttribute: these three cannot be queried */
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "launch attribute %s of a kernel task cannot be queried",
                          attr_name(id));
    default:
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'attrId' (%d) is not an aclrtLaunchKernelAttrId", id);
    }
}

static const stream_task_ops k_launch_ops = {"kernel", ACL_MODEL_RI_TASK_KERNEL, true, launch_get_params,
                                             launch_set_params};

static aclError enqueue(const char *fn, kernel_launch *l, mock_stream *s)
{
    /* frees l when refused; described for the diagnostics while they observe (observe.c) */
    stream_task task = {kernel_task_run, l, kernel_task_free, &k_launch_ops};
    bool observed = core_observing() && stream_binding(s) == NULL; /* a capture runs it later */
    aclError rc = observed ? kernel_enqueue_observed(s, &task) : stream_enqueue_task(s, &task);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the launch (stream failed or being destroyed)");
    }
    return ACL_SUCCESS;
}

/* A host block of exactly the parameters when the twin describes them: the declared
 * size must fit. */
static aclError check_size_against_params(const char *fn, const kernel_launch *l, size_t size)
{
    const kernel_twin *t = l->twin;
    if (t->desc.numParams != ACLMOCK_PARAMS_UNKNOWN && size < t->params_min) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'argsSize' (%zu) is smaller than the %zu bytes of the %u parameters of kernel '%s'",
                          size, t->params_min, t->desc.numParams, t->name);
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ args in device memory */

static aclError launch_device_args(const char *fn, aclrtFuncHandle funcHandle, uint32_t numBlocks,
                                   const void *argsData, size_t argsSize, aclrtLaunchKernelCfg *cfg,
                                   aclrtStream stream, bool v1)
{
    aclError rc = check_blocks(fn, numBlocks);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (argsData == NULL && argsSize != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'argsData' is NULL but argsSize is %zu", argsSize);
    }
    launch_req r = {fn, funcHandle, false, numBlocks, stream, cfg, false, {1, 1, 1}, {1, 1, 1}, 0};
    kernel_launch *l = NULL;
    mock_stream *s = NULL;
    if ((rc = prepare(&r, &l, &s)) != ACL_SUCCESS) {
        return rc;
    }
    if (v1 && l->bin->from_file) {
        /* KRN#aclrtBinaryLoadFromFile: AI Core binaries loaded from a file are launched
         * with aclrtLaunchKernelWithConfig, V2 or WithHostArgs */
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                        "kernel '%s' comes from aclrtBinaryLoadFromFile: launch it with aclrtLaunchKernelV2, "
                        "WithConfig or WithHostArgs",
                        l->func->name);
    } else if (argsSize != 0) {
        /* KRN#aclrtLaunchKernel: argsData is memory on the launching device */
        mock_mem_info mi;
        if (!mem_lookup(argsData, &mi) || mi.kind != MOCK_MEM_DEVICE) {
            rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'argsData' (%p) is not device memory", argsData);
        } else if (mi.device >= 0 && mi.device != l->device) {
            rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                            "argument 'argsData' is memory of device %d, not of the launching device %d", mi.device,
                            l->device);
        } else if (argsSize > mi.size - ((uintptr_t)argsData - mi.base)) {
            rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                            "argument 'argsSize' (%zu) overruns the allocation of argsData (%zu bytes left)", argsSize,
                            mi.size - (size_t)((uintptr_t)argsData - mi.base));
        } else {
            rc = check_size_against_params(fn, l, argsSize);
        }
    } else {
        rc = check_size_against_params(fn, l, 0);
    }
    if (rc != ACL_SUCCESS) {
        kernel_task_free(l);
        return rc;
    }
    l->args_dev = (void *)(uintptr_t)argsData;
    l->args_size = argsSize;
    return enqueue(fn, l, s);
}

aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void *argsData, size_t argsSize,
                           aclrtStream stream)
{
    return launch_device_args("aclrtLaunchKernel", funcHandle, numBlocks, argsData, argsSize, NULL, stream, true);
}

aclError aclrtLaunchKernelV2(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void *argsData, size_t argsSize,
                             aclrtLaunchKernelCfg *cfg, aclrtStream stream)
{
    return launch_device_args("aclrtLaunchKernelV2", funcHandle, numBlocks, argsData, argsSize, cfg, stream, false);
}

/* ------------------------------------------------------------ args from the host */

aclError aclrtLaunchKernelWithConfig(aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                                     aclrtLaunchKernelCfg *cfg, aclrtArgsHandle argsHandle, void *reserve)
{
    static const char fn[] = "aclrtLaunchKernelWithConfig";
    MOCK_REQUIRE_NONNULL(fn, argsHandle);
    if (reserve != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'reserve' must be NULL");
    }
    aclError rc = check_blocks(fn, numBlocks);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    launch_req r = {fn, funcHandle, false, numBlocks, stream, cfg, false, {1, 1, 1}, {1, 1, 1}, 0};
    kernel_launch *l = NULL;
    mock_stream *s = NULL;
    if ((rc = prepare(&r, &l, &s)) != ACL_SUCCESS) {
        return rc;
    }
    kernel_ph *ph = NULL;
    size_t nph = 0;
    rc = kernel_args_snapshot(fn, argsHandle, l->func, &l->args, &l->args_size, &ph, &nph);
    if (rc == ACL_SUCCESS) {
        rc = kernel_launch_placeholders(fn, l, ph, nph);
    }
    free(ph);
    if (rc != ACL_SUCCESS) {
        kernel_task_free(l);
        return rc;
    }
    return enqueue(fn, l, s);
}

/* Checks the placeholder array of a host-args launch (ST#aclrtPlaceHolderInfo,
 * G-REC#aclrtLaunchKernelWithHostArgs) and turns it into kernel_ph entries: each
 * placeholder's data runs from its dataOffset to the next placeholder's data (or the
 * end of hostArgs); the data lies after every pointer slot. */
static aclError host_placeholders(const char *fn, const uint8_t *host, size_t size, const aclrtPlaceHolderInfo *arr,
                                  size_t num, kernel_ph **out)
{
    *out = NULL;
    if (num == 0) {
        return ACL_SUCCESS;
    }
    if (arr == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'placeHolderArray' is NULL but placeHolderNum is %zu",
                          num);
    }
    if (num > KERNEL_MAX_ARGS) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'placeHolderNum' (%zu) is larger than %u", num,
                          KERNEL_MAX_ARGS);
    }
    uint64_t max_slot_end = 0, min_data = UINT64_MAX;
    for (size_t i = 0; i < num; i++) {
        uint64_t a = arr[i].addrOffset, d = arr[i].dataOffset;
        if (a % 8 != 0 || a + 8 > size) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "placeHolderArray[%zu].addrOffset (%u) is not an 8-byte aligned pointer slot inside "
                              "the %zu bytes of hostArgs",
                              i, arr[i].addrOffset, size);
        }
        if (d >= size) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "placeHolderArray[%zu].dataOffset (%u) is not inside the %zu bytes of hostArgs", i,
                              arr[i].dataOffset, size);
        }
        for (size_t k = 0; k < i; k++) {
            if (arr[k].dataOffset == arr[i].dataOffset || arr[k].addrOffset == arr[i].addrOffset) {
                return core_error(fn, ACL_ERROR_INVALID_PARAM,
                                  "placeHolderArray[%zu] repeats the offsets of placeHolderArray[%zu]", i, k);
            }
        }
        max_slot_end = a + 8 > max_slot_end ? a + 8 : max_slot_end;
        min_data = d < min_data ? d : min_data;
    }
    if (min_data < max_slot_end) {
        /* KRN#Kernel加载与执行接口调用流程: the placeholder data lies after all the arguments */
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "placeholder data at offset %llu lies before the end of the pointer slots (%llu)",
                          (unsigned long long)min_data, (unsigned long long)max_slot_end);
    }
    kernel_ph *ph = calloc(num, sizeof *ph);
    if (ph == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    for (size_t i = 0; i < num; i++) {
        uint64_t end = size;
        for (size_t k = 0; k < num; k++) {
            if (arr[k].dataOffset > arr[i].dataOffset && arr[k].dataOffset < end) {
                end = arr[k].dataOffset;
            }
        }
        ph[i].slot = arr[i].addrOffset;
        ph[i].data = host + arr[i].dataOffset;
        ph[i].size = (size_t)(end - arr[i].dataOffset);
    }
    *out = ph;
    return ACL_SUCCESS;
}

static aclError launch_host_args(const launch_req *r, void *hostArgs, size_t argsSize,
                                 aclrtPlaceHolderInfo *placeHolderArray, size_t placeHolderNum)
{
    const char *fn = r->fn;
    if (hostArgs == NULL && argsSize != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'hostArgs' is NULL but argsSize is %zu", argsSize);
    }
    if (argsSize > ((size_t)1 << 30)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'argsSize' (%zu) is larger than 1 GiB", argsSize);
    }
    kernel_launch *l = NULL;
    mock_stream *s = NULL;
    aclError rc = prepare(r, &l, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    kernel_ph *ph = NULL;
    rc = check_size_against_params(fn, l, argsSize);
    if (rc == ACL_SUCCESS) {
        rc = host_placeholders(fn, hostArgs, argsSize, placeHolderArray, placeHolderNum, &ph);
    }
    if (rc == ACL_SUCCESS) {
        l->args = malloc(argsSize ? argsSize : 1);
        if (l->args == NULL) {
            rc = core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        } else {
            if (argsSize != 0) {
                memcpy(l->args, hostArgs, argsSize);
            }
            l->args_size = argsSize;
            rc = kernel_launch_placeholders(fn, l, ph, placeHolderNum);
        }
    }
    free(ph);
    if (rc != ACL_SUCCESS) {
        kernel_task_free(l);
        return rc;
    }
    return enqueue(fn, l, s);
}

aclError aclrtLaunchKernelWithHostArgs(aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                                       aclrtLaunchKernelCfg *cfg, void *hostArgs, size_t argsSize,
                                       aclrtPlaceHolderInfo *placeHolderArray, size_t placeHolderNum)
{
    static const char fn[] = "aclrtLaunchKernelWithHostArgs";
    aclError rc = check_blocks(fn, numBlocks);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    launch_req r = {fn, funcHandle, false, numBlocks, stream, cfg, false, {1, 1, 1}, {1, 1, 1}, 0};
    return launch_host_args(&r, hostArgs, argsSize, placeHolderArray, placeHolderNum);
}

/* WithArgsArray: one host pointer per declared parameter, packed into slots. */
static aclError launch_args_array(const launch_req *r, void **args)
{
    const char *fn = r->fn;
    kernel_launch *l = NULL;
    mock_stream *s = NULL;
    aclError rc = prepare(r, &l, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const kernel_twin *t = l->twin;
    if (t->desc.numParams == ACLMOCK_PARAMS_UNKNOWN) {
        /* KRN#aclrtLaunchKernelWithArgsArray: the array must match the parameters */
        rc = core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                        "the twin of kernel '%s' does not describe its parameters, which this launch needs "
                        "(register it with aclmockRegisterKernelDesc or declare it with ACLMOCK_KERNEL)",
                        t->name);
    } else if (args == NULL && t->desc.numParams > 0) {
        rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'args' is NULL but kernel '%s' takes %u arguments",
                        t->name, t->desc.numParams);
    } else {
        l->args = calloc(1, t->params_size ? t->params_size : 1);
        l->args_size = t->params_size;
        if (l->args == NULL) {
            rc = core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        }
        for (uint32_t i = 0; rc == ACL_SUCCESS && i < t->desc.numParams; i++) {
            if (args[i] == NULL) {
                rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'args[%u]' is NULL", i);
            } else {
                memcpy(l->args + t->offsets[i], args[i], t->params[i].size);
            }
        }
    }
    if (rc != ACL_SUCCESS) {
        kernel_task_free(l);
        return rc;
    }
    return enqueue(fn, l, s);
}

aclError aclrtLaunchKernelWithArgsArray(void *func, uint32_t numBlocks, aclrtStream stream, aclrtLaunchKernelCfg *cfg,
                                        void **args)
{
    static const char fn[] = "aclrtLaunchKernelWithArgsArray";
    aclError rc = check_blocks(fn, numBlocks);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    launch_req r = {fn, func, true, numBlocks, stream, cfg, false, {1, 1, 1}, {1, 1, 1}, 0};
    return launch_args_array(&r, args);
}

/* ------------------------------------------------------------ SIMT (950) */

static aclError simt_front(const char *fn, dim3 grid, dim3 block, uint32_t *blocks)
{
    if ((CORE_SOC_BIT(core_soc_family_get()) & CORE_SOC_950) == 0) {
        /* KRN#aclrtLaunchSIMTKernelWithArgsArray: Ascend 950 only */
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "SIMT kernels need an Ascend 950 (this device is %s)",
                          core_config_get()->soc_name);
    }
    uint64_t g = (uint64_t)grid.x * grid.y * grid.z, b = (uint64_t)block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || g > MAX_BLOCKS) {
        /* ST#dim3: in C the members must be set by hand (no default of 1) */
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'gridDim' (%u, %u, %u): every member must be >= 1 and their product <= %u",
                          grid.x, grid.y, grid.z, MAX_BLOCKS);
    }
    if (block.x == 0 || block.y == 0 || block.z == 0 || b > MAX_THREADS) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'blockDim' (%u, %u, %u): every member must be >= 1 and their product <= %u",
                          block.x, block.y, block.z, MAX_THREADS);
    }
    *blocks = (uint32_t)g;
    return ACL_SUCCESS;
}

aclError aclrtLaunchSIMTKernelWithArgsArray(void *func, dim3 gridDim, dim3 blockDim, size_t dynUbufSize,
                                            aclrtStream stream, aclrtLaunchKernelCfg *cfg, void **args)
{
    static const char fn[] = "aclrtLaunchSIMTKernelWithArgsArray";
    uint32_t blocks = 0;
    aclError rc = simt_front(fn, gridDim, blockDim, &blocks);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    launch_req r = {fn, func, true, blocks, stream, cfg, true, gridDim, blockDim, dynUbufSize};
    return launch_args_array(&r, args);
}

aclError aclrtLaunchSIMTKernelWithHostArgs(void *func, dim3 gridDim, dim3 blockDim, size_t dynUbufSize,
                                           aclrtStream stream, aclrtLaunchKernelCfg *cfg, void *hostArgs,
                                           size_t argsSize, aclrtPlaceHolderInfo *placeHolderArray,
                                           size_t placeHolderNum)
{
    static const char fn[] = "aclrtLaunchSIMTKernelWithHostArgs";
    uint32_t blocks = 0;
    aclError rc = simt_front(fn, gridDim, blockDim, &blocks);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    launch_req r = {fn, func, true, blocks, stream, cfg, true, gridDim, blockDim, dynUbufSize};
    return launch_host_args(&r, hostArgs, argsSize, placeHolderArray, placeHolderNum);
}
