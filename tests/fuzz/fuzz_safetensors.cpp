// Fuzz target: the safetensors reader (checkpoint/safetensors.h), which every resume,
// `ckpt verify` and `ckpt export` runs on files that may be damaged or edited. The input is
// the file's bytes. Checks beyond "no crash": an accepted header really tiles the data
// section (an independent re-check of what the reader promises), and reading the tensors
// of an accepted F32 file gives exactly the shapes the header names.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "fuzz_support.h"

using namespace trainctl;

namespace {

uint64_t bytes_per_element(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  return 1;
}

// The reader's promise, checked from the outside: ranges sorted by offset are back to back
// from 0 to the end of the file, each exactly dtype size x elements long.
void check_tiling(const checkpoint::SafetensorsIndex& index, size_t file_size) {
  fuzz::require(index.file_size == file_size, "index.file_size is not the file's size");
  fuzz::require(index.data_start >= 8 && index.data_start <= file_size,
                "data section outside the file");
  std::vector<checkpoint::SafetensorsEntry> entries = index.tensors;
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.begin < b.begin; });
  uint64_t next = 0;
  for (const auto& e : entries) {
    fuzz::require(e.begin == next, "tensors overlap or leave a gap");
    uint64_t elements = 1;
    for (const auto extent : e.shape) {
      fuzz::require(extent >= 0, "negative extent accepted");
      fuzz::require(extent == 0 || elements <= UINT64_MAX / static_cast<uint64_t>(extent),
                    "shape overflows");
      elements *= static_cast<uint64_t>(extent);
    }
    fuzz::require(e.end - e.begin == elements * bytes_per_element(e.dtype),
                  "range size is not dtype x shape");
    next = e.end;
  }
  fuzz::require(next == file_size - index.data_start, "tensors do not fill the data section");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemoryFile file;  // one memfd per process, rewritten for each input
  const std::string path = file.write(data, size);
  checkpoint::SafetensorsIndex index;
  try {
    index = checkpoint::read_safetensors_index(path);
  } catch (const std::runtime_error&) {
    return 0;  // documented: not a well-formed safetensors file
  }
  check_tiling(index, size);
  const bool all_f32 = std::all_of(index.tensors.begin(), index.tensors.end(),
                                   [](const auto& e) { return e.dtype == "F32"; });
  if (!all_f32) return 0;
  try {
    const auto tensors = checkpoint::read_safetensors(path);
    fuzz::require(tensors.size() == index.tensors.size(), "read_safetensors lost a tensor");
    for (size_t i = 0; i < tensors.size(); ++i) {
      fuzz::require(tensors[i].name == index.tensors[i].name,
                    "tensor order differs from the index");
      fuzz::require(tensors[i].tensor.shape() == index.tensors[i].shape,
                    "tensor shape differs from the header");
    }
  } catch (const std::runtime_error&) {
    fuzz::require(false, "read_safetensors refused a file whose index was accepted");
  }
  return 0;
}
