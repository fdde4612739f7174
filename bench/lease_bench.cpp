// Lease service benchmark: acquire+release cycles against hwfarmd (durable
// commits) next to the same load against bench/minimal_server (no state, no
// disk), measured in the same run. Prints a table with the ratios.
//
//   hwfarm_lease_bench [--seconds S] [--rounds N] [--clients 1,16,256] [--fsync on|off] [--waiters N]
//                      [--against PATH] [--tls]
//
// --against PATH puts another hwfarmd build (an earlier commit's, say) in the
// baseline column instead of the minimal server, on the same fleet and load,
// in the same alternating rounds: a before/after comparison in one run.
// --tls measures hwfarmd on https:// (a self-signed EC P-256 certificate made
// with `openssl req`, verified by the clients) against the same hwfarmd on
// plain http://, and adds a row where each cycle is a new connection (a
// handshake each, as every hwfarmctl invocation makes).
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
#include <boost/asio/ssl.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

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
  bool tls = false;
};

// --tls: the clients' context, trusting the daemon's self-signed certificate.
std::unique_ptr<asio::ssl::context> g_tls;

// One client connection: TCP, or TLS over TCP for a server with `tls`.
struct Link {
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;

  Link(asio::io_context& io, bool use_tls) {
    if (use_tls) tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(io, *g_tls);
    else plain = std::make_unique<beast::tcp_stream>(io);
  }
  beast::tcp_stream& tcp() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  awaitable<void> connect(const tcp::resolver::results_type& endpoints) {
    co_await tcp().async_connect(endpoints, use_awaitable);
    if (tls) co_await tls->async_handshake(asio::ssl::stream_base::client, use_awaitable);
  }
  void connectNow(const tcp::resolver::results_type& endpoints) {
    tcp().connect(endpoints);
    if (tls) tls->handshake(asio::ssl::stream_base::client);
  }
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
  std::regex re("listening on (https?)://([0-9.]+):([0-9]+)");
  for (int i = 0; i < 500; ++i) {
    std::smatch m;
    std::string text = readFile(log);
    if (std::regex_search(text, m, re) && (text.find(" ready: ") != std::string::npos || argv.size() == 1)) {
      s.tls = m[1] == "https";
      s.host = m[2];
      s.port = m[3];
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

template <class Stream>
awaitable<Reply> exchange(Stream& stream, http::verb verb, const std::string& target, const std::string& body) {
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

awaitable<Reply> call(Link& link, http::verb verb, const std::string& target, const std::string& body) {
  if (link.tls) co_return co_await exchange(*link.tls, verb, target, body);
  co_return co_await exchange(*link.plain, verb, target, body);
}

template <class Stream>
Reply exchangeNow(Stream& stream, http::verb verb, const std::string& target, const std::string& body,
                  bool read_answer = true) {
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "localhost");
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  if (!read_answer) return {};
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  return Reply{res.result_int(), std::move(res.body())};
}

Reply callNow(Link& link, http::verb verb, const std::string& target, const std::string& body,
              bool read_answer = true) {
  if (link.tls) return exchangeNow(*link.tls, verb, target, body, read_answer);
  return exchangeNow(*link.plain, verb, target, body, read_answer);
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

// `clients` connections, each looping acquire+release for `seconds`; with
// `connect_each`, each cycle on a new connection (and handshake).
LoadResult load(const Server& s, int clients, double seconds, bool connect_each = false) {
  asio::io_context io;
  std::vector<double> latencies;
  uint64_t errors = 0;
  auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  auto client = [&]() -> awaitable<void> {
    tcp::resolver resolver(io);
    auto endpoints = co_await resolver.async_resolve(s.host, s.port, use_awaitable);
    auto link = std::make_unique<Link>(io, s.tls);
    co_await link->connect(endpoints);
    while (Clock::now() < deadline) {
      auto t0 = Clock::now();
      if (connect_each && !latencies.empty()) {
        link = std::make_unique<Link>(io, s.tls);
        co_await link->connect(endpoints);
      }
      Reply r = co_await call(*link, http::verb::post, "/v1/leases", acquireBody("bench", 10));
      std::string id = idOf(r.body);
      if (r.status != 201 || id.empty()) {
        ++errors;
        continue;
      }
      Reply d = co_await call(*link, http::verb::delete_, "/v1/leases/" + id, "");
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
    Link a(io, s.tls), b(io, s.tls);
    co_await a.connect(endpoints);
    co_await b.connect(endpoints);
    Link* holder = &a;
    Link* waiter = &b;
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
    Link link(io, s.tls);
    co_await link.connect(co_await resolver.async_resolve(s.host, s.port, use_awaitable));
    for (int i = 0; i < rounds; ++i) {
      auto t0 = Clock::now();
      co_await call(link, http::verb::post, "/v1/leases", acquireBody("solo", 0));
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
  std::vector<std::unique_ptr<Link>> streams;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(s.host, s.port);
  std::string held;
  if (send_requests) {
    Link first(io, s.tls);
    first.connectNow(endpoints);
    held = idOf(callNow(first, http::verb::post, "/v1/leases", acquireBody("solo", 0)).body);
  }
  for (int i = 0; i < n; ++i) {
    auto stream = std::make_unique<Link>(io, s.tls);
    stream->connectNow(endpoints);
    if (send_requests) callNow(*stream, http::verb::post, "/v1/leases", acquireBody("solo", 120), false);
    streams.push_back(std::move(stream));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  long rss = rssKiB(s.pid);
  streams.clear(); // the waiters hang up and leave the queue
  if (send_requests) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Link last(io, s.tls);
    last.connectNow(endpoints);
    callNow(last, http::verb::delete_, "/v1/leases/" + held, "");
  }
  return rss;
}

// `tls_lines`: agent.tls_cert and tls_key, to listen on https://.
std::string fleet(const std::string& state, int boards, bool fsync, const std::string& tls_lines = "") {
  std::string listen = tls_lines.empty() ? "127.0.0.1:0" : "https://127.0.0.1:0";
  std::string t = "[agent]\nname = \"bench\"\nlisten = \"" + listen + "\"\nstate_dir = \"" + state +
                  "\"\ntier = 1\nanonymous = \"loopback\"\n" + tls_lines +
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
  bool tls = false;     // hwfarmd on https:// against itself on http://
  std::vector<char*> args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--tls") tls = true;
    else args.push_back(argv[i]);
  }
  argc = static_cast<int>(args.size());
  argv = args.data();
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
  std::string tls_lines;
  if (tls) {
    std::string make = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
                       "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " + dir +
                       "/key.pem -out " + dir + "/cert.pem 2>/dev/null && chmod 600 " + dir + "/key.pem";
    if (std::system(make.c_str()) != 0) {
      std::fprintf(stderr, "cannot make a certificate with openssl req\n");
      return 1;
    }
    tls_lines = "tls_cert = \"" + dir + "/cert.pem\"\ntls_key = \"" + dir + "/key.pem\"\n";
    g_tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    g_tls->load_verify_file(dir + "/cert.pem");
    g_tls->set_verify_mode(asio::ssl::verify_peer);
  }
  std::ofstream(dir + "/fleet.toml") << fleet(dir + "/state", 1024, fsync, tls_lines);
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
  if (tls) against = HWFARMD_PATH; // the same build on plain HTTP
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
  int w = tls ? 48 : 34; // the label column
  if (tls)
    std::printf("TLS: hwfarmd on https:// (EC P-256 certificate, verified by the clients; TLS 1.3) against the same "
                "build on http://\n");
  else if (versus_hwfarmd)
    std::printf("baseline column: %s\n", against.c_str());
  std::printf("%-*s %16s %16s %8s\n", w, "", tls ? "hwfarmd https" : "hwfarmd",
              tls ? "hwfarmd http" : versus_hwfarmd ? "baseline hwfarmd" : "minimal Beast", "ratio");
  // Each row: the clients, and whether each cycle opens its own connection.
  std::vector<std::pair<int, bool>> rows;
  for (int clients : client_counts) rows.emplace_back(clients, false);
  if (tls) rows.emplace_back(1, true);
  for (auto [clients, connect_each] : rows) {
    // Alternate the two servers `rounds` times and keep each one's median
    // round: a noisy neighbour on the machine hits both sides alike.
    std::vector<LoadResult> hs, bs;
    for (int i = 0; i < rounds; ++i) {
      hs.push_back(load(daemon, clients, seconds / rounds, connect_each));
      bs.push_back(load(baseline, clients, seconds / rounds, connect_each));
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
    if (connect_each) label += ", a connection each";
    std::printf("%-*s %16s %16s %7.0f%%\n", w, (label + ": acquire+release/s").c_str(), fmt(h.cycles_per_s, 0).c_str(),
                fmt(b.cycles_per_s, 0).c_str(), 100.0 * h.cycles_per_s / b.cycles_per_s);
    std::printf("%-*s %16s %16s\n", w, (label + ": p50 / p99 ms").c_str(),
                (fmt(h.p50_ms, 2) + " / " + fmt(h.p99_ms, 2)).c_str(),
                (fmt(b.p50_ms, 2) + " / " + fmt(b.p99_ms, 2)).c_str());
    std::printf("%-*s %16s %16s\n", w, (label + ": server CPU us/cycle").c_str(), fmt(h.cpu_us_per_cycle, 0).c_str(),
                fmt(b.cpu_us_per_cycle, 0).c_str());
    if (h.errors || b.errors)
      std::printf("%-*s %16llu %16llu\n", w, "  errors", static_cast<unsigned long long>(h.errors),
                  static_cast<unsigned long long>(b.errors));
  }
  auto grant = grantLatency(daemon, 500);
  auto rtt = versus_hwfarmd ? grantLatency(baseline, 500) : roundTrip(baseline, 500);
  std::printf("%-*s %16s %16s\n", w, "grant latency p50 / p99 ms", (fmt(grant.first, 2) + " / " + fmt(grant.second, 2)).c_str(),
              (fmt(rtt.first, 2) + " / " + fmt(rtt.second, 2)).c_str());
  if (!versus_hwfarmd) std::printf("%-*s %16s %16s\n", w, "  (baseline column: one request's round trip)", "", "");
  std::printf("%-*s %13.1f MiB %12.1f MiB\n", w, "RSS, idle", daemon_idle / 1024.0, baseline_idle / 1024.0);
  std::printf("%-*s %13.1f MiB %12.1f MiB\n", w,
              ("RSS, " + std::to_string(waiters) + " waiting requests").c_str(), daemon_waiting / 1024.0,
              baseline_open / 1024.0);
  if (!versus_hwfarmd) std::printf("%-*s %16s %16s\n", w, "  (baseline column: as many idle connections)", "", "");
  stop(daemon);
  stop(baseline);
  std::string rm = "rm -rf " + dir;
  return std::system(rm.c_str()) == 0 ? 0 : 1;
}
