/*
 * client.c - the importing side of IPC: connections to other processes' brokers
 * (broker.c), one per exporting process, shared by every import from it and closed
 * when the last reference obtained through it is given back. An exchange is one
 * request and one reply under the connection's lock (a broker answers at once and
 * never waits for us); the reply to an acquire carries the object's memfd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/core.h"
#include "ipc/ipc.h"
#include "ipc/ipc_private.h"

#define EXCHANGE_TIMEOUT_S 30 /* a broker that does not answer in this time is gone */

typedef struct ipc_conn {
    mock_mutex mu; /* one exchange at a time; guards fd */
    int fd;        /* -1 once broken or shut down */
    int32_t pid;
    uint64_t nonce;
    int users;     /* tokens and acquires in progress, under g_clients_mu */
    bool shut;     /* aclFinalize closed it: not used for new imports (under g_clients_mu) */
    struct ipc_conn *next;
} ipc_conn;

typedef struct ipc_token {
    ipc_conn *conn;
    uint64_t ref;
} ipc_token;

static mock_mutex g_clients_mu = MOCK_MUTEX_INIT(MOCK_LOCK_IPC_CLIENTS);
static ipc_conn *g_conns; /* under g_clients_mu */

static int dial(int32_t pid)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int len = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "aclmock-ipc-%d", (int)pid);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    struct timeval tv = {EXCHANGE_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, alen) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* The connection to (pid, nonce), with a user reference; NULL and errno when the
 * process serves no broker. */
static ipc_conn *conn_get(int32_t pid, uint64_t nonce)
{
    core_mutex_lock(&g_clients_mu);
    ipc_conn *c = g_conns;
    while (c != NULL && !(c->pid == pid && c->nonce == nonce && !c->shut)) {
        c = c->next;
    }
    if (c != NULL) {
        c->users++;
    }
    core_mutex_unlock(&g_clients_mu);
    if (c != NULL) {
        return c;
    }
    int fd = dial(pid);
    if (fd < 0) {
        return NULL;
    }
    ipc_conn *n = calloc(1, sizeof(*n));
    if (n == NULL) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    core_mutex_init(&n->mu, MOCK_LOCK_IPC_CONNECTION);
    n->fd = fd;
    n->pid = pid;
    n->nonce = nonce;
    n->users = 1;
    core_mutex_lock(&g_clients_mu);
    n->next = g_conns;
    g_conns = n;
    core_mutex_unlock(&g_clients_mu);
    return n;
}

static void conn_put(ipc_conn *c)
{
    bool last = false;
    core_mutex_lock(&g_clients_mu);
    if (--c->users == 0) {
        last = true;
        for (ipc_conn **pp = &g_conns; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == c) {
                *pp = c->next;
                break;
            }
        }
    }
    core_mutex_unlock(&g_clients_mu);
    if (last) {
        if (c->fd >= 0) {
            close(c->fd); /* the broker sees the end: nothing is left to release */
        }
        core_mutex_destroy(&c->mu);
        free(c);
    }
}

/* One request and its reply (and a passed fd, -1 if none). false when the connection
 * broke (it is then unusable). */
static bool exchange(ipc_conn *c, const ipc_request *q, ipc_reply *r, int *fd)
{
    *fd = -1;
    bool ok = false;
    core_mutex_lock(&c->mu);
    if (c->fd >= 0 && send(c->fd, q, sizeof *q, MSG_NOSIGNAL) == (ssize_t)sizeof *q) {
        struct iovec iov = {r, sizeof *r};
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } u;
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = u.buf;
        m.msg_controllen = sizeof u.buf;
        ssize_t n;
        do {
            n = recvmsg(c->fd, &m, MSG_CMSG_CLOEXEC);
        } while (n < 0 && errno == EINTR);
        for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; cm != NULL; cm = CMSG_NXTHDR(&m, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                memcpy(fd, CMSG_DATA(cm), sizeof(int));
            }
        }
        ok = n == (ssize_t)sizeof *r && r->magic == IPC_WIRE_MAGIC;
    }
    if (!ok && c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    core_mutex_unlock(&c->mu);
    if (!ok && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    return ok;
}

aclError ipc_client_acquire(const char *fn, const ipc_addr *a, ipc_kind kind, bool v2, int *fd, ipc_grant *grant,
                            void **token)
{
    if (ipc_addr_is_self(a)) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "the key/handle was exported by this process: import it in another process");
    }
    ipc_token *t = malloc(sizeof(*t));
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    ipc_conn *c = conn_get(a->pid, a->nonce);
    if (c == NULL) {
        int e = errno;
        free(t);
        return core_error(fn, ACL_ERROR_RT_IPC_ERROR,
                          "the exporting process %d is not running or exports nothing (%s)", (int)a->pid, strerror(e));
    }
    ipc_request q;
    memset(&q, 0, sizeof q);
    q.magic = IPC_WIRE_MAGIC;
    q.op = IPC_OP_ACQUIRE;
    q.kind = (uint32_t)kind;
    q.v2 = v2 ? 1u : 0u;
    q.nonce = a->nonce;
    q.id = a->id;
    ipc_reply r;
    memset(&r, 0, sizeof r);
    if (!exchange(c, &q, &r, fd)) {
        conn_put(c);
        free(t);
        return core_error(fn, ACL_ERROR_RT_IPC_ERROR, "the exporting process %d did not answer (it exited?)",
                          (int)a->pid);
    }
    if (r.status != ACL_SUCCESS || *fd < 0) {
        conn_put(c);
        free(t);
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
        r.msg[sizeof r.msg - 1] = '\0';
        return core_error(fn, r.status != ACL_SUCCESS ? r.status : ACL_ERROR_RT_IPC_ERROR, "%s",
                          r.status != ACL_SUCCESS ? r.msg : "the exporter sent no memory");
    }
    t->conn = c; /* the token keeps the connection's user reference */
    t->ref = r.ref;
    *grant = r.grant;
    *token = t;
    return ACL_SUCCESS;
}

void ipc_client_release(void *token)
{
    ipc_token *t = token;
    ipc_request q;
    memset(&q, 0, sizeof q);
    q.magic = IPC_WIRE_MAGIC;
    q.op = IPC_OP_RELEASE;
    q.ref = t->ref;
    ipc_reply r;
    int fd = -1;
    (void)exchange(t->conn, &q, &r, &fd); /* a broken connection already released everything */
    conn_put(t->conn);
    free(t);
}

void ipc_client_finalize(void)
{
    for (;;) {
        /* one connection per round, without nesting the two locks */
        core_mutex_lock(&g_clients_mu);
        ipc_conn *c = g_conns;
        while (c != NULL && c->shut) {
            c = c->next;
        }
        if (c != NULL) {
            c->shut = true;
            c->users++;
        }
        core_mutex_unlock(&g_clients_mu);
        if (c == NULL) {
            break;
        }
        core_mutex_lock(&c->mu);
        if (c->fd >= 0) {
            close(c->fd); /* the exporters release what this process held */
            c->fd = -1;
        }
        core_mutex_unlock(&c->mu);
        conn_put(c);
    }
}

/* --------------------------------------------------------- shared words */

/* Maps the page holding the shared word at `offset` of `fd`; returns the word's address
 * or NULL. word_unmap undoes it. */
static void *word_map(int fd, uint64_t offset)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t base = offset & ~(page - 1);
    void *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)base);
    if (p == MAP_FAILED) {
        return NULL;
    }
    return (char *)p + (offset - base);
}

static void word_unmap(void *word)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    munmap((void *)((uintptr_t)word & ~(page - 1)), (size_t)page);
}

aclError ipc_word_open(const char *fn, const ipc_addr *a, ipc_kind kind, const char *what, ipc_word_ref **out)
{
    int fd = -1;
    ipc_grant g;
    void *token = NULL;
    aclError rc = ipc_client_acquire(fn, a, kind, false, &fd, &g, &token);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    ipc_word_ref *r = malloc(sizeof(*r));
    void *word = word_map(fd, g.offset);
    close(fd);
    if (r == NULL || word == NULL) {
        free(r);
        if (word != NULL) {
            word_unmap(word);
        }
        ipc_client_release(token);
        return core_error(fn, ACL_ERROR_RT_IPC_ERROR, "cannot map the %s", what);
    }
    r->word = word;
    r->token = token;
    *out = r;
    return ACL_SUCCESS;
}

void ipc_word_close(void *ref)
{
    ipc_word_ref *r = ref;
    word_unmap(r->word);
    ipc_client_release(r->token);
    free(r);
}
