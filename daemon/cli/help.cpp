#include "daemon/cli/help.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/generated_text.h"
#include "daemon/cli/session.h"

namespace hwfarm::cli {
namespace {

constexpr size_t kWidth = 79;

std::vector<std::string> splitWords(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// `text` wrapped to kWidth, the first line after `first` (already printed,
// `indent` columns wide), the others indented by `indent`.
std::string wrap(const std::string& text, size_t indent, size_t first_column) {
  std::string out;
  size_t column = first_column;
  for (const auto& word : splitWords(text)) {
    if (column > indent && column + 1 + word.size() > kWidth) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent || (column == indent && !out.empty())) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
  }
  return out;
}

std::string sentence(std::string text) {
  if (text.empty()) return text;
  text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text + ".";
}

std::string joined(const std::string& spaced, const std::string& separator) {
  std::string out;
  for (const auto& w : splitWords(spaced)) out += (out.empty() ? "" : separator) + w;
  return out;
}

// "--type T", "-q, --quiet".
std::string optionLabel(const OptionSpec& o) {
  std::string label = *o.alias ? std::string(o.alias) + ", " + o.name : std::string(o.name);
  return *o.value ? label + " " + o.value : label;
}

// The option's help with what it repeats, takes and defaults to.
std::string optionText(const OptionSpec& o, bool markdown) {
  auto code = [&](const std::string& s) { return markdown ? "`" + s + "`" : s; };
  std::string text = o.help;
  if (*o.choices) {
    std::string list;
    for (const auto& c : splitWords(o.choices)) list += (list.empty() ? "" : ", ") + code(c);
    text += "; one of " + list;
  }
  if (o.repeatable) text += "; repeatable";
  if (!markdown) {
    if (o.required) text += "; required";
    else if (*o.default_text) text += "; default " + std::string(o.default_text);
  }
  return text;
}

std::string positionalText(const PositionalSpec& p) {
  std::string name = *p.choices ? joined(p.choices, "|") : p.name;
  if (p.many) name += "...";
  return p.optional ? "[" + name + "]" : name;
}

// Rows of "  LABEL  TEXT" with the texts in one column.
std::string optionList(const std::vector<OptionSpec>& options) {
  size_t width = 0;
  for (const auto& o : options) width = std::max(width, optionLabel(o).size());
  width = std::min<size_t>(width, 24);
  std::string out;
  for (const auto& o : options) {
    std::string label = "  " + optionLabel(o);
    size_t indent = width + 4;
    if (label.size() + 2 > indent) out += label + "\n" + std::string(indent, ' ');
    else out += label + std::string(indent - label.size(), ' ');
    out += wrap(optionText(o, false), indent, indent) + "\n";
  }
  return out;
}

std::vector<std::string> groupsInOrder() {
  std::vector<std::string> groups;
  for (const auto& c : commands())
    if (!c.hidden && std::find(groups.begin(), groups.end(), c.group) == groups.end()) groups.push_back(c.group);
  return groups;
}

// --- docs/cli.md ---------------------------------------------------------

std::string cell(std::string text) {
  for (size_t at = 0; (at = text.find('|', at)) != std::string::npos; at += 2) text.replace(at, 1, "\\|");
  return text;
}

// The heading's anchor as GitHub makes it: lower case, punctuation but
// `-` and `_` dropped, spaces to `-`.
std::string anchor(const std::string& heading) {
  std::string out;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_') out += static_cast<char>(std::tolower(c));
    else if (c == ' ') out += '-';
  }
  return out;
}

std::string markdownCommand(const CommandSpec& c) {
  std::string out = "### `" + std::string(c.name) + "`\n\n```\n" + usageLine(c) + "\n```\n\n" + sentence(c.summary);
  if (*c.help) out += " " + std::string(c.help);
  out += "\n";
  if (c.options.empty()) return out;
  out += "\n| Option | Default | Meaning |\n| --- | --- | --- |\n";
  for (const auto& o : c.options)
    out += "| `" + cell(optionLabel(o)) + "` | " + cell(o.required ? "required" : o.default_text) + " | " +
           cell(optionText(o, true)) + " |\n";
  return out;
}

std::string markdownBlock(const std::string& name, std::string* error) {
  if (const CommandSpec* c = findCommand(name); c && !c->hidden) return markdownCommand(*c);
  std::string out;
  if (name == "global options") {
    out = "| Option | Default | Meaning |\n| --- | --- | --- |\n";
    for (const auto& o : globalOptions())
      out += "| `" + cell(optionLabel(o)) + "` | " + cell(o.default_text) + " | " + cell(optionText(o, true)) + " |\n";
  } else if (name == "commands") {
    out = "| Command | What it does |\n| --- | --- |\n";
    for (const auto& group : groupsInOrder())
      for (const auto& c : commands())
        if (!c.hidden && c.group == group)
          out += "| [`" + std::string(c.name) + "`](#" + anchor(c.name) + ") | " + cell(c.summary) + " |\n";
  } else if (name == "environment") {
    out = "| Variable | Used for |\n| --- | --- |\n";
    for (const auto& e : environment()) out += "| `" + joined(e.name, "`, `") + "` | " + cell(e.use) + " |\n";
  } else if (name == "exit codes") {
    out = "| Code | Meaning |\n| --- | --- |\n";
    for (const auto& e : exitCodes()) out += "| " + cell(e.code) + " | " + cell(e.detail) + " |\n";
  } else {
    *error = "no generated block is called \"" + name + "\"";
  }
  return out;
}

// --- bash completion -----------------------------------------------------

// Words bash may hold unquoted inside "...": the table's names and choices.
std::string completionOf(Completion c) {
  return c == Completion::file ? "@file" : c == Completion::directory ? "@dir" : "";
}

std::string optionValues(const OptionSpec& o) {
  if (*o.choices) {
    std::string words;
    for (const auto& w : splitWords(o.choices)) words += (words.empty() ? "" : " ") + w.substr(0, w.find("DIR"));
    return words;
  }
  return completionOf(o.complete);
}

constexpr const char* kCompletionFunction = R"BASH(
# The command's name is its first one or two words; then option values,
# options and positional arguments from the tables above.
_hwfarmctl() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local i word name="" count=0 expect=""
  local -a words=()
  COMPREPLY=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [[ $word == -- ]]; then
      COMPREPLY=($(compgen -c -- "$cur"))
      [[ $name == "lease run" && $i -lt $((COMP_CWORD - 1)) ]] && COMPREPLY=($(compgen -f -- "$cur"))
      return 0
    fi
    if [[ -n $expect ]]; then expect=""; continue; fi
    if [[ $word == -* ]]; then
      [[ " $_hwfarmctl_global_valued ${_hwfarmctl_valued[${name:-_}]} " == *" ${word%%=*} "* && $word != *=* ]] && expect=1
      continue
    fi
    if [[ -z $name ]]; then
      if [[ -n ${_hwfarmctl_options[$word]+set} || -n ${_hwfarmctl_groups[$word]+set} ]]; then name=$word; continue; fi
      return 0
    fi
    if [[ $count -eq 0 && -n ${_hwfarmctl_options[$name $word]+set} ]]; then name="$name $word"; continue; fi
    ((count++))
  done
  if [[ -n $expect ]]; then
    _hwfarmctl_values "${_hwfarmctl_values[$name $prev]-${_hwfarmctl_values[$prev]}}"
    return 0
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$_hwfarmctl_global ${_hwfarmctl_options[${name:-_}]}" -- "$cur"))
    return 0
  fi
  if [[ -z $name ]]; then
    COMPREPLY=($(compgen -W "$_hwfarmctl_commands" -- "$cur"))
    return 0
  fi
  local values=${_hwfarmctl_args[$name $count]-${_hwfarmctl_args[$name *]}}
  if [[ $count -eq 0 && -n ${_hwfarmctl_groups[$name]+set} ]]; then
    values="${_hwfarmctl_groups[$name]} ${values}"
  fi
  _hwfarmctl_values "$values"
}

# COMPREPLY from words, "@file" (file names) and "@dir" (directories).
_hwfarmctl_values() {
  local w list=""
  COMPREPLY=()
  for w in $1; do
    case $w in
      @file) COMPREPLY+=($(compgen -f -- "$cur")) ;;
      @dir) COMPREPLY+=($(compgen -d -- "$cur")) ;;
      *) list+=" $w" ;;
    esac
  done
  [[ -n $list ]] && COMPREPLY+=($(compgen -W "$list" -- "$cur"))
  return 0
}

complete -o filenames -F _hwfarmctl hwfarmctl
)BASH";

} // namespace

std::string usageLine(const CommandSpec& c) {
  std::string line = "hwfarmctl " + std::string(c.name);
  if (*c.synopsis) return line + " " + c.synopsis;
  bool optional = false;
  for (const auto& o : c.options) {
    if (o.required) line += " " + std::string(o.name) + (*o.value ? " " + std::string(o.value) : "");
    else optional = true;
  }
  if (optional) line += " [OPTIONS]";
  for (const auto& p : c.positionals) line += " " + positionalText(p);
  if (*c.rest) line += " -- " + std::string(c.rest);
  return line;
}

std::string usageText() {
  std::string out =
      "usage: hwfarmctl [OPTIONS] COMMAND [ARGS...]\n"
      "       hwfarmctl COMMAND --help    the command's arguments and options\n";
  size_t width = 0;
  for (const auto& c : commands()) width = std::max(width, std::string(c.name).size());
  for (const auto& group : groupsInOrder()) {
    out += "\n" + group + ":\n";
    for (const auto& c : commands()) {
      if (c.hidden || c.group != group) continue;
      std::string name = "  " + std::string(c.name);
      out += name + std::string(width + 4 - name.size(), ' ') + wrap(c.summary, width + 4, width + 4) + "\n";
    }
  }
  out += "\noptions (anywhere before \"--\"):\n" + optionList(globalOptions()) + "\nexit codes:\n";
  for (const auto& e : exitCodes()) {
    std::string code = "  " + std::string(e.code);
    out += code + std::string(code.size() < 14 ? 14 - code.size() : 1, ' ') + e.brief + "\n";
  }
  return out;
}

std::string commandHelp(const CommandSpec& c) {
  std::string out = "usage: " + usageLine(c) + "\n\n" + wrap(sentence(c.summary), 0, 0) + "\n";
  if (*c.help) out += wrap(c.help, 0, 0) + "\n";
  if (!c.options.empty()) out += "\noptions:\n" + optionList(c.options);
  std::string global;
  for (const auto& o : globalOptions())
    if (std::string(o.name) != "--help") global += (global.empty() ? "" : ", ") + std::string(o.name) + (*o.value ? std::string(" ") + o.value : "");
  return out + "\n" + wrap("global options: " + global + " (hwfarmctl --help)", 0, 0) + "\n";
}

std::optional<std::string> groupHelp(const std::string& word) {
  std::string out;
  for (const auto& c : commands())
    if (!c.hidden && std::string(c.name).rfind(word + " ", 0) == 0)
      out += "  " + usageLine(c).substr(10) + "\n" + std::string(6, ' ') + wrap(c.summary, 6, 6) + "\n";
  if (out.empty()) return std::nullopt;
  return "usage: hwfarmctl " + word + " COMMAND ...\n\ncommands:\n" + out +
         "\n(hwfarmctl " + word + " COMMAND --help: its options)\n";
}

bool regenerateDocs(const std::string& text, std::string* out, std::string* error) {
  std::set<std::string> seen;
  auto make = [](const std::string& name) -> std::optional<std::string> {
    std::string error;
    std::string block = markdownBlock(name, &error);
    if (!error.empty()) return std::nullopt;
    return block;
  };
  if (!regenerateBlocks(text, make, out, error, &seen)) return false;
  for (const auto& c : commands())
    if (!c.hidden && !seen.count(c.name)) {
      *error = "no generated block for the command \"" + std::string(c.name) + "\"";
      return false;
    }
  return true;
}

std::string bashCompletion() {
  std::string out =
      "# bash completion for hwfarmctl, generated from its command table\n"
      "# (hwfarmctl generate-completion): commands, options and their values.\n";
  std::string first_words, global, global_valued;
  std::set<std::string> firsts;
  std::map<std::string, std::string> subs; // group -> its second words
  std::string options, valued, values, args, groups;
  for (const auto& o : globalOptions()) {
    global += std::string(global.empty() ? "" : " ") + o.name + (*o.alias ? std::string(" ") + o.alias : "");
    if (*o.value) global_valued += std::string(global_valued.empty() ? "" : " ") + o.name;
    if (std::string v = optionValues(o); !v.empty()) values += "  [" + std::string(o.name) + "]=\"" + v + "\"\n";
  }
  for (const auto& c : commands()) {
    if (c.hidden) continue;
    std::string name = c.name;
    std::string first = name.substr(0, name.find(' '));
    if (firsts.insert(first).second) first_words += (first_words.empty() ? "" : " ") + first;
    if (name.find(' ') != std::string::npos) subs[first] += (subs[first].empty() ? "" : " ") + name.substr(first.size() + 1);
    std::string names, with_values;
    for (const auto& o : c.options) {
      names += std::string(names.empty() ? "" : " ") + o.name + (*o.alias ? std::string(" ") + o.alias : "");
      if (*o.value) with_values += std::string(with_values.empty() ? "" : " ") + o.name;
      if (std::string v = optionValues(o); !v.empty())
        values += "  [\"" + name + " " + o.name + "\"]=\"" + v + "\"\n";
    }
    options += "  [\"" + name + "\"]=\"" + names + "\"\n";
    valued += "  [\"" + name + "\"]=\"" + with_values + "\"\n";
    for (size_t i = 0; i < c.positionals.size(); ++i) {
      const PositionalSpec& p = c.positionals[i];
      std::string v = *p.choices ? std::string(p.choices) : completionOf(p.complete);
      std::string key = p.many ? "*" : std::to_string(i);
      args += "  [\"" + name + " " + key + "\"]=\"" + v + "\"\n";
    }
  }
  for (const auto& [group, words] : subs) groups += "  [" + group + "]=\"" + words + "\"\n";
  out += "_hwfarmctl_commands=\"" + first_words + "\"\n";
  out += "_hwfarmctl_global=\"" + global + "\"\n";
  out += "_hwfarmctl_global_valued=\"" + global_valued + "\"\n";
  out += "declare -gA _hwfarmctl_groups=(\n" + groups + ")\n";
  out += "declare -gA _hwfarmctl_options=(\n" + options + ")\n";
  out += "declare -gA _hwfarmctl_valued=(\n" + valued + ")\n";
  out += "declare -gA _hwfarmctl_values=(\n" + values + ")\n";
  out += "declare -gA _hwfarmctl_args=(\n" + args + ")\n";
  return out + kCompletionFunction;
}

int helpCommand(Session& s, const Args& a) {
  std::string name;
  for (const auto& w : a.positional()) name += (name.empty() ? "" : " ") + w;
  if (name.empty()) {
    s.out << usageText();
    return kOk;
  }
  if (const CommandSpec* c = findCommand(name); c && !c->hidden) {
    s.out << commandHelp(*c);
    return kOk;
  }
  if (auto group = groupHelp(name)) {
    s.out << *group;
    return kOk;
  }
  s.err << "hwfarmctl help: no command \"" << name << "\" (hwfarmctl --help lists them)\n";
  return kUsage;
}

int generateDocsCommand(Session& s, const Args& a) {
  std::ifstream in(a.positional()[0], std::ios::binary);
  if (!in) {
    s.err << "hwfarmctl generate-docs: cannot read " << a.positional()[0] << "\n";
    return kUsage;
  }
  std::string text((std::istreambuf_iterator<char>(in)), {}), out, error;
  if (!regenerateDocs(text, &out, &error)) {
    s.err << "hwfarmctl generate-docs: " << a.positional()[0] << ": " << error << "\n";
    return kApiError;
  }
  s.out << out;
  return kOk;
}

int generateCompletionCommand(Session& s, const Args&) {
  s.out << bashCompletion();
  return kOk;
}

} // namespace hwfarm::cli
