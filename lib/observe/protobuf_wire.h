#pragma once
// The protocol-buffer wire format, encoding only: enough to write the few TensorBoard
// messages trainctl emits (observe/tb_event.h) without a protoc step or libprotobuf.
// Fields are appended in the order the caller writes them; nested messages are encoded
// into their own ProtoWriter and appended with message().
#include <cstdint>
#include <string>
#include <string_view>

namespace trainctl::observe {

class ProtoWriter {
 public:
  void varint(int field, uint64_t value);              // int32/int64/uint64/enum/bool
  void fixed64_double(int field, double value);        // double
  void fixed32_float(int field, float value);          // float
  void bytes(int field, std::string_view value);       // string/bytes
  void message(int field, const ProtoWriter& nested);  // an embedded message

  const std::string& data() const { return out_; }

 private:
  void tag(int field, int wire_type);
  void raw_varint(uint64_t value);

  std::string out_;
};

}  // namespace trainctl::observe
