// What was seen when board work failed (common/status.h's Evidence) as the
// JSON the API and the run records show: exit_code, signal, tool_output,
// console, each left out when empty; text made valid UTF-8 without control
// characters (run::xmlSafe), since a tool or a firmware may print anything.
#pragma once

#include <boost/json/object.hpp>

#include "common/status.h"

namespace hwfarm {

boost::json::object evidenceJson(const Evidence& evidence);
// Back from what evidenceJson wrote; members of another type are left out.
Evidence evidenceFromJson(const boost::json::object& object);

} // namespace hwfarm
