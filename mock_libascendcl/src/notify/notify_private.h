/*
 * notify/notify_private.h - glue between the files of src/notify/ (notify.c,
 * cnt_notify.c, hooks.c); no file outside src/notify/ includes it. Every function
 * declared here starts with notify_.
 */
#ifndef MOCK_NOTIFY_PRIVATE_H
#define MOCK_NOTIFY_PRIVATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "core/core.h"
#include "notify/notify.h"

/* The deadline of a task that waits `timeout_s` seconds (0 = forever: NULL). */
MOCK_HIDDEN const struct timespec *notify_deadline(uint32_t timeout_s, struct timespec *buf);

/* release hooks of aclFinalize: every notify / count notify still alive is destroyed. */
MOCK_HIDDEN void notify_finalize(void);
MOCK_HIDDEN void notify_cnt_finalize(void);

#endif /* MOCK_NOTIFY_PRIVATE_H */
