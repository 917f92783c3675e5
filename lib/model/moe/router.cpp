#include "model/moe/router.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainctl::model::moe {

namespace {

// The normalised score q of token t (softmax: p itself; sigmoid: s / sum s) into q[E].
void normalised_scores(const Routing& r, int t, int E, MoeScore score, float* q) {
  const float* s = r.scores.data() + static_cast<size_t>(t) * E;
  if (score == MoeScore::softmax) {
    std::copy(s, s + E, q);
    return;
  }
  double sum = 0;
  for (int e = 0; e < E; ++e) sum += s[e];
  for (int e = 0; e < E; ++e) q[e] = static_cast<float>(s[e] / sum);
}

void score_row(const float* logits, int E, MoeScore score, float* s) {
  if (score == MoeScore::sigmoid) {
    for (int e = 0; e < E; ++e) s[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    return;
  }
  const float mx = *std::max_element(logits, logits + E);
  double sum = 0;
  for (int e = 0; e < E; ++e) {
    s[e] = std::exp(logits[e] - mx);
    sum += s[e];
  }
  for (int e = 0; e < E; ++e) s[e] = static_cast<float>(s[e] / sum);
}

// Top-k of s[E] (+ bias[E], if any) into chosen[k], best first, ties to the lower index.
void top_k(const float* s, const float* bias, int E, int K, int* chosen) {
  auto key = [&](int e) { return bias != nullptr ? s[e] + bias[e] : s[e]; };
  for (int j = 0; j < K; ++j) {
    int best = -1;
    for (int e = 0; e < E; ++e) {
      if (std::find(chosen, chosen + j, e) != chosen + j) continue;
      if (best < 0 || key(e) > key(best)) best = e;
    }
    chosen[j] = best;
  }
}

void dispatch(const MoeConfig& cfg, Routing& r) {
  const int E = cfg.num_experts, K = cfg.top_k, S = cfg.shared_experts, N = r.N;
  const int64_t cap =
      cfg.capacity_factor > 0
          ? static_cast<int64_t>(std::ceil(static_cast<double>(cfg.capacity_factor) * N * K / E))
          : std::numeric_limits<int64_t>::max();
  std::vector<int> taken(static_cast<size_t>(E), 0);
  std::vector<char> kept(static_cast<size_t>(N) * K, 0);
  r.dropped = 0;
  for (int a = 0; a < N * K; ++a) {  // token order: the earliest tokens keep their place
    int& n = taken[static_cast<size_t>(r.expert[static_cast<size_t>(a)])];
    if (n < cap) {
      ++n;
      kept[static_cast<size_t>(a)] = 1;
    } else {
      ++r.dropped;
    }
  }
  r.offsets.assign(static_cast<size_t>(E + S) + 1, 0);
  for (int e = 0; e < E; ++e) r.offsets[e + 1] = r.offsets[e] + taken[static_cast<size_t>(e)];
  for (int s = 0; s < S; ++s) r.offsets[E + s + 1] = r.offsets[E + s] + N;
  r.row_token.assign(static_cast<size_t>(r.rows()), 0);
  r.row_choice.assign(static_cast<size_t>(r.rows()), -1);
  std::vector<int> cursor(r.offsets.begin(), r.offsets.begin() + E);
  for (int a = 0; a < N * K; ++a) {
    if (!kept[static_cast<size_t>(a)]) continue;
    const int row = cursor[static_cast<size_t>(r.expert[static_cast<size_t>(a)])]++;
    r.row_token[static_cast<size_t>(row)] = a / K;
    r.row_choice[static_cast<size_t>(row)] = a;
  }
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < N; ++t) r.row_token[static_cast<size_t>(r.offsets[E + s] + t)] = t;
  }
}

}  // namespace

void router_logits(const float* h, const float* wg, int N, int C, int E, float* logits) {
  // Eight interleaved partial sums, combined in a fixed order: the compiler keeps them in
  // vector registers (one running sum would stay scalar: floats do not reassociate), and
  // every rank still adds the same numbers in the same order.
  constexpr int kLanes = 8;
  for (int t = 0; t < N; ++t) {
    const float* x = h + static_cast<size_t>(t) * C;
    for (int e = 0; e < E; ++e) {
      const float* w = wg + static_cast<size_t>(e) * C;
      float part[kLanes] = {};
      int c = 0;
      for (; c + kLanes <= C; c += kLanes) {
        for (int l = 0; l < kLanes; ++l) part[l] += x[c + l] * w[c + l];
      }
      for (; c < C; ++c) part[0] += x[c] * w[c];
      float acc = 0.0f;
      for (int l = 0; l < kLanes; ++l) acc += part[l];
      logits[static_cast<size_t>(t) * E + e] = acc;
    }
  }
}

void route(const float* logits, int N, const MoeConfig& cfg, Routing& r, const float* bias) {
  const int E = cfg.num_experts, K = cfg.top_k;
  r.N = N;
  r.scores.resize(static_cast<size_t>(N) * E);
  r.expert.resize(static_cast<size_t>(N) * K);
  r.gate.resize(static_cast<size_t>(N) * K);
  for (int t = 0; t < N; ++t) {
    float* s = r.scores.data() + static_cast<size_t>(t) * E;
    score_row(logits + static_cast<size_t>(t) * E, E, cfg.score, s);
    int* chosen = r.expert.data() + static_cast<size_t>(t) * K;
    top_k(s, bias, E, K, chosen);
    double sum = 0;
    for (int j = 0; j < K; ++j) sum += s[chosen[j]];
    for (int j = 0; j < K; ++j) {
      r.gate[static_cast<size_t>(t) * K + j] = static_cast<float>(s[chosen[j]] / sum);
    }
  }
  dispatch(cfg, r);
}

void count_assignments(const Routing& r, int E, int64_t* counts) {
  for (const int e : r.expert) {
    if (e >= 0 && e < E) ++counts[e];
  }
}

void bias_update(const int64_t* counts, int E, float rate, float* bias) {
  int64_t total = 0;
  for (int e = 0; e < E; ++e) total += counts[e];
  // Compared as counts * E against the total: exact integers, so every rank (which holds
  // the same counts) moves every bias the same way.
  for (int e = 0; e < E; ++e) {
    const int64_t scaled = counts[e] * E;
    if (scaled < total) bias[e] += rate;
    if (scaled > total) bias[e] -= rate;
  }
}

SequenceLoads sequence_loads(const Routing& r, int T_local, int T, const MoeConfig& cfg,
                             const CountSum& sum_counts) {
  const int E = cfg.num_experts, K = cfg.top_k;
  const int seqs = r.N / T_local;
  std::vector<float> counts(static_cast<size_t>(seqs) * E, 0.0f);
  for (int t = 0; t < r.N; ++t) {
    for (int j = 0; j < K; ++j) {
      counts[static_cast<size_t>(t / T_local) * E + r.expert[static_cast<size_t>(t) * K + j]] +=
          1.0f;
    }
  }
  if (sum_counts) sum_counts(counts.data(), counts.size());
  SequenceLoads loads{T_local, T, std::vector<double>(counts.size())};
  const double unit = static_cast<double>(E) / (static_cast<double>(K) * T);
  for (size_t i = 0; i < counts.size(); ++i) loads.f[i] = unit * counts[i];
  return loads;
}

double aux_loss_sum(const Routing& r, const SequenceLoads& loads, const MoeConfig& cfg) {
  const int E = cfg.num_experts;
  std::vector<float> q(static_cast<size_t>(E));
  double total = 0;
  for (int t = 0; t < r.N; ++t) {
    normalised_scores(r, t, E, cfg.score, q.data());
    const double* fe = loads.f.data() + static_cast<size_t>(t / loads.T_local) * E;
    for (int e = 0; e < E; ++e) total += fe[e] * q[static_cast<size_t>(e)] / loads.T;
  }
  return cfg.aux_loss_coef * total;
}

void router_backward(const Routing& r, const float* dgate, const SequenceLoads* loads,
                     float aux_scale, const MoeConfig& cfg, float* dlogits) {
  const int E = cfg.num_experts, K = cfg.top_k;
  const bool aux = loads != nullptr && aux_scale != 0.0f && cfg.aux_loss_coef > 0.0f;
  std::vector<double> d(static_cast<size_t>(E));  // d(score) of one token
  std::vector<float> q(static_cast<size_t>(E));
  for (int t = 0; t < r.N; ++t) {
    const float* s = r.scores.data() + static_cast<size_t>(t) * E;
    const int* chosen = r.expert.data() + static_cast<size_t>(t) * K;
    const float* g = r.gate.data() + static_cast<size_t>(t) * K;
    const float* dg = dgate + static_cast<size_t>(t) * K;
    std::fill(d.begin(), d.end(), 0.0);
    // Through the renormalisation g_j = s_j / sum_chosen s.
    double gdg = 0, chosen_sum = 0;
    for (int j = 0; j < K; ++j) {
      gdg += static_cast<double>(g[j]) * dg[j];
      chosen_sum += s[chosen[j]];
    }
    for (int j = 0; j < K; ++j) d[static_cast<size_t>(chosen[j])] = (dg[j] - gdg) / chosen_sum;
    if (aux) {
      // d aux / d q_e = aux_scale * coef * f_e / T, then through q.
      const double w = static_cast<double>(aux_scale) * cfg.aux_loss_coef / loads->T;
      const double* fe = loads->f.data() + static_cast<size_t>(t / loads->T_local) * E;
      if (cfg.score == MoeScore::softmax) {
        for (int e = 0; e < E; ++e) d[static_cast<size_t>(e)] += w * fe[e];
      } else {
        normalised_scores(r, t, E, cfg.score, q.data());
        double sum_s = 0, qdq = 0;
        for (int e = 0; e < E; ++e) {
          sum_s += s[e];
          qdq += q[static_cast<size_t>(e)] * w * fe[e];
        }
        for (int e = 0; e < E; ++e) d[static_cast<size_t>(e)] += (w * fe[e] - qdq) / sum_s;
      }
    }
    float* dl = dlogits + static_cast<size_t>(t) * E;
    if (cfg.score == MoeScore::softmax) {
      double pdp = 0;
      for (int e = 0; e < E; ++e) pdp += s[e] * d[static_cast<size_t>(e)];
      for (int e = 0; e < E; ++e)
        dl[e] = static_cast<float>(s[e] * (d[static_cast<size_t>(e)] - pdp));
    } else {
      for (int e = 0; e < E; ++e) {
        dl[e] = static_cast<float>(d[static_cast<size_t>(e)] * s[e] * (1.0f - s[e]));
      }
    }
  }
}

void router_weight_grad(const float* dlogits, const float* h, int N, int C, int E, float* dwg) {
  for (int e = 0; e < E; ++e) {
    float* dw = dwg + static_cast<size_t>(e) * C;
    for (int t = 0; t < N; ++t) {
      const float g = dlogits[static_cast<size_t>(t) * E + e];
      if (g == 0.0f) continue;
      const float* x = h + static_cast<size_t>(t) * C;
      for (int c = 0; c < C; ++c) dw[c] += g * x[c];
    }
  }
}

void router_input_grad(const float* dlogits, const float* wg, int N, int C, int E, float* dh) {
  for (int t = 0; t < N; ++t) {
    float* dx = dh + static_cast<size_t>(t) * C;
    for (int e = 0; e < E; ++e) {
      const float g = dlogits[static_cast<size_t>(t) * E + e];
      const float* w = wg + static_cast<size_t>(e) * C;
      for (int c = 0; c < C; ++c) dx[c] += g * w[c];
    }
  }
}

}  // namespace trainctl::model::moe
