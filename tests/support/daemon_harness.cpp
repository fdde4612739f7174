#include "tests/support/daemon_harness.h"

#include "config/tokens.h"
#include "drivers/process_table.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <regex>
#include <sstream>
#include <thread>
#include <stdexcept>

namespace hwfarm::test {

int connectRaw(const std::string& url, int receive_buffer) {
  bool unix_socket = url.rfind("unix:", 0) == 0;
  int fd = ::socket(unix_socket ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (receive_buffer > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  int rc = -1;
  if (unix_socket) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, url.c_str() + 5, sizeof addr.sun_path - 1);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else {
    std::smatch m;
    if (std::regex_search(url, m, std::regex("http://([0-9.]+):([0-9]+)"))) {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(std::stoi(m[2])));
      ::inet_pton(AF_INET, m[1].str().c_str(), &addr.sin_addr);
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    }
  }
  if (rc != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string rawExchange(const std::string& url, const std::string& request) {
  int fd = connectRaw(url);
  if (fd < 0) throw std::runtime_error("cannot connect to " + url);
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    throw std::runtime_error("cannot send the request to " + url);
  }
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) out.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

std::string qemuFleet(const std::string& state_dir, int boards, const std::string& agent_extra) {
  std::string text = "[agent]\nname = \"test-lab\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"" + state_dir +
                     "\"\nlock_dir = \"" + state_dir + "\"\ntier = 1\nanonymous = \"loopback\"\n" + agent_extra +
                     "\n[[worker]]\nname = \"w0\"\n";
  for (int i = 0; i < boards; ++i)
    text += "  [[worker.board]]\n  name = \"sim-" + std::to_string(i) +
            "\"\n  type = \"mps2-an385\"\n  driver = \"qemu\"\n";
  return text;
}

std::string writeTokens(const TempDir& dir) {
  std::string text;
  for (const char* role : {"viewer", "pipeline", "operator"})
    text += std::string("[[token]]\nname = \"") + role + "\"\nrole = \"" + role + "\"\nsha256 = \"" +
            hwfarm::config::sha256Hex(std::string("secret-") + role) + "\"\n";
  text += "[[token]]\nname = \"pipeline2\"\nrole = \"pipeline\"\nsha256 = \"" + hwfarm::config::sha256Hex("secret-pipeline2") +
          "\"\n";
  std::string path = dir.write("tokens.toml", text);
  ::chmod(path.c_str(), 0600);
  return path;
}

std::string tokenFleet(const TempDir& dir, int boards, const std::string& agent_extra, const std::string& state) {
  std::string tokens = writeTokens(dir);
  std::string text = qemuFleet(dir.file(state), boards, "tokens_file = \"" + tokens + "\"\n" + agent_extra);
  return std::regex_replace(text, std::regex("anonymous = \"loopback\"\n"), "");
}

RunningDaemon::RunningDaemon(const TempDir& dir, const std::string& config_text,
                             const std::map<std::string, std::string>& env, std::vector<std::string> launcher)
    : env_(env), launcher_(std::move(launcher)), dir_(dir) {
  config_path_ = dir.write("fleet.toml", config_text);
  log_path_ = dir.file("hwfarmd.log");
  start();
}

RunningDaemon::~RunningDaemon() {
  if (launcher_.empty() || !process_ || !process_->running()) return;
  ::kill(-process_->pid(), SIGTERM); // the launcher and hwfarmd under it
  process_->wait(std::chrono::seconds(5));
}

void RunningDaemon::start() {
  std::map<std::string, std::string> environment{{"NOTIFY_SOCKET", ""}, {"JOURNAL_STREAM", ""},
                                                 {"WATCHDOG_USEC", ""}};
  for (const auto& [k, v] : env_) environment[k] = v;
  size_t log_start = readFile(log_path_).size();
  std::vector<std::string> argv = launcher_;
  argv.insert(argv.end(), {HWFARMD_PATH, "--config", config_path_});
  process_ = std::make_unique<Process>(argv, dir_.file("hwfarmd.out"), log_path_, environment, dir_.path());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string text;
  while (true) {
    text = readFile(log_path_).substr(log_start);
    if (text.find(" ready: ") != std::string::npos) break;
    if (std::chrono::steady_clock::now() > deadline || !process_->running())
      throw std::runtime_error("hwfarmd did not become ready; log:\n" + text);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("listening on (http://[^\\s]+|unix:[^\\s]+)")))
    throw std::runtime_error("hwfarmd logged no listen address; log:\n" + text);
  url_ = m[1];
}

pid_t RunningDaemon::reaperPid() const {
  std::string pid = std::to_string(process_->pid());
  std::istringstream children(readFile("/proc/" + pid + "/task/" + pid + "/children"));
  for (pid_t child; children >> child;)
    if (auto stat = drivers::readProcessStat(child); stat && stat->comm == "hwfarmd-reaper") return child;
  return 0;
}

void RunningDaemon::killAndRestart() {
  process_->signal(SIGKILL);
  process_->wait(std::chrono::seconds(10));
  start();
}

std::string RunningDaemon::recordAtEnd(const std::string& id, const std::string& token) const {
  std::string received, error;
  int status = 0;
  try {
    status = cli::HttpClient(url_, 120).stream("/v1/runs/" + id + "/events", token,
                                               [&](const std::string& piece) { received += piece; }, &error);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (status != 200 || received.find("{\"event\":\"end\"") == std::string::npos)
    throw std::runtime_error("the events of run " + id + " ended without their end line (" + std::to_string(status) +
                             " " + error + "): " + received.substr(0, 2000) + "\n" + state());
  cli::HttpResult r = get("/v1/runs/" + id, token);
  if (r.status != 200) throw std::runtime_error("GET /v1/runs/" + id + ": " + std::to_string(r.status));
  return r.body;
}

std::string RunningDaemon::state() const {
  std::string log = readFile(log_path_);
  size_t from = log.size();
  for (int lines = 0; from > 0 && lines < 40; ++lines) from = log.rfind('\n', from - 1);
  std::string tail = log.substr(from == std::string::npos ? 0 : from);
  return std::string(process_->running() ? "hwfarmd still runs" : "hwfarmd has ended") +
         "; the last lines of its log:\n" + tail;
}

cli::HttpResult RunningDaemon::get(const std::string& target, const std::string& token) const {
  return request("GET", target, "", token);
}

cli::HttpResult RunningDaemon::request(const std::string& method, const std::string& target,
                                       const std::string& body, const std::string& token, double timeout_s) const {
  return cli::HttpClient(url_, timeout_s).request(method, target, body, token);
}

} // namespace hwfarm::test
