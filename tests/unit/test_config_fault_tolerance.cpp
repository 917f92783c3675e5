// runtime.fault_tolerance (docs/job-spec.md, "runtime.fault_tolerance"): read with its ranges,
// replay resolved like the spec's other paths, dumped so that it reads back, and refused at
// validate with file:line and a fix where it cannot run.
#include "test_config_helpers.h"

using trainctl::config::FaultToleranceSpec;
using trainctl::config::JobSpec;
using trainctl::config::parse_job_spec;
using trainctl::config::to_yaml;
using trainctl::config::testing::error_of;
using trainctl::config::testing::require_error;
using trainctl::config::testing::TempDir;

namespace {

const char* kOn = "parallel: {dp: 2}\nruntime:\n  fault_tolerance:\n    enabled: true\n";

}  // namespace

TEST_CASE("config: runtime.fault_tolerance is read and round-trips", "[config]") {
  const JobSpec off = parse_job_spec("name: d\n", "job.yaml", "/tmp");
  CHECK(off.runtime.fault_tolerance == FaultToleranceSpec{});
  CHECK_FALSE(off.runtime.fault_tolerance.enabled);
  // Left at its defaults, the resolved spec has no such section (as before the key existed).
  CHECK(to_yaml(off).find("fault_tolerance") == std::string::npos);

  const JobSpec on = parse_job_spec(R"(name: ft
parallel: {dp: 4, tp: 2}
runtime:
  fault_tolerance: {enabled: true, min_replicas: 3, heartbeat_timeout_s: 2.5,
                    join_timeout_s: 30, max_replica_restarts: 0, replay: runs/a/membership.jsonl}
)",
                                    "job.yaml", "/specs/dir");
  const FaultToleranceSpec& ft = on.runtime.fault_tolerance;
  CHECK(ft.enabled);
  CHECK(ft.min_replicas == 3);
  CHECK(ft.heartbeat_timeout_s == 2.5);
  CHECK(ft.join_timeout_s == 30);
  CHECK(ft.max_replica_restarts == 0);
  // Relative to the spec's directory, as data.path is.
  CHECK(ft.replay == "/specs/dir/runs/a/membership.jsonl");

  // Keys given with enabled: false are accepted (and ignored); they still read back.
  const JobSpec ignored = parse_job_spec(
      "runtime: {fault_tolerance: {enabled: false, min_replicas: 7, join_timeout_s: 5}}\n",
      "job.yaml", "/tmp");
  CHECK(ignored.runtime.fault_tolerance.min_replicas == 7);

  for (const JobSpec* spec : {&on, &ignored, &off}) {
    const std::string text = to_yaml(*spec);
    INFO(text);
    const JobSpec back = parse_job_spec(text, "config.resolved.yaml", "/elsewhere");
    CHECK(back == *spec);
    CHECK(to_yaml(back) == text);
  }
  CHECK_THAT(to_yaml(on),
             Catch::Contains("  fault_tolerance:\n    enabled: true\n") &&
                 Catch::Contains("    replay: \"/specs/dir/runs/a/membership.jsonl\""));
}

TEST_CASE("config: runtime.fault_tolerance paths and ranges", "[config]") {
  TempDir dir;
  // A --set replay is relative to the current directory, as other --set paths are.
  const JobSpec set =
      parse_job_spec(kOn, "job.yaml", "/tmp", {"runtime.fault_tolerance.replay=/abs/m.jsonl"});
  CHECK(set.runtime.fault_tolerance.replay == "/abs/m.jsonl");
  const JobSpec in_dir =
      parse_job_spec(std::string(kOn) + "    replay: ./x/../m.jsonl\n", "job.yaml", dir.path());
  CHECK(in_dir.runtime.fault_tolerance.replay == (dir.path() / "m.jsonl").string());

  const std::string on = "parallel: {dp: 2}\nruntime:\n  fault_tolerance:\n    enabled: true\n";
  require_error(on + "    min_replicas: 0\n",
                "job.yaml:5:", "runtime.fault_tolerance.min_replicas");
  require_error(on + "    heartbeat_timeout_s: 0\n",
                "job.yaml:5:", "runtime.fault_tolerance.heartbeat_timeout_s");
  require_error(on + "    heartbeat_timeout_s: 3601\n",
                "job.yaml:5:", "runtime.fault_tolerance.heartbeat_timeout_s");
  require_error(on + "    join_timeout_s: -1\n",
                "job.yaml:5:", "runtime.fault_tolerance.join_timeout_s");
  require_error(on + "    max_replica_restarts: 1001\n",
                "job.yaml:5:", "runtime.fault_tolerance.max_replica_restarts");
  require_error("runtime:\n  fault_tolerance:\n    enabled: yes please\n",
                "job.yaml:3:", "runtime.fault_tolerance.enabled");
  require_error(on + "    replay: \"\"\n", "job.yaml:5:", "runtime.fault_tolerance.replay",
                {"must not be empty"});
  // Limits at their edges are fine.
  CHECK_NOTHROW(parse_job_spec(on + "    heartbeat_timeout_s: 3600\n    join_timeout_s: 0.5\n"
                                    "    max_replica_restarts: 1000\n    min_replicas: 2\n",
                               "job.yaml", "/tmp"));
  // Unknown keys get a suggestion.
  require_error(on + "    min_replica: 2\n", "job.yaml:5:", "runtime.fault_tolerance.min_replica",
                {"unknown key", "Did you mean `min_replicas`?"});
  require_error("runtime: {fault_tolerence: {enabled: true}}\n",
                "job.yaml:1:", "runtime.fault_tolerence", {"Did you mean `fault_tolerance`?"});
}

TEST_CASE("config: runtime.fault_tolerance refuses what it does not compose with", "[config]") {
  // A default (never written) is blamed on enabled, the key that made it matter.
  require_error("runtime:\n  fault_tolerance:\n    enabled: true\n",
                "job.yaml:3:", "runtime.fault_tolerance.enabled",
                {"fault tolerance needs dp >= 2 replicas", "parallel.dp: 2"});
  require_error("parallel:\n  dp: 1\nruntime: {fault_tolerance: {enabled: true}}\n",
                "job.yaml:2:", "parallel.dp", {"fault tolerance needs dp >= 2 replicas"});
  require_error(std::string(kOn) + "    min_replicas: 3\n",
                "job.yaml:5:", "runtime.fault_tolerance.min_replicas", {"at most parallel.dp (2)"});
  require_error(std::string(kOn) + "    min_replicas: 2\n" + "precision: {compute: fp16}\n",
                "job.yaml:6:", "precision.compute", {"fp16", "precision.compute: fp32"});
  const std::string ft = "runtime: {fault_tolerance: {enabled: true}}\n";
  require_error("parallel: {dp: 2, mode: parameter_server}\n" + ft, "job.yaml:1:", "parallel.mode",
                {"mode: data_parallel"});
  for (const char* zero : {"1", "2", "3"}) {
    require_error("parallel: {dp: 2, zero: " + std::string(zero) + "}\n" + ft,
                  "job.yaml:1:", "parallel.zero",
                  {"ZeRO-" + std::string(zero), "Set parallel.zero: 0"});
  }
  require_error("model: {moe: {num_experts: 4}}\nparallel: {dp: 2, ep: 2}\n" + ft,
                "job.yaml:2:", "parallel.ep", {"parallel.ep: 1"});
  require_error(
      "parallel: {dp: 2, dp_sync: diloco, sync_every: 4}\n"
      "runtime: {fault_tolerance: {enabled: true, replay: /m.jsonl}}\n",
      "job.yaml:2:", "runtime.fault_tolerance.replay", {"replay with dp_sync diloco is not built"});
  require_error("parallel: {dp: 2, grad_compression: powersgd}\n" + ft,
                "job.yaml:1:", "parallel.grad_compression", {"error feedback per replica"});
  require_error("precision: {compute: bf16}\nparallel: {dp: 2}\n" + ft,
                "job.yaml:1:", "precision.compute", {"bf16"});
  require_error("model: {moe: {num_experts: 4}}\nparallel: {dp: 2}\n" + ft,
                "job.yaml:1:", "model.moe.num_experts", {"remove model.moe"});
  require_error("device: cuda\nparallel: {dp: 2}\n" + ft, "job.yaml:1:", "device",
                {"device: cpu", "turn runtime.fault_tolerance off"});
  require_error("runtime: {fault_tolerance: {replay: m.jsonl}}\n",
                "job.yaml:1:", "runtime.fault_tolerance.replay",
                {"replay needs runtime.fault_tolerance.enabled", "set enabled: true"});
  // What composes: tp, pp, bf16 gradient traffic, and min_replicas with enabled off.
  CHECK_NOTHROW(parse_job_spec("parallel: {dp: 2, tp: 2, pp: 2, grad_compression: bf16}\n" + ft,
                               "job.yaml", "/tmp"));
  CHECK_NOTHROW(parse_job_spec("runtime: {fault_tolerance: {enabled: false, min_replicas: 9}}\n",
                               "job.yaml", "/tmp"));
  CHECK_NOTHROW(parse_job_spec("parallel: {dp: 1}\n" + ft, "job.yaml", "/tmp", {"parallel.dp=3"}));
  // A --set that breaks the rule is blamed on the --set argument.
  CHECK(error_of(std::string(kOn), {"parallel.dp=1"})
            .rfind("--set parallel.dp=1: parallel.dp: fault tolerance needs dp >= 2", 0) == 0);
}
