#pragma once
// One job per run directory. Two jobs writing one run_dir interleave metrics.jsonl,
// overwrite each other's logs and resume from each other's half-written checkpoints, so
// node 0's launcher holds an advisory flock(2) on run_dir/.trainctl.lock for the whole job,
// taken before it writes anything else there. The kernel releases the lock when the
// launcher exits or dies, even by SIGKILL: a lock file left behind by a dead job never
// blocks, only a live holder does. The holder writes who it is into the file (pid, host,
// start time, job name, spec) so that a refused job can name it.
//
// The file is never deleted: a job that unlinked it on exit could let a newcomer lock a
// fresh file while a third job still holds the old one. Removing it by hand while a job
// runs has the same effect; leave it in place.
#include <filesystem>
#include <string>

namespace trainctl::launch {

class RunDirLock {
 public:
  // Creates run_dir if needed and takes the lock without waiting. Throws InputError
  // (exit code 2) when another live job holds it, naming that job, or when run_dir or the
  // lock file cannot be created (naming the path and the errno text).
  RunDirLock(const std::filesystem::path& run_dir, const std::string& job_name,
             const std::filesystem::path& spec_path);
  ~RunDirLock();  // closing the file releases the lock
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

  static std::filesystem::path file_of(const std::filesystem::path& run_dir);

 private:
  int fd_ = -1;
};

}  // namespace trainctl::launch
