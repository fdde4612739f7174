#include "daemon/cli/golden_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "daemon/core/run/golden.h"
#include "daemon/core/run/npy.h"

namespace hwfarm::cli {
namespace {

namespace fs = std::filesystem;

constexpr uintmax_t kMaxNpyBytes = 256u << 20; // one output file

std::vector<std::string> sortedEntries(const fs::path& dir, bool dirs) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (dirs ? it->is_directory(ec) : it->is_regular_file(ec)) out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

bool findGoldenDir(const std::string& dir, const std::string& image, std::string* found, std::string* error) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    *error = "golden:" + dir + ": not a directory";
    return false;
  }
  fs::path root = fs::is_directory(fs::path(dir) / "outputs", ec) ? fs::path(dir) / "outputs" : fs::path(dir);
  std::vector<std::string> all, refs;
  for (const auto& name : sortedEntries(root, true)) {
    if (name.rfind(image + "__", 0) != 0) continue;
    all.push_back(name);
    if (name.size() > 4 && name.compare(name.size() - 4, 4, "_ref") == 0) refs.push_back(name);
  }
  const std::vector<std::string>& pick = refs.empty() ? all : refs;
  if (pick.size() == 1) {
    *found = (root / pick.front()).string();
    return true;
  }
  if (pick.empty()) {
    *error = "golden:" + dir + ": no outputs for image " + image + " (expected " + (root / (image + "__<target>_ref")).string() + ")";
    return false;
  }
  std::string list;
  for (const auto& p : pick) list += (list.empty() ? "" : ", ") + p;
  *error = "golden:" + dir + ": image " + image + " has several output directories (" + list + ") in " + root.string() +
           ": give the one to use as the image's golden in a suite manifest";
  return false;
}

bool readGoldenDir(const std::string& dir, std::string* text, std::string* error) {
  std::vector<run::GoldenOutput> outputs;
  for (const auto& name : sortedEntries(dir, false)) {
    run::GoldenOutput o;
    if (!run::goldenFileName(name, &o.case_name, &o.output)) continue;
    std::string path = (fs::path(dir) / name).string();
    std::error_code ec;
    if (fs::file_size(path, ec) > kMaxNpyBytes) {
      *error = path + ": over " + std::to_string(kMaxNpyBytes >> 20) + " MiB";
      return false;
    }
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    Result<run::NpyArray> array = run::parseNpy(bytes);
    if (!array) {
      *error = path + ": " + array.status().message();
      return false;
    }
    o.dtype = array->dtype;
    o.values = std::move(array->values);
    outputs.push_back(std::move(o));
  }
  if (outputs.empty()) {
    *error = dir + ": no <case>.<output>.npy files";
    return false;
  }
  *text = run::goldenText(outputs);
  return true;
}

} // namespace hwfarm::cli
