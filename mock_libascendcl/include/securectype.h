/*
 * securectype.h - types and limits of the bounds-checked C functions of libc_sec.so
 * (declared in securec.h), as CANN programs use them.
 *
 * Part of mock_libascendcl: written for this project (no vendor text). Valid C89 and later,
 * and C++.
 */
#ifndef PYACL_RT_MOCK_SECURECTYPE_H_
#define PYACL_RT_MOCK_SECURECTYPE_H_

#include <stddef.h>

#ifndef SECUREC_API
#define SECUREC_API __attribute__((visibility("default")))
#endif

/* The result type of the functions that return an error number (not the printf family). */
#ifndef PYACL_RT_MOCK_ERRNO_T_DEFINED_
#define PYACL_RT_MOCK_ERRNO_T_DEFINED_
typedef int errno_t;
#endif

/* Success. */
#ifndef EOK
#define EOK 0
#endif
/* Errors that also reset the destination (see securec.h); EINVAL = 22, ERANGE = 34 and the
 * overlap error 54 with bit 7 set. */
#ifndef EINVAL_AND_RESET
#define EINVAL_AND_RESET (22 | 128)
#endif
#ifndef ERANGE_AND_RESET
#define ERANGE_AND_RESET (34 | 128)
#endif
#ifndef EOVERLAP_AND_RESET
#define EOVERLAP_AND_RESET (54 | 128)
#endif

/* Largest destination size (bytes) the functions accept; a larger destMax is an error. */
#ifndef SECUREC_MEM_MAX_LEN
#define SECUREC_MEM_MAX_LEN 0x7fffffffUL
#endif
#ifndef SECUREC_STRING_MAX_LEN
#define SECUREC_STRING_MAX_LEN 0x7fffffffUL
#endif

#endif /* PYACL_RT_MOCK_SECURECTYPE_H_ */
