#include "train/trace_output.h"

#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <vector>

#include "observe/trace_json.h"

namespace trainctl::train {

namespace {

constexpr int kRoundTrips = 16;
constexpr uint32_t kTagBase = 0x7ace0000u;  // apart from the pipeline's tags

struct Alignment {
  int64_t offset_ns = 0;  // peer clock - rank 0 clock
  int64_t error_ns = 0;   // half the shortest round trip
};

// Rank 0's side of the ping-pong with `peer`.
Alignment measure(comm::Communicator& world, int peer) {
  Alignment best;
  int64_t best_rtt = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < kRoundTrips; ++i) {
    const int64_t t0 = observe::TraceRecorder::now_ns();
    world.send(&t0, sizeof t0, peer, kTagBase + static_cast<uint32_t>(i));
    int64_t peer_time = 0;
    world.recv(&peer_time, sizeof peer_time, peer, kTagBase + static_cast<uint32_t>(i));
    const int64_t t1 = observe::TraceRecorder::now_ns();
    if (t1 - t0 < best_rtt) {
      best_rtt = t1 - t0;
      best.offset_ns = peer_time - (t0 + (t1 - t0) / 2);
      best.error_ns = (t1 - t0 + 1) / 2;
    }
  }
  return best;
}

void answer(comm::Communicator& world) {
  for (int i = 0; i < kRoundTrips; ++i) {
    int64_t ping = 0;
    world.recv(&ping, sizeof ping, 0, kTagBase + static_cast<uint32_t>(i));
    const int64_t now = observe::TraceRecorder::now_ns();
    world.send(&now, sizeof now, 0, kTagBase + static_cast<uint32_t>(i));
  }
}

std::string process_name(const comm::ProcessGroups& g) {
  return "rank " + std::to_string(g.rank) + " (dp " + std::to_string(g.coord.dp) + ", tp " +
         std::to_string(g.coord.tp) + ", pp " + std::to_string(g.coord.pp) + ")";
}

}  // namespace

std::string write_merged_trace(observe::TraceRecorder& recorder, comm::ProcessGroups& groups,
                               const std::filesystem::path& trace_json) {
  recorder.stop();
  const std::vector<observe::TraceEvent> events = recorder.take();
  const std::vector<std::string> threads = recorder.thread_names();
  comm::Communicator& world = *groups.world;
  const int n = world.size();
  const uint32_t tag_offset = kTagBase + kRoundTrips, tag_size = tag_offset + 1,
                 tag_data = tag_offset + 2;
  if (groups.rank != 0) {
    answer(world);
    int64_t offset = 0;
    world.recv(&offset, sizeof offset, 0, tag_offset);
    const std::string mine =
        observe::rank_trace_events(events, threads, groups.rank, process_name(groups), offset);
    const uint64_t size = mine.size();
    world.send(&size, sizeof size, 0, tag_size);
    if (size > 0) world.send(mine.data(), mine.size(), 0, tag_data);
    return "";
  }
  std::vector<Alignment> aligned(static_cast<size_t>(n));
  for (int r = 1; r < n; ++r) {
    aligned[static_cast<size_t>(r)] = measure(world, r);
    world.send(&aligned[static_cast<size_t>(r)].offset_ns, sizeof(int64_t), r, tag_offset);
  }
  std::vector<std::string> fragments;
  fragments.push_back(observe::rank_trace_events(events, threads, 0, process_name(groups), 0));
  int64_t worst = 0, worst_offset = 0;
  int worst_rank = 0;
  for (int r = 1; r < n; ++r) {
    uint64_t size = 0;
    world.recv(&size, sizeof size, r, tag_size);
    std::string text(size, '\0');
    if (size > 0) world.recv(text.data(), size, r, tag_data);
    fragments.push_back(std::move(text));
    const Alignment& a = aligned[static_cast<size_t>(r)];
    if (a.error_ns >= worst) {
      worst = a.error_ns;
      worst_rank = r;
      worst_offset = a.offset_ns;
    }
  }
  char note[256];
  if (n == 1) {
    std::snprintf(note, sizeof note, "one rank: nothing to align");
  } else {
    std::snprintf(note, sizeof note,
                  "aligned to rank 0 by ping-pong over the world communicator (best of %d round "
                  "trips per rank); residual error <= %.1f us (rank %d, offset %.1f us)",
                  kRoundTrips, static_cast<double>(worst) / 1000.0, worst_rank,
                  static_cast<double>(worst_offset) / 1000.0);
  }
  const std::string doc =
      observe::trace_document(fragments, note, recorder.first_step(), recorder.last_step());
  const auto tmp = trace_json.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << doc;
    f.close();
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, trace_json);
  return note;
}

}  // namespace trainctl::train
