// The activation model (plan/activation_model.h) against Korthikanti et al. 2022's Table 2
// on their Table 3 models (tests/data/korthikanti_2022_activations.csv), and the in-flight
// count of the memory plan's schedules (per chunk, not whole stages).
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "parallel/pipeline_executor.h"
#include "parallel/pipeline_schedule.h"
#include "plan/activation_model.h"

using namespace trainctl;

namespace {

struct Method {
  std::string name, recompute;
  bool tp = false, sp = false;
  double c = 0, c_t = 0, k = 0, k_t = 0;
};
struct Model {
  std::string name;
  double heads = 0, hidden = 0, layers = 0, tp = 0, seq = 0, micro_batch = 0;
};

// The file's two tables: methods (header starting "method,"), then models ("model,").
void read_korthikanti(std::vector<Method>& methods, std::vector<Model>& models) {
  std::ifstream in(std::string(TRAINCTL_SOURCE_DIR) +
                   "/tests/data/korthikanti_2022_activations.csv");
  REQUIRE(in);
  std::string line, table;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("method,", 0) == 0 || line.rfind("model,", 0) == 0) {
      table = line.substr(0, line.find(','));
      continue;
    }
    std::vector<std::string> f;
    std::stringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) f.push_back(cell);
    if (table == "method") {
      REQUIRE(f.size() == 8);
      methods.push_back({f[0], f[1], f[2] == "1", f[3] == "1", std::stod(f[4]), std::stod(f[5]),
                         std::stod(f[6]), std::stod(f[7])});
    } else {
      REQUIRE(f.size() == 7);
      models.push_back({f[0], std::stod(f[1]), std::stod(f[2]), std::stod(f[3]), std::stod(f[4]),
                        std::stod(f[5]), std::stod(f[6])});
    }
  }
}

}  // namespace

TEST_CASE("activation model: Korthikanti et al. 2022 Table 2 within 15% on their models",
          "[plan][memory]") {
  std::vector<Method> methods;
  std::vector<Model> models;
  read_korthikanti(methods, models);
  REQUIRE(methods.size() == 6);
  REQUIRE(models.size() == 4);
  for (const Model& m : models) {
    for (const Method& k : methods) {
      const int t = k.tp ? static_cast<int>(m.tp) : 1;
      const double sbh = m.seq * m.micro_batch * m.hidden;
      const double as_h = m.heads * m.seq / m.hidden;
      const double paper = sbh * (k.c + k.c_t / t + k.k * as_h + k.k_t * as_h / t);
      const plan::LayerShape shape =
          plan::megatron_2022_layer(m.seq, m.micro_batch, m.hidden, m.heads, t, k.sp);
      const double ours = plan::layer_activation_bytes(shape, plan::parse_kept_set(k.recompute));
      INFO(m.name << ", " << k.name << ": " << ours / 1e6 << " MB per layer, paper " << paper / 1e6
                  << " MB");
      CHECK(std::abs(ours - paper) / paper < 0.15);
    }
  }
}

TEST_CASE("activation model: trainctl's flash-style layer keeps no s x s tensor",
          "[plan][memory]") {
  plan::LayerShape s = plan::megatron_2022_layer(8192, 1, 4096, 32, 1, false);
  const double with_scores = plan::layer_activation_bytes(s, plan::KeptSet::none);
  s.stores_scores = false;
  s.dropout = false;
  const double flash = plan::layer_activation_bytes(s, plan::KeptSet::none);
  // Korthikanti's 34 sbh less the dropout masks (2 sbh), plus the log-sum-exp.
  const double sbh = 8192.0 * 4096;
  CHECK(flash == Approx(32 * sbh + 4.0 * 32 * 8192));
  CHECK(with_scores > 10 * flash);  // 5as/h = 320 sbh of scores at s = 8192
  // Doubling the sequence doubles the flash layer's memory (no quadratic term).
  s.seq = 16384;
  CHECK(plan::layer_activation_bytes(s, plan::KeptSet::none) == Approx(2 * flash));
  // Sequence parallelism divides everything by t; full recomputation keeps the input only.
  s.seq = 8192;
  s.tp = 8;
  s.sequence_parallel = true;
  CHECK(plan::layer_activation_bytes(s, plan::KeptSet::none) == Approx(flash / 8));
  CHECK(plan::layer_activation_bytes(s, plan::KeptSet::full) == Approx(2 * sbh / 8));
}

TEST_CASE("memory plan: the interleaved schedule's in-flight micro-batches, chunk by chunk",
          "[plan][memory]") {
  // 4 stages x 2 chunks, 8 micro-batches: stage 0 holds w + 1 = (4-0-1)*2 + (2-1)*4 + 1 = 11
  // (chunk, micro-batch) pairs at its peak, not 11 whole stages; each chunk gets the slots
  // it holds at its own peak (parallel::activation_slots_per_chunk, what the model
  // allocates), and the first chunk, forwarded first, holds more than the second.
  const auto program =
      parallel::make_schedule(parallel::ScheduleKind::interleaved, 0, 4, 8, /*virtual=*/2);
  const std::vector<int> slots = parallel::activation_slots_per_chunk(program, 2);
  REQUIRE(slots.size() == 2);
  CHECK(slots[0] > slots[1]);
  CHECK(slots[0] + slots[1] >= 11);
  CHECK(slots[0] + slots[1] < 2 * 11);  // not every chunk at the stage's peak
  CHECK(parallel::activation_slots_needed(program) == slots[0]);
  // 1F1B: stage 0 of 4 holds 4 micro-batches, the last stage one.
  CHECK(parallel::activation_slots_per_chunk(
            parallel::make_schedule(parallel::ScheduleKind::one_f_one_b, 0, 4, 8), 1) ==
        std::vector<int>{4});
  CHECK(parallel::activation_slots_per_chunk(
            parallel::make_schedule(parallel::ScheduleKind::one_f_one_b, 3, 4, 8), 1) ==
        std::vector<int>{1});
}
