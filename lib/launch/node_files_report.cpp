#include "launch/node_files_report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace trainctl::launch {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t fnv1a(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

std::string name(const NodeFilesReport& r) {
  return "node " + std::to_string(r.node) + (r.host.empty() ? "" : " (" + r.host + ")");
}

std::string join_names(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? " and " : ", ";
    out += parts[i];
  }
  return out;
}

std::optional<std::string> run_dir_verdict(const std::vector<NodeFilesReport>& reports,
                                           const std::filesystem::path& run_dir) {
  std::vector<std::string> blind;
  for (size_t i = 1; i < reports.size(); ++i) {
    if (!reports[i].run_dir_problem.empty()) {
      blind.push_back(name(reports[i]) + " " + reports[i].run_dir_problem);
    }
  }
  if (blind.empty()) return std::nullopt;
  return "run_dir " + run_dir.string() +
         " is not one directory that every node sees: " + name(reports[0]) +
         " wrote a check file into it, but " + join_names(blind) +
         ". Every node's workers write their checkpoint shards, logs and metrics into "
         "run_dir, so the job would lose its checkpoints: put run_dir on a shared file system "
         "(NFS, Lustre, ...) or on a directory that every node mounts at the same path "
         "(run_dir: in the spec, or --set run_dir=PATH)";
}

std::optional<std::string> data_verdict(const std::vector<NodeFilesReport>& reports,
                                        const std::filesystem::path& data_path) {
  if (data_path.empty()) return std::nullopt;
  const std::string& reference = reports[0].data;
  std::vector<std::string> differ;
  for (size_t i = 1; i < reports.size(); ++i) {
    if (reports[i].data != reference) differ.push_back(name(reports[i]) + ": " + reports[i].data);
  }
  if (differ.empty()) return std::nullopt;
  return "data.path " + data_path.string() +
         " is not the same file on every node: " + name(reports[0]) + ": " + reference + "; " +
         join_names(differ) +
         ". Every node's workers read their batches from it: give every node the same file "
         "at that path (copy it to each node, or put it on a shared file system)";
}

std::optional<std::string> spec_verdict(const std::vector<NodeFilesReport>& reports) {
  std::vector<std::string> differ;
  for (size_t i = 1; i < reports.size(); ++i) {
    if (reports[i].spec_hash != reports[0].spec_hash) differ.push_back(name(reports[i]));
  }
  if (differ.empty()) return std::nullopt;
  return "the job spec is not the same on every node: " + join_names(differ) +
         " resolved it differently from " + name(reports[0]) +
         ": start every node's launcher with the same spec file and the same --set overrides "
         "(`trainctl validate JOB.yaml` on each node prints the resolved spec)";
}

}  // namespace

std::string text_hash(const std::string& text) {
  return hex16(fnv1a(kFnvOffset, reinterpret_cast<const unsigned char*>(text.data()), text.size()));
}

std::string file_fingerprint(const std::filesystem::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "missing: " + std::string(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return "missing: not a regular file";
  }
  uint64_t h = kFnvOffset;
  uint64_t left = std::min<uint64_t>(static_cast<uint64_t>(st.st_size), kFingerprintBytes);
  unsigned char buf[64 * 1024];
  while (left > 0) {
    ssize_t n = ::read(fd, buf, std::min<uint64_t>(left, sizeof buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "shorter than its size";
      ::close(fd);
      return "missing: cannot read: " + why;
    }
    h = fnv1a(h, buf, static_cast<size_t>(n));
    left -= static_cast<uint64_t>(n);
  }
  ::close(fd);
  return std::to_string(st.st_size) + " bytes, first MiB hash " + hex16(h);
}

std::string encode_report(const NodeFilesReport& r) {
  return "node=" + std::to_string(r.node) + "\nhost=" + one_line(r.host) +
         "\nrun_dir=" + one_line(r.run_dir_problem) + "\ndata=" + one_line(r.data) +
         "\nspec=" + one_line(r.spec_hash) + "\n";
}

NodeFilesReport decode_report(const std::string& text) {
  NodeFilesReport r;
  std::istringstream in(text);
  std::string line;
  int fields = 0;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("malformed node report: " + line);
    const std::string key = line.substr(0, eq);
    std::string value = line.substr(eq + 1);
    if (key == "node") {
      try {
        r.node = std::stoi(value);
      } catch (const std::exception&) {
        throw std::invalid_argument("malformed node number in a node report: " + value);
      }
    } else if (key == "host") {
      r.host = std::move(value);
    } else if (key == "run_dir") {
      r.run_dir_problem = std::move(value);
    } else if (key == "data") {
      r.data = std::move(value);
    } else if (key == "spec") {
      r.spec_hash = std::move(value);
    } else {
      throw std::invalid_argument("unknown field in a node report: " + key);
    }
    ++fields;
  }
  if (fields != 5) throw std::invalid_argument("incomplete node report");
  return r;
}

std::optional<std::string> shared_files_verdict(const std::vector<NodeFilesReport>& reports,
                                                const std::filesystem::path& run_dir,
                                                const std::filesystem::path& data_path) {
  if (reports.empty()) throw std::invalid_argument("shared_files_verdict: no reports");
  std::vector<std::string> problems;
  for (auto verdict : {run_dir_verdict(reports, run_dir), data_verdict(reports, data_path),
                       spec_verdict(reports)}) {
    if (verdict) problems.push_back(*verdict);
  }
  if (problems.empty()) return std::nullopt;
  std::string out;
  for (const auto& p : problems) out += (out.empty() ? "" : "; also: ") + p;
  return out;
}

}  // namespace trainctl::launch
