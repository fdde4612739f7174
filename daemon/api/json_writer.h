// Writes JSON text straight into a string, for the API's hot answers (a
// lease is rendered on every acquire, renew and release): no DOM, one buffer.
// Keys and values appear in the order written; strings are escaped as
// RFC 8259 requires (quote, backslash, control characters), and the output
// is always valid UTF-8: a byte of a string that is not part of a valid UTF-8
// sequence is written as \ufffd (U+FFFD, the replacement character), one per
// byte. Valid UTF-8 is copied as it is.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "config/echo.h"

namespace hwfarm::api {

class JsonWriter {
 public:
  JsonWriter() { buf_.resize(1024); }

  JsonWriter& beginObject() { return open('{'); }
  JsonWriter& endObject() { return close('}'); }
  JsonWriter& beginArray() { return open('['); }
  JsonWriter& endArray() { return close(']'); }

  // `k` is one of our own names: never escaped.
  JsonWriter& key(std::string_view k) {
    char* p = room(k.size() + 4);
    if (need_comma_) *p++ = ',';
    *p++ = '"';
    std::memcpy(p, k.data(), k.size());
    p += k.size();
    *p++ = '"';
    *p++ = ':';
    size_ = static_cast<size_t>(p - buf_.data());
    need_comma_ = false;
    return *this;
  }
  // A key from outside (e.g. a Boost.JSON object's), escaped like a value.
  JsonWriter& escapedKey(std::string_view k) {
    if (need_comma_) put(',');
    quoted(k);
    put(':');
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
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
    return raw(std::string_view(digits, static_cast<size_t>(end - digits)));
  }
  JsonWriter& value(int n) { return value(static_cast<int64_t>(n)); }
  JsonWriter& value(uint64_t n) {
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
    return raw(std::string_view(digits, static_cast<size_t>(end - digits)));
  }
  JsonWriter& value(bool b) { return raw(b ? "true" : "false"); }
  JsonWriter& null() { return raw("null"); }
  // A value that is already JSON text.
  JsonWriter& raw(std::string_view json) {
    separate();
    put(json);
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

  std::string_view text() const { return {buf_.data(), size_}; }
  std::string take() {
    buf_.resize(size_);
    size_ = 0;
    need_comma_ = false;
    return std::move(buf_);
  }

 private:
  // Space for `n` more characters; returns where they go.
  char* room(size_t n) {
    if (size_ + n > buf_.size()) buf_.resize(std::max(buf_.size() * 2, size_ + n));
    return buf_.data() + size_;
  }
  void put(std::string_view s) {
    std::memcpy(room(s.size()), s.data(), s.size());
    size_ += s.size();
  }
  void put(char c) {
    *room(1) = c;
    ++size_;
  }
  JsonWriter& open(char c) {
    separate();
    put(c);
    need_comma_ = false;
    return *this;
  }
  JsonWriter& close(char c) {
    put(c);
    need_comma_ = true;
    return *this;
  }
  void separate() {
    if (need_comma_) put(',');
    need_comma_ = true;
  }
  // ASCII that needs no escape (bytes from 0x80 on are checked as UTF-8).
  static bool plain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }
  // Length of the prefix of `s` that is plain ASCII, 8 bytes at a time.
  static size_t plainPrefix(std::string_view s) {
    constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
    auto zeroByte = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; }; // a 0x00 byte in v
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t v;
      std::memcpy(&v, s.data() + i, 8);
      // Bytes below 0x20, '"', '\\' and bytes from 0x80 (UTF-8, validated one by one).
      uint64_t control = (v - 0x2020202020202020ULL) & ~v & kHigh;
      if ((v & kHigh) | control | zeroByte(v ^ (kOnes * '"')) | zeroByte(v ^ (kOnes * '\\'))) break;
    }
    while (i < s.size() && plain(static_cast<unsigned char>(s[i]))) ++i;
    return i;
  }
  void quoted(std::string_view s) {
    size_t clean = plainPrefix(s);
    if (clean == s.size()) {
      char* p = room(s.size() + 2);
      *p++ = '"';
      std::memcpy(p, s.data(), s.size());
      p[s.size()] = '"';
      size_ += s.size() + 2;
      return;
    }
    // Worst case: every character after the clean prefix becomes \u00XX.
    char* p = room(clean + (s.size() - clean) * 6 + 2);
    *p++ = '"';
    std::memcpy(p, s.data(), clean);
    p += clean;
    static constexpr char kHex[] = "0123456789abcdef";
    for (size_t i = clean; i < s.size(); ++i) {
      char ch = s[i];
      auto c = static_cast<unsigned char>(ch);
      if (plain(c)) {
        *p++ = ch;
        continue;
      }
      if (c >= 0x80) {
        size_t n = config::utf8SequenceLength(s.substr(i));
        if (n == 0) {
          std::memcpy(p, "\\ufffd", 6);
          p += 6;
        } else {
          std::memcpy(p, s.data() + i, n); // at most 4 bytes: within the 6 per byte reserved
          p += n;
          i += n - 1;
        }
        continue;
      }
      *p++ = '\\';
      switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        default:
          *p++ = 'u';
          *p++ = '0';
          *p++ = '0';
          *p++ = kHex[c >> 4];
          *p++ = kHex[c & 15];
      }
    }
    *p++ = '"';
    size_ = static_cast<size_t>(p - buf_.data());
  }

  std::string buf_; // [0, size_) is written; the rest is room
  size_t size_ = 0;
  bool need_comma_ = false;
};

} // namespace hwfarm::api
