import org.hwfarm.Hwfarm

// hwfarmRun(image: 'build/zephyr/zephyr.elf', referenceImage: 'build-qemu/zephyr/zephyr.elf',
//           suite: 'tests/hw.toml', reference: 'qemu', status: 'hw/cortexm-zephyr')
//
// Runs test images on the current lease (inside hwfarmLease) with
// `hwfarmctl run --out DIR`, its lines streamed to the build log as they
// come (and kept in DIR.log), then:
//   - records DIR/junit.xml with the junit step and archives DIR/** (the
//     run's summary.json, junit.xml, golden_results, traces, outputs, logs);
//   - test failures (exit 10) set the stage and build UNSTABLE, not
//     FAILURE: hardware CI is advisory;
//   - infrastructure failures (exit 9: a board, flasher or simulator broke)
//     set the stage UNSTABLE (or infraResult: 'FAILURE') with a result text
//     that says it was the infrastructure, not the tests;
//   - with status: NAME (default $HWFARM_STATUS_NAME; false: none), posts the
//     advisory commit status NAME: pending before, then success or failure
//     (error for the infrastructure), linking statusUrl: (default the
//     build's test report).
// image: one path or a list; suite: a manifest instead of images;
// reference: 'qemu', 'none' or 'golden:DIR'; referenceImage: one or a list;
// also mode:, deadline:, targets:, thresholds:, lease: (default
// $HWFARM_LEASE_ID), out: (default 'hwfarm-results').
// Returns [verdict: 'passed'|'test_failed'|'infrastructure'|'cancelled'|'error',
//          exitCode:, summary: the run's last line, out:].
def call(Map args = [:]) {
  if (!args.image && !args.suite) error('hwfarmRun: give image: or suite:')
  String out = args.out ?: 'hwfarm-results'
  String statusName = args.status == false ? null : (args.status ?: env.HWFARM_STATUS_NAME)
  String url = args.statusUrl ?: (env.BUILD_URL ? "${env.BUILD_URL}testReport/" : null)
  List opts = ['--out', out]
  if (args.lease) opts << '--lease' << args.lease
  if (args.suite) opts << '--suite' << args.suite
  if (args.reference) opts << '--reference' << args.reference
  Hwfarm.asList(args.referenceImage).each { opts << '--reference-image' << it }
  ['mode', 'deadline', 'thresholds'].each { k -> if (args[k] != null) opts << "--${k}" << args[k] }
  if (args.targets) opts << '--targets' << Hwfarm.asList(args.targets).join(',')
  opts.addAll(Hwfarm.asList(args.image))
  if (statusName) Hwfarm.status(this, statusName, 'pending', 'hardware tests running', url)
  String log = "${out}.log", rcFile = "${out}.rc"
  // The run's lines reach the build log as they come (tee), and its file.
  // Jenkins runs sh -e without pipefail: the exit code crosses the pipe in
  // a file (kept with ||, not $? after the fact), 1 if it never got there.
  int code = sh(script: "rm -rf ${Hwfarm.quote(out)} ${Hwfarm.quote(rcFile)}; " +
                        "{ rc=0; ${Hwfarm.ctl(this)} run ${opts.collect { Hwfarm.quote(it) }.join(' ')} 2>&1 || rc=\$?; " +
                        "echo \$rc > ${Hwfarm.quote(rcFile)}; } | tee ${Hwfarm.quote(log)}; " +
                        "rc=1; [ -s ${Hwfarm.quote(rcFile)} ] && read rc < ${Hwfarm.quote(rcFile)}; " +
                        "rm -f ${Hwfarm.quote(rcFile)}; exit \$rc",
                returnStatus: true, label: 'hwfarm run')
  String summary = fileExists(log) ? (readFile(log).readLines().reverse().find { it.startsWith('run ') } ?: '') : ''
  if (fileExists("${out}/junit.xml")) junit(testResults: "${out}/junit.xml", allowEmptyResults: true)
  archiveArtifacts(artifacts: "${out}/**, ${log}", allowEmptyArchive: true)
  // What each exit code means: verdict, commit status and its text, the
  // stage's result (null: unchanged) and the result text.
  Map outcomes = [
    (Hwfarm.OK): ['passed', 'success', 'hardware tests passed', null, null],
    (Hwfarm.TEST_FAILED): ['test_failed', 'failure', 'hardware tests failed (advisory)', 'UNSTABLE',
                           "hwfarm: test failures: ${summary}"],
    (Hwfarm.INFRASTRUCTURE): ['infrastructure', 'error', 'hardware infrastructure failure, not a test result',
                              args.infraResult == 'FAILURE' ? 'FAILURE' : 'UNSTABLE',
                              "hwfarm: INFRASTRUCTURE failure, not a test result (a board, flasher or simulator broke): ${summary}"],
    (Hwfarm.CANCELLED): ['cancelled', 'error', 'hardware run cancelled', 'UNSTABLE', "hwfarm: run cancelled: ${summary}"],
  ]
  List o = outcomes[code] ?: ['error', 'error', "hwfarmctl run failed (exit ${code})", 'FAILURE',
                              "hwfarm: hwfarmctl run failed (exit ${code}); see ${log}"]
  Map result = [verdict: o[0], exitCode: code, summary: summary, out: out]
  if (statusName) Hwfarm.status(this, statusName, o[1], "${o[2]}", url)
  if (o[3] == 'FAILURE') error("${o[4]}")
  if (o[3] == 'UNSTABLE') unstable("${o[4]}")
  return result
}
