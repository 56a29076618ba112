/*
 * acl/acl_tdt_queue.h - shared queues (create, enqueue/dequeue, routes from one queue to
 * several) and the shared buffers that travel through them. Implemented by
 * libacl_tdt_queue.so.
 *
 * Part of mock_libascendcl: declarations written for this project from the documented
 * API (names, parameters, values; no vendor text). Valid C (C99 and later) and C++.
 */
#ifndef PYACL_RT_MOCK_ACL_ACL_TDT_QUEUE_H_
#define PYACL_RT_MOCK_ACL_ACL_TDT_QUEUE_H_

#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Permission bits (acltdtGrantQueue / acltdtAttachQueue). */
#define ACL_TDT_QUEUE_PERMISSION_MANAGE 1
#define ACL_TDT_QUEUE_PERMISSION_DEQUEUE 2
#define ACL_TDT_QUEUE_PERMISSION_ENQUEUE 4

/* Status of a route (ACL_TDT_QUEUE_ROUTE_STATUS_INT32). */
#define ACL_TDT_QUEUE_ROUTE_UNBIND 0
#define ACL_TDT_QUEUE_ROUTE_BIND 1
#define ACL_TDT_QUEUE_ROUTE_BIND_ABNORMAL 2

/* Memory type of acltdtAllocBuf. */
#define ACL_TDT_NORMAL_MEM 0
#define ACL_TDT_DVPP_MEM 1

typedef void *acltdtBuf;
typedef struct acltdtQueueAttr acltdtQueueAttr;
typedef struct acltdtQueueRoute acltdtQueueRoute;
typedef struct acltdtQueueRouteList acltdtQueueRouteList;
typedef struct acltdtQueueRouteQueryInfo acltdtQueueRouteQueryInfo;

/* Queue attributes: the name (param: a `const char *`, len = sizeof(char *)) and the
 * depth (param: a uint32_t, len = 4). */
typedef enum acltdtQueueAttrType {
    ACL_TDT_QUEUE_NAME_PTR = 0,
    ACL_TDT_QUEUE_DEPTH_UINT32 = 1
} acltdtQueueAttrType;

/* Route parameters (each 4 bytes). */
typedef enum acltdtQueueRouteParamType {
    ACL_TDT_QUEUE_ROUTE_SRC_UINT32 = 0,
    ACL_TDT_QUEUE_ROUTE_DST_UINT32 = 1,
    ACL_TDT_QUEUE_ROUTE_STATUS_INT32 = 2
} acltdtQueueRouteParamType;

/* Which routes acltdtQueryQueueRoutes returns. */
typedef enum acltdtQueueRouteQueryMode {
    ACL_TDT_QUEUE_ROUTE_QUERY_SRC = 0,
    ACL_TDT_QUEUE_ROUTE_QUERY_DST = 1,
    ACL_TDT_QUEUE_ROUTE_QUERY_SRC_AND_DST = 2,
    ACL_TDT_QUEUE_ROUTE_QUERY_ABNORMAL = 100
} acltdtQueueRouteQueryMode;

/* Query parameters: the mode (an acltdtQueueRouteQueryMode, 4 bytes) and the source and
 * destination queue ids (uint32_t). */
typedef enum acltdtQueueRouteQueryInfoParamType {
    ACL_TDT_QUEUE_ROUTE_QUERY_MODE_ENUM = 0,
    ACL_TDT_QUEUE_ROUTE_QUERY_SRC_ID_UINT32 = 1,
    ACL_TDT_QUEUE_ROUTE_QUERY_DST_ID_UINT32 = 2
} acltdtQueueRouteQueryInfoParamType;

/* ---------------------------------------------------------------------- queues */

/* Creates a queue; attr NULL = an automatic name and depth 8. */
ACL_FUNC_VISIBILITY aclError acltdtCreateQueue(const acltdtQueueAttr *attr, uint32_t *qid);
ACL_FUNC_VISIBILITY aclError acltdtDestroyQueue(uint32_t qid);
/* Enqueues a copy of data[0..dataSize) (host or device memory) with userDataSize (<= 96)
 * bytes of user data. timeout: -1 = wait while the queue is full, 0 = do not wait,
 * > 0 = milliseconds. rsv must be 0. */
ACL_FUNC_VISIBILITY aclError acltdtEnqueueData(uint32_t qid, const void *data, size_t dataSize,
                                               const void *userData, size_t userDataSize, int32_t timeout,
                                               uint32_t rsv);
/* Dequeues the oldest element into data (dataSize bytes); *retDataSize = its size. */
ACL_FUNC_VISIBILITY aclError acltdtDequeueData(uint32_t qid, void *data, size_t dataSize, size_t *retDataSize,
                                               void *userData, size_t userDataSize, int32_t timeout);
ACL_FUNC_VISIBILITY aclError acltdtEnqueue(uint32_t qid, acltdtBuf buf, int32_t timeout);
ACL_FUNC_VISIBILITY aclError acltdtDequeue(uint32_t qid, acltdtBuf *buf, int32_t timeout);
ACL_FUNC_VISIBILITY aclError acltdtGrantQueue(uint32_t qid, int32_t pid, uint32_t permission, int32_t timeout);
ACL_FUNC_VISIBILITY aclError acltdtAttachQueue(uint32_t qid, int32_t timeout, uint32_t *permission);

/* ---------------------------------------------------------------------- routes */

/* Binds (unbinds) every route of the list; succeeds only if all of them did. Each
 * route's status tells how it went. Routes may not form a cycle. */
ACL_FUNC_VISIBILITY aclError acltdtBindQueueRoutes(acltdtQueueRouteList *qRouteList);
ACL_FUNC_VISIBILITY aclError acltdtUnbindQueueRoutes(acltdtQueueRouteList *qRouteList);
/* Appends the bound routes matching queryInfo to qRouteList. */
ACL_FUNC_VISIBILITY aclError acltdtQueryQueueRoutes(const acltdtQueueRouteQueryInfo *queryInfo,
                                                    acltdtQueueRouteList *qRouteList);

/* ---------------------------------------------------------- attribute objects */

ACL_FUNC_VISIBILITY acltdtQueueAttr *acltdtCreateQueueAttr(void);
ACL_FUNC_VISIBILITY aclError acltdtDestroyQueueAttr(const acltdtQueueAttr *attr);
ACL_FUNC_VISIBILITY aclError acltdtSetQueueAttr(acltdtQueueAttr *attr, acltdtQueueAttrType type, size_t len,
                                                const void *param);
ACL_FUNC_VISIBILITY aclError acltdtGetQueueAttr(const acltdtQueueAttr *attr, acltdtQueueAttrType type, size_t len,
                                                size_t *paramRetSize, void *param);

ACL_FUNC_VISIBILITY acltdtQueueRoute *acltdtCreateQueueRoute(uint32_t srcId, uint32_t dstId);
ACL_FUNC_VISIBILITY aclError acltdtDestroyQueueRoute(const acltdtQueueRoute *route);
ACL_FUNC_VISIBILITY aclError acltdtGetQueueRouteParam(const acltdtQueueRoute *route,
                                                      acltdtQueueRouteParamType type, size_t len,
                                                      size_t *paramRetSize, void *param);

ACL_FUNC_VISIBILITY acltdtQueueRouteList *acltdtCreateQueueRouteList(void);
ACL_FUNC_VISIBILITY aclError acltdtDestroyQueueRouteList(const acltdtQueueRouteList *routeList);
/* Adds a copy of route. */
ACL_FUNC_VISIBILITY aclError acltdtAddQueueRoute(acltdtQueueRouteList *routeList, const acltdtQueueRoute *route);
/* Copies route `index` (0-based) into `route` (made by acltdtCreateQueueRoute). */
ACL_FUNC_VISIBILITY aclError acltdtGetQueueRoute(const acltdtQueueRouteList *routeList, size_t index,
                                                 acltdtQueueRoute *route);
ACL_FUNC_VISIBILITY size_t acltdtGetQueueRouteNum(const acltdtQueueRouteList *routeList);

ACL_FUNC_VISIBILITY acltdtQueueRouteQueryInfo *acltdtCreateQueueRouteQueryInfo(void);
ACL_FUNC_VISIBILITY aclError acltdtDestroyQueueRouteQueryInfo(const acltdtQueueRouteQueryInfo *param);
ACL_FUNC_VISIBILITY aclError acltdtSetQueueRouteQueryInfo(acltdtQueueRouteQueryInfo *param,
                                                          acltdtQueueRouteQueryInfoParamType type, size_t len,
                                                          const void *value);

/* ------------------------------------------------------------- shared buffers */

/* A buffer of size bytes (<= 4 GB) of memory type ACL_TDT_NORMAL_MEM. */
ACL_FUNC_VISIBILITY aclError acltdtAllocBuf(size_t size, uint32_t type, acltdtBuf *buf);
ACL_FUNC_VISIBILITY aclError acltdtFreeBuf(acltdtBuf buf);
/* The data area (a device address) and its size. */
ACL_FUNC_VISIBILITY aclError acltdtGetBufData(const acltdtBuf buf, void **dataPtr, size_t *size);
/* The valid-data length (0 until set; less than the data area size). */
ACL_FUNC_VISIBILITY aclError acltdtSetBufDataLen(acltdtBuf buf, size_t len);
ACL_FUNC_VISIBILITY aclError acltdtGetBufDataLen(acltdtBuf buf, size_t *len);
/* A new buffer object sharing buf's data area. */
ACL_FUNC_VISIBILITY aclError acltdtCopyBufRef(const acltdtBuf buf, acltdtBuf *newBuf);
/* Chains (at most 128 buffers, indexes from 0). */
ACL_FUNC_VISIBILITY aclError acltdtAppendBufChain(acltdtBuf headBuf, acltdtBuf buf);
ACL_FUNC_VISIBILITY aclError acltdtGetBufChainNum(acltdtBuf headBuf, uint32_t *num);
ACL_FUNC_VISIBILITY aclError acltdtGetBufFromChain(acltdtBuf headBuf, uint32_t index, acltdtBuf *buf);
/* The 96-byte private user-data area: offset + size <= 96. */
ACL_FUNC_VISIBILITY aclError acltdtGetBufUserData(const acltdtBuf buf, void *dataPtr, size_t size, size_t offset);
ACL_FUNC_VISIBILITY aclError acltdtSetBufUserData(acltdtBuf buf, const void *dataPtr, size_t size, size_t offset);

#ifdef __cplusplus
}
#endif

#endif /* PYACL_RT_MOCK_ACL_ACL_TDT_QUEUE_H_ */
