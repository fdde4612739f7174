import groovy.json.JsonSlurperClassic
import org.hwfarm.Hwfarm

// hwfarmPublish(junit: 'out/*.xml', artifacts: 'out/**', name: 'pytest', commit: env.GIT_COMMIT)
//
// Publishes the results another test harness wrote (JUnit XML as pytest
// --junitxml writes it, Zephyr twister's twister.json) as an hwfarm run of
// the current lease (inside hwfarmLease) with `hwfarmctl results publish`,
// then judges its verdict as hwfarmRun does:
//   - passed: the build's result is unchanged;
//   - test failures set the stage and build UNSTABLE, not FAILURE:
//     hardware CI is advisory;
//   - an infrastructure failure sets the stage UNSTABLE (or infraResult:
//     'FAILURE') with a result text that says it was not a test result;
//   - a publish hwfarmctl refuses (a malformed or cut file: nothing is
//     stored) fails the step with its reason.
// junit: (or results:) a shell glob, or a list of them, of the result files
// (JUnit XML or twister.json), resolved in the current directory; one that
// matches no file fails the step: a harness that wrote nothing is not a pass.
// artifacts: Ant style, one or a list: 'DIR/**' publishes the directory DIR
// (every file beneath it), anything else the path or shell glob as given;
// one that matches nothing is skipped with a warning.
// Also name:, commit:, board:, lease: (default $HWFARM_LEASE_ID).
// Returns [id: 'run-...', state: 'passed'|'failed'|'error',
//          failure: 'none'|'test'|'infrastructure'].
def call(Map args = [:]) {
  List files = Hwfarm.asList(args.junit ?: args.results).collect { "${it}" }.findAll { it }
  if (!files) error('hwfarmPublish: give junit: (a glob of the result files)')
  List artifacts = Hwfarm.asList(args.artifacts).collect { "${it}".replaceFirst(/(^|\/)\*\*$/, '') ?: '.' }
  List opts = []
  ['lease', 'name', 'commit', 'board'].each { k -> if (args[k]) opts << "--${k}" << args[k] }
  String work = "${pwd(tmp: true)}/hwfarm-publish-${UUID.randomUUID().toString().take(8)}"
  try {
    return publish(args, files, artifacts, opts, work)
  } finally {
    dir(work) { deleteDir() }
  }
}

private Map publish(Map args, List files, List artifacts, List opts, String work) {
  String answer = "${work}/run.json", errFile = "${work}/hwfarmctl.err"
  int noMatch = 64 // the script's exit code when a glob of result files matches nothing (not one of hwfarmctl's)
  Closure q = { Hwfarm.quote(it) }
  // Each glob expands in the shell from a variable, with IFS empty: file
  // names, never shell text (no command substitution, no word splitting).
  String script = "mkdir -p ${q(work)}; IFS=; set --; "
  if (artifacts) {
    script += "for p in ${artifacts.collect(q).join(' ')}; do for f in \$p; do " +
              "if [ -e \"\$f\" ]; then set -- \"\$@\" --artifacts \"\$f\"; " +
              "else printf 'hwfarm: no artifacts match %s; skipped\\n' \"\$p\"; fi; done; done; "
  }
  script += "for p in ${files.collect(q).join(' ')}; do for f in \$p; do " +
            "if [ ! -e \"\$f\" ]; then printf '%s' \"\$p\" > ${q(errFile)}; exit ${noMatch}; fi; " +
            "set -- \"\$@\" \"\$f\"; done; done; " +
            "exec ${Hwfarm.ctl(this)} --json results publish ${opts.collect(q).join(' ')} \"\$@\" " +
            "> ${q(answer)} 2> ${q(errFile)}"
  int code = sh(script: script, returnStatus: true, label: 'hwfarm results publish')
  String err = fileExists(errFile) ? readFile(errFile).trim() : ''
  if (code == noMatch)
    error("hwfarm: no file matches '${err}': the test harness wrote no results, which is not a pass")
  Map run = code == Hwfarm.OK && fileExists(answer) ? parse(readFile(answer)) : null
  if (run == null) error("hwfarm: hwfarmctl results publish failed (exit ${code}): ${err}")
  if (err) echo(err)
  // (the record names failure_class only when the run failed)
  String failure = run.failure_class ?: 'none'
  String summary = "run ${run.id}: ${run.state}"
  echo("hwfarm: published ${summary}")
  if (run.state != 'passed') {
    if (failure == 'infrastructure') {
      String text = "hwfarm: INFRASTRUCTURE failure, not a test result: ${summary}"
      if (args.infraResult == 'FAILURE') error(text)
      unstable(text)
    } else {
      unstable("hwfarm: test failures: ${summary}")
    }
  }
  return [id: run.id, state: run.state, failure: failure]
}

@NonCPS
private static Map parse(String text) {
  return text?.trim() ? new JsonSlurperClassic().parseText(text) as Map : null
}
