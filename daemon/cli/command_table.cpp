// The table of hwfarmctl's commands (command_table.h). A help text is what
// a user reads in `hwfarmctl COMMAND --help`, in docs/cli.md and in the man
// page: plain sentences, no markup but `backquotes`.
#include "daemon/cli/command_table.h"

#include "daemon/cli/session.h"

namespace hwfarm::cli {
namespace {

constexpr Completion kFile = Completion::file;
constexpr Completion kDir = Completion::directory;

const OptionSpec kTtl{.name = "--ttl", .value = "S", .help = "the lease's time to live in seconds; each renewal restarts it",
                      .default_text = "the daemon's leases.default_ttl_s"};

// lease acquire and lease run.
std::vector<OptionSpec> selectorOptions() {
  return {
      {.name = "--type", .value = "T", .help = "board type (the request's selector.type)"},
      {.name = "--label", .value = "L", .help = "a label every board must carry (selector.labels)", .repeatable = true},
      {.name = "--count", .value = "N", .help = "how many boards, all or nothing (a whole number)", .default_text = "1"},
      {.name = "--worker", .value = "W", .help = "only boards of this worker (a worker or Jenkins node name)",
       .default_text = "$HWFARM_WORKER, else any"},
      kTtl,
      {.name = "--wait", .value = "S", .help = "how long to wait for boards, in seconds", .default_text = "1800"},
      {.name = "--priority", .value = "P", .help = "-100 to 100; higher is served first (a whole number)",
       .default_text = "0"},
      {.name = "--context", .value = "C", .help = "where the request comes from; the agent's tier decides which it takes",
       .default_text = "$HWFARM_CONTEXT, else pr when $CHANGE_ID is set, else manual",
       .choices = "pr pr-tagged nightly manual"},
      {.name = "--key", .value = "K", .help = "idempotency key: a retry with the same key gets the same lease",
       .default_text = "a fresh random key per invocation"},
  };
}

// lease run: the selector's, and publishing CMD's results.
std::vector<OptionSpec> leaseRunOptions() {
  std::vector<OptionSpec> o = selectorOptions();
  o.push_back({.name = "--results", .value = "GLOB",
               .help = "once CMD ends, whatever its exit code, publish the JUnit XML or twister.json files GLOB "
                       "matches as a run on the lease (as `results publish` does), before the release; each GLOB "
                       "must match a file, and a file two match goes once",
               .repeatable = true});
  o.push_back({.name = "--artifacts", .value = "PATH",
               .help = "with --results: a file or folder published with the results", .repeatable = true,
               .complete = kFile});
  o.push_back({.name = "--name", .value = "NAME", .help = "with --results: the published run's name",
               .default_text = "CMD's name"});
  o.push_back({.name = "--commit", .value = "SHA", .help = "with --results: the commit the results are filed under",
               .default_text = "$GIT_COMMIT"});
  return o;
}

const OptionSpec kLeaseOption{.name = "--lease", .value = "ID", .help = "the lease (an id or a unique prefix of one)",
                              .default_text = "$HWFARM_LEASE_ID"};

const PositionalSpec kLeaseId{.name = "ID"};
const PositionalSpec kRunId{.name = "ID"};

const char* const kRunStates = "running passed failed error cancelled interrupted";

std::vector<CommandSpec> makeCommands() {
  return {
      {.name = "status",
       .group = "the agent",
       .summary = "the agent, its tiers and the loaded configuration",
       .help = "After a failed reload it says so and lists the errors; after a reload that changed "
               "agent.listen or agent.state_dir, that a restart is needed.",
       .run = statusCommand},
      {.name = "boards",
       .group = "the agent",
       .summary = "the boards with their state and lease",
       .help = "LEASE shows the first 12 characters of the lease id, which lease commands take back as a prefix. "
               "CONSOLE is a usb board's serial.port and `qemu` for a simulated board.",
       .options = {{.name = "--unclaimed",
                    .help = "instead: attached USB devices of a configured vendor and product that no board "
                            "claims, each as a [[worker.board]] snippet to paste into the fleet file"}},
       .run = boardsCommand},
      {.name = "queue",
       .group = "the agent",
       .summary = "lease requests waiting for boards, in the order they will be served",
       .help = "HOLDER is the principal and the job; WAITING is whole seconds.",
       .run = queueCommand},
      {.name = "sla",
       .group = "the agent",
       .summary = "the tier SLA standing: open incidents, the failure ratio, the time left to a demotion",
       .help = "",
       .run = slaCommand},
      {.name = "tier",
       .group = "the agent",
       .summary = "the registered, effective and pinned tier, and the last transitions with their reasons",
       .help = "",
       .run = tierShowCommand},
      {.name = "uploads",
       .group = "the agent",
       .summary = "runs whose upload to the S3 bucket is pending or failed",
       .help = "",
       .run = uploadsCommand},
      {.name = "lease acquire",
       .group = "leases",
       .summary = "lease boards: wait for them and print the lease",
       .help = "Name the boards with --type and/or --label. While the request waits, a line on stderr shows its "
               "place in the queue (on a terminal it is updated in place; otherwise a new line when the place "
               "changes, at most every 30 s). Ctrl-C or SIGTERM ends the wait: the request leaves the queue, and "
               "a lease granted meanwhile is released.",
       .options = selectorOptions(),
       .run = leaseAcquireCommand},
      {.name = "lease run",
       .group = "leases",
       .summary = "lease boards, run CMD with them in its environment, renew meanwhile, release at its end",
       .help = "The options are those of `lease acquire`, and it waits the same way. CMD gets HWFARM_LEASE_ID, "
               "HWFARM_BOARD_COUNT and HWFARM_BOARD_<i>_NAME, _TYPE, _SERIAL_PORT and _USB_SERIAL. It exits "
               "with CMD's exit code, 8 when the lease ended under CMD. This is the command for Jenkins `sh` steps. "
               "With --results, the files CMD wrote are published as a run before the release. When CMD exited 0 "
               "but nothing could be published (a GLOB that matches no file: then nothing is published; a cut "
               "file; more than 1 GiB), it exits with the publish's code; when the published run is not passed "
               "(a failure CMD's exit code missed, a file with no test case), with its verdict as `run` does: 10 "
               "failed, 9 error. A non-zero code of CMD's always wins.",
       .options = leaseRunOptions(),
       .run = leaseRunCommand,
       .rest = "CMD [ARGS...]"},
      {.name = "lease renew",
       .group = "leases",
       .summary = "extend a lease",
       .help = "The lease expires TTL seconds from now.",
       .positionals = {kLeaseId},
       .options = {{.name = "--ttl", .value = "S", .help = "a new time to live in seconds",
                    .default_text = "the lease's TTL"}},
       .run = leaseRenewCommand},
      {.name = "lease release",
       .group = "leases",
       .summary = "give a lease back (an operator revokes another principal's)",
       .help = "Releasing a lease that has already ended succeeds.",
       .positionals = {kLeaseId},
       .run = leaseReleaseCommand},
      {.name = "lease show",
       .group = "leases",
       .summary = "one lease",
       .help = "",
       .positionals = {kLeaseId},
       .run = leaseShowCommand},
      {.name = "lease list",
       .group = "leases",
       .summary = "the active leases, oldest grant first",
       .help = "",
       .options = {{.name = "--all", .help = "also the ended leases the daemon still keeps (about an hour)"}},
       .run = leaseListCommand},
      {.name = "lease export",
       .group = "leases",
       .summary = "the lease's boards as a Zephyr twister hardware map (YAML)",
       .help = "",
       .options = {{.name = "--format", .value = "F", .help = "the format", .choices = "twister-hwmap",
                    .required = true},
                   kLeaseOption,
                   {.name = "--out", .value = "FILE", .help = "where to write it", .default_text = "stdout",
                    .complete = kFile}},
       .run = leaseExportCommand},
      {.name = "flash",
       .group = "the boards of a lease",
       .summary = "upload the local file IMAGE and write it onto a board of the lease",
       .help = "A simulated board stages it for its next power-on. Exit 9 when the flasher fails.",
       .positionals = {{.name = "LEASE"}, {.name = "BOARD"}, {.name = "IMAGE", .complete = kFile}},
       .run = flashCommand},
      {.name = "power",
       .group = "the boards of a lease",
       .summary = "switch a board of the lease on, off, or off and on",
       .help = "Exit 9 when the power switch or simulator fails.",
       .positionals = {{.name = "LEASE"}, {.name = "BOARD"}, {.name = "ACTION", .choices = "on off cycle"}},
       .run = powerCommand},
      {.name = "console",
       .group = "the boards of a lease",
       .summary = "print a board's console since the lease began, then follow it",
       .help = "It ends when the console closes, the lease ends or the daemon stops; SIGINT and SIGTERM stop it "
               "(exit 130, 143) after writing out everything received. On a terminal, control bytes (escape "
               "sequences, BEL, ...) are shown as \\xNN; into a file or a pipe the bytes are written as they are.",
       .positionals = {{.name = "LEASE"}, {.name = "BOARD"}},
       .options = {{.name = "--raw",
                    .help = "write the console's bytes as they are also to a terminal (the firmware's escape "
                            "sequences then act on it: colours, but also the window title or a cleared screen)"}},
       .run = consoleCommand},
      {.name = "run",
       .group = "runs",
       .summary = "run test images on the lease's boards and the reference; print each verdict",
       .help = "Uploads every IMAGE into the lease, starts a run and follows it: one line per judged attempt, then "
               "the run's state. Exit 0 passed, 10 a test failed, 9 an infrastructure failure or interrupted, 11 "
               "cancelled. Ctrl-C or SIGTERM cancels the run.",
       .positionals = {{.name = "IMAGE", .many = true, .optional = true, .complete = kFile}},
       .options =
           {
               kLeaseOption,
               {.name = "--mode", .value = "M", .help = "shard: each image on the next free board; each: every "
                                                        "image on every board",
                .default_text = "shard", .choices = "shard each"},
               {.name = "--reference", .value = "R",
                .help = "what the targets are compared with: the simulator, nothing (PASS/FAIL only), or the "
                        "outputs of a previous run under DIR",
                .default_text = "the suite's, else qemu", .choices = "qemu none golden:DIR"},
               {.name = "--targets", .value = "T,...",
                .help = "the targets, in order: boards of the lease, board types (the next board of that type) "
                        "or qemu",
                .default_text = "every board of the lease", .repeatable = true},
               {.name = "--board", .value = "NAME", .help = "adds one board to the targets (the same as --targets NAME)",
                .repeatable = true},
               {.name = "--deadline", .value = "S", .help = "per image and target, from power-on",
                .default_text = "the daemon's runs.default_deadline_s"},
               {.name = "--thresholds", .value = "FILE", .help = "[[threshold]] rules (a TOML file)",
                .complete = kFile},
               {.name = "--reference-image", .value = "FILE",
                .help = "what the reference runs instead of the image: the i-th for the i-th image",
                .repeatable = true, .complete = kFile},
               {.name = "--suite", .value = "FILE",
                .help = "a suite manifest naming the images and the run's options; the command line overrides it",
                .complete = kFile},
               {.name = "--no-retry", .help = "do not retry an infrastructure failure on another board"},
               {.name = "--out", .value = "DIR", .help = "fetch every artifact of the run into DIR",
                .complete = kDir},
               {.name = "--no-wait", .help = "print the run id and return 0 at once (--json: the record)"},
               {.name = "--commit", .value = "SHA", .help = "what the images were built from (the uploads' key)",
                .default_text = "$GIT_COMMIT"},
           },
       .run = runCommand,
       .synopsis = "[OPTIONS] IMAGE... | [OPTIONS] --suite FILE"},
      {.name = "runs",
       .group = "runs",
       .summary = "the runs the daemon keeps, newest first",
       .help = "",
       .options = {{.name = "--state", .value = "S", .help = "only runs in this state", .choices = kRunStates},
                   {.name = "--lease", .value = "ID", .help = "only the runs of this lease (an id or a unique prefix)"}},
       .run = runsCommand},
      {.name = "run show",
       .group = "runs",
       .summary = "one run: its state and its attempts",
       .help = "",
       .positionals = {kRunId},
       .run = runShowCommand},
      {.name = "run wait",
       .group = "runs",
       .summary = "follow a run (started with --no-wait) to its end and exit with its verdict",
       .help = "It prints what `run` prints and exits as it does: 0 passed, 10 failed, 9 error or interrupted, 11 "
               "cancelled. Ctrl-C stops waiting; the run goes on.",
       .positionals = {kRunId},
       .options = {{.name = "--out", .value = "DIR", .help = "then fetch every artifact into DIR", .complete = kDir}},
       .run = runWaitCommand},
      {.name = "run cancel",
       .group = "runs",
       .summary = "cancel a running run: its boards are powered off, its simulators stopped",
       .help = "Exit 0 once cancelled; 1 when the run has ended already.",
       .positionals = {kRunId},
       .run = runCancelCommand},
      {.name = "run fetch",
       .group = "runs",
       .summary = "fetch every artifact of an ended run",
       .help = "Exits with the run's verdict, as `run` does; 1 while the run is still running.",
       .positionals = {kRunId},
       .options = {{.name = "--out", .value = "DIR", .help = "the directory to write them into", .required = true,
                    .complete = kDir}},
       .run = runFetchCommand},
      {.name = "results publish",
       .group = "runs",
       .summary = "publish a test harness's results (JUnit XML, twister.json) as a run on the lease",
       .help = "Sends every FILE and the artifacts to the lease; hwfarmd reads them, classifies each failure "
               "(a failure is the firmware's; an error is the lab's only by a [[results.infrastructure]] rule) and "
               "keeps, uploads and counts the run like its own. A file that is not well formed (a harness that "
               "crashed mid-file) is refused with its line and column, and nothing is kept. Prints the counts, the "
               "failing cases with their classes and the run's state; exits 0 once published, whatever the "
               "verdict. A file named twice (the same file by any path) goes once. The files are sent in one "
               "request built in memory: more than 1 GiB together (hwfarmd's default runs.max_artifact_bytes) is "
               "refused before anything is read or sent, with exit code 2.",
       .positionals = {{.name = "FILE", .many = true, .complete = kFile}},
       .options = {kLeaseOption,
                   {.name = "--artifacts", .value = "PATH",
                    .help = "a file, or a folder whose regular files all go, kept with the run under artifacts/",
                    .repeatable = true, .complete = kFile},
                   {.name = "--name", .value = "NAME", .help = "the run's name", .default_text = "results"},
                   {.name = "--commit", .value = "SHA", .help = "the commit the run is filed under in the bucket",
                    .default_text = "$GIT_COMMIT"},
                   {.name = "--board", .value = "BOARD",
                    .help = "the board of the lease the harness ran on (its infrastructure failures count against it)",
                    .default_text = "the lease's board, when it has one"}},
       .run = resultsPublishCommand},
      {.name = "upload retry",
       .group = "runs",
       .summary = "queue a run's upload to the S3 bucket again, at once",
       .help = "",
       .positionals = {{.name = "RUN"}},
       .run = uploadRetryCommand},
      {.name = "should-run",
       .group = "CI",
       .summary = "whether this agent's tier and tags take the build: exit 0 yes, 1 no, with the reason",
       .help = "A tagged pull request is to be leased as pr-tagged: the answer says which context to lease with.",
       .options = {{.name = "--context", .value = "C", .help = "the build's context",
                    .default_text = "as for lease acquire", .choices = "pr pr-tagged nightly manual"},
                   {.name = "--title", .value = "TEXT", .help = "the pull request's title",
                    .default_text = "$CHANGE_TITLE"},
                   {.name = "--labels", .value = "A,B", .help = "the pull request's labels", .repeatable = true},
                   {.name = "--comment", .value = "TEXT", .help = "the comment that triggered the build"}},
       .run = shouldRunCommand},
      {.name = "jenkins labels",
       .group = "CI",
       .summary = "for each worker: its Jenkins node and the labels its agent should carry",
       .help = "",
       .run = jenkinsLabelsCommand},
      {.name = "board show",
       .group = "operators",
       .summary = "a board's state, its health and its last checks",
       .help = "",
       .positionals = {{.name = "NAME"}},
       .run = boardShowCommand},
      {.name = "board check",
       .group = "operators",
       .summary = "ask for a board's health check (operator)",
       .help = "With --wait: exit 0 passed, 9 failed, 4 no result in time.",
       .positionals = {{.name = "NAME"}},
       .options = {{.name = "--wait", .value = "S", .help = "wait up to S seconds for its result"}},
       .run = boardCheckCommand},
      {.name = "board maintenance",
       .group = "operators",
       .summary = "take an unleased board out of service (operator)",
       .help = "",
       .positionals = {{.name = "NAME"}},
       .options = {{.name = "--reason", .value = "TEXT", .help = "why, shown with the board"}},
       .run = boardMaintenanceCommand},
      {.name = "board resume",
       .group = "operators",
       .summary = "return a board from maintenance or quarantine (operator)",
       .help = "",
       .positionals = {{.name = "NAME"}},
       .run = boardResumeCommand},
      {.name = "tier pin",
       .group = "operators",
       .summary = "pin the agent's effective tier (operator)",
       .help = "",
       .positionals = {{.name = "TIER", .choices = "1 2 3"}},
       .options = {{.name = "--reason", .value = "TEXT", .help = "why; recorded with the pin", .required = true}},
       .run = tierPinCommand},
      {.name = "tier unpin",
       .group = "operators",
       .summary = "lift an operator's pin (operator)",
       .help = "",
       .options = {{.name = "--reason", .value = "TEXT", .help = "why; recorded with the transition"}},
       .run = tierUnpinCommand},
      {.name = "token new",
       .group = "operators",
       .summary = "make a token and its tokens-file entry (no daemon is contacted)",
       .help = "NAME: letters, digits, `.`, `_`, `@` and `-`, at most 64.",
       .positionals = {{.name = "NAME"}},
       .options = {{.name = "--role", .value = "ROLE", .help = "what the token may do",
                    .choices = "viewer pipeline operator", .required = true}},
       .run = tokenNewCommand},
      {.name = "help",
       .group = "",
       .summary = "this usage, or a command's (the same as COMMAND --help)",
       .help = "",
       .positionals = {{.name = "COMMAND", .many = true, .optional = true}},
       .run = helpCommand,
       .hidden = true},
      {.name = "generate-docs",
       .group = "",
       .summary = "FILE with its generated blocks made from this table",
       .help = "",
       .positionals = {{.name = "FILE"}},
       .run = generateDocsCommand,
       .hidden = true},
      {.name = "generate-completion",
       .group = "",
       .summary = "the bash completion script",
       .help = "",
       .run = generateCompletionCommand,
       .hidden = true},
  };
}

} // namespace

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> table = makeCommands();
  return table;
}

const std::vector<OptionSpec>& globalOptions() {
  static const std::vector<OptionSpec> table{
      {.name = "--url", .value = "URL",
       .help = "the daemon: http://HOST:PORT (IPv6: http://[::1]:7420), https://HOST[:PORT] (443 by default) or "
               "unix:/PATH",
       .default_text = "$HWFARM_URL, else http://127.0.0.1:7420"},
      {.name = "--cacert", .value = "FILE",
       .help = "https://: verify the daemon's certificate against the CA certificates in FILE (PEM) instead of the "
               "system's CA store; a certificate that fails is refused (there is no way to skip the check)",
       .default_text = "$HWFARM_CACERT"},
      {.name = "--token", .value = "TOKEN", .help = "sent as Authorization: Bearer TOKEN; none when empty",
       .default_text = "$HWFARM_TOKEN"},
      {.name = "--json", .help = "print the daemon's JSON answer (one line) instead of text"},
      {.name = "--quiet", .alias = "-q",
       .help = "commands that print a lease (lease acquire, renew, release, show) print only its id"},
      {.name = "--help", .alias = "-h", .help = "print the usage, or a command's with its options, and exit 0"},
  };
  return table;
}

const std::vector<ExitCodeSpec>& exitCodes() {
  static const std::vector<ExitCodeSpec> table{
      {"0", "success", "success; `should-run`: yes"},
      {"1", "other daemon error; should-run: no",
       "`should-run`: no (the reason on stdout); any other daemon error: 400, 404, 405, 409 other than "
       "`tier_refused` (for example `not_active`, `conflict`, `board_lost`, `run_ended`), 429, 503, or an answer "
       "that is not JSON; an id prefix that no id, or more than one, begins with"},
      {"2", "bad usage",
       "bad usage: unknown command or option, missing value or argument, a number option that is not a number, "
       "malformed `--url`, `lease run` without `-- CMD`"},
      {"3", "daemon unreachable or not trusted",
       "the daemon is unreachable, after the retries; or, over `https://`, its certificate is not trusted (no retry)"},
      {"4", "no board within --wait",
       "HTTP 408: no board within `--wait` (`wait_timeout`), or the request was not sent in time"},
      {"5", "refused by the agent's tier",
       "HTTP 409 `tier_refused`: the agent's effective tier does not serve the context; a Jenkins stage can skip "
       "on it instead of failing"},
      {"6", "no configured board matches",
       "HTTP 422: no configured board can ever match (the answer names the configured types, the closest first)"},
      {"7", "authentication or role", "HTTP 401 or 403: missing or invalid token, role too low, or another "
                                      "principal's lease"},
      {"8", "lease lost during lease run", "`lease run`: the lease ended while CMD ran"},
      {"9", "flash/power failed, or a run's infrastructure failed",
       "`flash`, `power`: HTTP 502, the flasher, power switch or simulator failed; `run`, `run wait`, `run "
       "fetch`: the run ended `error` (an infrastructure failure) or `interrupted`"},
      {"10", "a run's test failed", "`run`, `run wait`, `run fetch`: the run `failed`: a test failed"},
      {"11", "a run was cancelled", "`run`, `run wait`, `run fetch`: the run was `cancelled`"},
      {"CMD's code", "lease run: CMD's exit code",
       "`lease run`: CMD's exit code, 128+N if CMD was killed by signal N, 127 if CMD could not be started"},
      {"128+N", "stopped by signal N",
       "`console`, `lease acquire`, `lease run` while waiting for boards: stopped by signal N (130 SIGINT, 143 "
       "SIGTERM)"},
  };
  return table;
}

const std::vector<EnvironmentSpec>& environment() {
  static const std::vector<EnvironmentSpec> table{
      {"HWFARM_URL", "default of `--url`"},
      {"HWFARM_TOKEN", "default of `--token`"},
      {"HWFARM_CACERT", "default of `--cacert`"},
      {"HWFARM_CONTEXT", "default of `--context`"},
      {"CHANGE_ID", "when set (Jenkins sets it for pull requests), `--context` defaults to `pr` if HWFARM_CONTEXT is "
                    "unset"},
      {"CHANGE_TITLE", "default of `should-run --title`"},
      {"HWFARM_WORKER", "default of `--worker`"},
      {"HWFARM_LEASE_ID", "default of `--lease` (`lease run` sets it for CMD)"},
      {"GIT_COMMIT", "default of `run --commit`"},
      {"JOB_NAME BUILD_NUMBER STAGE_NAME BUILD_URL", "the lease's holder.job, build, stage and url"},
  };
  return table;
}

const CommandSpec* findCommand(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

} // namespace hwfarm::cli
