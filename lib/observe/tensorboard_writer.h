#pragma once
// TensorBoard event files under a run's tb/ directory. Each launch (a first start or a
// resume) writes a new file, events.out.tfevents.<seconds>.<host>.<pid>, named to sort
// after every file already there, that opens with a SessionLog START at the first step the
// launch will log: TensorBoard's reader discards what earlier files logged at or after that
// step, so a run resumed from a checkpoint shows each step once (the resumed launch's value).
// Every record is flushed at once, so TensorBoard follows a run live and a crash loses nothing
// already logged.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "observe/tb_event.h"

namespace trainctl::observe {

class TensorBoardWriter {
 public:
  // Creates `dir` if needed and a new event file in it; `first_step`: the first step this
  // launch logs. Throws std::runtime_error naming the file when it cannot be written.
  TensorBoardWriter(const std::filesystem::path& dir, int64_t first_step);

  void add_scalars(int64_t step, const Scalars& scalars);
  void add_text(int64_t step, std::string_view tag, std::string_view text);

  const std::filesystem::path& path() const { return path_; }

 private:
  void write(const std::string& event);

  std::filesystem::path path_;
  std::ofstream file_;
};

}  // namespace trainctl::observe
