#include "checkpoint/reader.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "checkpoint/checksum.h"
#include "checkpoint/completeness.h"
#include "checkpoint/errors.h"
#include "checkpoint/mapped_file.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_writer.h"
#include "util/error.h"

namespace trainctl::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDamaged = ": the file is damaged; resume from an older checkpoint";

// Runs (global start, length) a shard holds along `dim`, in local order.
std::vector<std::pair<int64_t, int64_t>> runs_along(const model::TensorShard& s, int64_t extent) {
  if (s.split()) return s.runs();
  return {{0, extent}};
}

int64_t local_extent(const model::TensorShard& s, int dim) {
  if (dim < 0) return 1;
  return s.local_shape()[static_cast<size_t>(dim)];
}

}  // namespace

struct CheckpointReader::OpenFile {
  std::unique_ptr<MappedFile> map;
  SafetensorsIndex index;
  std::vector<const unsigned char*> tensor_data;  // per FileRecord tensor
};

CheckpointReader::CheckpointReader(fs::path dir) : dir_(std::move(dir)) {
  meta_ = read_metadata(dir_);
  for (size_t f = 0; f < meta_.files.size(); ++f) {
    const FileRecord& file = meta_.files[f];
    for (size_t t = 0; t < file.tensors.size(); ++t) {
      const TensorRecord& tensor = file.tensors[t];
      auto [it, fresh] = sources_.try_emplace(tensor.name);
      if (fresh) names_.push_back(tensor.name);
      if (!it->second.empty()) {
        const TensorRecord& first =
            meta_.files[it->second.front().file].tensors[it->second.front().tensor];
        if (first.shard.global_shape != tensor.shard.global_shape) {
          throw CheckpointCorrupt(dir_.string() + "/" + kMetadataFile + ": " + tensor.name +
                                  " is " + shape_string(first.shard.global_shape) + " in " +
                                  meta_.files[it->second.front().file].name + " but " +
                                  shape_string(tensor.shard.global_shape) + " in " + file.name);
        }
      }
      it->second.push_back({f, t});
    }
  }
}

CheckpointReader::~CheckpointReader() = default;

std::string CheckpointReader::problem_with(const FileRecord& f, uint64_t bytes,
                                           const std::string& checksum) const {
  if (bytes != f.bytes) {
    return f.name + ": " + std::to_string(bytes) + " bytes, expected " + std::to_string(f.bytes) +
           (bytes < f.bytes ? " (truncated)" : "") + kDamaged;
  }
  if (checksum != f.checksum) {
    return f.name + ": checksum mismatch (expected " + f.checksum + ", got " + checksum + ")" +
           kDamaged;
  }
  return {};
}

std::vector<FileCheck> CheckpointReader::check_files() const {
  std::vector<FileCheck> out;
  for (const FileRecord& f : meta_.files) {
    FileCheck c;
    c.file = f.name;
    const fs::path path = dir_ / f.name;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      c.problem = f.name + ": missing from " + dir_.string() + kDamaged;
      out.push_back(std::move(c));
      continue;
    }
    try {
      const uint32_t crc = file_crc32c(path, &c.bytes);
      c.problem = problem_with(f, c.bytes, checksum_text(crc));
      if (c.problem.empty()) {
        // The checksum matches what was written; also check that the file holds what
        // metadata.json says (guards against a metadata.json from another save).
        const SafetensorsIndex index = read_safetensors_index(path);
        for (const TensorRecord& t : f.tensors) {
          auto e = std::find_if(index.tensors.begin(), index.tensors.end(),
                                [&](const SafetensorsEntry& s) { return s.name == t.name; });
          if (e == index.tensors.end() || e->dtype != "F32" || e->shape != t.shard.local_shape()) {
            c.problem = f.name + ": does not hold " + t.name + " as F32 " +
                        shape_string(t.shard.local_shape()) + " as metadata.json says";
            break;
          }
        }
      }
    } catch (const std::exception& e) {
      c.problem = std::string(e.what()) + kDamaged;
    }
    c.ok = c.problem.empty();
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<std::string> CheckpointReader::check_coverage() const {
  std::vector<std::string> out = file_list_problems(meta_, dir_);
  for (std::string& problem : model_tensor_problems(*this)) out.push_back(std::move(problem));
  for (const std::string& name : names_) {
    try {
      model::TensorShard whole;
      whole.global_shape = global_shape(name);
      plan(name, whole);
    } catch (const std::exception& e) {
      out.push_back(e.what());
    }
  }
  return out;
}

void CheckpointReader::verify() const {
  for (const FileCheck& c : check_files()) {
    if (!c.ok) throw CheckpointCorrupt(dir_.string() + ": " + c.problem);
  }
  const std::vector<std::string> coverage = check_coverage();
  if (!coverage.empty()) throw CheckpointCorrupt(coverage.front());
}

size_t CheckpointReader::shard_count(const std::string& name) const {
  auto it = sources_.find(name);
  return it == sources_.end() ? 0 : it->second.size();
}

const std::vector<CheckpointReader::Source>& CheckpointReader::sources_of(
    const std::string& name) const {
  auto it = sources_.find(name);
  if (it == sources_.end()) {
    std::string hint;
    if (is_optimizer_tensor(name)) {
      hint = " (it was saved without this optimizer state: a different optimizer?)";
    }
    throw InputError("checkpoint " + dir_.string() + " has no tensor " + name + hint +
                     ": it was written for a different model");
  }
  return it->second;
}

const Shape& CheckpointReader::global_shape(const std::string& name) const {
  const Source& s = sources_of(name).front();
  return meta_.files[s.file].tensors[s.tensor].shard.global_shape;
}

CheckpointReader::Plan CheckpointReader::plan(const std::string& name,
                                              const model::TensorShard& want) const {
  const std::vector<Source>& all = sources_of(name);
  const Shape& global = global_shape(name);
  if (want.global_shape != global) {
    throw InputError("checkpoint " + dir_.string() + " holds " + name + " as " +
                     shape_string(global) + " but the model needs " +
                     shape_string(want.global_shape) + ": it was written for a different model");
  }
  const model::TensorShard& first = meta_.files[all.front().file].tensors[all.front().tensor].shard;
  Plan p;
  // Slice along the target's split dimension, else along the saved one.
  p.dim = want.split() ? want.dim : first.split() ? first.dim : (global.empty() ? -1 : 0);
  const int64_t extent = p.dim < 0 ? 1 : global[static_cast<size_t>(p.dim)];
  for (int d = 0; d < p.dim; ++d) p.outer *= global[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(p.dim + 1); d < global.size(); ++d) p.inner *= global[d];
  p.dst_extent = local_extent(want, p.dim);

  // Already opened files first: a copy there costs no extra checksum pass.
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return open_.count(all[a].file) > open_.count(all[b].file);
  });

  int64_t dst_pos = 0;
  for (const auto& [w_start, w_len] : runs_along(want, extent)) {
    std::vector<char> covered(static_cast<size_t>(w_len), 0);
    int64_t missing = w_len;
    for (size_t i : order) {
      if (missing == 0) break;
      const model::TensorShard& s = meta_.files[all[i].file].tensors[all[i].tensor].shard;
      if (s.split() && s.dim != p.dim) continue;  // sliced across: not used (never in GPT)
      int64_t src_pos = 0;
      for (const auto& [s_start, s_len] : runs_along(s, extent)) {
        const int64_t a = std::max(w_start, s_start);
        const int64_t b = std::min(w_start + w_len, s_start + s_len);
        for (int64_t x = a; x < b;) {
          if (covered[static_cast<size_t>(x - w_start)]) {
            ++x;
            continue;
          }
          int64_t y = x;
          while (y < b && !covered[static_cast<size_t>(y - w_start)]) {
            covered[static_cast<size_t>(y - w_start)] = 1;
            ++y;
          }
          p.copies.push_back({i, src_pos + (x - s_start), dst_pos + (x - w_start), y - x});
          missing -= y - x;
          x = y;
        }
        src_pos += s_len;
      }
    }
    if (missing > 0) {
      throw CheckpointCorrupt("checkpoint " + dir_.string() + " is incomplete: no file holds " +
                              std::to_string(missing) + " of the positions [" +
                              std::to_string(w_start) + ", " + std::to_string(w_start + w_len) +
                              ") of " + name + " along dimension " + std::to_string(p.dim));
    }
    dst_pos += w_len;
  }
  return p;
}

const CheckpointReader::OpenFile& CheckpointReader::open(size_t file) {
  auto it = open_.find(file);
  if (it != open_.end()) return *it->second;
  const FileRecord& f = meta_.files[file];
  const fs::path path = dir_ / f.name;
  auto of = std::make_unique<OpenFile>();
  try {
    of->map = std::make_unique<MappedFile>(path);
    if (verify_on_read_) {
      const std::string problem =
          problem_with(f, of->map->size(), checksum_text(crc32c(of->map->data(), of->map->size())));
      if (!problem.empty()) throw CheckpointCorrupt(dir_.string() + ": " + problem);
    } else if (of->map->size() != f.bytes) {
      throw CheckpointCorrupt(dir_.string() + ": " + problem_with(f, of->map->size(), f.checksum));
    }
    of->index = read_safetensors_index(path);
  } catch (const CheckpointCorrupt&) {
    throw;
  } catch (const std::exception& e) {
    throw CheckpointCorrupt(std::string(e.what()) + kDamaged);
  }
  for (const TensorRecord& t : f.tensors) {
    auto e = std::find_if(of->index.tensors.begin(), of->index.tensors.end(),
                          [&](const SafetensorsEntry& s) { return s.name == t.name; });
    if (e == of->index.tensors.end() || e->dtype != "F32" || e->shape != t.shard.local_shape()) {
      throw CheckpointCorrupt(path.string() + ": does not hold " + t.name + " as F32 " +
                              shape_string(t.shard.local_shape()) + " as metadata.json says" +
                              kDamaged);
    }
    of->tensor_data.push_back(of->map->data() + of->index.data_start + e->begin);
  }
  return *open_.emplace(file, std::move(of)).first->second;
}

void CheckpointReader::read_slice(const std::string& name, const model::TensorShard& want,
                                  float* out) {
  const Plan p = plan(name, want);
  const std::vector<Source>& all = sources_of(name);
  for (const Copy& c : p.copies) {
    const Source& s = all[c.source];
    const model::TensorShard& shard = meta_.files[s.file].tensors[s.tensor].shard;
    const unsigned char* src = open(s.file).tensor_data[s.tensor];
    const int64_t src_extent = local_extent(shard, p.dim);
    const size_t bytes = static_cast<size_t>(c.len * p.inner) * sizeof(float);
    for (int64_t o = 0; o < p.outer; ++o) {
      const int64_t from = (o * src_extent + c.src_along) * p.inner;
      const int64_t to = (o * p.dst_extent + c.dst_along) * p.inner;
      std::memcpy(out + to, src + static_cast<size_t>(from) * sizeof(float), bytes);
    }
  }
}

std::vector<float> CheckpointReader::read_full(const std::string& name) {
  model::TensorShard whole;
  whole.global_shape = global_shape(name);
  std::vector<float> out(static_cast<size_t>(numel_of(whole.global_shape)));
  read_slice(name, whole, out.data());
  return out;
}

}  // namespace trainctl::checkpoint
