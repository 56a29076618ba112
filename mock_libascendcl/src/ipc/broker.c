/*
 * broker.c - the exporting side of IPC: this process's export table and its broker, a
 * thread that serves the abstract Unix socket "\0aclmock-ipc-<pid>" (SOCK_SEQPACKET)
 * once something was exported (README "IPC").
 *
 * The broker never waits for another process (it only answers), so a client holding
 * its connection lock across an exchange cannot deadlock with it. It accepts peers of
 * the same user only (SO_PEERCRED), remembers each connection's pid for the whitelists,
 * and keeps, per connection, the references it granted: a release gives one back, a
 * connection that ends (the importer exited or finalized) gives back all of its own.
 * The references keep the exported objects alive in this process: a device allocation's
 * pages, a VMM handle, an event's or notify's shared word.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "notify/notify.h"
#include "ipc/ipc.h"
#include "ipc/ipc_private.h"

/* ------------------------------------------------------------ identity */

static pthread_once_t g_nonce_once = PTHREAD_ONCE_INIT;
static uint64_t g_nonce;

static void nonce_init(void)
{
    uint64_t n = 0;
    if (getrandom(&n, sizeof n, 0) != (ssize_t)sizeof n || n == 0) {
        n = core_now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
    }
    g_nonce = n | 1u; /* never 0 ("not checked") */
}

void ipc_self(int32_t *pid, uint64_t *nonce)
{
    pthread_once(&g_nonce_once, nonce_init);
    *pid = (int32_t)getpid();
    *nonce = g_nonce;
}

/* -------------------------------------------------------------- exports */

static mock_mutex g_table_mu = MOCK_MUTEX_INIT(MOCK_LOCK_IPC_TABLE);
static ipc_export *g_exports;   /* under g_table_mu */
static size_t g_nexports;
static size_t g_sweep_at = 64;  /* sweep dead handle exports when the table grows past this */
static uint64_t g_next_id;      /* 0 until the first export: then a random start */

static uint64_t next_id_locked(ipc_kind kind)
{
    if (g_next_id == 0) {
        int32_t pid;
        uint64_t nonce;
        ipc_self(&pid, &nonce);
        g_next_id = (nonce >> 16) | 1u;
    }
    uint64_t id = g_next_id++;
    if (kind == IPC_KIND_VMM) {
        /* a VMM shareable handle is one uint64: (pid << 32) | id, so 32 bits (never 0) */
        id &= 0xffffffffu;
        if (id == 0) {
            id = g_next_id++ & 0xffffffffu;
        }
    }
    return id;
}

static bool alive(const ipc_export *e);
static bool match_id(const ipc_export *e, const void *arg);

/* Removes the handle exports (events, notifies, VMM handles) whose object is gone:
 * amortized, when the table doubled since the last sweep. Their liveness is asked of
 * their subsystems without the table lock (those take their own, earlier locks). */
static void sweep(void)
{
    core_mutex_lock(&g_table_mu);
    ipc_export *snap = NULL;
    size_t n = 0;
    if (g_nexports >= g_sweep_at) {
        snap = calloc(g_nexports, sizeof(*snap));
        for (ipc_export *e = g_exports; e != NULL && snap != NULL; e = e->next) {
            if (e->kind != IPC_KIND_MEM) {
                snap[n] = *e;
                snap[n].pids = NULL; /* a copy: only kind, id, handle, gen are read */
                n++;
            }
        }
        g_sweep_at = 2 * g_nexports + 64;
    }
    core_mutex_unlock(&g_table_mu);
    for (size_t i = 0; i < n; i++) {
        if (!alive(&snap[i])) {
            ipc_export *gone = ipc_export_take(snap[i].kind, match_id, &snap[i].id);
            if (gone != NULL) {
                ipc_export_free(gone, false);
            }
        }
    }
    free(snap);
}

uint64_t ipc_export_add(ipc_export *e, char key_kind, char *key_out)
{
    core_mutex_lock(&g_table_mu);
    uint64_t id = e->id = next_id_locked(e->kind);
    if (key_kind != 0) {
        ipc_addr a;
        ipc_self(&a.pid, &a.nonce);
        a.id = e->id;
        ipc_key_format(e->key, key_kind, &a);
        memcpy(key_out, e->key, IPC_KEY_LEN);
    }
    e->next = g_exports;
    g_exports = e;
    g_nexports++;
    core_mutex_unlock(&g_table_mu);
    sweep();
    return id;
}

bool ipc_export_with(ipc_kind kind, bool (*match)(const ipc_export *e, const void *arg),
                     void (*fn)(ipc_export *e, void *arg), void *arg)
{
    core_mutex_lock(&g_table_mu);
    ipc_export *e = g_exports;
    while (e != NULL && !(e->kind == kind && match(e, arg))) {
        e = e->next;
    }
    if (e != NULL && fn != NULL) {
        fn(e, arg);
    }
    core_mutex_unlock(&g_table_mu);
    return e != NULL;
}

ipc_export *ipc_export_take(ipc_kind kind, bool (*match)(const ipc_export *e, const void *arg), const void *arg)
{
    core_mutex_lock(&g_table_mu);
    ipc_export **pp = &g_exports;
    while (*pp != NULL && !((*pp)->kind == kind && match(*pp, arg))) {
        pp = &(*pp)->next;
    }
    ipc_export *e = *pp;
    if (e != NULL) {
        *pp = e->next;
        g_nexports--;
    }
    core_mutex_unlock(&g_table_mu);
    return e;
}

void ipc_export_free(ipc_export *e, bool keep_pages)
{
    if (e->kind == IPC_KIND_MEM && e->range.pin != NULL) {
        mem_ipc_unpin(e->range.pin, keep_pages);
    }
    free(e->pids);
    free(e);
}

bool ipc_export_add_pids(ipc_export *e, const int32_t *pids, size_t n)
{
    if (e->npids + n > e->cappids) {
        size_t cap = e->cappids ? e->cappids : 8;
        while (cap < e->npids + n) {
            cap *= 2;
        }
        int32_t *p = realloc(e->pids, cap * sizeof(*p));
        if (p == NULL) {
            return false;
        }
        e->pids = p;
        e->cappids = cap;
    }
    memcpy(e->pids + e->npids, pids, n * sizeof(*pids));
    e->npids += n;
    return true;
}

static bool pid_allowed(const ipc_export *e, int32_t pid)
{
    if (!e->check_pid) {
        return true;
    }
    for (size_t i = 0; i < e->npids; i++) {
        if (e->pids[i] == pid) {
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------- granting the objects */

/* Takes the reference of one acquire on the object of a (copied) export entry. */
static aclError grant_object(const ipc_export *e, void **obj, int *fd, ipc_grant *g)
{
    switch (e->kind) {
    case IPC_KIND_EVENT:
        return stream_event_ipc_acquire(e->handle, e->gen, obj, fd, &g->offset);
    case IPC_KIND_NOTIFY:
        return notify_ipc_acquire(e->handle, e->gen, obj, fd, &g->offset, &g->device);
    case IPC_KIND_VMM: {
        mem_vmm_share_info info;
        aclError rc = mem_vmm_share_acquire(e->handle, e->gen, obj, fd, &info);
        if (rc == ACL_SUCCESS) {
            g->length = info.size;
            g->prop = info.prop;
            g->device = info.device;
        }
        return rc;
    }
    case IPC_KIND_MEM:
        break;
    }
    return ACL_ERROR_RT_IPC_ERROR;
}

static void put_object(ipc_kind kind, void *obj, bool keep_pages)
{
    switch (kind) {
    case IPC_KIND_MEM:
        mem_ipc_unpin(obj, keep_pages);
        break;
    case IPC_KIND_EVENT:
        stream_event_ipc_put(obj);
        break;
    case IPC_KIND_NOTIFY:
        notify_ipc_put(obj);
        break;
    case IPC_KIND_VMM:
        mem_vmm_share_put(obj);
        break;
    }
}

/* A handle export whose object is still there (acquire + put). */
static bool alive(const ipc_export *e)
{
    void *obj = NULL;
    int fd = -1;
    ipc_grant g;
    memset(&g, 0, sizeof g);
    if (grant_object(e, &obj, &fd, &g) != ACL_SUCCESS) {
        return false;
    }
    put_object(e->kind, obj, false);
    return true;
}

/* -------------------------------------------------------------- broker */

typedef struct bref {
    uint64_t ref;
    ipc_kind kind;
    void *obj;
    struct bref *next;
} bref;

typedef struct bconn {
    int fd;
    int32_t pid;
    bref *refs;
} bconn;

/* The broker's state: set up and torn down under g_table_mu; while the thread runs,
 * only the thread touches the connections. */
static bool g_running;
static int g_listen_fd = -1;
static int g_wake_fd = -1;
static pthread_t g_thread;
static bconn *g_conns;
static size_t g_nconns, g_capconns;
static uint64_t g_next_ref = 1;

static void set_msg(ipc_reply *r, aclError status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_msg(ipc_reply *r, aclError status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    r->status = status;
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

static const char *kind_name(ipc_kind k)
{
    switch (k) {
    case IPC_KIND_MEM:
        return "memory";
    case IPC_KIND_VMM:
        return "VMM physical memory";
    case IPC_KIND_EVENT:
        return "event";
    case IPC_KIND_NOTIFY:
        return "notify";
    }
    return "object";
}

static bool match_id(const ipc_export *e, const void *arg)
{
    return e->id == *(const uint64_t *)arg;
}

/* Handles an ACQUIRE: on success *obj and *fd are what to keep and send. */
static void do_acquire(const bconn *c, const ipc_request *q, ipc_reply *r, void **obj, int *fd)
{
    ipc_kind kind = (ipc_kind)q->kind;
    ipc_export snap;
    enum { FOUND, MISSING, MIXED, NOT_ALLOWED, FREED } st = MISSING;
    core_mutex_lock(&g_table_mu);
    ipc_export *e = g_exports;
    while (e != NULL && !(e->kind == kind && e->id == q->id)) {
        e = e->next;
    }
    if (e != NULL) {
        st = FOUND;
        snap = *e;
        if (kind == IPC_KIND_VMM && e->v2 != (q->v2 != 0)) {
            st = MIXED;
        } else if (!pid_allowed(e, c->pid)) {
            st = NOT_ALLOWED;
        } else if (kind == IPC_KIND_MEM && mem_ipc_pin_freed(e->range.pin)) {
            st = FREED;
        } else if (kind == IPC_KIND_MEM) {
            *obj = mem_ipc_pin_again(e->range.pin); /* an atomic reference: no lock */
        }
    }
    core_mutex_unlock(&g_table_mu);
    switch (st) {
    case MISSING:
        set_msg(r, ACL_ERROR_RT_IPC_ERROR,
                "process %d exports no %s with this key/handle (never exported, or the exporter closed it)",
                (int)getpid(), kind_name(kind));
        return;
    case MIXED:
        set_msg(r, ACL_ERROR_RT_PARAM_INVALID, "the shareable handle was exported with the V%d call: use the V%d calls",
                snap.v2 ? 2 : 1, snap.v2 ? 2 : 1);
        return;
    case NOT_ALLOWED:
        set_msg(r, ACL_ERROR_RT_NO_PERMISSION,
                "pid %d is not in the exporter's whitelist (the exporter calls the SetImportPid function with the "
                "pid from aclrtDeviceGetBareTgid, or exports with the DISABLE_PID_VALIDATION flag)",
                (int)c->pid);
        return;
    case FREED:
        set_msg(r, ACL_ERROR_RT_IPC_ERROR, "the exported memory was freed by its owner (process %d)", (int)getpid());
        return;
    case FOUND:
        break;
    }
    if (kind == IPC_KIND_MEM) {
        *fd = snap.range.fd;
        r->grant.offset = snap.range.offset;
        r->grant.length = snap.range.length;
        r->grant.page_size = snap.range.page_size;
        r->grant.device = snap.range.device;
    } else if (grant_object(&snap, obj, fd, &r->grant) != ACL_SUCCESS) {
        set_msg(r, ACL_ERROR_RT_IPC_ERROR, "the exported %s no longer exists in process %d (destroyed or freed)",
                kind_name(kind), (int)getpid());
        ipc_export *gone = ipc_export_take(kind, match_id, &q->id);
        if (gone != NULL) {
            ipc_export_free(gone, false);
        }
        return;
    }
    int32_t dev = r->grant.device;
    r->grant.phys_device = dev >= 0 && (uint32_t)dev < core_config_get()->visible_count
                               ? core_config_get()->visible_map[dev]
                               : -1;
    r->status = ACL_SUCCESS;
}

static bool send_reply(int fd, const ipc_reply *r, int pass_fd)
{
    struct iovec iov = {(void *)r, sizeof *r};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    if (pass_fd >= 0) {
        memset(&u, 0, sizeof u);
        m.msg_control = u.buf;
        m.msg_controllen = sizeof u.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
    }
    /* never block on a client that does not read: it loses its connection instead */
    return sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof *r;
}

/* Gives back every reference of a connection and closes it. */
static void conn_drop(bconn *c, bool keep_pages)
{
    while (c->refs != NULL) {
        bref *b = c->refs;
        c->refs = b->next;
        put_object(b->kind, b->obj, keep_pages);
        free(b);
    }
    close(c->fd);
    c->fd = -1;
}

/* One request of connection c; false when the connection must end. */
static bool serve(bconn *c)
{
    ipc_request q;
    ssize_t n = recv(c->fd, &q, sizeof q, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return true;
    }
    if (n != (ssize_t)sizeof q || q.magic != IPC_WIRE_MAGIC) {
        return false; /* closed by the peer, or not one of ours */
    }
    ipc_reply r;
    memset(&r, 0, sizeof r);
    r.magic = IPC_WIRE_MAGIC;
    int32_t self_pid;
    uint64_t nonce;
    ipc_self(&self_pid, &nonce);
    if (q.op == IPC_OP_RELEASE) {
        for (bref **pp = &c->refs; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->ref == q.ref) {
                bref *b = *pp;
                *pp = b->next;
                put_object(b->kind, b->obj, false);
                free(b);
                break;
            }
        }
        return send_reply(c->fd, &r, -1);
    }
    void *obj = NULL;
    int fd = -1;
    if (q.op != IPC_OP_ACQUIRE) {
        set_msg(&r, ACL_ERROR_RT_IPC_ERROR, "unknown request %u", q.op);
    } else if (q.nonce != 0 && q.nonce != nonce) {
        set_msg(&r, ACL_ERROR_RT_IPC_ERROR,
                "process %d is not the process that exported this key/handle (that process has exited)",
                (int)self_pid);
    } else {
        do_acquire(c, &q, &r, &obj, &fd);
    }
    bref *b = NULL;
    if (r.status == ACL_SUCCESS) {
        b = malloc(sizeof(*b));
        if (b == NULL) {
            put_object((ipc_kind)q.kind, obj, false);
            set_msg(&r, ACL_ERROR_RT_MEMORY_ALLOCATION, "the exporter is out of host memory");
        } else {
            b->ref = g_next_ref++;
            b->kind = (ipc_kind)q.kind;
            b->obj = obj;
            b->next = c->refs;
            c->refs = b;
            r.ref = b->ref;
        }
    }
    if (!send_reply(c->fd, &r, r.status == ACL_SUCCESS ? fd : -1)) {
        return false; /* the reference (if any) goes with the connection */
    }
    return true;
}

static void accept_one(void)
{
    int fd = accept4(g_listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        return;
    }
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != getuid()) {
        close(fd); /* only processes of the same user share memory with us */
        return;
    }
    if (g_nconns == g_capconns) {
        size_t cap = g_capconns ? g_capconns * 2 : 16;
        bconn *n = realloc(g_conns, cap * sizeof(*n));
        if (n == NULL) {
            close(fd);
            return;
        }
        g_conns = n;
        g_capconns = cap;
    }
    g_conns[g_nconns].fd = fd;
    g_conns[g_nconns].pid = (int32_t)cr.pid;
    g_conns[g_nconns].refs = NULL;
    g_nconns++;
}

static void *broker_main(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals go to the application's threads */
    struct pollfd *pfd = NULL;
    size_t cap = 0;
    for (;;) {
        size_t n = g_nconns + 2;
        if (n > cap) {
            struct pollfd *p = realloc(pfd, n * sizeof(*p));
            if (p == NULL) {
                break;
            }
            pfd = p;
            cap = n;
        }
        pfd[0] = (struct pollfd){g_wake_fd, POLLIN, 0};
        pfd[1] = (struct pollfd){g_listen_fd, POLLIN, 0};
        for (size_t i = 0; i < g_nconns; i++) {
            pfd[i + 2] = (struct pollfd){g_conns[i].fd, POLLIN, 0};
        }
        if (poll(pfd, n, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (pfd[0].revents != 0) {
            break; /* ipc_broker_finalize */
        }
        size_t before = g_nconns;
        for (size_t i = 0; i < before; i++) {
            if (pfd[i + 2].revents != 0 && !serve(&g_conns[i])) {
                conn_drop(&g_conns[i], false);
            }
        }
        size_t k = 0; /* compact the closed connections away */
        for (size_t i = 0; i < g_nconns; i++) {
            if (g_conns[i].fd >= 0) {
                g_conns[k++] = g_conns[i];
            }
        }
        g_nconns = k;
        if (pfd[1].revents != 0) {
            accept_one();
        }
    }
    free(pfd);
    return NULL;
}

aclError ipc_broker_start(const char *fn)
{
    char why[160] = "";
    core_mutex_lock(&g_table_mu);
    if (!g_running) {
        int32_t pid;
        uint64_t nonce;
        ipc_self(&pid, &nonce);
        struct sockaddr_un a;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        int len = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "aclmock-ipc-%d", (int)pid);
        socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
        int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        int wfd = eventfd(0, EFD_CLOEXEC);
        if (lfd < 0 || wfd < 0 || bind(lfd, (struct sockaddr *)&a, alen) != 0 || listen(lfd, 64) != 0) {
            snprintf(why, sizeof why, "cannot serve the exports of process %d: %s", (int)pid, strerror(errno));
        } else {
            g_listen_fd = lfd;
            g_wake_fd = wfd;
            if (pthread_create(&g_thread, NULL, broker_main, NULL) != 0) {
                snprintf(why, sizeof why, "cannot start the IPC broker thread");
            } else {
                g_running = true;
            }
        }
        if (!g_running) {
            if (lfd >= 0) {
                close(lfd);
            }
            if (wfd >= 0) {
                close(wfd);
            }
            g_listen_fd = g_wake_fd = -1;
        }
    }
    bool ok = g_running;
    core_mutex_unlock(&g_table_mu);
    if (!ok) {
        return core_error(fn, ACL_ERROR_RT_IPC_ERROR, "%s", why);
    }
    return ACL_SUCCESS;
}

void ipc_broker_finalize(void)
{
    core_mutex_lock(&g_table_mu);
    bool running = g_running;
    g_running = false;
    ipc_export *all = g_exports;
    g_exports = NULL;
    g_nexports = 0;
    g_sweep_at = 64;
    core_mutex_unlock(&g_table_mu);
    if (running) {
        uint64_t one = 1;
        if (write(g_wake_fd, &one, sizeof one) != (ssize_t)sizeof one) {
            /* cannot happen with an eventfd; the join below would then hang: close it */
            close(g_listen_fd);
        }
        pthread_join(g_thread, NULL);
        close(g_listen_fd);
        close(g_wake_fd);
        g_listen_fd = g_wake_fd = -1;
        /* The importers still connected keep their mappings: the pages stay theirs. */
        for (size_t i = 0; i < g_nconns; i++) {
            conn_drop(&g_conns[i], true);
        }
        free(g_conns);
        g_conns = NULL;
        g_nconns = g_capconns = 0;
    }
    while (all != NULL) {
        ipc_export *n = all->next;
        ipc_export_free(all, running);
        all = n;
    }
}
