#pragma once
// A Hugging Face model folder as a source of parameters (model.init_from, `trainctl ckpt
// import`): config.json plus model.safetensors, or shards model-0000N-of-0000M.safetensors
// listed by model.safetensors.index.json. Every file is memory-mapped and only its header is
// read up front; read_slice() copies the bytes of one rank's slice of one tensor, so a rank
// holding a shard of the model never reads the rest. Accepted tensor dtypes: F32, BF16 and
// F16, converted to fp32 (the parameters' dtype). Names and layouts: checkpoint/hf_names.h.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/model_config.h"
#include "model/shard.h"

namespace trainctl::checkpoint {

class MappedFile;

// The dtypes a Hugging Face folder's tensors may have.
bool is_importable_dtype(const std::string& safetensors_dtype);

class HfModelFolder {
 public:
  // Opens `dir` for `model` (whose family says which names and layouts to expect). Throws
  // InputError naming the file when config.json is missing, the index or a shard it lists
  // is missing or not a safetensors file, or two files hold the same tensor.
  HfModelFolder(std::filesystem::path dir, const model::ModelConfig& model);
  ~HfModelFolder();
  HfModelFolder(const HfModelFolder&) = delete;
  HfModelFolder& operator=(const HfModelFolder&) = delete;

  const std::filesystem::path& dir() const { return dir_; }

  // Throws InputError naming the file and the tensor unless every parameter of the model is
  // there with its shape (GPT-2's position table may be longer than model.seq_len: its first
  // rows are used) and an accepted dtype, and no tensor is left over that is no parameter.
  void check() const;

  // Fills `out` (want.local_shape() floats) with the slice `want` of trainctl's parameter
  // `name`, converted to fp32 and, for GPT-2's Conv1D weights, transposed.
  void read_slice(const std::string& name, const model::TensorShard& want, float* out) const;

  // "27 tensors in 4 files (F32)", for `validate`.
  std::string summary() const;

 private:
  struct Source {
    size_t file;
    SafetensorsEntry entry;
  };
  struct Mapped;
  const Source& source(const std::string& name) const;
  std::string where(const Source& s) const;

  std::filesystem::path dir_;
  model::ModelConfig model_;
  std::vector<std::unique_ptr<Mapped>> files_;
  std::map<std::string, Source> tensors_;
};

}  // namespace trainctl::checkpoint
