package org.hwfarm

import com.cloudbees.groovy.cps.NonCPS

// What the hwfarm pipeline steps (vars/) share: hwfarmctl's exit codes
// (docs/cli.md), shell quoting, the lease's board list, and the advisory
// commit status. Methods take the pipeline script (`steps`) so they can call
// pipeline steps; nothing here keeps state between calls.
class Hwfarm implements Serializable {
  // hwfarmctl exit codes (daemon/cli/hwfarmctl.h).
  static final int OK = 0
  static final int SHOULD_NOT_RUN = 1 // should-run: no
  static final int REFUSED = 5        // the agent's tier does not serve the context (HTTP 409)
  static final int INFRASTRUCTURE = 9 // a run's infrastructure failed (board, flasher, simulator)
  static final int TEST_FAILED = 10   // a run's test failed
  static final int CANCELLED = 11     // a run was cancelled

  // `text` as one POSIX shell word.
  static String quote(Object text) {
    return "'" + String.valueOf(text).replace("'", "'\\''") + "'"
  }

  // A step option that takes one value or a list, as a list (null: empty).
  @NonCPS
  static List asList(value) {
    return value == null ? [] : (value instanceof Collection ? value as List : [value])
  }

  // The hwfarmctl command: $HWFARMCTL, else hwfarmctl on the PATH.
  static String ctl(steps) {
    return quote(steps.env.HWFARMCTL ?: 'hwfarmctl')
  }

  // The lease from the HWFARM_* lines `lease run` put into its command's
  // environment (KEY=VALUE per line): [id:, boards: [[name:, type:,
  // serialPort:, usbSerial:], ...], env: ['HWFARM_...=...', ...]].
  @NonCPS
  static Map parseLease(String text) {
    Map vars = [:]
    List envList = []
    text.readLines().each { String line ->
      int eq = line.indexOf('=')
      if (line.startsWith('HWFARM_') && eq > 0) {
        vars[line.substring(0, eq)] = line.substring(eq + 1)
        envList << line
      }
    }
    int count = (vars.HWFARM_BOARD_COUNT ?: '0') as int
    List boards = (0..<count).collect { int i ->
      String p = "HWFARM_BOARD_${i}_"
      [name: vars[p + 'NAME'], type: vars[p + 'TYPE'], serialPort: vars[p + 'SERIAL_PORT'] ?: '',
       usbSerial: vars[p + 'USB_SERIAL'] ?: '']
    }
    return [id: vars.HWFARM_LEASE_ID, boards: boards, env: envList]
  }

  // Posts the advisory commit status `name` (e.g. "hw/cortexm-zephyr"):
  // state pending, success, failure or error. Uses publishChecks (the
  // checks-api plugin) when the controller has it, else githubNotify, else
  // says that it skipped. Returns the step used, or 'none'.
  static String status(steps, String name, String state, String description, String url) {
    String summary = description ?: state
    try {
      Map args = [name: name, title: name, summary: summary,
                  status: state == 'pending' ? 'IN_PROGRESS' : 'COMPLETED']
      if (state != 'pending') args.conclusion = state == 'success' ? 'SUCCESS' : 'FAILURE'
      if (url) args.detailsURL = url
      steps.publishChecks(args)
      return 'publishChecks'
    } catch (Throwable e) {
      if (!missingStep(e, 'publishChecks')) throw e
    }
    try {
      Map args = [context: name, status: state.toUpperCase(), description: summary.take(140)]
      if (url) args.targetUrl = url
      steps.githubNotify(args)
      return 'githubNotify'
    } catch (Throwable e) {
      if (!missingStep(e, 'githubNotify')) throw e
    }
    steps.echo("hwfarm: commit status ${name} (${state}) skipped: neither publishChecks (checks-api plugin) nor githubNotify is installed")
    return 'none'
  }

  // Whether `e` says the pipeline has no step `name`: Jenkins throws
  // NoSuchMethodError ("No such DSL method 'name' found among steps"),
  // plain Groovy a MissingMethodException.
  @NonCPS
  static boolean missingStep(Throwable e, String name) {
    if (e instanceof NoSuchMethodError) return e.message?.contains("'${name}'") || e.message?.contains(name)
    if (e instanceof MissingMethodException) return ((MissingMethodException) e).method == name
    return false
  }
}
