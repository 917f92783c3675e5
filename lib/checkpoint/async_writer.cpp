#include "checkpoint/async_writer.h"

#include <chrono>
#include <stdexcept>

#include "util/log.h"

namespace trainctl::checkpoint {

namespace {

// The snapshot: tensors with their data copied out of the training buffers.
struct OwnedTensor {
  std::string name;
  model::TensorShard shard;
  std::vector<float> data;
};

}  // namespace

AsyncShardWriter::~AsyncShardWriter() {
  if (!result_.valid()) return;
  try {
    result_.get();
  } catch (const std::exception& e) {
    spdlog::error("asynchronous checkpoint write failed: {}", e.what());
  }
}

void AsyncShardWriter::start(const std::filesystem::path& dir, int rank,
                             const std::vector<ShardTensor>& tensors) {
  if (result_.valid()) {
    throw std::logic_error("AsyncShardWriter::start: the previous write was not waited for");
  }
  std::vector<OwnedTensor> snapshot;
  snapshot.reserve(tensors.size());
  for (const ShardTensor& t : tensors) {
    const auto n = static_cast<size_t>(numel_of(t.shard.local_shape()));
    if (t.data == nullptr && n > 0) {
      throw std::invalid_argument("AsyncShardWriter::start: tensor " + t.name + " has no data");
    }
    snapshot.push_back({t.name, t.shard, std::vector<float>(t.data, t.data + n)});
  }
  result_ = std::async(std::launch::async, [dir, rank, snapshot = std::move(snapshot)] {
    std::vector<ShardTensor> views;
    views.reserve(snapshot.size());
    for (const OwnedTensor& t : snapshot) views.push_back({t.name, t.shard, t.data.data()});
    return write_shard(dir, rank, views);
  });
}

bool AsyncShardWriter::done() const {
  return result_.valid() && result_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

FileRecord AsyncShardWriter::wait() {
  if (!result_.valid()) throw std::logic_error("AsyncShardWriter::wait: nothing was started");
  return result_.get();
}

}  // namespace trainctl::checkpoint
