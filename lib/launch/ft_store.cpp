#include "launch/ft_store.h"

#include <chrono>

namespace trainctl::launch {

TcpQuorumStore::TcpQuorumStore(std::shared_ptr<TcpStoreClient> client, std::string prefix)
    : client_(std::move(client)), prefix_(std::move(prefix)) {}

void TcpQuorumStore::set(const std::string& key, const std::string& value) {
  client_->set_string(prefix_ + key, value);
}

std::optional<std::string> TcpQuorumStore::try_get(const std::string& key) {
  const std::string k = prefix_ + key;
  if (!client_->check({k})) return std::nullopt;
  return client_->get_string(k, std::chrono::milliseconds(5000));
}

int64_t TcpQuorumStore::add(const std::string& key, int64_t delta) {
  return client_->add(prefix_ + key, delta);
}

std::optional<std::string> TcpQuorumStore::wait_get(const std::string& key,
                                                    std::chrono::milliseconds timeout) {
  const std::string k = prefix_ + key;
  try {
    return client_->get_string(k, timeout);  // the store answers when the key is set
  } catch (const RendezvousError&) {
    // A timeout, or a lost store: check() tells them apart (it throws for the latter).
    if (!client_->check({k})) return std::nullopt;
    return client_->get_string(k, std::chrono::milliseconds(5000));
  }
}

ReplicaHeartbeat::ReplicaHeartbeat(std::unique_ptr<QuorumStore> store, int replica, int generation,
                                   int rank, std::chrono::milliseconds interval)
    : store_(std::move(store)),
      key_(heartbeat_key(replica, generation, rank)),
      interval_(interval) {
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      try {
        store_->add(key_, 1);
      } catch (const std::exception&) {
      }
      // Short sleeps, so the destructor never waits a whole interval.
      for (auto slept = std::chrono::milliseconds(0); slept < interval_ && !stop_.load();
           slept += std::chrono::milliseconds(10)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  });
}

ReplicaHeartbeat::~ReplicaHeartbeat() {
  stop_ = true;
  thread_.join();
}

}  // namespace trainctl::launch
