// Damaged checkpoints: a flipped bit, a truncated or missing shard, a broken metadata.json
// are detected and named; nothing damaged is ever read into a model.
#include <catch2/catch.hpp>

#include <fstream>

#include "checkpoint/checksum.h"
#include "checkpoint/errors.h"
#include "checkpoint/reader.h"
#include "test_checkpoint_support.h"
#include "util/error.h"

using namespace trainctl;
using namespace trainctl::checkpoint;
using namespace trainctl::checkpoint::testing;

namespace {

void flip_bit(const fs::path& file, uint64_t offset_from_end) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-static_cast<std::streamoff>(offset_from_end), std::ios::end);
  char c = 0;
  f.get(c);
  f.seekp(-static_cast<std::streamoff>(offset_from_end), std::ios::end);
  f.put(static_cast<char>(c ^ 0x10));
}

const ShardLayout kSaved{2, 2, 1};

}  // namespace

TEST_CASE("a flipped bit fails verification naming the file", "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), kSaved, 5);
  flip_bit(dir / "rank_00001.safetensors", 5);
  CheckpointReader reader(dir.path());
  const std::vector<FileCheck> checks = reader.check_files();
  REQUIRE(checks.size() == 4);
  CHECK(checks[0].ok);
  CHECK_FALSE(checks[1].ok);
  CHECK(checks[2].ok);
  CHECK_THAT(checks[1].problem,
             Catch::StartsWith("rank_00001.safetensors: checksum mismatch (expected crc32c:") &&
                 Catch::Contains("resume from an older checkpoint"));
  CHECK_THROWS_AS(reader.verify(), CheckpointCorrupt);
  CHECK_THROWS_WITH(reader.verify(), Catch::Contains("rank_00001.safetensors: checksum mismatch"));
  // Reading touches the damaged file: refused. Rank 0's file alone is fine.
  const RankTensors r1 = rank_tensors(kSaved, 1);
  std::vector<float> out(r1.data[0].size());
  CHECK_THROWS_AS(reader.read_slice(r1.names[0], r1.shards[0], out.data()), CheckpointCorrupt);
  CheckpointReader fresh(dir.path());
  const RankTensors r0 = rank_tensors(kSaved, 0);
  fresh.read_slice(r0.names[0], r0.shards[0], out.data());
  CHECK(out == r0.data[0]);
}

TEST_CASE("a truncated shard is detected by verify and by reading", "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), kSaved, 5);
  const fs::path file = dir / "rank_00002.safetensors";
  fs::resize_file(file, fs::file_size(file) - 100);
  CheckpointReader reader(dir.path());
  CHECK_THROWS_WITH(reader.verify(),
                    Catch::Contains("rank_00002.safetensors") && Catch::Contains("(truncated)"));
  // Even with per-read checksums off, the size check refuses the file (never maps past EOF).
  reader.set_verify_on_read(false);
  // Layer 3 is on the last stage: its TP-0 slice of c_fc is in rank 2's file only.
  const RankTensors r2 = rank_tensors(kSaved, 2);
  const auto it = std::find(r2.names.begin(), r2.names.end(), "transformer.h.3.mlp.c_fc.weight");
  REQUIRE(it != r2.names.end());
  const size_t i = static_cast<size_t>(it - r2.names.begin());
  std::vector<float> out(r2.data[i].size());
  CHECK_THROWS_AS(reader.read_slice(r2.names[i], r2.shards[i], out.data()), CheckpointCorrupt);
  // Replicated tensors are read from an intact copy (wte's tied copy is also in rank 0's file).
  const RankTensors r0 = rank_tensors(kSaved, 0);
  std::vector<float> wte(r0.data[0].size());
  reader.read_slice("transformer.wte.weight", r0.shards[0], wte.data());
  CHECK(wte == r0.data[0]);
}

TEST_CASE("a missing shard or a broken metadata.json is reported", "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), kSaved, 5);
  fs::remove(dir / "rank_00003.safetensors");
  {
    CheckpointReader reader(dir.path());
    CHECK_THROWS_WITH(reader.verify(), Catch::Contains("rank_00003.safetensors: missing"));
  }
  std::ofstream(dir / "metadata.json") << "{\"format_version\": 1, \"step\": ";
  CHECK_THROWS_AS(CheckpointReader(dir.path()), InputError);
  fs::remove(dir / "metadata.json");
  CHECK_THROWS_WITH(CheckpointReader(dir.path()), Catch::Contains("has no metadata.json"));
}

TEST_CASE("CRC-32C matches the standard check value", "[checkpoint]") {
  const std::string text = "123456789";
  CHECK(crc32c(text.data(), text.size()) == 0xe3069283u);
  Crc32c pieces;
  pieces.update(text.data(), 4);
  pieces.update(text.data() + 4, 5);
  CHECK(pieces.value() == 0xe3069283u);
  CHECK(checksum_text(0xe3069283u) == "crc32c:e3069283");
  std::vector<unsigned char> zeros(32, 0);
  CHECK(crc32c(zeros.data(), zeros.size()) == 0x8a9136aau);  // RFC 3720 B.4
}
