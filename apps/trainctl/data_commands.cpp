#include "data_commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "data/prepare.h"
#include "data/tokenize_file.h"
#include "tokenizer/load_tokenizer.h"
#include "util/exit_codes.h"

namespace trainctl::app {

namespace {

int thread_count(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void describe(const tokenizer::LoadedTokenizer& t) {
  std::fprintf(stderr, "tokenizer %s (%s, %s split pattern): %d tokens, %s\n",
               t.tokenizer.source().c_str(), t.tokenizer.kind().c_str(),
               tokenizer::to_string(t.tokenizer.pattern()), t.tokenizer.vocab_size(),
               t.hash.c_str());
}

// A progress line on stderr, redrawn in place, when stderr is a terminal.
class ProgressLine {
 public:
  ProgressLine() : tty_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}
  void update(const data::PrepareProgress& p) {
    if (!tty_) return;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double frac = p.total_bytes > 0
                            ? static_cast<double>(p.done_bytes) / static_cast<double>(p.total_bytes)
                            : 1.0;
    const int width = 30;
    const int filled = static_cast<int>(frac * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r[%s] %5.1f%%  %.1f / %.1f MB  %zu tokens  %.1f MB/s ", bar.c_str(),
                 100.0 * frac, static_cast<double>(p.done_bytes) / 1e6,
                 static_cast<double>(p.total_bytes) / 1e6, p.tokens,
                 s > 0 ? static_cast<double>(p.done_bytes) / 1e6 / s : 0.0);
    std::fflush(stderr);
    drawn_ = true;
  }
  ~ProgressLine() {
    if (drawn_) std::fprintf(stderr, "\n");
  }

 private:
  bool tty_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

int cmd_data_prepare(const DataPrepareArgs& args) {
  const tokenizer::LoadedTokenizer tok = tokenizer::load_tokenizer(args.tokenizer);
  describe(tok);
  data::PrepareOptions opt;
  opt.input = args.input;
  opt.out_dir = args.out;
  opt.val_fraction = args.val_fraction;
  opt.threads = thread_count(args.threads);
  opt.shard_tokens = args.shard_tokens;
  data::PrepareSummary summary;
  {
    ProgressLine progress;
    summary =
        data::prepare_tokens(tok, opt, [&](const data::PrepareProgress& p) { progress.update(p); });
  }
  std::printf("%s\n", summary.text.c_str());
  return kExitOk;
}

int cmd_data_encode(const std::filesystem::path& tokenizer, const std::filesystem::path& input,
                    const std::filesystem::path& out, int threads) {
  const tokenizer::LoadedTokenizer tok = tokenizer::load_tokenizer(tokenizer);
  const int n = thread_count(threads);
  const data::EncodeStats s = data::encode_file(tok.tokenizer, input, out, n);
  std::fprintf(stderr,
               "encoded %zu bytes into %zu tokens in %.3f s on %d thread%s: %.1f MB/s (%.3f "
               "CPU s: %.1f MB/s per CPU second) (%.2f bytes/token)\n",
               s.bytes, s.tokens, s.seconds, n, n == 1 ? "" : "s",
               s.seconds > 0 ? static_cast<double>(s.bytes) / 1e6 / s.seconds : 0.0, s.cpu_seconds,
               s.cpu_seconds > 0 ? static_cast<double>(s.bytes) / 1e6 / s.cpu_seconds : 0.0,
               s.tokens > 0 ? static_cast<double>(s.bytes) / static_cast<double>(s.tokens) : 0.0);
  return kExitOk;
}

int cmd_data_decode(const std::filesystem::path& tokenizer, const std::filesystem::path& input,
                    const std::filesystem::path& out) {
  const tokenizer::LoadedTokenizer tok = tokenizer::load_tokenizer(tokenizer);
  const size_t n = data::decode_file(tok.tokenizer, input, out);
  std::fprintf(stderr, "decoded %zu tokens into %s\n", n, out.string().c_str());
  return kExitOk;
}

}  // namespace trainctl::app
