#include "config/toml_reader.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "config/echo.h"
#include "config/suggest.h"

namespace hwfarm::config {

namespace {

// Walks TOML text the way toml++ tokenizes it: strings and comments are
// skipped, and outside them a run of key parts joined by "." is counted until
// a character that ends a key ("=", brackets, braces, ",", a newline).
class ShapeScanner {
 public:
  ShapeScanner(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  std::optional<ConfigError> run() {
    while (at_ < text_.size()) {
      char c = text_[at_];
      if (c == '#') {
        while (at_ < text_.size() && text_[at_] != '\n') advance();
        continue;
      }
      if (c == '"' || c == '\'') {
        startPart();
        bool multi = text_.substr(at_, 3) == std::string_view(c == '"' ? "\"\"\"" : "'''");
        if (multi) {
          skipMultiLine(c);
          endRun(); // a multi-line string is a value, never a key part
        } else {
          skipString(c);
        }
        continue;
      }
      if (c == '.') {
        if (run_parts_ == 0) startPart();
        if (++run_parts_ > kMaxTomlKeyParts)
          return error(run_line_, run_column_,
                       "dotted key has more than " + std::to_string(kMaxTomlKeyParts) + " parts (the limit)");
        advance();
        continue;
      }
      if (c == '[' || c == '{') {
        endRun();
        if (++nesting_ > kMaxTomlNesting)
          return error(line_, column_, "arrays and inline tables nest deeper than " +
                                           std::to_string(kMaxTomlNesting) + " levels (the limit)");
        advance();
        continue;
      }
      if (c == ']' || c == '}') {
        endRun();
        if (nesting_ > 0) --nesting_;
        advance();
        continue;
      }
      if (c == '=' || c == ',' || c == '\n') {
        endRun();
      } else if (c != ' ' && c != '\t' && c != '\r') {
        startPart();
      }
      advance();
    }
    return std::nullopt;
  }

 private:
  void advance() {
    auto c = static_cast<unsigned char>(text_[at_++]);
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else if ((c & 0xc0) != 0x80) {
      ++column_; // columns count characters, as toml++'s do
    }
  }
  // A key part starts here (the first of a run is where errors point).
  void startPart() {
    if (run_parts_ > 0) return;
    run_parts_ = 1;
    run_line_ = line_;
    run_column_ = column_;
  }
  void endRun() { run_parts_ = 0; }
  // A one-line string; a newline ends it (toml++ reports that as an error).
  void skipString(char quote) {
    advance();
    while (at_ < text_.size() && text_[at_] != '\n') {
      char c = text_[at_];
      if (quote == '"' && c == '\\' && at_ + 1 < text_.size() && text_[at_ + 1] != '\n') {
        advance();
        advance();
        continue;
      }
      advance();
      if (c == quote) return;
    }
  }
  // """…""" or '''…''', which may end with up to two more quotes of its kind.
  void skipMultiLine(char quote) {
    for (int i = 0; i < 3; ++i) advance();
    while (at_ < text_.size()) {
      char c = text_[at_];
      if (quote == '"' && c == '\\' && at_ + 1 < text_.size()) {
        advance();
        advance();
        continue;
      }
      if (c == quote && text_.substr(at_, 3) == std::string(3, quote)) {
        for (int i = 0; i < 3; ++i) advance();
        for (int i = 0; i < 2 && at_ < text_.size() && text_[at_] == quote; ++i) advance();
        return;
      }
      advance();
    }
  }
  ConfigError error(size_t line, size_t column, std::string message) const {
    return ConfigError{file_, static_cast<int>(line), static_cast<int>(column), "", "", std::move(message)};
  }

  std::string_view text_;
  const std::string& file_;
  size_t at_ = 0;
  size_t line_ = 1, column_ = 1;
  size_t run_parts_ = 0, run_line_ = 0, run_column_ = 0;
  size_t nesting_ = 0;
};

} // namespace

std::optional<ConfigError> checkTomlShape(std::string_view text, const std::string& file) {
  return ShapeScanner(text, file).run();
}

std::optional<ConfigError> parseToml(std::string_view text, const std::string& file, toml::table* root) {
  if (auto problem = checkTomlShape(text, file)) return problem;
  try {
    *root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    return ConfigError{file, static_cast<int>(e.source().begin.line), static_cast<int>(e.source().begin.column), "",
                       "", "TOML syntax error: " + echo(e.description(), 512)}; // it may quote the file
  }
  return std::nullopt;
}

void ErrorSink::add(const toml::source_region& where, std::string context, std::string key,
                    std::string message) {
  if (errors_.size() >= 2 * kMaxReportedErrors) compact();
  // A key is the file's text too: bounded and escaped like any echoed value.
  errors_.push_back(ConfigError{file_, static_cast<int>(where.begin.line),
                                static_cast<int>(where.begin.column), std::move(context),
                                echo(key), std::move(message)});
}

void ErrorSink::compact() {
  std::stable_sort(errors_.begin(), errors_.end(), [](const ConfigError& a, const ConfigError& b) {
    return std::pair(a.line, a.column) < std::pair(b.line, b.column);
  });
  if (errors_.size() <= kMaxReportedErrors) return;
  dropped_ += errors_.size() - kMaxReportedErrors;
  errors_.resize(kMaxReportedErrors);
}

std::vector<ConfigError> ErrorSink::take() {
  compact();
  return std::move(errors_);
}

void ErrorSink::appendDropped(std::vector<ConfigError>& errors) const {
  if (dropped_ == 0) return;
  errors.push_back(ConfigError{file_, 0, 0, "", "",
                               "and " + std::to_string(dropped_) + " more error(s) not shown (at most " +
                                   std::to_string(kMaxReportedErrors) + " are reported per file)"});
}

SourcePos ErrorSink::pos(const toml::source_region& where) const {
  return SourcePos{file_, static_cast<int>(where.begin.line), static_cast<int>(where.begin.column)};
}

std::string ErrorSink::posText(const toml::source_region& where) const {
  return file_ + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
}

std::string describeValue(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return quoteForMessage(node.as_string()->get());
    case toml::node_type::integer: return std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point: {
      std::ostringstream out;
      double v = node.as_floating_point()->get();
      out << v;
      // 2048.0 must not read like the integer 2048 in "expected an integer".
      if (std::isfinite(v) && out.str().find_first_of(".e") == std::string::npos) out << ".0";
      return out.str();
    }
    case toml::node_type::boolean: return node.as_boolean()->get() ? "true" : "false";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date/time";
    default: return "nothing";
  }
}

TableReader::TableReader(const toml::table& table, ErrorSink& errors, std::string context,
                         std::string prefix)
    : table_(table), errors_(errors), context_(std::move(context)), prefix_(std::move(prefix)) {}

const toml::node* TableReader::find(std::string_view key, Need need) {
  known_.emplace(key);
  const toml::node* found = table_.get(key);
  if (!found && need == Need::required) tableError(path(key) + ": required key is missing");
  return found;
}

const toml::node* TableReader::node(std::string_view key) { return find(key, Need::optional); }

void TableReader::typeError(std::string_view key, const toml::node& node,
                            const std::string& expected) {
  errorAt(node.source(), key, "expected " + expected + ", got " + describeValue(node));
}

void TableReader::error(std::string_view key, std::string message) {
  const toml::node* found = table_.get(key);
  errorAt(found ? found->source() : table_.source(), key, std::move(message));
}

void TableReader::errorAt(const toml::source_region& where, std::string_view key,
                          std::string message) {
  errors_.add(where, context_, path(key), std::move(message));
}

void TableReader::tableError(std::string message) {
  // The message already names its key path (or none), so no key here.
  errors_.add(table_.source(), context_, "", std::move(message));
}

std::optional<std::string> TableReader::text(std::string_view key, Need need) {
  const toml::node* found = find(key, need);
  if (!found) return std::nullopt;
  if (!found->is_string()) {
    typeError(key, *found, "a string");
    return std::nullopt;
  }
  return found->as_string()->get();
}

std::optional<int64_t> TableReader::integer(std::string_view key, int64_t lo, int64_t hi,
                                            Need need) {
  const toml::node* found = find(key, need);
  if (!found) return std::nullopt;
  std::string expected = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  if (!found->is_integer()) {
    typeError(key, *found, expected);
    return std::nullopt;
  }
  int64_t value = found->as_integer()->get();
  if (value < lo || value > hi) {
    typeError(key, *found, expected);
    return std::nullopt;
  }
  return value;
}

std::optional<double> TableReader::number(std::string_view key, double lo, double hi,
                                          bool lo_open, Need need) {
  const toml::node* found = find(key, need);
  if (!found) return std::nullopt;
  std::ostringstream expected;
  expected << "a number " << (lo_open ? "above " : "from ") << lo << (lo_open ? " and up to " : " to ")
           << hi;
  double value = 0;
  if (found->is_integer()) {
    value = static_cast<double>(found->as_integer()->get());
  } else if (found->is_floating_point()) {
    value = found->as_floating_point()->get();
  } else {
    typeError(key, *found, expected.str());
    return std::nullopt;
  }
  if (!std::isfinite(value) || value > hi || value < lo || (lo_open && value == lo)) {
    typeError(key, *found, expected.str());
    return std::nullopt;
  }
  return value;
}

std::optional<bool> TableReader::boolean(std::string_view key, Need need) {
  const toml::node* found = find(key, need);
  if (!found) return std::nullopt;
  if (!found->is_boolean()) {
    typeError(key, *found, "true or false");
    return std::nullopt;
  }
  return found->as_boolean()->get();
}

std::optional<std::vector<std::string>> TableReader::texts(std::string_view key, Need need) {
  const toml::node* found = find(key, need);
  if (!found) return std::nullopt;
  const toml::array* array = found->as_array();
  if (!array) {
    typeError(key, *found, "an array of strings");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& item = *array->get(i);
    if (!item.is_string()) {
      errorAt(item.source(), std::string(key) + "[" + std::to_string(i) + "]",
              "expected a string, got " + describeValue(item));
      ok = false;
      continue;
    }
    out.push_back(item.as_string()->get());
  }
  if (!ok) return std::nullopt;
  return out;
}

const toml::table* TableReader::table(std::string_view key, Need need) {
  const toml::node* found = find(key, need);
  if (!found) return nullptr;
  if (!found->is_table()) {
    typeError(key, *found, "a table");
    return nullptr;
  }
  return found->as_table();
}

const toml::array* TableReader::tables(std::string_view key, Need need) {
  const toml::node* found = find(key, need);
  if (!found) return nullptr;
  if (!found->is_array_of_tables()) {
    typeError(key, *found, "an array of tables ([[" + path(key) + "]])");
    return nullptr;
  }
  return found->as_array();
}

void TableReader::finish(const std::function<std::string(std::string_view key)>& why) {
  std::vector<std::string> candidates(known_.begin(), known_.end());
  for (const auto& [key, value] : table_) {
    if (known_.count(key.str())) continue;
    std::string message = "unknown key";
    std::string reason = why ? why(key.str()) : std::string();
    std::string suggestion = closestMatch(key.str(), candidates);
    if (!reason.empty()) {
      message += " (" + reason + ")";
    } else if (!suggestion.empty()) {
      message += " (did you mean \"" + suggestion + "\"?)";
    }
    errors_.add(key.source(), context_, path(key.str()), message);
  }
}

} // namespace hwfarm::config
