// `trainctl sample` on a GPU: Backend::attention_decode on CUDA against the CPU backend,
// and the key/value-cache decoder (model/gpt_decode.h) with its weights, cache and every
// op on the CUDA backend against the same decoder on the CPU, both families.
#include "gpu/gpu_support.h"
#include "model/gpt.h"
#include "model/gpt_decode.h"

using namespace trainctl;
using namespace trainctl::gpu_test;

TEST_CASE("attention over a key/value cache", "[gpu][decode]") {
  Backends b;
  struct Case {
    int len, n_head, n_kv_head, head_dim;
  };
  for (const Case c : {Case{1, 4, 4, 64}, Case{37, 8, 2, 64}, Case{300, 4, 1, 128},
                       Case{5, 3, 3, 16}, Case{1000, 2, 2, 256}}) {
    const std::string tag = " len=" + std::to_string(c.len) + " heads=" + std::to_string(c.n_head) +
                            "/" + std::to_string(c.n_kv_head) +
                            " head_dim=" + std::to_string(c.head_dim);
    const size_t q_n = static_cast<size_t>(c.n_head) * c.head_dim;
    const size_t kv_n = static_cast<size_t>(c.len) * c.n_kv_head * c.head_dim;
    const auto q = random_vec(q_n, 40, -2, 2), k = random_vec(kv_n, 41, -2, 2),
               v = random_vec(kv_n, 42);
    DeviceVec dq(*b.cuda, q), dk(*b.cuda, k), dv(*b.cuda, v), out(*b.cuda, q_n);
    std::vector<float> want(q_n);
    b.cuda->attention_decode(out.get(), dq.get(), dk.get(), dv.get(), c.len, c.n_head, c.n_kv_head,
                             c.head_dim);
    b.cpu->attention_decode(want.data(), q.data(), k.data(), v.data(), c.len, c.n_head, c.n_kv_head,
                            c.head_dim);
    check_close(out.download(), want, 1e-4, 1e-5, "attention_decode" + tag);
  }
  DeviceVec none(*b.cuda, 8);
  CHECK_THROWS_AS(
      b.cuda->attention_decode(none.get(), none.get(), none.get(), none.get(), 1, 3, 2, 4),
      std::invalid_argument);  // 2 k/v heads do not divide 3 query heads
  CHECK_THROWS_AS(
      b.cuda->attention_decode(none.get(), none.get(), none.get(), none.get(), 1, 1, 1, 512),
      std::invalid_argument);  // beyond the kernels' head size
}

TEST_CASE("the KV-cache decoder on CUDA gives the CPU decoder's logits", "[gpu][decode]") {
  Backends b;
  for (const model::Family family : {model::Family::gpt, model::Family::llama}) {
    model::ModelConfig c;
    c.vocab_size = 97;
    c.max_seq_len = 24;
    c.n_layer = 2;
    c.n_head = 4;
    c.d_model = 64;
    if (family == model::Family::llama) {
      c.family = family;
      c.n_kv_head = 2;
      c.ffn_hidden = 96;
      c.tie_embeddings = false;
    }
    INFO(model::to_string(family));
    model::Gpt gpt(c, *b.cpu, 1, c.max_seq_len);
    gpt.init_weights(11);
    auto load = [&](const std::string& name, float* out, size_t numel) {
      const model::Param& p = gpt.params().find(name);
      REQUIRE(static_cast<size_t>(p.numel) == numel);
      std::copy_n(gpt.params().data() + p.offset, numel, out);
    };
    model::GptDecoder on_cpu(c, *b.cpu, load), on_gpu(c, *b.cuda, load);
    const std::vector<int32_t> tokens = {5, 96, 0, 13, 13, 40, 2, 77, 31, 64, 8, 1};
    for (size_t t = 0; t < tokens.size(); ++t) {
      const std::vector<float> want = on_cpu.step(tokens[t]);
      const std::vector<float>& got = on_gpu.step(tokens[t]);
      check_close(got, want, 1e-3, 1e-4, "logits at position " + std::to_string(t));
    }
    check_close(on_gpu.forward_full(tokens), on_cpu.forward_full(tokens), 1e-3, 1e-4,
                "full forward");
  }
}
