// model.init_from's reader (checkpoint/hf_import.h) on a hand-made Hugging Face GPT-2 folder
// in two shards: every rank of a tp 2 x pp 2 layout reads exactly its slice of each tensor
// (GPT-2's Conv1D weights transposed, the first seq_len rows of a longer position table),
// and bad folders are refused naming the file.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "checkpoint/hf_import.h"
#include "checkpoint/hf_names.h"
#include "checkpoint/safetensors.h"
#include "test_config_helpers.h"
#include "util/error.h"

using namespace trainctl;
using namespace trainctl::checkpoint;
using trainctl::config::testing::TempDir;

namespace {

namespace fs = std::filesystem;

const model::ModelConfig kGpt{
    .vocab_size = 16, .max_seq_len = 8, .n_layer = 2, .n_head = 2, .d_model = 8};
constexpr int64_t kPositions = 12;  // n_positions > seq_len: only the first 8 rows are used

// The value the file holds at flat index `i` of tensor `name` (exact in fp32).
float file_value(const std::string& name, int64_t i) {
  return static_cast<float>(std::hash<std::string>{}(name) % 1000) * 4096.0f +
         static_cast<float>(i);
}

// The folder transformers would write: trainctl's parameters under their names, Conv1D
// weights [in, out], a longer position table; tensors alternate between two shards.
void write_folder(const fs::path& dir, const std::string& wrong_tensor = "") {
  std::vector<NamedTensor> shards[2];
  nlohmann::json map = nlohmann::json::object();
  int i = 0;
  for (const model::ParamSpec& p : model::gpt_param_specs(kGpt, model::GptShardSpec::whole(kGpt))) {
    Shape shape = p.shard.global_shape;
    if (is_hf_conv1d_weight(p.name)) std::reverse(shape.begin(), shape.end());
    if (p.name == "transformer.wpe.weight") shape[0] = kPositions;
    if (p.name == wrong_tensor) shape.back() += 1;
    Tensor t = Tensor::zeros(shape);
    for (int64_t k = 0; k < t.numel(); ++k) t.f32()[k] = file_value(p.name, k);
    const int s = i++ % 2;
    shards[s].push_back({p.name, t});
    map[p.name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
  }
  for (int s = 0; s < 2; ++s) {
    write_safetensors(dir / ("model-0000" + std::to_string(s + 1) + "-of-00002.safetensors"),
                      shards[s], {{"format", "pt"}});
  }
  std::ofstream(dir / "model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump();
  std::ofstream(dir / "config.json") << R"({"architectures": ["GPT2LMHeadModel"]})";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("each rank of tp 2 x pp 2 reads its own slice of a Hugging Face folder",
          "[checkpoint][hf]") {
  TempDir dir;
  write_folder(dir.path());
  const HfModelFolder folder(dir.path(), kGpt);
  folder.check();
  int checked = 0;
  for (int pp_rank = 0; pp_rank < 2; ++pp_rank) {
    for (int tp_rank = 0; tp_rank < 2; ++tp_rank) {
      const model::GptShardSpec shard =
          model::GptShardSpec::of(kGpt, kGpt.max_seq_len, 2, pp_rank, 1, 2, tp_rank);
      for (const model::ParamSpec& p : model::gpt_param_specs(kGpt, shard)) {
        std::vector<float> out(static_cast<size_t>(numel_of(p.shard.local_shape())), -1.0f);
        folder.read_slice(p.name, p.shard, out.data());
        const int64_t rows = p.shard.global_shape[0];
        const int64_t cols = p.shard.global_shape.size() > 1 ? p.shard.global_shape[1] : 1;
        for (int64_t l = 0; l < static_cast<int64_t>(out.size()); ++l) {
          const int64_t g = p.shard.global_index(l);
          const int64_t in_file = is_hf_conv1d_weight(p.name) ? (g % cols) * rows + g / cols : g;
          if (out[static_cast<size_t>(l)] != file_value(p.name, in_file)) {
            FAIL(p.name << " rank (pp " << pp_rank << ", tp " << tp_rank << ") element " << l);
          }
        }
        ++checked;
      }
    }
  }
  CHECK(checked > 20);
}

TEST_CASE("a bad Hugging Face folder is refused naming the file", "[checkpoint][hf]") {
  TempDir dir;
  write_folder(dir.path());
  SECTION("no config.json") {
    fs::remove(dir.path() / "config.json");
    CHECK_THAT(error_of([&] { HfModelFolder(dir.path(), kGpt); }),
               Catch::Contains((dir.path() / "config.json").string() + ": missing"));
  }
  SECTION("a shard the index lists is missing") {
    fs::remove(dir.path() / "model-00002-of-00002.safetensors");
    CHECK_THAT(error_of([&] { HfModelFolder(dir.path(), kGpt); }),
               Catch::Contains("model-00002-of-00002.safetensors: missing"));
  }
  SECTION("a tensor of the wrong shape") {
    write_folder(dir.path(), "transformer.h.1.mlp.c_fc.weight");
    const HfModelFolder folder(dir.path(), kGpt);
    CHECK_THAT(error_of([&] { folder.check(); }),
               Catch::Contains("safetensors: transformer.h.1.mlp.c_fc.weight is [8, 33]") &&
                   Catch::Contains("needs [8, 32] (Conv1D's [in, out])"));
  }
  SECTION("a model with more layers than the folder holds") {
    model::ModelConfig deeper = kGpt;
    deeper.n_layer = 3;
    const HfModelFolder folder(dir.path(), deeper);
    CHECK_THAT(error_of([&] { folder.check(); }),
               Catch::Contains("no file holds transformer.h.2."));
  }
}
