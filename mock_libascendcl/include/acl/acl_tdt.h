/*
 * acl/acl_tdt.h - tensor data transfer (TDT) channels between the host and a device,
 * and the data items and datasets they carry. Implemented by libacl_tdt_channel.so.
 *
 * Part of mock_libascendcl: declarations written for this project from the documented
 * API (names, parameters, values; no vendor text). Unlike CANN's header it is valid C
 * (C99 and later) as well as C++: acltdtTensorType is a typedef.
 */
#ifndef PYACL_RT_MOCK_ACL_ACL_TDT_H_
#define PYACL_RT_MOCK_ACL_ACL_TDT_H_

#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a data item carries. */
typedef enum acltdtTensorType {
    ACL_TENSOR_DATA_UNDEFINED = -1,
    ACL_TENSOR_DATA_TENSOR = 0,
    ACL_TENSOR_DATA_END_OF_SEQUENCE = 1,
    ACL_TENSOR_DATA_ABNORMAL = 2,
    ACL_TENSOR_DATA_SLICE_TENSOR = 3, /* one slice of a sliced tensor */
    ACL_TENSOR_DATA_END_TENSOR = 4    /* the last slice */
} acltdtTensorType;

typedef struct acltdtDataItem acltdtDataItem;
typedef struct acltdtDataset acltdtDataset;
typedef struct acltdtChannelHandle acltdtChannelHandle;

/* ------------------------------------------------------------------ data items */

/* A tensor (dims[dimNum], dataType) whose bytes are data[0..size); the item refers to
 * `data`, which must stay valid while the item is used. NULL on failure. */
ACL_FUNC_VISIBILITY acltdtDataItem *acltdtCreateDataItem(acltdtTensorType tdtType, const int64_t *dims,
                                                         size_t dimNum, aclDataType dataType, void *data,
                                                         size_t size);
ACL_FUNC_VISIBILITY aclError acltdtDestroyDataItem(acltdtDataItem *dataItem);
/* ACL_TENSOR_DATA_UNDEFINED for a NULL item. */
ACL_FUNC_VISIBILITY acltdtTensorType acltdtGetTensorTypeFromItem(const acltdtDataItem *dataItem);
/* ACL_DT_UNDEFINED for a NULL item. */
ACL_FUNC_VISIBILITY aclDataType acltdtGetDataTypeFromItem(const acltdtDataItem *dataItem);
/* NULL / 0 for a NULL item. */
ACL_FUNC_VISIBILITY void *acltdtGetDataAddrFromItem(const acltdtDataItem *dataItem);
ACL_FUNC_VISIBILITY size_t acltdtGetDataSizeFromItem(const acltdtDataItem *dataItem);
ACL_FUNC_VISIBILITY size_t acltdtGetDimNumFromItem(const acltdtDataItem *dataItem);
/* Copies the dims into dims[0..dimNum); dimNum must be the item's dimension count. */
ACL_FUNC_VISIBILITY aclError acltdtGetDimsFromItem(const acltdtDataItem *dataItem, int64_t *dims, size_t dimNum);
/* Number of slices of the tensor the item belongs to and the item's index among them. */
ACL_FUNC_VISIBILITY aclError acltdtGetSliceInfoFromItem(const acltdtDataItem *dataItem, size_t *sliceNum,
                                                        size_t *sliceId);

/* -------------------------------------------------------------------- datasets */

/* An ordered list of data items. NULL on failure. */
ACL_FUNC_VISIBILITY acltdtDataset *acltdtCreateDataset(void);
/* Destroys the dataset, not its items. */
ACL_FUNC_VISIBILITY aclError acltdtDestroyDataset(acltdtDataset *dataset);
/* Item `index` (0-based), or NULL. */
ACL_FUNC_VISIBILITY acltdtDataItem *acltdtGetDataItem(const acltdtDataset *dataset, size_t index);
ACL_FUNC_VISIBILITY aclError acltdtAddDataItem(acltdtDataset *dataset, acltdtDataItem *dataItem);
/* Number of items (0 for NULL). */
ACL_FUNC_VISIBILITY size_t acltdtGetDatasetSize(const acltdtDataset *dataset);
/* Name of the channel a received dataset came from ("" before any), NULL for NULL. */
ACL_FUNC_VISIBILITY const char *acltdtGetDatasetName(const acltdtDataset *dataset);

/* -------------------------------------------------------------------- channels */

/* A channel named channelName to device deviceId. NULL on failure. Stop it with
 * acltdtStopChannel, then destroy it with acltdtDestroyChannel. */
ACL_FUNC_VISIBILITY acltdtChannelHandle *acltdtCreateChannel(uint32_t deviceId, const char *name);
/* A channel holding at most capacity (2..8192) datasets. */
ACL_FUNC_VISIBILITY acltdtChannelHandle *acltdtCreateChannelWithCapacity(uint32_t deviceId, const char *name,
                                                                         size_t capacity);
/* Wakes every thread blocked on the channel; later sends and receives fail. Call it from
 * another thread than the blocked ones. */
ACL_FUNC_VISIBILITY aclError acltdtStopChannel(acltdtChannelHandle *handle);
ACL_FUNC_VISIBILITY aclError acltdtDestroyChannel(acltdtChannelHandle *handle);
/* Host to device. timeout: -1 = wait until sent, 0 = fail at once when the channel is
 * full, > 0 = milliseconds. */
ACL_FUNC_VISIBILITY aclError acltdtSendTensor(const acltdtChannelHandle *handle, const acltdtDataset *dataset,
                                              int32_t timeout);
/* Device to host, into `dataset` (its items are replaced). Same timeouts, "empty"
 * instead of "full". */
ACL_FUNC_VISIBILITY aclError acltdtReceiveTensor(const acltdtChannelHandle *handle, acltdtDataset *dataset,
                                                 int32_t timeout);
/* Number of datasets queued in a channel made with a capacity. */
ACL_FUNC_VISIBILITY aclError acltdtQueryChannelSize(const acltdtChannelHandle *handle, size_t *size);
/* Drops every dataset queued in a channel made with a capacity. */
ACL_FUNC_VISIBILITY aclError acltdtCleanChannel(acltdtChannelHandle *handle);

#ifdef __cplusplus
}
#endif

#endif /* PYACL_RT_MOCK_ACL_ACL_TDT_H_ */
