// hwfarmd: the lab-server daemon. A thin main around hwfarm::Daemon.
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <spdlog/spdlog.h>

#include "config/credentials.h"
#include "config/tokens.h"
#include "daemon/api/tls_identity.h"
#include "daemon/app/command_line.h"
#include "daemon/app/daemon.h"
#include "daemon/app/log.h"
#include "daemon/app/version.h"
#include "drivers/qemu_board.h"
#include "drivers/reaper.h"

namespace {

// Prints `errors` of `file` and their count; exit code 1.
int reportErrors(const std::vector<hwfarm::config::ConfigError>& errors, const std::string& file) {
  for (const auto& e : errors) std::fprintf(stderr, "%s\n", e.format().c_str());
  std::fprintf(stderr, "hwfarmd: %s: %zu error(s)\n", file.c_str(), errors.size());
  return 1;
}

int checkConfig(const std::string& path) {
  auto result = hwfarm::loadConfig(path);
  std::string name = path.empty() ? hwfarm::config::kEmbeddedSimFleetName : path;
  if (!result.ok()) return reportErrors(result.errors, name);
  const std::string& tokens_file = result.config->agent.tokens_file;
  size_t tokens = 0;
  if (!tokens_file.empty()) {
    auto t = hwfarm::config::loadTokensFile(tokens_file);
    if (!t.ok()) return reportErrors(t.errors, tokens_file);
    tokens = t.tokens.size();
  }
  const auto& upload = result.config->upload;
  if (upload.enabled) {
    auto c = hwfarm::config::loadCredentialsFile(upload.credentials_file);
    if (!c.ok()) return reportErrors(c.errors, upload.credentials_file);
  }
  const auto& agent = result.config->agent;
  if (!agent.tls_cert.empty()) {
    auto tls = hwfarm::api::TlsIdentity::load(agent.tls_cert, agent.tls_key);
    if (!tls.ok()) {
      std::fprintf(stderr, "%s\nhwfarmd: %s: the TLS certificate or key is not usable\n",
                   tls.status().message().c_str(), name.c_str());
      return 1;
    }
  }
  std::printf("hwfarmd: %s: configuration ok (%zu workers, %zu boards", name.c_str(),
              result.config->workers.size(), result.config->boardCount());
  if (!tokens_file.empty()) std::printf(", %zu tokens", tokens);
  std::printf(")\n");
  return 0;
}

// Prints `path` with its generated blocks rewritten from the option table
// (docs/hwfarmd.md; the docs test compares).
int generateDocs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {}), out, error;
  if (!in || !hwfarm::regenerateDaemonDocs(text, &out, &error)) {
    std::fprintf(stderr, "hwfarmd: %s: %s\n", path.c_str(), in ? error.c_str() : "cannot read it");
    return 1;
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  hwfarm::DaemonArgs args;
  if (auto error = hwfarm::parseDaemonArgs(std::vector<std::string>(argv + 1, argv + argc), &args)) {
    std::fprintf(stderr, "hwfarmd: %s\n%s", error->c_str(), hwfarm::daemonUsage().c_str());
    return 2;
  }
  if (args.help) {
    std::fputs(hwfarm::daemonUsage().c_str(), stdout);
    return 0;
  }
  if (args.version) {
    std::printf("hwfarmd %s\n", hwfarm::kVersion);
    return 0;
  }
  if (!args.generate_docs.empty()) return generateDocs(args.generate_docs);
  const std::string& config_path = args.config_path;
  bool check = args.check;
  if (check) return checkConfig(config_path);
  // Descriptors inherited from whoever started hwfarmd are not passed on to
  // its children either (every descriptor hwfarmd opens is close-on-exec).
  ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
  // Before any thread: the process that stops every child of hwfarmd when
  // hwfarmd ends, however it ends (drivers/reaper.h).
  hwfarm::Result<pid_t> reaper = hwfarm::drivers::startReaper();
  hwfarm::setupLogging("info");
  if (!reaper) {
    spdlog::critical("{}", reaper.status().message());
    return 1;
  }
  hwfarm::drivers::setSimulatorLauncher(args.simulator_launcher);
  int code;
  try {
    code = hwfarm::Daemon({config_path}).run();
  } catch (const std::exception& e) {
    spdlog::critical("fatal: {}", e.what());
    code = 1;
  }
  // Every child is stopped by now; the reaper checks and ends before hwfarmd.
  if (!hwfarm::drivers::stopReaper(std::chrono::seconds(15))) spdlog::warn("the reaper did not end in time");
  return code;
}
