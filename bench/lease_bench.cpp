// Lease service benchmark: acquire+release cycles against hwfarmd (durable
// commits) next to the same load against bench/minimal_server (no state, no
// disk), measured in the same run. Prints a table with the ratios.
//
//   hwfarm_lease_bench [--seconds S] [--rounds N] [--clients 1,16,256] [--fsync on|off] [--waiters N]
//                      [--against PATH]
//
// --against PATH puts another hwfarmd build (an earlier commit's, say) in the
// baseline column instead of the minimal server, on the same fleet and load,
// in the same alternating rounds: a before/after comparison in one run.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using asio::awaitable;
using asio::use_awaitable;

namespace {

struct Server {
  pid_t pid = -1;
  std::string host;
  std::string port;
};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts argv with output in `log`; waits for "listening on http://H:P".
Server start(const std::vector<std::string>& argv, const std::string& log) {
  Server s;
  s.pid = fork();
  if (s.pid == 0) {
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    (void)f;
    dup2(1, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  std::regex re("listening on http://([0-9.]+):([0-9]+)");
  for (int i = 0; i < 500; ++i) {
    std::smatch m;
    std::string text = readFile(log);
    if (std::regex_search(text, m, re) && (text.find(" ready: ") != std::string::npos || argv.size() == 1)) {
      s.host = m[1];
      s.port = m[2];
      return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "server did not start:\n%s\n", readFile(log).c_str());
  std::exit(1);
}

void stop(Server& s) {
  kill(s.pid, SIGTERM);
  waitpid(s.pid, nullptr, 0);
}

// User + system CPU time of the whole process (all threads), in ms.
double cpuMs(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);
  return ticks * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

long rssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

struct Reply {
  unsigned status;
  std::string body;
};

awaitable<Reply> call(beast::tcp_stream& stream, http::verb verb, const std::string& target, const std::string& body) {
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "localhost");
  req.body() = body;
  req.prepare_payload();
  co_await http::async_write(stream, req, use_awaitable);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  co_await http::async_read(stream, buffer, res, use_awaitable);
  co_return Reply{res.result_int(), std::move(res.body())};
}

std::string idOf(const std::string& body) {
  size_t at = body.find("\"id\":\"");
  if (at == std::string::npos) return "";
  at += 6;
  return body.substr(at, body.find('"', at) - at);
}

std::string acquireBody(const std::string& type, double wait_s) {
  return R"({"selector":{"type":")" + type + R"("},"count":1,"ttl_s":600,"wait_s":)" + std::to_string(wait_s) +
         R"(,"context":"manual"})";
}

struct LoadResult {
  double cycles_per_s = 0;
  double cpu_us_per_cycle = 0; // the server's CPU time (all threads) per cycle
  double p50_ms = 0, p99_ms = 0;
  uint64_t errors = 0;
};

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// `clients` connections, each looping acquire+release for `seconds`.
LoadResult load(const Server& s, int clients, double seconds) {
  asio::io_context io;
  std::vector<double> latencies;
  uint64_t errors = 0;
  auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  auto client = [&]() -> awaitable<void> {
    beast::tcp_stream stream(io);
    tcp::resolver resolver(io);
    co_await stream.async_connect(co_await resolver.async_resolve(s.host, s.port, use_awaitable), use_awaitable);
    while (Clock::now() < deadline) {
      auto t0 = Clock::now();
      Reply r = co_await call(stream, http::verb::post, "/v1/leases", acquireBody("bench", 10));
      std::string id = idOf(r.body);
      if (r.status != 201 || id.empty()) {
        ++errors;
        continue;
      }
      Reply d = co_await call(stream, http::verb::delete_, "/v1/leases/" + id, "");
      if (d.status != 200) ++errors;
      latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  };
  auto t0 = Clock::now();
  double cpu0 = cpuMs(s.pid);
  for (int i = 0; i < clients; ++i)
    asio::co_spawn(io, client(), [&](std::exception_ptr e) {
      if (e) ++errors;
    });
  io.run();
  double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  LoadResult r;
  r.cycles_per_s = static_cast<double>(latencies.size()) / elapsed;
  r.p50_ms = percentile(latencies, 0.50);
  r.p99_ms = percentile(latencies, 0.99);
  r.errors = errors;
  if (!latencies.empty()) r.cpu_us_per_cycle = (cpuMs(s.pid) - cpu0) * 1000.0 / static_cast<double>(latencies.size());
  return r;
}

// Release -> the waiting client's answer, `rounds` times, on hwfarmd.
std::pair<double, double> grantLatency(const Server& s, int rounds) {
  asio::io_context io;
  std::vector<double> latencies;
  auto run = [&]() -> awaitable<void> {
    tcp::resolver resolver(io);
    auto endpoints = co_await resolver.async_resolve(s.host, s.port, use_awaitable);
    beast::tcp_stream a(io), b(io);
    co_await a.async_connect(endpoints, use_awaitable);
    co_await b.async_connect(endpoints, use_awaitable);
    beast::tcp_stream* holder = &a;
    beast::tcp_stream* waiter = &b;
    std::string held = idOf((co_await call(*holder, http::verb::post, "/v1/leases", acquireBody("solo", 0))).body);
    asio::steady_timer pause(io);
    for (int i = 0; i < rounds; ++i) {
      Clock::time_point released;
      std::string granted;
      bool done = false;
      asio::co_spawn(io, [&, waiter]() -> awaitable<void> {
        Reply r = co_await call(*waiter, http::verb::post, "/v1/leases", acquireBody("solo", 30));
        latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - released).count());
        granted = idOf(r.body);
        done = true;
      }, asio::detached);
      pause.expires_after(std::chrono::milliseconds(2)); // let the request queue up
      co_await pause.async_wait(use_awaitable);
      released = Clock::now();
      co_await call(*holder, http::verb::delete_, "/v1/leases/" + held, "");
      while (!done) {
        pause.expires_after(std::chrono::microseconds(100));
        co_await pause.async_wait(use_awaitable);
      }
      held = granted;
      std::swap(holder, waiter);
    }
    co_await call(*holder, http::verb::delete_, "/v1/leases/" + held, "");
  };
  asio::co_spawn(io, run(), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
  return {percentile(latencies, 0.50), percentile(latencies, 0.99)};
}

// Single-request round trips on the baseline: what any answer costs.
std::pair<double, double> roundTrip(const Server& s, int rounds) {
  asio::io_context io;
  std::vector<double> latencies;
  asio::co_spawn(io, [&]() -> awaitable<void> {
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    co_await stream.async_connect(co_await resolver.async_resolve(s.host, s.port, use_awaitable), use_awaitable);
    for (int i = 0; i < rounds; ++i) {
      auto t0 = Clock::now();
      co_await call(stream, http::verb::post, "/v1/leases", acquireBody("solo", 0));
      latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  }, asio::detached);
  io.run();
  return {percentile(latencies, 0.50), percentile(latencies, 0.99)};
}

// Opens `n` connections; on hwfarmd each waits for the held "solo" board.
// Returns the server's RSS (KiB) once they are all in.
long rssWithWaiters(const Server& s, int n, bool send_requests) {
  asio::io_context io;
  std::vector<std::unique_ptr<beast::tcp_stream>> streams;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(s.host, s.port);
  std::string held;
  if (send_requests) {
    beast::tcp_stream first(io);
    first.connect(endpoints);
    http::request<http::string_body> req{http::verb::post, "/v1/leases", 11};
    req.set(http::field::host, "localhost");
    req.body() = acquireBody("solo", 0);
    req.prepare_payload();
    http::write(first, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(first, buffer, res);
    held = idOf(res.body());
  }
  for (int i = 0; i < n; ++i) {
    auto stream = std::make_unique<beast::tcp_stream>(io);
    stream->connect(endpoints);
    if (send_requests) {
      http::request<http::string_body> req{http::verb::post, "/v1/leases", 11};
      req.set(http::field::host, "localhost");
      req.body() = acquireBody("solo", 120);
      req.prepare_payload();
      http::write(*stream, req);
    }
    streams.push_back(std::move(stream));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  long rss = rssKiB(s.pid);
  streams.clear(); // the waiters hang up and leave the queue
  if (send_requests) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    beast::tcp_stream last(io);
    last.connect(endpoints);
    http::request<http::string_body> req{http::verb::delete_, "/v1/leases/" + held, 11};
    req.set(http::field::host, "localhost");
    req.prepare_payload();
    http::write(last, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(last, buffer, res);
  }
  return rss;
}

std::string fleet(const std::string& state, int boards, bool fsync) {
  std::string t = "[agent]\nname = \"bench\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"" + state +
                  "\"\ntier = 1\nanonymous = \"loopback\"\n"
                  "[limits]\nmax_connections = 8192\nmax_queue = 100000\n"
                  "[leases]\nfsync = " + std::string(fsync ? "true" : "false") + "\n";
  int per_worker = 128;
  for (int w = 0; w * per_worker < boards; ++w) {
    t += "[[worker]]\nname = \"w" + std::to_string(w) + "\"\n";
    for (int i = w * per_worker; i < std::min(boards, (w + 1) * per_worker); ++i)
      t += "  [[worker.board]]\n  name = \"b" + std::to_string(i) +
           "\"\n  type = \"bench\"\n  driver = \"qemu\"\n";
  }
  t += "  [[worker.board]]\n  name = \"solo\"\n  type = \"solo\"\n  driver = \"qemu\"\n";
  return t;
}

std::string fmt(double v, int precision = 1) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", precision, v);
  return buffer;
}

} // namespace

int main(int argc, char** argv) {
  double seconds = 9;
  int rounds = 9;
  std::vector<int> client_counts{1, 16, 256};
  int waiters = 1000;
  bool fsync = true; // hwfarmd's default
  std::string against; // another hwfarmd as the baseline
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--seconds") seconds = std::stod(argv[i + 1]);
    else if (a == "--waiters") waiters = std::stoi(argv[i + 1]);
    else if (a == "--rounds") rounds = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--fsync") fsync = std::string(argv[i + 1]) != "off";
    else if (a == "--against") against = argv[i + 1];
    else if (a == "--clients") {
      client_counts.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string item; std::getline(list, item, ',');) client_counts.push_back(std::stoi(item));
    }
  }
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);

  char dir_template[] = "/tmp/hwfarm-bench-XXXXXX";
  std::string dir = mkdtemp(dir_template);
  std::ofstream(dir + "/fleet.toml") << fleet(dir + "/state", 1024, fsync);
  // HWFARM_BENCH_WRAP="valgrind --tool=callgrind ..." runs hwfarmd under a
  // profiler (the table is then about the profiler, not hwfarmd).
  std::vector<std::string> daemon_argv;
  if (const char* wrap = std::getenv("HWFARM_BENCH_WRAP")) {
    std::istringstream words(wrap);
    for (std::string w; words >> w;) daemon_argv.push_back(w);
  }
  for (std::string a : {std::string(HWFARMD_PATH), std::string("--config"), dir + "/fleet.toml"})
    daemon_argv.push_back(a);
  Server daemon = start(daemon_argv, dir + "/hwfarmd.log");
  bool versus_hwfarmd = !against.empty();
  std::vector<std::string> baseline_argv{BASELINE_PATH};
  if (versus_hwfarmd) {
    std::ofstream(dir + "/against.toml") << fleet(dir + "/against-state", 1024, fsync);
    baseline_argv = {against, "--config", dir + "/against.toml"};
  }
  Server baseline = start(baseline_argv, dir + "/baseline.log");
  long daemon_idle = rssKiB(daemon.pid), baseline_idle = rssKiB(baseline.pid);
  // Memory first, before the load rows leave ended leases behind.
  long daemon_waiting = rssWithWaiters(daemon, waiters, true);
  long baseline_open = rssWithWaiters(baseline, waiters, versus_hwfarmd);

  std::printf("hwfarmd lease benchmark: 1024 boards, leases.fsync = %s, %.1f s per row as %d alternating "
              "rounds (median shown), %u cores\n",
              fsync ? "true (answers wait for an fdatasync of the WAL)"
                    : "false (commits in the WAL, no fdatasync per answer)",
              seconds, rounds, std::thread::hardware_concurrency());
  if (versus_hwfarmd) std::printf("baseline column: %s\n", against.c_str());
  std::printf("%-34s %16s %16s %8s\n", "", "hwfarmd", versus_hwfarmd ? "baseline hwfarmd" : "minimal Beast",
              "ratio");
  for (int clients : client_counts) {
    // Alternate the two servers `rounds` times and keep each one's median
    // round: a noisy neighbour on the machine hits both sides alike.
    std::vector<LoadResult> hs, bs;
    for (int i = 0; i < rounds; ++i) {
      hs.push_back(load(daemon, clients, seconds / rounds));
      bs.push_back(load(baseline, clients, seconds / rounds));
    }
    auto median = [](std::vector<LoadResult>& v) {
      std::sort(v.begin(), v.end(), [](const LoadResult& a, const LoadResult& b) { return a.cycles_per_s < b.cycles_per_s; });
      LoadResult m = v[v.size() / 2];
      for (const auto& r : v) m.errors = std::max(m.errors, r.errors);
      return m;
    };
    LoadResult h = median(hs);
    LoadResult b = median(bs);
    std::string label = std::to_string(clients) + (clients == 1 ? " client" : " clients");
    std::printf("%-34s %16s %16s %7.0f%%\n", (label + ": acquire+release/s").c_str(), fmt(h.cycles_per_s, 0).c_str(),
                fmt(b.cycles_per_s, 0).c_str(), 100.0 * h.cycles_per_s / b.cycles_per_s);
    std::printf("%-34s %16s %16s\n", (label + ": p50 / p99 ms").c_str(),
                (fmt(h.p50_ms, 2) + " / " + fmt(h.p99_ms, 2)).c_str(),
                (fmt(b.p50_ms, 2) + " / " + fmt(b.p99_ms, 2)).c_str());
    std::printf("%-34s %16s %16s\n", (label + ": server CPU us/cycle").c_str(), fmt(h.cpu_us_per_cycle, 0).c_str(),
                fmt(b.cpu_us_per_cycle, 0).c_str());
    if (h.errors || b.errors)
      std::printf("%-34s %16llu %16llu\n", "  errors", static_cast<unsigned long long>(h.errors),
                  static_cast<unsigned long long>(b.errors));
  }
  auto grant = grantLatency(daemon, 500);
  auto rtt = versus_hwfarmd ? grantLatency(baseline, 500) : roundTrip(baseline, 500);
  std::printf("%-34s %16s %16s\n", "grant latency p50 / p99 ms", (fmt(grant.first, 2) + " / " + fmt(grant.second, 2)).c_str(),
              (fmt(rtt.first, 2) + " / " + fmt(rtt.second, 2)).c_str());
  if (!versus_hwfarmd) std::printf("%-34s %16s %16s\n", "  (baseline column: one request's round trip)", "", "");
  std::printf("%-34s %13.1f MiB %12.1f MiB\n", "RSS, idle", daemon_idle / 1024.0, baseline_idle / 1024.0);
  std::printf("%-34s %13.1f MiB %12.1f MiB\n",
              ("RSS, " + std::to_string(waiters) + " waiting requests").c_str(), daemon_waiting / 1024.0,
              baseline_open / 1024.0);
  if (!versus_hwfarmd) std::printf("%-34s %16s %16s\n", "  (baseline column: as many idle connections)", "", "");
  stop(daemon);
  stop(baseline);
  std::string rm = "rm -rf " + dir;
  return std::system(rm.c_str()) == 0 ? 0 : 1;
}
