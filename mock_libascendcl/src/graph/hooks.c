/*
 * hooks.c - the graph subsystem's descriptor (README "Source layout"): it sits
 * above mem (it reads condition words and indices in device memory) and
 * registers the capture port with the stream subsystem.
 */
#include "core/core.h"
#include "stream/stream.h"
#include "graph/graph.h"
#include "graph/graph_private.h"

static void graph_release(void)
{
    graph_release_all();
}

static const core_subsystem graph_subsystem = {
    .name = "graph",
    .level = CORE_LEVEL_GRAPH,
    .release = graph_release,
    .ctx_sync = graph_ctx_sync,
    .stream_destroyed = graph_stream_destroyed,
};

/* The capture port, from a constructor like the descriptor: registered before
 * the first ACL call, whatever the link order. */
static __attribute__((constructor)) void graph_port_register_(void)
{
    stream_capture_register(&graph_port);
}

MOCK_REGISTER_SUBSYSTEM(graph_subsystem)
