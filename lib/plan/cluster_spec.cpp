#include "plan/cluster_spec.h"

#include <yaml-cpp/yaml.h>

#include "config/locations.h"
#include "config/yaml_documents.h"
#include "config/yaml_reader.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::plan {
namespace {

using config::detail::IntRange;
using config::detail::Locations;
using config::detail::MapReader;
using config::detail::RealRange;

std::string place(const std::string& origin, const YAML::Mark& mark) {
  if (mark.is_null()) return origin;
  return origin + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

YAML::Node parse_document(const std::string& text, const std::string& origin) {
  YAML::Node document;
  try {
    const config::detail::DocumentCount count = config::detail::count_yaml_documents(text);
    if (count.documents > 1) {
      throw InputError(place(origin, count.second.value_or(YAML::Mark::null_mark())) +
                       ": a second YAML document starts here; a cluster file is one document.");
    }
    document = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(place(origin, e.mark) + ": invalid YAML: " + e.msg +
                     ". Check this line and the one before it.");
  }
  if (!document.IsMap()) {
    throw InputError(place(origin, document.Mark()) +
                     ": a cluster file is a map (`device:`, `node:`, `links:`); see "
                     "configs/clusters/dgx-a100.yaml.");
  }
  return document;
}

const RealRange kPositive{0, true};
const RealRange kShare{0, true, 1, false};

void require(const MapReader& section, const std::string& key) {
  if (!section.has(key)) section.fail_at(key, "is required (see docs/cost-model.md)");
}

LinkTier read_link(const MapReader& links, const std::string& key, bool required) {
  LinkTier tier;
  if (!links.has(key)) {
    if (required) require(links, key);
    return tier;
  }
  const MapReader link = links.section(key, {"name", "bandwidth_gbs", "latency_us"});
  tier.name = key;
  link.read("name", tier.name);
  require(link, "bandwidth_gbs");
  link.read("bandwidth_gbs", tier.bandwidth_gbs, kPositive);
  require(link, "latency_us");
  link.read("latency_us", tier.latency_us, RealRange{});
  return tier;
}

}  // namespace

const LinkTier& ClusterSpec::across_nodes() const {
  if (inter_node.present()) return inter_node;
  if (ethernet.present()) return ethernet;
  throw InputError("cluster " + name +
                   ": the layout spans nodes but the cluster file has no links.inter_node or "
                   "links.ethernet");
}

ClusterSpec parse_cluster_spec(const std::string& yaml_text, const std::string& origin) {
  Locations locations(origin);
  const YAML::Node root = parse_document(yaml_text, origin);
  const MapReader top(root, "", {"name", "device", "node", "links", "precision", "overlap"},
                      locations);
  ClusterSpec c;
  require(top, "name");
  top.read("name", c.name);

  require(top, "device");
  const MapReader device =
      top.section("device", {"name", "peak_tflops", "memory_bandwidth_gbs", "memory_gb",
                             "matmul_efficiency", "memory_efficiency"});
  require(device, "name");
  device.read("name", c.device);
  device.read("peak_tflops", c.peak_tflops, kPositive);
  device.read("memory_bandwidth_gbs", c.memory_bandwidth_gbs, kPositive);
  device.read("memory_gb", c.memory_gb, kPositive);
  for (const char* key : {"peak_tflops", "memory_bandwidth_gbs", "memory_gb"}) require(device, key);
  device.read("matmul_efficiency", c.matmul_efficiency, kShare);
  device.read("memory_efficiency", c.memory_efficiency, kShare);

  require(top, "node");
  const MapReader node = top.section("node", {"gpus", "count"});
  require(node, "gpus");
  node.read("gpus", c.gpus_per_node, IntRange{1, 1 << 16});
  node.read("count", c.nodes, IntRange{0, 1 << 24});

  require(top, "links");
  const MapReader links = top.section("links", {"intra_node", "inter_node", "ethernet"});
  c.intra_node = read_link(links, "intra_node", c.gpus_per_node > 1);
  c.inter_node = read_link(links, "inter_node", false);
  c.ethernet = read_link(links, "ethernet", false);

  const MapReader precision = top.section("precision", {"activation_bytes", "gradient_bytes"});
  precision.read_choice("activation_bytes", c.activation_bytes, {2, 4});
  precision.read_choice("gradient_bytes", c.gradient_bytes, {2, 4});

  const MapReader overlap = top.section("overlap", {"dp"});
  overlap.read("dp", c.dp_overlap, RealRange{0, false, 1, false});
  return c;
}

ClusterSpec load_cluster_spec(const std::filesystem::path& path) {
  const RegularFile file(path, "cluster file");
  return parse_cluster_spec(file.read_all(1 << 20), path.string());
}

}  // namespace trainctl::plan
