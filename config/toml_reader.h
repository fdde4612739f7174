// Schema-checked reading of toml++ tables (internal to config/).
//
// A TableReader hands out typed values by key and remembers which keys it
// was asked about; finish() reports every other key of the table as unknown,
// with a did-you-mean suggestion. So the schema is the code that reads it,
// and a key cannot be accepted without being used.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "config/loader.h"

namespace hwfarm::config {

// Parses `text` into `root`. Before toml++ sees it, the text is checked for
// shapes that overflow toml++'s recursive parser and destructor: a dotted key
// of more than kMaxTomlKeyParts parts (`a.a.a… = 1`) or arrays and inline
// tables nested deeper than kMaxTomlNesting. Returns the error (file:line:col)
// for such text or a TOML syntax error; nothing when `root` is set.
std::optional<ConfigError> parseToml(std::string_view text, const std::string& file, toml::table* root);

// The shape check alone.
std::optional<ConfigError> checkTomlShape(std::string_view text, const std::string& file);

// Collects errors for one file.
class ErrorSink {
 public:
  explicit ErrorSink(std::string file) : file_(std::move(file)) {}

  void add(const toml::source_region& where, std::string context, std::string key,
           std::string message);
  const std::string& file() const { return file_; }
  SourcePos pos(const toml::source_region& where) const;
  std::string posText(const toml::source_region& where) const;
  // The first kMaxReportedErrors errors in file order (the rest are counted).
  std::vector<ConfigError> take();
  bool empty() const { return errors_.empty() && dropped_ == 0; }
  // Appends one error counting those not kept, if any.
  void appendDropped(std::vector<ConfigError>& errors) const;

 private:
  void compact(); // sorts by position, keeps the first kMaxReportedErrors

  std::string file_;
  std::vector<ConfigError> errors_;
  size_t dropped_ = 0;
};

// "a string", "an integer", ... and `"value"`, `5` for messages.
std::string describeValue(const toml::node& node);

enum class Need { optional, required };

class TableReader {
 public:
  // `context` prefixes messages (`worker "w1" board "b"`); `prefix` is the key
  // path of this table relative to the context ("usb." for a nested table).
  TableReader(const toml::table& table, ErrorSink& errors, std::string context,
              std::string prefix);

  // Each accessor marks `key` known. It returns nothing when the key is absent
  // (an error if required) or when the value is invalid (an error).
  std::optional<std::string> text(std::string_view key, Need need = Need::optional);
  std::optional<int64_t> integer(std::string_view key, int64_t lo, int64_t hi,
                                 Need need = Need::optional);
  // Accepts integers too. `lo_open`: the value must be strictly above lo.
  std::optional<double> number(std::string_view key, double lo, double hi, bool lo_open,
                               Need need = Need::optional);
  std::optional<bool> boolean(std::string_view key, Need need = Need::optional);
  std::optional<std::vector<std::string>> texts(std::string_view key, Need need = Need::optional);
  const toml::table* table(std::string_view key, Need need = Need::optional);
  const toml::array* tables(std::string_view key, Need need = Need::optional);
  // The raw node, marked known, for callers with their own rules.
  const toml::node* node(std::string_view key);

  // Reports a problem with `key`'s value (at the value's position).
  void error(std::string_view key, std::string message);
  void errorAt(const toml::source_region& where, std::string_view key, std::string message);
  // Reports a problem with the table itself (at its header).
  void tableError(std::string message);

  // Reports unknown keys. `why` is appended to each message when set, e.g.
  // `(not used by driver "qemu")`.
  void finish(const std::function<std::string(std::string_view key)>& why = {});

  const toml::table& raw() const { return table_; }
  const std::string& context() const { return context_; }
  std::string path(std::string_view key) const { return prefix_ + std::string(key); }
  ErrorSink& errors() { return errors_; }

 private:
  const toml::node* find(std::string_view key, Need need);
  void typeError(std::string_view key, const toml::node& node, const std::string& expected);

  const toml::table& table_;
  ErrorSink& errors_;
  std::string context_;
  std::string prefix_;
  std::set<std::string, std::less<>> known_;
};

} // namespace hwfarm::config
