#pragma once
// A worker's side of parameter-server training: one connection to every server
// (ps/ps_server.h), gradients pushed as contiguous ranges of the flat gradient buffer
// (ps/shard_plan.h), fresh parameters read back into the flat parameter buffer.
//
//   PsClient client(addresses, worker, shards);
//   if (worker == 0) client.seed(params, optimizer_state, start_step);
//   client.pull(params);                       // every worker, before its first step
//   loop: compute grads; PushReply r = client.push(grads, info, params);
//         r.checkpoint -> all workers save together (worker 0: client.fetch_state)
//         r.done || r.stop -> leave the loop
//   client.goodbye();
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "ps/shard_plan.h"

namespace trainctl::ps {

struct ClientOptions {
  // Connecting retries until this (servers may start after the workers); every reply
  // must come within `timeout` (a server that died or hangs fails the worker).
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // The job token (ps/ps_auth.h): the worker proves it holds it, and each server must
  // prove the same before the worker trusts it. Empty in the in-process tests. (A default
  // member initializer, so `{connect_timeout, timeout}` still initializes every field.)
  std::string token{};
};

struct PushInfo {
  int64_t local_step = 0;  // this worker's pushes so far (0-based index of this one)
  double loss_sum = 0.0;   // of this gradient's tokens (0 and 0 when this rank has none)
  int64_t loss_count = 0;
  bool stop_request = false;  // a stop signal reached this worker
};

// Server 0's steering (ps/ps_server.h) and this push's accounting.
struct PushReply {
  int64_t global_step = 0;  // server 0's gradients applied / workers (after this update)
  // Server 0's version after this push was applied: its update count, starting from the
  // seed's global_step (so with K = 0 it equals global_step).
  int64_t version = 0;
  bool done = false;
  bool stop = false;
  bool checkpoint = false;
  // Gradients server 0 applied since this worker's previous reply: their loss sums, count
  // and staleness histogram (index = staleness, max_staleness + 1 entries).
  double loss_sum = 0.0;
  int64_t loss_count = 0;
  int64_t gradients = 0;
  std::vector<int64_t> staleness;
  // This push's float payload bytes (gradients out, parameters back; headers not
  // counted), to and from every server together.
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
};

class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class PsClient {
 public:
  // Connects to every server ("host:port", index = server number) as worker `worker`,
  // with the handshake of ps/ps_auth.h. Throws ClientError naming the server it could not
  // reach, or that refused this worker or could not prove it holds the job token.
  PsClient(const std::vector<std::string>& addresses, int worker, std::vector<ServerShard> shards,
           ClientOptions options = {});
  ~PsClient();
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  // Worker 0, once, before any pull: every server takes its range of the whole flat
  // parameter buffer and of the optimizer state's buffers (optim::OptimizerState, laid out
  // like it; step = the updates already made), and starts counting at `global_step`
  // completed steps (a resume; 0 fresh).
  void seed(const float* params, const optim::OptimizerState& state, int64_t global_step);
  // Waits for the servers to be seeded; copies their parameters into `params`. Returns the
  // global step they start from.
  int64_t pull(float* params);
  // Sends `grads` (the whole flat gradient buffer; each server gets its range), waits for
  // every server's reply and copies the updated parameters into `params`.
  PushReply push(const float* grads, const PushInfo& info, float* params);
  // Worker 0 while every other worker waits (a checkpoint, the end): the servers'
  // parameters into `params` and their optimizer state as one whole-layout state (`total`
  // floats each). `applied`, when given, receives what server 0 applied since this
  // worker's last reply (loss sums, gradients, staleness histogram; the rest zero).
  optim::OptimizerState fetch_state(float* params, int64_t total, PushReply* applied = nullptr);
  // No pushes from this worker until its next pull() (every worker of a checkpoint): the
  // servers stop waiting for it meanwhile.
  void pause();
  // No more pushes from this worker. The connections stay open (worker 0 still fetches the
  // final state) until the client is destroyed.
  void goodbye();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainctl::ps
