/* What this llama.cpp build can run on: its compute devices, CPU features and GPU offload. */
#include <stdint.h>

#include "newrllama_internal.h"

bool newrllama_supports_gpu_offload(void) { return llama_supports_gpu_offload(); }

const char *newrllama_system_info(void) { return llama_print_system_info(); }

int32_t newrllama_device_count(void) {
    size_t n = ggml_backend_dev_count();
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

static int32_t device_kind(enum ggml_backend_dev_type type) {
    switch (type) {
        case GGML_BACKEND_DEVICE_TYPE_CPU: return NEWRLLAMA_DEVICE_CPU;
        case GGML_BACKEND_DEVICE_TYPE_GPU: return NEWRLLAMA_DEVICE_GPU;
        case GGML_BACKEND_DEVICE_TYPE_IGPU: return NEWRLLAMA_DEVICE_IGPU;
        case GGML_BACKEND_DEVICE_TYPE_ACCEL: return NEWRLLAMA_DEVICE_ACCEL;
        default: return NEWRLLAMA_DEVICE_OTHER;
    }
}

newrllama_error_code newrllama_device_get(int32_t index, newrllama_device_info *info_out,
                                          const char **error_message) {
    nr_clear_error(error_message);
    if (!info_out) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "info_out is NULL");
    }
    int32_t n = newrllama_device_count();
    if (index < 0 || index >= n) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "device index %d is outside [0, %d)", index, n);
    }
    ggml_backend_dev_t dev = ggml_backend_dev_get((size_t)index);
    size_t free_bytes = 0, total_bytes = 0;
    ggml_backend_dev_memory(dev, &free_bytes, &total_bytes);
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    info_out->name = ggml_backend_dev_name(dev);
    info_out->description = ggml_backend_dev_description(dev);
    info_out->backend = reg ? ggml_backend_reg_name(reg) : "";
    info_out->kind = device_kind(ggml_backend_dev_type(dev));
    info_out->memory_free = (uint64_t)free_bytes;
    info_out->memory_total = (uint64_t)total_bytes;
    return NEWRLLAMA_OK;
}
