// A small XML reader for the files test harnesses write (JUnit XML from
// pytest, Jenkins' xunit plugin and others): a pull parser over text in
// memory that yields elements, their attributes and their text, one event
// at a time. Bounded for untrusted input: no DTD (a DOCTYPE is refused, so
// no entity can expand), only the five predefined entities and character
// references, a nesting depth, attributes per element and name lengths
// limited. Every refusal says where: "LINE:COL: what". Pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hwfarm::results {

struct XmlLimits {
  size_t max_depth = 64;       // elements open at once
  size_t max_attributes = 64;  // per element
  size_t max_name_bytes = 256; // an element's or attribute's name
};

class XmlReader {
 public:
  enum class Kind { start, end, text, done, error };
  struct Event {
    Kind kind = Kind::done;
    std::string name; // start, end: the element's
    std::vector<std::pair<std::string, std::string>> attributes; // start: in order, values unescaped
    std::string text; // text: character data (CDATA included), unescaped
    size_t line = 1;  // where the event began (1-based)
    size_t column = 1;
  };

  explicit XmlReader(std::string_view text, XmlLimits limits = {});

  // The next event. After `done` or `error` every call gives the same
  // again; `error`'s text is "LINE:COL: what". A self-closing element
  // gives its start and then its end. Text outside the root element (only
  // white space may be there) and runs of white space between elements are
  // given as text too: a caller ignores what it does not need.
  Event next();
  size_t depth() const { return open_.size(); }

 private:
  Event fail(const std::string& what);
  Event failAt(size_t pos, const std::string& what);
  void where(size_t pos, size_t* line, size_t* column) const;
  bool startsWith(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  bool readName(std::string* out);
  void skipSpace();
  // Unescapes [from, to) into *out; false (error_ set) on a bad reference.
  // In an attribute's value literal line ends and tabs become spaces.
  bool unescape(size_t from, size_t to, std::string* out, bool attribute = false);
  Event startTag();
  Event endTag();
  Event charData();

  std::string_view text_;
  XmlLimits limits_;
  size_t pos_ = 0;
  std::vector<std::string> open_; // element names, outermost first
  bool root_seen_ = false;
  bool root_closed_ = false;
  bool pending_end_ = false; // a self-closing element's end comes next
  std::string pending_name_;
  size_t pending_line_ = 1, pending_column_ = 1;
  std::string error_; // once set, every next() repeats it
  // Line counting from the last position asked about (events go forward).
  mutable size_t counted_pos_ = 0, counted_line_ = 1, counted_line_start_ = 0;
};

} // namespace hwfarm::results
