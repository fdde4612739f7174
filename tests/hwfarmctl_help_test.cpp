// hwfarmctl's help, its suggestions, docs/cli.md, the bash completion and
// the man pages: all made from the command table, checked here against it.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "daemon/cli/args.h"
#include "daemon/cli/command_table.h"
#include "daemon/cli/help.h"
#include "daemon/cli/lease_wait.h"
#include "tests/support/process.h"

using namespace hwfarm::test;
using namespace hwfarm::cli;
using namespace std::chrono_literals;

namespace {

// hwfarmctl with no daemon to reach: what it says without one.
CommandResult ctl(std::vector<std::string> args) {
  args.insert(args.begin(), HWFARMCTL_PATH);
  return runCommand(args, {{"HWFARM_URL", "unix:/nonexistent/hwfarmd.sock"}, {"HWFARM_LEASE_ID", ""}}, 30s);
}

std::vector<std::string> words(const std::string& name) {
  std::vector<std::string> out;
  std::istringstream in(name);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// What bash completes for the words before the cursor and `cur`, with the
// installed completion script sourced.
std::vector<std::string> complete(const std::vector<std::string>& before, const std::string& cur,
                                  const std::string& cwd = "/") {
  std::string script = "source '" + std::string(HWFARM_COMPLETION_PATH) + "' && COMP_WORDS=(hwfarmctl";
  for (const auto& w : before) script += " '" + w + "'";
  script += " '" + cur + "') && COMP_CWORD=" + std::to_string(before.size() + 1) +
            " && _hwfarmctl && printf '%s\\n' \"${COMPREPLY[@]}\" | LC_ALL=C sort";
  auto r = runCommand({"/bin/bash", "-c", "cd '" + cwd + "' && " + script}, {}, 30s);
  INFO(r.err);
  REQUIRE(r.status.code == 0);
  REQUIRE(r.err.empty());
  std::vector<std::string> out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

} // namespace

TEST_CASE("every command's --help prints its own usage and every option of the table") {
  for (const auto& c : commands()) {
    if (c.hidden) continue;
    INFO(c.name);
    std::vector<std::string> args = words(c.name);
    args.push_back("--help");
    auto help = ctl(args);
    CHECK(help.status.code == 0);
    CHECK(help.out == commandHelp(c));
    CHECK(help.out.rfind("usage: " + usageLine(c) + "\n", 0) == 0);
    for (const auto& o : c.options) CHECK(help.out.find(std::string("  ") + o.name) != std::string::npos);
    // `help COMMAND` and -h after other options say the same.
    std::vector<std::string> via_help = words(c.name);
    via_help.insert(via_help.begin(), "help");
    CHECK(ctl(via_help).out == help.out);
  }
  // The run command's help is its own, with the options the global usage once lacked.
  auto run = ctl({"run", "--lease", "x", "-h"});
  CHECK(run.out.find("lease acquire") == std::string::npos);
  for (const char* option : {"--targets T,...", "--suite FILE", "--thresholds FILE", "golden:DIR",
                             "--reference-image FILE", "--no-retry", "--board NAME"})
    CHECK(run.out.find(option) != std::string::npos);
}

TEST_CASE("the usage lists every command with its summary and every global option") {
  auto usage = ctl({"--help"});
  CHECK(usage.status.code == 0);
  CHECK(usage.out == usageText());
  for (const auto& c : commands()) {
    INFO(c.name);
    bool listed = usage.out.find("  " + std::string(c.name) + " ") != std::string::npos;
    CHECK(listed == !c.hidden);
  }
  for (const auto& o : globalOptions()) CHECK(usage.out.find(o.name) != std::string::npos);
  // A group alone lists its commands.
  auto lease = ctl({"lease", "--help"});
  CHECK(lease.status.code == 0);
  for (const char* sub : {"acquire", "run", "renew", "release", "show", "list", "export"})
    CHECK(lease.out.find("  lease " + std::string(sub)) != std::string::npos);
}

TEST_CASE("the parser takes exactly the options of the command's table") {
  for (const auto& c : commands()) {
    INFO(c.name);
    for (const auto& o : c.options) {
      INFO(o.name);
      std::vector<std::string> argv{o.name};
      if (*o.value) argv.push_back("1");
      Args parsed(argv, c);
      CHECK(parsed.error().find("unknown option") == std::string::npos);
      CHECK((*o.value ? parsed.value(o.name) == std::optional<std::string>("1") : parsed.flag(o.name)));
      if (*o.value) CHECK(Args({std::string(o.name) + "=2"}, c).value(o.name) == std::optional<std::string>("2"));
    }
    CHECK(Args({"--no-such-option"}, c).error().rfind("unknown option --no-such-option", 0) == 0);
  }
}

TEST_CASE("mistakes get a suggestion") {
  auto command = ctl({"leases"});
  CHECK(command.status.code == 2);
  CHECK(command.err == "hwfarmctl: unknown command \"leases\" (did you mean \"lease\"?)\n"
                       "(hwfarmctl --help lists the commands)\n");
  auto sub = ctl({"lease", "aquire", "--type", "x"});
  CHECK(sub.status.code == 2);
  CHECK(sub.err.rfind("hwfarmctl: unknown command \"lease aquire\" (did you mean \"lease acquire\"?)\n", 0) == 0);
  auto option = ctl({"lease", "acquire", "--typ", "mps2-an385"});
  CHECK(option.status.code == 2);
  CHECK(option.err == "hwfarmctl lease acquire: unknown option --typ (did you mean --type?)\n"
                      "usage: hwfarmctl lease acquire [OPTIONS]\n(hwfarmctl lease acquire --help: more)\n");
  auto elsewhere = ctl({"lease", "acquire", "--type", "x", "--out", "f"});
  CHECK(elsewhere.err.rfind("hwfarmctl lease acquire: unknown option --out (an option of lease export, run, run "
                            "wait, run fetch)\n", 0) == 0);
  auto pin = ctl({"tier", "pni", "2"});
  CHECK(pin.status.code == 2);
  CHECK(pin.err.rfind("hwfarmctl tier: unexpected argument \"pni\" (did you mean \"tier pin\"?)\n", 0) == 0);
  auto group = ctl({"lease"});
  CHECK(group.status.code == 2);
  CHECK(group.err.rfind("hwfarmctl: lease needs a command: acquire, export, list, release, renew, run, show\n", 0) ==
        0);
  auto missing = ctl({"token", "new", "ci"});
  CHECK(missing.status.code == 2);
  CHECK(missing.err.rfind("hwfarmctl token new: --role ROLE is required\n", 0) == 0);
  // A file that is not there but reads like a run command.
  auto image = ctl({"run", "--lease", "0123456789abcdef0123456789abcdef", "shwo"});
  CHECK(image.status.code == 2);
  CHECK(image.err.find("(did you mean `hwfarmctl run show`?)") != std::string::npos);
  // Global options take --opt=VALUE too.
  auto url = ctl({"--url=unix:/nonexistent/other.sock", "boards"});
  CHECK(url.status.code == 3);
  CHECK(url.err.find("unix:/nonexistent/other.sock") != std::string::npos);
}

TEST_CASE("docs/cli.md holds what the command table makes of its generated blocks") {
  std::string path = std::string(HWFARM_SOURCE_DIR) + "/docs/cli.md";
  auto generated = ctl({"generate-docs", path});
  REQUIRE(generated.status.code == 0);
  INFO("docs/cli.md is out of date: cmake --build build --target cli-docs rewrites it from the table");
  CHECK(generated.out == readFile(path));
  // A block for an unknown name, or a command without its block, is an error.
  TempDir dir;
  auto unknown = ctl({"generate-docs", dir.write("x.md", "<!-- generated: lease frob -->\n<!-- end generated -->\n")});
  CHECK(unknown.status.code == 1);
  CHECK(unknown.err.find("no generated block is called \"lease frob\"") != std::string::npos);
  auto lacking = ctl({"generate-docs", dir.write("y.md", "# hwfarmctl\n")});
  CHECK(lacking.status.code == 1);
  CHECK(lacking.err.find("no generated block for the command \"status\"") != std::string::npos);
}

TEST_CASE("the bash completion completes commands, subcommands, options and their values") {
  CHECK(complete({}, "lea") == std::vector<std::string>{"lease"});
  CHECK(complete({"lease"}, "ac") == std::vector<std::string>{"acquire"});
  CHECK(complete({"--url", "http://x:1", "lease", "acquire"}, "--ty") == std::vector<std::string>{"--type"});
  CHECK(complete({"lease", "acquire", "--context"}, "n") == std::vector<std::string>{"nightly"});
  CHECK(complete({"lease", "acquire", "--type", "x"}, "--wo") == std::vector<std::string>{"--worker"});
  CHECK(complete({"power", "L", "B"}, "c") == std::vector<std::string>{"cycle"});
  CHECK(complete({"tier"}, "p") == std::vector<std::string>{"pin"});
  CHECK(complete({"runs", "--state"}, "f") == std::vector<std::string>{"failed"});
  CHECK(complete({"token", "new", "ci", "--role"}, "op") == std::vector<std::string>{"operator"});
  // Files for images and file options, directories for --out DIR.
  TempDir dir;
  dir.write("fw.elf", "x");
  ::mkdir(dir.file("results").c_str(), 0755);
  CHECK(complete({"flash", "L", "B"}, "f", dir.path()) == std::vector<std::string>{"fw.elf"});
  CHECK(complete({"run", "--out"}, "", dir.path()) == std::vector<std::string>{"results"});
  auto run = complete({"run"}, "", dir.path());
  for (const char* expected : {"show", "wait", "cancel", "fetch", "fw.elf"})
    CHECK(std::find(run.begin(), run.end(), expected) != run.end());
  // Every option of every command completes from its prefix.
  for (const auto& c : commands()) {
    if (c.hidden) continue;
    for (const auto& o : c.options) {
      INFO(c.name << " " << o.name);
      auto got = complete(words(c.name), o.name);
      CHECK(std::find(got.begin(), got.end(), o.name) != got.end());
    }
  }
}

TEST_CASE("the man pages render without warnings") {
  for (const char* page : {"hwfarmctl.1", "hwfarmd.8", "hwfarm.toml.5"}) {
    INFO(page);
    std::string path = std::string(HWFARM_MAN_DIR) + "/" + page;
    auto r = runCommand({"/bin/sh", "-c", "groff -ww -z -Tutf8 -man '" + path + "'"}, {}, 30s);
    CHECK(r.status.code == 0);
    CHECK(r.err.empty());
  }
  // The hwfarmctl page has every command and option, the config page every section.
  auto rendered = [](const char* page) {
    // -P-cbou: plain text, no escape sequences or overstriking.
    return runCommand({"/bin/sh", "-c", "groff -Tutf8 -P-cbou -man '" + std::string(HWFARM_MAN_DIR) + "/" + page + "'"},
                      {}, 30s)
        .out;
  };
  std::string ctl_page = rendered("hwfarmctl.1");
  for (const auto& c : commands()) {
    if (c.hidden) continue;
    CHECK(ctl_page.find(usageLine(c)) != std::string::npos);
    for (const auto& o : c.options) CHECK(ctl_page.find(o.name) != std::string::npos);
  }
  CHECK(ctl_page.rfind("HWFARMCTL(1)", 0) == 0);
  CHECK(ctl_page.find("NAME\n       hwfarmctl - the hwfarm client") != std::string::npos);
  std::string config_page = rendered("hwfarm.toml.5");
  for (const char* table : {"[agent]", "[limits]", "[leases]", "[[worker.board]]", "[sla]", "[upload]"})
    CHECK(config_page.find(table) != std::string::npos);
}

TEST_CASE("a waiting client redraws its place on a terminal and logs a changed place at most every 30 s") {
  // Given a terminal: each change redraws the line in place.
  WaitProgress terminal("1 \u00d7 mps2-an385", true);
  CHECK(terminal.update(3, 1) == "\r\x1b[Kwaiting for 1 \u00d7 mps2-an385 (queue position 3, 2 ahead of you)\u2026");
  CHECK(terminal.update(3, 2) == "");
  CHECK(terminal.update(1, 3) == "\r\x1b[Kwaiting for 1 \u00d7 mps2-an385 (queue position 1, next in line)\u2026");
  CHECK(terminal.clear() == "\r\x1b[K");
  CHECK(terminal.clear() == "");
  // Given a log: the first place at once, a change only 30 s after the last line.
  WaitProgress log("2 \u00d7 board labelled sim", false);
  CHECK(log.update(3, 1) == "hwfarmctl: waiting for 2 \u00d7 board labelled sim (queue position 3, 2 ahead of you)\u2026\n");
  CHECK(log.update(2, 20) == "");
  CHECK(log.update(2, 30.5) == "");
  CHECK(log.update(2, 31) == "hwfarmctl: waiting for 2 \u00d7 board labelled sim (queue position 2, 1 ahead of you)\u2026\n");
  CHECK(log.update(2, 100) == "");
  CHECK(log.clear() == "");
}

TEST_CASE("hwfarmd's options come from one table: its usage, its parser and docs/hwfarmd.md") {
  std::string path = std::string(HWFARM_SOURCE_DIR) + "/docs/hwfarmd.md";
  auto generated = runCommand({HWFARMD_PATH, "--generate-docs", path}, {}, 30s);
  REQUIRE(generated.status.code == 0);
  INFO("docs/hwfarmd.md is out of date: cmake --build build --target update-docs rewrites it from the table");
  CHECK(generated.out == readFile(path));
  auto help = runCommand({HWFARMD_PATH, "--help"}, {}, 30s);
  CHECK(help.status.code == 0);
  for (const char* option : {"-c, --config FILE", "-t, --check-config [FILE]", "--version", "-h, --help"}) {
    CHECK(help.out.find(option) != std::string::npos);
    CHECK(generated.out.find(option) != std::string::npos);
  }
  auto typo = runCommand({HWFARMD_PATH, "--confg", "x.toml"}, {}, 30s);
  CHECK(typo.status.code == 2);
  CHECK(typo.err.rfind("hwfarmd: unknown argument \"--confg\" (did you mean --config?)\nusage: hwfarmd", 0) == 0);
  // --opt=VALUE is the same as --opt VALUE.
  TempDir dir;
  std::string bad = dir.write("bad.toml", "[agent]\n");
  auto check = runCommand({HWFARMD_PATH, "--check-config", "--config=" + bad}, {}, 30s);
  CHECK(check.status.code == 1);
  CHECK(check.err.find(bad + ":") == 0);
}

TEST_CASE("cmake --install puts the completion and the man pages where bash and man look") {
  TempDir stage;
  auto r = runCommand({"/bin/sh", "-c",
                       "DESTDIR='" + stage.path() + "' '" + CMAKE_COMMAND_PATH + "' --install '" + HWFARM_BINARY_DIR +
                           "' --prefix /usr"},
                      {}, 120s);
  INFO(r.out << r.err);
  REQUIRE(r.status.code == 0);
  CHECK(readFile(stage.file("usr/share/bash-completion/completions/hwfarmctl")) == bashCompletion());
  for (const char* page : {"man1/hwfarmctl.1", "man5/hwfarm.toml.5", "man8/hwfarmd.8"})
    CHECK(readFile(stage.file(std::string("usr/share/man/") + page)) ==
          readFile(std::string(HWFARM_MAN_DIR) + "/" + std::string(page).substr(5)));
}

namespace {

// Every key of `table` and its sub-tables (and tables in arrays), by name.
void keysOf(const toml::table& table, std::set<std::string>* keys) {
  for (const auto& [key, node] : table) {
    if (const toml::table* sub = node.as_table()) {
      keysOf(*sub, keys);
    } else if (const toml::array* array = node.as_array(); array && !array->empty() && array->get(0)->is_table()) {
      for (const auto& item : *array) keysOf(*item.as_table(), keys);
    } else {
      keys->insert(std::string(key.str()));
    }
  }
}

} // namespace

TEST_CASE("hwfarm.toml(5) comes from the key tables of docs/configuration.md, which name every key of the reference config") {
  // Given every key the commented reference config sets (it sets each key hwfarmd accepts).
  std::set<std::string> keys;
  keysOf(toml::parse_file(std::string(HWFARM_SOURCE_DIR) + "/config/examples/reference.toml"), &keys);
  REQUIRE(keys.size() > 50);
  // Then each is a cell of a key table in docs/configuration.md, and a tagged paragraph of the man page.
  std::string doc = readFile(std::string(HWFARM_SOURCE_DIR) + "/docs/configuration.md");
  std::string page = runCommand({"/bin/sh", "-c", "groff -Tutf8 -P-cbou -man '" + std::string(HWFARM_MAN_DIR) +
                                                      "/hwfarm.toml.5'"},
                                {}, 30s)
                         .out;
  for (const auto& key : keys) {
    INFO(key);
    CHECK(std::regex_search(doc, std::regex("\\| `" + key + "` \\|")));
    CHECK(std::regex_search(page, std::regex("(\\n {7}|: )" + key + "\\b"))); // a row's tag, or a cell of it
  }
}
