// Writes JSON text straight into a string, for the API's hot answers (a
// lease is rendered on every acquire, renew and release): no DOM, one buffer.
// Keys and values appear in the order written; strings are escaped as
// RFC 8259 requires (quote, backslash, control characters).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hwfarm::api {

class JsonWriter {
 public:
  JsonWriter() { out_.reserve(512); }

  JsonWriter& beginObject() { return open('{'); }
  JsonWriter& endObject() { return close('}'); }
  JsonWriter& beginArray() { return open('['); }
  JsonWriter& endArray() { return close(']'); }

  // `k` is one of our own names: never escaped.
  JsonWriter& key(std::string_view k) {
    if (need_comma_) out_ += ',';
    out_ += '"';
    out_ += k;
    out_ += "\":";
    need_comma_ = false;
    return *this;
  }
  JsonWriter& value(std::string_view s) {
    separate();
    quoted(s);
    return *this;
  }
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(int64_t n) {
    separate();
    out_ += std::to_string(n);
    return *this;
  }
  JsonWriter& value(int n) { return value(static_cast<int64_t>(n)); }
  JsonWriter& value(uint64_t n) {
    separate();
    out_ += std::to_string(n);
    return *this;
  }
  JsonWriter& value(bool b) { return raw(b ? "true" : "false"); }
  JsonWriter& null() { return raw("null"); }
  // A value that is already JSON text.
  JsonWriter& raw(std::string_view json) {
    separate();
    out_ += json;
    return *this;
  }
  // Shorthands for one member.
  template <class T>
  JsonWriter& member(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }
  // A string, or null when empty.
  JsonWriter& stringOrNull(std::string_view k, std::string_view v) {
    key(k);
    return v.empty() ? null() : value(v);
  }

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  JsonWriter& open(char c) {
    separate();
    out_ += c;
    need_comma_ = false;
    return *this;
  }
  JsonWriter& close(char c) {
    out_ += c;
    need_comma_ = true;
    return *this;
  }
  void separate() {
    if (need_comma_) out_ += ',';
    need_comma_ = true;
  }
  static bool plain(unsigned char c) { return c >= 0x20 && c != '"' && c != '\\'; }
  void quoted(std::string_view s) {
    size_t clean = 0; // leading characters that need no escape (usually all)
    while (clean < s.size() && plain(static_cast<unsigned char>(s[clean]))) ++clean;
    out_ += '"';
    out_.append(s.data(), clean);
    if (clean == s.size()) {
      out_ += '"';
      return;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    for (size_t i = clean; i < s.size(); ++i) {
      auto c = static_cast<unsigned char>(s[i]);
      if (plain(c)) {
        out_ += static_cast<char>(c);
        continue;
      }
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        case '\b': out_ += "\\b"; break;
        case '\f': out_ += "\\f"; break;
        default:
          out_ += "\\u00";
          out_ += kHex[c >> 4];
          out_ += kHex[c & 15];
      }
    }
    out_ += '"';
  }

  std::string out_;
  bool need_comma_ = false;
};

} // namespace hwfarm::api
