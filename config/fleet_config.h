// The validated fleet configuration: what hwfarmd serves, from a TOML file.
//
// Every value here has passed validation (config/loader.h); consumers never
// re-check ranges. The structs are plain data, cheap to copy, and carry the
// source position of the table they came from for later diagnostics.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hwfarm::config {

struct SourcePos {
  std::string file;
  int line = 0;
  int column = 0;
};

// One place hwfarmd accepts HTTP connections: "HOST:PORT" or
// "http://HOST:PORT" (plain HTTP), "https://HOST:PORT" (TLS, with
// agent.tls_cert and tls_key), HOST an IPv4 address, "[V6]" or "localhost";
// or "unix:/path/to.sock".
struct ListenAddress {
  enum class Kind { tcp, tls, unix_socket };
  Kind kind = Kind::tcp;
  std::string host;  // tcp, tls: literal IPv4/IPv6 address or "localhost"
  uint16_t port = 0; // tcp, tls: 0 = any free port
  std::string path;  // unix_socket
  std::string text;  // as written in the config

  bool isLoopback() const;
};

// Bounds on everything that arrives from outside (STYLE.md habit 8).
struct Limits {
  int64_t max_body_bytes = 64 * 1024;
  // An image uploaded to the flash route (or read from agent.image_roots).
  int64_t max_image_bytes = 64 * 1024 * 1024;
  double header_timeout_s = 10;
  double idle_timeout_s = 120;
  int64_t max_connections = 1024;    // fitted under RLIMIT_NOFILE at start-up (api/server.h)
  int64_t max_console_streams = 8;   // concurrent console readers per lease
  double max_ttl_s = 24 * 3600;
  double max_wait_s = 6 * 3600;
  int64_t max_queue = 10000;
  int64_t max_count = 64;
  // Console capture (docs/configuration.md "[limits]"): bytes the console
  // logs of one lease, and of all leases together, may hold on disk, and
  // the free space console logs leave on the state dir's filesystem.
  int64_t console_log_bytes_per_lease = 64 * 1024 * 1024;
  int64_t console_log_bytes_total = 1024 * 1024 * 1024;
  int64_t disk_reserve_bytes = 64 * 1024 * 1024;
};

struct AgentConfig {
  std::string name;
  std::vector<ListenAddress> listen;
  std::string state_dir = "/var/lib/hwfarm";
  int tier = 3;                   // registered tier, 1..3
  std::string log_level = "info"; // trace, debug, info, warn, error
  bool anonymous_loopback = false;
  std::string tokens_file; // empty: no tokens (only anonymous loopback access)
  // The https:// listeners' certificate chain and private key (PEM; the key
  // file private like the tokens file). Both set exactly when a listen
  // address is https://.
  std::string tls_cert;
  std::string tls_key;
  std::string lock_dir = "/var/lock"; // UUCP serial lock files; empty: none
  // Directories whose files a flash request may name by server-side path
  // (absolute, no trailing "/"); empty: images must be uploaded.
  std::vector<std::string> image_roots;
  double shutdown_timeout_s = 10;
};

// How the lease service behaves (docs/api.md "Scheduling").
struct LeaseConfig {
  double default_ttl_s = 1800; // when a request names no ttl_s
  double aging_s = 60;         // +1 effective priority per aging_s waited
  double recovery_s = 0;       // time in "recovering" until health checks exist
  double history_days = 7;     // ended leases and events kept this long
  int64_t max_swaps_per_hour = 3; // boards a lease's run retries may swap in, per hour (0: none)
  bool fsync = true;           // answers also wait for an fdatasync of the WAL (power-loss safe); false: crash safe only
};

// Simulator-vs-board runs (docs/runs.md).
struct RunsConfig {
  int64_t max_simulators = 2; // reference simulators running at once
  // Reference simulators one lease's runs hold at once (docs/runs.md);
  // default max_simulators - 1 (at least 1): one stays for another lease.
  int64_t max_simulators_per_lease = 1;
  int64_t max_runs = 16;      // runs running at once
  double default_deadline_s = 60; // per image and target, when a run names none
  double max_deadline_s = 3600;   // the longest deadline_s a run may ask for
  // Simulator time one run may use, its references' and simulator
  // targets' together (docs/runs.md, "Sharing the simulators").
  double max_simulator_s = 7200;
  int64_t drain_ms = 250;         // a console is still read this long after its END
  double history_days = 30;       // ended runs' records and artifacts are kept this long
  // Bytes of artifacts one run writes, and all runs of one lease
  // (docs/runs.md, "Disk quotas").
  int64_t max_artifact_bytes = 1LL << 30;
  int64_t max_lease_artifact_bytes = 4LL << 30;
  // Bytes one run holds in memory (consoles, flash logs, outputs' values)
  // of attempts whose files are not written yet (docs/runs.md, "Memory").
  int64_t max_run_memory_bytes = 512LL << 20;
};

// [[results.infrastructure]]: a rule that makes a harness's error the lab's
// (docs/harness-results.md). Each text given must be in the error's: its
// type or message (`error`), its type, message, detail (traceback).
struct InfraRuleConfig {
  std::string name;
  std::string error, type, message, detail;
  SourcePos pos;
};

// [results]: published harness results (docs/harness-results.md).
struct ResultsConfig {
  bool default_rules = true; // the documented rules, when `infrastructure` names none
  std::vector<InfraRuleConfig> infrastructure;
};

// [upload]: where hwfarmd publishes each run's artifacts (docs/uploads.md).
struct UploadConfig {
  bool enabled = false;
  std::string endpoint;         // "http(s)://HOST[:PORT][/PATH]", no trailing '/'
  std::string region = "us-east-1";
  std::string bucket;
  std::string prefix;           // the keys' first part, no leading or trailing '/'; may be empty
  std::string credentials_file; // access_key_id and secret_access_key (config/credentials.h)
  double connect_timeout_s = 10;
  double timeout_s = 120;       // one request, start to end
  double retry_initial_s = 1;   // the first retry's delay; doubled after each failure
  double retry_max_s = 300;     // the longest delay between two attempts
  SourcePos pos;
};

struct UsbMatch {
  std::optional<uint16_t> vendor;
  std::optional<uint16_t> product;
  std::optional<std::string> serial; // iSerialNumber
  std::optional<std::string> port;   // bus-port path, e.g. "1-1.4"
  bool operator==(const UsbMatch&) const = default;
};

struct SerialConfig {
  std::string port = "auto"; // "auto": resolve from the USB match
  int64_t baud = 115200;
  bool operator==(const SerialConfig&) const = default;
};

// A flasher preset or an operator-defined command.
struct FlashConfig {
  std::string driver;                         // empty: the board has no flasher
  std::optional<std::string> tool;            // override the tool's path
  std::map<std::string, std::string> options; // preset options, e.g. target
  std::vector<std::string> extra_args;        // appended to the preset's argv
  std::vector<std::string> argv;              // driver "command" only
  double timeout_s = 120;
  bool operator==(const FlashConfig&) const = default;
};

struct PowerConfig {
  std::string driver = "none"; // none, uhubctl, command
  std::string hub;             // uhubctl: hub location, e.g. "1-1"
  int64_t port = 0;            // uhubctl: port on that hub
  std::vector<std::string> on, off, cycle; // command
  double off_s = 2;            // off time of a power cycle
  double timeout_s = 30;
  bool operator==(const PowerConfig&) const = default;
};

struct HealthConfig {
  std::string image;  // empty: presence and console check only
  std::string banner; // regex the image prints when healthy
  double interval_s = 3600;
  double timeout_s = 60;
  int64_t quarantine_after = 3; // failed recovery ladders in a row before quarantine
  double retry_s = 60;          // after a failed ladder, before the next (before quarantine)
  double backoff_s = 900;       // first retry in quarantine; doubles after each failure
  double backoff_max_s = 86400; // the doubling's cap
};

struct QemuConfig {
  std::string binary = "qemu-system-arm";
  std::string machine = "mps2-an385";
  std::string cpu; // empty: the machine's default
  std::vector<std::string> extra_args;
  bool operator==(const QemuConfig&) const = default;
};

struct BoardConfig {
  std::string name;
  std::string type;
  std::vector<std::string> labels;
  std::string driver = "usb"; // usb, qemu
  UsbMatch usb;
  SerialConfig serial;
  FlashConfig flash;
  PowerConfig power;
  HealthConfig health;
  QemuConfig qemu;
  SourcePos pos;

  // Same driver settings (what a reload must rebuild the driver for).
  bool sameDriver(const BoardConfig& o) const {
    return driver == o.driver && usb == o.usb && serial == o.serial && flash == o.flash && power == o.power &&
           qemu == o.qemu;
  }
};

// [[reference]]: the simulator runs compare a board type with.
struct ReferenceConfig {
  std::string type; // a board type of the fleet
  QemuConfig qemu;
  SourcePos pos;
};

struct WorkerConfig {
  std::string name;
  std::string node; // Jenkins NODE_NAME of the agent/executor
  std::vector<BoardConfig> boards;
  SourcePos pos;
};

// [should_run]: what tags a PR for a tier-2 agent's hardware
// (daemon/core/ci/should_run.h, docs/configuration.md "[should_run]").
struct ShouldRunConfig {
  std::vector<std::string> tags;         // "[tag]" in a PR title, a label, a bot command argument
  std::vector<std::string> labels;       // PR labels that tag it by themselves
  std::vector<std::string> bot_commands; // "@tvm-bot run-odt": a comment line starting with one
};

// [[twister]]: how a board type appears in a Zephyr twister hardware map
// (`hwfarmctl lease export --format twister-hwmap`).
struct TwisterConfig {
  std::string type;     // a board type of the fleet
  std::string platform; // the twister platform, e.g. "nucleo_f429zi"
  std::string runner;   // the west flash runner, e.g. "openocd"
  std::string product;  // the probe's product string; default: the board type
  std::optional<int64_t> baud; // default: each board's serial.baud
  SourcePos pos;
};

// When an agent serving tier N is demoted to tier N+1 (tier 3: suspended,
// serving manual requests only) and when it is promoted back.
struct TierPolicy {
  double resolution_window_h = 24;
  double failure_ratio_max = 0.2;
  double ratio_window_h = 24;
  int64_t ratio_min_runs = 10;
  double promote_after_h = 24;
};

struct SlaConfig {
  std::array<TierPolicy, 3> tiers{TierPolicy{24, 0.2, 24, 10, 24}, TierPolicy{72, 0.3, 72, 10, 24},
                                  TierPolicy{168, 0.5, 168, 5, 24}};
  std::optional<int> pin_tier;
  double correlation_window_h = 1; // failures this close merge into a hub or host incident
  int64_t ratio_max_runs = 0;      // the ratio counts at most the last N runs (0: its time window only)
  int64_t transitions_kept = 100;  // transitions kept in <state_dir>/sla.json and GET /v1/tier
};

struct FleetConfig {
  std::string source; // file name or "<embedded sim-fleet.toml>"
  AgentConfig agent;
  Limits limits;
  ShouldRunConfig should_run;
  std::vector<TwisterConfig> twister;
  LeaseConfig leases;
  RunsConfig runs;
  ResultsConfig results;
  std::vector<ReferenceConfig> references;
  UploadConfig upload;
  std::vector<WorkerConfig> workers;
  SlaConfig sla;

  size_t boardCount() const;
  const BoardConfig* findBoard(const std::string& name) const;
};

} // namespace hwfarm::config
