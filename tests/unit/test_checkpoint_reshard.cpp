// Resharding reads: a checkpoint written by one (tp, pp, virtual_stages) layout is read into
// every other, parameters and optimizer state, and every element is checked against the
// value of its global index.
#include <catch2/catch.hpp>

#include "checkpoint/errors.h"
#include "checkpoint/reader.h"
#include "test_checkpoint_support.h"
#include "util/error.h"

using namespace trainctl;
using namespace trainctl::checkpoint;
using namespace trainctl::checkpoint::testing;

namespace {

const std::vector<ShardLayout> kLayouts = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {2, 2, 1},
                                           {1, 4, 1}, {2, 2, 2}, {1, 2, 2}};

std::string describe(const ShardLayout& l) {
  return "tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp) + " vs " +
         std::to_string(l.virtual_stages);
}

// Reads every tensor of every rank of `target` and counts wrong elements.
int64_t wrong_elements(CheckpointReader& reader, const ShardLayout& target) {
  int64_t wrong = 0;
  for (int r = 0; r < target.world(); ++r) {
    const RankTensors want = rank_tensors(target, r);
    for (size_t i = 0; i < want.names.size(); ++i) {
      std::vector<float> got(want.data[i].size(), -1.0f);
      reader.read_slice(want.names[i], want.shards[i], got.data());
      for (size_t k = 0; k < got.size(); ++k) wrong += got[k] != want.data[i][k];
    }
  }
  return wrong;
}

}  // namespace

TEST_CASE("a checkpoint reads into any tp/pp/virtual-stage layout", "[checkpoint]") {
  for (const ShardLayout& saved : kLayouts) {
    ScratchDir dir;
    write_all_ranks(dir.path(), saved, 7);
    CheckpointReader reader(dir.path());
    reader.verify();
    for (const ShardLayout& target : kLayouts) {
      INFO("saved " << describe(saved) << ", read as " << describe(target));
      CHECK(wrong_elements(reader, target) == 0);
    }
  }
}

TEST_CASE("read_full reassembles global tensors, q|k|v blocks included", "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), {2, 2, 1}, 3);
  CheckpointReader reader(dir.path());
  for (const std::string& name :
       {std::string("transformer.h.0.attn.c_attn.weight"), std::string("transformer.wte.weight"),
        std::string("transformer.h.3.mlp.c_proj.weight"),
        optimizer_tensor_name("exp_avg_sq", "transformer.h.2.attn.c_attn.bias")}) {
    const std::vector<float> full = reader.read_full(name);
    REQUIRE(static_cast<int64_t>(full.size()) == numel_of(reader.global_shape(name)));
    for (size_t g = 0; g < full.size(); ++g) {
      INFO(name << " element " << g);
      REQUIRE(full[g] == expected_value(name, static_cast<int64_t>(g)));
    }
  }
  // Copies: wte on the first stage and the tied LM head copy on the last, each over 2 TP ranks.
  CHECK(reader.shard_count("transformer.wte.weight") == 4);
  CHECK(reader.shard_count("transformer.ln_f.weight") == 2);  // replicated over TP
}

TEST_CASE("metadata.json records layout, position and every shard", "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), {2, 2, 1}, 42);
  const CheckpointMetadata m = read_metadata(dir.path());
  CHECK(m.step == 42);
  CHECK(m.layout == ParallelLayout{{1, 2, 2}, 1, 0});
  CHECK(m.data == DataPosition{42 * 64, 42, {}});
  CHECK(m.optimizer_step == 42);
  CHECK(m.rng["offset"] == 42);
  CHECK(m.extra["job"] == "ckpt-test");
  CHECK(m.model.d_model == kCfg.d_model);
  REQUIRE(m.files.size() == 4);
  CHECK(m.files[3].name == "rank_00003.safetensors");
  CHECK(m.files[3].rank == 3);
  CHECK(m.files[3].checksum.rfind("crc32c:", 0) == 0);
  // Round trip through JSON is lossless.
  const CheckpointMetadata again = metadata_from_json(to_json(m), "test");
  CHECK(to_json(again) == to_json(m));
  // The c_attn shard of TP rank 1: rows of q, k and v blocks, piece 1 of 2.
  const auto& tensors = m.files[1].tensors;
  auto it = std::find_if(tensors.begin(), tensors.end(), [](const TensorRecord& t) {
    return t.name == "transformer.h.0.attn.c_attn.weight";
  });
  REQUIRE(it != tensors.end());
  CHECK(it->shard.global_shape == Shape{24, 8});
  CHECK(it->shard.local_shape() == Shape{12, 8});
  CHECK(it->shard.dim == 0);
  CHECK(it->shard.blocks == 3);
  CHECK(it->shard.index == 1);
  CHECK(it->shard.count == 2);
}

TEST_CASE("a checkpoint of another model or without a tensor is refused clearly", "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), {2, 1, 1}, 1, /*with_optimizer=*/false);
  CheckpointReader reader(dir.path());
  model::ModelConfig bigger = kCfg;
  bigger.d_model = 16;
  const model::ParamSpec p = model::gpt_param_specs(bigger, model::GptShardSpec::whole(bigger))[2];
  REQUIRE(p.name == "transformer.h.0.ln_1.weight");
  std::vector<float> out(static_cast<size_t>(numel_of(p.shard.local_shape())));
  CHECK_THROWS_AS(reader.read_slice(p.name, p.shard, out.data()), InputError);
  CHECK_THROWS_WITH(reader.read_slice(p.name, p.shard, out.data()),
                    Catch::Contains("holds transformer.h.0.ln_1.weight as [8] but the model "
                                    "needs [16]: it was written for a different model"));
  const std::string state = optimizer_tensor_name("exp_avg", p.name);
  CHECK_THROWS_AS(reader.global_shape(state), InputError);
  CHECK_THROWS_WITH(reader.global_shape(state),
                    Catch::Contains("has no tensor optim.exp_avg.transformer.h.0.ln_1.weight"));
}

TEST_CASE("a checkpoint missing a rank's file does not cover its tensors", "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), {2, 1, 1}, 1);
  CheckpointMetadata m = read_metadata(dir.path());
  m.files.pop_back();  // as if rank 1 never reported
  write_metadata(dir.path(), m);
  CheckpointReader reader(dir.path());
  const std::vector<std::string> problems = reader.check_coverage();
  CHECK_FALSE(problems.empty());
  CHECK_THROWS_AS(reader.verify(), CheckpointCorrupt);
  CHECK_THROWS_WITH(reader.read_full("transformer.h.1.mlp.c_fc.weight"),
                    Catch::Contains("incomplete"));
  // Replicated tensors are still whole in rank 0's file.
  CHECK(reader.read_full("transformer.ln_f.bias")[3] == expected_value("transformer.ln_f.bias", 3));
}
