/*
 * trace.c - writes a finished profile (README "Profiling"):
 *
 *   trace.json          Chrome trace event format (loads in chrome://tracing and
 *                       Perfetto): one process per device ("NPU <d>") with one
 *                       thread (track) per stream, one "host" process with a track
 *                       per host thread; every task a complete event ("ph":"X") with
 *                       name, cat (its kind), ts/dur in microseconds and args (kind,
 *                       bytes, device, stream, task, step, start_ns, end_ns, tag);
 *                       markers, records and steps are instant events ("ph":"i");
 *                       metadata events ("ph":"M") name the processes and threads.
 *   summary.json        per kind: count, total/mean time, bytes, bandwidth; per stream
 *                       and per device: busy time, overlap with other streams, span.
 *   kind_summary.csv    the per-kind table;  stream_summary.csv  the per-stream one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "diag/diag_private.h"

#define HOST_PID 0

static void json_str(FILE *f, const char *s)
{
    fputc(0x22, f); /* a double quote */
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == 0x22 || *p == 0x5c) { /* quote, backslash */
            fprintf(f, "\\%c", *p);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
    }
    fputc(0x22, f); /* a double quote */
}

/* microseconds with nanosecond precision */
static void us(FILE *f, uint64_t ns)
{
    fprintf(f, "%" PRIu64 ".%03" PRIu64, ns / 1000u, ns % 1000u);
}

static bool is_host(const diag_prof_rec *r)
{
    return r->device < 0;
}

/* Busy work of a stream for busy time and overlap: tasks that occupy it (not event
 * waits, which only block, nor instants). */
static bool is_busy(const diag_prof_rec *r)
{
    return !is_host(r) && !r->instant && r->kind != MOCK_TASK_EVENT_WAIT && r->end_ns > r->start_ns;
}

/* ------------------------------------------------------------------ tracks */

typedef struct track {
    int32_t device;
    int32_t stream;
    bool is_default;
    /* summary */
    uint64_t tasks, busy, overlap, first, last;
} track;

typedef struct tracks {
    track *v;
    size_t n, cap;
} tracks;

static track *track_of(tracks *t, int32_t device, int32_t stream)
{
    for (size_t i = 0; i < t->n; i++) {
        if (t->v[i].device == device && t->v[i].stream == stream) {
            return &t->v[i];
        }
    }
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 16;
        track *nv = realloc(t->v, nc * sizeof *nv);
        if (nv == NULL) {
            return NULL;
        }
        t->v = nv;
        t->cap = nc;
    }
    track *k = &t->v[t->n++];
    memset(k, 0, sizeof *k);
    k->device = device;
    k->stream = stream;
    k->first = UINT64_MAX;
    return k;
}

static int cmp_track(const void *a, const void *b)
{
    const track *x = a, *y = b;
    if (x->device != y->device) {
        return x->device < y->device ? -1 : 1;
    }
    return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* ------------------------------------------------------------------ overlap */

typedef struct edge {
    uint64_t t;
    int delta;     /* +1 start, -1 end */
    size_t track;  /* index into tracks */
} edge;

static int cmp_edge(const void *a, const void *b)
{
    const edge *x = a, *y = b;
    if (x->t != y->t) {
        return x->t < y->t ? -1 : 1;
    }
    return x->delta - y->delta; /* ends before starts at the same time */
}

typedef struct device_sum {
    int32_t device;
    uint64_t busy, overlap, first, last;
} device_sum;

/* Busy and overlap per stream and per device, by a sweep over task edges. */
static void sweep(const diag_prof_rec *recs, size_t n, tracks *tr, device_sum *devs, size_t *ndevs)
{
    edge *e = malloc(2 * (n + 1) * sizeof *e);
    int *active = calloc(tr->n + 1, sizeof *active);
    size_t ne = 0;
    if (e == NULL || active == NULL) {
        free(e);
        free(active);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_busy(&recs[i])) {
            continue;
        }
        track *k = track_of(tr, recs[i].device, recs[i].stream_id);
        size_t idx = (size_t)(k - tr->v);
        e[ne++] = (edge){recs[i].start_ns, +1, idx};
        e[ne++] = (edge){recs[i].end_ns, -1, idx};
    }
    if (ne > 0) {
        qsort(e, ne, sizeof *e, cmp_edge);
    }
    for (int32_t d = 0; d < MOCK_MAX_DEVICES; d++) {
        size_t busy_streams = 0;
        uint64_t prev = 0;
        device_sum ds = {d, 0, 0, UINT64_MAX, 0};
        bool seen = false;
        for (size_t i = 0; i < ne; i++) {
            track *k = &tr->v[e[i].track];
            if (k->device != d) {
                continue;
            }
            seen = true;
            uint64_t len = e[i].t - prev;
            if (busy_streams > 0 && len > 0) {
                ds.busy += len;
                if (busy_streams >= 2) {
                    ds.overlap += len;
                }
                for (size_t j = 0; j < tr->n; j++) {
                    if (tr->v[j].device == d && active[j] > 0) {
                        tr->v[j].busy += len;
                        if (busy_streams >= 2) {
                            tr->v[j].overlap += len;
                        }
                    }
                }
            }
            prev = e[i].t;
            if (e[i].delta > 0) {
                if (active[e[i].track]++ == 0) {
                    busy_streams++;
                }
                if (e[i].t < ds.first) {
                    ds.first = e[i].t;
                }
            } else {
                if (--active[e[i].track] == 0) {
                    busy_streams--;
                }
                if (e[i].t > ds.last) {
                    ds.last = e[i].t;
                }
            }
        }
        if (seen) {
            devs[(*ndevs)++] = ds;
        }
    }
    free(e);
    free(active);
}

/* ------------------------------------------------------------------- kinds */

typedef struct kind_sum {
    char cat[24];
    uint64_t count, total, bytes;
} kind_sum;

static kind_sum *kind_of(kind_sum *v, size_t *n, const char *cat)
{
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(v[i].cat, cat) == 0) {
            return &v[i];
        }
    }
    kind_sum *k = &v[(*n)++];
    memset(k, 0, sizeof *k);
    snprintf(k->cat, sizeof k->cat, "%s", cat);
    return k;
}

static double gbps(uint64_t bytes, uint64_t ns)
{
    return ns > 0 ? (double)bytes / (double)ns : 0.0;
}

/* ------------------------------------------------------------------ writers */

static void write_event_args(FILE *f, const diag_prof_rec *r)
{
    fprintf(f, ",\"args\":{\"kind\":");
    json_str(f, r->cat);
    fprintf(f, ",\"bytes\":%" PRIu64 ",\"step\":%" PRIu64 ",\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64, r->bytes,
            r->step, r->start_ns, r->end_ns);
    if (!is_host(r)) {
        fprintf(f, ",\"device\":%d,\"stream\":%d,\"task\":%" PRIu64, r->device, r->stream_id, r->id);
        if (r->rc != 0) {
            fprintf(f, ",\"error\":%d", r->rc);
        }
    } else {
        fprintf(f, ",\"thread\":%d", r->stream_id);
    }
    if (r->tag != NULL) {
        fprintf(f, ",\"tag\":");
        json_str(f, r->tag);
    }
    fputs("}", f);
}

static int write_trace(const char *path, const diag_prof_rec *recs, size_t n, const tracks *tr, const char *timing,
                       uint64_t first_step, uint64_t last_step)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return errno;
    }
    fprintf(f, "{\"traceEvents\":[\n");
    bool first = true;
#define SEP() (first ? (void)(first = false) : (void)fputs(",\n", f))
    /* metadata: the host process and its threads, each device and its streams */
    SEP();
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"host (pid %ld)\"}}",
            HOST_PID, (long)getpid());
    SEP();
    fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":0}}",
            HOST_PID);
    int32_t last_dev = -2;
    for (size_t i = 0; i < tr->n; i++) {
        const track *k = &tr->v[i];
        int pid = k->device < 0 ? HOST_PID : k->device + 1;
        if (k->device >= 0 && k->device != last_dev) {
            SEP();
            fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"NPU %d (%s)\"}}",
                    pid, k->device, core_config_get()->soc_name);
            SEP();
            fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
                    pid, pid);
            last_dev = k->device;
        }
        SEP();
        if (k->device < 0) {
            fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"host thread %d\"}}",
                    pid, k->stream, k->stream);
        } else {
            fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"stream %d%s\"}}",
                    pid, k->stream, k->stream, k->is_default ? " (default)" : "");
        }
        SEP();
        fprintf(f, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                pid, k->stream, k->stream);
    }
    for (size_t i = 0; i < n; i++) {
        const diag_prof_rec *r = &recs[i];
        int pid = is_host(r) ? HOST_PID : r->device + 1;
        SEP();
        fprintf(f, "{\"name\":");
        json_str(f, r->name);
        fprintf(f, ",\"cat\":");
        json_str(f, r->cat);
        if (r->instant) {
            fprintf(f, ",\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%d,\"ts\":", pid, r->stream_id);
            us(f, r->start_ns);
        } else {
            fprintf(f, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", pid, r->stream_id);
            us(f, r->start_ns);
            fprintf(f, ",\"dur\":");
            us(f, r->end_ns - r->start_ns);
        }
        write_event_args(f, r);
        fputs("}", f);
    }
#undef SEP
    fprintf(f, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"mock_libascendcl\",\"timing\":\"%s\","
               "\"soc\":",
            timing);
    json_str(f, core_config_get()->soc_name);
    fprintf(f, ",\"pid\":%ld,\"first_step\":%" PRIu64 ",\"last_step\":%" PRIu64 "}}\n", (long)getpid(), first_step,
            last_step);
    int err = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && err == 0) {
        err = errno;
    }
    return err;
}

static int close_file(FILE *f)
{
    int err = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && err == 0) {
        err = errno;
    }
    return err;
}

static int write_summaries(const char *dir, const diag_prof_rec *recs, size_t n, const tracks *tr,
                           const device_sum *devs, size_t ndevs, const char *timing, uint64_t first_step,
                           uint64_t last_step)
{
    kind_sum kinds[64];
    size_t nk = 0;
    uint64_t span_first = UINT64_MAX, span_last = 0;
    for (size_t i = 0; i < n; i++) {
        if (is_host(&recs[i])) {
            continue;
        }
        kind_sum *k = nk < 64 ? kind_of(kinds, &nk, recs[i].cat) : NULL;
        if (k != NULL) {
            k->count++;
            k->total += recs[i].end_ns - recs[i].start_ns;
            k->bytes += recs[i].bytes;
        }
        if (recs[i].start_ns < span_first) {
            span_first = recs[i].start_ns;
        }
        if (recs[i].end_ns > span_last) {
            span_last = recs[i].end_ns;
        }
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/kind_summary.csv", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return errno;
    }
    fprintf(f, "kind,count,total_us,mean_us,bytes,bandwidth_gbps\n");
    for (size_t i = 0; i < nk; i++) {
        const kind_sum *k = &kinds[i];
        fprintf(f, "%s,%" PRIu64 ",%.3f,%.3f,%" PRIu64 ",%.3f\n", k->cat, k->count, (double)k->total / 1e3,
                k->count ? (double)k->total / 1e3 / (double)k->count : 0.0, k->bytes, gbps(k->bytes, k->total));
    }
    int err = close_file(f);
    if (err != 0) {
        return err;
    }
    snprintf(path, sizeof path, "%s/stream_summary.csv", dir);
    f = fopen(path, "w");
    if (f == NULL) {
        return errno;
    }
    fprintf(f, "device,stream,default,tasks,busy_us,overlap_us,first_us,last_us,utilization\n");
    for (size_t i = 0; i < tr->n; i++) {
        const track *k = &tr->v[i];
        if (k->device < 0) {
            continue;
        }
        uint64_t first = k->first == UINT64_MAX ? 0 : k->first;
        uint64_t span = k->last > first ? k->last - first : 0;
        fprintf(f, "%d,%d,%d,%" PRIu64 ",%.3f,%.3f,%.3f,%.3f,%.4f\n", k->device, k->stream, k->is_default ? 1 : 0,
                k->tasks, (double)k->busy / 1e3, (double)k->overlap / 1e3, (double)first / 1e3, (double)k->last / 1e3,
                span ? (double)k->busy / (double)span : 0.0);
    }
    err = close_file(f);
    if (err != 0) {
        return err;
    }
    snprintf(path, sizeof path, "%s/summary.json", dir);
    f = fopen(path, "w");
    if (f == NULL) {
        return errno;
    }
    uint64_t sf = span_first == UINT64_MAX ? 0 : span_first;
    fprintf(f, "{\n  \"producer\": \"mock_libascendcl\",\n  \"timing\": \"%s\",\n  \"soc\": ", timing);
    json_str(f, core_config_get()->soc_name);
    fprintf(f, ",\n  \"first_step\": %" PRIu64 ",\n  \"last_step\": %" PRIu64 ",\n  \"records\": %zu,\n", first_step,
            last_step, n);
    fprintf(f, "  \"span_us\": %.3f,\n  \"kinds\": [", span_last > sf ? (double)(span_last - sf) / 1e3 : 0.0);
    for (size_t i = 0; i < nk; i++) {
        const kind_sum *k = &kinds[i];
        fprintf(f, "%s\n    {\"kind\": \"%s\", \"count\": %" PRIu64 ", \"total_us\": %.3f, \"mean_us\": %.3f, "
                   "\"bytes\": %" PRIu64 ", \"bandwidth_gbps\": %.3f}",
                i ? "," : "", k->cat, k->count, (double)k->total / 1e3,
                k->count ? (double)k->total / 1e3 / (double)k->count : 0.0, k->bytes, gbps(k->bytes, k->total));
    }
    fprintf(f, "\n  ],\n  \"streams\": [");
    bool firstrow = true;
    for (size_t i = 0; i < tr->n; i++) {
        const track *k = &tr->v[i];
        if (k->device < 0) {
            continue;
        }
        uint64_t first = k->first == UINT64_MAX ? 0 : k->first;
        fprintf(f, "%s\n    {\"device\": %d, \"stream\": %d, \"default\": %s, \"tasks\": %" PRIu64 ", \"busy_us\": %.3f, "
                   "\"overlap_us\": %.3f, \"first_us\": %.3f, \"last_us\": %.3f}",
                firstrow ? "" : ",", k->device, k->stream, k->is_default ? "true" : "false", k->tasks,
                (double)k->busy / 1e3, (double)k->overlap / 1e3, (double)first / 1e3, (double)k->last / 1e3);
        firstrow = false;
    }
    fprintf(f, "\n  ],\n  \"devices\": [");
    for (size_t i = 0; i < ndevs; i++) {
        const device_sum *d = &devs[i];
        uint64_t first = d->first == UINT64_MAX ? 0 : d->first;
        fprintf(f, "%s\n    {\"device\": %d, \"busy_us\": %.3f, \"overlap_us\": %.3f, \"first_us\": %.3f, "
                   "\"last_us\": %.3f}",
                i ? "," : "", d->device, (double)d->busy / 1e3, (double)d->overlap / 1e3, (double)first / 1e3,
                (double)d->last / 1e3);
    }
    fprintf(f, "\n  ]\n}\n");
    return close_file(f);
}

int diag_trace_write(const char *dir, const diag_prof_rec *recs, size_t n, const char *timing, uint64_t first_step,
                     uint64_t last_step)
{
    int err = diag_make_dirs(dir);
    if (err != 0) {
        return err;
    }
    tracks tr = {0};
    for (size_t i = 0; i < n; i++) {
        track *k = track_of(&tr, recs[i].device < 0 ? -1 : recs[i].device, recs[i].stream_id);
        if (k == NULL) {
            free(tr.v);
            return ENOMEM;
        }
        if (recs[i].stream_default) {
            k->is_default = true;
        }
        if (!is_host(&recs[i])) {
            k->tasks++;
            if (recs[i].start_ns < k->first) {
                k->first = recs[i].start_ns;
            }
            if (recs[i].end_ns > k->last) {
                k->last = recs[i].end_ns;
            }
        }
    }
    /* device tracks for records that are all instants still exist (created above) */
    if (tr.n > 0) {
        qsort(tr.v, tr.n, sizeof *tr.v, cmp_track);
    }
    device_sum devs[MOCK_MAX_DEVICES];
    size_t ndevs = 0;
    sweep(recs, n, &tr, devs, &ndevs);
    char path[4300];
    snprintf(path, sizeof path, "%s/trace.json", dir);
    err = write_trace(path, recs, n, &tr, timing, first_step, last_step);
    if (err == 0) {
        err = write_summaries(dir, recs, n, &tr, devs, ndevs, timing, first_step, last_step);
    }
    free(tr.v);
    return err;
}
