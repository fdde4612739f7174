// What an upload puts in the bucket for the dashboard's static copy
// (docs/dashboard.md): the page's files under <prefix>/dashboard/, and the
// labs.json beside them that lists every lab publishing under the prefix.
#pragma once

#include <string>
#include <vector>

namespace hwfarm {

struct BucketObject {
  std::string key; // the whole key
  std::string body;
  std::string content_type;
};

// The page's files (the ones hwfarmd serves, its chart library included)
// under <prefix>/dashboard/, with a site.json that puts the page in bucket
// mode. Without the chart library (Debian's libjs-chart.js) the page is
// published without it (its charts then say so).
std::vector<BucketObject> dashboardPage(const std::string& prefix);

// <prefix>/dashboard/labs.json.
std::string labsKey(const std::string& prefix);

// This lab's entry of labs.json.
struct LabEntry {
  std::string agent;
  std::string updated;                    // RFC 3339
  std::vector<std::string> days;          // days it has an index.json for, newest first
  std::vector<std::string> history;       // its history files' names (history/<name>)
};

// labs.json with `entry` in place of the lab's old one, every other lab's
// kept, ordered by name. `existing` is the bucket's labs.json, or "" (none
// yet); one that is not such a file is replaced (its labs put themselves
// back at their next publish).
std::string mergeLabs(const std::string& existing, const LabEntry& entry);

} // namespace hwfarm
