#include "common/generated_text.h"

namespace hwfarm {
namespace {

constexpr std::string_view kBegin = "<!-- generated: ";
constexpr std::string_view kBeginEnd = " -->\n";
constexpr std::string_view kEnd = "<!-- end generated -->\n";

} // namespace

bool regenerateBlocks(const std::string& text, const std::function<std::optional<std::string>(const std::string&)>& make,
                      std::string* out, std::string* error, std::set<std::string>* names) {
  out->clear();
  size_t at = 0;
  for (size_t begin; (begin = text.find(kBegin, at)) != std::string::npos;) {
    size_t name_at = begin + kBegin.size();
    size_t name_end = text.find(kBeginEnd, name_at);
    size_t end = name_end == std::string::npos ? name_end : text.find(kEnd, name_end);
    if (end == std::string::npos) {
      *error = "a generated block is not terminated by <!-- end generated -->";
      return false;
    }
    std::string name = text.substr(name_at, name_end - name_at);
    std::optional<std::string> block = make(name);
    if (!block) {
      *error = "no generated block is called \"" + name + "\"";
      return false;
    }
    if (names) names->insert(name);
    *out += text.substr(at, name_end + kBeginEnd.size() - at) + *block + std::string(kEnd);
    at = end + kEnd.size();
  }
  *out += text.substr(at);
  return true;
}

} // namespace hwfarm
