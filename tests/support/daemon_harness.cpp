#include "tests/support/daemon_harness.h"

#include <regex>
#include <stdexcept>

namespace hwfarm::test {

std::string qemuFleet(const std::string& state_dir, int boards, const std::string& agent_extra) {
  std::string text = "[agent]\nname = \"test-lab\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"" + state_dir +
                     "\"\ntier = 1\nanonymous = \"loopback\"\n" + agent_extra +
                     "\n[[worker]]\nname = \"w0\"\n";
  for (int i = 0; i < boards; ++i)
    text += "  [[worker.board]]\n  name = \"sim-" + std::to_string(i) +
            "\"\n  type = \"mps2-an385\"\n  driver = \"qemu\"\n";
  return text;
}

RunningDaemon::RunningDaemon(const TempDir& dir, const std::string& config_text,
                             const std::map<std::string, std::string>& env) {
  config_path_ = dir.write("fleet.toml", config_text);
  log_path_ = dir.file("hwfarmd.log");
  std::map<std::string, std::string> environment{{"NOTIFY_SOCKET", ""}, {"JOURNAL_STREAM", ""},
                                                 {"WATCHDOG_USEC", ""}};
  for (const auto& [k, v] : env) environment[k] = v;
  process_ = std::make_unique<Process>(std::vector<std::string>{HWFARMD_PATH, "--config", config_path_},
                                       dir.file("hwfarmd.out"), log_path_, environment, dir.path());
  auto text = waitForText(log_path_, " ready: ", std::chrono::seconds(20));
  if (!text) throw std::runtime_error("hwfarmd did not become ready; log:\n" + log());
  std::smatch m;
  if (!std::regex_search(*text, m, std::regex("listening on (http://[^\\s]+|unix:[^\\s]+)")))
    throw std::runtime_error("hwfarmd logged no listen address; log:\n" + *text);
  url_ = m[1];
}

cli::HttpResult RunningDaemon::get(const std::string& target) const { return request("GET", target, ""); }

cli::HttpResult RunningDaemon::request(const std::string& method, const std::string& target,
                                       const std::string& body) const {
  return cli::HttpClient(url_, 10).request(method, target, body, "");
}

} // namespace hwfarm::test
