#pragma once
// Asynchronous checkpointing: snapshot() copies a rank's tensors into memory (the only part
// training waits for) and a background thread writes them with write_shard() while
// training continues. The files are byte-for-byte those write_shard() would write.
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "checkpoint/metadata.h"
#include "checkpoint/shard_writer.h"

namespace trainctl::checkpoint {

class AsyncShardWriter {
 public:
  AsyncShardWriter() = default;
  // Waits for a write in flight (its error, if any, is logged and dropped: call wait()).
  ~AsyncShardWriter();
  AsyncShardWriter(const AsyncShardWriter&) = delete;
  AsyncShardWriter& operator=(const AsyncShardWriter&) = delete;

  // Copies every tensor's data, then returns; the background thread writes
  // dir/rank_<rank>.safetensors and its sidecar. Throws std::logic_error when the previous
  // write has not been wait()ed for.
  void start(const std::filesystem::path& dir, int rank, const std::vector<ShardTensor>& tensors);

  // True between start() and wait().
  bool pending() const { return result_.valid(); }
  // True when the write in flight has finished (wait() will not block).
  bool done() const;

  // Blocks until the write finishes; returns its record or rethrows its error.
  // Throws std::logic_error when nothing was started.
  FileRecord wait();

 private:
  std::future<FileRecord> result_;
};

}  // namespace trainctl::checkpoint
