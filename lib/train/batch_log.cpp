#include "train/batch_log.h"

#include <cinttypes>
#include <string>

#include "util/error.h"

namespace trainctl::train {

namespace {

uint64_t fnv1a(const int32_t* p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) {
    const auto v = static_cast<uint32_t>(p[i]);
    for (int b = 0; b < 4; ++b) h = (h ^ ((v >> (8 * b)) & 0xff)) * 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

BatchLog::BatchLog(bool enabled, bool feeds_replica, const std::filesystem::path& run_dir,
                   int rank) {
  if (!enabled || !feeds_replica) return;
  std::error_code ec;
  std::filesystem::create_directories(run_dir / "batches", ec);
  const auto path = run_dir / "batches" / ("rank" + std::to_string(rank) + ".jsonl");
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw InputError(path.string() + ": cannot open the batch log");
}

BatchLog::~BatchLog() {
  if (file_) std::fclose(file_);
}

void BatchLog::log(const data::BatchLayout& l, const data::StepBatch& batch) {
  if (!file_) return;
  std::string line = "{\"step\": " + std::to_string(batch.step + 1) + ", \"samples\": [";
  for (int m = 0; m < l.grad_accum; ++m) {
    for (int b = 0; b < l.micro_batch; ++b) {
      const size_t row = (static_cast<size_t>(m) * l.micro_batch + b) * l.seq_len;
      uint64_t h =
          fnv1a(batch.tokens.data() + row, static_cast<size_t>(l.seq_len), 0xcbf29ce484222325ULL);
      h = fnv1a(batch.targets.data() + row + l.seq_len - 1, 1, h);
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016" PRIx64, h);
      line += (m == 0 && b == 0 ? "[" : ", [") +
              std::to_string(data::train_sample_index(l, batch.step, m, b)) + ", \"" + hex + "\"]";
    }
  }
  line += "]}\n";
  std::fputs(line.c_str(), file_);
  std::fflush(file_);
}

}  // namespace trainctl::train
