#pragma once
// Context parallelism's cut of a sequence (Megatron's load-balanced order): a sequence of T
// tokens is split into 2 cp chunks of T / (2 cp); CP rank r holds chunks r and 2 cp - 1 - r,
// so every rank gets one early and one late chunk and the causal attention work is even.
// A rank's local sequence is its two chunks back to back (T / cp tokens).
#include <cstdint>
#include <cstring>

namespace trainctl::model {

struct ContextChunks {
  int cp = 1;     // CP ranks (1: no context parallelism)
  int rank = 0;   // this rank's place in the CP ring
  int chunk = 0;  // tokens per chunk: T / (2 cp)

  static ContextChunks of(int cp, int rank, int seq_len) { return {cp, rank, seq_len / (2 * cp)}; }
  bool active() const { return cp > 1; }
  int local_len() const { return 2 * chunk; }
  // The global chunk index of local chunk `local` (0 or 1) held by CP rank `r`.
  int global_chunk(int local, int r) const { return local == 0 ? r : 2 * cp - 1 - r; }
  // The first position (in the whole sequence) of local chunk `local` of rank `r`.
  int first_position(int local, int r) const { return global_chunk(local, r) * chunk; }

  // Copies this rank's two chunks of each of `B` sequences of `seq_len` from `full` to
  // `local` ([B, local_len()]).
  template <typename T>
  void take_local(const T* full, int B, int seq_len, T* local) const {
    for (int b = 0; b < B; ++b) {
      for (int l = 0; l < 2; ++l) {
        std::memcpy(local + (static_cast<int64_t>(b) * local_len() + l * chunk),
                    full + (static_cast<int64_t>(b) * seq_len + first_position(l, rank)),
                    sizeof(T) * static_cast<size_t>(chunk));
      }
    }
  }
};

}  // namespace trainctl::model
