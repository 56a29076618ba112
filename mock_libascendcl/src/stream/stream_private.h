/*
 * stream_internal.h - private glue between stream.c, event.c and callback.c
 * (the streams subsystem). Other subsystems use only mock_internal.h (which
 * also has the time, wait and handle-registry helpers shared by everyone).
 */
#ifndef MOCK_STREAM_INTERNAL_H
#define MOCK_STREAM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* ------------------------------------------------------------- streams */

/* Resolve with a reference held (release with stream_put). `submit`:
 * the call enqueues work, which needs a current context on the stream's
 * device (107002 / 107003); otherwise any thread may use the handle. */
MOCK_HIDDEN aclError stream_get(const char *func, aclrtStream handle, bool submit, mock_stream **out);
MOCK_HIDDEN void stream_ref(mock_stream *s);
MOCK_HIDDEN void stream_put(mock_stream *s);
MOCK_HIDDEN int32_t stream_get_id(const mock_stream *s);

/* ----------------------------------------------------------- callback.c */

/* Drops every report/host-func subscription of a stream being destroyed and
 * cancels its queued callbacks (waking blocked workers). */
MOCK_HIDDEN void stream_callbacks_stream_gone(mock_stream *s);
/* True if the calling thread processes reports or host funcs of stream s. */
MOCK_HIDDEN bool stream_callbacks_served_by_caller(const mock_stream *s);

#endif /* MOCK_STREAM_INTERNAL_H */
