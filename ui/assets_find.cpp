#include "ui/assets.h"

namespace hwfarm::ui {

const Asset* findAsset(std::string_view path) {
  for (const Asset& a : assets())
    if (a.path == path) return &a;
  return nullptr;
}

std::string chartLibraryFile() { return HWFARM_CHART_JS; }

} // namespace hwfarm::ui
