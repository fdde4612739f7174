#include "daemon/services/evidence_json.h"

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

} // namespace hwfarm
