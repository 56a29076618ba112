/*
 * securec.c - libc_sec.so: the bounds-checked memory and string functions CANN programs
 * call (memset_s, memcpy_s, ..., snprintf_s), with the return codes and destination
 * resets documented in include/securec.h.
 *
 * Written for this project (C11, libc only; thread-safe: no state).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "securec.h"

/* [a, a+alen) and [b, b+blen) share a byte. */
static int overlaps(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb ? pb - pa < alen : pa - pb < blen;
}

/* ------------------------------------------------------------------ memory */

errno_t memset_s(void *dest, size_t destMax, int c, size_t count)
{
    if (destMax == 0 || destMax > SECUREC_MEM_MAX_LEN) {
        return ERANGE;
    }
    if (dest == NULL) {
        return EINVAL;
    }
    if (count > destMax) {
        memset(dest, c, destMax);
        return ERANGE_AND_RESET;
    }
    memset(dest, c, count);
    return EOK;
}

/* Shared checks of memcpy_s / memmove_s; returns -1 when the copy may go ahead. */
static int mem_copy_check(void *dest, size_t destMax, const void *src, size_t count, int check_overlap)
{
    if (destMax == 0 || destMax > SECUREC_MEM_MAX_LEN) {
        return ERANGE;
    }
    if (dest == NULL) {
        return EINVAL;
    }
    if (src == NULL) {
        memset(dest, 0, destMax);
        return EINVAL_AND_RESET;
    }
    if (count > destMax) {
        memset(dest, 0, destMax);
        return ERANGE_AND_RESET;
    }
    if (count == 0 || dest == src) {
        return EOK;
    }
    if (check_overlap && overlaps(dest, count, src, count)) {
        memset(dest, 0, destMax);
        return EOVERLAP_AND_RESET;
    }
    return -1;
}

errno_t memcpy_s(void *dest, size_t destMax, const void *src, size_t count)
{
    int rc = mem_copy_check(dest, destMax, src, count, 1);
    if (rc >= 0) {
        return rc;
    }
    memcpy(dest, src, count);
    return EOK;
}

errno_t memmove_s(void *dest, size_t destMax, const void *src, size_t count)
{
    int rc = mem_copy_check(dest, destMax, src, count, 0);
    if (rc >= 0) {
        return rc;
    }
    memmove(dest, src, count);
    return EOK;
}

/* ----------------------------------------------------------------- strings */

/* Checks of every string function before the lengths: ERANGE / EINVAL, or
 * EINVAL_AND_RESET for a NULL source; -1 when the arguments are usable. */
static int str_check(char *dest, size_t destMax, const char *src)
{
    if (destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) {
        return ERANGE;
    }
    if (dest == NULL) {
        return EINVAL;
    }
    if (src == NULL) {
        dest[0] = '\0';
        return EINVAL_AND_RESET;
    }
    return -1;
}

/* Copies n characters of src to dest + at and terminates, after the overlap check;
 * dest holds destMax bytes and at + n < destMax. */
static errno_t str_put(char *dest, size_t at, const char *src, size_t n)
{
    if (overlaps(dest, at + n + 1, src, n + 1)) {
        dest[0] = '\0';
        return EOVERLAP_AND_RESET;
    }
    memcpy(dest + at, src, n);
    dest[at + n] = '\0';
    return EOK;
}

errno_t strcpy_s(char *strDest, size_t destMax, const char *strSrc)
{
    int rc = str_check(strDest, destMax, strSrc);
    if (rc >= 0) {
        return rc;
    }
    size_t n = strnlen(strSrc, destMax);
    if (n >= destMax) {
        strDest[0] = '\0';
        return ERANGE_AND_RESET;
    }
    if (strDest == strSrc) {
        return EOK;
    }
    return str_put(strDest, 0, strSrc, n);
}

errno_t strncpy_s(char *strDest, size_t destMax, const char *strSrc, size_t count)
{
    int rc = str_check(strDest, destMax, strSrc);
    if (rc >= 0) {
        return rc;
    }
    if (count > SECUREC_STRING_MAX_LEN) {
        strDest[0] = '\0';
        return ERANGE_AND_RESET;
    }
    size_t n = strnlen(strSrc, count);
    if (n >= destMax) {
        strDest[0] = '\0';
        return ERANGE_AND_RESET;
    }
    if (strDest == strSrc) {
        strDest[n] = '\0';
        return EOK;
    }
    return str_put(strDest, 0, strSrc, n);
}

/* strcat_s / strncat_s: the destination must hold a string within destMax bytes. */
static errno_t cat_common(char *strDest, size_t destMax, const char *strSrc, size_t count)
{
    int rc = str_check(strDest, destMax, strSrc);
    if (rc >= 0) {
        return rc;
    }
    if (count > SECUREC_STRING_MAX_LEN) {
        strDest[0] = '\0';
        return ERANGE_AND_RESET;
    }
    size_t have = strnlen(strDest, destMax);
    if (have == destMax) { /* no terminator: not a string */
        strDest[0] = '\0';
        return EINVAL_AND_RESET;
    }
    size_t room = destMax - have; /* >= 1: bytes left including the terminator */
    size_t n = strnlen(strSrc, count < room ? count : room);
    if (n >= room) {
        strDest[0] = '\0';
        return ERANGE_AND_RESET;
    }
    return str_put(strDest, have, strSrc, n);
}

errno_t strcat_s(char *strDest, size_t destMax, const char *strSrc)
{
    return cat_common(strDest, destMax, strSrc, SECUREC_STRING_MAX_LEN);
}

errno_t strncat_s(char *strDest, size_t destMax, const char *strSrc, size_t count)
{
    return cat_common(strDest, destMax, strSrc, count);
}

char *strtok_s(char *strToken, const char *strDelimit, char **context)
{
    if (strDelimit == NULL || context == NULL) {
        return NULL;
    }
    char *p = strToken != NULL ? strToken : *context;
    if (p == NULL) {
        return NULL;
    }
    p += strspn(p, strDelimit);
    if (*p == '\0') {
        *context = p;
        return NULL;
    }
    char *end = p + strcspn(p, strDelimit);
    if (*end != '\0') {
        *end++ = '\0';
    }
    *context = end;
    return p;
}

/* ------------------------------------------------------------------ printf */

/* Bad arguments of the printf family: empties dest when it can, returns -1. */
static int printf_bad_args(char *dest, size_t destMax)
{
    if (dest != NULL && destMax > 0 && destMax <= SECUREC_STRING_MAX_LEN) {
        dest[0] = '\0';
    }
    return -1;
}

int vsprintf_s(char *strDest, size_t destMax, const char *format, va_list argList)
{
    if (strDest == NULL || format == NULL || destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) {
        return printf_bad_args(strDest, destMax);
    }
    int n = vsnprintf(strDest, destMax, format, argList);
    if (n < 0 || (size_t)n >= destMax) { /* encoding error, or it does not fit */
        strDest[0] = '\0';
        return -1;
    }
    return n;
}

int sprintf_s(char *strDest, size_t destMax, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = vsprintf_s(strDest, destMax, format, ap);
    va_end(ap);
    return n;
}

int vsnprintf_s(char *strDest, size_t destMax, size_t count, const char *format, va_list argList)
{
    if (strDest == NULL || format == NULL || destMax == 0 || destMax > SECUREC_STRING_MAX_LEN ||
        count > SECUREC_STRING_MAX_LEN - 1) {
        return printf_bad_args(strDest, destMax);
    }
    if (count < destMax) {
        /* at most count characters: a longer output is truncated to them (and NUL
         * terminated), reported as -1 */
        int n = vsnprintf(strDest, count + 1, format, argList);
        if (n < 0) {
            strDest[0] = '\0';
            return -1;
        }
        return (size_t)n > count ? -1 : n;
    }
    return vsprintf_s(strDest, destMax, format, argList);
}

int snprintf_s(char *strDest, size_t destMax, size_t count, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf_s(strDest, destMax, count, format, ap);
    va_end(ap);
    return n;
}
