#include "daemon/core/results/harness_results.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include <boost/json.hpp>

#include "daemon/core/results/xml_reader.h"

namespace hwfarm::results {
namespace json = boost::json;

std::string_view caseStatusName(CaseStatus s) {
  switch (s) {
    case CaseStatus::passed: return "passed";
    case CaseStatus::failed: return "failed";
    case CaseStatus::error: return "error";
    case CaseStatus::skipped: return "skipped";
  }
  return "passed";
}

namespace {

constexpr std::string_view kCutMark = "[earlier text cut]\n";
constexpr size_t kMaxJsonValues = 4u << 20; // in a twister.json (about 200 MB as JSON values)
constexpr std::string_view kEllipsis = "...";

constexpr size_t kShortName = 64; // a name past the texts' budget

// The head of `s`, at most `max` bytes (and the mark): names and messages.
std::string head(std::string s, size_t max) {
  if (s.size() <= max) return s;
  s.resize(max);
  return s + std::string(kEllipsis);
}

// Appends to a text whose tail is kept: at most twice `max` held meanwhile.
void appendTail(std::string* s, std::string_view more, size_t max) {
  s->append(more);
  if (s->size() > 2 * max + kCutMark.size()) s->erase(0, s->size() - max);
}
// The tail of a text so kept, at most `max` bytes, marked when cut.
void cutTail(std::string* s, size_t max, bool cut_before) {
  if (s->size() > max) {
    s->erase(0, s->size() - max);
    cut_before = true;
  }
  if (cut_before) s->insert(0, kCutMark);
}

// Cases as they are read: counted, kept while the limits allow.
class Collector {
 public:
  Collector(const HarnessLimits& limits, std::string format) : limits_(limits) { out_.format = std::move(format); }

  // False once more than max_cases were read.
  bool add(HarnessCase c) {
    switch (c.status) {
      case CaseStatus::passed: ++out_.passed; break;
      case CaseStatus::failed: ++out_.failed; break;
      case CaseStatus::error: ++out_.errors; break;
      case CaseStatus::skipped: ++out_.skipped; break;
    }
    if (out_.total() > limits_.max_cases) return false;
    if (out_.cases.size() >= limits_.kept_cases) {
      ++out_.cases_left_out;
      return true;
    }
    c.suite = head(std::move(c.suite), limits_.max_name_bytes);
    c.classname = head(std::move(c.classname), limits_.max_name_bytes);
    c.name = head(std::move(c.name), limits_.max_name_bytes);
    c.type = head(std::move(c.type), limits_.max_name_bytes);
    c.error_type = head(std::move(c.error_type), limits_.max_name_bytes);
    c.message = head(std::move(c.message), limits_.max_text_bytes);
    c.error_message = head(std::move(c.error_message), limits_.max_text_bytes);
    size_t text = c.message.size() + c.error_message.size() + c.detail.size() + c.error_detail.size() +
                  c.output.size() + c.suite.size() + c.classname.size() + c.name.size() + c.type.size() +
                  c.error_type.size();
    for (const auto& [k, v] : c.properties) text += k.size() + v.size();
    if (text_total_ + text > limits_.max_text_total) {
      // Past the budget a case keeps short names and no text.
      c.message.clear();
      c.error_message.clear();
      c.detail.clear();
      c.error_detail.clear();
      c.output.clear();
      c.properties.clear();
      for (std::string* n : {&c.suite, &c.classname, &c.name, &c.type, &c.error_type})
        *n = head(std::move(*n), kShortName);
      ++out_.texts_left_out;
    } else {
      text_total_ += text;
    }
    out_.cases.push_back(std::move(c));
    return true;
  }
  HarnessResults take() { return std::move(out_); }

 private:
  const HarnessLimits& limits_;
  HarnessResults out_;
  size_t text_total_ = 0;
};

// Case `b` folded into `a`, the same case reported twice in a row (pytest
// writes a teardown's error as a second <testcase> of the same name): the
// worse status wins, a failure before an error, and the other's message
// stays as its error.
void merge(HarnessCase& a, HarnessCase&& b) {
  auto rank = [](CaseStatus s) {
    return s == CaseStatus::failed ? 3 : s == CaseStatus::error ? 2 : s == CaseStatus::skipped ? 1 : 0;
  };
  a.seconds += b.seconds;
  if (!b.output.empty()) a.output += (a.output.empty() ? "" : "\n") + b.output;
  if (b.status == CaseStatus::error && a.status == CaseStatus::failed) {
    if (a.error_message.empty())
      a.error_type = std::move(b.type), a.error_message = std::move(b.message), a.error_detail = std::move(b.detail);
  } else if (b.status == CaseStatus::failed && a.status == CaseStatus::error) {
    a.error_type = std::move(a.type);
    a.error_message = std::move(a.message);
    a.error_detail = std::move(a.detail);
    a.status = CaseStatus::failed;
    a.type = std::move(b.type);
    a.message = std::move(b.message);
    a.detail = std::move(b.detail);
  } else if (rank(b.status) > rank(a.status)) {
    a.status = b.status;
    a.type = std::move(b.type);
    a.message = std::move(b.message);
    a.detail = std::move(b.detail);
  }
}

Status refused(std::string_view file, const std::string& what) {
  return Status::error(Code::invalid_argument, std::string(file) + ":" + what);
}

std::string attribute(const XmlReader::Event& e, std::string_view name) {
  for (const auto& [n, v] : e.attributes)
    if (n == name) return v;
  return "";
}

// A number of seconds: JUnit's time attribute, twister's execution_time.
std::optional<double> seconds(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return 0.0;
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

} // namespace

// --- JUnit XML ----------------------------------------------------------------

Result<HarnessResults> parseJunitXml(std::string_view text, std::string_view file, const HarnessLimits& limits) {
  if (text.size() > limits.max_bytes)
    return refused(file, " " + std::to_string(text.size()) + " bytes, more than the " +
                             std::to_string(limits.max_bytes) + " a results file may have");
  XmlReader reader(text, {32, 64, 256});
  Collector collected(limits, "junit");
  std::vector<std::string> suites; // the <testsuite> names open, outermost first
  std::optional<HarnessCase> current;
  std::optional<HarnessCase> last; // the case before, added once the next is another
  auto addLast = [&]() { return !last || collected.add(std::move(*last)); };
  enum class Into { nothing, detail, error_detail, output } into = Into::nothing;
  size_t into_depth = 0; // the depth of the element whose text is read
  size_t case_depth = 0; // the current <testcase>'s
  bool detail_cut = false, output_cut = false;
  bool root = true;
  auto at = [&](const XmlReader::Event& e) { return std::to_string(e.line) + ":" + std::to_string(e.column) + ": "; };
  for (;;) {
    XmlReader::Event e = reader.next();
    if (e.kind == XmlReader::Kind::error) return refused(file, e.text);
    if (e.kind == XmlReader::Kind::done) break;
    if (e.kind == XmlReader::Kind::text) {
      if (!current || into == Into::nothing) continue;
      std::string& to = into == Into::detail         ? current->detail
                        : into == Into::error_detail ? current->error_detail
                                                     : current->output;
      if (!to.empty() && into == Into::output && to.back() != '\n') to.push_back('\n');
      size_t before = to.size() + e.text.size();
      appendTail(&to, e.text, limits.max_text_bytes);
      if (to.size() < before) (into == Into::output ? output_cut : detail_cut) = true; // (some was dropped)
      continue;
    }
    if (e.kind == XmlReader::Kind::end) {
      if (into != Into::nothing && reader.depth() < into_depth) into = Into::nothing;
      if (e.name == "testcase" && current) {
        cutTail(&current->detail, limits.max_text_bytes, detail_cut);
        cutTail(&current->error_detail, limits.max_text_bytes, false);
        cutTail(&current->output, limits.max_text_bytes, output_cut);
        if (last && last->suite == current->suite && last->classname == current->classname &&
            last->name == current->name) {
          merge(*last, std::move(*current));
          cutTail(&last->output, limits.max_text_bytes, false);
        } else {
          if (!addLast()) return refused(file, at(e) + "more than " + std::to_string(limits.max_cases) + " test cases");
          last = std::move(*current);
        }
        current.reset();
      } else if (e.name == "testsuite" && !suites.empty()) {
        suites.pop_back();
      }
      continue;
    }
    // A start tag.
    if (root) {
      root = false;
      if (e.name != "testsuites" && e.name != "testsuite")
        return refused(file, at(e) + "expected <testsuites> or <testsuite> as the root element, got <" + e.name +
                                 "> (is this a JUnit XML file?)");
    }
    if (e.name == "testsuite") {
      if (current) return refused(file, at(e) + "a <testsuite> inside a <testcase>");
      suites.push_back(head(attribute(e, "name"), limits.max_name_bytes));
      continue;
    }
    if (e.name == "testcase") {
      if (current) return refused(file, at(e) + "a <testcase> inside a <testcase>");
      if (suites.empty()) return refused(file, at(e) + "a <testcase> outside any <testsuite>");
      HarnessCase c;
      c.suite = suites.back();
      c.classname = head(attribute(e, "classname"), limits.max_name_bytes);
      c.name = head(attribute(e, "name"), limits.max_name_bytes);
      if (c.name.empty()) return refused(file, at(e) + "a <testcase> without a name");
      std::optional<double> s = seconds(attribute(e, "time"));
      if (!s)
        return refused(file, at(e) + "<testcase> time: expected a number of seconds, got \"" +
                                 head(attribute(e, "time"), 40) + "\"");
      c.seconds = *s;
      current = std::move(c);
      case_depth = reader.depth();
      detail_cut = output_cut = false;
      continue;
    }
    if (!current || reader.depth() != case_depth + (e.name == "property" ? 2 : 1)) continue;
    // An element of the case's own.
    HarnessCase& c = *current;
    if (e.name == "failure") {
      if (c.status == CaseStatus::error) { // the error came first: it stays beside the failure
        c.error_type = std::move(c.type);
        c.error_message = std::move(c.message);
        c.error_detail = std::move(c.detail);
        c.detail.clear();
      }
      c.status = CaseStatus::failed;
      c.type = attribute(e, "type");
      c.message = attribute(e, "message");
      into = Into::detail;
    } else if (e.name == "error") {
      if (c.status == CaseStatus::failed) {
        c.error_type = attribute(e, "type");
        c.error_message = attribute(e, "message");
        c.error_detail.clear();
        into = Into::error_detail;
        into_depth = reader.depth();
        continue;
      }
      c.status = CaseStatus::error;
      c.type = attribute(e, "type");
      c.message = attribute(e, "message");
      into = Into::detail;
    } else if (e.name == "skipped") {
      if (c.status != CaseStatus::passed) continue;
      c.status = CaseStatus::skipped;
      c.type = attribute(e, "type");
      c.message = attribute(e, "message");
      into = Into::detail;
    } else if (e.name == "system-out" || e.name == "system-err") {
      into = Into::output;
    } else if (e.name == "property") {
      if (c.properties.size() < limits.max_properties)
        c.properties.emplace_back(head(attribute(e, "name"), limits.max_name_bytes),
                                  head(attribute(e, "value"), limits.max_name_bytes));
      continue;
    } else {
      continue;
    }
    into_depth = reader.depth();
  }
  if (!addLast()) return refused(file, " more than " + std::to_string(limits.max_cases) + " test cases");
  return collected.take();
}

// --- twister.json -------------------------------------------------------------

namespace {

// A member's text, or "" when absent or null; nullopt when it is another type.
std::optional<std::string> text(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v || v->is_null()) return std::string();
  if (!v->is_string()) return std::nullopt;
  return std::string(v->get_string());
}

} // namespace

Result<HarnessResults> parseTwisterJson(std::string_view text_in, std::string_view file, const HarnessLimits& limits) {
  if (text_in.size() > limits.max_bytes)
    return refused(file, " " + std::to_string(text_in.size()) + " bytes, more than the " +
                             std::to_string(limits.max_bytes) + " a results file may have");
  if (text_in.substr(0, 3) == "\xEF\xBB\xBF") text_in.remove_prefix(3); // a UTF-8 byte order mark
  // The values are counted first: a file of small values would cost far
  // more memory as JSON values than as text.
  size_t values = 0;
  bool in_string = false;
  for (size_t i = 0; i < text_in.size(); ++i) {
    char c = text_in[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == ',' || c == '[' || c == '{') {
      ++values;
    }
  }
  if (values > kMaxJsonValues)
    return refused(file, " more than " + std::to_string(kMaxJsonValues) + " JSON values");
  json::parse_options options;
  options.max_depth = 32;
  json::stream_parser p({}, options);
  boost::system::error_code ec;
  size_t used = p.write(text_in.data(), text_in.size(), ec); // (data after the value is an error)
  if (!ec) p.finish(ec);
  if (ec) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < used && i < text_in.size(); ++i) {
      if (text_in[i] == '\n') ++line, column = 1;
      else ++column;
    }
    return refused(file, std::to_string(line) + ":" + std::to_string(column) + ": not JSON: " + ec.message());
  }
  json::value root = p.release();
  auto wrong = [&](const std::string& path, const std::string& what) { return refused(file, " " + path + ": " + what); };
  if (!root.is_object()) return wrong("(the top)", "expected an object with \"testsuites\" (is this twister.json?)");
  const json::value* suites_v = root.get_object().if_contains("testsuites");
  if (!suites_v || !suites_v->is_array())
    return wrong("testsuites", "expected an array (is this twister.json?)");
  Collector collected(limits, "twister");
  const json::array& suites = suites_v->get_array();
  for (size_t s = 0; s < suites.size(); ++s) {
    std::string path = "testsuites[" + std::to_string(s) + "]";
    if (!suites[s].is_object()) return wrong(path, "expected an object");
    const json::object& suite = suites[s].get_object();
    std::optional<std::string> name = text(suite, "name"), platform = text(suite, "platform"),
                               status = text(suite, "status"), reason = text(suite, "reason"),
                               dut = text(suite, "dut"), log = text(suite, "log");
    for (auto [key, v] : {std::pair{"name", &name}, std::pair{"platform", &platform}, std::pair{"status", &status},
                          std::pair{"reason", &reason}, std::pair{"dut", &dut}, std::pair{"log", &log}})
      if (!*v) return wrong(path + "." + key, "expected a string");
    if (name->empty()) return wrong(path + ".name", "expected the test suite's name");
    for (auto* v : {&name, &platform, &dut}) **v = head(std::move(**v), limits.max_name_bytes);
    *reason = head(std::move(*reason), limits.max_text_bytes);
    bool log_cut = log->size() > limits.max_text_bytes;
    if (log_cut) *log = log->substr(log->size() - limits.max_text_bytes);
    // A suite that did not pass, fail or run its cases: its cases that did
    // not end (blocked, started, none) take its status and reason.
    bool suite_failed = *status == "error" || *status == "failed";
    auto suiteTime = [&](const json::object& o, const std::string& where) -> Result<double> {
      const json::value* t = o.if_contains("execution_time");
      if (!t || t->is_null()) return 0.0;
      std::optional<double> v;
      if (t->is_string()) v = seconds(t->get_string());
      else if (t->is_number()) v = t->to_number<double>();
      if (!v || !std::isfinite(*v) || *v < 0) return wrong(where + ".execution_time", "expected a number of seconds");
      return *v;
    };
    const json::value* cases_v = suite.if_contains("testcases");
    if (cases_v && !cases_v->is_null() && !cases_v->is_array()) return wrong(path + ".testcases", "expected an array");
    const json::array empty;
    const json::array& cases = cases_v && cases_v->is_array() ? cases_v->get_array() : empty;
    auto known = [](const std::string& st) {
      for (const char* k : {"passed", "failed", "error", "skipped", "filtered", "not run", "blocked", "started", ""})
        if (st == k) return true;
      return false;
    };
    constexpr const char* kStatuses =
        "expected passed, failed, error, skipped, filtered, not run, blocked, started or null";
    if (!known(*status)) return wrong(path + ".status", kStatuses);
    auto statusOf = [&](const std::string& st, HarnessCase* c) {
      if (st == "passed") c->status = CaseStatus::passed;
      else if (st == "failed") c->status = CaseStatus::failed;
      else if (st == "error") c->status = CaseStatus::error;
      else if (st == "skipped" || st == "filtered" || st == "not run") c->status = CaseStatus::skipped;
      else if (suite_failed) { // blocked, started, none: cut short by the suite's failure
        c->status = *status == "error" ? CaseStatus::error : CaseStatus::failed;
        if (c->message.empty()) c->message = *reason;
        c->type = "twister." + (st.empty() ? std::string("none") : st) + " (suite " + *status + ")";
        return;
      } else if (st == "started") { // it began and never ended: never a pass, nor a skip
        c->status = CaseStatus::failed;
        if (c->message.empty()) c->message = "the case started and never ended";
      } else {
        c->status = CaseStatus::skipped;
      }
      c->type = "twister." + st;
    };
    auto base = [&]() {
      HarnessCase c;
      c.suite = *name;
      c.classname = *platform;
      c.platform = *platform;
      c.dut = *dut;
      return c;
    };
    // A case of the suite named `case_name`, from `o` (its time) at `where`.
    auto caseOf = [&](const std::string& case_name, const std::string& message, const json::object& o,
                      const std::string& where, const std::string& st) -> Result<HarnessCase> {
      HarnessCase c = base();
      c.name = head(case_name, limits.max_name_bytes);
      c.message = message;
      Result<double> t = suiteTime(o, where);
      if (!t) return t.status();
      c.seconds = *t;
      statusOf(st, &c);
      return c;
    };
    if (cases.empty()) { // the suite alone (a build error, a filtered suite)
      Result<HarnessCase> made = caseOf(*name, *reason, suite, path, *status);
      if (!made) return made.status();
      HarnessCase c = std::move(*made);
      c.output = *log;
      cutTail(&c.output, limits.max_text_bytes, log_cut);
      if (!collected.add(std::move(c)))
        return wrong(path, "more than " + std::to_string(limits.max_cases) + " test cases");
      continue;
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      std::string case_path = path + ".testcases[" + std::to_string(i) + "]";
      if (!cases[i].is_object()) return wrong(case_path, "expected an object");
      const json::object& tc = cases[i].get_object();
      std::optional<std::string> id = text(tc, "identifier"), st = text(tc, "status"), why = text(tc, "reason"),
                                 clog = text(tc, "log");
      for (auto [key, v] : {std::pair{"identifier", &id}, std::pair{"status", &st}, std::pair{"reason", &why},
                            std::pair{"log", &clog}})
        if (!*v) return wrong(case_path + "." + key, "expected a string");
      if (id->empty()) return wrong(case_path + ".identifier", "expected the case's identifier");
      if (!known(*st)) return wrong(case_path + ".status", kStatuses);
      Result<HarnessCase> made = caseOf(*id, *why, tc, case_path, *st);
      if (!made) return made.status();
      HarnessCase c = std::move(*made);
      bool own = !clog->empty() || (c.status != CaseStatus::failed && c.status != CaseStatus::error);
      const std::string& out = own ? *clog : *log; // (the suite's log, for a failing case without its own)
      c.output = out.substr(out.size() > limits.max_text_bytes ? out.size() - limits.max_text_bytes : 0);
      cutTail(&c.output, limits.max_text_bytes, own ? out.size() > limits.max_text_bytes : log_cut);
      if (!collected.add(std::move(c)))
        return wrong(case_path, "more than " + std::to_string(limits.max_cases) + " test cases");
    }
  }
  return collected.take();
}

Result<HarnessResults> parseHarnessResults(std::string_view text, std::string_view file, const HarnessLimits& limits) {
  size_t i = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
  if (i < text.size() && text[i] == '{') return parseTwisterJson(text, file, limits);
  if (i < text.size() && text[i] == '<') return parseJunitXml(text, file, limits);
  return refused(file, "1:1: neither JUnit XML (starts with '<') nor twister.json (starts with '{')");
}

} // namespace hwfarm::results
