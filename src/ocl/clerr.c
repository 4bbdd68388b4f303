/* OpenCL and CLBlast status codes by name, for error messages. */
#include "ocl/internal.h"

#include "core/err.h"

#include <clblast_c.h>

const char *ht_clerr_name(cl_int err) {
    switch (err) {
#define E(x) case x: return #x;
        E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
        E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
        E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_IMAGE_FORMAT_MISMATCH)
        E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
        E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE)
        E(CL_DEVICE_PARTITION_FAILED) E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E(CL_INVALID_VALUE)
        E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
        E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
        E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E(CL_INVALID_IMAGE_SIZE)
        E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM)
        E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL_DEFINITION)
        E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
        E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
        E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST)
        E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT)
        E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE)
        E(CL_INVALID_PROPERTY) E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS)
        E(CL_INVALID_LINKER_OPTIONS) E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    /* CLBlast's own status codes (clblast_c.h); the others equal CL codes */
    case CLBlastNotImplemented: return "CLBlastNotImplemented";
    case CLBlastInvalidMatrixA: return "CLBlastInvalidMatrixA";
    case CLBlastInvalidMatrixB: return "CLBlastInvalidMatrixB";
    case CLBlastInvalidMatrixC: return "CLBlastInvalidMatrixC";
    case CLBlastInvalidVectorX: return "CLBlastInvalidVectorX";
    case CLBlastInvalidVectorY: return "CLBlastInvalidVectorY";
    case CLBlastInvalidDimension: return "CLBlastInvalidDimension";
    case CLBlastInvalidLeadDimA: return "CLBlastInvalidLeadDimA";
    case CLBlastInvalidLeadDimB: return "CLBlastInvalidLeadDimB";
    case CLBlastInvalidLeadDimC: return "CLBlastInvalidLeadDimC";
    case CLBlastInvalidIncrementX: return "CLBlastInvalidIncrementX";
    case CLBlastInvalidIncrementY: return "CLBlastInvalidIncrementY";
    case CLBlastInsufficientMemoryA: return "CLBlastInsufficientMemoryA";
    case CLBlastInsufficientMemoryB: return "CLBlastInsufficientMemoryB";
    case CLBlastInsufficientMemoryC: return "CLBlastInsufficientMemoryC";
    case CLBlastInsufficientMemoryX: return "CLBlastInsufficientMemoryX";
    case CLBlastInsufficientMemoryY: return "CLBlastInsufficientMemoryY";
    case CLBlastInsufficientMemoryTemp: return "CLBlastInsufficientMemoryTemp";
    case CLBlastInvalidBatchCount: return "CLBlastInvalidBatchCount";
    case CLBlastInvalidOverrideKernel: return "CLBlastInvalidOverrideKernel";
    case CLBlastMissingOverrideParameter: return "CLBlastMissingOverrideParameter";
    case CLBlastInvalidLocalMemUsage: return "CLBlastInvalidLocalMemUsage";
    case CLBlastNoHalfPrecision: return "CLBlastNoHalfPrecision";
    case CLBlastNoDoublePrecision: return "CLBlastNoDoublePrecision";
    case CLBlastInvalidVectorScalar: return "CLBlastInvalidVectorScalar";
    case CLBlastInsufficientMemoryScalar: return "CLBlastInsufficientMemoryScalar";
    case CLBlastDatabaseError: return "CLBlastDatabaseError";
    case CLBlastUnknownError: return "CLBlastUnknownError";
    case CLBlastUnexpectedError: return "CLBlastUnexpectedError";
    default: return "unknown OpenCL error";
    }
}

void ht_cl_fail(const ht_dev *d, const char *call, cl_int err, const char *file, int line) {
    const char *dev = d ? d->info.name : "(no device)";
    const char *hint = "";
    if (err == CL_OUT_OF_RESOURCES || err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
        err == CL_OUT_OF_HOST_MEMORY)
        hint = " (the device ran out of memory or resources: try a smaller train.batch or model)";
    ht_die(HT_ERUNTIME, "device '%s': %s failed: %s (%d) at %s:%d%s", dev, call,
           ht_clerr_name(err), (int)err, file, line, hint);
}
