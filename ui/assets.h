// The dashboard's files (ui/web/), compiled into hwfarmd so the page always
// matches the daemon serving it, and the chart library it loads, Debian's
// libjs-chart.js, read from /usr/share/javascript when asked for (Debian's
// copy, updated with the system; never a copy of ours). hwfarmd serves both
// (daemon/api/routes_ui.cpp) and publishes them to the upload bucket.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace hwfarm::ui {

struct Asset {
  std::string_view path;         // "index.html", "site.json", "ui/app.js", ...
  std::string_view content_type; // "text/javascript; charset=utf-8", ...
  std::string_view bytes;
};

// Every file of the page, in a fixed order.
std::span<const Asset> assets();

// The file at `path` (as Asset::path), or nullptr.
const Asset* findAsset(std::string_view path);

// Where the page loads the chart library from ("ui/vendor/chart.min.js"),
// and the Debian file it is (the build's libjs-chart.js).
inline constexpr std::string_view kChartLibraryPath = "ui/vendor/chart.min.js";
std::string chartLibraryFile();

// The Content-Security-Policy of the page: its own scripts, styles and data
// only; no inline script or style, no plugin, no framing.
inline constexpr std::string_view kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

} // namespace hwfarm::ui
