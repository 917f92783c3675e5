#include "observe/tensorboard_writer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "observe/tfrecord.h"

namespace trainctl::observe {

namespace {

constexpr std::string_view kPrefix = "events.out.tfevents.";

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// TensorBoard reads a directory's event files in name order: the new file's timestamp is
// past every existing one's, so a resume within the same second still sorts last.
int64_t file_timestamp(const std::filesystem::path& dir) {
  int64_t stamp = static_cast<int64_t>(wall_time());
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    try {
      stamp = std::max<int64_t>(stamp, std::stoll(name.substr(kPrefix.size())) + 1);
    } catch (const std::exception&) {
      // not one of ours: its name does not affect the order of ours
    }
  }
  return stamp;
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir, int64_t first_step) {
  std::filesystem::create_directories(dir);
  // Ten digits keep the names sorting by time until the year 2286.
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%010lld", static_cast<long long>(file_timestamp(dir)));
  path_ =
      dir / (std::string(kPrefix) + stamp + "." + host_name() + "." + std::to_string(::getpid()));
  file_.open(path_, std::ios::binary | std::ios::trunc);
  if (!file_) throw std::runtime_error("cannot create TensorBoard event file " + path_.string());
  const double now = wall_time();
  write(file_version_event(now));
  write(session_start_event(now, first_step));
}

void TensorBoardWriter::write(const std::string& event) {
  file_ << tfrecord_frame(event);
  file_.flush();
  if (!file_) throw std::runtime_error("cannot write TensorBoard event file " + path_.string());
}

void TensorBoardWriter::add_scalars(int64_t step, const Scalars& scalars) {
  if (!scalars.empty()) write(scalars_event(wall_time(), step, scalars));
}

void TensorBoardWriter::add_text(int64_t step, std::string_view tag, std::string_view text) {
  write(text_event(wall_time(), step, tag, text));
}

}  // namespace trainctl::observe
