#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace trainctl::checkpoint {

namespace {
const char* st_dtype(DType d) {
  switch (d) {
    case DType::fp32:
      return "F32";
    case DType::bf16:
      return "BF16";
    case DType::fp16:
      return "F16";
  }
  return "F32";
}

size_t st_dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

uint64_t read_u64_le(const unsigned char* b) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(b[i]) << (8 * i);
  return n;
}

// The reference implementation's limit: a larger header is not a safetensors file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr uint64_t kMaxElements = uint64_t{1} << 40;

[[noreturn]] void bad_header(const std::filesystem::path& path, const std::string& problem) {
  throw std::runtime_error(path.string() + ": damaged safetensors header: " + problem);
}

// One tensor's entry: a known dtype, a shape of non-negative extents whose product does not
// overflow, and a byte range of exactly dtype size x elements inside the data section.
SafetensorsEntry parse_entry(const std::filesystem::path& path, const std::string& name,
                             const nlohmann::ordered_json& v, uint64_t data_bytes) {
  SafetensorsEntry e;
  e.name = name;
  e.dtype = v.at("dtype").get<std::string>();
  const size_t dtype_bytes = st_dtype_size(e.dtype);
  if (dtype_bytes == 0) bad_header(path, name + " has unknown dtype \"" + e.dtype + "\"");
  if (!v.at("shape").is_array()) bad_header(path, name + " has shape " + v.at("shape").dump());
  uint64_t elements = 1;
  for (const auto& d : v.at("shape")) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > kMaxElements) {
      bad_header(path, name + " has shape " + v.at("shape").dump() +
                           " (extents must be integers in [0, 2^40])");
    }
    const uint64_t extent = d.get<uint64_t>();
    if (extent != 0 && elements > kMaxElements / extent) {
      bad_header(path, name + " has shape " + v.at("shape").dump() + " (more than 2^40 elements)");
    }
    elements *= extent;
    e.shape.push_back(static_cast<int64_t>(extent));
  }
  const auto& offsets = v.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    bad_header(path, name + " has data_offsets " + offsets.dump() + " (want [begin, end])");
  }
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  const uint64_t want = elements * dtype_bytes;
  if (e.end < e.begin || e.end - e.begin != want) {
    throw std::runtime_error(path.string() + ": bad data_offsets for " + e.name + ": [" +
                             std::to_string(e.begin) + ", " + std::to_string(e.end) + ") is not " +
                             std::to_string(want) + " bytes (" + e.dtype + " x " +
                             std::to_string(elements) + " elements)");
  }
  if (e.end > data_bytes) {
    throw std::runtime_error(path.string() + ": truncated: " + e.name + " ends at byte " +
                             std::to_string(e.end) + " of the data section but the file holds " +
                             std::to_string(data_bytes) + " data bytes");
  }
  return e;
}

// The tensors tile the data section exactly, as the format requires: no two share a byte
// (one would silently read the other's values) and no byte belongs to none.
void check_byte_ranges(const std::filesystem::path& path,
                       const std::vector<SafetensorsEntry>& tensors, uint64_t data_bytes) {
  std::vector<const SafetensorsEntry*> order;
  for (const SafetensorsEntry& e : tensors) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* e : order) {
    if (e->begin < at) {
      bad_header(path, e->name + " (bytes [" + std::to_string(e->begin) + ", " +
                           std::to_string(e->end) + ")) overlaps " + previous->name + " (bytes [" +
                           std::to_string(previous->begin) + ", " + std::to_string(previous->end) +
                           "))");
    }
    if (e->begin > at) {
      bad_header(path, "bytes [" + std::to_string(at) + ", " + std::to_string(e->begin) +
                           ") of the data section belong to no tensor");
    }
    at = e->end;
    previous = e;
  }
  if (at != data_bytes) {
    bad_header(path, "bytes [" + std::to_string(at) + ", " + std::to_string(data_bytes) +
                         ") of the data section belong to no tensor");
  }
}

}  // namespace

std::string encode_safetensors_header(const std::vector<SafetensorsEntry>& tensors,
                                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(numel_of(t.shape)) * st_dtype_size(t.dtype);
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // The data section starts 8-byte aligned: pad the header with spaces (allowed by the spec).
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

SafetensorsIndex read_safetensors_index(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  SafetensorsIndex index;
  std::error_code ec;
  index.file_size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error("cannot read the size of " + path.string());
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  if (!in) throw std::runtime_error(path.string() + ": truncated safetensors file (no header)");
  const uint64_t n = read_u64_le(len);
  if (n > index.file_size - 8) {
    throw std::runtime_error(path.string() + ": truncated safetensors header (" +
                             std::to_string(n) + " bytes announced, file has " +
                             std::to_string(index.file_size) + ")");
  }
  if (n > kMaxHeaderBytes) {
    throw std::runtime_error(path.string() + ": safetensors header of " + std::to_string(n) +
                             " bytes (more than the format's limit of 100 MB)");
  }
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) throw std::runtime_error(path.string() + ": truncated safetensors header");
  index.data_start = 8 + n;
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(text);  // keep file order
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": damaged safetensors header: " + e.what());
  }
  if (!header.is_object()) {
    throw std::runtime_error(path.string() + ": damaged safetensors header: not a JSON object");
  }
  const uint64_t data_bytes = index.file_size - index.data_start;
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        index.metadata = it.value().get<std::map<std::string, std::string>>();
        continue;
      }
      index.tensors.push_back(parse_entry(path, it.key(), it.value(), data_bytes));
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": damaged safetensors header: " + e.what());
  }
  check_byte_ranges(path, index.tensors, data_bytes);
  return index;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsEntry> entries;
  for (const NamedTensor& t : tensors) {
    entries.push_back({t.name, st_dtype(t.tensor.dtype()), t.tensor.shape(), 0, 0});
  }
  const std::string text = encode_safetensors_header(entries, metadata);
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const NamedTensor& t : tensors) {
      out.write(static_cast<const char*>(t.tensor.raw()),
                static_cast<std::streamsize>(t.tensor.bytes()));
    }
    out.flush();
    if (!out) throw std::runtime_error("write failed: " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

std::vector<NamedTensor> read_safetensors(const std::filesystem::path& path) {
  const SafetensorsIndex index = read_safetensors_index(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::vector<NamedTensor> out;
  for (const SafetensorsEntry& e : index.tensors) {
    if (e.dtype != "F32") throw std::runtime_error(path.string() + ": " + e.name + " is not F32");
    Tensor t = Tensor::zeros(e.shape);
    in.seekg(static_cast<std::streamoff>(index.data_start + e.begin));
    in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
    if (!in) throw std::runtime_error("cannot read " + e.name + " from " + path.string());
    out.push_back({e.name, t});
  }
  return out;
}

}  // namespace trainctl::checkpoint
