#include "daemon/services/dashboard_publish.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include <boost/json.hpp>

#include "ui/assets.h"

namespace json = boost::json;

namespace hwfarm {
namespace {

std::string under(const std::string& prefix, const std::string& path) {
  return (prefix.empty() ? "" : prefix + "/") + "dashboard/" + path;
}

std::string readFile(const std::string& path) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

} // namespace

std::vector<BucketObject> dashboardPage(const std::string& prefix) {
  std::vector<BucketObject> out;
  for (const ui::Asset& a : ui::assets()) {
    if (a.path == "site.json") continue;
    out.push_back({under(prefix, std::string(a.path)), std::string(a.bytes), std::string(a.content_type)});
  }
  std::string chart = readFile(ui::chartLibraryFile());
  if (!chart.empty())
    out.push_back({under(prefix, std::string(ui::kChartLibraryPath)), std::move(chart), "text/javascript; charset=utf-8"});
  out.push_back({under(prefix, "site.json"),
                 json::serialize(json::object{{"mode", "bucket"}, {"prefix", prefix}, {"days", 14}}) + "\n",
                 "application/json"});
  return out;
}

std::string labsKey(const std::string& prefix) { return under(prefix, "labs.json"); }

std::string mergeLabs(const std::string& existing, const LabEntry& entry) {
  json::array labs;
  boost::system::error_code ec;
  json::value old = existing.empty() ? json::value() : json::parse(existing, ec);
  if (!ec && old.is_object())
    if (const json::value* list = old.as_object().if_contains("labs"); list && list->is_array())
      for (const auto& lab : list->as_array())
        if (lab.is_object())
          if (const json::value* a = lab.as_object().if_contains("agent"); a && a->is_string() && a->as_string() != entry.agent)
            labs.push_back(lab);
  json::array days, history;
  for (const auto& d : entry.days) days.emplace_back(d);
  for (const auto& h : entry.history) history.emplace_back(h);
  labs.push_back(json::object{{"agent", entry.agent}, {"updated", entry.updated}, {"days", std::move(days)},
                              {"history", std::move(history)}});
  std::sort(labs.begin(), labs.end(), [](const json::value& a, const json::value& b) {
    return json::value_to<std::string>(a.at("agent")) < json::value_to<std::string>(b.at("agent"));
  });
  return json::serialize(json::object{{"labs", std::move(labs)}}) + "\n";
}

} // namespace hwfarm
