#pragma once
// The TensorBoard `Event` protobufs trainctl writes (tensorflow/core/util/event.proto,
// summary.proto), hand-encoded: the file-version header, a SessionLog START marking where a
// launch's steps begin (TensorBoard then drops data of earlier launches at and after that
// step, so a resumed run shows each step once), scalars and text.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainctl::observe {

using Scalars = std::vector<std::pair<std::string, double>>;  // tag -> value

// Each returns one serialized Event message (frame it with tfrecord_frame).
std::string file_version_event(double wall_time);  // "brain.Event:2"
std::string session_start_event(double wall_time, int64_t step);
std::string scalars_event(double wall_time, int64_t step, const Scalars& scalars);
// A text summary (TensorBoard's text plugin; shown under TEXT, rendered as markdown).
std::string text_event(double wall_time, int64_t step, std::string_view tag, std::string_view text);

}  // namespace trainctl::observe
