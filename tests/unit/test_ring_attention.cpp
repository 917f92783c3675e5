// Context parallelism's attention: (1) blockwise attention with the online-softmax merge of
// ragged key blocks equals full causal attention (forward and backward); (2) ring attention
// over cp = 2 and 4 ranks (threads, a real Gloo ring) equals one rank's attention over the
// whole sequence, for multi-head and grouped-query shapes.
#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "model/attention_blocks.h"
#include "model/context_chunks.h"
#include "model/ring_attention.h"
#include "ops/backend.h"
#include "test_ops_reference.h"
#include "test_parallel_support.h"

namespace model = trainctl::model;
namespace ops = trainctl::ops;
namespace ref = trainctl::ops::ref;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Full {
  std::vector<float> out, lse, dqkv;
};

// One rank's fused attention over the whole sequence: the reference.
Full full_attention(const ops::AttentionShape& s, const std::vector<float>& qkv,
                    const std::vector<float>& dout) {
  auto be = ops::make_cpu_backend(ops::BackendOptions{1});
  Full f;
  f.out.resize(static_cast<size_t>(s.B) * s.T * s.q_width());
  f.lse.resize(static_cast<size_t>(s.B) * s.n_head * s.T);
  f.dqkv.resize(qkv.size());
  be->attention_forward(f.out.data(), f.lse.data(), qkv.data(), s);
  be->attention_backward(f.dqkv.data(), dout.data(), qkv.data(), f.out.data(), f.lse.data(), s);
  return f;
}

}  // namespace

TEST_CASE("blockwise attention over ragged key blocks merges to full attention",
          "[ring_attention]") {
  // One sequence, one head: q rows [0, T) against key blocks of uneven sizes.
  const int T = 37, hd = 8;
  const ops::AttentionShape s{1, T, 1, 1, hd};
  const auto qkv = ref::random_floats(static_cast<size_t>(T) * 3 * hd, 7, -2.0f, 2.0f);
  const auto dout = ref::random_floats(static_cast<size_t>(T) * hd, 8);
  const Full want = full_attention(s, qkv, dout);
  auto be = ops::make_cpu_backend(ops::BackendOptions{1});
  const std::vector<int> sizes = GENERATE(std::vector<int>{37}, std::vector<int>{5, 17, 1, 14},
                                          std::vector<int>{20, 3, 3, 11}, std::vector<int>{1, 36});
  std::vector<float> out(static_cast<size_t>(T) * hd, 0.0f), lse(T, kNegInf);
  std::vector<float> scratch(static_cast<size_t>(model::head_block_scratch_floats(T, hd)));
  auto block = [&](int k0, int nk) {
    model::HeadBlock b;
    b.q = qkv.data();
    b.ldq = 3 * hd;
    b.k = qkv.data() + static_cast<size_t>(k0) * 3 * hd + hd;
    b.v = b.k + hd;
    b.ldkv = 3 * hd;
    b.nq = T;
    b.nk = nk;
    b.head_dim = hd;
    b.kpos0 = k0;
    return b;
  };
  // Forward in reverse block order: the merge must not depend on the order.
  std::vector<int> starts;
  for (int k0 = 0, i = 0; i < static_cast<int>(sizes.size()); k0 += sizes[i++])
    starts.push_back(k0);
  for (int i = static_cast<int>(sizes.size()); i-- > 0;) {
    model::head_block_forward(*be, block(starts[i], sizes[i]), out.data(), hd, lse.data(),
                              scratch.data());
  }
  ref::require_close(out, ref::to_double(want.out), 2e-5, "out");
  ref::require_close(lse, ref::to_double(want.lse), 2e-5, "lse");
  std::vector<float> delta(T), dqkv(qkv.size(), 0.0f);
  for (int t = 0; t < T; ++t) {
    for (int d = 0; d < hd; ++d) delta[t] += dout[t * hd + d] * out[t * hd + d];
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    float* dk = dqkv.data() + static_cast<size_t>(starts[i]) * 3 * hd + hd;
    model::head_block_backward(*be, block(starts[i], sizes[i]), dout.data(), hd, lse.data(),
                               delta.data(), dqkv.data(), 3 * hd, dk, dk + hd, 3 * hd,
                               scratch.data());
  }
  ref::require_close(dqkv, ref::to_double(want.dqkv), 2e-5, "dqkv");
}

TEST_CASE("ring attention over the CP ring equals attention over the whole sequence",
          "[ring_attention]") {
  const int cp = GENERATE(2, 4);
  const int n_kv = GENERATE(4, 2, 1);  // multi-head, grouped-query, multi-query
  const int B = 2, T = 48, NH = 4, hd = 8;
  const ops::AttentionShape whole{B, T, NH, n_kv, hd};
  const auto qkv = ref::random_floats(static_cast<size_t>(B) * T * whole.qkv_width(), 11, -2, 2);
  const auto dout = ref::random_floats(static_cast<size_t>(B) * T * whole.q_width(), 12);
  const Full want = full_attention(whole, qkv, dout);
  INFO("cp=" << cp << " n_kv_head=" << n_kv);
  std::vector<Full> got(static_cast<size_t>(cp));
  trainctl::parallel::testing::on_dp_group(cp, [&](trainctl::comm::Communicator& ring) {
    const model::ContextChunks chunks = model::ContextChunks::of(cp, ring.rank(), T);
    const int Tl = chunks.local_len();
    const ops::AttentionShape local{B, Tl, NH, n_kv, hd};
    std::vector<float> q(static_cast<size_t>(B) * Tl * whole.qkv_width());
    std::vector<float> d(static_cast<size_t>(B) * Tl * whole.q_width());
    for (int b = 0; b < B; ++b) {  // this rank's two chunks of each sequence, row by row
      for (int t = 0; t < Tl; ++t) {
        const int pos = chunks.first_position(t / chunks.chunk, ring.rank()) + t % chunks.chunk;
        std::copy_n(qkv.begin() + (b * T + pos) * whole.qkv_width(), whole.qkv_width(),
                    q.begin() + (b * Tl + t) * whole.qkv_width());
        std::copy_n(dout.begin() + (b * T + pos) * whole.q_width(), whole.q_width(),
                    d.begin() + (b * Tl + t) * whole.q_width());
      }
    }
    auto be = ops::make_cpu_backend(ops::BackendOptions{1});
    trainctl::comm::RingExchange exchange(ring);
    model::RingAttention attention(local, chunks, &exchange);
    model::ActivationArena arena(be.get());
    attention.allocate(arena);
    Full& f = got[static_cast<size_t>(ring.rank())];
    f.out.resize(d.size());
    f.lse.resize(static_cast<size_t>(B) * NH * Tl);
    f.dqkv.resize(q.size());
    attention.forward(*be, f.out.data(), f.lse.data(), q.data());
    attention.backward(*be, f.dqkv.data(), d.data(), q.data(), f.out.data(), f.lse.data());
    ring.barrier();
  });
  for (int r = 0; r < cp; ++r) {
    const model::ContextChunks chunks = model::ContextChunks::of(cp, r, T);
    const int Tl = chunks.local_len();
    const Full& f = got[static_cast<size_t>(r)];
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < Tl; ++t) {
        const int pos = chunks.first_position(t / chunks.chunk, r) + t % chunks.chunk;
        for (int i = 0; i < whole.q_width(); ++i) {
          REQUIRE(f.out[(b * Tl + t) * whole.q_width() + i] ==
                  Approx(want.out[(b * T + pos) * whole.q_width() + i]).margin(2e-5));
        }
        for (int h = 0; h < NH; ++h) {
          REQUIRE(f.lse[(b * NH + h) * Tl + t] ==
                  Approx(want.lse[(b * NH + h) * T + pos]).margin(2e-5));
        }
        for (int i = 0; i < whole.qkv_width(); ++i) {
          REQUIRE(f.dqkv[(b * Tl + t) * whole.qkv_width() + i] ==
                  Approx(want.dqkv[(b * T + pos) * whole.qkv_width() + i]).margin(2e-5));
        }
      }
    }
  }
}
