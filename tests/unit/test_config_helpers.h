#pragma once
// Shared by the test_config*.cpp files: run the spec parser on inline YAML and look at the
// InputError it raises.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "config/load.h"
#include "util/error.h"

namespace trainctl::config::testing {

// The message of the InputError that parsing `yaml` (origin "job.yaml") raises; fails the
// test if nothing is thrown.
inline std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {},
                            const std::filesystem::path& base_dir = "/tmp") {
  try {
    parse_job_spec(yaml, "job.yaml", base_dir, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("no InputError for:\n" << yaml);
  return "";
}

// Asserts the error names `where` (e.g. "job.yaml:7:" or "--set parallel.tp=3:") at its start,
// the key path, and every extra fragment.
inline void require_error(const std::string& yaml, const std::string& where,
                          const std::string& key_path,
                          const std::vector<std::string>& fragments = {},
                          const std::vector<std::string>& overrides = {},
                          const std::filesystem::path& base_dir = "/tmp") {
  const std::string message = error_of(yaml, overrides, base_dir);
  INFO("message: " << message);
  CHECK(message.rfind(where, 0) == 0);
  if (!key_path.empty()) CHECK(message.find(" " + key_path + ": ") != std::string::npos);
  for (const std::string& fragment : fragments) CHECK(message.find(fragment) != std::string::npos);
}

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::random_device seed;
    path_ = std::filesystem::temp_directory_path() /
            ("trainctl-config-test-" + std::to_string(seed()) + std::to_string(seed()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `bytes` characters of text to `name` and returns its path.
  std::filesystem::path write(const std::string& name, size_t bytes) const {
    std::ofstream out(path_ / name, std::ios::binary);
    for (size_t i = 0; i < bytes; ++i) out.put(static_cast<char>('a' + i % 26));
    return path_ / name;
  }
  std::filesystem::path write_text(const std::string& name, const std::string& text) const {
    std::ofstream out(path_ / name, std::ios::binary);
    out << text;
    return path_ / name;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace trainctl::config::testing
