#pragma once
// A view of a store under a key prefix that keeps the underlying store alive (gloo's
// PrefixStore holds a bare reference, and make_gloo_groups wants a shared_ptr). Workers
// use "attempt/<restart>/" so a restarted job never reads an earlier attempt's keys.
#include <gloo/rendezvous/store.h>

#include <memory>
#include <string>

namespace trainctl::launch {

class PrefixedStore : public gloo::rendezvous::Store {
 public:
  PrefixedStore(std::shared_ptr<gloo::rendezvous::Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    base_->set(prefix_ + key, data);
  }
  std::vector<char> get(const std::string& key) override { return base_->get(prefix_ + key); }
  void wait(const std::vector<std::string>& keys) override { base_->wait(prefixed(keys)); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    base_->wait(prefixed(keys), timeout);
  }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  std::shared_ptr<gloo::rendezvous::Store> base_;
  std::string prefix_;
};

// The key prefix of one attempt (restart number) of a job.
inline std::string attempt_prefix(int restart) {
  return "attempt/" + std::to_string(restart) + "/";
}

}  // namespace trainctl::launch
