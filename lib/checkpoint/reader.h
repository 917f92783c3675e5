#pragma once
// Reads a checkpoint into any layout. Every tensor was saved as shards (slices of a global
// tensor, possibly several copies of each slice: replicated over TP or written by several
// DP ranks); read_slice() fills the local tensor of ANY target shard of the same global
// shape from whichever saved shards overlap it, so a checkpoint written with one
// dp/tp/pp/ZeRO layout resumes onto another. Files are memory-mapped: a rank touches only the
// bytes it needs (plus, with verify_on_read, one checksum pass over each file it opens).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/metadata.h"
#include "model/shard.h"

namespace trainctl::checkpoint {

class MappedFile;

// The outcome of checking one file against metadata.json.
struct FileCheck {
  std::string file;
  bool ok = false;
  uint64_t bytes = 0;   // bytes found on disk
  std::string problem;  // empty when ok; else the complete message (names the file)
};

class CheckpointReader {
 public:
  // `dir`: a step directory holding metadata.json (see resolve_checkpoint()). Throws
  // CheckpointCorrupt when metadata.json is missing, edited, out of range (read_metadata())
  // or contradicts itself (one tensor saved with two global shapes); InputError when it is
  // from a newer trainctl.
  explicit CheckpointReader(std::filesystem::path dir);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  const CheckpointMetadata& metadata() const { return meta_; }

  // Recomputes every file's size and checksum (reads everything once).
  std::vector<FileCheck> check_files() const;
  // Problems with what the files hold together (completeness.h): a rank of the layout
  // without a file, a tensor of the model (or an optimizer state of a parameter) missing or
  // of the wrong shape, a tensor of another model, a tensor of which some slice is in no file.
  std::vector<std::string> check_coverage() const;
  // check_files() + check_coverage(); throws CheckpointCorrupt with the first problem, e.g.
  // "rank_00003.safetensors: checksum mismatch (expected crc32c:..., got crc32c:...): the
  // file is damaged; resume from an older checkpoint".
  void verify() const;

  // When true (default), a file's size and checksum are checked the first time read_slice()
  // touches it, so a damaged shard never feeds a resume.
  void set_verify_on_read(bool on) { verify_on_read_ = on; }

  // Distinct tensor names, in the order of first appearance.
  const std::vector<std::string>& tensor_names() const { return names_; }
  bool contains(const std::string& name) const { return sources_.count(name) != 0; }
  // How many shards of `name` the files hold (copies included).
  size_t shard_count(const std::string& name) const;
  // Throws InputError when the checkpoint has no such tensor.
  const Shape& global_shape(const std::string& name) const;

  // Fills `out` (want.local_shape() floats, row-major) with the slice of tensor `name` that
  // `want` describes. Throws InputError when the tensor is missing or its global shape
  // differs from want.global_shape (a checkpoint of another model), CheckpointCorrupt when
  // a file it needs is damaged or the saved shards do not cover the slice.
  void read_slice(const std::string& name, const model::TensorShard& want, float* out);
  // The whole global tensor.
  std::vector<float> read_full(const std::string& name);

 private:
  struct Source {
    size_t file;    // index into meta_.files
    size_t tensor;  // index into that file's tensors
  };
  struct OpenFile;
  // A piece of the target: `len` positions along the split dim from a source, for every
  // outer index.
  struct Copy {
    size_t source;
    int64_t src_along;
    int64_t dst_along;
    int64_t len;
  };
  struct Plan {
    int dim = -1;  // the dimension slices are taken along (-1: a scalar)
    int64_t outer = 1, inner = 1, dst_extent = 1;
    std::vector<Copy> copies;
  };

  const std::vector<Source>& sources_of(const std::string& name) const;
  // Which saved slices fill `want`; throws CheckpointCorrupt when some part is in no file.
  Plan plan(const std::string& name, const model::TensorShard& want) const;
  const OpenFile& open(size_t file);
  std::string problem_with(const FileRecord& f, uint64_t bytes, const std::string& checksum) const;

  std::filesystem::path dir_;
  CheckpointMetadata meta_;
  std::vector<std::string> names_;
  std::map<std::string, std::vector<Source>> sources_;
  std::map<size_t, std::unique_ptr<OpenFile>> open_;
  bool verify_on_read_ = true;
};

}  // namespace trainctl::checkpoint
