#pragma once
// The safetensors file format (an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw data), written
// atomically: to a temporary file that is renamed into place only when complete.
#include <cstdint>
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

// One tensor's entry in a safetensors header: byte range [begin, end) relative to the start
// of the data section.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "BF16", "F16", ...
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The first bytes of a safetensors file (8-byte length + JSON header padded so the data
// section starts 8-byte aligned) for `tensors` stored back to back in this order; for
// writers that stream the data themselves. Entries' begin/end are ignored (recomputed).
std::string encode_safetensors_header(const std::vector<SafetensorsEntry>& tensors,
                                      const std::map<std::string, std::string>& metadata = {});

// A file's header without its data: where each tensor's bytes lie, in file order.
struct SafetensorsIndex {
  std::vector<SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;  // __metadata__
  uint64_t data_start = 0;                      // file offset of the data section
  uint64_t file_size = 0;
};

// Reads and checks the header of `path`: every tensor has a known dtype and a shape whose
// element count does not overflow, its byte range lies inside the file and is exactly dtype
// size x elements long, and the ranges tile the data section (no two tensors share a byte,
// no byte belongs to none), as the format requires. Throws std::runtime_error naming the file
// and the tensor when it is not a well-formed safetensors file (truncated, a header edited
// so two tensors overlap, ...).
SafetensorsIndex read_safetensors_index(const std::filesystem::path& path);

// Reads every tensor into owned fp32 tensors (F32 files only; the header checked as above);
// for tests and tools.
std::vector<NamedTensor> read_safetensors(const std::filesystem::path& path);

}  // namespace trainctl::checkpoint
