/* test_securec.c - libc_sec.so: the bounds-checked functions of securec.h, their return
 * codes and how they reset the destination (include/securec.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "mock_test.h"
#include "securec.h"

static int all_bytes(const void *p, size_t n, unsigned char v)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        if (b[i] != v) {
            return 0;
        }
    }
    return 1;
}

static void test_codes(void)
{
    CHECK_EQ(EOK, 0);
    CHECK_EQ(EINVAL_AND_RESET, EINVAL | 128);
    CHECK_EQ(ERANGE_AND_RESET, ERANGE | 128);
    CHECK_EQ(EOVERLAP_AND_RESET, 54 | 128);
    CHECK_EQ(SECUREC_MEM_MAX_LEN, 0x7fffffffUL);
}

static void test_memset_s(void)
{
    unsigned char b[16];
    memset(b, 0xAA, sizeof b);
    CHECK_EQ(memset_s(b, sizeof b, 7, 8), EOK);
    CHECK(all_bytes(b, 8, 7) && all_bytes(b + 8, 8, 0xAA));
    CHECK_EQ(memset_s(b, sizeof b, 1, 0), EOK); /* nothing to do */
    CHECK(all_bytes(b, 8, 7));
    /* count > destMax: the whole destination is set, ERANGE_AND_RESET */
    CHECK_EQ(memset_s(b, 10, 3, 11), ERANGE_AND_RESET);
    CHECK(all_bytes(b, 10, 3) && all_bytes(b + 10, 6, 0xAA));
    CHECK_EQ(memset_s(NULL, 4, 0, 1), EINVAL);
    memset(b, 0xAA, sizeof b);
    CHECK_EQ(memset_s(b, 0, 0, 0), ERANGE);
    CHECK_EQ(memset_s(b, (size_t)SECUREC_MEM_MAX_LEN + 1, 0, 1), ERANGE);
    CHECK(all_bytes(b, sizeof b, 0xAA)); /* untouched */
}

static void test_memcpy_s(void)
{
    unsigned char d[8], s[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    memset(d, 0xAA, sizeof d);
    CHECK_EQ(memcpy_s(d, sizeof d, s, 8), EOK);
    CHECK(memcmp(d, s, 8) == 0);
    CHECK_EQ(memcpy_s(d, sizeof d, s, 0), EOK);
    CHECK_EQ(memcpy_s(d, sizeof d, d, 8), EOK); /* the same buffer: nothing to copy */
    /* too long: the destination is zeroed */
    CHECK_EQ(memcpy_s(d, 4, s, 5), ERANGE_AND_RESET);
    CHECK(all_bytes(d, 4, 0) && d[4] == 5);
    /* NULL source: zeroed too */
    memset(d, 0xAA, sizeof d);
    CHECK_EQ(memcpy_s(d, sizeof d, NULL, 1), EINVAL_AND_RESET);
    CHECK(all_bytes(d, sizeof d, 0));
    CHECK_EQ(memcpy_s(NULL, 8, s, 1), EINVAL);
    CHECK_EQ(memcpy_s(d, 0, s, 1), ERANGE);
    /* overlapping ranges are refused (memmove_s allows them) */
    unsigned char o[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_EQ(memcpy_s(o + 1, 7, o, 4), EOVERLAP_AND_RESET);
    CHECK(all_bytes(o + 1, 7, 0) && o[0] == 1);
    unsigned char m[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_EQ(memmove_s(m + 1, 7, m, 4), EOK);
    CHECK(m[0] == 1 && m[1] == 1 && m[2] == 2 && m[3] == 3 && m[4] == 4 && m[5] == 6);
    CHECK_EQ(memmove_s(m, 4, m + 1, 5), ERANGE_AND_RESET);
    CHECK(all_bytes(m, 4, 0));
    CHECK_EQ(memmove_s(m, 4, NULL, 1), EINVAL_AND_RESET);
}

static void test_strcpy_s(void)
{
    char d[8];
    CHECK_EQ(strcpy_s(d, sizeof d, "abcdefg"), EOK); /* 7 + NUL fits */
    CHECK_STR_EQ(d, "abcdefg");
    CHECK_EQ(strcpy_s(d, sizeof d, "abcdefgh"), ERANGE_AND_RESET);
    CHECK_STR_EQ(d, "");
    strcpy(d, "x");
    CHECK_EQ(strcpy_s(d, sizeof d, NULL), EINVAL_AND_RESET);
    CHECK_STR_EQ(d, "");
    CHECK_EQ(strcpy_s(NULL, 8, "a"), EINVAL);
    strcpy(d, "keep");
    CHECK_EQ(strcpy_s(d, 0, "a"), ERANGE);
    CHECK_STR_EQ(d, "keep");
    char o[16] = "abcdef";
    CHECK_EQ(strcpy_s(o + 2, 14, o), EOVERLAP_AND_RESET);
    CHECK_STR_EQ(o + 2, "");
}

static void test_strncpy_s(void)
{
    char d[8];
    CHECK_EQ(strncpy_s(d, sizeof d, "abcdefghij", 3), EOK);
    CHECK_STR_EQ(d, "abc");
    CHECK_EQ(strncpy_s(d, sizeof d, "ab", 5), EOK); /* a shorter source stops at its end */
    CHECK_STR_EQ(d, "ab");
    CHECK_EQ(strncpy_s(d, sizeof d, "abcdefghij", 7), EOK);
    CHECK_STR_EQ(d, "abcdefg");
    CHECK_EQ(strncpy_s(d, sizeof d, "abcdefghij", 8), ERANGE_AND_RESET); /* 8 + NUL */
    CHECK_STR_EQ(d, "");
    strcpy(d, "x");
    CHECK_EQ(strncpy_s(d, sizeof d, "abc", 0), EOK);
    CHECK_STR_EQ(d, "");
    CHECK_EQ(strncpy_s(d, sizeof d, NULL, 1), EINVAL_AND_RESET);
    CHECK_EQ(strncpy_s(NULL, 8, "a", 1), EINVAL);
    CHECK_EQ(strncpy_s(d, sizeof d, "a", (size_t)SECUREC_STRING_MAX_LEN + 1), ERANGE_AND_RESET);
}

static void test_strcat_s(void)
{
    char d[8] = "ab";
    CHECK_EQ(strcat_s(d, sizeof d, "cde"), EOK);
    CHECK_STR_EQ(d, "abcde");
    CHECK_EQ(strcat_s(d, sizeof d, "fg"), EOK); /* exactly full */
    CHECK_STR_EQ(d, "abcdefg");
    CHECK_EQ(strcat_s(d, sizeof d, "h"), ERANGE_AND_RESET);
    CHECK_STR_EQ(d, "");
    char full[4] = {'a', 'b', 'c', 'd'}; /* not terminated within destMax */
    CHECK_EQ(strcat_s(full, sizeof full, "x"), EINVAL_AND_RESET);
    CHECK_EQ(full[0], '\0');
    strcpy(d, "ab");
    CHECK_EQ(strncat_s(d, sizeof d, "cdefghij", 3), EOK);
    CHECK_STR_EQ(d, "abcde");
    CHECK_EQ(strncat_s(d, sizeof d, "xyz", 2), EOK);
    CHECK_STR_EQ(d, "abcdexy");
    CHECK_EQ(strncat_s(d, sizeof d, "z", 1), ERANGE_AND_RESET);
    CHECK_STR_EQ(d, "");
    CHECK_EQ(strcat_s(d, sizeof d, NULL), EINVAL_AND_RESET);
    CHECK_EQ(strcat_s(NULL, 8, "a"), EINVAL);
    char o[16] = "abc";
    CHECK_EQ(strcat_s(o, sizeof o, o + 1), EOVERLAP_AND_RESET);
    CHECK_STR_EQ(o, "");
}

static void test_strtok_s(void)
{
    char s[] = "  a,b;;c  ";
    char *ctx = NULL;
    char *t = strtok_s(s, " ,;", &ctx);
    CHECK_STR_EQ(t, "a");
    t = strtok_s(NULL, " ,;", &ctx);
    CHECK_STR_EQ(t, "b");
    t = strtok_s(NULL, " ,;", &ctx);
    CHECK_STR_EQ(t, "c");
    CHECK(strtok_s(NULL, " ,;", &ctx) == NULL);
    CHECK(strtok_s(NULL, " ,;", &ctx) == NULL);
    CHECK(strtok_s(s, NULL, &ctx) == NULL);
    CHECK(strtok_s(s, ",", NULL) == NULL);
    ctx = NULL;
    CHECK(strtok_s(NULL, ",", &ctx) == NULL);
}

static int call_vsnprintf_s(char *d, size_t max, size_t count, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf_s(d, max, count, fmt, ap);
    va_end(ap);
    return n;
}

static void test_printf_family(void)
{
    char d[8];
    CHECK_EQ(sprintf_s(d, sizeof d, "%d-%s", 12, "ab"), 5);
    CHECK_STR_EQ(d, "12-ab");
    CHECK_EQ(sprintf_s(d, sizeof d, "%s", "1234567"), 7);
    CHECK_EQ(sprintf_s(d, sizeof d, "%s", "12345678"), -1); /* does not fit: emptied */
    CHECK_STR_EQ(d, "");
    strcpy(d, "x");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat"
#pragma GCC diagnostic ignored "-Wformat-security"
    const char *volatile nofmt = NULL;
    CHECK_EQ(sprintf_s(d, sizeof d, nofmt), -1);
#pragma GCC diagnostic pop
    CHECK_STR_EQ(d, "");
    CHECK_EQ(sprintf_s(NULL, 8, "a"), -1);
    CHECK_EQ(sprintf_s(d, 0, "a"), -1);

    /* snprintf_s with count < destMax: at most count characters, a longer output is
     * truncated and reported as -1 */
    CHECK_EQ(snprintf_s(d, sizeof d, 3, "%s", "ab"), 2);
    CHECK_STR_EQ(d, "ab");
    CHECK_EQ(snprintf_s(d, sizeof d, 3, "%s", "abcdef"), -1);
    CHECK_STR_EQ(d, "abc");
    /* count >= destMax: like sprintf_s */
    CHECK_EQ(snprintf_s(d, sizeof d, 100, "%s", "abcdefg"), 7);
    CHECK_EQ(snprintf_s(d, sizeof d, 8, "%s", "abcdefgh"), -1);
    CHECK_STR_EQ(d, "");
    CHECK_EQ(snprintf_s(d, sizeof d, (size_t)SECUREC_STRING_MAX_LEN, "a"), -1);
    CHECK_EQ(call_vsnprintf_s(d, sizeof d, 5, "%d%d", 12, 34), 4);
    CHECK_STR_EQ(d, "1234");
    CHECK_EQ(call_vsnprintf_s(d, sizeof d, 2, "%d", 12345), -1);
    CHECK_STR_EQ(d, "12");
}

int main(void)
{
    RUN_TEST(test_codes);
    RUN_TEST(test_memset_s);
    RUN_TEST(test_memcpy_s);
    RUN_TEST(test_strcpy_s);
    RUN_TEST(test_strncpy_s);
    RUN_TEST(test_strcat_s);
    RUN_TEST(test_strtok_s);
    RUN_TEST(test_printf_family);
    return TEST_REPORT();
}
