// The record's JSON (record.h): its one writer and its one reader.
#include <cmath>

#include <boost/json.hpp>

#include "daemon/core/run/evidence_json.h"
#include "daemon/core/run/record.h"

namespace json = boost::json;

namespace hwfarm::run {
namespace {

json::value number(double v) { return std::isfinite(v) ? json::value(v) : json::value(nullptr); }

json::object caseObject(const CaseVerdict& c) {
  json::object o{{"name", xmlSafe(c.name)}, {"outcome", outcomeName(c.outcome)}};
  if (!c.message.empty()) o["message"] = xmlSafe(c.message);
  json::array outputs;
  for (const auto& out : c.outputs)
    outputs.push_back(json::object{
        {"key", xmlSafe(out.key)}, {"verdict", verdictName(out.verdict)}, {"actual_pcc", number(out.actual_pcc)}});
  if (!outputs.empty()) o["outputs"] = std::move(outputs);
  if (c.outputs_left_out) o["outputs_left_out"] = c.outputs_left_out;
  if (!c.rule.empty()) o["infrastructure_rule"] = xmlSafe(c.rule);
  return o;
}

// `brief`: as an event carries it, without cases and evidence (with the counts).
json::object attemptObject(const AttemptEntry& a, bool brief) {
  json::object o{{"image", a.image},
                 {"target", a.target},
                 {"board", a.board},
                 {"reference", a.reference},
                 {"phase", phaseName(a.phase)}};
  if (!a.retry_of_board.empty()) o["retry_of_board"] = a.retry_of_board;
  if (a.retried) o["retried"] = true;
  if (a.cancelled) o["cancelled"] = true;
  if (!a.not_retried.empty()) o["not_retried"] = a.not_retried;
  if (a.phase == Phase::done) o["seconds"] = a.seconds;
  if (a.timings) {
    json::object t;
    auto put = [&t](const char* key, int64_t ms) {
      if (ms >= 0) t[key] = ms;
    };
    put("wait_ms", a.timings->wait_ms);
    put("flash_ms", a.timings->flash_ms);
    put("start_ms", a.timings->start_ms);
    put("first_byte_ms", a.timings->first_byte_ms);
    put("end_ms", a.timings->end_ms);
    put("drain_ms", a.timings->drain_ms);
    o["timings"] = std::move(t);
  }
  if (!a.judgement) return o;
  const Judgement& j = *a.judgement;
  o["outcome"] = outcomeName(j.outcome);
  if (j.failure != FailureClass::none) o["failure_class"] = failureClassName(j.failure);
  if (!j.reason.empty()) o["reason"] = xmlSafe(j.reason);
  if (!j.record_count.empty())
    o["protocol"] = json::object{{"version", j.protocol_version}, {"record_count", j.record_count}};
  if (a.reference) return o;
  if (j.reference_failed) o["reference_failed"] = true;
  if (!brief && !j.evidence.empty()) o["evidence"] = evidenceJson(j.evidence);
  if (j.end_status) o["end_status"] = *j.end_status;
  const CaseCounts& n = j.counts;
  o["counts"] = json::object{{"cases", n.cases},     {"passed", n.passed}, {"failed", n.failed},
                             {"skipped", n.skipped}, {"errors", n.errors}};
  if (n.left_out) o["cases_left_out"] = n.left_out;
  if (brief) return o;
  json::array cases;
  for (const auto& c : j.cases) cases.push_back(caseObject(c));
  o["cases"] = std::move(cases);
  return o;
}

// Reads members of one JSON object into typed fields; the first member of
// a wrong type makes error() say which.
class Reader {
 public:
  Reader(const json::object& o, std::string where) : o_(o), where_(std::move(where)) {}

  void text(const char* key, std::string& out) {
    if (const json::value* v = find(key, "a string", &json::value::is_string)) out = std::string(v->as_string());
  }
  void integer(const char* key, int64_t& out) {
    if (const json::value* v = find(key, "an integer", &json::value::is_int64)) out = v->as_int64();
  }
  void flag(const char* key, bool& out) {
    if (const json::value* v = find(key, "true or false", &json::value::is_bool)) out = v->as_bool();
  }
  void real(const char* key, double& out) {
    if (const json::value* v = find(key, "a number", &json::value::is_number)) out = v->to_number<double>();
  }
  // A number, or null for NaN.
  void pcc(const char* key, double& out) {
    const json::value* v = o_.if_contains(key);
    if (v && v->is_null()) out = std::nan("");
    else real(key, out);
  }
  // A member whose text is one of `names`' results.
  template <typename E, typename Names>
  void named(const char* key, E& out, std::initializer_list<E> all, Names names) {
    std::string s;
    if (!o_.if_contains(key)) return;
    text(key, s);
    for (E e : all)
      if (names(e) == s) {
        out = e;
        return;
      }
    fail(key, "a known name");
  }
  const json::array* array(const char* key) {
    const json::value* v = find(key, "an array", &json::value::is_array);
    return v ? &v->as_array() : nullptr;
  }
  const json::object* object(const char* key) {
    const json::value* v = find(key, "an object", &json::value::is_object);
    return v ? &v->as_object() : nullptr;
  }
  // Each item of array `key` as an object, to `each(reader of it)`.
  template <typename F>
  void objects(const char* key, F each) {
    const json::array* list = array(key);
    for (size_t i = 0; list && i < list->size() && error_.ok(); ++i) {
      std::string at = where_ + key + "[" + std::to_string(i) + "].";
      if (!(*list)[i].is_object()) return fail(key, "an array of objects");
      Reader item((*list)[i].as_object(), at);
      each(item);
      if (!item.error_.ok()) error_ = item.error_;
    }
  }
  bool has(const char* key) const { return o_.contains(key); }
  const std::string& where() const { return where_; }
  // A nested reader's first error becomes this one's.
  void adopt(const Status& error) {
    if (error_.ok()) error_ = error;
  }
  const Status& error() const { return error_; }

 private:
  const json::value* find(const char* key, const char* what, bool (json::value::*is)() const noexcept) {
    const json::value* v = o_.if_contains(key);
    if (!v || !error_.ok()) return nullptr;
    if ((v->*is)()) return v;
    fail(key, what);
    return nullptr;
  }
  void fail(const char* key, const char* what) {
    if (error_.ok()) error_ = Status::error(Code::invalid_argument, where_ + key + ": expected " + what);
  }

  const json::object& o_;
  std::string where_;
  Status error_;
};

const std::initializer_list<Outcome> kOutcomes{Outcome::pass, Outcome::fail, Outcome::skip, Outcome::error};
const std::initializer_list<FailureClass> kClasses{FailureClass::none, FailureClass::infrastructure,
                                                    FailureClass::test};

// A record of an older hwfarmd has no counts: they are its cases' (it kept
// them all).
void readCounts(Reader& r, Judgement& j) {
  CaseCounts& n = j.counts;
  const json::object* counts = r.has("counts") ? r.object("counts") : nullptr;
  if (!counts) {
    for (const auto& c : j.cases) {
      ++n.cases;
      n.passed += c.outcome == Outcome::pass;
      n.failed += c.outcome == Outcome::fail;
      n.skipped += c.outcome == Outcome::skip;
      n.errors += c.outcome == Outcome::error;
    }
    return;
  }
  Reader in(*counts, r.where() + "counts.");
  auto count = [&in](const char* key, size_t& out) {
    int64_t v = 0;
    in.integer(key, v);
    out = v > 0 ? static_cast<size_t>(v) : 0;
  };
  count("cases", n.cases);
  count("passed", n.passed);
  count("failed", n.failed);
  count("skipped", n.skipped);
  count("errors", n.errors);
  if (!in.error().ok()) r.adopt(in.error());
  int64_t left_out = 0;
  r.integer("cases_left_out", left_out);
  n.left_out = left_out > 0 ? static_cast<size_t>(left_out) : 0;
}

Judgement readJudgement(Reader& r, const json::object& attempt) {
  Judgement j;
  r.named("outcome", j.outcome, kOutcomes, outcomeName);
  r.named("failure_class", j.failure, kClasses, failureClassName);
  r.text("reason", j.reason);
  r.flag("reference_failed", j.reference_failed);
  if (const json::object* e = r.object("evidence")) j.evidence = evidenceFromJson(*e);
  if (const json::object* p = r.object("protocol")) {
    Reader protocol(*p, r.where() + "protocol.");
    int64_t version = 1;
    protocol.integer("version", version);
    j.protocol_version = static_cast<int>(version);
    protocol.text("record_count", j.record_count);
    if (!protocol.error().ok()) r.adopt(protocol.error());
  }
  if (attempt.contains("end_status")) {
    int64_t status = 0;
    r.integer("end_status", status);
    j.end_status = static_cast<int>(status);
  }
  r.objects("cases", [&](Reader& c) {
    CaseVerdict cv;
    c.text("name", cv.name);
    c.named("outcome", cv.outcome, kOutcomes, outcomeName);
    c.text("message", cv.message);
    c.objects("outputs", [&](Reader& o) {
      OutputVerdict ov;
      o.text("key", ov.key);
      o.named("verdict", ov.verdict, {Verdict::pass, Verdict::fail}, verdictName);
      o.pcc("actual_pcc", ov.actual_pcc);
      cv.outputs.push_back(std::move(ov));
    });
    int64_t left_out = 0;
    c.integer("outputs_left_out", left_out);
    cv.outputs_left_out = left_out > 0 ? static_cast<size_t>(left_out) : 0;
    c.text("infrastructure_rule", cv.rule);
    j.cases.push_back(std::move(cv));
  });
  readCounts(r, j);
  return j;
}

AttemptEntry readAttempt(Reader& r, const json::object& o) {
  AttemptEntry a;
  r.text("image", a.image);
  r.text("target", a.target);
  r.text("board", a.board);
  r.flag("reference", a.reference);
  r.named("phase", a.phase, {Phase::waiting, Phase::flashing, Phase::running, Phase::finishing, Phase::done},
          phaseName);
  r.real("seconds", a.seconds);
  r.text("retry_of_board", a.retry_of_board);
  r.flag("retried", a.retried);
  r.flag("cancelled", a.cancelled);
  r.text("not_retried", a.not_retried);
  if (const json::object* t = o.contains("timings") ? r.object("timings") : nullptr) {
    Reader times(*t, r.where() + "timings.");
    AttemptTimings at;
    times.integer("wait_ms", at.wait_ms);
    times.integer("flash_ms", at.flash_ms);
    times.integer("start_ms", at.start_ms);
    times.integer("first_byte_ms", at.first_byte_ms);
    times.integer("end_ms", at.end_ms);
    times.integer("drain_ms", at.drain_ms);
    if (!times.error().ok()) r.adopt(times.error());
    a.timings = at;
  }
  if (o.contains("outcome")) a.judgement = readJudgement(r, o);
  return a;
}

} // namespace

std::string Record::toJson() const {
  json::object o{{"id", id},
                 {"lease_id", lease_id},
                 {"state", stateName(state)},
                 {"created_ms", created_ms},
                 {"mode", modeName(mode)},
                 {"reference", referenceName(reference)},
                 {"deadline_ms", deadline_ms}};
  if (ended_ms) o["ended_ms"] = ended_ms;
  if (kind != Kind::hwfarm) o["kind"] = kindName(kind);
  if (!harness.empty()) o["harness"] = harness;
  if (!suite.empty()) o["suite"] = xmlSafe(suite);
  if (!commit.empty()) o["commit"] = commit;
  json::array image_list;
  for (const auto& img : images) {
    json::object io{{"name", img.name}, {"file", xmlSafe(img.file)}};
    if (!img.reference_image.empty()) io["reference_image"] = img.reference_image;
    if (!img.golden.empty()) io["golden"] = img.golden;
    image_list.push_back(std::move(io));
  }
  o["images"] = std::move(image_list);
  json::array target_list;
  for (const auto& t : targets) {
    json::object to{{"board", t.board}, {"name", t.name}};
    if (!t.replaces.empty()) to["replaces"] = t.replaces;
    target_list.push_back(std::move(to));
  }
  o["targets"] = std::move(target_list);
  o["progress"] = json::object{{"done", doneCount()}, {"total", attempts.size()}};
  json::array attempt_list;
  for (const auto& a : attempts) attempt_list.push_back(attemptObject(a, false));
  o["attempts"] = std::move(attempt_list);
  if (attempts_ms >= 0) o["timings"] = json::object{{"attempts_ms", attempts_ms}};
  if (failure != FailureClass::none) o["failure_class"] = failureClassName(failure);
  if (!reason.empty()) o["reason"] = reason;
  if (cancelling) o["cancelling"] = true;
  if (state != State::running && !artifacts.empty()) {
    json::array paths;
    for (const auto& p : artifacts) paths.emplace_back(p);
    o["artifacts"] = std::move(paths);
  }
  return json::serialize(o);
}

std::string Record::attemptEventJson(size_t index) const { return json::serialize(attemptObject(attempts.at(index), true)); }

Result<Record> Record::fromJson(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return Status::error(Code::invalid_argument, "not JSON: " + ec.message());
  if (!v.is_object()) return Status::error(Code::invalid_argument, "not a JSON object");
  const json::object& o = v.as_object();
  Record r;
  Reader in(o, "");
  if (!o.contains("state")) return Status::error(Code::invalid_argument, "state: a run's record needs one");
  in.text("id", r.id);
  in.text("lease_id", r.lease_id);
  in.named("state", r.state,
           {State::running, State::passed, State::failed, State::error, State::cancelled, State::interrupted},
           stateName);
  in.integer("created_ms", r.created_ms);
  in.integer("ended_ms", r.ended_ms);
  in.named("mode", r.mode, {Mode::shard, Mode::each}, modeName);
  in.named("reference", r.reference, {ReferenceKind::qemu, ReferenceKind::golden, ReferenceKind::none},
           referenceName);
  in.integer("deadline_ms", r.deadline_ms);
  in.named("kind", r.kind, {Kind::hwfarm, Kind::external}, kindName);
  in.text("harness", r.harness);
  in.text("suite", r.suite);
  in.text("commit", r.commit);
  in.objects("images", [&](Reader& i) {
    ImageEntry e;
    i.text("name", e.name);
    i.text("file", e.file);
    i.text("reference_image", e.reference_image);
    i.text("golden", e.golden);
    r.images.push_back(std::move(e));
  });
  in.objects("targets", [&](Reader& t) {
    TargetEntry e;
    t.text("board", e.board);
    t.text("name", e.name);
    t.text("replaces", e.replaces);
    r.targets.push_back(std::move(e));
  });
  if (const json::array* list = o.contains("attempts") ? in.array("attempts") : nullptr)
    for (size_t i = 0; i < list->size() && in.error().ok(); ++i) {
      if (!(*list)[i].is_object())
        return Status::error(Code::invalid_argument, "attempts[" + std::to_string(i) + "]: expected an object");
      const json::object& a = (*list)[i].as_object();
      Reader at(a, "attempts[" + std::to_string(i) + "].");
      r.attempts.push_back(readAttempt(at, a));
      if (!at.error().ok()) return at.error();
    }
  if (const json::object* t = o.contains("timings") ? in.object("timings") : nullptr) {
    Reader times(*t, "timings.");
    times.integer("attempts_ms", r.attempts_ms);
    if (!times.error().ok()) return times.error();
  }
  in.named("failure_class", r.failure, kClasses, failureClassName);
  in.text("reason", r.reason);
  in.flag("cancelling", r.cancelling);
  if (const json::array* list = o.contains("artifacts") ? in.array("artifacts") : nullptr)
    for (const auto& p : *list) {
      if (!p.is_string()) return Status::error(Code::invalid_argument, "artifacts: expected an array of paths");
      r.artifacts.emplace_back(p.as_string());
    }
  if (!in.error().ok()) return in.error();
  return r;
}

} // namespace hwfarm::run
