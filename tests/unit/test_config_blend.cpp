// data.type blend in the job spec: sources read with their names and resolved paths, written
// back by the resolved dump, and refused before anything starts when they cannot work.
#include <catch2/catch.hpp>
#include <filesystem>

#include "config/load.h"
#include "test_config_helpers.h"
#include "test_scratch.h"

using namespace trainctl;
using namespace trainctl::config::testing;
namespace fs = std::filesystem;

namespace {

std::string blend_yaml(const std::string& sources, const std::string& extra = "") {
  return "model: {vocab_size: 256, seq_len: 8, n_layer: 1, n_head: 1, d_model: 8}\n"
         "data:\n  type: blend\n" +
         extra + "  sources:\n" + sources;
}

}  // namespace

TEST_CASE("blend sources: names, relative paths and the resolved dump", "[config][blend]") {
  test::ScratchDir dir("cfgblend");
  fs::create_directories(dir.path / "web");
  std::ofstream(dir.path / "code.bin") << "xx";
  const config::JobSpec s = config::parse_job_spec(
      blend_yaml("    - {path: web/, weight: 0.7}\n"
                 "    - {path: code.bin, weight: 3, name: code, type: tokens}\n",
                 "  seed: 12\n"),
      "job.yaml", dir.path);
  REQUIRE(s.data.sources.size() == 2);
  CHECK(s.data.sources[0].name == "web");
  CHECK(s.data.sources[0].path == (dir.path / "web/").lexically_normal());
  CHECK(s.data.sources[1].name == "code");
  CHECK(s.data.sources[1].weight == 3.0);
  CHECK(s.data.seed == 12u);
  // The resolved spec reads back as the same spec.
  CHECK(config::parse_job_spec(config::to_yaml(s), "resolved", dir.path) == s);
}

TEST_CASE("bad blends are refused at the key that is wrong", "[config][blend]") {
  test::ScratchDir dir("cfgblendbad");
  fs::create_directories(dir.path / "web");
  require_error(blend_yaml("    - {path: web, weight: 0}\n"), "job.yaml:", "data.sources",
                {"sum to 0", "positive"}, {}, dir.path);
  require_error(blend_yaml("    - {path: web, weight: -0.5}\n"),
                "job.yaml:", "data.sources[0].weight", {}, {}, dir.path);
  require_error(blend_yaml("    - {path: nowhere, weight: 1}\n"),
                "job.yaml:", "data.sources[0].path", {"no such file or directory", "nowhere"}, {},
                dir.path);
  require_error(blend_yaml("    - {weight: 1}\n"), "job.yaml:", "data.sources[0].path",
                {"required"}, {}, dir.path);
  require_error(blend_yaml("    - {path: web, weight: 1, colour: red}\n"),
                "job.yaml:", "data.sources[0].colour", {"unknown key"}, {}, dir.path);
  require_error(blend_yaml("    - {path: web, weight: 1}\n    - {path: web, weight: 2}\n"),
                "job.yaml:", "data.sources[1].name", {"distinct"}, {}, dir.path);
  require_error(blend_yaml("    - {path: web, weight: 1}\n", "  path: web\n"),
                "job.yaml:", "data.path", {"not used by data.type blend"}, {}, dir.path);
  require_error("data: {type: synthetic, sources: [{path: web, weight: 1}]}\n",
                "job.yaml:", "data.sources", {"only with data.type blend"}, {}, dir.path);
  require_error("model: {vocab_size: 256}\ndata: {type: blend}\n", "job.yaml:", "data.sources",
                {"is required"}, {}, dir.path);
}
