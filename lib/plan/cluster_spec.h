#pragma once
// A cluster described in a YAML file (configs/clusters/*.yaml) for `trainctl plan --cluster`:
// the device's peak rates and the link tiers its collectives run on. Nothing here is
// measured; the file states the hardware (and one achievable-efficiency factor for matmuls).
// A malformed file throws InputError "file:line:col: key: problem" like a job spec.
#include <filesystem>
#include <string>

namespace trainctl::plan {

// One tier of links: NVLink inside a node, InfiniBand (or Ethernet) across nodes.
struct LinkTier {
  std::string name;          // e.g. "nvlink", "infiniband", "ethernet"
  double bandwidth_gbs = 0;  // GB/s (1e9 bytes) per GPU, per direction
  double latency_us = 0;     // per message (the alpha of an alpha-beta cost)
  bool present() const { return bandwidth_gbs > 0; }
};

struct ClusterSpec {
  std::string name;
  std::string device;               // e.g. "A100-SXM4-80GB"
  double peak_tflops = 0;           // dense matmul peak at the training precision, per GPU
  double memory_bandwidth_gbs = 0;  // device memory, GB/s
  double memory_gb = 0;             // device memory per GPU, GB (1e9 bytes)
  // The share of peak that large transformer matmuls reach (cuBLAS-size GEMMs, not the
  // kernel-launch-bound small ones): one factor for the device, applied to every matmul.
  double matmul_efficiency = 0.7;
  // The share of peak memory bandwidth that elementwise kernels (norms, softmax, GELU,
  // dropout, residual adds) reach.
  double memory_efficiency = 0.8;
  int gpus_per_node = 1;
  int nodes = 0;        // 0: as many as the layout needs
  LinkTier intra_node;  // between GPUs of one node
  LinkTier inter_node;  // between nodes (InfiniBand)
  LinkTier ethernet;    // optional; used across nodes when inter_node is absent
  // Share of the data-parallel gradient reduction that may run while the last micro-batch's
  // backward computes (0: none, 1: all of that backward's time can hide it).
  double dp_overlap = 1.0;
  // Bytes per element the model's matmuls and activations use (2: fp16/bf16 mixed precision).
  int activation_bytes = 2;
  // Bytes per element of the data-parallel gradient reduction.
  int gradient_bytes = 2;
  // The link that crosses nodes: inter_node, else ethernet. Throws InputError if neither.
  const LinkTier& across_nodes() const;
};

// Parses the text of a cluster file; `origin` names it in messages.
ClusterSpec parse_cluster_spec(const std::string& yaml_text, const std::string& origin);
// Reads and parses a file (InputError when it cannot be read).
ClusterSpec load_cluster_spec(const std::filesystem::path& path);

}  // namespace trainctl::plan
