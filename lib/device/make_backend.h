#pragma once
// The one place that turns a job's `device` into a compute backend: the CPU backend is
// built in, the CUDA backend comes from the plugin (device/cuda_plugin.h).
#include <cstddef>
#include <memory>

#include "ops/backend.h"

namespace trainctl::device {

// A backend for `device`; `gpu` is the index among the visible GPUs (CUDA_VISIBLE_DEVICES
// order) and is ignored for the CPU. Throws DeviceUnavailable (device/cuda_plugin.h) when
// device: cuda cannot run here, std::out_of_range for a GPU index that does not exist.
std::unique_ptr<ops::Backend> make_backend(Device device, const ops::BackendOptions& options,
                                           int gpu = 0);

// Peak bytes the backend's device allocator has handed out so far (the CUDA backend's
// caching allocator); 0 for the CPU backend, which allocates from the heap.
size_t peak_device_bytes(const ops::Backend& backend);

}  // namespace trainctl::device
