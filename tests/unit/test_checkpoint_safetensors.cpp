// Safetensors headers are checked before any byte is read through them: known dtypes, sizes
// that equal dtype size x shape, ranges inside the file that tile the data section (no
// overlap, no hole), no overflowing shapes. Hand-made files, one flaw each; then a shard of
// a real checkpoint whose header was edited to make two tensors overlap (its checksum and
// metadata.json fixed up, as a careful edit would) is refused by verify and by reading.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "checkpoint/checksum.h"
#include "checkpoint/errors.h"
#include "checkpoint/reader.h"
#include "checkpoint/safetensors.h"
#include "test_checkpoint_support.h"

using namespace trainctl;
using namespace trainctl::checkpoint;
using namespace trainctl::checkpoint::testing;

namespace {

// An 8-byte length, `header` as given, then `data_bytes` zero bytes.
void write_raw(const fs::path& file, const std::string& header, size_t data_bytes,
               uint64_t announced = 0) {
  const uint64_t n = announced ? announced : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  out.append(data_bytes, '\0');
  std::ofstream(file, std::ios::binary) << out;
}

std::string index_error(const fs::path& file) {
  try {
    read_safetensors_index(file);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a safetensors header is checked before its ranges are used", "[checkpoint]") {
  ScratchDir dir;
  const fs::path f = dir / "t.safetensors";
  const std::string a = R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]})";

  write_raw(f, "{" + a + R"(,"b":{"dtype":"F16","shape":[2,2],"data_offsets":[16,24]}})", 24);
  const SafetensorsIndex ok = read_safetensors_index(f);
  REQUIRE(ok.tensors.size() == 2);
  CHECK(ok.tensors[1].begin == 16);

  struct Case {
    std::string header;
    size_t data;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"{" + a + R"(,"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", 24,
       "b (bytes [8, 24)) overlaps a (bytes [0, 16))"},
      {"{" + a + R"(,"b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 16, "overlaps"},
      {"{" + a + R"(,"b":{"dtype":"F32","shape":[4],"data_offsets":[20,36]}})", 36,
       "bytes [16, 20) of the data section belong to no tensor"},
      {"{" + a + "}", 20, "bytes [16, 20) of the data section belong to no tensor"},
      {"{" + a + "}", 12, "truncated: a ends at byte 16"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 12,
       "bad data_offsets for a: [0, 12) is not 16 bytes"},
      {R"({"a":{"dtype":"Q7","shape":[4],"data_offsets":[0,16]}})", 16, "unknown dtype \"Q7\""},
      {R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", 16,
       "extents must be integers"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", 16,
       "more than 2^40 elements"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[16]}})", 16, "want [begin, end]"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[-16,0]}})", 16, "want [begin, end]"},
      {R"([1, 2])", 0, "not a JSON object"},
      {R"({"a":)", 0, "damaged safetensors header"},
  };
  for (const Case& c : cases) {
    INFO(c.header);
    write_raw(f, c.header, c.data);
    CHECK_THAT(index_error(f), Catch::Contains(f.string()) && Catch::Contains(c.message));
  }
  write_raw(f, "{" + a + "}", 16, 1000);
  CHECK_THAT(index_error(f), Catch::Contains("truncated safetensors header (1000 bytes announced"));
  std::ofstream(f, std::ios::binary) << "abc";
  CHECK_THAT(index_error(f), Catch::Contains("no header"));
}

TEST_CASE("a shard edited so two tensors overlap is refused even with its checksum fixed",
          "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), {2, 1, 1}, 3);
  const fs::path shard = dir / "rank_00000.safetensors";
  std::string bytes;
  {
    std::ifstream in(shard, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    bytes = s.str();
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  auto header = nlohmann::ordered_json::parse(bytes.substr(8, n));
  // The second tensor now claims the first one's bytes (same size: wte and its moment have
  // the same shape, so the sizes still match).
  const std::string first = "transformer.wte.weight";
  const std::string twin = optimizer_tensor_name("exp_avg", first);
  REQUIRE(header.contains(twin));
  header[twin]["data_offsets"] = header[first]["data_offsets"];
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  out += text + bytes.substr(8 + n);
  std::ofstream(shard, std::ios::binary | std::ios::trunc) << out;
  CheckpointMetadata m = read_metadata(dir.path());
  uint64_t size = 0;
  m.files[0].checksum = checksum_text(file_crc32c(shard, &size));
  m.files[0].bytes = size;
  write_metadata(dir.path(), m);

  CheckpointReader reader(dir.path());
  CHECK_THROWS_AS(reader.verify(), CheckpointCorrupt);
  CHECK_THROWS_WITH(reader.verify(), Catch::Contains("rank_00000.safetensors") &&
                                         Catch::Contains(" overlaps ") &&
                                         Catch::Contains(twin + " (bytes ["));
  CHECK_THROWS_WITH(reader.read_full(twin), Catch::Contains("overlaps"));
}
