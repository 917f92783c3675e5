// The asynchronous writer (same bytes as the synchronous one, safe against the training
// buffers changing after the snapshot) and the export of a sharded checkpoint as one
// nanoGPT safetensors file.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "checkpoint/async_writer.h"
#include "checkpoint/export.h"
#include "checkpoint/reader.h"
#include "checkpoint/safetensors.h"
#include "test_checkpoint_support.h"

using namespace trainctl;
using namespace trainctl::checkpoint;
using namespace trainctl::checkpoint::testing;

namespace {

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("the async writer writes the same files as the synchronous one", "[checkpoint]") {
  ScratchDir sync_dir, async_dir;
  const ShardLayout l{2, 2, 1};
  RankTensors tensors = rank_tensors(l, 3);
  const FileRecord sync_record = write_shard(sync_dir.path(), 3, tensors.views());

  AsyncShardWriter writer;
  CHECK_FALSE(writer.pending());
  writer.start(async_dir.path(), 3, tensors.views());
  CHECK(writer.pending());
  // Training goes on and changes its buffers: the snapshot is unaffected.
  for (auto& t : tensors.data) std::fill(t.begin(), t.end(), -7.0f);
  CHECK_THROWS_AS(writer.start(async_dir.path(), 3, tensors.views()), std::logic_error);
  const FileRecord async_record = writer.wait();
  CHECK_FALSE(writer.pending());

  CHECK(to_json(async_record) == to_json(sync_record));
  CHECK(bytes_of(async_dir / "rank_00003.safetensors") ==
        bytes_of(sync_dir / "rank_00003.safetensors"));
  CHECK(bytes_of(async_dir / "rank_00003.json") == bytes_of(sync_dir / "rank_00003.json"));
}

TEST_CASE("the async writer hands its error to wait()", "[checkpoint]") {
  ScratchDir dir;
  AsyncShardWriter writer;
  CHECK_THROWS_AS(writer.wait(), std::logic_error);
  writer.start(dir / "does-not-exist", 0, rank_tensors({1, 1, 1}, 0).views());
  CHECK_THROWS_WITH(writer.wait(), Catch::Contains("rank_00000.safetensors"));
  // The writer is usable again.
  writer.start(dir.path(), 0, rank_tensors({1, 1, 1}, 0).views());
  CHECK(writer.wait().name == "rank_00000.safetensors");
}

TEST_CASE("a shard file is a safetensors file describing its shards", "[checkpoint]") {
  ScratchDir dir;
  const ShardLayout l{2, 1, 1};
  const RankTensors t = rank_tensors(l, 1);
  write_shard(dir.path(), 1, t.views());
  const std::vector<NamedTensor> read = read_safetensors(dir / "rank_00001.safetensors");
  REQUIRE(read.size() == t.names.size());
  for (size_t i = 0; i < read.size(); ++i) {
    CHECK(read[i].name == t.names[i]);
    CHECK(read[i].tensor.shape() == t.shards[i].local_shape());
    CHECK(std::equal(t.data[i].begin(), t.data[i].end(), read[i].tensor.f32()));
  }
  const SafetensorsIndex index = read_safetensors_index(dir / "rank_00001.safetensors");
  const auto shards = nlohmann::json::parse(index.metadata.at("trainctl.shards"));
  CHECK(shards.size() == t.names.size());
  CHECK(shards[0]["name"] == "transformer.wte.weight");
  CHECK(shards[0]["global_shape"] == Shape{16, 8});
  CHECK(shards[0]["index"] == 1);
}

TEST_CASE("export writes the whole model with nanoGPT names and global shapes", "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), {2, 2, 2}, 9);
  CheckpointReader reader(dir.path());
  ScratchDir elsewhere;  // never inside the checkpoint directory (export refuses that)
  const fs::path out = elsewhere / "model.safetensors";
  const ExportSummary summary = export_full_model(reader, out);
  const std::vector<NamedTensor> model = read_safetensors(out);
  // wte, wpe, 4 blocks of 12, ln_f weight and bias; no optimizer state, no duplicates.
  REQUIRE(model.size() == 2 + 4 * 12 + 2);
  CHECK(summary.tensors == static_cast<int>(model.size()));
  CHECK(summary.bytes == fs::file_size(out));
  CHECK(model[0].name == "transformer.wte.weight");
  CHECK(model[1].name == "transformer.wpe.weight");
  CHECK(model[2].name == "transformer.h.0.ln_1.weight");
  CHECK(model[2 + 12].name == "transformer.h.1.ln_1.weight");
  CHECK(model.back().name == "transformer.ln_f.bias");
  int64_t params = 0;
  for (const NamedTensor& t : model) {
    INFO(t.name);
    CHECK(t.tensor.shape() == reader.global_shape(t.name));
    for (int64_t g = 0; g < t.tensor.numel(); ++g) {
      if (t.tensor.f32()[g] != expected_value(t.name, g)) FAIL("element " << g);
    }
    params += t.tensor.numel();
  }
  CHECK(summary.parameters == params);
  CHECK(params == kCfg.num_params());  // wpe included, the tied LM head not
  const SafetensorsIndex index = read_safetensors_index(out);
  CHECK(index.metadata.at("n_layer") == "4");
  CHECK(index.metadata.at("n_embd") == "8");
  CHECK(index.metadata.at("job") == "ckpt-test");
  CHECK(index.data_start % 8 == 0);
}
