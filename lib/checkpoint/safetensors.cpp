#include "checkpoint/safetensors.h"

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
  const uint64_t data_bytes = index.file_size - index.data_start;
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        index.metadata = it.value().get<std::map<std::string, std::string>>();
        continue;
      }
      SafetensorsEntry e;
      e.name = it.key();
      e.dtype = it.value().at("dtype").get<std::string>();
      e.shape = it.value().at("shape").get<Shape>();
      e.begin = it.value().at("data_offsets").at(0).get<uint64_t>();
      e.end = it.value().at("data_offsets").at(1).get<uint64_t>();
      const uint64_t want = static_cast<uint64_t>(numel_of(e.shape)) * st_dtype_size(e.dtype);
      if (e.end < e.begin || e.end - e.begin != want) {
        throw std::runtime_error(path.string() + ": bad data_offsets for " + e.name);
      }
      if (e.end > data_bytes) {
        throw std::runtime_error(path.string() + ": truncated: " + e.name + " ends at byte " +
                                 std::to_string(index.data_start + e.end) + " but the file has " +
                                 std::to_string(index.file_size));
      }
      index.tensors.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": damaged safetensors header: " + e.what());
  }
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
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) throw std::runtime_error(path.string() + ": truncated safetensors header");
  const auto header = nlohmann::ordered_json::parse(text);  // keep file order
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<NamedTensor> out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    if (it.value().at("dtype") != "F32") {
      throw std::runtime_error(path.string() + ": " + it.key() + " is not F32");
    }
    const Shape shape = it.value().at("shape").get<Shape>();
    const auto begin = it.value().at("data_offsets")[0].get<size_t>();
    const auto end = it.value().at("data_offsets")[1].get<size_t>();
    Tensor t = Tensor::zeros(shape);
    if (end > data.size() || end - begin != t.bytes()) {
      throw std::runtime_error(path.string() + ": bad data_offsets for " + it.key());
    }
    std::memcpy(t.raw(), data.data() + begin, t.bytes());
    out.push_back({it.key(), t});
  }
  return out;
}

}  // namespace trainctl::checkpoint
