/*
 * diag/diag.h - what the diagnostics subsystem (src/diag/: timing model, profiler,
 * race sanitizer, dump writer, device log) offers to the other subsystems:
 * nothing. diag is the top layer (CORE_LEVEL_DIAG): it learns what happens through
 * the observations of core/core.h ("tasks and observations") and the hooks it
 * registers in diag/hooks.c, and it is driven from outside through the aclmock*
 * API (acl/acl_mock.h). Helpers shared inside src/diag/ are in diag/diag_private.h;
 * a function declared here would start with diag_.
 */
#ifndef MOCK_DIAG_H
#define MOCK_DIAG_H

#include "core/core.h"

#endif /* MOCK_DIAG_H */
