import org.hwfarm.Hwfarm

// hwfarmLease(type: 'nucleo-f429zi', count: 1, context: 'pr', ttl: 1800, wait: 600) { lease -> ... }
//
// Leases boards with `hwfarmctl lease run` and runs the body while the
// lease is held. The body gets the lease ([id:, boards: [[name:, type:,
// serialPort:, usbSerial:], ...]]) and runs with the same values in its
// environment (HWFARM_LEASE_ID, HWFARM_BOARD_COUNT, HWFARM_BOARD_<i>_NAME,
// _TYPE, _SERIAL_PORT, _USB_SERIAL), so hwfarmRun and hwfarmctl find the
// lease. The lease is released when the body ends, when it fails (the
// error is rethrown), and when the build is aborted (hwfarmctl releases it
// on the SIGTERM Jenkins sends).
//
// Other options: label: (a board label instead of, or with, type:),
// worker: (default $HWFARM_WORKER, else any), priority:. context: defaults
// to $HWFARM_CONTEXT (hwfarmShouldRun sets it: pr-tagged for a tagged PR),
// else pr for a PR build, else manual.
//
// results: 'out/*.xml' (or a map of hwfarmPublish's options, e.g. [junit:
// 'out/*.xml', artifacts: 'out/**', name: 'pytest']) publishes the results
// the body's test harness wrote with hwfarmPublish when the body ends, also
// when it throws, before the lease is released: their verdict judges the
// stage as hwfarmRun's does (test failures: UNSTABLE). No result file, or
// a publish hwfarmctl refuses, fails the step; when the body threw, its
// error is rethrown instead and the publish's is echoed.
//
// A refusal by the agent's tier (hwfarmctl exit 5) skips the body: the
// step echoes the reason and returns null. Any other failure to lease is
// an error; a lease lost while the body ran (revoked, expired) makes the
// stage UNSTABLE. Returns what the body returned.
//
// The lease's variables pass through a file of the agent's temp workspace
// (mode 600, only HWFARM_LEASE_ID and HWFARM_BOARD_*, never HWFARM_TOKEN);
// its directory is removed when the step ends, also on an error or an abort.
def call(Map args = [:], Closure body) {
  if (!args.type && !args.label) error('hwfarmLease: give type: and/or label:')
  String work = "${pwd(tmp: true)}/hwfarm-lease-${UUID.randomUUID().toString().take(8)}"
  try {
    return leaseFor(args, work, body)
  } finally {
    dir(work) { deleteDir() }
  }
}

private def leaseFor(Map args, String work, Closure body) {
  String envFile = "${work}/lease.env", stopFile = "${work}/stop", errFile = "${work}/hwfarmctl.err"
  writeFile(file: "${work}/hold-lease.sh", text: libraryResource('org/hwfarm/hold-lease.sh'))
  List opts = []
  if (args.type) opts << '--type' << args.type
  (args.label instanceof List ? args.label : (args.label ? [args.label] : [])).each { opts << '--label' << it }
  ['count', 'context', 'ttl', 'wait', 'worker', 'priority'].each { k -> if (args[k] != null) opts << "--${k}" << args[k] }
  String command = "exec ${Hwfarm.ctl(this)} lease run ${opts.collect { Hwfarm.quote(it) }.join(' ')} -- " +
                   "sh ${Hwfarm.quote(work + '/hold-lease.sh')} ${Hwfarm.quote(envFile)} ${Hwfarm.quote(stopFile)} " +
                   "2> ${Hwfarm.quote(errFile)}"
  Map state = [holder: null, lease: null, result: null, error: null]
  parallel(
    'hwfarm lease': {
      try {
        state.holder = sh(script: command, returnStatus: true, label: 'hwfarm lease')
      } finally {
        state.holderDone = true
      }
    },
    'hwfarm body': {
      waitUntil(initialRecurrencePeriod: 200, quiet: true) { state.holderDone || fileExists(envFile) }
      if (!fileExists(envFile)) return // no lease: judged below
      state.lease = Hwfarm.parseLease(readFile(envFile))
      try {
        withEnv(state.lease.env) {
          try {
            state.result = body(state.lease)
          } catch (Throwable e) {
            state.error = e
          }
          // The body's results, while the lease is held: also when it threw.
          if (args.results) publishResults(args.results, state.error)
        }
      } catch (Throwable e) {
        state.error = state.error ?: e
      } finally {
        writeFile(file: stopFile, text: 'done\n')
      }
    },
    failFast: false)
  String err = fileExists(errFile) ? readFile(errFile).trim() : ''
  if (err) echo(err)
  if (state.error) throw state.error
  if (state.lease == null) {
    if (state.holder == Hwfarm.REFUSED) {
      echo("hwfarm: lease refused by the agent's tier; skipping the body: ${err}")
      return null
    }
    error("hwfarm: no lease (hwfarmctl exit ${state.holder}): ${err}")
  }
  // 8: the lease ended (expired, revoked) while the body ran.
  if (state.holder != 0) unstable("hwfarm: the lease ended before the body did (hwfarmctl exit ${state.holder}): ${err}")
  return state.result
}

// Publishes the body's results with hwfarmPublish (results: its junit:
// glob, or a map of its options). When the body threw, the body's error is
// the one rethrown: a publish that fails then only says so.
private void publishResults(results, Throwable bodyError) {
  try {
    hwfarmPublish(results instanceof Map ? results : [junit: results])
  } catch (Throwable e) {
    if (bodyError == null) throw e
    echo("hwfarm: the body's results were not published: ${e.message}")
  }
}
