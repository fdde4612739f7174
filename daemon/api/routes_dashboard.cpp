// The dashboard's questions about many runs (docs/api.md, "Runs"; docs/
// dashboard.md), answered from the run index in the database: GET /v1/runs
// paged and filtered, GET /v1/history, GET /v1/compare.
#include <charconv>
#include <set>

#include "daemon/api/routes.h"
#include "daemon/services/run_index.h"

namespace hwfarm::api {

namespace {

constexpr size_t kDefaultPage = 100;
constexpr size_t kMaxHistory = 500;

std::string param(const Target& t, const std::string& key) {
  for (const auto& [k, v] : t.query)
    if (k == key) return percentDecode(v);
  return {};
}

// A positive count of at most `max` from ?key= (default `fallback`), or
// nothing once the 400 is answered.
std::optional<size_t> count(Call& c, const std::string& key, size_t fallback, size_t max) {
  std::string v = param(c.target, key);
  if (v.empty()) return fallback;
  size_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n == 0 || n > max) {
    c.respond(jsonError(400, "invalid_request", key + ": expected a count from 1 to " + std::to_string(max) +
                                                    ", got " + echoed(v)));
    return std::nullopt;
  }
  return n;
}

json::object rowJson(const store::IndexedRun& r) {
  json::object o{{"id", r.id}, {"lease_id", r.lease_id}, {"state", r.state}, {"created_ms", r.created_ms}};
  if (r.ended_ms) o["ended_ms"] = r.ended_ms;
  auto text = [&](const char* key, const std::string& v) {
    if (!v.empty()) o[key] = v;
  };
  text("suite", r.suite);
  text("commit", r.commit);
  text("failure_class", r.failure_class);
  text("reason", r.reason);
  auto list = [](const std::vector<std::string>& items) {
    json::array a;
    for (const auto& i : items) a.emplace_back(i);
    return a;
  };
  o["images"] = list(r.images);
  o["board_types"] = list(r.board_types);
  o["boards"] = list(r.boards);
  if (!r.holder_job.empty() || !r.holder_build.empty() || !r.holder_stage.empty() || !r.holder_url.empty())
    o["holder"] = json::object{{"job", r.holder_job}, {"build", r.holder_build}, {"stage", r.holder_stage},
                               {"url", r.holder_url}};
  return o;
}

HttpResponse indexError(const Status& s) {
  if (s.is(Code::not_found)) return jsonError(404, "not_found", s.message());
  return jsonError(500, "storage_error", s.message());
}

} // namespace

void Handlers::listIndexedRuns(Call& c) {
  static const std::set<std::string> kStates{"running", "passed", "failed", "error", "cancelled", "interrupted"};
  store::RunFilter f;
  f.state = param(c.target, "state");
  f.failure_class = param(c.target, "failure_class");
  f.board_type = param(c.target, "board_type");
  f.image = param(c.target, "image");
  f.commit = param(c.target, "commit");
  f.holder = param(c.target, "holder");
  f.lease = param(c.target, "lease");
  f.prefix = param(c.target, "prefix");
  if (!f.state.empty() && !kStates.count(f.state))
    return c.respond(jsonError(400, "invalid_request", "state: expected running, passed, failed, error, cancelled or "
                                                       "interrupted, got " + echoed(f.state)));
  if (!f.failure_class.empty() && f.failure_class != "test" && f.failure_class != "infrastructure")
    return c.respond(jsonError(400, "invalid_request",
                               "failure_class: expected test or infrastructure, got " + echoed(f.failure_class)));
  auto limit = count(c, "limit", kDefaultPage, store::RunIndexTables::kMaxPage);
  if (!limit) return;
  auto respond = c.respond;
  run_index_->page(std::move(f), param(c.target, "before"), *limit, [respond](Result<store::RunPage> page) {
    if (!page) return respond(indexError(page.status()));
    json::array runs;
    for (const auto& r : page->runs) runs.push_back(rowJson(r));
    json::object counts;
    for (const auto& [state, n] : page->counts) counts[state] = n;
    json::object body{{"runs", std::move(runs)}, {"counts", std::move(counts)}};
    body["next"] = page->next.empty() ? json::value(nullptr) : json::value(page->next);
    respond(ok(body));
  });
}

void Handlers::history(Call& c) {
  if (!run_index_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  std::string image = param(c.target, "image"), output = param(c.target, "output");
  if (image.empty() || output.empty())
    return c.respond(jsonError(400, "invalid_request", "expected ?image=IMAGE&output=CASE.OUTPUT (and board_type, last)"));
  auto last = count(c, "last", 30, kMaxHistory);
  if (!last) return;
  auto respond = c.respond;
  run_index_->history(image, output, param(c.target, "board_type"), *last, [respond](Result<std::string> body) {
    respond(body ? okText(std::move(*body)) : indexError(body.status()));
  });
}

void Handlers::compare(Call& c) {
  if (!run_index_) return c.respond(jsonError(503, "unavailable", "runs are not served here"));
  std::string base = param(c.target, "base"), head = param(c.target, "head");
  if (base.empty() || head.empty())
    return c.respond(jsonError(400, "invalid_request", "expected ?base=RUN&head=RUN"));
  auto respond = c.respond;
  run_index_->compare(base, head, [respond](Result<std::string> body) {
    respond(body ? okText(std::move(*body)) : indexError(body.status()));
  });
}

} // namespace hwfarm::api
