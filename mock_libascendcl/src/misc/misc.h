/*
 * misc/misc.h - what the misc subsystem (src/misc/: overflow, dump, exception,
 * other, util, the generated unsupported stubs) offers to the other
 * subsystems: nothing. misc is the top layer; it plugs into aclInit,
 * aclFinalize and failed stream tasks through the hooks it registers in
 * misc/hooks.c. Helpers shared inside src/misc/ are in misc/misc_private.h;
 * a function declared here would start with misc_.
 */
#ifndef MOCK_MISC_H
#define MOCK_MISC_H

#include "core/core.h"

#endif /* MOCK_MISC_H */
