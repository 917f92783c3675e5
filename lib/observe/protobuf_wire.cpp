#include "observe/protobuf_wire.h"

#include <cstring>

namespace trainctl::observe {

namespace {
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;
}  // namespace

void ProtoWriter::raw_varint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void ProtoWriter::tag(int field, int wire_type) {
  raw_varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtoWriter::varint(int field, uint64_t value) {
  tag(field, kVarint);
  raw_varint(value);
}

void ProtoWriter::fixed64_double(int field, double value) {
  tag(field, kFixed64);
  char b[8];
  std::memcpy(b, &value, 8);  // little-endian hosts only, as the wire format
  out_.append(b, 8);
}

void ProtoWriter::fixed32_float(int field, float value) {
  tag(field, kFixed32);
  char b[4];
  std::memcpy(b, &value, 4);
  out_.append(b, 4);
}

void ProtoWriter::bytes(int field, std::string_view value) {
  tag(field, kLengthDelimited);
  raw_varint(value.size());
  out_.append(value);
}

void ProtoWriter::message(int field, const ProtoWriter& nested) { bytes(field, nested.out_); }

}  // namespace trainctl::observe
