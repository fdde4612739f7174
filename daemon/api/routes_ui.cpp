// The dashboard's routes (docs/dashboard.md): its static files, which need
// no token (they hold no data: the page asks for a token, then reads the
// JSON API with it), and GET /v1/whoami: who the caller is (its token's name
// and role, or "anonymous" on loopback), or null name and role with why
// (no token, a token that is not valid): 200 either way, so the page learns
// whether it must ask for a token without an error.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/api/routes.h"
#include "ui/assets.h"

namespace hwfarm::api {

namespace {

constexpr int64_t kMaxChartLibraryBytes = 8 << 20;

HttpResponse asset(std::string body, std::string_view content_type) {
  HttpResponse r = okText(std::move(body));
  r.content_type = std::string(content_type);
  r.headers.emplace_back("Content-Security-Policy", std::string(ui::kContentSecurityPolicy));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

// Debian's chart library, read as it is on disk now (a package upgrade is
// served at once). Empty when it is missing or not a plain file.
std::string readChartLibrary() {
  std::string file = ui::chartLibraryFile();
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  std::string bytes;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= kMaxChartLibraryBytes) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    bytes.resize(got);
  }
  ::close(fd);
  return bytes;
}

} // namespace

void Handlers::staticFile(Call& c) {
  std::string path = c.target.path == "/" ? "index.html" : c.target.path.substr(1);
  if (path == ui::kChartLibraryPath) {
    std::string bytes = readChartLibrary();
    if (bytes.empty())
      return c.respond(jsonError(404, "not_found", "the chart library " + ui::chartLibraryFile() +
                                                       " is not installed (Debian package libjs-chart.js)"));
    return c.respond(asset(std::move(bytes), "text/javascript; charset=utf-8"));
  }
  const ui::Asset* a = ui::findAsset(path);
  if (!a) return c.respond(jsonError(404, "not_found", "no such file: " + echoed(c.target.path)));
  c.respond(asset(std::string(a->bytes), a->content_type));
}

void Handlers::whoami(Call& c) {
  if (!c.principal)
    return c.respond(ok(json::object{{"name", nullptr}, {"role", nullptr},
                                     {"detail", c.request.authorization.empty() ? "a token is needed"
                                                                                : "the bearer token is not valid"}}));
  c.respond(ok(json::object{{"name", c.principal->name}, {"role", config::toString(c.principal->role)}}));
}

} // namespace hwfarm::api
