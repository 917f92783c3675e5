// The device layer on machines without a GPU: finding and refusing the CUDA plugin with
// messages that say what is missing, and the CPU path of make_backend.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "device/cuda_plugin.h"
#include "device/make_backend.h"
#include "device/nccl_groups.h"

#include <gloo/rendezvous/hash_store.h>

using namespace trainctl;

namespace {

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::filesystem::path temp_file(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  std::ofstream(p) << text;
  return p;
}

bool mentions_any(const std::string& s, std::initializer_list<const char*> needles) {
  for (const char* n : needles) {
    if (s.find(n) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("TRAINCTL_CUDA_PLUGIN names the only candidate", "[device]") {
  ScopedEnv env("TRAINCTL_CUDA_PLUGIN", "/opt/elsewhere/libtrainctl_cuda.so");
  const auto c = device::cuda_plugin_candidates();
  REQUIRE(c.size() == 1);
  CHECK(c[0] == "/opt/elsewhere/libtrainctl_cuda.so");
}

TEST_CASE("without the variable the plugin is looked for next to the executable", "[device]") {
  ScopedEnv env("TRAINCTL_CUDA_PLUGIN", std::nullopt);
  const auto c = device::cuda_plugin_candidates();
  REQUIRE_FALSE(c.empty());
  CHECK(std::filesystem::path(c[0]).filename() == device::kCudaPluginFileName);
}

TEST_CASE("a plugin path that does not exist is reported by name", "[device]") {
  ScopedEnv env("TRAINCTL_CUDA_PLUGIN", "/nonexistent/libtrainctl_cuda.so");
  const device::CudaAvailability a = device::cuda_availability();
  CHECK_FALSE(a.available);
  CHECK_THAT(a.reason, Catch::Contains("device: cuda needs the CUDA plugin") &&
                           Catch::Contains("/nonexistent/libtrainctl_cuda.so") &&
                           Catch::Contains("does not exist"));
  CHECK_THROWS_AS(device::load_cuda_plugin(), device::DeviceUnavailable);
  CHECK_THROWS_WITH(device::make_backend(Device::cuda, {}), Catch::Contains("does not exist"));
}

TEST_CASE("a file that is not a loadable library gives the loader's reason", "[device]") {
  const auto fake = temp_file("not-a-plugin.so", "this is not an ELF file\n");
  ScopedEnv env("TRAINCTL_CUDA_PLUGIN", fake.string());
  const device::CudaAvailability a = device::cuda_availability();
  std::filesystem::remove(fake);
  CHECK_FALSE(a.available);
  CHECK_THAT(a.reason, Catch::Contains("cannot be loaded") && Catch::Contains("libcudart.so.13") &&
                           Catch::Contains(fake.string()));
}

TEST_CASE("a real shared library without the entry point is not taken for the plugin", "[device]") {
  // libm is on every machine: loadable, but no trainctl_cuda_plugin_v1.
  const char* candidates[] = {"/lib/x86_64-linux-gnu/libm.so.6",
                              "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6"};
  std::string libm;
  for (const char* c : candidates) {
    if (std::filesystem::exists(c)) libm = c;
  }
  if (libm.empty()) {
    WARN("no libm.so.6 at the usual paths: case not exercised");
    return;
  }
  ScopedEnv env("TRAINCTL_CUDA_PLUGIN", libm);
  CHECK_THROWS_WITH(device::load_cuda_plugin(), Catch::Contains("is not a trainctl CUDA plugin"));
}

TEST_CASE("this build's own plugin: available, or a reason naming what is missing", "[device]") {
  ScopedEnv env("TRAINCTL_CUDA_PLUGIN", std::nullopt);
  const device::CudaAvailability a = device::cuda_availability();
  if (a.available) {
    CHECK(a.reason.empty());
    CHECK_FALSE(a.devices.empty());
    CHECK_FALSE(a.build_info.empty());
    return;
  }
  INFO(a.reason);
  CHECK_FALSE(a.reason.empty());
  if (!device::cuda_plugin_built()) {
    CHECK_THAT(a.reason, Catch::Contains("which this build does not have") &&
                             Catch::Contains("CUDA toolkit not found at build time"));
  } else {
    // Built: either the plugin file is not built yet, a CUDA library is missing, or (on
    // these machines) there is no GPU.
    CHECK(mentions_any(a.reason, {"was not found", "cannot be loaded", "no GPU visible"}));
  }
  CHECK_THROWS_AS(device::make_backend(Device::cuda, {}), device::DeviceUnavailable);
}

TEST_CASE("make_backend for the CPU is the CPU backend, with no device memory", "[device]") {
  auto be = device::make_backend(Device::cpu, {.threads = 1});
  REQUIRE(be != nullptr);
  CHECK(be->device() == Device::cpu);
  CHECK(device::peak_device_bytes(*be) == 0);
  float* p = static_cast<float*>(be->alloc(16 * sizeof(float)));
  p[3] = 2.0f;
  CHECK(be->sum_squares(p, 16) == 4.0);
  be->free(p);
}

TEST_CASE("NCCL groups without a usable plugin are refused before any rendezvous", "[device]") {
  ScopedEnv env("TRAINCTL_CUDA_PLUGIN", "/nonexistent/libtrainctl_cuda.so");
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  comm::Layout layout{.dp = 2, .tp = 1, .pp = 1};
  CHECK_THROWS_AS(device::make_nccl_groups(store, layout, 0, 0, std::chrono::seconds(1)),
                  device::DeviceUnavailable);
  CHECK_THROWS_AS(device::make_nccl_groups(nullptr, layout, 0, 0, std::chrono::seconds(1)),
                  std::invalid_argument);
}
