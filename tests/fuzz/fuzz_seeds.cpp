// Writes the starting corpus of the binary fuzz targets with the project's own writers,
// so the fuzzers begin from files trainctl really produces (and no binary file is kept in
// git). Usage: fuzz_seeds OUT_DIR  ->  OUT_DIR/token_file/*, OUT_DIR/safetensors/*.
// (The spec and metadata targets start from text files in the source tree.)
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "data/token_file.h"

using namespace trainctl;
namespace fs = std::filesystem;

namespace {

void write_bytes(const fs::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::vector<char> tokens_bytes(int count, bool llmc_header) {
  std::vector<int32_t> header(data::TokenFile::kLlmcHeaderInts, 0);
  header[0] = data::TokenFile::kLlmcMagic;
  header[1] = data::TokenFile::kLlmcVersion;
  header[2] = count;
  std::vector<char> bytes;
  if (llmc_header) {
    const char* h = reinterpret_cast<const char*>(header.data());
    bytes.assign(h, h + data::TokenFile::kLlmcHeaderBytes);
  }
  for (int i = 0; i < count; ++i) {
    const uint16_t token = static_cast<uint16_t>((i * 7919) % 300);
    bytes.push_back(static_cast<char>(token & 0xff));
    bytes.push_back(static_cast<char>(token >> 8));
  }
  return bytes;
}

Tensor filled(Shape shape, float start) {
  Tensor t = Tensor::zeros(std::move(shape));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = start + static_cast<float>(i);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  fs::create_directories(out / "token_file");
  fs::create_directories(out / "safetensors");

  write_bytes(out / "token_file" / "llmc_64.bin", tokens_bytes(64, true));
  write_bytes(out / "token_file" / "llmc_1.bin", tokens_bytes(1, true));
  write_bytes(out / "token_file" / "raw_64.bin", tokens_bytes(64, false));

  checkpoint::write_safetensors(out / "safetensors" / "two.safetensors",
                                {{"wte", filled({4, 3}, 0.f)}, {"bias", filled({3}, 100.f)}},
                                {{"format", "pt"}});
  checkpoint::write_safetensors(out / "safetensors" / "scalar_and_empty.safetensors",
                                {{"scale", filled({}, 1.f)}, {"none", filled({0, 5}, 0.f)}});
  return 0;
}
