// `trainctl plan JOB [--cluster FILE]`: the rank map, the blocks of each pipeline stage, the
// simulated schedule with its bubble, each rank's memory and, on a cluster file, the
// predicted step time. Starts nothing.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "cli.h"
#include "comm/rank_coords.h"
#include "config/load.h"
#include "launch/rank_map.h"
#include "memory_check.h"
#include "model/shard.h"
#include "parallel/pipeline_schedule.h"
#include "plan/cluster_spec.h"
#include "plan/cost_model.h"
#include "plan/memory_plan.h"
#include "plan/pipeline_simulate.h"
#include "plan/pipeline_timeline.h"
#include "stage_layers_text.h"
#include "train/spec_options.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::app {
namespace {

namespace fs = std::filesystem;

// "27.3%".
std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * fraction);
  return text;
}

// Every world rank's (dp, tp, pp) coordinates.
std::string plan_rank_map(const config::JobSpec& spec) {
  const Layout& layout = spec.parallel;
  if (layout.cp > 1) {  // context parallelism: the cp coordinate between dp and tp
    std::string out = "rank map (world " + std::to_string(layout.world_size()) + " = dp " +
                      std::to_string(layout.dp) + " x cp " + std::to_string(layout.cp) + " x tp " +
                      std::to_string(layout.tp) + " x pp " + std::to_string(layout.pp) +
                      "; rank = ((pp_rank * dp + dp_rank) * cp + cp_rank) * tp + tp_rank):\n"
                      " rank   dp   cp   tp   pp\n";
    char line[64];
    for (int rank = 0; rank < layout.world_size(); ++rank) {
      const comm::Coord c = comm::coord_of(layout, rank);
      std::snprintf(line, sizeof line, "%5d %4d %4d %4d %4d\n", rank, c.dp, c.cp, c.tp, c.pp);
      out += line;
    }
    return out;
  }
  std::string out = "rank map (world " + std::to_string(layout.world_size()) + " = dp " +
                    std::to_string(layout.dp) + " x tp " + std::to_string(layout.tp) + " x pp " +
                    std::to_string(layout.pp) +
                    "; rank = (pp_rank * dp + dp_rank) * tp + tp_rank):\n rank   dp   tp   pp\n";
  char line[64];
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    const comm::Coord c = comm::coord_of(layout, rank);
    std::snprintf(line, sizeof line, "%5d %4d %4d %4d\n", rank, c.dp, c.tp, c.pp);
    out += line;
  }
  return out;
}

// The schedule to draw: the spec's, over `micro_batches` (default: its accumulation steps).
struct PlannedSchedule {
  parallel::ScheduleKind kind;
  int stages, micro_batches, chunks;
  bool interleaved() const { return kind == parallel::ScheduleKind::interleaved; }
  bool zbv() const { return kind == parallel::ScheduleKind::zbv; }
  bool zero_bubble() const { return kind == parallel::ScheduleKind::zb1p || zbv(); }
};

PlannedSchedule planned_schedule(const config::JobSpec& spec, std::optional<int> micro_batches) {
  if (micro_batches && *micro_batches < 1) {
    throw InputError("--micro-batches must be at least 1 (got " + std::to_string(*micro_batches) +
                     ")");
  }
  PlannedSchedule p{parallel::parse_schedule_kind(spec.parallel.schedule), spec.parallel.pp,
                    micro_batches.value_or(spec.grad_accum()), spec.parallel.virtual_stages};
  if (p.interleaved() && p.stages < 2) {
    throw InputError(
        "parallel.schedule: interleaved needs parallel.pp >= 2 (with one stage there is no "
        "pipeline to interleave); use schedule: 1f1b");
  }
  if (p.zbv() && p.stages < 2) {
    throw InputError(
        "parallel.schedule: zbv needs parallel.pp >= 2 (its V turns on the last stage); use "
        "schedule: zb1p");
  }
  if (p.interleaved() && p.micro_batches % p.stages != 0) {
    throw InputError("--micro-batches " + std::to_string(p.micro_batches) +
                     ": the interleaved schedule runs micro-batches in groups of parallel.pp (" +
                     std::to_string(p.stages) + "); use a multiple of it");
  }
  return p;
}

std::string peak_list(const parallel::Simulation& sim) {
  std::string peaks;
  for (const parallel::StageTimeline& stage : sim.stages) {
    peaks += (peaks.empty() ? "" : ", ") + std::to_string(stage.peak_activations);
  }
  return peaks;
}

std::string plan_json(const config::JobSpec& spec, const PlannedSchedule& p,
                      const parallel::Simulation& sim,
                      const std::optional<plan::ClusterSpec>& cluster) {
  std::string source;
  const double limit = memory_limit_bytes(spec, launch::workers_per_node(spec.world_size(), 1),
                                          &source, cluster ? cluster->memory_gb * 1e9 : 0);
  char bubble[64];
  std::snprintf(bubble, sizeof bubble, "%.6g", sim.stats.bubble_fraction);
  return std::string("{\"schedule\": \"") + parallel::to_string(p.kind) +
         "\", \"stages\": " + std::to_string(p.stages) +
         ", \"micro_batches\": " + std::to_string(p.micro_batches) + ", \"bubble\": " + bubble +
         ", \"peak_activations\": [" + peak_list(sim) + "], \"activation_checkpointing\": \"" +
         spec.training.activation_checkpointing + "\", \"memory_limit_mb\": " +
         (limit > 0 ? std::to_string(limit / (1 << 20)) : std::string("null")) +
         ", \"memory_mb\": " + plan::memory_plan_json(spec, plan::plan_memory(spec)) +
         (cluster ? ", \"cost\": " +
                        plan::cost_json(plan::predict_step(plan::cost_inputs(spec), *cluster))
                  : std::string()) +
         "}\n";
}

// The summary line of the schedule, its peak activations and its timeline.
std::string schedule_text(const PlannedSchedule& p, const parallel::Simulation& sim) {
  auto count = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string shape = count(p.stages, "stage", "stages");
  if (p.interleaved()) shape += " x " + std::to_string(p.chunks) + " chunks";
  if (p.zbv()) shape += " x 2 chunks in V order";
  const double theory = parallel::theoretical_bubble(p.kind, p.stages, p.micro_batches, p.chunks);
  std::string out = std::string("schedule ") + parallel::to_string(p.kind) + ", " + shape + ", " +
                    count(p.micro_batches, "micro-batch", "micro-batches") + ": bubble " +
                    percent(sim.stats.bubble_fraction) + " (theory " +
                    (p.interleaved()   ? "(p-1)/(V*m+p-1)"
                     : p.zbv()         ? "1-6m/max(6m+p-1,4m+4p-2)"
                     : p.zero_bubble() ? "(p-1)/(3m+p-1)"
                                       : "(p-1)/(m+p-1)") +
                    " = " + percent(theory);
  if (p.interleaved() || p.zero_bubble()) {
    out += "; 1f1b: " + percent(parallel::theoretical_bubble(parallel::ScheduleKind::one_f_one_b,
                                                             p.stages, p.micro_batches));
  }
  out += ")\npeak activations per stage [" + peak_list(sim) + "] " +
         (p.interleaved() || p.zbv()
              ? "(micro-batch chunks held" + std::string(p.zbv() ? " from F to W" : "") +
                    ", each 1/" + std::to_string(p.chunks) + " of the stage's layers)\n"
              : std::string(p.zero_bubble() ? "(micro-batches held from F to W)\n"
                                            : "(micro-batches held)\n"));
  constexpr int kMaxCells = 64;  // lines of about 200 columns (250 with 2-digit micro-batches)
  const parallel::TimelineText timeline = parallel::draw_timeline(sim, 1, kMaxCells);
  out += p.zbv() ? "\ntimeline (one cell = one time unit: chunk forward F<mb><chunk> 1, input "
                   "gradients B<mb><chunk> 1, weight gradients W<mb><chunk> 1, idle ..; chunk a "
                   "= virtual stage s, b = virtual stage 2p-1-s):\n"
         : p.zero_bubble()
             ? "\ntimeline (one cell = one time unit: forward F<mb> 1, input gradients "
               "B<mb> 1, weight gradients W<mb> 1, idle ..):\n"
         : p.interleaved()
             ? "\ntimeline (one cell = one time unit: chunk forward F<mb><chunk> 1, backward "
               "B<mb><chunk>-- 2, idle ...; chunk a = the stage's first model chunk, b its "
               "second, ...):\n"
             : "\ntimeline (one cell = one time unit: forward F<mb> 1, backward B<mb>-- 2, idle "
               "..):\n";
  out += timeline.text;
  if (timeline.cells_drawn < timeline.cells_total) {
    out += "(first " + std::to_string(timeline.cells_drawn) + " of " +
           std::to_string(timeline.cells_total) +
           " time units shown; --micro-batches draws a shorter schedule)\n";
  }
  return out;
}

std::string cluster_text(const config::JobSpec& spec, const plan::ClusterSpec& cluster) {
  const plan::CostInputs inputs = plan::cost_inputs(spec);
  std::string out = plan::format_cost(inputs, cluster, plan::predict_step(inputs, cluster));
  const double peak = plan::peak_rank_bytes(plan::plan_memory(spec));
  char memory[160];
  std::snprintf(memory, sizeof memory,
                "memory per GPU (the estimate above): %.3g GB of the device's %.3g GB\n",
                peak / 1e9, cluster.memory_gb);
  return out + memory;
}

}  // namespace

int cmd_plan(const fs::path& job, const std::vector<std::string>& overrides,
             std::optional<int> micro_batches, bool json, const fs::path& cluster_file) {
  config::JobSpec spec = config::load_job_spec(job, overrides);
  std::optional<plan::ClusterSpec> cluster;
  if (!cluster_file.empty()) cluster = plan::load_cluster_spec(cluster_file);
  const PlannedSchedule p = planned_schedule(spec, micro_batches);
  // Time units: a backward costs about two forwards (gradients of inputs and of weights). The
  // simulator splits a stage's costs over its chunks: scale them so one chunk's forward is one
  // unit of the timeline.
  const parallel::Simulation sim =
      parallel::simulate(p.kind, p.stages, p.micro_batches, p.chunks, 2.0 * p.chunks, p.chunks);
  if (json) {
    std::fputs(plan_json(spec, p, sim, cluster).c_str(), stdout);
    return kExitOk;
  }
  std::string out =
      plan_rank_map(spec) + "\n" + stage_layers_text(spec) + "\n" + schedule_text(p, sim);
  // Under --cluster, device: cuda is checked against the cluster's GPUs.
  out += "\n" + memory_text(spec, launch::workers_per_node(spec.world_size(), 1),
                            cluster ? cluster->memory_gb * 1e9 : 0);
  if (cluster) out += "\n" + cluster_text(spec, *cluster);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

void add_plan_command(CLI::App& app, Dispatches& out) {
  struct Options {
    JobOptions job;
    int micro_batches = 0;
    CLI::Option* micro_batches_opt = nullptr;
    bool json = false;
    std::string cluster;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Draw the job's pipeline schedule and its bubble (simulated; starts nothing)");
  o->job.add_to(cmd);
  o->micro_batches_opt = cmd->add_option("--micro-batches", o->micro_batches,
                                         "Micro-batches per step (default: the spec's gradient "
                                         "accumulation steps, global_batch_size / "
                                         "(micro_batch_size × dp))")
                             ->check(at_least(1));
  cmd->add_flag("--json", o->json,
                "Print the plan as one JSON object (memory_mb: each rank's estimate by part)");
  cmd->add_option("--cluster", o->cluster,
                  "Also predict step time, tokens/s, MFU and where the time goes on this "
                  "cluster file (configs/clusters/; docs/cost-model.md)");
  cmd->footer(
      "Example:\n  trainctl plan job.yaml --set parallel.pp=4 --set parallel.schedule=gpipe\n"
      "  trainctl plan job.yaml --set parallel.pp=2 --set parallel.schedule=interleaved "
      "--set parallel.virtual_stages=2\n"
      "  trainctl plan job.yaml --set parallel.pp=2 --set parallel.schedule=zbv "
      "--set parallel.virtual_stages=2\n\n"
      "Prints each rank's (dp, tp, pp) coordinates and the transformer blocks of each pipeline\n"
      "stage (and of each chunk, for interleaved and zbv), then simulates parallel.pp stages\n"
      "running parallel.schedule (gpipe | 1f1b | interleaved | zb1p | zbv) with forward = 1\n"
      "and backward = 2 time units per stage (B = W = 1 for the zero-bubble schedules) and\n"
      "free communication: the bubble (idle share of the stages' time)\n"
      "next to its closed form, the peak activations each stage holds, and one timeline line\n"
      "per stage, and each rank's memory: parameters, gradients, optimizer state,\n"
      "activations (the micro-batches its schedule keeps in flight, after recomputation),\n"
      "communication buffers, workspace and total. Exit code 2 when the spec is invalid.");
  out.push_back({cmd, [o] {
                   std::optional<int> micro_batches;
                   if (o->micro_batches_opt->count()) micro_batches = o->micro_batches;
                   return cmd_plan(o->job.job, o->job.overrides, micro_batches, o->json,
                                   o->cluster);
                 }});
}

}  // namespace trainctl::app
