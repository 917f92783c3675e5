// parallel.sequence_parallel (docs/job-spec.md, Parallelism): read, dumped in the resolved
// spec, and refused at validate with file:line where it cannot apply.
#include "test_config_helpers.h"

using trainctl::config::parse_job_spec;
using trainctl::config::testing::require_error;

TEST_CASE("config: sequence_parallel is read and kept in the resolved spec", "[config]") {
  const auto spec = parse_job_spec(
      "model: {seq_len: 64}\nparallel: {tp: 2, sequence_parallel: true}\n", "job.yaml", "/tmp");
  CHECK(spec.parallel.sequence_parallel);
  CHECK_THAT(trainctl::config::to_yaml(spec), Catch::Contains("  sequence_parallel: true\n"));
  const auto plain = parse_job_spec("parallel: {tp: 2}\n", "job.yaml", "/tmp");
  CHECK_FALSE(plain.parallel.sequence_parallel);
}

TEST_CASE("config: sequence_parallel without a TP group that splits the sequence is refused",
          "[config]") {
  require_error("model: {seq_len: 64}\nparallel:\n  dp: 2\n  sequence_parallel: true\n",
                "job.yaml:4:", "parallel.sequence_parallel",
                {"needs tp > 1; got tp 1", "Set parallel.tp >= 2"});
  require_error(
      "model: {seq_len: 66, n_head: 4, d_model: 64, vocab_size: 256}\n"
      "parallel: {tp: 4, sequence_parallel: true}\n",
      "job.yaml:2:", "parallel.sequence_parallel",
      {"model.seq_len (66) divisible by tp (4)", "Use tp in {1, 2, 3, 6, 11"});
  require_error("parallel: {sequence_parallel: yes please}\n", "job.yaml:1:", "");
}
