#include "drivers/power.h"

#include <sstream>
#include <thread>

#include "config/driver_specs.h"

namespace hwfarm::drivers {

const char* toString(PowerAction action) {
  switch (action) {
    case PowerAction::on: return "on";
    case PowerAction::off: return "off";
    case PowerAction::cycle: return "cycle";
    case PowerAction::cycle_off: return "off";
  }
  return "on";
}

std::vector<std::vector<std::string>> powerArgv(const config::PowerConfig& c, PowerAction action,
                                                const FlashTarget& t) {
  if (action == PowerAction::cycle_off) action = PowerAction::off; // its off time is power()'s
  if (c.driver == "uhubctl") {
    std::ostringstream delay;
    delay << c.off_s;
    std::vector<std::string> argv{"uhubctl", "--location", c.hub, "--ports", std::to_string(c.port), "--action",
                                  toString(action)};
    if (action == PowerAction::cycle) argv.insert(argv.end(), {"--delay", delay.str()});
    return {argv};
  }
  if (c.driver == "command") {
    std::map<std::string, std::string> values{
        {"usb_serial", t.usb_serial}, {"serial_port", t.serial_port}, {"board", t.board}};
    auto expand = [&](const std::vector<std::string>& argv) {
      std::vector<std::string> out;
      for (const auto& a : argv) out.push_back(config::expandTemplate(a, values));
      return out;
    };
    if (action == PowerAction::on) return {expand(c.on)};
    if (action == PowerAction::off) return {expand(c.off)};
    if (!c.cycle.empty()) return {expand(c.cycle)};
    return {expand(c.off), expand(c.on)};
  }
  return {};
}

namespace {
// A switch's off time in a cycle (power.off_s).
void keepOff(const config::PowerConfig& c) {
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(c.off_s * 1000)));
}
} // namespace

Status power(const config::PowerConfig& c, PowerAction action, const FlashTarget& target,
             const std::string& log_path) {
  auto steps = powerArgv(c, action, target);
  ToolOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.timeout_s * 1000));
  options.log_path = log_path;
  options.what = "power switch of board " + target.board;
  for (size_t i = 0; i < steps.size(); ++i) {
    // A cycle made of off and on waits off_s in between.
    if (i > 0) keepOff(c);
    ToolResult r = runTool(steps[i], options);
    if (!r.ok())
      return r.toStatus("power " + std::string(toString(action)) + " of board " + target.board + ": " + steps[i][0] +
                        " ");
  }
  // The off half of a cycle keeps the board off for its off time too.
  if (action == PowerAction::cycle_off && !steps.empty()) keepOff(c);
  return Status::success();
}

} // namespace hwfarm::drivers
