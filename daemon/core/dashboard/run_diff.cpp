#include "daemon/core/dashboard/run_diff.h"

#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "daemon/core/run/json_text.h"

namespace hwfarm::dashboard {

std::string_view changeName(Change c) {
  switch (c) {
    case Change::newly_failing: return "newly_failing";
    case Change::fixed: return "fixed";
    case Change::still_failing: return "still_failing";
    case Change::passing: return "passing";
    case Change::skipped: return "skipped";
    case Change::infrastructure: return "infrastructure";
    case Change::appeared: return "appeared";
    case Change::disappeared: return "disappeared";
  }
  return "passing";
}

std::string_view caseOutcomeName(CaseOutcome o) {
  switch (o) {
    case CaseOutcome::pass: return "pass";
    case CaseOutcome::fail: return "fail";
    case CaseOutcome::skip: return "skip";
    case CaseOutcome::error: return "error";
  }
  return "error";
}

CaseOutcome caseOutcomeFromName(std::string_view s) {
  return s == "pass" ? CaseOutcome::pass : s == "fail" ? CaseOutcome::fail : s == "skip" ? CaseOutcome::skip
                                                                                          : CaseOutcome::error;
}

namespace {

using Key = std::tuple<std::string, std::string, std::string>;

Change caseChange(CaseOutcome before, CaseOutcome after) {
  if (after == CaseOutcome::error) return Change::infrastructure;
  if (after == CaseOutcome::skip) return Change::skipped;
  if (after == CaseOutcome::fail) return before == CaseOutcome::fail ? Change::still_failing : Change::newly_failing;
  return before == CaseOutcome::fail ? Change::fixed : Change::passing;
}

Change outputChange(bool before_pass, bool after_pass) {
  if (after_pass) return before_pass ? Change::passing : Change::fixed;
  return before_pass ? Change::newly_failing : Change::still_failing;
}

std::optional<double> defined(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? v : std::nullopt;
}

} // namespace

RunDiff diffRuns(const RunDigest& base, const RunDigest& head) {
  RunDiff diff{base.run, head.run, {}, {}};
  std::map<Key, const CaseRow*> base_cases;
  for (const auto& c : base.cases) base_cases.emplace(Key{c.image, c.target, c.name}, &c);
  std::set<Key> seen;
  for (const auto& c : head.cases) {
    Key key{c.image, c.target, c.name};
    if (!seen.insert(key).second) continue;
    CaseChange ch{c.image, c.target, c.name, Change::appeared, std::nullopt, c.outcome, c.message};
    if (auto it = base_cases.find(key); it != base_cases.end()) {
      ch.before = it->second->outcome;
      ch.change = caseChange(it->second->outcome, c.outcome);
    }
    diff.cases.push_back(std::move(ch));
  }
  for (const auto& c : base.cases)
    if (seen.insert(Key{c.image, c.target, c.name}).second)
      diff.cases.push_back({c.image, c.target, c.name, Change::disappeared, c.outcome, std::nullopt, c.message});

  std::map<Key, const OutputRow*> base_outputs;
  for (const auto& o : base.outputs) base_outputs.emplace(Key{o.image, o.target, o.key}, &o);
  seen.clear();
  for (const auto& o : head.outputs) {
    Key key{o.image, o.target, o.key};
    if (!seen.insert(key).second) continue;
    OutputChange ch{o.image, o.target, o.key, Change::appeared, std::nullopt, defined(o.actual_pcc),
                    std::nullopt, std::nullopt, o.pass};
    if (auto it = base_outputs.find(key); it != base_outputs.end()) {
      ch.before_pcc = defined(it->second->actual_pcc);
      ch.before_pass = it->second->pass;
      ch.change = outputChange(it->second->pass, o.pass);
      if (ch.before_pcc && ch.after_pcc) ch.delta = *ch.after_pcc - *ch.before_pcc;
    }
    diff.outputs.push_back(std::move(ch));
  }
  for (const auto& o : base.outputs)
    if (seen.insert(Key{o.image, o.target, o.key}).second)
      diff.outputs.push_back({o.image, o.target, o.key, Change::disappeared, defined(o.actual_pcc), std::nullopt,
                              std::nullopt, o.pass, std::nullopt});
  return diff;
}

namespace {

std::string number(const std::optional<double>& v) { return v ? run::jsonNumber(*v) : "null"; }
std::string flag(const std::optional<bool>& v) { return v ? (*v ? "true" : "false") : "null"; }
std::string outcome(const std::optional<CaseOutcome>& o) {
  return o ? run::jsonString(caseOutcomeName(*o)) : "null";
}

template <typename T>
std::string counts(const std::vector<T>& items) {
  std::map<std::string_view, size_t> n;
  for (const auto& i : items) ++n[changeName(i.change)];
  std::string out = "{";
  for (const auto& [name, count] : n)
    out += (out.size() > 1 ? ", " : "") + run::jsonString(name) + ": " + std::to_string(count);
  return out + "}";
}

} // namespace

std::string runDiffJson(const RunDiff& d) {
  std::string out = "{\"base\": " + run::jsonString(d.base) + ", \"head\": " + run::jsonString(d.head) +
                    ",\n \"counts\": {\"cases\": " + counts(d.cases) + ", \"outputs\": " + counts(d.outputs) +
                    "},\n \"cases\": [";
  for (size_t i = 0; i < d.cases.size(); ++i) {
    const CaseChange& c = d.cases[i];
    out += (i ? ",\n  " : "\n  ") + std::string("{\"image\": ") + run::jsonString(c.image) +
           ", \"target\": " + run::jsonString(c.target) + ", \"case\": " + run::jsonString(c.name) +
           ", \"change\": " + run::jsonString(changeName(c.change)) + ", \"before\": " + outcome(c.before) +
           ", \"after\": " + outcome(c.after) + ", \"message\": " + run::jsonString(c.message) + "}";
  }
  out += "],\n \"outputs\": [";
  for (size_t i = 0; i < d.outputs.size(); ++i) {
    const OutputChange& o = d.outputs[i];
    out += (i ? ",\n  " : "\n  ") + std::string("{\"image\": ") + run::jsonString(o.image) +
           ", \"target\": " + run::jsonString(o.target) + ", \"key\": " + run::jsonString(o.key) +
           ", \"change\": " + run::jsonString(changeName(o.change)) + ", \"before_pcc\": " + number(o.before_pcc) +
           ", \"after_pcc\": " + number(o.after_pcc) + ", \"delta\": " + number(o.delta) +
           ", \"before_pass\": " + flag(o.before_pass) + ", \"after_pass\": " + flag(o.after_pass) + "}";
  }
  return out + "]}\n";
}

} // namespace hwfarm::dashboard
