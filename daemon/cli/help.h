// Texts made from the command table (command_table.h): the usage, each
// command's help, docs/cli.md's generated blocks and the bash completion.
#pragma once

#include <optional>
#include <string>

#include "daemon/cli/command_table.h"

namespace hwfarm::cli {

// `hwfarmctl --help`: every command with its summary, the global options
// and the exit codes.
std::string usageText();
// "hwfarmctl lease acquire [OPTIONS]": how the command is written.
std::string usageLine(const CommandSpec& command);
// `hwfarmctl COMMAND --help`: its usage line, what it does, every option.
std::string commandHelp(const CommandSpec& command);
// `hwfarmctl lease --help`: the commands that begin with `word`; nothing
// when none does.
std::optional<std::string> groupHelp(const std::string& word);

// `text` with each generated block ("<!-- generated: NAME -->" up to
// "<!-- end generated -->") replaced by what the table makes of NAME: a
// command, "global options", "commands", "environment" or "exit codes".
// False with `error` for an unknown or unterminated block, or when a
// command has no block.
bool regenerateDocs(const std::string& text, std::string* out, std::string* error);

// The bash completion script (function _hwfarmctl, `complete -F`).
std::string bashCompletion();

} // namespace hwfarm::cli
