/*
 * securec.h - bounds-checked memory and string functions (libc_sec.so), the set CANN
 * programs and samples call: memset_s, memcpy_s, memmove_s, strcpy_s, strncpy_s,
 * strcat_s, strncat_s, strtok_s and the printf family sprintf_s, vsprintf_s, snprintf_s,
 * vsnprintf_s.
 *
 * Part of mock_libascendcl: declarations and implementation written for this project
 * from the documented behaviour of these functions (no vendor text or code). Link with
 * -lc_sec. The scanf family (sscanf_s, ...) and the wide-character functions are not
 * provided.
 *
 * Rules common to the functions returning errno_t:
 *   EOK (0)               success;
 *   ERANGE                destMax is 0 or larger than SECUREC_MEM_MAX_LEN /
 *                         SECUREC_STRING_MAX_LEN: nothing is written;
 *   EINVAL                dest is NULL: nothing is written;
 *   EINVAL_AND_RESET      src (or the destination string of strcat_s/strncat_s) is
 *                         invalid: the destination is reset;
 *   ERANGE_AND_RESET      the result does not fit in destMax bytes: the destination is
 *                         reset;
 *   EOVERLAP_AND_RESET    source and destination overlap: the destination is reset.
 * "Reset" means: the whole destMax bytes are zeroed (memcpy_s, memmove_s), filled with
 * c (memset_s: the first destMax bytes), or the destination string is made empty
 * (dest[0] = '\0', the string functions). A count of 0 copies nothing and succeeds.
 *
 * The printf family returns the number of characters written (without the NUL), or -1:
 * bad arguments (dest or format NULL, destMax 0 or too large; dest[0] is set to '\0' when
 * dest can hold it), an output that does not fit (dest becomes ""), or, for
 * snprintf_s/vsnprintf_s with count < destMax, an output longer than count characters
 * (dest then holds its first count characters, NUL-terminated).
 */
#ifndef PYACL_RT_MOCK_SECUREC_H_
#define PYACL_RT_MOCK_SECUREC_H_

#include <stdarg.h>
#include <stddef.h>

#include "securectype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets count bytes of dest (destMax bytes) to (unsigned char)c. */
SECUREC_API errno_t memset_s(void *dest, size_t destMax, int c, size_t count);
/* Copies count bytes of src into dest (destMax bytes); the ranges must not overlap. */
SECUREC_API errno_t memcpy_s(void *dest, size_t destMax, const void *src, size_t count);
/* Like memcpy_s, but the ranges may overlap. */
SECUREC_API errno_t memmove_s(void *dest, size_t destMax, const void *src, size_t count);

/* Copies the string strSrc, with its NUL, into strDest (destMax bytes). */
SECUREC_API errno_t strcpy_s(char *strDest, size_t destMax, const char *strSrc);
/* Copies at most count characters of strSrc into strDest and terminates it. */
SECUREC_API errno_t strncpy_s(char *strDest, size_t destMax, const char *strSrc, size_t count);
/* Appends strSrc to the string in strDest (destMax bytes in all). */
SECUREC_API errno_t strcat_s(char *strDest, size_t destMax, const char *strSrc);
/* Appends at most count characters of strSrc to the string in strDest. */
SECUREC_API errno_t strncat_s(char *strDest, size_t destMax, const char *strSrc, size_t count);
/* Re-entrant tokenizer (strtok_r semantics): NULL when there is no further token or
 * strDelimit / context is NULL (or strToken and *context are both NULL). */
SECUREC_API char *strtok_s(char *strToken, const char *strDelimit, char **context);

SECUREC_API int sprintf_s(char *strDest, size_t destMax, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
SECUREC_API int vsprintf_s(char *strDest, size_t destMax, const char *format, va_list argList)
    __attribute__((format(printf, 3, 0)));
SECUREC_API int snprintf_s(char *strDest, size_t destMax, size_t count, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
SECUREC_API int vsnprintf_s(char *strDest, size_t destMax, size_t count, const char *format,
                            va_list argList) __attribute__((format(printf, 4, 0)));

#ifdef __cplusplus
}
#endif

#endif /* PYACL_RT_MOCK_SECUREC_H_ */
