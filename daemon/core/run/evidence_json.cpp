#include "daemon/core/run/evidence_json.h"

#include "daemon/core/run/report.h"

namespace hwfarm {

boost::json::object evidenceJson(const Evidence& e) {
  boost::json::object out;
  if (e.exit_code) out["exit_code"] = *e.exit_code;
  if (e.signal != 0) out["signal"] = e.signal;
  if (!e.tool_output.empty()) out["tool_output"] = run::xmlSafe(e.tool_output);
  if (!e.console.empty()) out["console"] = run::xmlSafe(e.console);
  return out;
}

Evidence evidenceFromJson(const boost::json::object& o) {
  Evidence e;
  if (const auto* v = o.if_contains("exit_code"); v && v->is_int64()) e.exit_code = static_cast<int>(v->as_int64());
  if (const auto* v = o.if_contains("signal"); v && v->is_int64()) e.signal = static_cast<int>(v->as_int64());
  if (const auto* v = o.if_contains("tool_output"); v && v->is_string()) e.tool_output = std::string(v->as_string());
  if (const auto* v = o.if_contains("console"); v && v->is_string()) e.console = std::string(v->as_string());
  return e;
}

} // namespace hwfarm
