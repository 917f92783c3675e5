#pragma once
// Small helpers the input-checking unit tests share: a scratch directory removed at the
// end of the test, and the message of the InputError a call throws.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <system_error>

#include "util/error.h"

namespace trainctl::test {

struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const std::string& tag)
      : path(std::filesystem::temp_directory_path() /
             ("trainctl_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

// The message of the InputError that f() throws; fails the test if it throws none.
template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("expected an InputError");
  return {};
}

}  // namespace trainctl::test
