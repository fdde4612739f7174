#include "tests/support/s3rver.h"

#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace hwfarm::test {

using namespace std::chrono_literals;

S3rver::S3rver(const TempDir& dir, const std::string& data, int port) {
  if (!std::filesystem::exists(HWFARM_S3RVER))
    throw std::runtime_error(std::string(HWFARM_S3RVER) + " is missing: run scripts/install-deps.sh (npm ci in tests/s3)");
  std::string log = dir.file("s3rver-" + std::to_string(++starts_) + ".log");
  process_ = std::make_unique<Process>(std::vector<std::string>{HWFARM_NODE, HWFARM_S3RVER, "-d", data, "-a",
                                                                "127.0.0.1", "-p", std::to_string(port),
                                                                "--configure-bucket", kBucket},
                                       log, log);
  const std::string listening = "listening on 127.0.0.1:";
  auto text = waitForText(log, listening, 20s);
  if (!text) throw std::runtime_error("s3rver did not start:\n" + readFile(log));
  port_ = std::stoi(text->substr(text->find(listening) + listening.size()));
}

S3rver::~S3rver() { stop(); }

void S3rver::stop() {
  if (!process_) return;
  process_->signal(SIGTERM);
  if (!process_->wait(10s)) process_->signal(SIGKILL);
  process_.reset();
}

std::string s3Credentials(const TempDir& dir, const std::string& key, const std::string& name) {
  std::string path = dir.write(name, "access_key_id = \"" + key + "\"\nsecret_access_key = \"" + S3rver::kKey + "\"\n");
  ::chmod(path.c_str(), 0600);
  return path;
}

std::string uploadTable(int port, const std::string& prefix, const std::string& credentials) {
  return "\n[upload]\nenabled = true\nendpoint = \"http://127.0.0.1:" + std::to_string(port) + "\"\nbucket = \"" +
         S3rver::kBucket + "\"\nprefix = '" + prefix + "'\ncredentials_file = \"" + credentials +
         "\"\nconnect_timeout_s = 2\ntimeout_s = 10\nretry_initial_s = 0.2\nretry_max_s = 1\n";
}

} // namespace hwfarm::test
