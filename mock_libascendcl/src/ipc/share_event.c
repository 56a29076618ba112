/*
 * share_event.c - IPC events (acl_next_semantics.md §3.3; EVT, G-IPC#进程间共享Event,
 * D-EVT): aclrtIpcGetEventHandle / aclrtIpcOpenEventHandle.
 *
 * The event (aclrtCreateEventExWithFlag(ACL_EVENT_IPC), src/stream/event.c) keeps its
 * record/done sequences in a shared word; its 64-byte handle names (pid, nonce, id). The
 * opener maps the word and gets a local event on it: a record in either process is seen
 * by a wait in the other (aclrtStreamWaitEvent, aclrtSynchronizeEvent), a wait on an
 * event never recorded or already complete ends at once. The creator must not destroy
 * the event before the other process opened it: the open then fails (507022). Each
 * process destroys its own handle; the state lives until the last one. Support: 950PR,
 * A3, A2.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "ipc/ipc.h"
#include "ipc/ipc_private.h"

#define EVENT_SOCS (CORE_SOC_BIT(CORE_SOC_950PR) | CORE_SOC_BIT(CORE_SOC_A3) | CORE_SOC_BIT(CORE_SOC_A2))

static const char k_event_magic[8] = {'A', 'M', 'I', 'P', 'C', 'E', 'V', '1'};

typedef struct event_payload {
    char magic[8];
    int32_t pid;
    uint32_t pad;
    uint64_t nonce;
    uint64_t id;
} event_payload;
_Static_assert(sizeof(event_payload) <= ACL_IPC_EVENT_HANDLE_SIZE, "IPC event payload too large");

typedef struct event_match {
    aclrtEvent event;
    uint32_t gen;
    uint64_t id;
} event_match;

static bool match_event(const ipc_export *e, const void *arg)
{
    const event_match *m = arg;
    return e->handle == m->event && e->gen == m->gen;
}

static void read_id(ipc_export *e, void *arg)
{
    ((event_match *)arg)->id = e->id;
}

aclError aclrtIpcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle *handle)
{
    static const char fn[] = "aclrtIpcGetEventHandle";
    MOCK_REQUIRE_NONNULL(fn, event);
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, EVENT_SOCS);
    event_match m = {event, 0, 0};
    if (rc == ACL_SUCCESS) {
        rc = stream_event_ipc_export(fn, event, &m.gen);
    }
    if (rc == ACL_SUCCESS) {
        rc = ipc_broker_start(fn);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* the same event gives the same handle every time */
    if (!ipc_export_with(IPC_KIND_EVENT, match_event, read_id, &m)) {
        ipc_export *e = calloc(1, sizeof(*e));
        if (e == NULL) {
            return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
        }
        e->kind = IPC_KIND_EVENT;
        e->handle = event;
        e->gen = m.gen;
        m.id = ipc_export_add(e, 0, NULL);
    }
    event_payload p;
    memset(&p, 0, sizeof p);
    memcpy(p.magic, k_event_magic, sizeof p.magic);
    uint64_t nonce;
    ipc_self(&p.pid, &nonce);
    p.nonce = nonce;
    p.id = m.id;
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &p, sizeof p);
    return ACL_SUCCESS;
}

aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent *event)
{
    static const char fn[] = "aclrtIpcOpenEventHandle";
    MOCK_REQUIRE_NONNULL(fn, event);
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, EVENT_SOCS);
    mock_context *ctx = NULL;
    if (rc == ACL_SUCCESS) {
        rc = core_ctx_require(fn, &ctx);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    event_payload p;
    memcpy(&p, handle.reserved, sizeof p);
    if (memcmp(p.magic, k_event_magic, sizeof p.magic) != 0 || p.pid <= 0) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'handle' is not from aclrtIpcGetEventHandle");
    }
    ipc_addr a = {p.pid, p.nonce, p.id};
    ipc_word_ref *o = NULL;
    rc = ipc_word_open(fn, &a, IPC_KIND_EVENT, "event's shared state", &o);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = stream_event_ipc_open(fn, o->word, ipc_word_close, o, event);
    if (rc != ACL_SUCCESS) {
        ipc_word_close(o);
    }
    return rc;
}
