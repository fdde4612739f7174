// The run routes (docs/api.md, "Runs"): images uploaded into a lease's store,
// runs started on the lease's boards, their records and artifacts.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "daemon/api/routes.h"
#include "daemon/core/run/tar.h"
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

// One entry of a run request's "images": its files in the image store
// `dir` of lease `lease_id`, or Code::invalid_argument saying what is wrong.
Result<run::ImageSpec> runImage(const json::value& item, const std::string& lease_id, const std::string& dir) {
  const char* shape =
      "images: each is {\"image\": \"<sha256><ext>\", \"name\": \"<file name>\", \"reference_image\": "
      "\"<sha256><ext>\", \"golden\": \"<sha256>.golden\"} (name, reference_image and golden optional)";
  const json::object* img = item.if_object();
  if (!img) return Status::error(Code::invalid_argument, shape);
  run::ImageSpec out;
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
  Result<json::object> object = parseObject(c.request.body);
  if (!object) return c.respond(errorResponse(object.status()));
  run::Spec spec;
  spec.deadline_ms = static_cast<int64_t>(state_.config->runs.default_deadline_s * 1000);
  spec.drain_ms = state_.config->runs.drain_ms;
  for (const auto& [key, value] : *object) {
    if (key == "images") {
      if (!value.is_array() || value.as_array().empty() || value.as_array().size() > 1000)
        return c.respond(jsonError(400, "invalid_request", "images: expected 1 to 1000 images"));
      for (const auto& item : value.as_array()) {
        Result<run::ImageSpec> image = runImage(item, l->id, boards_.imageDir(l->id));
        if (!image) return c.respond(jsonError(400, "invalid_request", image.status().message()));
        spec.images.push_back(std::move(*image));
      }
    } else if (key == "mode") {
      if (!value.is_string() || (value.as_string() != "shard" && value.as_string() != "each"))
        return c.respond(jsonError(400, "invalid_request", "mode: expected \"shard\" or \"each\""));
      spec.mode = value.as_string() == "each" ? run::Mode::each : run::Mode::shard;
    } else if (key == "reference") {
      if (!value.is_string() ||
          (value.as_string() != "qemu" && value.as_string() != "none" && value.as_string() != "golden"))
        return c.respond(jsonError(400, "invalid_request", "reference: expected \"qemu\", \"golden\" or \"none\""));
      spec.reference = value.as_string() == "none"     ? run::ReferenceKind::none
                       : value.as_string() == "golden" ? run::ReferenceKind::golden
                                                       : run::ReferenceKind::qemu;
    } else if (key == "targets" || key == "boards") {
      // "boards" is the older name of "targets".
      if (!spec.targets.empty())
        return c.respond(jsonError(400, "invalid_request", "targets: give \"targets\" or \"boards\", not both"));
      if (!value.is_array() || value.as_array().size() > 64)
        return c.respond(jsonError(400, "invalid_request",
                                   std::string(key) + ": expected an array of at most 64 board names, board types or \"qemu\""));
      for (const auto& b : value.as_array()) {
        if (!b.is_string() || b.as_string().empty() || b.as_string().size() > 128)
          return c.respond(jsonError(400, "invalid_request", std::string(key) + ": expected board names, board types or \"qemu\""));
        spec.targets.emplace_back(b.as_string());
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
      // The lab's runs.max_deadline_s bounds it: an image that hangs holds
      // its board and a simulator this long.
      double most = state_.config->runs.max_deadline_s;
      if (!value.is_number() || value.to_number<double>() <= 0 || value.to_number<double>() > most) {
        std::ostringstream bound;
        bound << most;
        return c.respond(jsonError(400, "invalid_request",
                                   "deadline_s: expected a number of seconds in (0, " + bound.str() +
                                       "] (this lab's runs.max_deadline_s)"));
      }
      spec.deadline_ms = static_cast<int64_t>(value.to_number<double>() * 1000);
    } else {
      return c.respond(jsonError(400, "invalid_request",
                                 "unknown key " + echoed(key) +
                                     " (images, mode, reference, targets, deadline_s, thresholds, retry, suite, commit)"));
    }
  }
  if (spec.images.empty()) return c.respond(jsonError(400, "invalid_request", "images: expected 1 to 1000 images"));
  const bool golden = spec.reference == run::ReferenceKind::golden;
  for (const auto& img : spec.images) {
    std::string which = "images: " + img.name + ": ";
    if (golden && img.golden_path.empty())
      return c.respond(jsonError(400, "invalid_request",
                                 which + "reference \"golden\" needs a \"golden\" file for every image"));
    if (!golden && !img.golden_path.empty())
      return c.respond(jsonError(400, "invalid_request", which + "a \"golden\" file needs reference \"golden\""));
    if (spec.reference != run::ReferenceKind::qemu && !img.reference_path.empty())
      return c.respond(jsonError(400, "invalid_request",
                                 which + "a reference_image needs reference \"qemu\" (the simulator runs it)"));
  }
  // Answered once the run's record is stored (it then starts).
  auto respond = c.respond;
  Status refused = runs_->start(*l, std::move(spec), [this, respond](const Result<std::string>& started) {
    if (!started) return respond(jsonError(500, "storage_error", started.status().message()));
    const run::Record* run = runs_->find(*started);
    if (run && run_index_) run_index_->runChanged(*run); // listed while it runs
    respond(okText(run ? run->toJson() : "{\"id\":\"" + *started + "\"}", 201));
  });
  // The exception: runs.max_runs reached is 429 too_many_runs.
  if (refused.is(Code::busy)) return c.respond(jsonError(429, "too_many_runs", refused.message()));
  if (!refused.ok()) return c.respond(errorResponse(refused));
}

std::optional<BodyPlan> Handlers::planResults(Call& c, const std::string& id) {
  if (!runs_) {
    c.respond(jsonError(503, "unavailable", "runs are not served here"));
    return std::nullopt;
  }
  const lease::Lease* l = ownedLease(c, id);
  if (!l) return std::nullopt;
  return spoolPlan(c, *l, static_cast<uint64_t>(state_.config->runs.max_artifact_bytes), "runs.max_artifact_bytes");
}

void Handlers::publishResults(Call& c, const std::string& id) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  const lease::Lease* l = ownedLease(c, id);
  if (!l) return;
  if (!c.request.upload)
    return c.respond(jsonError(400, "invalid_request",
                               "expected the results as an application/x-tar body of results/ and artifacts/ files "
                               "(hwfarmctl results publish makes it)"));
  RunService::Publish p;
  p.archive = c.request.upload->path;
  p.name = "results";
  for (const auto& kv : c.target.query) {
    const std::string& key = kv.first;
    const std::string& value = kv.second; // (lambdas may not capture a structured binding: clang 14)
    auto plain = [&](size_t most) {
      return !value.empty() && value.size() <= most && value != "." && value != ".." && value.find('/') == value.npos &&
             config::findControlCharacter(value) == value.npos;
    };
    if (key == "name") {
      if (!plain(128))
        return c.respond(jsonError(400, "invalid_request", "name: expected 1 to 128 bytes without \"/\" or control characters"));
      p.name = value;
    } else if (key == "commit") {
      if (!plain(128))
        return c.respond(jsonError(400, "invalid_request", "commit: expected 1 to 128 bytes without \"/\" or control characters"));
      p.commit = value;
    } else if (key == "board") {
      if (!plain(128)) return c.respond(jsonError(400, "invalid_request", "board: expected a board of the lease"));
      p.board = value;
    } else {
      return c.respond(jsonError(400, "invalid_request", "unknown parameter " + echoed(key) + " (name, commit, board)"));
    }
  }
  // Answered once the run is stored and listed (its index row made by its end's hook).
  auto respond = c.respond;
  Status refused = runs_->publish(*l, std::move(p), [respond](const Result<run::Record>& made) {
    if (!made) {
      const Status& s = made.status();
      if (s.is(Code::invalid_argument)) return respond(jsonError(400, "invalid_results", s.message()));
      return respond(errorResponse(s));
    }
    respond(okText(made->toJson(), 201));
  });
  // The exception: another publish of the lease, or runs.max_runs reached, is 429 too_many_runs.
  if (refused.is(Code::busy)) return c.respond(jsonError(429, "too_many_runs", refused.message()));
  if (!refused.ok()) return c.respond(errorResponse(refused)); // (the spool goes with the request)
}

void Handlers::listRuns(Call& c) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  if (run_index_) return listIndexedRuns(c); // paged and filtered (routes_dashboard.cpp)
  // Filters: ?state=S, ?lease=ID, ?prefix=P (what hwfarmctl resolves an id prefix with).
  std::string state = queryValue(c.target, "state"), lease = queryValue(c.target, "lease"),
              prefix = queryValue(c.target, "prefix");
  if (!state.empty() && !run::stateFromName(state))
    return c.respond(jsonError(400, "invalid_request",
                               "state: expected running, passed, failed, error, cancelled or interrupted, got " +
                                   echoed(state)));
  json::array list;
  for (const RunListing& r : runs_->list()) {
    if ((!state.empty() && run::stateName(r.state) != state) || (!lease.empty() && r.lease_id != lease) ||
        r.id.rfind(prefix, 0) != 0)
      continue;
    json::object o{{"id", r.id}, {"lease_id", r.lease_id}, {"state", run::stateName(r.state)},
                   {"created_ms", r.created_ms}};
    if (r.ended_ms) o["ended_ms"] = r.ended_ms;
    list.push_back(std::move(o));
  }
  c.respond(ok(json::object{{"runs", std::move(list)}}));
}

namespace {

// `then` once there is a run `id`: at once when it is running or listed,
// else once its stored record was read (a run older than the runs listed,
// kept until runs.history_days); 404 `no run ID` when there is none.
void whenRunKnown(RunService& runs, const Reply& respond, const std::string& id, std::function<void(const Reply&)> then) {
  if (runs.known(id)) return then(respond);
  runs.record(id, [respond, id, then = std::move(then)](const run::Record* r) {
    if (!r) return respond(jsonError(404, "not_found", "no run " + echoed(id)));
    then(respond);
  });
}

} // namespace

void Handlers::showRun(Call& c, const std::string& id) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  // An ended run's record may be read from the database first (also one
  // older than the runs listed).
  runs_->record(id, [respond = c.respond, id](const run::Record* r) {
    if (!r) return respond(jsonError(404, "not_found", "no run " + echoed(id)));
    respond(okText(r->toJson()));
  });
}

void Handlers::cancelRun(Call& c, const std::string& id) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  std::optional<RunListing> r = runs_->listing(id);
  if (!r) // maybe one older than the runs listed: ended long ago
    return runs_->record(id, [respond = c.respond, id](const run::Record* ended) {
      if (!ended) return respond(jsonError(404, "not_found", "no run " + echoed(id)));
      respond(jsonError(409, "run_ended", "run " + id + " has already ended (" +
                                              std::string(run::stateName(ended->state)) + ")"));
    });
  if (const lease::Lease* l = leases_.scheduler().lease(r->lease_id);
      !hasRole(*c.principal, Role::operator_) && (!l || l->holder.principal != c.principal->name))
    return c.respond(jsonError(403, "forbidden", "run " + id + " is not of a lease of \"" + c.principal->name + "\""));
  Status s = runs_->cancel(id, "cancelled by " + c.principal->name);
  if (s.is(Code::conflict)) return c.respond(jsonError(409, "run_ended", s.message())); // the exception
  if (!s.ok()) return c.respond(errorResponse(s));
  c.respond(okText(runs_->find(id)->toJson()));
}

constexpr size_t kMaxRunStreams = 32; // streamed answers of one run open at once (any kind)

// The streamed answers open per run (loop thread only). A Slot holds one
// while it lives: the stream it belongs to dies when the stream ends or its
// client leaves, and so gives it back.
struct RunStreams {
  std::map<std::string, size_t> open;
  struct Slot {
    Slot(std::shared_ptr<RunStreams> streams, std::string run) : of(std::move(streams)), id(std::move(run)) {}
    Slot(const Slot&) = delete; // one count, given back once
    Slot& operator=(const Slot&) = delete;
    std::shared_ptr<RunStreams> of;
    std::string id;
    ~Slot() {
      auto it = of->open.find(id);
      if (it != of->open.end() && --it->second == 0) of->open.erase(it);
    }
  };
  // A slot for run `id`, or nullptr when kMaxRunStreams are open.
  static std::shared_ptr<Slot> take(const std::shared_ptr<RunStreams>& streams, const std::string& id) {
    size_t& n = streams->open[id];
    if (n >= kMaxRunStreams) return nullptr;
    ++n;
    return std::make_shared<Slot>(streams, id);
  }
};

const std::shared_ptr<RunStreams>& Handlers::runStreams() {
  if (!run_streams_) run_streams_ = std::make_shared<RunStreams>();
  return run_streams_;
}

namespace {

constexpr size_t kFileQueueBytes = 1u << 20; // a file's bytes unsent, at most (and one piece more)
constexpr size_t kFilePiece = 256u << 10;    // read from a file at once

HttpResponse tooManyStreams(const std::string& id, size_t cap) {
  return jsonError(429, "too_many_streams",
                   "run " + id + " already has " + std::to_string(cap) + " answers streaming; close one first");
}

// The next piece (at most kFilePiece) of the `*left` bytes still to send of
// `fd`; a file cut short since it was opened reads as zeros (its length was
// promised).
std::string readPiece(int fd, uint64_t* left) {
  std::string piece(static_cast<size_t>(std::min<uint64_t>(*left, kFilePiece)), '\0');
  size_t got = 0;
  while (got < piece.size()) {
    ssize_t n = ::read(fd, piece.data() + got, piece.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  *left -= piece.size();
  return piece;
}

// What a streamed answer does with its sink: `stream` (a type with `sink`
// and `pump()`) pumps now and each time the client took what was written.
// The drained hook keeps it alive until the answer ends or its client leaves.
template <typename Stream>
std::function<void(std::shared_ptr<StreamSink>)> pumped(std::shared_ptr<Stream> stream) {
  return [stream](std::shared_ptr<StreamSink> sink) {
    stream->sink = sink;
    sink->onDrained([stream] { stream->pump(); });
    stream->pump();
  };
}

// Artifacts are files a tenant chooses (a harness's published results: any
// file under artifacts/) served from the dashboard's origin, so a browser
// that opens one must never run it as a page of that origin (where the
// dashboard's token is). Every artifact answer is sandboxed with no sources
// (an opaque origin, no script) and never sniffed; a type a browser would
// render as a document (XML, anything but JSON, plain text or bytes) is also
// an attachment. The dashboard reads artifacts with fetch(), which none of
// this affects, and saves them from a Blob.
constexpr const char* kArtifactPolicy = "sandbox; default-src 'none'";

// A file name for Content-Disposition: the path's last part, as ASCII with
// anything but [A-Za-z0-9._-] as '_' and, exactly, percent-encoded (RFC 6266).
std::string attachment(std::string_view path) {
  std::string_view base = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  std::string ascii, encoded;
  for (unsigned char ch : base) {
    bool plain = std::isalnum(ch) || ch == '.' || ch == '_' || ch == '-';
    ascii += plain ? static_cast<char>(ch) : '_';
    if (plain) encoded += static_cast<char>(ch);
    else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      encoded += {'%', kHex[ch >> 4], kHex[ch & 15]};
    }
  }
  return "attachment; filename=\"" + ascii + "\"; filename*=UTF-8''" + encoded;
}

// `r` as an artifact answer: its policy, no sniffing, and an attachment
// (named after `path`) unless it is JSON, plain text or bytes.
HttpResponse confined(HttpResponse r, std::string_view path = {}) {
  r.headers.emplace_back("Content-Security-Policy", kArtifactPolicy);
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  const std::string& type = r.content_type;
  bool shown = type == "application/json" || type.starts_with("text/plain") || type == "application/octet-stream";
  if (!path.empty() && !shown) r.headers.emplace_back("Content-Disposition", attachment(path));
  return r;
}

// One artifact sent a piece at a time, the next once the client took the
// last: memory stays small whatever the file's size, however slowly the
// client reads.
struct FileStream {
  std::shared_ptr<RunStreams::Slot> slot;
  std::shared_ptr<StreamSink> sink;
  int fd = -1;
  uint64_t left = 0;
  bool over = false;

  ~FileStream() {
    if (fd >= 0) ::close(fd);
  }
  void pump() {
    while (!over && sink->queued() < kFileQueueBytes) {
      if (left == 0) {
        over = true;
        return sink->end();
      }
      if (!sink->write(readPiece(fd, &left))) over = true;
    }
  }
};

} // namespace

void Handlers::runArtifact(Call& c, const std::string& id, const std::string& path) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  whenRunKnown(*runs_, c.respond, id, [this, id, path](const Reply& respond) {
    std::string decoded = percentDecode(path);
    if (!RunDir::plainPath(decoded))
      return respond(jsonError(400, "invalid_request", "artifact path " + echoed(decoded) + " is not plain"));
    Result<RunDir::Opened> opened = runs_->dir().open(id, decoded);
    if (!opened) return respond(jsonError(404, "not_found", "run " + id + " has no artifact " + echoed(decoded)));
    auto stream = std::make_shared<FileStream>();
    stream->fd = opened->fd;
    stream->left = opened->size;
    stream->slot = RunStreams::take(runStreams(), id);
    if (!stream->slot) return respond(tooManyStreams(id, kMaxRunStreams));
    HttpResponse resp;
    resp.content_type = RunDir::contentType(decoded);
    resp.stream = pumped(stream);
    respond(confined(std::move(resp), decoded));
  });
}

// --- GET /v1/runs/{id}/events -------------------------------------------------

namespace {

constexpr size_t kMaxEventStreams = 16;        // per run
constexpr size_t kEventLagBytes = 256u << 10;  // unsent past this, events are skipped (see resync)

// One client following a run's events. Held by the run service's watcher
// (and, for its drained and gone hooks, only weakly by the connection).
struct EventStream {
  std::shared_ptr<StreamSink> sink;
  RunService* runs = nullptr;
  std::string id;
  std::function<void()> unwatch;
  bool lagging = false; // events were skipped: the record comes again once the client caught up
  bool over = false;
  bool first = true; // the first line (the record) is always sent

  void onEvent(const std::string& line, bool last) {
    if (over) return;
    if (last) {
      if (lagging) resync();
      sink->write(line + "\n");
      return finish();
    }
    if (!lagging && !std::exchange(first, false) && sink->queued() > kEventLagBytes) lagging = true;
    if (!lagging && !sink->write(line + "\n")) finish();
  }
  // A client that fell behind gets the record as it stands instead of the
  // events it missed.
  void resync() {
    lagging = false;
    if (const run::Record* r = runs->find(id); r && !sink->write(runEventLine(*r) + "\n")) finish();
  }
  void finish() {
    over = true;
    sink->end();
    if (unwatch) std::exchange(unwatch, nullptr)();
  }
};

} // namespace

void Handlers::runEvents(Call& c, const std::string& id) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  whenRunKnown(*runs_, c.respond, id, [this, id](const Reply& respond) { followRun(respond, id); });
}

void Handlers::followRun(const Reply& respond, const std::string& id) {
  if (runs_->watcherCount(id) >= kMaxEventStreams)
    return respond(jsonError(429, "too_many_streams", "run " + id + " already has " +
                                                          std::to_string(kMaxEventStreams) +
                                                          " event streams open; close one first"));
  std::shared_ptr<RunStreams::Slot> slot = RunStreams::take(runStreams(), id);
  if (!slot) return respond(tooManyStreams(id, kMaxRunStreams));
  HttpResponse r;
  r.content_type = "application/x-ndjson";
  RunService* runs = runs_;
  r.stream = [runs, id, slot](std::shared_ptr<StreamSink> sink) {
    auto stream = std::make_shared<EventStream>();
    stream->sink = sink;
    stream->runs = runs;
    stream->id = id;
    std::weak_ptr<EventStream> weak = stream;
    // (the hook lives until the answer is sent or its client left, and the
    // run's stream slot with it)
    sink->onDrained([weak, slot] {
      if (auto s = weak.lock(); s && s->lagging && !s->over) s->resync();
    });
    auto unwatch = runs->watch(id, [stream](const std::string& line, bool last) { stream->onEvent(line, last); });
    if (!unwatch) return sink->end(); // removed meanwhile (runs.history_days)
    if (stream->over) return unwatch();
    stream->unwatch = std::move(unwatch);
    sink->onGone([weak] {
      if (auto s = weak.lock()) {
        s->over = true;
        if (s->unwatch) std::exchange(s->unwatch, nullptr)();
      }
    });
  };
  respond(std::move(r));
}

// --- GET /v1/runs/{id}/artifacts.tar ----------------------------------------------

namespace {

// An ended run's artifacts sent as a tar archive a piece at a time, the
// next once the client took the last: memory stays small whatever the
// files' sizes. Files that are gone or are no longer plain files are left
// out. Kept alive by the connection's drained hook, which the server drops
// when the stream ends or the client leaves.
struct TarStream {
  TarStream(RunDir d, std::string run) : dir(std::move(d)), id(std::move(run)), prefix(id + "/") {}
  std::shared_ptr<RunStreams::Slot> slot;
  std::shared_ptr<StreamSink> sink;
  RunDir dir;
  std::string id;
  std::string prefix; // "<run-id>/"
  std::vector<std::string> paths;
  size_t next = 0;
  int fd = -1;
  uint64_t left = 0;    // bytes of the open file still to send
  size_t padding = 0;   // zeros after them
  bool over = false;

  ~TarStream() {
    if (fd >= 0) ::close(fd);
  }

  // The next file's header, or nothing when there is none left.
  std::optional<std::string> openNext() {
    while (next < paths.size()) {
      const std::string& path = paths[next++];
      Result<RunDir::Opened> opened = dir.open(id, path);
      if (!opened) continue;
      std::string header = run::tarHeader({prefix + path, opened->size, opened->mtime, 0644});
      if (header.empty()) {
        ::close(opened->fd);
        continue;
      }
      fd = opened->fd;
      left = opened->size;
      padding = run::tarPadding(left);
      return header;
    }
    return std::nullopt;
  }

  // Writes until kFileQueueBytes wait unsent, then waits for the drain;
  // headers and small files go out together, a write of up to kFilePiece.
  void pump() {
    std::string batch;
    auto flush = [&] {
      if (!batch.empty() && !sink->write(std::exchange(batch, {}))) over = true;
    };
    while (!over && sink->queued() + batch.size() < kFileQueueBytes) {
      if (fd < 0) {
        if (std::optional<std::string> header = openNext()) {
          batch += *header;
          continue;
        }
        over = true;
        batch += run::tarEnd();
        flush();
        return sink->end();
      }
      // (a file cut short since its header reads as zeros: the archive stays whole)
      batch += readPiece(fd, &left);
      if (left == 0) {
        batch.append(padding, '\0');
        ::close(std::exchange(fd, -1));
      }
      if (batch.size() >= kFilePiece) flush();
    }
    flush();
  }
};

} // namespace

void Handlers::runArtifactsTar(Call& c, const std::string& id) {
  if (!runs_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  // An ended run's record (its artifacts) may be read from the database
  // first (also one older than the runs listed).
  runs_->record(id, [this, respond = c.respond, id](const run::Record* r) {
    if (!r) return respond(jsonError(404, "not_found", "no run " + echoed(id)));
    if (r->state == run::State::running)
      return respond(jsonError(409, "run_running", "run " + id + " is running: its artifacts are written when it ends"));
    auto stream = std::make_shared<TarStream>(runs_->dir(), r->id);
    stream->slot = RunStreams::take(runStreams(), id);
    if (!stream->slot) return respond(tooManyStreams(id, kMaxRunStreams));
    for (const auto& path : r->artifacts)
      if (RunDir::plainPath(path)) stream->paths.push_back(path);
    // The record itself, also for a run that was interrupted before it listed it.
    if (std::find(stream->paths.begin(), stream->paths.end(), "summary.json") == stream->paths.end())
      stream->paths.emplace_back("summary.json");
    HttpResponse resp;
    resp.content_type = "application/x-tar";
    resp.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + r->id + ".tar\"");
    resp.stream = pumped(stream);
    respond(confined(std::move(resp)));
  });
}

} // namespace hwfarm::api
