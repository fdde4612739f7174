// Lease and run ids as the user types them: whole, or the beginning of one
// (`lease show 9bedb22c`, as git and docker take a commit's or container's).
// The client resolves a prefix through the list endpoints, so it finds only
// what the caller may list anyway; the API's paths take whole ids.
#include <algorithm>
#include <cctype>

#include <boost/json.hpp>

#include "daemon/cli/session.h"

namespace hwfarm::cli {
namespace json = boost::json;

namespace {

bool hexDigits(const std::string& text, size_t from) {
  return std::all_of(text.begin() + static_cast<std::ptrdiff_t>(from), text.end(),
                     [](unsigned char c) { return std::isdigit(c) || (c >= 'a' && c <= 'f'); });
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// The ids of `list` (under `key`) that begin with `prefix`, whatever the
// daemon filtered already; each with a few words about it.
std::vector<std::pair<std::string, std::string>> matching(const json::value& body, const char* key,
                                                          const std::string& prefix, bool lease) {
  std::vector<std::pair<std::string, std::string>> out;
  const json::value* list = body.is_object() ? body.as_object().if_contains(key) : nullptr;
  if (!list || !list->is_array()) return out;
  for (const auto& item : list->as_array()) {
    const json::object* o = item.if_object();
    const json::value* id = o ? o->if_contains("id") : nullptr;
    if (!id || !id->is_string() || std::string(id->as_string()).rfind(prefix, 0) != 0) continue;
    std::string about = o->contains("state") ? text(o->at("state")) : "";
    if (lease && o->contains("holder") && o->at("holder").is_object()) {
      const json::object& h = o->at("holder").as_object();
      about += ", " + (h.contains("principal") ? text(h.at("principal")) : std::string("-"));
      if (h.contains("job") && !text(h.at("job")).empty()) about += " " + text(h.at("job"));
    } else if (!lease && o->contains("lease_id")) {
      about += ", lease " + text(o->at("lease_id"));
    }
    out.emplace_back(std::string(id->as_string()), about);
  }
  return out;
}

int resolve(Session& s, const std::string& what, const std::string& prefix, const std::string& list_path,
            const char* key, std::string* id) {
  int code = kOk;
  auto body = s.call("GET", list_path + percentEncode(prefix), "", &code);
  if (!body) return code;
  auto found = matching(*body, key, prefix, what == "lease");
  if (found.size() == 1) {
    *id = found[0].first;
    return kOk;
  }
  if (found.empty()) {
    s.err << "hwfarmctl: no " << what << " id begins with \"" << prefix << "\"\n";
    return kApiError;
  }
  s.err << "hwfarmctl: \"" << prefix << "\" is ambiguous: " << found.size() << " " << what
        << " ids begin with it; give more of the id:\n";
  for (size_t i = 0; i < found.size() && i < 10; ++i)
    s.err << "  " << found[i].first << " (" << found[i].second << ")\n";
  if (found.size() > 10) s.err << "  ... and " << found.size() - 10 << " more\n";
  return kApiError;
}

} // namespace

int resolveLease(Session& s, const std::string& arg, std::string* id) {
  std::string prefix = lower(arg);
  if (prefix.size() == 32 && hexDigits(prefix, 0)) {
    *id = prefix;
    return kOk;
  }
  if (prefix.empty() || prefix.size() > 32 || !hexDigits(prefix, 0)) {
    // No lease has such an id: the daemon says so, as for any unknown id.
    *id = arg;
    return kOk;
  }
  return resolve(s, "lease", prefix, "/v1/leases?all=1&prefix=", "leases", id);
}

int resolveRun(Session& s, const std::string& arg, std::string* id) {
  std::string prefix = lower(arg);
  if (prefix.rfind("run-", 0) != 0) prefix = "run-" + prefix;
  if (prefix.size() == 20 && hexDigits(prefix, 4)) {
    *id = prefix;
    return kOk;
  }
  if (prefix.size() == 4 || prefix.size() > 20 || !hexDigits(prefix, 4)) {
    *id = arg;
    return kOk;
  }
  return resolve(s, "run", prefix, "/v1/runs?prefix=", "runs", id);
}

} // namespace hwfarm::cli
