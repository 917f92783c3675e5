// The CPU binary does not depend on CUDA: its dynamic section names none of the CUDA
// libraries, it trains with the CUDA library directories hidden, and `device: cuda`
// without a GPU is refused with exit code 2 before any worker starts.
#include <elf.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

// DT_NEEDED entries of an ELF64 file, read from its section headers (.dynamic and the
// string table it links to).
std::vector<std::string> needed_libraries(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> data((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
  REQUIRE(data.size() > sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, data.data(), sizeof eh);
  REQUIRE(std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0);
  REQUIRE(eh.e_ident[EI_CLASS] == ELFCLASS64);
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    REQUIRE(eh.e_shoff + (i + 1) * sizeof sh <= data.size());
    std::memcpy(&sh, data.data() + eh.e_shoff + i * eh.e_shentsize, sizeof sh);
    return sh;
  };
  std::vector<std::string> out;
  bool found_dynamic = false;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sh = section(i);
    if (sh.sh_type != SHT_DYNAMIC) continue;
    found_dynamic = true;
    const Elf64_Shdr strtab = section(sh.sh_link);
    for (size_t off = 0; off + sizeof(Elf64_Dyn) <= sh.sh_size; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn dyn;
      std::memcpy(&dyn, data.data() + sh.sh_offset + off, sizeof dyn);
      if (dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag == DT_NEEDED) out.emplace_back(data.data() + strtab.sh_offset + dyn.d_un.d_val);
    }
  }
  REQUIRE(found_dynamic);
  return out;
}

std::string without_cuda_dirs(const char* path) {
  std::string out;
  std::stringstream ss(path != nullptr ? path : "");
  for (std::string dir; std::getline(ss, dir, ':');) {
    if (dir.empty() || dir.find("cuda") != std::string::npos ||
        dir.find("nccl") != std::string::npos || dir.find("cudnn") != std::string::npos) {
      continue;
    }
    out += (out.empty() ? "" : ":") + dir;
  }
  return out;
}

fs::path tiny_job(const fs::path& dir, const std::string& device) {
  const fs::path file = dir / ("tiny-" + device + ".yaml");
  write_text(file,
             "name: tiny-" + device + "\nseed: 3\ndevice: " + device +
                 "\nmodel: {vocab_size: 64, seq_len: 16, n_layer: 1, n_head: 2, d_model: 16}\n"
                 "data: {type: synthetic}\nparallel: {dp: 1}\n"
                 "training: {steps: 3, micro_batch_size: 2, global_batch_size: 2}\n"
                 "logging: {every_steps: 1}\nruntime: {comm_timeout_s: 30}\n");
  return file;
}

}  // namespace

TEST_CASE("the trainctl binary links no CUDA library", "[cuda_absent]") {
  const auto needed = needed_libraries(TRAINCTL_BINARY);
  REQUIRE_FALSE(needed.empty());  // libc at least: the parser read the right table
  for (const std::string& lib : needed) {
    INFO("DT_NEEDED " << lib);
    for (const char* banned : {"libcuda", "libcudart", "libcublas", "libcudnn", "libnccl",
                               "libnvrtc", "libtrainctl_cuda"}) {
      CHECK(lib.find(banned) == std::string::npos);
    }
  }
}

TEST_CASE("trainctl trains on the CPU with the CUDA library directories hidden", "[cuda_absent]") {
  TempDir dir("cuda-absent");
  const fs::path job = tiny_job(dir.path(), "cpu");
  Proc p({"-u", "LD_LIBRARY_PATH",
          "LD_LIBRARY_PATH=" + without_cuda_dirs(std::getenv("LD_LIBRARY_PATH")), TRAINCTL_BINARY,
          "train", job.string()},
         dir.path(), {}, "/usr/bin/env");
  const ProcResult r = p.wait(std::chrono::seconds(120));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(dir.path() / "runs" / "tiny-cpu" / "metrics.jsonl"));
}

TEST_CASE("device: cuda where it cannot run exits 2 naming the device", "[cuda_absent]") {
  TempDir dir("cuda-refused");
  const fs::path job = tiny_job(dir.path(), "cuda");
  // An explicit missing plugin: refused here whether or not this machine has a GPU.
  Proc p({"train", job.string()}, dir.path(),
         {{"TRAINCTL_CUDA_PLUGIN", (dir.path() / "missing" / "libtrainctl_cuda.so").string()}});
  const ProcResult r = p.wait(std::chrono::seconds(60));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out + r.err, Catch::Contains("device"));
  CHECK_THAT(r.out + r.err, Catch::Contains("cuda"));
  CHECK_FALSE(fs::exists(dir.path() / "runs" / "tiny-cuda" / "logs" / "rank0.log"));
}
