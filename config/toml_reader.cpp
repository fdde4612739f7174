#include "config/toml_reader.h"

#include <cmath>
#include <sstream>

#include "config/suggest.h"

namespace hwfarm::config {

void ErrorSink::add(const toml::source_region& where, std::string context, std::string key,
                    std::string message) {
  errors_.push_back(ConfigError{file_, static_cast<int>(where.begin.line),
                                static_cast<int>(where.begin.column), std::move(context),
                                std::move(key), std::move(message)});
}

SourcePos ErrorSink::pos(const toml::source_region& where) const {
  return SourcePos{file_, static_cast<int>(where.begin.line), static_cast<int>(where.begin.column)};
}

std::string ErrorSink::posText(const toml::source_region& where) const {
  return file_ + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
}

std::string describeValue(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: {
      std::ostringstream out;
      out << '"' << node.as_string()->get() << '"';
      return out.str();
    }
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
