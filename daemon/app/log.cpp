#include "daemon/app/log.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace hwfarm {
namespace {

// `%*`: the sd-daemon(3) priority prefix of the message's level.
class SyslogPriorityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static const char* const prefixes[] = {"<7>", "<7>", "<6>", "<4>", "<3>", "<2>", "<6>"};
    const char* p = prefixes[static_cast<int>(msg.level)];
    dest.append(p, p + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SyslogPriorityFlag>();
  }
};

} // namespace

bool stderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (!stream) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (fstat(2, &st) != 0) return false;
  return st.st_dev == dev && st.st_ino == ino;
}

void setupLogging(const std::string& level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("hwfarmd", sink);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (stderrIsJournal())
    formatter->add_flag<SyslogPriorityFlag>('*').set_pattern("%*%v");
  else
    formatter->set_pattern("%Y-%m-%d %H:%M:%S.%e %l %v");
  logger->set_formatter(std::move(formatter));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  setLogLevel(level);
}

void setLogLevel(const std::string& level) {
  spdlog::set_level(spdlog::level::from_str(level == "warn" ? "warning" : level));
}

} // namespace hwfarm
