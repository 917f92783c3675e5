#pragma once
// The safetensors file format (an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw data), written
// atomically: to a temporary file that is renamed into place only when complete.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace trainctl::checkpoint {

struct NamedTensor {
  std::string name;
  Tensor tensor;  // CPU memory
};

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads every tensor into owned fp32 tensors (F32 files only); for tests and tools.
std::vector<NamedTensor> read_safetensors(const std::filesystem::path& path);

}  // namespace trainctl::checkpoint
