#include "config/includes.h"

#include <map>
#include <utility>
#include <vector>

#include "config/load.h"
#include "config/suggest.h"
#include "config/yaml_documents.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::config::detail {

namespace {

namespace fs = std::filesystem;

constexpr const char* kInclude = "include";

std::string place(const std::string& origin, const YAML::Mark& mark) {
  if (mark.is_null()) return origin;
  return origin + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

YAML::Node parse_document(const std::string& yaml_text, const std::string& origin) {
  YAML::Node document;
  try {
    // Counted first, without LoadAll (yaml_documents.h: it can loop forever).
    const DocumentCount count = count_yaml_documents(yaml_text);
    if (count.documents > 1) {
      throw InputError(place(origin, count.second.value_or(YAML::Mark::null_mark())) +
                       ": a second YAML document starts here; a job spec is one document. Remove "
                       "the `---` separator and what follows, or text left after the spec (such "
                       "as a stray `,`).");
    }
    document = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    // yaml-cpp reports where it noticed the problem, which is often the line after the
    // real mistake (an unclosed bracket, a key indented differently from its siblings).
    throw InputError(place(origin, e.mark) + ": invalid YAML: " + e.msg +
                     ". Check this line and the one before it: keys of one section need the "
                     "same indentation, and every [ or { needs its closing ] or }.");
  }
  if (document.IsNull()) {
    throw InputError(origin + ": the job spec is empty; see configs/quickstart.yaml for a start.");
  }
  if (!document.IsMap()) {
    throw InputError(place(origin, document.Mark()) +
                     ": the job spec must be a map of sections (`model:`, `training:`, ...).");
  }
  return document;
}

using Sources = std::map<std::string, std::string>;  // key path -> the file that set it

// A document and the file each of its values came from.
struct Layer {
  YAML::Node root;
  Sources sources;
};

std::string source_of(const Sources& sources, std::string path) {
  for (;;) {
    if (auto it = sources.find(path); it != sources.end()) return it->second;
    if (path.empty()) return "";
    const size_t dot = path.rfind('.');
    path.resize(dot == std::string::npos ? 0 : dot);
  }
}

// `to` gets `from`'s sources for the value at `path` and everything under it.
void copy_sources(const Sources& from, const std::string& path, Sources& to) {
  to[path] = source_of(from, path);
  for (auto it = from.upper_bound(path); it != from.end(); ++it) {
    if (it->first.compare(0, path.size() + 1, path + ".") != 0) break;
    to.insert(*it);
  }
}

std::string child_path(const std::string& path, const YAML::Node& key) {
  const std::string name = key.IsScalar() ? key.Scalar() : "?";
  return path.empty() ? name : path + "." + name;
}

// `over`'s map `o` merged onto `base`'s map `b` at `path`: a new map whose keys keep their
// order (base's first) and their nodes, so messages still point into the right file.
YAML::Node merge_maps(const Layer& base, const Layer& over, const std::string& path,
                      const YAML::Node& b, const YAML::Node& o, Sources& out) {
  YAML::Node merged(YAML::NodeType::Map);
  std::vector<bool> used(o.size(), false);
  for (auto bit = b.begin(); bit != b.end(); ++bit) {
    const std::string child = child_path(path, bit->first);
    size_t index = 0;
    auto oit = o.begin();
    for (; oit != o.end(); ++oit, ++index) {
      if (!used[index] && bit->first.IsScalar() && oit->first.IsScalar() &&
          oit->first.Scalar() == bit->first.Scalar()) {
        break;
      }
    }
    if (oit == o.end()) {
      merged.force_insert(bit->first, bit->second);
      copy_sources(base.sources, child, out);
      continue;
    }
    used[index] = true;
    if (bit->second.IsMap() && oit->second.IsMap()) {
      merged.force_insert(oit->first, merge_maps(base, over, child, bit->second, oit->second, out));
      out[child] = source_of(over.sources, child);
    } else {
      merged.force_insert(oit->first, oit->second);
      copy_sources(over.sources, child, out);
    }
  }
  size_t index = 0;
  for (auto oit = o.begin(); oit != o.end(); ++oit, ++index) {
    if (used[index]) continue;
    merged.force_insert(oit->first, oit->second);
    copy_sources(over.sources, child_path(path, oit->first), out);
  }
  return merged;
}

Layer merge(const Layer& base, const Layer& over) {
  Layer out;
  out.sources[""] = source_of(over.sources, "");
  out.root = merge_maps(base, over, "", base.root, over.root, out.sources);
  return out;
}

// The file's own document without its `include` key.
YAML::Node without_include(const YAML::Node& root) {
  YAML::Node out(YAML::NodeType::Map);
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (!(it->first.IsScalar() && it->first.Scalar() == kInclude)) {
      out.force_insert(it->first, it->second);
    }
  }
  return out;
}

struct IncludeRef {
  std::string text;
  YAML::Mark mark;
};

// The file names the `include` value lists (a string or a list of strings).
std::vector<IncludeRef> include_list(const YAML::Node& value, const std::string& file) {
  std::vector<IncludeRef> out;
  auto bad = [&](const YAML::Node& at) {
    fail(place(file, at.Mark()), kInclude,
         "expected a file name (`include: base.yaml`) or a list of them "
         "(`include: [model.yaml, cluster.yaml]`).");
  };
  if (value.IsScalar() && !value.Scalar().empty()) return {{value.Scalar(), value.Mark()}};
  if (!value.IsSequence() || value.size() == 0) bad(value);
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].IsScalar() || value[i].Scalar().empty()) bad(value[i]);
    out.push_back({value[i].Scalar(), value[i].Mark()});
  }
  return out;
}

class Composer {
 public:
  Composer(Locations& locations, const EnvLookup& env) : locations_(locations), env_(env) {}
  Layer load(const SpecSource& source);

 private:
  Layer load_include(const SpecSource& from, const IncludeRef& ref);
  std::string chain_text(const std::string& last) const;

  Locations& locations_;
  const EnvLookup& env_;
  std::vector<std::string> names_;  // the include chain, outermost first
  std::vector<fs::path> files_;     // the same, as canonical paths (cycle detection)
};

std::string Composer::chain_text(const std::string& last) const {
  return "include chain: " + join(names_, " -> ") + " -> " + last;
}

Layer Composer::load(const SpecSource& source) {
  YAML::Node root = parse_document(source.text, source.name);
  expand_tree(root, "", env_, Locations(source.name));
  locations_.set_dir(source.name, source.dir);
  // Looked up through a const Node: operator[] on a mutable one would add the key.
  const YAML::Node includes = static_cast<const YAML::Node&>(root)[kInclude];
  Layer own{includes ? without_include(root) : root, {{"", source.name}}};
  if (!includes) return own;
  names_.push_back(source.name);
  files_.push_back(source.file ? fs::weakly_canonical(*source.file) : fs::path());
  std::optional<Layer> base;
  for (const IncludeRef& ref : include_list(includes, source.name)) {
    Layer next = load_include(source, ref);
    base = base ? merge(*base, next) : std::move(next);
  }
  names_.pop_back();
  files_.pop_back();
  return merge(*base, own);
}

Layer Composer::load_include(const SpecSource& from, const IncludeRef& ref) {
  const std::string where = place(from.name, ref.mark);
  fs::path path;
  try {
    path = expand_home(ref.text, env_);
  } catch (const InputError& e) {
    fail(where, kInclude, e.what());
  }
  const fs::path file = (path.is_absolute() ? path : from.dir / path).lexically_normal();
  const std::string name =
      path.is_absolute() ? file.string()
                         : (fs::path(from.name).parent_path() / path).lexically_normal().string();
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(file, ec);
  for (const fs::path& seen : files_) {
    if (!ec && seen == canonical) {
      fail(where, kInclude, "includes itself (" + chain_text(name) + "); remove one of them.");
    }
  }
  std::string text;
  try {
    text = RegularFile(file, "included spec file").read_all(kMaxSpecBytes);
  } catch (const InputError& e) {
    fail(where, kInclude,
         std::string(e.what()) + " (" + chain_text(name) +
             "; an include is resolved against the including file's directory, " +
             from.dir.string() + ").");
  }
  return load({text, name, file.parent_path(), file});
}

}  // namespace

YAML::Node compose_spec(const SpecSource& source, Locations& locations, const EnvLookup& env) {
  Composer composer(locations, env);
  Layer layer = composer.load(source);
  for (const auto& [path, name] : layer.sources) locations.set_file(path, name);
  return layer.root;
}

}  // namespace trainctl::config::detail
