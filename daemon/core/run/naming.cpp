#include "daemon/core/run/naming.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>

namespace hwfarm::run {
namespace {

bool plain(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

// Names for `bases` (normalized), distinct from each other and from
// `taken`: a base used once stays as it is, a base used k times becomes
// base_0 .. base_{k-1} in order, skipping indices whose name is taken.
std::vector<std::string> distinct(const std::vector<std::string>& bases, std::set<std::string>& taken) {
  std::map<std::string, int> uses;
  for (const auto& b : bases) ++uses[b];
  // Unique names first, so an indexed name never takes one of theirs.
  std::vector<std::string> out(bases.size());
  for (size_t i = 0; i < bases.size(); ++i)
    if (uses[bases[i]] == 1 && taken.insert(bases[i]).second) out[i] = bases[i];
  std::map<std::string, int> next;
  for (size_t i = 0; i < bases.size(); ++i) {
    if (!out[i].empty()) continue;
    int& k = next[bases[i]];
    std::string name;
    do name = bases[i] + "_" + std::to_string(k++);
    while (!taken.insert(name).second);
    out[i] = name;
  }
  return out;
}

} // namespace

std::string normalizeName(std::string_view name, std::string_view fallback) {
  std::string out;
  for (char c : name) {
    if (plain(c)) out += c;
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty()) return std::string(fallback);
  if (out.size() <= kMaxNameBytes) return out;
  // Too long for a file name once joined with another (a protocol name
  // may have 256 bytes): its start and a hash of the whole name, the same
  // every time, and two long names that share a start stay apart.
  uint32_t h = 2166136261u; // FNV-1a of the name as given
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return out.substr(0, kMaxNameBytes - 9) + "_" + hex;
}

RunNames runNames(const std::vector<std::string>& targets, const std::optional<std::string>& reference) {
  std::vector<std::string> bases;
  for (const auto& t : targets) bases.push_back(normalizeName(t, "target"));
  std::set<std::string> taken;
  RunNames names;
  names.targets = distinct(bases, taken);
  if (reference) {
    std::string base = normalizeName(*reference, "reference");
    // "<base>_ref", or "<base>_<k>_ref" if a target already has that name.
    std::string name = base + "_ref";
    for (int k = 0; taken.count(name); ++k) name = base + "_" + std::to_string(k) + "_ref";
    names.reference = name;
  }
  return names;
}

std::vector<std::string> imageNames(const std::vector<std::string>& images) {
  std::vector<std::string> bases;
  for (const auto& i : images) {
    // A path's file name, without an image extension.
    std::string_view name(i);
    if (size_t slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
    for (std::string_view ext : {".elf", ".bin", ".hex", ".img"})
      if (name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext) name.remove_suffix(ext.size());
    bases.push_back(normalizeName(name, "image"));
  }
  std::set<std::string> taken;
  return distinct(bases, taken);
}

std::string tracePath(std::string_view image, std::string_view target) {
  return "traces/" + std::string(image) + "__" + std::string(target) + ".txt";
}

std::string flashLogPath(std::string_view image, std::string_view target) {
  return "logs/flash__" + std::string(image) + "__" + std::string(target) + ".txt";
}

std::string goldenPath(std::string_view target) { return "golden_results__" + std::string(target) + ".json"; }

std::string outputDir(std::string_view image, std::string_view target) {
  return "outputs/" + std::string(image) + "__" + std::string(target);
}

std::vector<std::string> outputFileNames(const std::vector<std::string>& keys) {
  std::vector<std::string> bases;
  for (const auto& key : keys) {
    size_t dot = key.rfind('.');
    std::string_view k(key);
    std::string case_part = normalizeName(dot == std::string::npos ? k : k.substr(0, dot), "case");
    std::string output_part = normalizeName(dot == std::string::npos ? std::string_view() : k.substr(dot + 1), "output");
    bases.push_back(case_part + "." + output_part);
  }
  std::set<std::string> taken;
  std::vector<std::string> names = distinct(bases, taken);
  for (auto& n : names) n += ".npy";
  return names;
}

} // namespace hwfarm::run
