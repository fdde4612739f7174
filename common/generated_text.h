// Generated blocks in a hand-written text (docs/cli.md, docs/hwfarmd.md):
//
//   <!-- generated: NAME -->
//   ...made by a program from its tables...
//   <!-- end generated -->
//
// A program rewrites each block from its tables, so a page can hold prose
// and the exact option lists side by side without either drifting.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>

namespace hwfarm {

// `text` with each block's content replaced by `make(NAME)`. False with
// `error` for an unterminated block or a NAME `make` does not know
// (nothing). `names` gets every NAME seen.
bool regenerateBlocks(const std::string& text, const std::function<std::optional<std::string>(const std::string&)>& make,
                      std::string* out, std::string* error, std::set<std::string>* names = nullptr);

} // namespace hwfarm
