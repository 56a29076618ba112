/*
 * ipc/ipc_private.h - glue between the files of src/ipc/; no file outside src/ipc/
 * includes it. Every function declared here starts with ipc_.
 *
 * How sharing between processes is simulated (README "IPC"): the objects themselves
 * already live in shareable memory - device heaps and VMM physical memory are memfds
 * (src/mem/), IPC events and notifies are words in memfd-backed arenas (core/shm.c).
 * Exporting registers the object in this process's export table under a new id and
 * starts the process's broker (broker.c): a thread serving an abstract Unix socket
 * named after the pid. A key or handle names (pid, nonce, id). An importer connects
 * (client.c), asks for the id, and the broker checks the export (alive, pid whitelist
 * of the peer's SO_PEERCRED pid, same user), takes a reference on the object for that
 * connection and passes the memfd with SCM_RIGHTS; the importer maps it (zero-copy).
 * Closing or freeing on the importer side sends a release; a connection that ends (the
 * importer exited) releases everything it held.
 */
#ifndef MOCK_IPC_PRIVATE_H
#define MOCK_IPC_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "mem/mem.h"
#include "ipc/ipc.h"

/* Key buffers: aclrtIpcMemGetExportKey's `len` must be 65, aclrtNotifyGetExportKey's at
 * least 65 (acl_next_semantics.md §3.1, §3.4): 64 characters and the NUL. */
#define IPC_KEY_LEN 65

typedef enum ipc_kind { IPC_KIND_MEM = 1, IPC_KIND_VMM = 2, IPC_KIND_EVENT = 3, IPC_KIND_NOTIFY = 4 } ipc_kind;

/* Names an export: the exporting process and its id there. */
typedef struct ipc_addr {
    int32_t pid;
    uint64_t nonce; /* random per process (a recycled pid is another process); 0 = not checked */
    uint64_t id;
} ipc_addr;

/* What the broker answers to an acquire. */
typedef struct ipc_grant {
    uint64_t offset;            /* of the object in the passed memfd */
    uint64_t length;            /* bytes (MEM, VMM) */
    uint32_t page_size;         /* MEM */
    int32_t device;             /* the object's device in the exporter (user id) */
    int32_t phys_device;        /* ... and its physical id */
    aclrtPhysicalMemProp prop;  /* VMM */
} ipc_grant;

/* The wire format between a client and a broker (SOCK_SEQPACKET, one message each
 * way; the reply to an acquire carries the memfd as SCM_RIGHTS). Both ends are the same
 * library. */
#define IPC_WIRE_MAGIC 0x4d434941u /* "AICM" */
enum { IPC_OP_ACQUIRE = 1, IPC_OP_RELEASE = 2 };
typedef struct ipc_request {
    uint32_t magic;
    uint32_t op;
    uint32_t kind;
    uint32_t v2;
    uint64_t nonce; /* the exporter's nonce as the key gives it (0: not checked) */
    uint64_t id;    /* ACQUIRE: the export */
    uint64_t ref;   /* RELEASE: what the ACQUIRE granted */
} ipc_request;
typedef struct ipc_reply {
    uint32_t magic;
    int32_t status; /* aclError */
    uint64_t ref;
    ipc_grant grant;
    char msg[200];  /* why, when status != 0 */
} ipc_reply;

/* ------------------------------------------------------------ broker.c */

/* One exported object (entries live in the export table, under its lock). */
typedef struct ipc_export {
    ipc_kind kind;
    uint64_t id;             /* unique among this process's exports of its kind */
    char key[IPC_KEY_LEN];   /* MEM and NOTIFY: the key text ("" for the others) */
    bool check_pid;          /* the pid whitelist applies (no DISABLE_PID_VALIDATION flag) */
    int32_t *pids;           /* the whitelist (SetImportPid, ...InterServer) */
    size_t npids, cappids;
    bool v2;                 /* VMM: exported with the V2 call (V1 and V2 are not mixed) */
    uint64_t attr_link;      /* MEM: aclrtIpcMemSetAttr ACCESS_LINK (kept, no effect) */
    void *handle;            /* VMM, EVENT, NOTIFY: the handle in this process */
    uint32_t gen;            /* ... and its generation (a recycled address is not it) */
    mem_ipc_range range;     /* MEM: the pinned range */
    struct ipc_export *next;
} ipc_export;

/* This process's pid and nonce. */
MOCK_HIDDEN void ipc_self(int32_t *pid, uint64_t *nonce);
/* Starts the broker thread of this process if it does not run (idempotent; records
 * ACL_ERROR_RT_IPC_ERROR under `fn` when the socket or thread cannot be made). */
MOCK_HIDDEN aclError ipc_broker_start(const char *fn);
/* Adds `e` (heap, filled in except id/key/next) to the export table, which owns it from
 * then on, with a new id (returned) and, when key_kind is 'm' or 'n', its key (also
 * copied to key_out, IPC_KEY_LEN bytes). */
MOCK_HIDDEN uint64_t ipc_export_add(ipc_export *e, char key_kind, char *key_out);
/* Runs fn(e, arg) under the table lock on the first export of `kind` for which
 * match(e, arg) is true; returns whether one matched. fn may change the entry; it must
 * not call other subsystems or record errors (decide, report after). */
MOCK_HIDDEN bool ipc_export_with(ipc_kind kind, bool (*match)(const ipc_export *e, const void *arg),
                                 void (*fn)(ipc_export *e, void *arg), void *arg);
/* Removes and returns the first export of `kind` matching (NULL if none); the caller
 * frees it with ipc_export_free (which drops a MEM pin). */
MOCK_HIDDEN ipc_export *ipc_export_take(ipc_kind kind, bool (*match)(const ipc_export *e, const void *arg),
                                        const void *arg);
MOCK_HIDDEN void ipc_export_free(ipc_export *e, bool keep_pages);
/* Appends pids to a whitelist (table lock held by the caller through ipc_export_with).
 * false when out of memory. */
MOCK_HIDDEN bool ipc_export_add_pids(ipc_export *e, const int32_t *pids, size_t n);
/* aclFinalize: stops the broker, releases what its connections held and every export. */
MOCK_HIDDEN void ipc_broker_finalize(void);

/* ------------------------------------------------------------ client.c */

/* Asks the broker of a->pid for export (kind, a->id) of its process. On success *fd
 * is the object's memfd (the caller owns it), *grant describes it and *token is the
 * reference the exporter now holds for this process (ipc_client_release). `v2`: VMM
 * export made with the V2 call. Records errors under `fn`: 507022 (no such process or
 * export, exporter closed/freed/destroyed it), 207006 (pid not whitelisted), 107000
 * (V1/V2 mixed), 207000 (the export is this process's own). */
MOCK_HIDDEN aclError ipc_client_acquire(const char *fn, const ipc_addr *a, ipc_kind kind, bool v2, int *fd,
                                        ipc_grant *grant, void **token);
/* Gives the reference back (tells the exporter) and frees the token; never fails (an
 * exporter that is gone has nothing to release). Signature of a release callback. */
MOCK_HIDDEN void ipc_client_release(void *token);
/* aclFinalize: shuts every connection down (tokens still held release locally). */
MOCK_HIDDEN void ipc_client_finalize(void);
/* An opened shared word (IPC event, notify): its mapping in this process and the
 * reference the exporter holds for this process. */
typedef struct ipc_word_ref {
    void *word;
    void *token;
} ipc_word_ref;
/* Acquires export (kind, a->id) of process a->pid and maps its shared word into *out
 * (malloc'd; ipc_word_close). Records errors under `fn`: those of ipc_client_acquire,
 * or 507000 "cannot map the <what>" (nothing is kept then: no fd, mapping, reference). */
MOCK_HIDDEN aclError ipc_word_open(const char *fn, const ipc_addr *a, ipc_kind kind, const char *what,
                                   ipc_word_ref **out);
/* Unmaps the word, gives the reference back, frees `ref` (an ipc_word_ref); never
 * fails. Signature of a release callback. */
MOCK_HIDDEN void ipc_word_close(void *ref);

/* ----------------------------------------------------------- share_mem.c (keys) */

/* Keys: "acl-ipc-<m|n>-<pid>-<nonce 16 hex>-<id 16 hex>" (m = memory, n = notify).
 * ipc_key_parse: false when `key` is not such a key of kind `k`. */
MOCK_HIDDEN void ipc_key_format(char *buf, char k, const ipc_addr *a);
MOCK_HIDDEN bool ipc_key_parse(const char *key, char k, ipc_addr *a);
/* True when `a` names this process (an import here is refused, 207000). */
MOCK_HIDDEN bool ipc_addr_is_self(const ipc_addr *a);
/* Validates a pid array of SetImportPid & co. (100000 for NULL, num 0, a pid <= 0). */
MOCK_HIDDEN aclError ipc_check_pids(const char *fn, const int32_t *pid, size_t num, const char *what);
/* The ...InterServer whitelists (A3 only, §3.1/§3.4): checks the array and flattens its
 * pids into *out (malloc'd, *n entries). Every sdid is this server in the mock. */
MOCK_HIDDEN aclError ipc_flatten_server_pids(const char *fn, const aclrtServerPid *arr, size_t num, int32_t **out,
                                             size_t *n);
/* aclFinalize: forgets the memory imported by key (mapping and reference go). */
MOCK_HIDDEN void ipc_mem_finalize(void);

#endif /* MOCK_IPC_PRIVATE_H */
