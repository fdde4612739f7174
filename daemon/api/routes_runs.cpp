// The run routes (docs/api.md, "Runs"): images uploaded into a lease's store,
// runs started on the lease's boards, their records and artifacts.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/api/routes.h"
#include "daemon/services/image_store.h"

namespace hwfarm::api {

using config::Role;

namespace {

// Golden outputs (result-protocol text a golden reference parses) are
// stored beside the images as <sha256>.golden: never an image extension, so
// no such file is ever flashed or run.
constexpr const char* kGoldenExtension = ".golden";

// <sha256><ext>, as the image store names what it keeps: an image's known
// extension, or (golden) ".golden".
bool isStoredName(const std::string& s, bool golden) {
  if (s.size() < 65) return false;
  for (size_t i = 0; i < 64; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(s[i])) || std::isupper(static_cast<unsigned char>(s[i])))
      return false;
  std::string ext = s.substr(64);
  if (golden) return ext == kGoldenExtension;
  for (const auto& known : imageExtensions())
    if (ext == known) return true;
  return false;
}

bool endsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

std::string contentTypeOf(const std::string& path) {
  auto ends = [&](const char* e) {
    std::string_view p(path), x(e);
    return p.size() >= x.size() && p.substr(p.size() - x.size()) == x;
  };
  if (ends(".json")) return "application/json";
  if (ends(".xml")) return "application/xml";
  if (ends(".txt")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

// One entry of a run request's "images": its files in the image store
// `dir` of lease `lease_id`, or Code::invalid_argument saying what is wrong.
Result<RunImage> runImage(const json::value& item, const std::string& lease_id, const std::string& dir) {
  const char* shape =
      "images: each is {\"image\": \"<sha256><ext>\", \"name\": \"<file name>\", \"reference_image\": "
      "\"<sha256><ext>\", \"golden\": \"<sha256>.golden\"} (name, reference_image and golden optional)";
  const json::object* img = item.if_object();
  if (!img) return Status::error(Code::invalid_argument, shape);
  RunImage out;
  std::optional<std::string> name;
  for (const auto& [key, value] : *img) {
    if (!value.is_string() || (key != "image" && key != "name" && key != "reference_image" && key != "golden"))
      return Status::error(Code::invalid_argument, shape);
    std::string file(value.as_string());
    if (key == "name") {
      name = file;
      continue;
    }
    // A file of this lease's store: its path.
    bool golden = key == "golden";
    std::string at = key == "image" ? "images: " : "images: " + std::string(key) + " ";
    if (!isStoredName(file, golden))
      return Status::error(Code::invalid_argument,
                           at + echoed(file) + " is not an uploaded " + (golden ? "golden file" : "image") +
                               " (POST /v1/leases/" + lease_id + "/images" + (golden ? "?name=IMAGE.golden" : "") +
                               " first)");
    std::string path = dir + "/" + file;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return Status::error(Code::invalid_argument, at + file + " was not uploaded to lease " + lease_id);
    (key == "image" ? out.path : golden ? out.golden_path : out.reference_path) = path;
  }
  if (out.path.empty()) return Status::error(Code::invalid_argument, shape);
  out.name = name ? *name : std::filesystem::path(out.path).filename().string();
  return out;
}

} // namespace

std::optional<BodyPlan> Handlers::planImageUpload(Call& c, const std::string& id) {
  const lease::Lease* l = ownedLease(c, id);
  if (!l) return std::nullopt;
  return planImageStore(c, *l, endsWith(uploadName(c.target), kGoldenExtension));
}

void Handlers::uploadImage(Call& c, const std::string& id) {
  const lease::Lease* l = ownedLease(c, id);
  if (!l) return;
  const auto& upload = c.request.upload;
  if (!upload)
    return c.respond(jsonError(400, "invalid_request",
                               "expected the image as an application/octet-stream body (hwfarmctl run uploads it)"));
  std::string name = uploadName(c.target);
  Result<std::string> ext = endsWith(name, kGoldenExtension) ? Result<std::string>(std::string(kGoldenExtension))
                                                              : imageExtension(name);
  if (!ext) return c.respond(jsonError(400, "invalid_request", ext.status().message()));
  Result<std::string> stored = storeUpload(upload->path, upload->sha256, boards_.imageDir(l->id), *ext);
  if (!stored) return c.respond(jsonError(500, "storage_error", "cannot store the upload: " + stored.status().message()));
  c.respond(ok(json::object{{"image", std::filesystem::path(*stored).filename().string()},
                            {"sha256", upload->sha256},
                            {"bytes", upload->bytes},
                            {"name", sanitizeImageName(name)}},
               201));
}

void Handlers::startRun(Call& c, const std::string& id) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  const lease::Lease* l = ownedLease(c, id);
  if (!l) return;
  std::string error;
  auto object = parseObject(c.request.body, &error);
  if (!object) return c.respond(jsonError(400, "invalid_request", error));
  RunSpec spec;
  spec.deadline_ms = static_cast<int64_t>(state_.config->runs.default_deadline_s * 1000);
  for (const auto& [key, value] : *object) {
    if (key == "images") {
      if (!value.is_array() || value.as_array().empty() || value.as_array().size() > 1000)
        return c.respond(jsonError(400, "invalid_request", "images: expected 1 to 1000 images"));
      for (const auto& item : value.as_array()) {
        Result<RunImage> image = runImage(item, l->id, boards_.imageDir(l->id));
        if (!image) return c.respond(jsonError(400, "invalid_request", image.status().message()));
        spec.images.push_back(std::move(*image));
      }
    } else if (key == "mode") {
      if (!value.is_string() || (value.as_string() != "shard" && value.as_string() != "each"))
        return c.respond(jsonError(400, "invalid_request", "mode: expected \"shard\" or \"each\""));
      spec.mode = value.as_string() == "each" ? RunSpec::Mode::each : RunSpec::Mode::shard;
    } else if (key == "reference") {
      if (!value.is_string() ||
          (value.as_string() != "qemu" && value.as_string() != "none" && value.as_string() != "golden"))
        return c.respond(jsonError(400, "invalid_request", "reference: expected \"qemu\", \"golden\" or \"none\""));
      spec.reference = value.as_string() != "none";
      spec.golden = value.as_string() == "golden";
    } else if (key == "targets" || key == "boards") {
      // "boards" is the older name of "targets".
      if (!spec.boards.empty())
        return c.respond(jsonError(400, "invalid_request", "targets: give \"targets\" or \"boards\", not both"));
      if (!value.is_array() || value.as_array().size() > 64)
        return c.respond(jsonError(400, "invalid_request",
                                   std::string(key) + ": expected an array of at most 64 board names, board types or \"qemu\""));
      for (const auto& b : value.as_array()) {
        if (!b.is_string() || b.as_string().empty() || b.as_string().size() > 128)
          return c.respond(jsonError(400, "invalid_request", std::string(key) + ": expected board names, board types or \"qemu\""));
        spec.boards.emplace_back(b.as_string());
      }
    } else if (key == "retry") {
      if (!value.is_bool()) return c.respond(jsonError(400, "invalid_request", "retry: expected true or false"));
      spec.retry = value.as_bool();
    } else if (key == "thresholds") {
      if (!value.is_array() || value.as_array().size() > 1000)
        return c.respond(jsonError(400, "invalid_request", "thresholds: expected an array of at most 1000 rules"));
      for (size_t i = 0; i < value.as_array().size(); ++i) {
        std::string at = "thresholds[" + std::to_string(i) + "]";
        const json::object* rule = value.as_array()[i].if_object();
        if (!rule) return c.respond(jsonError(400, "invalid_request", at + ": expected an object"));
        run::ThresholdRule t;
        for (const auto& [k, value_of_k] : *rule) {
          const json::value& v = value_of_k; // lambdas may not capture a structured binding (clang 14)
          auto text = [&](std::optional<std::string>& out) {
            if (!v.is_string() || v.as_string().empty() || v.as_string().size() > 256) return false;
            out = std::string(v.as_string());
            return true;
          };
          auto number = [&](std::optional<double>& out, double lo, double hi) {
            if (!v.is_number() || v.to_number<double>() < lo || v.to_number<double>() > hi) return false;
            out = v.to_number<double>();
            return true;
          };
          auto flag = [&](std::optional<bool>& out) {
            if (!v.is_bool()) return false;
            out = v.as_bool();
            return true;
          };
          bool good = k == "image"              ? text(t.image)
                      : k == "case"             ? text(t.case_name)
                      : k == "output"           ? text(t.output)
                      : k == "expected_pcc"     ? number(t.expected_pcc, -1, 1)
                      : k == "atol"             ? number(t.atol, 0, 1e300)
                      : k == "rtol"             ? number(t.rtol, 0, 1e300)
                      : k == "equal_nan"        ? flag(t.equal_nan)
                      : k == "require_allclose" ? flag(t.require_allclose)
                      : k == "ignore"           ? flag(t.ignore)
                                                : false;
          if (!good)
            return c.respond(jsonError(
                400, "invalid_request",
                at + "." + echoed(k) +
                    ": expected image, case, output (names), expected_pcc (-1 to 1), atol, rtol (>= 0), "
                    "equal_nan, require_allclose, ignore (true or false)"));
        }
        spec.thresholds.push_back(std::move(t));
      }
    } else if (key == "suite") {
      if (!value.is_string() || value.as_string().empty() || value.as_string().size() > 256)
        return c.respond(jsonError(400, "invalid_request", "suite: expected a name of 1 to 256 bytes"));
      spec.suite = std::string(value.as_string());
    } else if (key == "commit") {
      // A part of the run's key in the upload bucket (docs/uploads.md).
      std::string_view v = value.is_string() ? std::string_view(value.as_string()) : std::string_view();
      if (v.empty() || v.size() > 128 || v == "." || v == ".." || v.find('/') != v.npos ||
          config::findControlCharacter(v) != v.npos)
        return c.respond(jsonError(400, "invalid_request",
                                   "commit: expected 1 to 128 bytes without \"/\" or control characters"));
      spec.commit = std::string(v);
    } else if (key == "deadline_s") {
      if (!value.is_number() || value.to_number<double>() <= 0 || value.to_number<double>() > 86400)
        return c.respond(jsonError(400, "invalid_request", "deadline_s: expected a number of seconds in (0, 86400]"));
      spec.deadline_ms = static_cast<int64_t>(value.to_number<double>() * 1000);
    } else {
      return c.respond(jsonError(400, "invalid_request",
                                 "unknown key " + echoed(key) +
                                     " (images, mode, reference, targets, deadline_s, thresholds, retry, suite, commit)"));
    }
  }
  if (spec.images.empty()) return c.respond(jsonError(400, "invalid_request", "images: expected 1 to 1000 images"));
  for (const auto& img : spec.images) {
    std::string which = "images: " + img.name + ": ";
    if (spec.golden && img.golden_path.empty())
      return c.respond(jsonError(400, "invalid_request",
                                 which + "reference \"golden\" needs a \"golden\" file for every image"));
    if (!spec.golden && !img.golden_path.empty())
      return c.respond(jsonError(400, "invalid_request", which + "a \"golden\" file needs reference \"golden\""));
    if ((!spec.reference || spec.golden) && !img.reference_path.empty())
      return c.respond(jsonError(400, "invalid_request",
                                 which + "a reference_image needs reference \"qemu\" (the simulator runs it)"));
  }
  // Answered once the run's record is stored (it then starts).
  auto respond = c.respond;
  Status refused = runs_->start(*l, std::move(spec), [this, respond](const Result<std::string>& started) {
    if (!started) return respond(jsonError(500, "storage_error", started.status().message()));
    const RunSummary* run = runs_->find(*started);
    respond(okText(run ? run->json : "{\"id\":\"" + *started + "\"}", 201));
  });
  if (refused.is(Code::busy)) return c.respond(jsonError(429, "too_many_runs", refused.message()));
  if (refused.is(Code::invalid_argument)) return c.respond(jsonError(400, "invalid_request", refused.message()));
  if (!refused.ok()) return c.respond(jsonError(500, "storage_error", refused.message()));
}

void Handlers::listRuns(Call& c) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  json::array list;
  for (const RunSummary* r : runs_->list()) {
    json::object o{{"id", r->id}, {"lease_id", r->lease_id}, {"state", runStateName(r->state)},
                   {"created_ms", r->created_ms}};
    if (r->ended_ms) o["ended_ms"] = r->ended_ms;
    list.push_back(std::move(o));
  }
  c.respond(ok(json::object{{"runs", std::move(list)}}));
}

void Handlers::showRun(Call& c, const std::string& id) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  const RunSummary* r = runs_->find(id);
  if (!r) return c.respond(jsonError(404, "not_found", "no run " + echoed(id)));
  c.respond(okText(r->json));
}

void Handlers::cancelRun(Call& c, const std::string& id) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  const RunSummary* r = runs_->find(id);
  if (!r) return c.respond(jsonError(404, "not_found", "no run " + echoed(id)));
  if (const lease::Lease* l = leases_.scheduler().lease(r->lease_id);
      !hasRole(*c.principal, Role::operator_) && (!l || l->holder.principal != c.principal->name))
    return c.respond(jsonError(403, "forbidden", "run " + id + " is not of a lease of \"" + c.principal->name + "\""));
  Status s = runs_->cancel(id, "cancelled by " + c.principal->name);
  if (s.is(Code::conflict)) return c.respond(jsonError(409, "run_ended", s.message()));
  if (!s.ok()) return c.respond(jsonError(404, "not_found", s.message()));
  c.respond(okText(runs_->find(id)->json));
}

void Handlers::runArtifact(Call& c, const std::string& id, const std::string& path) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  const RunSummary* r = runs_->find(id);
  if (!r) return c.respond(jsonError(404, "not_found", "no run " + echoed(id)));
  // Only what the run wrote: plain relative paths, no dot segments, no
  // hidden files (the simulators' scratch), regular files, no symlink.
  std::string decoded = percentDecode(path);
  bool plain = !decoded.empty() && decoded.size() < 512 && decoded[0] != '/';
  for (size_t start = 0; plain && start <= decoded.size();) {
    size_t slash = decoded.find('/', start);
    std::string part = decoded.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part[0] == '.') plain = false;
    for (char ch : part)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.')) plain = false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (!plain) return c.respond(jsonError(400, "invalid_request", "artifact path " + echoed(decoded) + " is not plain"));
  std::string file = runs_->runDir(id) + "/" + decoded;
  int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (256LL << 20)) {
    if (fd >= 0) ::close(fd);
    return c.respond(jsonError(404, "not_found", "run " + id + " has no artifact " + echoed(decoded)));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(got);
  HttpResponse resp = okText(std::move(bytes));
  resp.content_type = contentTypeOf(decoded);
  c.respond(std::move(resp));
}

} // namespace hwfarm::api
