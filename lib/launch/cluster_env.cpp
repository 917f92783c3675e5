#include "launch/cluster_env.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "util/error.h"

namespace trainctl::launch {
namespace {

[[noreturn]] void bad_list(std::string_view list, const std::string& why) {
  throw InputError("cannot expand the node list '" + std::string(list) + "': " + why);
}

long parse_long(std::string_view text, std::string_view list) {
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0) {
    bad_list(list, "'" + std::string(text) + "' is not a non-negative number");
  }
  return value;
}

std::string zero_pad(long value, size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// "01-03,7" -> {"01","02","03","7"}
std::vector<std::string> expand_range_set(std::string_view set, std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= set.size()) {
    size_t comma = set.find(',', start);
    if (comma == std::string_view::npos) comma = set.size();
    std::string_view item = set.substr(start, comma - start);
    if (item.empty()) bad_list(list, "empty item inside brackets");
    size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      parse_long(item, list);
      out.emplace_back(item);
    } else {
      std::string_view lo_text = item.substr(0, dash);
      std::string_view hi_text = item.substr(dash + 1);
      long lo = parse_long(lo_text, list);
      long hi = parse_long(hi_text, list);
      if (hi < lo) bad_list(list, "range " + std::string(item) + " runs backwards");
      if (hi - lo > 100000) bad_list(list, "range " + std::string(item) + " is too large");
      for (long v = lo; v <= hi; ++v) out.push_back(zero_pad(v, lo_text.size()));
    }
    start = comma + 1;
  }
  return out;
}

// One host expression without top-level commas: "gpu-[001-002]-x" or "r[1-2]n[3,4]".
std::vector<std::string> expand_host_expr(std::string_view expr, std::string_view list) {
  std::vector<std::string> hosts{""};
  size_t i = 0;
  while (i < expr.size()) {
    if (expr[i] == '[') {
      size_t close = expr.find(']', i);
      if (close == std::string_view::npos) bad_list(list, "'[' without ']'");
      std::vector<std::string> parts = expand_range_set(expr.substr(i + 1, close - i - 1), list);
      std::vector<std::string> next;
      next.reserve(hosts.size() * parts.size());
      for (const std::string& h : hosts) {
        for (const std::string& p : parts) next.push_back(h + p);
      }
      hosts = std::move(next);
      i = close + 1;
    } else if (expr[i] == ']') {
      bad_list(list, "']' without '['");
    } else {
      size_t next_bracket = expr.find_first_of("[]", i);
      if (next_bracket == std::string_view::npos) next_bracket = expr.size();
      for (std::string& h : hosts) h.append(expr.substr(i, next_bracket - i));
      i = next_bracket;
    }
  }
  return hosts;
}

int parse_int_value(const std::string& text, const std::string& what) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw InputError(what + " is '" + text + "', which is not an integer");
  }
  return value;
}

}  // namespace

std::vector<std::string> expand_nodelist(std::string_view list) {
  std::vector<std::string> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (depth < 0) bad_list(list, "']' without '['");
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      std::string_view expr = list.substr(start, i - start);
      if (expr.empty()) bad_list(list, "empty host name");
      for (std::string& h : expand_host_expr(expr, list)) hosts.push_back(std::move(h));
      start = i + 1;
    }
  }
  if (depth != 0) bad_list(list, "'[' without ']'");
  return hosts;
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

ClusterPlacement resolve_cluster(const ClusterFlags& flags, const EnvLookup& env) {
  ClusterPlacement p;
  std::optional<std::string> nodelist = env("SLURM_JOB_NODELIST");
  if (!nodelist) nodelist = env("SLURM_NODELIST");
  std::optional<std::string> slurm_nnodes = env("SLURM_NNODES");
  std::optional<std::string> slurm_nodeid = env("SLURM_NODEID");
  std::optional<std::string> slurm_jobid = env("SLURM_JOB_ID");
  const bool in_slurm = nodelist.has_value() || slurm_nnodes.has_value();

  std::vector<std::string> hosts;
  if (nodelist) hosts = expand_nodelist(*nodelist);

  bool used_slurm = false;
  if (flags.nnodes) {
    p.nnodes = *flags.nnodes;
  } else if (slurm_nnodes) {
    p.nnodes = parse_int_value(*slurm_nnodes, "SLURM_NNODES");
    used_slurm = true;
  } else if (!hosts.empty()) {
    p.nnodes = static_cast<int>(hosts.size());
    used_slurm = true;
  }
  if (flags.node_rank) {
    p.node_rank = *flags.node_rank;
  } else if (in_slurm && slurm_nodeid) {
    p.node_rank = parse_int_value(*slurm_nodeid, "SLURM_NODEID");
    used_slurm = true;
  }
  if (flags.master_addr) {
    p.master_addr = *flags.master_addr;
  } else if (!hosts.empty()) {
    p.master_addr = hosts.front();
    used_slurm = true;
  }
  if (flags.master_port) {
    p.master_port = *flags.master_port;
  } else if (in_slurm && slurm_jobid) {
    int job_id = parse_int_value(*slurm_jobid, "SLURM_JOB_ID");
    p.master_port = kDefaultMasterPort + job_id % 1000;
    used_slurm = true;
  }
  // A single node needs no agreed port: any free one avoids clashes between jobs.
  if (p.nnodes == 1 && !flags.master_port) p.master_port = 0;
  const bool used_flags = flags.nnodes || flags.node_rank || flags.master_addr || flags.master_port;
  p.source = used_slurm ? (used_flags ? "flags + slurm" : "slurm")
                        : (used_flags ? "flags" : "single node");

  if (p.nnodes < 1) {
    throw InputError("the number of nodes must be at least 1 (got " + std::to_string(p.nnodes) +
                     ", from " + p.source + ")");
  }
  if (p.node_rank < 0 || p.node_rank >= p.nnodes) {
    throw InputError("node rank " + std::to_string(p.node_rank) + " is outside [0, " +
                     std::to_string(p.nnodes) + ") (from " + p.source +
                     "): set --node-rank to a value below --nnodes");
  }
  if (p.master_port < (p.nnodes == 1 ? 0 : 1) || p.master_port > 65535) {
    throw InputError("master port " + std::to_string(p.master_port) +
                     " is outside [1, 65535] (from " + p.source +
                     "; 0, any free port, only on a single node)");
  }
  if (p.master_addr.empty()) throw InputError("the master address is empty");
  return p;
}

std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (gai != 0) {
    throw RendezvousError("cannot resolve the master address '" + host +
                          "': " + ::gai_strerror(gai));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, &::freeaddrinfo);
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw RendezvousError(std::string("socket: ") + std::strerror(errno));
  // connect() on a UDP socket only picks the route and source address.
  sockaddr_in local{};
  socklen_t len = sizeof local;
  bool ok = ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) {
    throw RendezvousError("no route from this node to the master address '" + host + "': " +
                          std::strerror(err) + " (give this node's address with --node-addr)");
  }
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  return text;
}

}  // namespace trainctl::launch
