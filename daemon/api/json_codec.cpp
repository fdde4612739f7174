#include "daemon/api/json_codec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <ctime>
#include <set>
#include <sstream>

#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>

#include "config/echo.h"
#include "daemon/api/json_writer.h"

namespace hwfarm::api {
namespace json = boost::json;

Rfc3339::Rfc3339(int64_t unix_ms) {
  std::memcpy(text_, "0000-01-01T00:00:00.000Z", sizeof text_);
  int64_t ms = ((unix_ms % 1000) + 1000) % 1000;
  int64_t seconds = (unix_ms - ms) / 1000;
  int64_t days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400;
  int64_t in_day = seconds - days * 86400;
  // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t day = doy - (153 * mp + 2) / 5 + 1;
  int64_t month = mp < 10 ? mp + 3 : mp - 9;
  int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  if (year < 0 || year > 9999) return;
  auto put = [this](size_t at, int64_t value, int digits) {
    for (int i = digits - 1; i >= 0; --i, value /= 10)
      text_[at + static_cast<size_t>(i)] = static_cast<char>('0' + value % 10);
  };
  put(0, year, 4);
  put(5, month, 2);
  put(8, day, 2);
  put(11, in_day / 3600, 2);
  put(14, in_day / 60 % 60, 2);
  put(17, in_day % 60, 2);
  put(20, ms, 3);
}

std::string rfc3339(int64_t unix_ms) { return std::string(Rfc3339(unix_ms).view()); }

namespace {

// Builds a value as Boost.JSON's own parser does (through a value_stack) and
// counts the members it saw; an object built from n members with fewer keys
// had duplicates (Boost.JSON keeps the last one silently).
struct CountingHandler {
  static constexpr size_t max_object_size = json::object::max_size();
  static constexpr size_t max_array_size = json::array::max_size();
  static constexpr size_t max_key_size = json::string::max_size();
  static constexpr size_t max_string_size = json::string::max_size();

  json::value_stack st;
  size_t members = 0;

  CountingHandler(json::storage_ptr sp, unsigned char* buffer, size_t size) : st(std::move(sp), buffer, size) {}
  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) { return true; }
  bool on_object_end(size_t n, json::error_code&) {
    members += n;
    st.push_object(n);
    return true;
  }
  bool on_array_begin(json::error_code&) { return true; }
  bool on_array_end(size_t n, json::error_code&) {
    st.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, size_t, json::error_code&) {
    st.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, size_t, json::error_code&) {
    st.push_key(s);
    return true;
  }
  bool on_string_part(json::string_view s, size_t, json::error_code&) {
    st.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, size_t, json::error_code&) {
    st.push_string(s);
    return true;
  }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(int64_t i, json::string_view, json::error_code&) {
    st.push_int64(i);
    return true;
  }
  bool on_uint64(uint64_t u, json::string_view, json::error_code&) {
    st.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view, json::error_code&) {
    st.push_double(d);
    return true;
  }
  bool on_bool(bool b, json::error_code&) {
    st.push_bool(b);
    return true;
  }
  bool on_null(json::error_code&) {
    st.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }
};

// Names the first repeated key of `body` (which parsed cleanly): its path,
// e.g. "holder.job". Only run once a duplicate is known to exist.
struct DuplicateFinder {
  static constexpr size_t max_object_size = json::object::max_size();
  static constexpr size_t max_array_size = json::array::max_size();
  static constexpr size_t max_key_size = json::string::max_size();
  static constexpr size_t max_string_size = json::string::max_size();

  struct Level {
    bool object = false;
    std::string key; // the key this value sits under, in its parent
    std::set<std::string, std::less<>> keys;
  };
  std::vector<Level> levels;
  std::string pending_key, partial, found;

  bool open(bool object) {
    levels.push_back(Level{object, std::move(pending_key), {}});
    pending_key.clear();
    return true;
  }
  bool close() {
    levels.pop_back();
    return true;
  }
  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) { return open(true); }
  bool on_object_end(size_t, json::error_code&) { return close(); }
  bool on_array_begin(json::error_code&) { return open(false); }
  bool on_array_end(size_t, json::error_code&) { return close(); }
  bool on_key_part(json::string_view s, size_t, json::error_code&) {
    partial.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, size_t, json::error_code& ec) {
    partial.append(s.data(), s.size());
    Level& level = levels.back();
    if (!level.keys.insert(partial).second) {
      for (const Level& l : levels)
        if (!l.key.empty()) found += l.key + ".";
      found += partial;
      ec = json::error::syntax; // stops the parse: the answer is known
      return false;
    }
    pending_key = std::move(partial);
    partial.clear();
    return true;
  }
  bool value() {
    pending_key.clear();
    return true;
  }
  bool on_string_part(json::string_view, size_t, json::error_code&) { return true; }
  bool on_string(json::string_view, size_t, json::error_code&) { return value(); }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(int64_t, json::string_view, json::error_code&) { return value(); }
  bool on_uint64(uint64_t, json::string_view, json::error_code&) { return value(); }
  bool on_double(double, json::string_view, json::error_code&) { return value(); }
  bool on_bool(bool, json::error_code&) { return value(); }
  bool on_null(json::error_code&) { return value(); }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }
};

// Members of every object in `v`.
size_t countMembers(const json::value& v) {
  if (const json::object* o = v.if_object()) {
    size_t n = o->size();
    for (const auto& kv : *o) n += countMembers(kv.value());
    return n;
  }
  if (const json::array* a = v.if_array()) {
    size_t n = 0;
    for (const auto& item : *a) n += countMembers(item);
    return n;
  }
  return 0;
}

std::string duplicateKeyIn(const std::string& body) {
  json::basic_parser<DuplicateFinder> p(json::parse_options{});
  json::error_code ec;
  p.write_some(false, body.data(), body.size(), ec);
  return std::move(p.handler().found);
}

// A refusal of a request body: its 400 detail.
Status invalid(std::string detail) { return Status::error(Code::invalid_argument, std::move(detail)); }

// Parses `body` into `into` (its memory from `storage`); the object, or the
// 400 detail. A key repeated within one object is an error naming it: which
// of the two was meant is not ours to guess.
Result<json::object*> parseInto(const std::string& body, json::value& into, json::storage_ptr storage) {
  unsigned char temp[BOOST_JSON_STACK_BUFFER_SIZE];
  json::basic_parser<CountingHandler> p(json::parse_options{}, json::storage_ptr(), temp, sizeof temp);
  // `into` must use `storage` too, or the parsed tree is copied into it.
  p.handler().st.reset(std::move(storage));
  json::error_code ec;
  size_t used = p.write_some(false, body.data(), body.size(), ec);
  if (!ec && used < body.size()) ec = json::error::extra_data;
  if (!ec && !p.done()) ec = json::error::incomplete;
  if (ec) return invalid("malformed JSON: " + ec.message());
  into = p.handler().st.release();
  if (countMembers(into) != p.handler().members) return invalid(config::echo(duplicateKeyIn(body)) + ": duplicate field");
  if (!into.is_object()) return invalid("expected a JSON object");
  return &into.as_object();
}

} // namespace

Result<json::object> parseObject(const std::string& body) {
  json::value v;
  Result<json::object*> object = parseInto(body, v, {});
  if (!object) return object.status();
  return std::move(**object);
}

namespace {

std::string kindOf(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return "a boolean";
    case json::kind::int64:
    case json::kind::uint64: return "an integer";
    case json::kind::double_: return "a number";
    case json::kind::string: return "a string";
    case json::kind::array: return "an array";
    case json::kind::object: return "an object";
  }
  return "something else";
}

// Reads fields of one JSON object, remembering which it was asked about.
class Fields {
 public:
  // The first failure goes to `error` (shared by the fields of nested objects).
  Fields(const json::object& o, std::string prefix, Status* error)
      : o_(o), prefix_(std::move(prefix)), error_(error) {}

  bool failed() const { return failed_; }
  // The key may be the client's (an unknown field): it is echoed bounded.
  void fail(std::string_view key, const std::string& message) {
    if (failed_) return;
    failed_ = true;
    *error_ = invalid(prefix_ + config::echo(key) + ": " + message);
  }
  const json::value* get(std::string_view key, bool required = false) {
    if (known_count_ < known_.size()) known_[known_count_++] = key;
    auto it = o_.find(key);
    if (it == o_.end()) {
      if (required) fail(key, "required field is missing");
      return nullptr;
    }
    return &it->value();
  }
  std::optional<std::string> text(std::string_view key, size_t max, bool required = false) {
    const json::value* v = get(key, required);
    if (!v) return std::nullopt;
    if (!v->is_string()) {
      fail(key, "expected a string, got " + kindOf(*v));
      return std::nullopt;
    }
    if (v->as_string().size() > max) {
      fail(key, "longer than " + std::to_string(max) + " characters");
      return std::nullopt;
    }
    std::string_view text(v->as_string().data(), v->as_string().size());
    if (!checkText(key, text)) return std::nullopt;
    return std::string(text);
  }
  // Identifiers and holder fields are compared, stored and shown: a control
  // character (U+0000-U+001F, U+007F) in one is refused, never cut or kept.
  bool checkText(std::string_view key, std::string_view text) {
    size_t at = config::findControlCharacter(text);
    if (at == std::string_view::npos) return true;
    char code[8];
    std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned char>(text[at]));
    fail(key, std::string("contains the control character ") + code + " at byte " + std::to_string(at) +
                  " (control characters U+0000-U+001F and U+007F are not allowed)");
    return false;
  }
  std::optional<double> number(std::string_view key, double lo, double hi, bool lo_open, const char* limit) {
    const json::value* v = get(key);
    if (!v) return std::nullopt;
    auto expected = [&] {
      std::ostringstream text;
      text << "expected a number " << (lo_open ? "above " : "from ") << lo << (lo_open ? " and up to " : " to ")
           << hi << limit;
      return text.str();
    };
    if (!v->is_number()) {
      fail(key, expected() + ", got " + kindOf(*v));
      return std::nullopt;
    }
    double d = v->to_number<double>();
    if (!std::isfinite(d) || d > hi || d < lo || (lo_open && d == lo)) {
      fail(key, expected() + ", got " + json::serialize(*v));
      return std::nullopt;
    }
    return d;
  }
  std::optional<int64_t> integer(std::string_view key, int64_t lo, int64_t hi, const char* limit) {
    const json::value* v = get(key);
    if (!v) return std::nullopt;
    auto expected = [&] {
      return "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + limit;
    };
    if (!v->is_int64() && !v->is_uint64()) {
      fail(key, expected() + ", got " + (v->is_double() ? json::serialize(*v) : kindOf(*v)));
      return std::nullopt;
    }
    if (v->is_uint64() && v->as_uint64() > static_cast<uint64_t>(hi)) {
      fail(key, expected() + ", got " + json::serialize(*v));
      return std::nullopt;
    }
    int64_t i = v->is_int64() ? v->as_int64() : static_cast<int64_t>(v->as_uint64());
    if (i < lo || i > hi) {
      fail(key, expected() + ", got " + std::to_string(i));
      return std::nullopt;
    }
    return i;
  }
  std::optional<std::vector<std::string>> texts(std::string_view key, size_t max_items) {
    const json::value* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_array()) {
      fail(key, "expected an array of strings, got " + kindOf(*v));
      return std::nullopt;
    }
    if (v->as_array().size() > max_items) {
      fail(key, "more than " + std::to_string(max_items) + " items");
      return std::nullopt;
    }
    std::vector<std::string> out;
    for (const auto& item : v->as_array()) {
      if (!item.is_string() || item.as_string().empty() || item.as_string().size() > 64) {
        fail(key, "expected non-empty strings of at most 64 characters");
        return std::nullopt;
      }
      std::string_view text(item.as_string().data(), item.as_string().size());
      if (!checkText(std::string(key) + "[" + std::to_string(out.size()) + "]", text)) return std::nullopt;
      out.emplace_back(text);
    }
    return out;
  }
  const json::object* object(std::string_view key, bool required = false) {
    const json::value* v = get(key, required);
    if (!v) return nullptr;
    if (!v->is_object()) {
      fail(key, "expected an object, got " + kindOf(*v));
      return nullptr;
    }
    return &v->as_object();
  }
  // Unknown fields are errors: a typo must not silently fall back to a default.
  void finish() {
    for (const auto& kv : o_) {
      std::string_view k(kv.key().data(), kv.key().size());
      if (std::find(known_.begin(), known_.begin() + static_cast<std::ptrdiff_t>(known_count_), k) !=
          known_.begin() + static_cast<std::ptrdiff_t>(known_count_))
        continue;
      fail(k, "unknown field");
      return;
    }
  }

 private:
  const json::object& o_;
  std::string prefix_;
  Status* error_;
  std::array<std::string_view, 16> known_; // the fields asked about (a handful per object)
  size_t known_count_ = 0;
  bool failed_ = false;
};

} // namespace

Result<AcquireRequest> parseAcquire(const std::string& body, const config::Limits& limits,
                                    const config::LeaseConfig& leases) {
  // The parsed tree lives in this buffer (every lease request is parsed).
  unsigned char buffer[4096];
  json::monotonic_resource memory(buffer, sizeof buffer);
  json::value parsed(&memory); // same storage as the parse: moved in, not copied out to the heap
  Result<json::object*> object = parseInto(body, parsed, &memory);
  if (!object) return object.status();
  Status error;
  Fields f(**object, "", &error);
  AcquireRequest out;
  lease::LeaseRequest& r = out.request;
  if (const json::object* sel = f.object("selector", true)) {
    Fields s(*sel, "selector.", &error);
    if (auto v = s.text("type", 64)) r.selector.type = *v;
    if (auto v = s.texts("labels", 32)) r.selector.labels = *v;
    if (auto v = s.text("worker", 64)) r.selector.worker = *v;
    s.finish();
    if (!s.failed() && r.selector.type.empty() && r.selector.labels.empty())
      f.fail("selector", "needs a board type or at least one label");
    if (s.failed()) return error;
  }
  if (auto v = f.integer("count", 1, limits.max_count, " (limits.max_count)")) r.count = static_cast<int>(*v);
  r.ttl_ms = static_cast<int64_t>(leases.default_ttl_s * 1000);
  if (auto v = f.number("ttl_s", 0, limits.max_ttl_s, true, " (limits.max_ttl_s)"))
    r.ttl_ms = std::max<int64_t>(1, static_cast<int64_t>(*v * 1000));
  if (auto v = f.number("wait_s", 0, limits.max_wait_s, false, " (limits.max_wait_s)"))
    out.wait_ms = static_cast<int64_t>(*v * 1000);
  if (auto v = f.integer("priority", -100, 100, "")) r.priority = static_cast<int>(*v);
  if (const json::object* holder = f.object("holder")) {
    Fields h(*holder, "holder.", &error);
    if (auto v = h.text("job", 256)) r.holder.job = *v;
    if (auto v = h.text("build", 64)) r.holder.build = *v;
    if (auto v = h.text("stage", 256)) r.holder.stage = *v;
    if (auto v = h.text("url", 1024)) r.holder.url = *v;
    h.finish();
    if (h.failed()) return error;
  }
  if (auto v = f.text("context", 16, true)) {
    auto c = lease::contextFromString(*v);
    if (!c) f.fail("context", "expected \"pr\", \"pr-tagged\", \"nightly\" or \"manual\", got " + config::quoteForMessage(*v));
    else r.context = *c;
  }
  if (auto v = f.text("idempotency_key", 128)) r.idempotency_key = *v;
  f.finish();
  if (f.failed()) return error;
  return out;
}

Result<int64_t> parseRenew(const std::string& body, const config::Limits& limits, int64_t current_ttl_ms) {
  if (body.empty()) return current_ttl_ms;
  Result<json::object> object = parseObject(body);
  if (!object) return object.status();
  Status error;
  Fields f(*object, "", &error);
  int64_t ttl = current_ttl_ms;
  if (auto v = f.number("ttl_s", 0, limits.max_ttl_s, true, " (limits.max_ttl_s)"))
    ttl = std::max<int64_t>(1, static_cast<int64_t>(*v * 1000));
  f.finish();
  if (f.failed()) return error;
  return ttl;
}

Result<std::string> parseReason(const std::string& body) {
  if (body.empty()) return std::string();
  Result<json::object> object = parseObject(body);
  if (!object) return object.status();
  Status error;
  Fields f(*object, "", &error);
  std::string reason;
  if (auto v = f.text("reason", 256)) reason = *v;
  f.finish();
  if (f.failed()) return error;
  return reason;
}

Result<PinRequest> parsePin(const std::string& body) {
  Result<json::object> object = parseObject(body);
  if (!object) return object.status();
  Status error;
  Fields f(*object, "", &error);
  PinRequest pin;
  auto tier = f.integer("tier", 1, 3, "");
  if (auto v = f.text("reason", 256)) pin.reason = *v;
  f.finish();
  if (f.failed()) return error;
  if (!tier) return invalid("tier: required field is missing");
  if (pin.reason.empty()) return invalid("reason: required: say why the tier is pinned");
  pin.tier = static_cast<int>(*tier);
  return pin;
}

namespace {

// Whole seconds as an integer (the common case), fractions as a number.
void writeSeconds(JsonWriter& w, int64_t ms) {
  if (ms % 1000 == 0) w.value(ms / 1000);
  else w.raw(json::serialize(json::value(static_cast<double>(ms) / 1000.0)));
}

} // namespace

void writeJson(JsonWriter& w, const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: w.null(); return;
    case json::kind::bool_: w.value(v.get_bool()); return;
    case json::kind::int64: w.value(v.get_int64()); return;
    case json::kind::uint64: w.value(v.get_uint64()); return;
    case json::kind::double_: w.raw(json::serialize(v)); return;
    case json::kind::string: w.value(std::string_view(v.get_string().data(), v.get_string().size())); return;
    case json::kind::array:
      w.beginArray();
      for (const auto& item : v.get_array()) writeJson(w, item);
      w.endArray();
      return;
    case json::kind::object:
      w.beginObject();
      for (const auto& kv : v.get_object()) {
        w.escapedKey(std::string_view(kv.key().data(), kv.key().size()));
        writeJson(w, kv.value());
      }
      w.endObject();
      return;
  }
}

std::string toJson(const json::value& v) {
  JsonWriter w;
  writeJson(w, v);
  return w.take();
}

void writeSelector(JsonWriter& w, const lease::Selector& s) {
  w.beginObject().member("type", s.type).key("labels").beginArray();
  for (const auto& l : s.labels) w.value(l);
  w.endArray().stringOrNull("worker", s.worker).endObject();
}

void writeLease(JsonWriter& w, const lease::Lease& l, const lease::Scheduler& scheduler) {
  w.beginObject();
  w.member("id", l.id).member("state", lease::toString(l.state));
  w.key("holder").beginObject();
  w.member("principal", l.holder.principal).member("job", l.holder.job).member("build", l.holder.build);
  w.member("stage", l.holder.stage).member("url", l.holder.url).endObject();
  w.member("context", lease::toString(l.context));
  w.key("selector");
  writeSelector(w, l.selector);
  w.member("priority", l.priority).member("idempotency_key", l.idempotency_key);
  w.key("ttl_s");
  writeSeconds(w, l.ttl_ms);
  w.member("granted_at", Rfc3339(l.granted_ms).view()).member("expires_at", Rfc3339(l.expires_ms).view());
  w.member("waited_ms", l.waited_ms);
  w.key("boards").beginArray();
  for (const auto& lb : l.boards) {
    w.beginObject().member("name", lb.name).member("status", lb.lost ? "lost" : "ok");
    if (lb.lost) w.member("lost_at", Rfc3339(lb.lost_ms).view());
    if (const lease::Board* board = scheduler.board(lb.name)) {
      w.member("type", board->spec.type).member("worker", board->spec.worker).member("node", board->spec.node);
      w.key("labels").beginArray();
      for (const auto& label : board->spec.labels) w.value(label);
      w.endArray();
      w.member("usb_serial", board->spec.usb_serial).member("serial_port", board->spec.serial_port);
    }
    w.endObject();
  }
  w.endArray();
  w.key("ended_at");
  if (l.ended_ms) w.value(Rfc3339(l.ended_ms).view());
  else w.null();
  w.member("end_reason", l.end_reason).endObject();
}

std::string leaseJson(const lease::Lease& l, const lease::Scheduler& scheduler) {
  JsonWriter w;
  writeLease(w, l, scheduler);
  return w.take();
}

json::object boardJson(const config::WorkerConfig& worker, const config::BoardConfig& board,
                       const lease::Board* runtime) {
  json::array labels;
  for (const auto& l : board.labels) labels.emplace_back(l);
  json::object out{{"name", board.name}, {"type", board.type},   {"labels", std::move(labels)},
                   {"worker", worker.name}, {"node", worker.node}, {"driver", board.driver}};
  if (runtime) {
    out["state"] = lease::toString(runtime->state);
    out["since"] = runtime->since_ms ? json::value(rfc3339(runtime->since_ms)) : json::value(nullptr);
    out["lease"] = runtime->lease_id.empty() ? json::value(nullptr) : json::value(runtime->lease_id);
    out["reason"] = runtime->reason;
  }
  if (board.driver == "usb") {
    char id[5];
    json::object usb;
    if (board.usb.vendor) {
      std::snprintf(id, sizeof id, "%04x", *board.usb.vendor);
      usb["vendor"] = id;
    }
    if (board.usb.product) {
      std::snprintf(id, sizeof id, "%04x", *board.usb.product);
      usb["product"] = id;
    }
    if (board.usb.serial) usb["serial"] = *board.usb.serial;
    if (board.usb.port) usb["port"] = *board.usb.port;
    out["usb"] = std::move(usb);
    out["serial_port"] = board.serial.port;
    out["flash"] = board.flash.driver.empty() ? json::value(nullptr) : json::value(board.flash.driver);
    out["power"] = board.power.driver;
  } else {
    out["qemu"] = json::object{{"machine", board.qemu.machine}, {"binary", board.qemu.binary}};
  }
  return out;
}

void writeQueueEntry(JsonWriter& w, const lease::LeaseRequest& r, size_t position, int64_t now_ms, int64_t aging_ms) {
  int64_t waited_ms = now_ms - r.arrived_ms;
  w.beginObject().member("ticket", r.ticket).member("position", static_cast<uint64_t>(position));
  w.key("selector");
  writeSelector(w, r.selector);
  w.member("count", r.count).member("priority", r.priority);
  w.key("effective_priority")
      .raw(json::serialize(json::value(r.priority + static_cast<double>(waited_ms) / static_cast<double>(aging_ms))));
  w.member("context", lease::toString(r.context));
  w.key("holder").beginObject().member("principal", r.holder.principal).member("job", r.holder.job);
  w.member("build", r.holder.build).member("stage", r.holder.stage).endObject();
  w.member("waiting_ms", waited_ms).endObject();
}

} // namespace hwfarm::api
