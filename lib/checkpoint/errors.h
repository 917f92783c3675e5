#pragma once
// Errors of the checkpoint layer. A checkpoint that cannot be used because of the user's
// choice (a path that holds no checkpoint, one written for another model) is an InputError
// (util/error.h, exit code 2); a checkpoint whose files are damaged is a CheckpointCorrupt.
#include <stdexcept>

namespace trainctl::checkpoint {

// A file of a checkpoint fails its checksum or size, is truncated or unreadable. The
// message names the file and says what to do (resume from an older checkpoint).
class CheckpointCorrupt : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace trainctl::checkpoint
