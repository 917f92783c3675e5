#pragma once
// Errors of the checkpoint layer. Both are input the user can fix by choosing another
// checkpoint, so both are InputErrors (util/error.h: exit code 2, and a worker that meets
// one is not restarted into the same error): a path that holds no checkpoint or one written
// for another model is a plain InputError; a checkpoint whose files are damaged, edited or
// inconsistent is a CheckpointCorrupt, which `--resume auto` skips (with a warning) for an
// older checkpoint.
#include "util/error.h"

namespace trainctl::checkpoint {

// A file of a checkpoint fails its checksum or size, is truncated or unreadable, or
// metadata.json was modified, holds a value out of range or contradicts the files. The
// message names the checkpoint and the file or field, and says what to do (resume from an
// older checkpoint).
class CheckpointCorrupt : public InputError {
 public:
  using InputError::InputError;
};

}  // namespace trainctl::checkpoint
