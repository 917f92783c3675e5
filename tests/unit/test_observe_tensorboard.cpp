// TensorBoard's container and message encoding (observe/): the bytes TensorFlow's reader
// expects. The real reader checks whole files in tests/observe/check_tensorboard.sh.
#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "observe/metric_scalars.h"
#include "observe/protobuf_wire.h"
#include "observe/tb_event.h"
#include "observe/tfrecord.h"

using namespace trainctl::observe;

TEST_CASE("protobuf wire: varints, fixed-width numbers, strings, nested messages", "[observe]") {
  ProtoWriter w;
  w.varint(1, 150);  // the protobuf documentation's example: 08 96 01
  CHECK(w.data() == std::string("\x08\x96\x01", 3));
  ProtoWriter s;
  s.bytes(2, "testing");  // 12 07 74 65 73 74 69 6e 67
  CHECK(s.data() == std::string("\x12\x07testing", 9));
  ProtoWriter outer;
  outer.message(3, w);  // 1a 03 08 96 01
  CHECK(outer.data() == std::string("\x1a\x03\x08\x96\x01", 5));
  ProtoWriter f;
  f.fixed32_float(2, 1.0f);  // tag 0x15, then 1.0f little-endian
  CHECK(f.data() == std::string("\x15\x00\x00\x80\x3f", 5));
  ProtoWriter d;
  d.fixed64_double(1, 2.0);  // tag 0x09, then 2.0 little-endian
  CHECK(d.data() == std::string("\x09\x00\x00\x00\x00\x00\x00\x00\x40", 9));
}

TEST_CASE("TFRecord framing: length, masked CRC-32C of length and data", "[observe]") {
  // crc32c("") = 0, so its mask is the constant alone.
  CHECK(masked_crc32c("") == 0xa282ead8u);
  // crc32c("123456789") = 0xe3069283 (the check value); masked: ror 15 + 0xa282ead8.
  const uint32_t crc = 0xe3069283u;
  CHECK(masked_crc32c("123456789") == ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
  const std::string frame = tfrecord_frame("abc");
  REQUIRE(frame.size() == 8 + 4 + 3 + 4);
  uint64_t length = 0;
  std::memcpy(&length, frame.data(), 8);
  CHECK(length == 3);
  uint32_t length_crc = 0, data_crc = 0;
  std::memcpy(&length_crc, frame.data() + 8, 4);
  std::memcpy(&data_crc, frame.data() + 15, 4);
  CHECK(length_crc == masked_crc32c(frame.substr(0, 8)));
  CHECK(frame.substr(12, 3) == "abc");
  CHECK(data_crc == masked_crc32c("abc"));
}

TEST_CASE("TensorBoard events: file version and session start", "[observe]") {
  const std::string v = file_version_event(0.0);
  CHECK(v.find("brain.Event:2") != std::string::npos);
  // wall_time 0.0 (field 1, fixed64), step 7 (field 2), session_log {status: START} (field 7).
  const std::string start = session_start_event(0.0, 7);
  CHECK(start == std::string("\x09\0\0\0\0\0\0\0\0\x10\x07\x3a\x02\x08\x01", 15));
}

TEST_CASE("metrics.jsonl line to scalars: numbers, lists by index, booleans", "[observe]") {
  const auto line = nlohmann::ordered_json::parse(
      R"({"step":5,"loss":2.5,"pipeline_idle_ms":[1.0,3.0],"skipped":true,"note":"x"})");
  const Scalars s = metric_scalars(line);
  REQUIRE(s.size() == 4);
  CHECK(s[0] == std::pair<std::string, double>("loss", 2.5));
  CHECK(s[1] == std::pair<std::string, double>("pipeline_idle_ms/0", 1.0));
  CHECK(s[2] == std::pair<std::string, double>("pipeline_idle_ms/1", 3.0));
  CHECK(s[3] == std::pair<std::string, double>("skipped", 1.0));
}

TEST_CASE("metrics.jsonl MoE figures to scalars: per MoE layer, dense layers left out",
          "[observe][moe]") {
  const auto line = nlohmann::ordered_json::parse(
      R"({"step":5,"moe_aux_loss":0.1,"moe_load_imbalance":[null,1.5,null,1.25],)"
      R"("moe_expert_load":[null,[0.5,0.5],null,[0.25,0.75]],"moe_dropped_fraction":0})");
  const Scalars s = metric_scalars(line);
  REQUIRE(s.size() == 4);
  CHECK(s[0] == std::pair<std::string, double>("moe_aux_loss", 0.1));
  CHECK(s[1] == std::pair<std::string, double>("moe_load_imbalance/1", 1.5));
  CHECK(s[2] == std::pair<std::string, double>("moe_load_imbalance/3", 1.25));
  CHECK(s[3] == std::pair<std::string, double>("moe_dropped_fraction", 0.0));
}
