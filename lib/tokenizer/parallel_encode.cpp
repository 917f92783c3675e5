#include "tokenizer/parallel_encode.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

namespace trainctl::tokenizer {

namespace {

bool is_ascii_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_ascii_non_space(unsigned char c) {
  return c < 0x80 && c != ' ' && !(c >= 0x09 && c <= 0x0D);
}

// Runs job(i, encoder) for i in [0, jobs) on up to `threads` threads, each with its own
// Encoder; `finished(i)` runs on the calling thread as jobs complete (any order).
void run_jobs(const Tokenizer& tok, size_t jobs, int threads,
              const std::function<void(size_t, Encoder&)>& job,
              const std::function<void(size_t)>& finished) {
  const size_t n_threads =
      std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), jobs));
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<size_t> completed;
  std::exception_ptr error;
  size_t running = n_threads;
  auto work = [&] {
    Encoder encoder(tok);
    for (size_t i; (i = next.fetch_add(1)) < jobs;) {
      try {
        job(i, encoder);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        next = jobs;
      }
      if (n_threads == 1) {
        if (finished) finished(i);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu);
      completed.push_back(i);
      cv.notify_one();
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_one();
  };
  std::vector<std::thread> pool;
  if (n_threads > 1) {
    for (size_t t = 0; t < n_threads; ++t) pool.emplace_back(work);
  }
  if (n_threads == 1) {
    work();
  } else {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0 || !completed.empty()) {
      cv.wait(lock, [&] { return running == 0 || !completed.empty(); });
      std::vector<size_t> now;
      now.swap(completed);
      lock.unlock();
      if (finished) {
        for (size_t i : now) finished(i);
      }
      lock.lock();
    }
  }
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

std::vector<size_t> chunk_boundaries(const Tokenizer& tokenizer, std::string_view text,
                                     size_t chunk_bytes) {
  std::vector<size_t> cuts;
  if (!tokenizer.chunkable()) return cuts;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t pos = chunk_bytes;
  while (pos < text.size()) {
    size_t k = std::max<size_t>(pos, 2);
    while (k < text.size() &&
           !(s[k - 1] == '\n' && is_ascii_non_space(s[k - 2]) && is_ascii_letter(s[k]))) {
      ++k;
    }
    if (k >= text.size()) break;
    cuts.push_back(k);
    pos = k + chunk_bytes;
  }
  return cuts;
}

std::vector<int32_t> encode_text(const Tokenizer& tokenizer, std::string_view text, int threads) {
  const size_t per_thread = text.size() / static_cast<size_t>(std::max(threads, 1)) + 1;
  const size_t chunk = std::clamp<size_t>(per_thread, 64 << 10, 1 << 20);
  std::vector<size_t> bounds = chunk_boundaries(tokenizer, text, chunk);
  bounds.insert(bounds.begin(), 0);
  bounds.push_back(text.size());
  std::vector<std::vector<int32_t>> parts(bounds.size() - 1);
  run_jobs(tokenizer, parts.size(), threads,
           [&](size_t i, Encoder& enc) {
             parts[i].reserve((bounds[i + 1] - bounds[i]) / 3);
             enc.encode(text.substr(bounds[i], bounds[i + 1] - bounds[i]), parts[i]);
           },
           {});
  size_t total = 0;
  for (const auto& p : parts) total += p.size();
  std::vector<int32_t> ids;
  ids.reserve(total);
  for (const auto& p : parts) ids.insert(ids.end(), p.begin(), p.end());
  return ids;
}

std::vector<std::vector<int32_t>> encode_documents(const Tokenizer& tokenizer,
                                                   const std::vector<std::string_view>& docs,
                                                   int threads,
                                                   const std::function<void(size_t)>& done) {
  std::vector<std::vector<int32_t>> ids(docs.size());
  run_jobs(
      tokenizer, docs.size(), threads, [&](size_t i, Encoder& enc) { enc.encode(docs[i], ids[i]); },
      [&](size_t i) {
        if (done) done(docs[i].size());
      });
  return ids;
}

}  // namespace trainctl::tokenizer
