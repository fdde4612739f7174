// hwfarmctl results publish, and lease run --results: a test harness's
// results files (JUnit XML, twister.json) and artifacts sent to the lease as
// one tar archive (POST /v1/leases/{id}/results, docs/harness-results.md),
// published as a run of kind external.
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <boost/json.hpp>

#include "daemon/cli/results_publish.h"
#include "daemon/cli/run_follow.h"
#include "daemon/core/run/tar.h"

namespace json = boost::json;
namespace fs = std::filesystem;

namespace hwfarm::cli {
namespace {

// A name part the daemon takes (letters, digits, "_.-", not starting with '.').
std::string plainPart(std::string part) {
  for (char& c : part)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  if (part.empty() || part[0] == '.') part.insert(part.begin(), '_');
  return part.substr(0, 200);
}

// The bytes a file takes in the archive: its header(s) and its padded content.
uint64_t tarSize(const std::string& name, uint64_t size) {
  return run::tarHeader({name, size, 0, 0644}).size() + size + run::tarPadding(size);
}

// `paths` without the ones naming a file an earlier one names (the same
// canonical path); a path that cannot be resolved stays, to fail its read.
std::vector<std::string> distinct(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& p : paths) {
    std::error_code ec;
    fs::path canonical = fs::canonical(p, ec);
    if (seen.insert(ec ? p : canonical.string()).second) out.push_back(p);
  }
  return out;
}

void addFile(std::string& archive, const std::string& name, const std::string& bytes) {
  archive += run::tarHeader({name, bytes.size(), 0, 0644});
  archive += bytes;
  archive.append(run::tarPadding(bytes.size()), '\0');
}

} // namespace

std::vector<std::string> expandGlob(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

int publishResults(Session& s, const std::string& lease, const PublishOptions& o, std::string* state) {
  std::string archive, error;
  std::set<std::string> names;
  auto unique = [&](std::string name) {
    for (int n = 2; !names.insert(name).second; ++n) {
      size_t slash = name.rfind('/');
      name = name.substr(0, slash + 1) + std::to_string(n) + "-" + name.substr(slash + 1);
    }
    return name;
  };
  // A file named twice (two globs matching it, a path given twice) goes once.
  std::vector<std::string> files = distinct(o.files);
  if (files.empty()) {
    s.err << "hwfarmctl: no results file to publish\n";
    return kUsage;
  }
  // What goes, as (path, name in the archive): every file checked and sized
  // before any is read.
  std::vector<std::pair<std::string, std::string>> members;
  for (const auto& f : files) members.emplace_back(f, unique("results/" + plainPart(fs::path(f).filename().string())));
  size_t artifacts = 0;
  std::vector<std::string> artifact_files;
  for (const auto& path : o.artifacts) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      std::vector<fs::path> found;
      for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec))
        if (it->is_regular_file(ec) && !it->is_symlink(ec)) found.push_back(it->path());
      std::sort(found.begin(), found.end());
      for (const auto& file : found) {
        std::string name = "artifacts";
        for (const auto& part : fs::relative(file, path, ec)) name += "/" + plainPart(part.string());
        artifact_files.push_back(file.string());
        members.emplace_back(file.string(), name);
      }
    } else {
      artifact_files.push_back(path);
      members.emplace_back(path, "artifacts/" + plainPart(fs::path(path).filename().string()));
    }
  }
  // An artifact named twice (a file and its folder, a folder given twice) goes once.
  {
    std::vector<std::string> kept = distinct(artifact_files);
    std::set<std::string> keep(kept.begin(), kept.end());
    std::vector<std::pair<std::string, std::string>> m(members.begin(), members.begin() + files.size());
    for (size_t i = files.size(); i < members.size(); ++i)
      if (keep.erase(members[i].first)) m.emplace_back(members[i].first, unique(members[i].second));
    members = std::move(m);
    artifacts = members.size() - files.size();
  }
  uint64_t total = run::tarEnd().size();
  for (size_t i = 0; i < members.size(); ++i) {
    struct stat st {};
    const std::string& path = members[i].first;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      s.err << "hwfarmctl: " << (i < files.size() ? "" : "--artifacts: ") << path << ": not a regular file\n";
      return kUsage;
    }
    total += tarSize(members[i].second, static_cast<uint64_t>(st.st_size));
  }
  if (total > kMaxPublishBytes) {
    s.err << "hwfarmctl: the results and artifacts come to " << total << " bytes, more than the "
          << kMaxPublishBytes / (1024 * 1024) << " MiB a publish may send (hwfarmd's default runs.max_artifact_bytes)"
          << "; nothing was published\n";
    return kUsage;
  }
  archive.reserve(total);
  for (size_t i = 0; i < members.size(); ++i) {
    std::string bytes;
    if (!readLocalFile(members[i].first, i < files.size() ? "results file" : "artifact", &bytes, &error)) {
      s.err << "hwfarmctl: " << error << "\n";
      return kUsage;
    }
    addFile(archive, members[i].second, bytes);
  }
  archive += run::tarEnd();
  std::string target = "/v1/leases/" + lease + "/results?name=" + percentEncode(o.name.empty() ? "results" : o.name);
  if (!o.commit.empty()) target += "&commit=" + percentEncode(o.commit);
  if (!o.board.empty()) target += "&board=" + percentEncode(o.board);
  int code = kOk;
  auto run = s.call("POST", target, archive, &code, 300, 0, nullptr, "application/x-tar");
  if (!run) return code;
  if (state && run->is_object()) *state = runField(run->as_object(), "state");
  if (s.json) {
    s.out << json::serialize(*run) << "\n";
    return kOk;
  }
  const json::object& r = run->as_object();
  if (!s.quiet) {
    const json::array* attempts = r.contains("attempts") ? r.at("attempts").if_array() : nullptr;
    if (attempts && !attempts->empty() && attempts->front().is_object()) {
      const json::object& a = attempts->front().as_object();
      if (const json::object* n = a.contains("counts") ? a.at("counts").if_object() : nullptr)
        s.out << text(n->at("cases")) << " case(s): " << text(n->at("passed")) << " passed, " << text(n->at("failed"))
              << " failed, " << text(n->at("errors")) << " error(s), " << text(n->at("skipped")) << " skipped\n";
      if (const json::array* cases = a.contains("cases") ? a.at("cases").if_array() : nullptr)
        for (const auto& c : *cases) {
          const json::object* co = c.if_object();
          if (!co) continue;
          std::string outcome = runField(*co, "outcome");
          if (outcome != "fail" && outcome != "error") continue;
          std::string rule = runField(*co, "infrastructure_rule");
          s.out << "  " << outcome << ": " << runField(*co, "name")
                << (rule.empty() ? " (test)" : " (infrastructure, rule \"" + rule + "\")") << ": "
                << runField(*co, "message").substr(0, 200) << "\n";
        }
    }
  }
  s.out << "run " << runField(r, "id") << ": " << runField(r, "state");
  if (r.contains("reason") && !runField(r, "reason").empty()) s.out << " (" << runField(r, "reason") << ")";
  s.out << "\n";
  if (!s.quiet) s.err << "hwfarmctl: published " << files.size() << " results file(s) and " << artifacts << " artifact(s)\n";
  return kOk;
}

int resultsPublishCommand(Session& s, const Args& a) {
  std::string lease = a.value("--lease").value_or(env("HWFARM_LEASE_ID"));
  if (lease.empty()) {
    s.err << "hwfarmctl: results publish needs --lease ID (or $HWFARM_LEASE_ID, which lease run sets)\n";
    return kUsage;
  }
  if (int code = resolveLease(s, lease, &lease); code != kOk) return code;
  PublishOptions o;
  o.files = a.positional();
  o.artifacts = a.values("--artifacts");
  o.name = a.value("--name").value_or("results");
  o.commit = a.value("--commit").value_or(env("GIT_COMMIT"));
  o.board = a.value("--board").value_or("");
  return publishResults(s, lease, o);
}

} // namespace hwfarm::cli
