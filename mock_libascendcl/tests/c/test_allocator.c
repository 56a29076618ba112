/* test_allocator.c - external allocator descriptors and per-stream registration. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_rt_allocator.h"
#include "mock_test.h"

static int g_obj_a, g_obj_b;

static void *my_alloc(aclrtAllocator allocator, size_t size) { (void)allocator; (void)size; return NULL; }
static void my_free(aclrtAllocator allocator, aclrtAllocatorBlock block) { (void)allocator; (void)block; }
static void *my_advise(aclrtAllocator allocator, size_t size, aclrtAllocatorAddr addr)
{
    (void)allocator; (void)size; (void)addr;
    return NULL;
}
static void *my_addr(aclrtAllocatorBlock block) { return block; }
static void *my_alloc2(aclrtAllocator allocator, size_t size) { (void)allocator; (void)size; return NULL; }

static aclrtAllocatorDesc full_desc(void *obj, aclrtAllocatorAllocFunc a)
{
    aclrtAllocatorDesc d = aclrtAllocatorCreateDesc();
    CHECK(d != NULL);
    CHECK_OK(aclrtAllocatorSetObjToDesc(d, obj));
    CHECK_OK(aclrtAllocatorSetAllocFuncToDesc(d, a));
    CHECK_OK(aclrtAllocatorSetFreeFuncToDesc(d, my_free));
    CHECK_OK(aclrtAllocatorSetAllocAdviseFuncToDesc(d, my_advise));
    CHECK_OK(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, my_addr));
    return d;
}

static void test_desc_errors(void)
{
    aclrtAllocatorDesc d = aclrtAllocatorCreateDesc();
    CHECK(d != NULL);
    CHECK_EQ(aclrtAllocatorSetObjToDesc(NULL, &g_obj_a), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtAllocatorSetObjToDesc(d, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtAllocatorSetAllocFuncToDesc(d, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtAllocatorSetFreeFuncToDesc(NULL, my_free), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtAllocatorSetAllocAdviseFuncToDesc(d, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, NULL), ACL_ERROR_INVALID_PARAM);
    /* garbage descriptor */
    uint64_t junk[8] = {0};
    (void)aclGetRecentErrMsg();
    CHECK_EQ(aclrtAllocatorSetAllocFuncToDesc((aclrtAllocatorDesc)junk, my_alloc), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "not a live allocator descriptor");
    CHECK_EQ(junk[1], 0);
    CHECK_EQ(aclrtAllocatorDestroyDesc((aclrtAllocatorDesc)junk), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtAllocatorDestroyDesc(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtAllocatorDestroyDesc(d));
    CHECK_EQ(aclrtAllocatorDestroyDesc(d), ACL_ERROR_INVALID_PARAM); /* double destroy */
    CHECK_EQ(aclrtAllocatorSetObjToDesc(d, &g_obj_a), ACL_ERROR_INVALID_PARAM);
}

static void test_register_requires_context(void)
{
    aclrtAllocatorDesc d = full_desc(&g_obj_a, my_alloc);
    /* no aclrtSetDevice on this thread yet: the default stream does not exist */
    CHECK_EQ(aclrtAllocatorRegister(NULL, d), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_OK(aclrtAllocatorDestroyDesc(d));
}

static void test_register_get_unregister(void)
{
    CHECK_OK(aclrtSetDevice(0));
    aclrtStream s1 = NULL, s2 = NULL;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));

    aclrtAllocatorDesc incomplete = aclrtAllocatorCreateDesc();
    CHECK_OK(aclrtAllocatorSetObjToDesc(incomplete, &g_obj_a));
    (void)aclGetRecentErrMsg();
    CHECK_EQ(aclrtAllocatorRegister(s1, incomplete), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "alloc function");
    CHECK_OK(aclrtAllocatorDestroyDesc(incomplete));
    CHECK_EQ(aclrtAllocatorRegister(s1, NULL), ACL_ERROR_INVALID_PARAM);

    aclrtAllocatorDesc da = full_desc(&g_obj_a, my_alloc);
    aclrtAllocatorDesc db = full_desc(&g_obj_b, my_alloc2);
    CHECK_OK(aclrtAllocatorRegister(s1, da));
    CHECK_OK(aclrtAllocatorRegister(NULL, db)); /* default stream */

    aclrtAllocatorDesc od = NULL;
    aclrtAllocator oa = NULL;
    aclrtAllocatorAllocFunc of = NULL;
    aclrtAllocatorFreeFunc ofr = NULL;
    aclrtAllocatorAllocAdviseFunc oad = NULL;
    aclrtAllocatorGetAddrFromBlockFunc oga = NULL;
    CHECK_OK(aclrtAllocatorGetByStream(s1, &od, &oa, &of, &ofr, &oad, &oga));
    CHECK(od == da);
    CHECK(oa == &g_obj_a);
    CHECK(of == my_alloc);
    CHECK(ofr == my_free);
    CHECK(oad == my_advise);
    CHECK(oga == my_addr);
    CHECK_OK(aclrtAllocatorGetByStream(NULL, &od, &oa, &of, &ofr, &oad, &oga));
    CHECK(od == db);
    CHECK(oa == &g_obj_b);
    CHECK(of == my_alloc2);
    /* nothing on s2 */
    CHECK_EQ(aclrtAllocatorGetByStream(s2, &od, &oa, &of, &ofr, &oad, &oga), ACL_ERROR_INVALID_PARAM);
    /* NULL out-params */
    CHECK_EQ(aclrtAllocatorGetByStream(s1, NULL, &oa, &of, &ofr, &oad, &oga), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtAllocatorGetByStream(s1, &od, &oa, &of, &ofr, &oad, NULL), ACL_ERROR_INVALID_PARAM);

    /* the registration is a copy: changing or destroying the descriptor later does not affect it */
    CHECK_OK(aclrtAllocatorSetAllocFuncToDesc(da, my_alloc2));
    CHECK_OK(aclrtAllocatorGetByStream(s1, &od, &oa, &of, &ofr, &oad, &oga));
    CHECK(of == my_alloc);
    /* re-registering replaces */
    CHECK_OK(aclrtAllocatorRegister(s1, da));
    CHECK_OK(aclrtAllocatorGetByStream(s1, &od, &oa, &of, &ofr, &oad, &oga));
    CHECK(of == my_alloc2);
    CHECK_OK(aclrtAllocatorDestroyDesc(da));
    CHECK_OK(aclrtAllocatorGetByStream(s1, &od, &oa, &of, &ofr, &oad, &oga));
    CHECK(oa == &g_obj_a);

    CHECK_OK(aclrtAllocatorUnregister(s1));
    CHECK_EQ(aclrtAllocatorUnregister(s1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtAllocatorGetByStream(s1, &od, &oa, &of, &ofr, &oad, &oga), ACL_ERROR_INVALID_PARAM);

    /* a registration dies with its stream */
    CHECK_OK(aclrtAllocatorRegister(s2, db));
    CHECK_OK(aclrtDestroyStream(s2));
    aclrtStream s3 = NULL;
    CHECK_OK(aclrtCreateStream(&s3));
    CHECK_EQ(aclrtAllocatorGetByStream(s3, &od, &oa, &of, &ofr, &oad, &oga), ACL_ERROR_INVALID_PARAM);

    /* garbage stream handle */
    uint64_t junk[16] = {0};
    CHECK_NE(aclrtAllocatorRegister((aclrtStream)junk, db), ACL_SUCCESS);

    CHECK_OK(aclrtAllocatorUnregister(NULL));
    CHECK_OK(aclrtAllocatorDestroyDesc(db));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s3));
    CHECK_OK(aclrtResetDevice(0));
}

/* Threads on different devices register/query/unregister on their own streams. */
static void *alloc_worker(void *arg)
{
    int32_t dev = (int32_t)(intptr_t)arg;
    uintptr_t bad = 0;
    if (aclrtSetDevice(dev) != ACL_SUCCESS) return (void *)1;
    aclrtStream s = NULL;
    bad += aclrtCreateStream(&s) != ACL_SUCCESS;
    for (int i = 0; i < 200; i++) {
        aclrtAllocatorDesc d = aclrtAllocatorCreateDesc();
        bad += aclrtAllocatorSetObjToDesc(d, &g_obj_a) != ACL_SUCCESS;
        bad += aclrtAllocatorSetAllocFuncToDesc(d, my_alloc) != ACL_SUCCESS;
        bad += aclrtAllocatorSetFreeFuncToDesc(d, my_free) != ACL_SUCCESS;
        bad += aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, my_addr) != ACL_SUCCESS;
        bad += aclrtAllocatorRegister(s, d) != ACL_SUCCESS;
        aclrtAllocatorDesc od = NULL;
        aclrtAllocator oa = NULL;
        aclrtAllocatorAllocFunc of = NULL;
        aclrtAllocatorFreeFunc ofr = NULL;
        aclrtAllocatorAllocAdviseFunc oad = NULL;
        aclrtAllocatorGetAddrFromBlockFunc oga = NULL;
        bad += aclrtAllocatorGetByStream(s, &od, &oa, &of, &ofr, &oad, &oga) != ACL_SUCCESS;
        bad += od != d || of != my_alloc || oad != NULL;
        bad += aclrtAllocatorUnregister(s) != ACL_SUCCESS;
        bad += aclrtAllocatorDestroyDesc(d) != ACL_SUCCESS;
    }
    bad += aclrtDestroyStream(s) != ACL_SUCCESS;
    bad += aclrtResetDevice(dev) != ACL_SUCCESS;
    return (void *)bad;
}

static void test_threads(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK_EQ(pthread_create(&t[i], NULL, alloc_worker, (void *)(intptr_t)(i % 2)), 0);
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        CHECK(r == NULL);
    }
}

int main(void)
{
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_desc_errors);
    RUN_TEST(test_register_requires_context);
    RUN_TEST(test_register_get_unregister);
    RUN_TEST(test_threads);
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
