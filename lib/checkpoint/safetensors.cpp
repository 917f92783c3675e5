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
}  // namespace

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const NamedTensor& t : tensors) {
    const size_t bytes = t.tensor.bytes();
    header[t.name] = {{"dtype", st_dtype(t.tensor.dtype())},
                      {"shape", t.tensor.shape()},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // The data section starts 8-byte aligned: pad the header with spaces (allowed by the spec).
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');

  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
    const uint64_t n = text.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
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
