#include "daemon/cli/run_manifest.h"

#include <filesystem>
#include <set>

#include <boost/json.hpp>
#include <toml++/toml.h>

namespace hwfarm::cli {
namespace {

namespace json = boost::json;

std::string at(const std::string& file, const toml::source_region& where) {
  return file + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
}

// "FILE:LINE:COL: key: message" for `node`.
bool fail(std::string* error, const std::string& file, const toml::node& node, const std::string& key,
          const std::string& message) {
  *error = at(file, node.source()) + ": " + key + ": " + message;
  return false;
}

bool parseText(std::string_view text, const std::string& file, toml::table* root, std::string* error) {
  if (text.size() > kMaxManifestBytes) {
    *error = file + ":1:1: the file is over " + std::to_string(kMaxManifestBytes) + " bytes";
    return false;
  }
  try {
    *root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    *error = at(file, e.source()) + ": " + std::string(e.description());
    return false;
  }
  return true;
}

// `root.threshold`'s tables appended to `rules`.
bool thresholdRules(const toml::table& root, const std::string& file, json::array* rules, std::string* error) {
  const toml::node* node = root.get("threshold");
  if (!node) return true;
  const toml::array* list = node->as_array();
  if (!list || !list->is_array_of_tables())
    return fail(error, file, *node, "threshold", "expected [[threshold]] tables");
  if (list->size() > 1000) return fail(error, file, *node, "threshold", "more than 1000 rules");
  for (const toml::node& item : *list) {
    json::object rule;
    for (auto&& [k, v] : *item.as_table()) {
      std::string name = "threshold." + std::string(k.str());
      if (v.is_string()) {
        if (v.as_string()->get().size() > kMaxManifestString) return fail(error, file, v, name, "too long");
        rule[k.str()] = v.as_string()->get();
      } else if (v.is_boolean()) {
        rule[k.str()] = v.as_boolean()->get();
      } else if (v.is_number()) {
        rule[k.str()] = *v.value<double>();
      } else {
        return fail(error, file, v, name, "expected a string, number or boolean");
      }
    }
    rules->push_back(std::move(rule));
  }
  return true;
}

// A string value of at most kMaxManifestString bytes, not empty.
bool stringOf(const toml::node& v, const std::string& file, const std::string& key, std::string* out,
              std::string* error) {
  if (!v.is_string()) return fail(error, file, v, key, "expected a string");
  const std::string& s = v.as_string()->get();
  if (s.empty() || s.size() > kMaxManifestString)
    return fail(error, file, v, key, "expected 1 to " + std::to_string(kMaxManifestString) + " bytes");
  *out = s;
  return true;
}

std::string resolved(const std::string& manifest, const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  std::filesystem::path dir = std::filesystem::path(manifest).parent_path();
  return (dir / path).lexically_normal().string();
}

bool image(const toml::table& t, const std::string& file, SuiteImage* out, std::string* error) {
  for (auto&& [k, v] : t) {
    std::string key = "image." + std::string(k.str());
    std::string value;
    if (k.str() != "name" && k.str() != "path" && k.str() != "reference_image" && k.str() != "golden")
      return fail(error, file, v, key, "unknown key (name, path, reference_image, golden)");
    if (!stringOf(v, file, key, &value, error)) return false;
    if (k.str() == "name") out->name = value;
    else if (k.str() == "path") out->path = resolved(file, value);
    else if (k.str() == "reference_image") out->reference_image = resolved(file, value);
    else out->golden = resolved(file, value);
  }
  if (out->path.empty()) return fail(error, file, t, "image", "needs a path");
  if (out->name.empty()) out->name = std::filesystem::path(out->path).filename().string();
  if (out->name.empty())
    return fail(error, file, t, "image", "path \"" + out->path + "\" names a directory, not an image file");
  return true;
}

} // namespace

bool parseThresholdsFile(std::string_view text, const std::string& file, json::array* rules, std::string* error) {
  toml::table root;
  if (!parseText(text, file, &root, error)) return false;
  for (auto&& [key, node] : root)
    if (key.str() != "threshold")
      return fail(error, file, node, std::string(key.str()), "unknown table or key (expected [[threshold]] tables)");
  return thresholdRules(root, file, rules, error);
}

bool parseSuiteManifest(std::string_view text, const std::string& file, SuiteManifest* out, std::string* error) {
  toml::table root;
  if (!parseText(text, file, &root, error)) return false;
  *out = SuiteManifest{};
  for (auto&& [k, v] : root) {
    std::string key(k.str());
    std::string value;
    if (key == "threshold") continue;
    if (key == "image") {
      const toml::array* list = v.as_array();
      if (!list || !list->is_array_of_tables()) return fail(error, file, v, key, "expected [[image]] tables");
      if (list->size() > kMaxSuiteImages)
        return fail(error, file, v, key, "more than " + std::to_string(kMaxSuiteImages) + " images");
      for (const toml::node& item : *list) {
        SuiteImage img;
        if (!image(*item.as_table(), file, &img, error)) return false;
        out->images.push_back(std::move(img));
      }
    } else if (key == "deadline_s") {
      std::optional<double> d = v.is_number() ? v.value<double>() : std::nullopt;
      if (!d || !(*d > 0 && *d <= 86400)) return fail(error, file, v, key, "expected seconds in (0, 86400]");
      out->deadline_s = *d;
    } else if (key == "suite" || key == "mode" || key == "reference") {
      if (!stringOf(v, file, key, &value, error)) return false;
      if (key == "mode" && value != "shard" && value != "each")
        return fail(error, file, v, key, "expected \"shard\" or \"each\"");
      if (key == "reference" && value != "qemu" && value != "none" && value != "golden" &&
          value.rfind("golden:", 0) != 0)
        return fail(error, file, v, key, "expected \"qemu\", \"none\", \"golden\" or \"golden:DIR\"");
      if (key == "reference" && value.rfind("golden:", 0) == 0) {
        if (value.size() == 7) return fail(error, file, v, key, "golden: needs a directory");
        value = "golden:" + resolved(file, value.substr(7));
      }
      (key == "suite" ? out->suite : key == "mode" ? out->mode.emplace() : out->reference.emplace()) = value;
    } else {
      return fail(error, file, v, key, "unknown key (suite, mode, reference, deadline_s, [[image]], [[threshold]])");
    }
  }
  if (out->images.empty()) {
    *error = file + ":1:1: image: a suite needs at least one [[image]]";
    return false;
  }
  return thresholdRules(root, file, &out->thresholds, error);
}

} // namespace hwfarm::cli
