// Fuzz target: the cluster-file parser (plan/cluster_spec.h, configs/clusters/*.yaml) for
// `trainctl plan --cluster`. The input is the YAML document.
// Checks beyond "no crash": an accepted cluster has the ranges its header documents
// (positive finite rates, shares in (0, 1], at least one GPU per node, a link between the
// GPUs of a node when there are several, 2 or 4 bytes per element), and across_nodes()
// either names a present link or refuses with an InputError.
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "plan/cluster_spec.h"
#include "util/error.h"

using namespace trainctl;

namespace {

bool positive(double x) { return std::isfinite(x) && x > 0; }
bool share(double x) { return std::isfinite(x) && x > 0 && x <= 1; }

void check_link(const plan::LinkTier& l) {
  fuzz::require(std::isfinite(l.bandwidth_gbs) && l.bandwidth_gbs >= 0, "link bandwidth");
  fuzz::require(std::isfinite(l.latency_us) && l.latency_us >= 0, "link latency");
  if (l.present()) fuzz::require(!l.name.empty(), "a present link without a name");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;  // load_cluster_spec refuses these unread
  const std::string text(reinterpret_cast<const char*>(data), size);
  plan::ClusterSpec c;
  try {
    c = plan::parse_cluster_spec(text, "fuzz.yaml");
  } catch (const InputError&) {
    return 0;  // refused with a message: the documented outcome for bad input
  }
  fuzz::require(
      positive(c.peak_tflops) && positive(c.memory_bandwidth_gbs) && positive(c.memory_gb),
      "device rates must be positive and finite");
  fuzz::require(share(c.matmul_efficiency) && share(c.memory_efficiency),
                "efficiencies must lie in (0, 1]");
  fuzz::require(std::isfinite(c.dp_overlap) && c.dp_overlap >= 0 && c.dp_overlap <= 1,
                "overlap.dp must lie in [0, 1]");
  fuzz::require(c.gpus_per_node >= 1 && c.nodes >= 0, "gpus per node and node count");
  fuzz::require(c.gpus_per_node == 1 || c.intra_node.present(),
                "several GPUs per node without an intra-node link");
  fuzz::require((c.activation_bytes == 2 || c.activation_bytes == 4) &&
                    (c.gradient_bytes == 2 || c.gradient_bytes == 4),
                "bytes per element must be 2 or 4");
  for (const plan::LinkTier* l : {&c.intra_node, &c.inter_node, &c.ethernet}) check_link(*l);
  try {
    fuzz::require(c.across_nodes().present(), "across_nodes() gave an absent link");
  } catch (const InputError&) {
    fuzz::require(!c.inter_node.present() && !c.ethernet.present(),
                  "across_nodes() refused a cluster with a link between nodes");
  }
  return 0;
}
