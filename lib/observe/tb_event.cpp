#include "observe/tb_event.h"

#include "observe/protobuf_wire.h"

namespace trainctl::observe {

namespace {

// Field numbers of event.proto and summary.proto.
namespace event {
constexpr int kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5, kSessionLog = 7;
}
constexpr int kSessionLogStatus = 1, kSessionLogStart = 1;
constexpr int kSummaryValue = 1;
namespace value {
constexpr int kTag = 1, kSimpleValue = 2, kTensor = 8, kMetadata = 9;
}
constexpr int kMetadataPluginData = 1, kPluginName = 1;
constexpr int kTensorDtype = 1, kTensorShape = 2, kTensorStringVal = 8, kDtString = 7;

ProtoWriter event_header(double wall_time, int64_t step) {
  ProtoWriter e;
  e.fixed64_double(event::kWallTime, wall_time);
  if (step != 0) e.varint(event::kStep, static_cast<uint64_t>(step));
  return e;
}

}  // namespace

std::string file_version_event(double wall_time) {
  ProtoWriter e = event_header(wall_time, 0);
  e.bytes(event::kFileVersion, "brain.Event:2");
  return e.data();
}

std::string session_start_event(double wall_time, int64_t step) {
  ProtoWriter log;
  log.varint(kSessionLogStatus, kSessionLogStart);
  ProtoWriter e = event_header(wall_time, step);
  e.message(event::kSessionLog, log);
  return e.data();
}

std::string scalars_event(double wall_time, int64_t step, const Scalars& scalars) {
  ProtoWriter summary;
  for (const auto& [tag, v] : scalars) {
    ProtoWriter value;
    value.bytes(value::kTag, tag);
    value.fixed32_float(value::kSimpleValue, static_cast<float>(v));
    summary.message(kSummaryValue, value);
  }
  ProtoWriter e = event_header(wall_time, step);
  e.message(event::kSummary, summary);
  return e.data();
}

std::string text_event(double wall_time, int64_t step, std::string_view tag,
                       std::string_view text) {
  ProtoWriter plugin;
  plugin.bytes(kPluginName, "text");
  ProtoWriter metadata;
  metadata.message(kMetadataPluginData, plugin);
  ProtoWriter tensor;
  tensor.varint(kTensorDtype, kDtString);
  tensor.message(kTensorShape, ProtoWriter{});  // a scalar: no dimensions
  tensor.bytes(kTensorStringVal, text);
  ProtoWriter value;
  value.bytes(value::kTag, tag);
  value.message(value::kMetadata, metadata);
  value.message(value::kTensor, tensor);
  ProtoWriter summary;
  summary.message(kSummaryValue, value);
  ProtoWriter e = event_header(wall_time, step);
  e.message(event::kSummary, summary);
  return e.data();
}

}  // namespace trainctl::observe
