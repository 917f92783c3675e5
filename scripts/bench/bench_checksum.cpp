// CRC-32C throughput (GB/s): the SSE4.2 instruction path and the slicing-by-8 table path
// against memcpy bandwidth on the same buffer, in the same run. One JSON line per case,
// medians of 5. The checkpoint checksums and `ckpt verify` run at the first figure.
//   build/scripts/bench/bench_checksum [MiB]      (default 512)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "util/crc32c.h"

namespace {

double median_gbps(size_t bytes, const std::function<void()>& run) {
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(static_cast<double>(bytes) / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  namespace d = trainctl::crc32c_detail;
  const size_t bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 512) << 20;
  std::vector<unsigned char> src(bytes), dst(bytes);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  volatile uint32_t sink = 0;
  const double memcpy_gbps =
      median_gbps(bytes, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  const double software_gbps =
      median_gbps(bytes, [&] { sink = d::software_update(~0u, src.data(), bytes); });
  std::printf("{\"case\": \"memcpy\", \"bytes\": %zu, \"gb_per_s\": %.2f}\n", bytes, memcpy_gbps);
  std::printf(
      "{\"case\": \"crc32c_software\", \"bytes\": %zu, \"gb_per_s\": %.2f, "
      "\"vs_memcpy\": %.2f}\n",
      bytes, software_gbps, software_gbps / memcpy_gbps);
  if (d::hardware_available()) {
    const double hardware_gbps =
        median_gbps(bytes, [&] { sink = d::hardware_update(~0u, src.data(), bytes); });
    std::printf(
        "{\"case\": \"crc32c_sse42\", \"bytes\": %zu, \"gb_per_s\": %.2f, "
        "\"vs_memcpy\": %.2f, \"vs_software\": %.2f}\n",
        bytes, hardware_gbps, hardware_gbps / memcpy_gbps, hardware_gbps / software_gbps);
  }
  (void)sink;
  return 0;
}
