/*
 * dump.c - the data dump writer (README "Dump"): the inputs and outputs of the
 * kernel launches that the dump configuration selects (misc/dump.c:
 * aclmdlSetDump, the aclInit config or DUMP_CONFIG_PATH; dump_list layers by
 * kernel name or dump_op_switch, dump_mode, dump_data, dump_step) are written as
 * NumPy .npy files plus a JSON index:
 *
 *   <root>/mock_dump_<pid>_<config>/index.json
 *   <root>/mock_dump_<pid>_<config>/device_<d>/step_<s>/<task>_<kernel>.<input|output>.<i>.npy
 *
 * <root> follows the documented priority ASCEND_DUMP_PATH > ASCEND_WORK_PATH >
 * dump_path; <config> counts the configurations of the process. Inputs are read
 * just before the kernel runs, outputs just after. index.json is a JSON array with
 * one object per tensor (task, op, device, stream, step, io, index, file, dtype,
 * shape, bytes; "stats" instead of a file with dump_data "stats"); it is valid JSON
 * after every kernel (entries are appended before the closing bracket).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "mem/mem.h"
#include "misc/misc.h"
#include "diag/diag_private.h"

#define DUMP_MAX_ARGS 64

struct diag_dump_job {
    misc_dump_plan plan;
    size_t nargs;
    mock_access args[DUMP_MAX_ARGS];
};

typedef struct index_file {
    uint64_t generation;
    char root[4200]; /* <root>/mock_dump_<pid>_<n> */
    FILE *f;
    bool empty;
} index_file;

static mock_mutex g_dump_mu = MOCK_MUTEX_INIT(MOCK_LOCK_DIAG_DUMP);
static index_file g_index;

/* ------------------------------------------------------------------ dtypes */

typedef struct dtype_info {
    int32_t acl;
    const char *descr; /* numpy descr */
    const char *name;  /* index name */
    size_t size;
} dtype_info;

static const dtype_info k_dtypes[] = {
    {ACL_FLOAT, "<f4", "float32", 4},     {ACL_FLOAT16, "<f2", "float16", 2},   {ACL_INT8, "|i1", "int8", 1},
    {ACL_INT32, "<i4", "int32", 4},       {ACL_UINT8, "|u1", "uint8", 1},       {ACL_INT16, "<i2", "int16", 2},
    {ACL_UINT16, "<u2", "uint16", 2},     {ACL_UINT32, "<u4", "uint32", 4},     {ACL_INT64, "<i8", "int64", 8},
    {ACL_UINT64, "<u8", "uint64", 8},     {ACL_DOUBLE, "<f8", "float64", 8},    {ACL_BOOL, "|b1", "bool", 1},
    {ACL_COMPLEX64, "<c8", "complex64", 8}, {ACL_COMPLEX128, "<c16", "complex128", 16},
    /* no NumPy type: the raw 16-bit patterns, named in the index */
    {ACL_BF16, "<u2", "bfloat16", 2},
};

static const dtype_info k_raw = {-1, "|u1", "uint8", 1};

static const dtype_info *dtype_of(int32_t acl)
{
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++) {
        if (k_dtypes[i].acl == acl) {
            return &k_dtypes[i];
        }
    }
    return &k_raw;
}

/* ------------------------------------------------------------------- plans */

diag_dump_job *diag_dump_plan(const diag_task *t, const mock_task_desc *d)
{
    misc_dump_plan plan;
    if (d->naccess == 0 || !misc_dump_match(t->name, t->step, d->dump_task, &plan)) {
        return NULL;
    }
    diag_dump_job *job = calloc(1, sizeof *job);
    if (job == NULL) {
        return NULL;
    }
    job->plan = plan;
    job->nargs = d->naccess < DUMP_MAX_ARGS ? d->naccess : DUMP_MAX_ARGS;
    memcpy(job->args, d->access, job->nargs * sizeof job->args[0]);
    return job;
}

void diag_dump_free(diag_dump_job *job)
{
    free(job);
}

/* ----------------------------------------------------------------- writing */

static void sanitize_name(const char *in, char *out, size_t len)
{
    size_t k = 0;
    for (const char *p = in; *p != '\0' && k + 1 < len; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        out[k++] = ok ? c : '_';
    }
    out[k] = '\0';
}

/* The shape written: the declared one when it matches the size, else 1-D. */
static size_t shape_of(const mock_access *a, const dtype_info *dt, int64_t dims[8])
{
    size_t count = a->size / dt->size;
    if (a->ndim > 0 && a->ndim <= 8) {
        uint64_t prod = 1;
        bool ok = true;
        for (uint32_t i = 0; i < a->ndim; i++) {
            ok = ok && a->dims[i] >= 0;
            prod *= (uint64_t)(a->dims[i] >= 0 ? a->dims[i] : 0);
        }
        if (ok && prod == count) {
            memcpy(dims, a->dims, a->ndim * sizeof dims[0]);
            return a->ndim;
        }
    }
    dims[0] = (int64_t)count;
    return 1;
}

static int write_npy(const char *path, const dtype_info *dt, const int64_t *dims, size_t ndim, const void *data,
                     size_t bytes)
{
    char shape[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < ndim; i++) {
        used += (size_t)snprintf(shape + used, sizeof shape - used, "%" PRId64 ",%s", dims[i],
                                 (i + 1 < ndim) ? " " : "");
    }
    if (ndim > 1 && used > 0 && shape[used - 1] == ',') {
        shape[--used] = '\0'; /* (2, 3) rather than (2, 3,) */
    }
    char header[512];
    int hl = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", dt->descr,
                      shape);
    /* magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of
     * 64, ending in a newline (.npy format 1.0) */
    size_t total = 10 + (size_t)hl + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)hl + pad + 1;
    memset(header + hl, ' ', pad);
    header[hl + pad] = '\n';
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        return errno;
    }
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    fwrite(pre, 1, sizeof pre, f);
    fwrite(header, 1, hlen, f);
    fwrite(data, 1, bytes, f);
    int err = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && err == 0) {
        err = errno;
    }
    return err;
}

static bool to_double(const dtype_info *dt, const unsigned char *p, double *out)
{
    switch (dt->acl) {
    case ACL_FLOAT: {
        float v;
        memcpy(&v, p, 4);
        *out = v;
        return true;
    }
    case ACL_DOUBLE:
        memcpy(out, p, 8);
        return true;
    case ACL_FLOAT16:
    case ACL_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        uint32_t bits;
        if (dt->acl == ACL_BF16) {
            bits = (uint32_t)h << 16;
        } else { /* IEEE binary16 -> binary32 */
            uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
            if (e == 0x1f) {
                bits = s | 0x7f800000u | (m << 13);
            } else if (e != 0) {
                bits = s | ((e + 112) << 23) | (m << 13);
            } else {
                float v = ldexpf((float)m, -24);
                memcpy(&bits, &v, 4);
                bits |= s;
            }
        }
        float v;
        memcpy(&v, &bits, 4);
        *out = v;
        return true;
    }
    case ACL_INT8:
        *out = (int8_t)p[0];
        return true;
    case ACL_UINT8:
    case ACL_BOOL:
        *out = p[0];
        return true;
    case ACL_INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        *out = v;
        return true;
    }
    case ACL_UINT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        *out = v;
        return true;
    }
    case ACL_INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        *out = v;
        return true;
    }
    case ACL_UINT32: {
        uint32_t v;
        memcpy(&v, p, 4);
        *out = v;
        return true;
    }
    case ACL_INT64: {
        int64_t v;
        memcpy(&v, p, 8);
        *out = (double)v;
        return true;
    }
    case ACL_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        *out = (double)v;
        return true;
    }
    default:
        return false;
    }
}

/* dump_data "stats": count, min, max, mean and the NaN / infinity counts. */
static void write_stats(FILE *f, const dtype_info *dt, const unsigned char *data, size_t bytes)
{
    size_t n = bytes / dt->size;
    double mn = INFINITY, mx = -INFINITY, sum = 0.0;
    uint64_t nans = 0, infs = 0, finite = 0;
    bool numeric = true;
    for (size_t i = 0; i < n && numeric; i++) {
        double v;
        numeric = to_double(dt, data + i * dt->size, &v);
        if (!numeric) {
            break;
        }
        if (isnan(v)) {
            nans++;
        } else if (isinf(v)) {
            infs++;
        } else {
            finite++;
            sum += v;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
    }
    if (!numeric || finite == 0) {
        fprintf(f, "{\"count\": %zu, \"nan\": %" PRIu64 ", \"inf\": %" PRIu64 "}", n, nans, infs);
        return;
    }
    fprintf(f, "{\"count\": %zu, \"min\": %.17g, \"max\": %.17g, \"mean\": %.17g, \"nan\": %" PRIu64
               ", \"inf\": %" PRIu64 "}",
            n, mn, mx, sum / (double)finite, nans, infs);
}

/* g_dump_mu held: the index of the plan's configuration, opened (a new folder per
 * configuration). false when it cannot be written. */
static bool index_open_locked(const misc_dump_plan *plan)
{
    if (g_index.f != NULL && g_index.generation == plan->generation) {
        return true;
    }
    if (g_index.f != NULL) {
        fclose(g_index.f);
        g_index.f = NULL;
    }
    snprintf(g_index.root, sizeof g_index.root, "%s/mock_dump_%ld_%" PRIu64, plan->dir, (long)getpid(),
             plan->generation);
    int err = diag_make_dirs(g_index.root);
    char path[4300];
    snprintf(path, sizeof path, "%s/index.json", g_index.root);
    g_index.f = err == 0 ? fopen(path, "w+") : NULL;
    if (g_index.f == NULL) {
        diag_log(-1, DIAG_LOG_ERROR, "dump", 0, "cannot write the dump index '%s': %s", path,
                 strerror(err != 0 ? err : errno));
        return false;
    }
    g_index.generation = plan->generation;
    g_index.empty = true;
    fputs("[\n]\n", g_index.f);
    fflush(g_index.f);
    return true;
}

static void dump_one(diag_task *t, const mock_access *a, size_t k, const char *io)
{
    const misc_dump_plan *plan = &t->dump->plan;
    const dtype_info *dt = dtype_of(a->dtype);
    int64_t dims[8];
    size_t ndim = shape_of(a, dt, dims);
    /* the range must still be one live allocation (the host may have freed it) */
    mock_mem_info info;
    bool live = mem_lookup(a->ptr, &info) && (uintptr_t)a->ptr + a->size <= info.base + info.size;
    unsigned char *copy = live ? malloc(a->size ? a->size : 1) : NULL;
    if (copy != NULL) {
        mem_access_begin(a->ptr, a->size);
        memcpy(copy, a->ptr, a->size);
        mem_access_end(a->ptr, a->size);
    }
    char op[64];
    sanitize_name(t->name, op, sizeof op);
    core_mutex_lock(&g_dump_mu);
    if (index_open_locked(plan)) {
        char rel[512], path[4800];
        snprintf(rel, sizeof rel, "device_%d/step_%" PRIu64, t->device, t->step);
        snprintf(path, sizeof path, "%s/%s", g_index.root, rel);
        int err = copy == NULL ? EFAULT : plan->stats ? 0 : diag_make_dirs(path);
        snprintf(rel + strlen(rel), sizeof rel - strlen(rel), "/%" PRIu64 "_%s.%s.%zu.npy", t->id, op, io, k);
        if (err == 0 && !plan->stats) {
            snprintf(path, sizeof path, "%s/%s", g_index.root, rel);
            err = write_npy(path, dt, dims, ndim, copy, a->size);
        }
        FILE *f = g_index.f;
        fseek(f, -2, SEEK_END); /* before "]\n" */
        fprintf(f, "%s  {\"task\": %" PRIu64 ", \"op\": ", g_index.empty ? "" : ",\n", t->id);
        fprintf(f, "\"%s\", \"device\": %d, \"stream\": %d, \"step\": %" PRIu64 ", \"io\": \"%s\", \"index\": %zu, ",
                op, t->device, t->stream_id, t->step, io, k);
        fprintf(f, "\"dtype\": \"%s\", \"shape\": [", dt->name);
        for (size_t i = 0; i < ndim; i++) {
            fprintf(f, "%s%" PRId64, i ? ", " : "", dims[i]);
        }
        fprintf(f, "], \"bytes\": %zu, ", a->size);
        if (err != 0) {
            fprintf(f, "\"file\": null, \"error\": \"%s\"}", copy == NULL ? "the memory is no longer allocated"
                                                                          : strerror(err));
        } else if (plan->stats) {
            fprintf(f, "\"file\": null, \"stats\": ");
            write_stats(f, dt, copy, a->size);
            fputs("}", f);
        } else {
            fprintf(f, "\"file\": \"%s\"}", rel);
        }
        fputs("\n]\n", f);
        fflush(f);
        g_index.empty = false;
    }
    core_mutex_unlock(&g_dump_mu);
    free(copy);
}

void diag_dump_inputs(diag_task *t)
{
    if (!t->dump->plan.inputs) {
        return;
    }
    for (size_t k = 0, n = 0; k < t->dump->nargs; k++) {
        if (t->dump->args[k].mode & MOCK_ACCESS_READ) {
            dump_one(t, &t->dump->args[k], n++, "input");
        }
    }
}

void diag_dump_outputs(diag_task *t, aclError rc)
{
    if (!t->dump->plan.outputs || rc != ACL_SUCCESS) {
        return; /* a failed kernel produced nothing meaningful */
    }
    for (size_t k = 0, n = 0; k < t->dump->nargs; k++) {
        if (t->dump->args[k].mode & MOCK_ACCESS_WRITE) {
            dump_one(t, &t->dump->args[k], n++, "output");
        }
    }
}

void diag_dump_finalize(void)
{
    core_mutex_lock(&g_dump_mu);
    if (g_index.f != NULL) {
        fclose(g_index.f);
        g_index.f = NULL;
    }
    g_index.generation = 0;
    core_mutex_unlock(&g_dump_mu);
}
