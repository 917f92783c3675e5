// Good job specs: defaults, presets, overrides, path resolution, the resolved dump and the
// shipped configs.
#include <cstdlib>

#include "config/presets.h"
#include "test_config_helpers.h"

namespace fs = std::filesystem;
using trainctl::InputError;
using trainctl::config::JobSpec;
using trainctl::config::parse_job_spec;
using trainctl::config::testing::require_error;
using trainctl::config::testing::TempDir;

TEST_CASE("config: an almost empty spec gets every default", "[config]") {
  const JobSpec s = parse_job_spec("name: demo\n", "job.yaml", "/work/specs");
  const JobSpec defaults;
  CHECK(s.name == "demo");
  CHECK(s.run_dir == fs::path("/work/specs/runs/demo"));
  CHECK(s.spec_path.empty());
  CHECK(s.model == defaults.model);
  CHECK(s.data == defaults.data);
  CHECK(s.parallel == defaults.parallel);
  CHECK(s.training == defaults.training);
  CHECK(s.optimizer == defaults.optimizer);
  CHECK(s.precision == defaults.precision);
  CHECK(s.checkpoint == defaults.checkpoint);
  CHECK(s.logging == defaults.logging);
  CHECK(s.runtime == defaults.runtime);
  CHECK(s.world_size() == 1);
  CHECK(s.grad_accum() == 1);
}

TEST_CASE("config: every key of the design's example is read", "[config]") {
  TempDir dir;
  dir.write("corpus.txt", 100000);
  const JobSpec s = parse_job_spec(R"(name: gpt-tiny-3d
run_dir: runs/gpt-tiny-3d
seed: 99
device: cuda
model:   {type: gpt, vocab_size: 256, seq_len: 256, n_layer: 4, n_head: 4, d_model: 256}
data:    {type: text, path: corpus.txt, val_fraction: 0.05}
parallel: {dp: 2, tp: 2, pp: 2, schedule: gpipe, zero: 1}
training: {steps: 200, micro_batch_size: 8, global_batch_size: 64, grad_clip: 0.5,
           eval_every: 50, eval_batches: 10, threads: 2}
optimizer: {type: adamw, lr: 3.0e-3, betas: [0.9, 0.99], eps: 1e-6, weight_decay: 0.01,
            warmup_steps: 20, decay: linear, min_lr: 3.0e-4}
precision: {compute: bf16}
checkpoint: {every_steps: 100, keep_last: 5, async: false}
logging:  {every_steps: 5, tensorboard: false, profile_steps: [3, 4]}
runtime:  {max_restarts: 2, comm_timeout_s: 60.5, comm_selftest: false}
)",
                                   "job.yaml", dir.path());
  CHECK(s.run_dir == dir.path() / "runs/gpt-tiny-3d");
  CHECK(s.seed == 99);
  CHECK(s.device == trainctl::Device::cuda);
  CHECK(s.model.n_layer == 4);
  CHECK(s.data.type == "text");
  CHECK(s.data.path == dir.path() / "corpus.txt");
  CHECK(s.parallel.schedule == "gpipe");
  CHECK(s.parallel.zero == 1);
  CHECK(s.world_size() == 8);
  CHECK(s.grad_accum() == 4);
  CHECK(s.training.grad_clip == 0.5);
  CHECK(s.training.threads == 2);
  CHECK(s.optimizer.lr == 3.0e-3);
  CHECK(s.optimizer.beta2 == 0.99);
  CHECK(s.optimizer.eps == 1e-6);
  CHECK(s.optimizer.decay == "linear");
  CHECK(s.precision.compute == trainctl::DType::bf16);
  CHECK(s.checkpoint.keep_last == 5);
  CHECK_FALSE(s.checkpoint.async);
  CHECK(s.logging.every_steps == 5);
  CHECK_FALSE(s.logging.tensorboard);
  CHECK(s.logging.profile_first == 3);
  CHECK(s.logging.profile_last == 4);
  CHECK(s.runtime.comm_timeout_s == 60.5);
  CHECK_FALSE(s.runtime.comm_selftest);
}

TEST_CASE("config: global_batch_size defaults to micro_batch_size x dp", "[config]") {
  const JobSpec s =
      parse_job_spec("parallel: {dp: 4}\ntraining: {micro_batch_size: 3}\n", "job.yaml", "/tmp");
  CHECK(s.training.global_batch_size == 12);
  CHECK(s.grad_accum() == 1);
}

TEST_CASE("config: presets fill dimensions and explicit ones win", "[config]") {
  const JobSpec big = parse_job_spec("model: {preset: gpt2-124m}\n", "job.yaml", "/tmp");
  CHECK(big.model.preset == "gpt2-124m");
  CHECK(big.model.n_layer == 12);
  CHECK(big.model.n_head == 12);
  CHECK(big.model.d_model == 768);
  CHECK(big.model.seq_len == 1024);
  CHECK(big.model.vocab_size == 50304);

  const JobSpec small = parse_job_spec("model: {preset: gpt-small}\n", "job.yaml", "/tmp");
  CHECK(small.model.n_layer == 4);
  CHECK(small.model.d_model == 256);
  CHECK(small.model.seq_len == 256);

  // Order in the file does not matter: the preset applies first.
  const JobSpec mixed =
      parse_job_spec("model: {seq_len: 64, preset: gpt-tiny, n_layer: 3}\n", "job.yaml", "/tmp");
  CHECK(mixed.model.seq_len == 64);
  CHECK(mixed.model.n_layer == 3);
  CHECK(mixed.model.d_model == 128);
  CHECK(mixed.model.n_head == 4);

  // Llama presets set the type and the family's own dimensions.
  const JobSpec llama = parse_job_spec("model: {preset: llama3-8b}\n", "job.yaml", "/tmp");
  CHECK(llama.model.is_llama());
  CHECK(llama.model.n_layer == 32);
  CHECK(llama.model.d_model == 4096);
  CHECK(llama.model.n_head == 32);
  CHECK(llama.model.kv_heads() == 8);
  CHECK(llama.model.mlp_hidden() == 14336);
  CHECK(llama.model.vocab_size == 128256);
  CHECK(llama.model.rope_theta == 500000.0);
  CHECK_FALSE(llama.model.tie_embeddings);
  // Meta's SwiGLU width rule: 8 d_model / 3 rounded up to multiple_of.
  const JobSpec rule = parse_job_spec(
      "model: {type: llama, d_model: 4096, n_head: 32, multiple_of: 256}\n", "job.yaml", "/tmp");
  CHECK(rule.model.mlp_hidden() == 11008);

  CHECK(trainctl::config::preset_names().size() == 7);
  CHECK_FALSE(trainctl::config::find_preset("gpt-huge").has_value());
}

TEST_CASE("config: --set overrides are parsed as YAML and win over the file", "[config]") {
  const std::string yaml = R"(model: {n_head: 4}
parallel: {dp: 1, tp: 1}
optimizer: {betas: [0.9, 0.95]}
)";
  const JobSpec s = parse_job_spec(
      yaml, "job.yaml", "/tmp",
      {"parallel.tp=2", "optimizer.betas=[0.9,0.99]", " training.steps = 7 ",
       "checkpoint.async=false", "name=override", "precision={compute: fp16}", "training.steps=8"});
  CHECK(s.parallel.tp == 2);
  CHECK(s.optimizer.beta2 == 0.99);
  CHECK(s.training.steps == 8);  // the last --set wins
  CHECK_FALSE(s.checkpoint.async);
  CHECK(s.name == "override");
  CHECK(s.run_dir == fs::path("/tmp/runs/override"));
  CHECK(s.precision.compute == trainctl::DType::fp16);
}

TEST_CASE("config: bad --set overrides name the argument", "[config]") {
  const std::string yaml = R"(model:
  n_head: 4
parallel:
  tp: 1
)";
  require_error(yaml, "--set parallel.tp=3:", "parallel.tp", {"must divide model.n_head (4)"},
                {"parallel.tp=3"});
  require_error(yaml, "--set parallel.tpp=2:", "parallel.tpp", {"Did you mean `tp`?"},
                {"parallel.tpp=2"});
  require_error(yaml, "--set modle.n_layer=3:", "modle", {"Did you mean `model`?"},
                {"modle.n_layer=3"});
  require_error(yaml, "--set optimizer.betas=[0.9]:", "optimizer.betas", {"list of two"},
                {"optimizer.betas=[0.9]"});
  require_error(yaml, "--set optimizer.lr=fast:", "optimizer.lr", {"expected a number"},
                {"optimizer.lr=fast"});
  require_error(yaml, "--set training.steps=:", "training.steps", {"has no value"},
                {"training.steps="});
  require_error(yaml, "--set parallel.tp:", "", {"expected `key.path=value`"}, {"parallel.tp"});
  require_error(yaml, "--set model..n_head=2:", "model..n_head", {"malformed key path"},
                {"model..n_head=2"});
  require_error(yaml, "--set model.n_head.x=2:", "model.n_head", {"holds a value, not a section"},
                {"model.n_head.x=2"});
  require_error(yaml, "--set optimizer.betas=[0.9:", "optimizer.betas", {"not valid YAML"},
                {"optimizer.betas=[0.9"});
  // The file's own errors still point into the file when overrides are present.
  require_error("training:\n  steps: 0\n", "job.yaml:2:10:", "training.steps", {">= 1"},
                {"parallel.tp=1"});
}

TEST_CASE("config: relative paths resolve against the spec's directory", "[config]") {
  TempDir dir;
  fs::create_directories(dir.path() / "specs" / "data");
  dir.write("specs/data/corpus.txt", 10000);
  const fs::path spec = dir.path() / "specs" / "job.yaml";
  std::ofstream(spec) << "name: rel\ndata: {type: text, path: data/corpus.txt}\n"
                         "run_dir: ../out/./rel\n";
  const JobSpec s = trainctl::config::load_job_spec(spec);
  CHECK(s.spec_path == spec);
  CHECK(s.data.path == dir.path() / "specs/data/corpus.txt");
  CHECK(s.run_dir == dir.path() / "out/rel");

  // Absolute paths stay as they are.
  const JobSpec abs = parse_job_spec("run_dir: /var/tmp/x\n", "job.yaml", dir.path());
  CHECK(abs.run_dir == fs::path("/var/tmp/x"));

  // A relative path given with --set is relative to where the command runs.
  const JobSpec over = parse_job_spec("name: a\n", "job.yaml", dir.path(), {"run_dir=here"});
  CHECK(over.run_dir == fs::current_path() / "here");

  // Errors from a file name it as given.
  std::ofstream(dir.path() / "specs" / "bad.yaml") << "name: a\n\nparallel: {pp: 9}\n";
  try {
    trainctl::config::load_job_spec(dir.path() / "specs" / "bad.yaml");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).rfind((dir.path() / "specs/bad.yaml").string() + ":3:16:", 0) == 0);
  }
  CHECK_THROWS_WITH(
      trainctl::config::load_job_spec(dir.path() / "specs/job.yaml", {"parallel.pp=9"}),
      Catch::StartsWith("--set parallel.pp=9: parallel.pp: must be <= model.n_layer"));
  CHECK_THROWS_AS(trainctl::config::load_job_spec(dir.path() / "nope.yaml"), InputError);
  CHECK_THROWS_AS(trainctl::config::load_job_spec(dir.path()), InputError);
}

TEST_CASE("config: to_yaml round-trips every key", "[config]") {
  TempDir dir;
  dir.write("corpus.txt", 100000);
  const std::vector<std::string> specs = {
      "name: defaults\n",
      R"(name: "true"
run_dir: "dir with \"quotes\" and spaces"
seed: 18446744073709551615
device: cuda
model: {preset: gpt-small, n_layer: 6, vocab_size: 512}
data: {type: text, path: corpus.txt, val_fraction: 0.1}
parallel: {dp: 2, tp: 4, pp: 3, schedule: gpipe, zero: 2}
training: {steps: 1000, micro_batch_size: 3, global_batch_size: 18, grad_clip: 0.3,
           eval_every: 7, eval_batches: 2, threads: 3}
optimizer: {type: sgd, lr: 0.1, betas: [0.8, 0.999], eps: 1.0e-7, weight_decay: 0.3,
            warmup_steps: 33, decay: constant, min_lr: 0.01}
precision: {compute: fp16}
checkpoint: {every_steps: 9, keep_last: 1, async: false}
logging: {every_steps: 3, tensorboard: false, profile_steps: [5, 9]}
runtime: {max_restarts: 4, comm_timeout_s: 12.25, comm_selftest: false}
)",
      "name: diloco\nparallel: {dp: 4, dp_sync: diloco, sync_every: 8, outer_lr: 0.5, "
      "outer_momentum: 0.8}\n",
      "name: local\nparallel: {dp: 2, dp_sync: local_sgd, sync_every: 3}\n",
      "name: psgd\nparallel: {dp: 2, grad_compression: powersgd, powersgd_rank: 8}\n",
      "name: psgd-warm\nparallel: {dp: 2, grad_compression: powersgd, powersgd_warmup_steps: 30}\n",
      "name: bf16\nparallel: {dp: 2, grad_compression: bf16}\n",
      // Unset n_kv_head and ffn_hidden (derived) must stay unset through the round trip.
      "name: llama\nmodel: {preset: llama-small}\n",
      "name: llama-explicit\nmodel: {type: llama, n_head: 8, n_kv_head: 2, d_model: 64, "
      "ffn_hidden: 96, rope_theta: 500000, norm_eps: 1.0e-6, tie_embeddings: true}\n",
  };
  for (const std::string& text : specs) {
    const JobSpec s = parse_job_spec(text, "job.yaml", dir.path());
    const std::string resolved = trainctl::config::to_yaml(s);
    INFO(resolved);
    const JobSpec back = parse_job_spec(resolved, "config.resolved.yaml", "/elsewhere");
    CHECK(back == s);
    CHECK(trainctl::config::to_yaml(back) == resolved);
  }
  // A difference in any section makes specs unequal; spec_path does not.
  JobSpec a, b;
  b.spec_path = "/x.yaml";
  CHECK(a == b);
  b.runtime.comm_selftest = false;
  CHECK_FALSE(a == b);
}

TEST_CASE("config: summary states the layout and the batch arithmetic", "[config]") {
  const JobSpec s = parse_job_spec(R"(name: sum
model: {preset: gpt2-124m}
parallel: {dp: 2, tp: 2, pp: 2}
training: {micro_batch_size: 4, global_batch_size: 32, steps: 10}
)",
                                   "job.yaml", "/tmp");
  const std::string text = trainctl::config::summary(s);
  INFO(text);
  CHECK(text.find("8 on cpu = dp 2 x tp 2 x pp 2") != std::string::npos);
  CHECK(text.find("124.") != std::string::npos);  // ~124.5M parameters
  CHECK(text.find("micro 4 x grad_accum 4 x dp 2") != std::string::npos);
  CHECK(text.find("32768 tokens/step") != std::string::npos);
  CHECK(text.find("bubble 20%") != std::string::npos);  // (2-1)/(4+2-1)
  CHECK(text.find("12 heads x 64") != std::string::npos);
}

TEST_CASE("config: the shipped configs load", "[config]") {
  const fs::path configs = fs::path(TRAINCTL_SOURCE_DIR) / "configs";
  const JobSpec quick = trainctl::config::load_job_spec(configs / "quickstart.yaml");
  CHECK(quick.world_size() == 1);
  CHECK(quick.data.type == "synthetic");
  CHECK(quick.model.seq_len == 64);
  CHECK(quick.run_dir == (configs / "runs/quickstart").lexically_normal());

  const JobSpec three_d = trainctl::config::load_job_spec(configs / "gpt-small-3d.yaml");
  CHECK(three_d.world_size() == 8);
  CHECK(three_d.grad_accum() == 4);
  CHECK(three_d.model.d_model == 256);

  // The corpus lives outside the repository (../../shared/data): where it is missing the
  // spec must be refused for exactly that reason.
  const fs::path corpus = (configs / "../../shared/data/tinyshakespeare.txt").lexically_normal();
  if (fs::exists(corpus)) {
    const JobSpec shakespeare = trainctl::config::load_job_spec(configs / "tinyshakespeare.yaml");
    CHECK(shakespeare.data.path == corpus);
    CHECK(shakespeare.grad_accum() == 2);
  } else {
    CHECK_THROWS_WITH(trainctl::config::load_job_spec(configs / "tinyshakespeare.yaml"),
                      Catch::Contains("data.path: no such file"));
  }
}
