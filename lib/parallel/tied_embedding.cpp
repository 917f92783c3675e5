#include "parallel/tied_embedding.h"

#include <vector>

namespace trainctl::parallel {

namespace {
constexpr uint32_t kTiedEmbeddingTag = 0x7fff0001u;  // outside the pipeline executor's tags
}

void exchange_tied_embedding_grad(model::Gpt& gpt, comm::Communicator& pp, bool report) {
  if (!gpt.exchanges_tied_embedding() || pp.size() == 1) return;
  const auto index = static_cast<size_t>(gpt.tied_embedding_param());
  const model::Param& p = gpt.params().at(index);
  float* grad = gpt.params().grad(index);  // bound storage under ZeRO-3
  const auto n = static_cast<size_t>(p.numel);
  const int peer = gpt.shard().embedding ? pp.size() - 1 : 0;
  // Send a copy: the local gradient is updated in place while the send may be in flight.
  std::vector<float> mine(grad, grad + n), theirs(n);
  auto sent = pp.isend(mine.data(), n * sizeof(float), peer, kTiedEmbeddingTag);
  pp.recv(theirs.data(), n * sizeof(float), peer, kTiedEmbeddingTag);
  sent->wait();
  // Both ends compute first-stage + last-stage in the same order: identical results.
  const bool first = gpt.shard().embedding;
  for (size_t i = 0; i < n; ++i) grad[i] = first ? mine[i] + theirs[i] : theirs[i] + mine[i];
  if (report) gpt.report_grad_ready(gpt.tied_embedding_piece());
}

}  // namespace trainctl::parallel
