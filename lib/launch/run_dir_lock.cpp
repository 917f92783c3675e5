#include "launch/run_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <sstream>
#include <system_error>
#include <thread>

#include "util/error.h"

namespace trainctl::launch {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxHolderText = 4096;  // what is read of a holder's note, at most

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown host";
  return name;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

std::string read_note(int fd) {
  std::string text(kMaxHolderText, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return text;
}

// The value of the "key: value" line in the holder's note, or "".
std::string note_value(const std::string& note, const std::string& key) {
  std::istringstream lines(note);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key + ": ", 0) == 0) return line.substr(key.size() + 2);
  }
  return {};
}

// The holder writes its note right after locking; give it a moment to appear.
std::string holder_description(int fd) {
  std::string note;
  for (int i = 0; i < 20; ++i) {
    note = read_note(fd);
    if (note.find("\nend\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string pid = note_value(note, "pid");
  if (pid.empty()) return "another trainctl job (it has not written who it is yet)";
  std::string text = "another trainctl job: pid " + pid + " on host " + note_value(note, "host") +
                     ", started " + note_value(note, "started");
  const std::string job = note_value(note, "job"), spec = note_value(note, "spec");
  if (!job.empty()) text += ", job '" + job + "'";
  if (!spec.empty()) text += " (" + spec + ")";
  return text;
}

}  // namespace

fs::path RunDirLock::file_of(const fs::path& run_dir) { return run_dir / ".trainctl.lock"; }

RunDirLock::RunDirLock(const fs::path& run_dir, const std::string& job_name,
                       const fs::path& spec_path) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) {
    throw InputError("run_dir " + run_dir.string() + ": cannot create it: " + ec.message() +
                     "; choose a writable run_dir (--set run_dir=PATH)");
  }
  const fs::path file = file_of(run_dir);
  // No O_TRUNC: the file may be a live holder's, whose note a refused job must still read.
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) {
    throw InputError("run_dir " + run_dir.string() + ": cannot create the lock file " +
                     file.string() + ": " + std::strerror(errno) +
                     "; choose a writable run_dir (--set run_dir=PATH)");
  }
  int rc;
  do {
    rc = ::flock(fd_, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    std::string holder = err == EWOULDBLOCK ? holder_description(fd_) : std::string();
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) {
      throw InputError("run_dir " + run_dir.string() + ": cannot lock " + file.string() + ": " +
                       std::strerror(err));
    }
    throw InputError("run_dir " + run_dir.string() + " is in use by " + holder +
                     ". One job per run_dir: wait for it to finish or stop it, or give this "
                     "job another run_dir (--set run_dir=PATH)");
  }
  // Ours now: replace a previous holder's note with this job's. "end" marks it complete.
  std::string note = "# held by a running trainctl launcher; do not delete it\n";
  note += "pid: " + std::to_string(::getpid()) + "\n";
  note += "host: " + host_name() + "\n";
  note += "started: " + utc_now() + "\n";
  note += "job: " + job_name + "\n";
  note += "spec: " + spec_path.string() + "\n";
  note += "end\n";
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, note.data(), note.size(), 0) != static_cast<ssize_t>(note.size())) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw InputError("run_dir " + run_dir.string() + ": cannot write the lock file " +
                     file.string() + ": " + std::strerror(err));
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace trainctl::launch
