#include "checkpoint/hf_import.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/hf_names.h"
#include "checkpoint/mapped_file.h"
#include "checkpoint/metadata.h"
#include "ops/cpu/float16.h"
#include "util/error.h"

namespace trainctl::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kSingleFile = "model.safetensors";

// The shard files the index lists, in the order they first appear.
std::vector<std::string> indexed_files(const fs::path& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw InputError(index_path.string() + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    throw InputError(index_path.string() +
                     ": has no \"weight_map\" object naming each tensor's file");
  }
  std::vector<std::string> files;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos) {
      throw InputError(index_path.string() + ": weight_map[\"" + tensor +
                       "\"] is not a file name in the folder");
    }
    if (std::find(files.begin(), files.end(), file.get<std::string>()) == files.end()) {
      files.push_back(file.get<std::string>());
    }
  }
  return files;
}

float to_float(const unsigned char* p, const std::string& dtype) {
  if (dtype == "F32") {
    float f;
    std::memcpy(&f, p, sizeof f);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return dtype == "BF16" ? ops::cpu::bf16_to_fp32(h) : ops::cpu::fp16_to_fp32(h);
}

}  // namespace

bool is_importable_dtype(const std::string& dtype) {
  return dtype == "F32" || dtype == "BF16" || dtype == "F16";
}

struct HfModelFolder::Mapped {
  std::string name;
  std::unique_ptr<MappedFile> map;
  uint64_t data_start = 0;
};

HfModelFolder::HfModelFolder(fs::path dir, const model::ModelConfig& model)
    : dir_(std::move(dir)), model_(model) {
  std::error_code ec;
  if (!fs::is_regular_file(dir_ / "config.json", ec)) {
    throw InputError((dir_ / "config.json").string() +
                     ": missing: a Hugging Face model folder holds config.json");
  }
  std::vector<std::string> names;
  if (fs::is_regular_file(dir_ / kIndexFile, ec)) {
    names = indexed_files(dir_ / kIndexFile);
  } else if (fs::is_regular_file(dir_ / kSingleFile, ec)) {
    names = {kSingleFile};
  } else {
    throw InputError(dir_.string() + ": holds neither " + kSingleFile + " nor " + kIndexFile +
                     " (only safetensors weights are imported)");
  }
  for (const std::string& name : names) {
    const fs::path path = dir_ / name;
    if (!fs::is_regular_file(path, ec)) {
      throw InputError(path.string() + ": missing (" + kIndexFile + " lists it)");
    }
    auto m = std::make_unique<Mapped>();
    m->name = name;
    SafetensorsIndex index;
    try {
      m->map = std::make_unique<MappedFile>(path);
      index = read_safetensors_index(path);
    } catch (const std::exception& e) {
      throw InputError(std::string(e.what()));
    }
    m->data_start = index.data_start;
    for (SafetensorsEntry& e : index.tensors) {
      auto [it, fresh] = tensors_.try_emplace(e.name, Source{files_.size(), e});
      if (!fresh) {
        throw InputError(path.string() + ": holds " + e.name + ", which " +
                         files_[it->second.file]->name + " holds too");
      }
    }
    files_.push_back(std::move(m));
  }
}

HfModelFolder::~HfModelFolder() = default;

std::string HfModelFolder::where(const Source& s) const {
  return (dir_ / files_[s.file]->name).string();
}

const HfModelFolder::Source& HfModelFolder::source(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    throw InputError(dir_.string() + ": no file holds " + name +
                     " (a shard of the model is missing, or the folder holds another model)");
  }
  return it->second;
}

void HfModelFolder::check() const {
  std::set<std::string> used;
  for (const model::ParamSpec& p :
       model::gpt_param_specs(model_, model::GptShardSpec::whole(model_))) {
    if (p.tied_copy) continue;
    const Source& s = source(p.name);
    used.insert(p.name);
    Shape want = p.shard.global_shape;
    const bool conv1d = !model_.llama() && is_hf_conv1d_weight(p.name);
    if (conv1d) std::reverse(want.begin(), want.end());
    Shape have = s.entry.shape;
    // GPT-2's position table: the first seq_len rows of n_positions.
    const bool positions = p.name == "transformer.wpe.weight";
    if (positions && have.size() == 2 && have[0] >= want[0]) have[0] = want[0];
    if (have != want) {
      throw InputError(where(s) + ": " + p.name + " is " + shape_string(s.entry.shape) +
                       ", the model (from config.json and the job spec) needs " +
                       shape_string(want) + (conv1d ? " (Conv1D's [in, out])" : ""));
    }
    if (!is_importable_dtype(s.entry.dtype)) {
      throw InputError(where(s) + ": " + p.name + " is " + s.entry.dtype +
                       "; the import accepts F32, BF16 and F16");
    }
  }
  for (const auto& [name, s] : tensors_) {
    if (used.count(name) || is_hf_buffer(name)) continue;
    // A tied head's copy: transformers writes it only when told to; it is the embedding.
    if (name == "lm_head.weight" && model_.tied()) continue;
    throw InputError(where(s) + ": holds " + name +
                     ", which is no parameter of the model config.json describes");
  }
}

std::string HfModelFolder::summary() const {
  std::set<std::string> dtypes;
  for (const auto& [name, s] : tensors_) dtypes.insert(s.entry.dtype);
  std::string kinds;
  for (const std::string& d : dtypes) kinds += (kinds.empty() ? "" : ", ") + d;
  return dir_.string() + ": " + std::to_string(tensors_.size()) + " tensors in " +
         std::to_string(files_.size()) + " file(s) (" + kinds + ")";
}

void HfModelFolder::read_slice(const std::string& name, const model::TensorShard& want,
                               float* out) const {
  const Source& s = source(name);
  const unsigned char* data =
      files_[s.file]->map->data() + files_[s.file]->data_start + s.entry.begin;
  const std::string& dtype = s.entry.dtype;
  const size_t size = dtype == "F32" ? 4 : 2;
  const Shape local = want.local_shape();
  const int64_t n = numel_of(local);
  if (!model_.llama() && is_hf_conv1d_weight(name)) {
    // trainctl's [rows, cols] element (r, c) is the file's [cols, rows] element (c, r).
    const int64_t rows = want.global_shape[0], cols = want.global_shape[1];
    for (int64_t l = 0; l < n; ++l) {
      const int64_t g = want.global_index(l);
      const int64_t src = (g % cols) * rows + g / cols;
      out[l] = to_float(data + static_cast<size_t>(src) * size, dtype);
    }
    return;
  }
  // Contiguous in both: one piece along the split dimension (of one of its blocks) times the
  // dimensions after it; the whole tensor when it is not split.
  int64_t inner = n;
  if (want.split()) {
    inner = local[static_cast<size_t>(want.dim)] / want.blocks;
    for (size_t d = static_cast<size_t>(want.dim) + 1; d < local.size(); ++d) inner *= local[d];
  }
  for (int64_t l = 0; l < n; l += inner) {
    const unsigned char* src = data + static_cast<size_t>(want.global_index(l)) * size;
    if (dtype == "F32") {
      std::memcpy(out + l, src, static_cast<size_t>(inner) * sizeof(float));
    } else {
      for (int64_t i = 0; i < inner; ++i) out[l + i] = to_float(src + i * size, dtype);
    }
  }
}

}  // namespace trainctl::checkpoint
