/*
 * graph/graph.h - what the graph subsystem (src/graph/: stream capture into
 * model run instances, their execution, introspection and update, built
 * models, labels and stream switching; aclmdlRI*, aclrt*Label*,
 * aclrtActiveStream, aclrtSwitchStream) offers to other subsystems: nothing.
 * It is the highest layer; lower layers reach it only through the capture
 * port it registers with the stream subsystem (stream/stream.h) and through
 * its core_subsystem hooks (graph/hooks.c).
 */
#ifndef MOCK_GRAPH_H
#define MOCK_GRAPH_H

#include "core/core.h"

#endif /* MOCK_GRAPH_H */
