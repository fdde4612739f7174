import groovy.json.JsonSlurperClassic
import org.hwfarm.Hwfarm

// if (hwfarmShouldRun(context: 'pr')) { ...hardware stages... }
//
// Asks the agent (`hwfarmctl should-run`) whether this build should use its
// hardware: its effective tier and the configured tag patterns (title tags
// like [microtvm], labels, bot commands like "@tvm-bot run-odt microtvm")
// decide. The PR's title, labels and trigger comment come from the
// environment unless given: title: (CHANGE_TITLE), labels: (a list, or
// HWFARM_PR_LABELS as "a,b"), comment: (GITHUB_COMMENT, set by
// pipeline-github's issueCommentTrigger).
//
// Yes: returns true and sets env.HWFARM_CONTEXT to the context to lease
// with (pr-tagged for a tagged PR, which a tier-2 agent grants). No: echoes
// the reason, sets env.HWFARM_SKIP_REASON, returns false, so the caller
// skips the hardware stages instead of failing or waiting. A should-run
// that cannot ask (daemon unreachable, bad token) is a no with that reason.
def call(Map args = [:]) {
  String context = args.context ?: (env.CHANGE_ID ? 'pr' : 'manual')
  List labels = args.labels != null ? (args.labels as List)
                                    : (env.HWFARM_PR_LABELS ?: '').split(',').findAll { it.trim() } as List
  String title = args.title != null ? args.title : (env.CHANGE_TITLE ?: '')
  String comment = args.comment != null ? args.comment : (env.GITHUB_COMMENT ?: '')
  String dir = pwd(tmp: true)
  String answer = "${dir}/hwfarm-should-run.json", errFile = "${dir}/hwfarm-should-run.err"
  List opts = ['--context', context, '--title', title, '--comment', comment]
  if (labels) opts << '--labels' << labels.join(',')
  int code = sh(script: "${Hwfarm.ctl(this)} --json should-run ${opts.collect { Hwfarm.quote(it) }.join(' ')} " +
                        "> ${Hwfarm.quote(answer)} 2> ${Hwfarm.quote(errFile)}",
                returnStatus: true, label: 'hwfarm should-run')
  Map decision = code <= Hwfarm.SHOULD_NOT_RUN && fileExists(answer) ? parse(readFile(answer)) : null
  if (decision == null) {
    String err = fileExists(errFile) ? readFile(errFile).trim() : ''
    decision = [run: false, reason: "hwfarmctl should-run failed (exit ${code}): ${err}"]
  }
  if (decision.run) {
    env.HWFARM_CONTEXT = decision.lease_context
    echo("hwfarm: running the hardware stages: ${decision.reason}")
    return true
  }
  env.HWFARM_SKIP_REASON = decision.reason
  echo("hwfarm: skipping the hardware stages: ${decision.reason}")
  return false
}

@NonCPS
private static Map parse(String text) {
  return text?.trim() ? new JsonSlurperClassic().parseText(text) as Map : null
}
