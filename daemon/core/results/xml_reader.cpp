#include "daemon/core/results/xml_reader.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace hwfarm::results {
namespace {

bool nameStart(unsigned char c) { return std::isalpha(c) || c == '_' || c == ':' || c >= 0x80; }
bool nameChar(unsigned char c) { return nameStart(c) || std::isdigit(c) || c == '-' || c == '.'; }
bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void appendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// What a message shows of the input's bytes: printable ASCII as is, others as \xNN.
std::string shown(std::string_view s, size_t max = 40) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

} // namespace

XmlReader::XmlReader(std::string_view text, XmlLimits limits) : text_(text), limits_(limits) {
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3; // a UTF-8 byte order mark
}

void XmlReader::where(size_t pos, size_t* line, size_t* column) const {
  if (pos < counted_pos_) counted_pos_ = 0, counted_line_ = 1, counted_line_start_ = 0;
  for (size_t i = counted_pos_; i < pos && i < text_.size(); ++i)
    if (text_[i] == '\n') ++counted_line_, counted_line_start_ = i + 1;
  counted_pos_ = pos;
  *line = counted_line_;
  *column = pos - counted_line_start_ + 1;
}

XmlReader::Event XmlReader::failAt(size_t pos, const std::string& what) {
  size_t line = 1, column = 1;
  where(std::min(pos, text_.size()), &line, &column);
  error_ = std::to_string(line) + ":" + std::to_string(column) + ": " + what;
  if (root_seen_ && pos >= text_.size() && what.find("cut short?)") == std::string::npos)
    error_ += " (the file ends there: cut short?)";
  Event e;
  e.kind = Kind::error;
  e.text = error_;
  e.line = line;
  e.column = column;
  return e;
}

XmlReader::Event XmlReader::fail(const std::string& what) { return failAt(pos_, what); }

void XmlReader::skipSpace() {
  while (pos_ < text_.size() && space(text_[pos_])) ++pos_;
}

bool XmlReader::readName(std::string* out) {
  size_t start = pos_;
  if (pos_ >= text_.size() || !nameStart(static_cast<unsigned char>(text_[pos_]))) return false;
  while (pos_ < text_.size() && nameChar(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  if (pos_ - start > limits_.max_name_bytes) {
    fail("a name longer than " + std::to_string(limits_.max_name_bytes) + " bytes");
    pos_ = start;
    return false;
  }
  out->assign(text_.substr(start, pos_ - start));
  return true;
}

bool XmlReader::unescape(size_t from, size_t to, std::string* out, bool attribute) {
  out->reserve(out->size() + (to - from));
  for (size_t i = from; i < to;) {
    char c = text_[i];
    if (c == '<') {
      failAt(i, "'<' in a value");
      return false;
    }
    if (c != '&') {
      // Line ends are normalized to \n (XML 1.0, 2.11); in an attribute's
      // value they and tabs become spaces (3.3.3), references excepted.
      if (c == '\r') {
        out->push_back(attribute ? ' ' : '\n');
        i += (i + 1 < to && text_[i + 1] == '\n') ? 2 : 1;
        continue;
      }
      out->push_back(attribute && (c == '\n' || c == '\t') ? ' ' : c);
      ++i;
      continue;
    }
    size_t semi = text_.find(';', i);
    if (semi == std::string_view::npos && to == text_.size()) {
      failAt(i, open_.empty() ? std::string("the file ends in a reference (cut short?)")
                              : "the file ends inside <" + open_.back() + "> (cut short?)");
      return false;
    }
    if (semi == std::string_view::npos || semi >= to || semi - i > 12) {
      failAt(i, "an '&' that starts no reference (write &amp;)");
      return false;
    }
    std::string_view ref = text_.substr(i + 1, semi - i - 1);
    if (ref == "lt") out->push_back('<');
    else if (ref == "gt") out->push_back('>');
    else if (ref == "amp") out->push_back('&');
    else if (ref == "quot") out->push_back('"');
    else if (ref == "apos") out->push_back('\'');
    else if (ref.size() >= 2 && ref[0] == '#') {
      bool hex = ref[1] == 'x';
      std::string_view digits = ref.substr(hex ? 2 : 1);
      uint32_t cp = 0;
      bool ok = !digits.empty();
      for (char d : digits) {
        int v = std::isdigit(static_cast<unsigned char>(d)) ? d - '0'
                : hex && std::isxdigit(static_cast<unsigned char>(d)) ? (std::tolower(d) - 'a' + 10)
                                                                       : -1;
        if (v < 0 || cp > 0x10FFFF) {
          ok = false;
          break;
        }
        cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(v);
      }
      if (!ok || cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        failAt(i, "a character reference to no character: &" + shown(ref) + ";");
        return false;
      }
      appendUtf8(cp, out);
    } else {
      failAt(i, "an unknown entity &" + shown(ref) + "; (only &lt; &gt; &amp; &quot; &apos; and &#N;)");
      return false;
    }
    i = semi + 1;
  }
  return true;
}

XmlReader::Event XmlReader::next() {
  if (!error_.empty()) {
    Event e;
    e.kind = Kind::error;
    e.text = error_;
    return e;
  }
  if (pending_end_) {
    pending_end_ = false;
    Event e;
    e.kind = Kind::end;
    e.name = std::move(pending_name_);
    e.line = pending_line_;
    e.column = pending_column_;
    open_.pop_back();
    if (open_.empty()) root_closed_ = true;
    return e;
  }
  while (pos_ < text_.size()) {
    if (text_[pos_] != '<') return charData();
    if (startsWith("<!--")) {
      size_t close = text_.find("-->", pos_ + 4);
      if (close == std::string_view::npos) return fail("a comment that never ends (no -->)");
      pos_ = close + 3;
      continue;
    }
    if (startsWith("<?")) {
      size_t close = text_.find("?>", pos_ + 2);
      if (close == std::string_view::npos) return fail("a processing instruction that never ends (no ?>)");
      pos_ = close + 2;
      continue;
    }
    if (startsWith("<![CDATA[")) return charData();
    if (startsWith("<!")) return fail("a DOCTYPE or other declaration, which is not accepted");
    if (startsWith("</")) return endTag();
    return startTag();
  }
  if (!root_seen_) return fail("no element: the file is empty or holds only text");
  if (!open_.empty()) return fail("the file ends inside <" + open_.back() + "> (cut short?)");
  Event e;
  e.kind = Kind::done;
  return e;
}

XmlReader::Event XmlReader::startTag() {
  size_t at = pos_;
  ++pos_; // '<'
  Event e;
  e.kind = Kind::start;
  where(at, &e.line, &e.column);
  if (!readName(&e.name))
    return error_.empty() ? fail("'<' not followed by an element name (write &lt;)") : next();
  if (root_closed_) return failAt(at, "a second root element <" + e.name + ">");
  if (open_.size() >= limits_.max_depth)
    return failAt(at, "elements nested deeper than " + std::to_string(limits_.max_depth));
  for (;;) {
    size_t before = pos_;
    skipSpace();
    if (pos_ >= text_.size()) return failAt(at, "the tag <" + e.name + " never ends (cut short?)");
    if (text_[pos_] == '>' || startsWith("/>")) break;
    if (pos_ == before) return fail("expected white space, '>' or '/>' in <" + e.name + ">");
    std::string name;
    size_t name_at = pos_;
    if (!readName(&name)) return error_.empty() ? fail("expected an attribute name in <" + e.name + ">") : next();
    skipSpace();
    if (pos_ >= text_.size() || text_[pos_] != '=') return fail("expected '=' after attribute " + name);
    ++pos_;
    skipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '"' && text_[pos_] != '\''))
      return fail("expected a quoted value for attribute " + name);
    char quote = text_[pos_++];
    size_t close = text_.find(quote, pos_);
    if (close == std::string_view::npos) return fail("the value of attribute " + name + " never ends (cut short?)");
    for (const auto& [n, v] : e.attributes)
      if (n == name) return failAt(name_at, "attribute " + name + " given twice");
    if (e.attributes.size() >= limits_.max_attributes)
      return fail("more than " + std::to_string(limits_.max_attributes) + " attributes in <" + e.name + ">");
    std::string value;
    if (!unescape(pos_, close, &value, true)) return next();
    e.attributes.emplace_back(std::move(name), std::move(value));
    pos_ = close + 1;
  }
  root_seen_ = true;
  open_.push_back(e.name);
  if (text_[pos_] == '/') {
    pos_ += 2;
    pending_end_ = true;
    pending_name_ = e.name;
    pending_line_ = e.line;
    pending_column_ = e.column;
  } else {
    ++pos_;
  }
  return e;
}

XmlReader::Event XmlReader::endTag() {
  size_t at = pos_;
  pos_ += 2;
  Event e;
  e.kind = Kind::end;
  where(at, &e.line, &e.column);
  if (!readName(&e.name)) return error_.empty() ? fail("'</' not followed by an element name") : next();
  skipSpace();
  if (pos_ >= text_.size() || text_[pos_] != '>') return fail("expected '>' to end </" + e.name);
  ++pos_;
  if (open_.empty()) return failAt(at, "</" + e.name + "> closes no element");
  if (open_.back() != e.name) return failAt(at, "</" + e.name + "> closes <" + open_.back() + ">");
  open_.pop_back();
  if (open_.empty()) root_closed_ = true;
  return e;
}

XmlReader::Event XmlReader::charData() {
  Event e;
  e.kind = Kind::text;
  where(pos_, &e.line, &e.column);
  bool any_text = false; // other than white space
  while (pos_ < text_.size()) {
    if (startsWith("<![CDATA[")) {
      size_t close = text_.find("]]>", pos_ + 9);
      if (close == std::string_view::npos) return fail("a CDATA section that never ends (no ]]>)");
      e.text.append(text_.substr(pos_ + 9, close - pos_ - 9));
      any_text = true;
      pos_ = close + 3;
      continue;
    }
    if (text_[pos_] == '<') break;
    size_t lt = std::min(text_.find('<', pos_), text_.size());
    size_t before = e.text.size();
    if (!unescape(pos_, lt, &e.text)) return next();
    if (std::any_of(e.text.begin() + static_cast<std::ptrdiff_t>(before), e.text.end(), [](char c) { return !space(c); }))
      any_text = true;
    pos_ = lt;
  }
  if (open_.empty() && any_text)
    return failAt(pos_ - 1, root_seen_ ? "text after the root element" : "text before the root element");
  return e;
}

} // namespace hwfarm::results
