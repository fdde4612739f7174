// hwfarmctl uploads, hwfarmctl upload retry RUN (docs/cli.md "uploads",
// docs/uploads.md): the daemon's queue of runs going to the S3 bucket.
#include <boost/json.hpp>

#include "daemon/cli/session.h"

namespace hwfarm::cli {
namespace json = boost::json;

int uploadsCommand(Session& s, const Args&) {
  int code = kOk;
  auto body = s.call("GET", "/v1/uploads", "", &code);
  if (!body) return code;
  if (s.json) {
    s.out << json::serialize(*body) << "\n";
    return kOk;
  }
  if (!body->at("enabled").as_bool()) s.out << "# uploads are disabled ([upload] enabled = false)\n";
  std::vector<std::vector<std::string>> rows{{"RUN", "STATE", "VERDICT", "OBJECTS", "FAILURES", "NEXT", "ERROR"}};
  for (const auto& u : body->at("uploads").as_array()) {
    const auto& o = u.as_object();
    std::string next = o.contains("next_attempt_at") ? text(o.at("next_attempt_at")) : "-";
    std::string error = text(o.at("error"));
    rows.push_back({text(o.at("run")), text(o.at("state")), text(o.at("verdict")), text(o.at("objects_uploaded")),
                    text(o.at("failures")), next, error.empty() ? "-" : error});
  }
  s.out << formatTable(rows);
  return kOk;
}

int uploadRetryCommand(Session& s, const Args& a) {
  std::string run;
  int code = resolveRun(s, a.positional()[0], &run);
  if (code != kOk) return code;
  auto body = s.call("POST", "/v1/uploads/" + percentEncode(run) + "/retry", "{}", &code);
  if (!body) return code;
  if (s.json) s.out << json::serialize(*body) << "\n";
  else s.out << "run " << run << ": upload queued\n";
  return kOk;
}

} // namespace hwfarm::cli
