// The hwfarm shared library's steps (jenkins/vars) in PipelineHarness, with
// `sh` running the real hwfarmctl against a real hwfarmd on a simulated
// fleet (QEMU boards; one whose QEMU is missing, for an infrastructure
// failure). Run by ctest (jenkins_library):
//   groovy -cp jenkins/test:jenkins/test/stubs jenkins/test/LibraryTest.groovy \
//          HWFARMD HWFARMCTL FIRMWARE_DIR [TEST_NAME_PART]
// Each test prints its name and PASS or FAIL with the assertion; exit 1 when
// any failed.
import groovy.json.JsonSlurper

File libraryDir = new File(getClass().protectionDomain.codeSource.location.path).parentFile.parentFile
String hwfarmd = new File(args[0]).absolutePath, hwfarmctl = new File(args[1]).absolutePath
String firmware = new File(args[2]).absolutePath
String only = args.length > 3 ? args[3] : ''

File tmp = File.createTempDir('hwfarm-jenkins-', '')
File state = new File(tmp, 'state')
// The lab's own certificate for https:// (self-signed: it is its own CA),
// for the steps over TLS with HWFARM_CACERT.
File certFile = new File(tmp, 'lab.crt'), keyFile = new File(tmp, 'lab.key')
Process openssl = ['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
                   '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
                   '-keyout', keyFile.path, '-out', certFile.path].execute()
openssl.waitForProcessOutput(new StringBuilder(), System.err)
assert openssl.exitValue() == 0 : 'openssl req failed'
['chmod', '600', keyFile.path].execute().waitFor()
// A pipeline token, as withCredentials(string(..., variable: 'HWFARM_TOKEN'))
// puts it into the environment of the tests that set it.
String token = "hwfarm-secret-${UUID.randomUUID()}"
File tokens = new File(tmp, 'tokens.toml')
tokens.text = """[[token]]
name = "jenkins"
role = "pipeline"
sha256 = "${java.security.MessageDigest.getInstance('SHA-256').digest(token.bytes).encodeHex()}"
"""
java.nio.file.Files.setPosixFilePermissions(tokens.toPath(), java.nio.file.attribute.PosixFilePermissions.fromString('rw-------'))
new File(tmp, 'fleet.toml').text = """
[agent]
name = "jenkins-lab"
listen = ["127.0.0.1:0", "https://127.0.0.1:0"]
tls_cert = "${certFile}"
tls_key = "${keyFile}"
state_dir = "${state}"
lock_dir = "${state}"
tier = 2
anonymous = "loopback"
tokens_file = "${tokens}"

[[worker]]
name = "w0"
node = "lab-a"

  [[worker.board]]
  name = "sim-m3-a"
  type = "mps2-an385"
  driver = "qemu"

  [[worker.board]]
  name = "broken-1"
  type = "broken"
  driver = "qemu"
  qemu = { machine = "mps2-an385", binary = "${tmp}/no-such-qemu" }

[should_run]
tags = ["microtvm"]
bot_commands = ["@tvm-bot run-odt"]
"""
File daemonLog = new File(tmp, 'hwfarmd.log')
Process daemon = new ProcessBuilder(hwfarmd, '--config', new File(tmp, 'fleet.toml').path)
  .redirectErrorStream(true).redirectOutput(daemonLog).start()
String url = null, httpsUrl = null
for (int i = 0; i < 200 && !url; ++i) {
  Thread.sleep(50)
  def m = daemonLog.text =~ /listening on (http:\/\/\S+)/
  def tls = daemonLog.text =~ /listening on (https:\/\/\S+)/
  if (m.find() && tls.find() && daemonLog.text.contains(' ready: ')) {
    url = m.group(1)
    httpsUrl = tls.group(1)
  }
}
if (!url) { System.err.println("hwfarmd did not start:\n${daemonLog.text}"); daemon.destroy(); System.exit(1) }

def api = { String path -> new JsonSlurper().parseText(new URL(url + path).text) }
def leaseState = { String id -> api("/v1/leases/${id}").state }
def activeLeases = { api('/v1/leases').leases.size() }

// A fresh harness per test: its own workspace, the daemon in its env.
def harness = { Set plugins = [] as Set ->
  File ws = java.nio.file.Files.createTempDirectory(tmp.toPath(), 'ws-').toFile()
  PipelineHarness h = new PipelineHarness(libraryDir, ws)
  h.env.putAll([HWFARM_URL: url, HWFARMCTL: hwfarmctl, BUILD_URL: 'https://ci.example/job/tvm/12/', HWFARM_CONTEXT: '',
                CHANGE_ID: '', HWFARM_LEASE_ID: '', HWFARM_WORKER: ''])
  h.plugins = plugins
  return h
}

int failed = 0
def test = { String name, Closure body ->
  if (only && !name.contains(only)) return
  println "TEST ${name}"
  try {
    body()
    assert activeLeases() == 0 : 'a lease was left active'
    println "PASS ${name}"
  } catch (Throwable t) {
    failed++
    println "FAIL ${name}: ${t}"
    t.printStackTrace(System.out)
  }
}

test('hwfarmLease gives the body its boards in the closure and the environment and releases the lease at its end') {
  PipelineHarness h = harness()
  Map seen = h.script('''
    return hwfarmLease(type: 'mps2-an385', count: 1, context: 'manual', ttl: 60, wait: 30) { lease ->
      String envName = sh(script: 'echo "$HWFARM_LEASE_ID $HWFARM_BOARD_0_NAME $HWFARM_BOARD_COUNT"', returnStdout: true).trim()
      String shown = sh(script: '"$HWFARMCTL" lease show "$HWFARM_LEASE_ID"', returnStdout: true)
      return [lease: lease, env: envName, shown: shown]
    }
  ''').run()
  assert seen.lease.boards == [[name: 'sim-m3-a', type: 'mps2-an385', serialPort: '', usbSerial: '']]
  assert seen.env == "${seen.lease.id} sim-m3-a 1".toString()
  assert seen.shown.contains('(active)')
  assert leaseState(seen.lease.id) == 'released'
  assert h.callsOf('sh')[0].script.contains("lease run '--type' 'mps2-an385' '--count' '1' '--context' 'manual' '--ttl' '60' '--wait' '30' -- sh ")
}

test('hwfarmLease releases the lease when the body throws and rethrows the error') {
  PipelineHarness h = harness()
  String id = null
  try {
    h.script('''
      hwfarmLease(type: 'mps2-an385', context: 'manual') { lease -> leaseSeen(lease.id); throw new IllegalStateException('boom') }
    ''', [leaseSeen: { id = it }]).run()
    assert false : 'the error was swallowed'
  } catch (IllegalStateException e) {
    assert e.message == 'boom'
  }
  assert id && leaseState(id) == 'released'
}

test('hwfarmLease releases the lease when the build is aborted while the body runs') {
  PipelineHarness h = harness()
  String id = null
  Thread aborter = Thread.start {
    for (int i = 0; i < 400 && !id; ++i) Thread.sleep(25)
    Thread.sleep(300) // the body's sleep is running
    h.abort()
  }
  long start = System.currentTimeMillis()
  try {
    h.script('''
      hwfarmLease(type: 'mps2-an385', context: 'manual', ttl: 600) { lease -> leaseSeen(lease.id); sh 'sleep 60' }
    ''', [leaseSeen: { id = it }]).run()
    assert false : 'an abort did not stop the body'
  } catch (PipelineInterrupted e) {
  }
  aborter.join()
  assert System.currentTimeMillis() - start < 30000
  assert h.currentBuild.result == 'ABORTED'
  // hwfarmctl released it on SIGTERM: released, not left to expire at its TTL.
  def lease = api("/v1/leases/${id}")
  assert lease.state == 'released' && lease.end_reason == 'released'
}

// The files under the workspace and its @tmp sibling whose bytes hold `text`.
def filesHolding = { PipelineHarness h, String text ->
  List found = []
  [h.workspace, new File(h.workspace.path + '@tmp')].findAll { it.exists() }.each { File root ->
    root.eachFileRecurse(groovy.io.FileType.FILES) { File f -> if (new String(f.bytes, 'ISO-8859-1').contains(text)) found << f.path }
  }
  return found
}

test('hwfarmLease leaves no file holding the token on the agent after the body ends, throws or is aborted') {
  ['ends', 'throws', 'is aborted'].each { String ending ->
    // Given the token in the environment only (withCredentials),
    PipelineHarness h = harness()
    h.env.HWFARM_TOKEN = token
    Map during = [:]
    Closure seen = { Map lease ->
      File leaseEnv = null
      new File(h.workspace.path + '@tmp').eachFileRecurse(groovy.io.FileType.FILES) { if (it.name == 'lease.env') leaseEnv = it }
      during.putAll([id: lease.id, lines: leaseEnv.readLines(),
                     mode: java.nio.file.attribute.PosixFilePermissions.toString(java.nio.file.Files.getPosixFilePermissions(leaseEnv.toPath())),
                     holding: filesHolding(h, token)])
    }
    Thread aborter = ending != 'is aborted' ? null : Thread.start {
      for (int i = 0; i < 400 && !during.id; ++i) Thread.sleep(25)
      Thread.sleep(300) // the body's sleep is running
      h.abort()
    }
    String last = [ends: "return 'done'", throws: "throw new IllegalStateException('boom')", 'is aborted': "sh 'sleep 60'"][ending]
    // when a lease's body ends, throws or is aborted,
    try {
      def r = h.script("return hwfarmLease(type: 'mps2-an385', context: 'manual') { lease -> seen(lease); ${last} }", [seen: seen]).run()
      assert ending == 'ends' && r == 'done'
    } catch (IllegalStateException e) {
      assert ending == 'throws' && e.message == 'boom'
    } catch (PipelineInterrupted e) {
      assert ending == 'is aborted'
    }
    aborter?.join()
    // then while the body ran the lease's file had its variables alone, for its owner only,
    assert during.id : "the body did not run (${ending})"
    assert during.mode == 'rw-------'
    assert during.lines.contains("HWFARM_LEASE_ID=${during.id}".toString())
    assert during.lines.every { it ==~ /HWFARM_(LEASE_ID|BOARD_COUNT|BOARD_\d+_[A-Z_]+)=.*/ } : during.lines
    assert during.holding == []
    // the token was the one used (the lease is its holder's),
    def lease = api("/v1/leases/${during.id}")
    assert lease.state == 'released' && lease.holder.principal == 'jenkins'
    // and afterwards no file under the workspace holds the token, and the lease's directory is gone.
    assert filesHolding(h, token) == [] : "${ending}: ${filesHolding(h, token)}"
    File tmpDir = new File(h.workspace.path + '@tmp')
    assert !tmpDir.exists() || tmpDir.list().findAll { it.startsWith('hwfarm-lease-') } == []
  }
}

test('hwfarmRun on a test failure records junit and archives the artifacts and the build is UNSTABLE not FAILURE') {
  PipelineHarness h = harness(['publishChecks'] as Set)
  Map r = h.script("""
    hwfarmLease(type: 'mps2-an385', context: 'manual') { lease ->
      hwfarmRun(image: '${firmware}/hwfarm-fail.elf', reference: 'none', status: 'hw/cortexm-zephyr')
    }
  """).run()
  assert r.verdict == 'test_failed' && r.exitCode == 10
  assert r.summary ==~ /run run-\w+: failed.*/
  assert h.currentBuild.result == 'UNSTABLE'
  assert h.callsOf('unstable')[0].args.startsWith('hwfarm: test failures: run run-')
  assert h.callsOf('junit')*.args == [[testResults: 'hwfarm-results/junit.xml', allowEmptyResults: true]]
  File junit = new File(h.workspace, 'hwfarm-results/junit.xml')
  assert junit.text =~ /failures="[1-9]/
  assert h.callsOf('archiveArtifacts')*.args == [[artifacts: 'hwfarm-results/**, hwfarm-results.log', allowEmptyArchive: true]]
  assert new File(h.workspace, 'hwfarm-results/summary.json').exists()
  // The advisory status: pending, then a failed check (not an error).
  assert h.callsOf('publishChecks')*.args == [
    [name: 'hw/cortexm-zephyr', title: 'hw/cortexm-zephyr', summary: 'hardware tests running', status: 'IN_PROGRESS',
     detailsURL: 'https://ci.example/job/tvm/12/testReport/'],
    [name: 'hw/cortexm-zephyr', title: 'hw/cortexm-zephyr', summary: 'hardware tests failed (advisory)', status: 'COMPLETED',
     conclusion: 'FAILURE', detailsURL: 'https://ci.example/job/tvm/12/testReport/']]
}

test('hwfarmRun streams the run lines to the build log while the run goes on') {
  PipelineHarness h = harness()
  // Two images on one board, one after the other: the pass is judged while
  // the hanging one still runs (until its 4 s deadline).
  Map stateWhenSeen = [:]
  String runId = null
  h.onLine = { String line ->
    def started = line =~ /^run (run-[0-9a-f]+): 2 image\(s\)/
    if (started.find()) runId = started.group(1)
    if (runId && line.startsWith('hwfarm_pass on ')) stateWhenSeen[line] = api("/v1/runs/${runId}").state
  }
  Map r = h.script("""
    hwfarmLease(type: 'mps2-an385', context: 'manual') { lease ->
      hwfarmRun(image: ['${firmware}/hwfarm-pass.elf', '${firmware}/hwfarm-hang.elf'], reference: 'none',
                mode: 'shard', deadline: 4, status: false)
    }
  """).run()
  assert r.verdict == 'test_failed' && r.exitCode == 10
  assert stateWhenSeen == ['hwfarm_pass on mps2_an385 (sim-m3-a): pass': 'running']
  // The log file holds the same lines.
  assert new File(h.workspace, 'hwfarm-results.log').text.contains('hwfarm_pass on mps2_an385 (sim-m3-a): pass')
  assert !new File(h.workspace, 'hwfarm-results.rc').exists()
}

test('hwfarmRun on a pass keeps SUCCESS and posts githubNotify statuses when publishChecks is missing') {
  PipelineHarness h = harness(['githubNotify'] as Set)
  h.env.HWFARM_STATUS_NAME = 'hw/nightly'
  Map r = h.script("""
    hwfarmLease(type: 'mps2-an385', context: 'manual') { lease -> hwfarmRun(image: '${firmware}/hwfarm-pass.elf', reference: 'qemu') }
  """).run()
  assert r.verdict == 'passed'
  assert h.currentBuild.result == 'SUCCESS'
  assert h.callsOf('unstable').isEmpty()
  assert h.callsOf('githubNotify')*.args == [
    [context: 'hw/nightly', status: 'PENDING', description: 'hardware tests running', targetUrl: 'https://ci.example/job/tvm/12/testReport/'],
    [context: 'hw/nightly', status: 'SUCCESS', description: 'hardware tests passed', targetUrl: 'https://ci.example/job/tvm/12/testReport/']]
}

test('hwfarmRun reports an infrastructure failure as such and without a status step says it skipped the status') {
  PipelineHarness h = harness()
  Map r = h.script("""
    hwfarmLease(type: 'broken', context: 'manual') { lease ->
      hwfarmRun(image: '${firmware}/hwfarm-pass.elf', reference: 'none', status: 'hw/cortexm-zephyr')
    }
  """).run()
  assert r.verdict == 'infrastructure' && r.exitCode == 9
  assert h.currentBuild.result == 'UNSTABLE'
  String text = h.callsOf('unstable')[0].args
  assert text.startsWith('hwfarm: INFRASTRUCTURE failure, not a test result')
  assert text.contains('run run-') && text.contains(': error')
  assert h.log.any { it.contains('QEMU did not start for board broken-1') }
  assert h.callsOf('echo')*.args.findAll { it.toString().contains('commit status') }*.toString() == [
    'hwfarm: commit status hw/cortexm-zephyr (pending) skipped: neither publishChecks (checks-api plugin) nor githubNotify is installed',
    'hwfarm: commit status hw/cortexm-zephyr (error) skipped: neither publishChecks (checks-api plugin) nor githubNotify is installed']
  // With infraResult: 'FAILURE' the same failure fails the stage, saying so.
  PipelineHarness strict = harness()
  try {
    strict.script("""
      hwfarmLease(type: 'broken', context: 'manual') { lease ->
        hwfarmRun(image: '${firmware}/hwfarm-pass.elf', reference: 'none', status: false, infraResult: 'FAILURE')
      }
    """).run()
    assert false
  } catch (StepFailed e) {
    assert e.message.startsWith('hwfarm: INFRASTRUCTURE failure, not a test result')
  }
}

test('hwfarmShouldRun skips an untagged PR on a tier-2 agent with the reason and runs a tagged one as pr-tagged') {
  PipelineHarness h = harness()
  h.env.putAll([CHANGE_ID: '42', CHANGE_TITLE: 'Fix the AOT executor'])
  boolean ran = false
  def skipped = h.script('''
    if (hwfarmShouldRun(context: 'pr')) { hwfarmLease(type: 'mps2-an385') { lease -> bodyRan() } ; return 'ran' }
    return env.HWFARM_SKIP_REASON
  ''', [bodyRan: { ran = true }]).run()
  assert !ran
  assert skipped == 'tier 2 runs only PRs tagged [microtvm] or triggered by "@tvm-bot run-odt"; this PR has none of them'
  assert h.callsOf('echo')*.args*.toString().contains('hwfarm: skipping the hardware stages: ' + skipped)
  assert h.currentBuild.result == 'SUCCESS'
  assert h.callsOf('sh').size() == 1 // no lease was asked for

  // The trigger comment tags it: the lease uses pr-tagged, which tier 2 grants.
  PipelineHarness tagged = harness()
  tagged.env.putAll([CHANGE_ID: '42', CHANGE_TITLE: 'Fix the AOT executor', GITHUB_COMMENT: '@tvm-bot run-odt microtvm'])
  String context = tagged.script('''
    if (!hwfarmShouldRun(context: 'pr')) return 'skipped'
    return hwfarmLease(type: 'mps2-an385') { lease -> sh(script: '"$HWFARMCTL" --json lease show "$HWFARM_LEASE_ID"', returnStdout: true) }
  ''').run()
  assert new JsonSlurper().parseText(context).context == 'pr-tagged'
  assert tagged.env.HWFARM_CONTEXT == 'pr-tagged'
}

test('hwfarmLease skips its body when the tier refuses the context') {
  PipelineHarness h = harness()
  boolean ran = false
  def r = h.script('''
    hwfarmLease(type: 'mps2-an385', context: 'pr') { lease -> bodyRan() }
  ''', [bodyRan: { ran = true }]).run()
  assert r == null && !ran
  String said = h.callsOf('echo')*.args*.toString().find { it.startsWith('hwfarm: lease refused') }
  assert said && said.contains('tier_refused') && said.contains('"pr" requests')
  assert h.currentBuild.result == 'SUCCESS'
}

test('hwfarmShouldRun says no with the reason when the daemon cannot be reached') {
  PipelineHarness h = harness()
  h.env.HWFARM_URL = 'http://127.0.0.1:1'
  assert h.script("return hwfarmShouldRun(context: 'nightly')").run() == false
  assert h.env.HWFARM_SKIP_REASON.startsWith('hwfarmctl should-run failed (exit 3): hwfarmctl: ')
}

test('the steps lease and run over https with the lab CA in HWFARM_CACERT, and refuse the server without it') {
  PipelineHarness h = harness()
  h.env.HWFARM_URL = httpsUrl
  h.env.HWFARM_CACERT = certFile.path
  Map r = h.script("""
    hwfarmLease(type: 'mps2-an385', context: 'manual') { lease ->
      hwfarmRun(image: '${firmware}/hwfarm-pass.elf', reference: 'none', status: false)
    }
  """).run()
  assert r.verdict == 'passed'
  assert h.currentBuild.result == 'SUCCESS'
  // Without the CA, hwfarmctl refuses the server and the step says why.
  PipelineHarness untrusted = harness()
  untrusted.env.HWFARM_URL = httpsUrl
  assert untrusted.script("return hwfarmShouldRun(context: 'nightly')").run() == false
  assert untrusted.env.HWFARM_SKIP_REASON.contains('its certificate is not trusted')
}

// hwfarmctl for the hwfarmPublish tests: `--json results publish` records
// its arguments (NUL-separated) and the lease's state at that moment, then
// answers as $FAKE_PUBLISH says (a run's verdict, or a refusal); every other
// command is the real hwfarmctl's.
File fakeCtl = new File(tmp, 'fake-hwfarmctl')
fakeCtl.text = '''#!/bin/sh
[ "$1 $2 $3" = "--json results publish" ] || exec "$HWFARMCTL_REAL" "$@"
n=$(ls "$FAKE_DIR" | grep -c '^publish-' || true)
printf '%s\\0' "$@" > "$FAKE_DIR/publish-$n"
[ -z "$HWFARM_LEASE_ID" ] || "$HWFARMCTL_REAL" lease show "$HWFARM_LEASE_ID" > "$FAKE_DIR/lease-$n" 2>&1
case "$FAKE_PUBLISH" in
  passed) echo '{"id": "run-0123abcd", "state": "passed"}' ;;
  failed) echo '{"id": "run-0123abcd", "state": "failed", "failure_class": "test"}' ;;
  error) echo '{"id": "run-0123abcd", "state": "error", "failure_class": "infrastructure"}' ;;
  *) echo 'hwfarmctl: HTTP 400: bad_results: out/r.xml:3:1: the file ends inside <testsuite>; nothing was stored' >&2; exit 1 ;;
esac
'''
fakeCtl.setExecutable(true)
// A harness whose hwfarmctl is the fake, answering `verdict`.
def publishHarness = { String verdict ->
  PipelineHarness h = harness()
  File fakeDir = java.nio.file.Files.createTempDirectory(tmp.toPath(), 'fake-').toFile()
  h.env.putAll([HWFARMCTL: fakeCtl.path, HWFARMCTL_REAL: hwfarmctl, FAKE_PUBLISH: verdict, FAKE_DIR: fakeDir.path])
  return h
}
// Each `results publish` the fake got: [args: [...], lease: `lease show` then].
def publishes = { PipelineHarness h ->
  File d = new File(h.env.FAKE_DIR)
  (0..<d.list().count { it.startsWith('publish-') }).collect { int i ->
    File lease = new File(d, "lease-${i}")
    [args: new File(d, "publish-${i}").getText('UTF-8').split('\u0000', -1).toList().dropRight(1),
     lease: lease.exists() ? lease.text : null]
  }
}
def touch = { PipelineHarness h, String path -> File f = new File(h.workspace, path); f.parentFile.mkdirs(); f.text = '<testsuites/>' }

test('hwfarmPublish publishes the files its globs match with each argument quoted and returns the run') {
  PipelineHarness h = publishHarness('passed')
  ['out/r 1.xml', "out/it's.xml", 'out/$(touch pwned).xml', 'out/skip.json', 'twister-out/twister.json',
   'logs dir/a/x.log', 'cov.txt'].each { touch(h, it) }
  String name = "it's \$(touch pwned) `touch pwned` a;b \"c\"\nd"
  h.env.NAME = name
  Map r = h.script('''
    return hwfarmPublish(junit: ['out/*.xml', 'twister-out/twister.json'], artifacts: ['logs dir/**', 'cov.txt', 'none/**'],
                         name: env.NAME, commit: 'abc123', board: 'sim-m3-a', lease: 'lease-0001')
  ''').run()
  assert r == [id: 'run-0123abcd', state: 'passed', failure: 'none']
  List got = publishes(h)
  assert got.size() == 1
  List a = got[0].args
  assert a.take(15) == ['--json', 'results', 'publish', '--lease', 'lease-0001', '--name', name, '--commit', 'abc123',
                        '--board', 'sim-m3-a', '--artifacts', 'logs dir', '--artifacts', 'cov.txt']
  // then the files, glob by glob (each glob's matches in the shell's order)
  assert a.drop(15).take(3).sort() == ['out/$(touch pwned).xml', "out/it's.xml", 'out/r 1.xml'].sort()
  assert a.drop(18) == ['twister-out/twister.json']
  assert !new File(h.workspace, 'pwned').exists()
  assert h.log.contains('hwfarm: no artifacts match none; skipped')
  assert h.callsOf('echo')*.args*.toString().contains('hwfarm: published run run-0123abcd: passed')
  assert h.currentBuild.result == 'SUCCESS' && h.callsOf('unstable').isEmpty()
  // Its working directory is gone.
  assert new File(h.workspace.path + '@tmp').list().findAll { it.startsWith('hwfarm-publish-') } == []
}

test('hwfarmPublish fails the step when a glob of result files matches nothing, and publishes nothing') {
  PipelineHarness h = publishHarness('passed')
  touch(h, 'out/r.xml')
  try {
    h.script("hwfarmPublish(junit: ['out/*.xml', 'out/\$(id)*.json'])").run()
    assert false : 'the step passed without results'
  } catch (StepFailed e) {
    assert e.message == "hwfarm: no file matches 'out/\$(id)*.json': the test harness wrote no results, which is not a pass"
  }
  assert publishes(h) == []
  try {
    h.script("hwfarmPublish(artifacts: 'out/**')").run()
    assert false
  } catch (StepFailed e) {
    assert e.message == 'hwfarmPublish: give junit: (a glob of the result files)'
  }
}

test('hwfarmPublish makes test failures UNSTABLE, names an infrastructure failure, and fails on a refused publish') {
  PipelineHarness h = publishHarness('failed')
  touch(h, 'out/r.xml')
  assert h.script("return hwfarmPublish(junit: 'out/*.xml')").run() == [id: 'run-0123abcd', state: 'failed', failure: 'test']
  assert h.currentBuild.result == 'UNSTABLE'
  assert h.callsOf('unstable')*.args == ['hwfarm: test failures: run run-0123abcd: failed']
  assert publishes(h)[0].args == ['--json', 'results', 'publish', 'out/r.xml']

  PipelineHarness infra = publishHarness('error')
  touch(infra, 'out/r.xml')
  assert infra.script("return hwfarmPublish(junit: 'out/r.xml')").run().state == 'error'
  assert infra.currentBuild.result == 'UNSTABLE'
  assert infra.callsOf('unstable')*.args == ['hwfarm: INFRASTRUCTURE failure, not a test result: run run-0123abcd: error']
  try {
    infra.script("hwfarmPublish(junit: 'out/r.xml', infraResult: 'FAILURE')").run()
    assert false
  } catch (StepFailed e) {
    assert e.message == 'hwfarm: INFRASTRUCTURE failure, not a test result: run run-0123abcd: error'
  }

  PipelineHarness refused = publishHarness('refused')
  touch(refused, 'out/r.xml')
  try {
    refused.script("hwfarmPublish(junit: 'out/r.xml')").run()
    assert false : 'a refused publish passed'
  } catch (StepFailed e) {
    assert e.message == 'hwfarm: hwfarmctl results publish failed (exit 1): hwfarmctl: HTTP 400: bad_results: ' +
                        'out/r.xml:3:1: the file ends inside <testsuite>; nothing was stored'
  }
}

test('hwfarmLease results: publishes on the held lease when the body ends and when it throws, then releases') {
  // The body throws after its harness wrote results: they are published, on the lease, before its release.
  PipelineHarness h = publishHarness('passed')
  String id = null
  try {
    h.script('''
      hwfarmLease(type: 'mps2-an385', context: 'manual', results: 'out/*.xml') { lease ->
        leaseSeen(lease.id)
        sh 'mkdir -p out && echo "<testsuites/>" > out/r.xml'
        throw new IllegalStateException('boom')
      }
    ''', [leaseSeen: { id = it }]).run()
    assert false : 'the error was swallowed'
  } catch (IllegalStateException e) {
    assert e.message == 'boom'
  }
  List got = publishes(h)
  assert got*.args == [['--json', 'results', 'publish', 'out/r.xml']]
  assert got[0].lease.contains(id) && got[0].lease.contains('(active)')
  assert leaseState(id) == 'released'

  // The body ends: its result is returned, the run's test failures make it UNSTABLE; a map gives hwfarmPublish's options.
  PipelineHarness failing = publishHarness('failed')
  def r = failing.script('''
    return hwfarmLease(type: 'mps2-an385', context: 'manual', results: [junit: 'out/*.xml', artifacts: 'out/**', name: 'pytest']) { lease ->
      sh 'mkdir -p out && echo "<testsuites/>" > out/r.xml'
      return 'done'
    }
  ''').run()
  assert r == 'done'
  assert publishes(failing)*.args == [['--json', 'results', 'publish', '--name', 'pytest', '--artifacts', 'out', 'out/r.xml']]
  assert failing.currentBuild.result == 'UNSTABLE'
  assert failing.callsOf('unstable')*.args == ['hwfarm: test failures: run run-0123abcd: failed']

  // No results: the step fails, saying so; when the body threw, its error is the one rethrown.
  PipelineHarness none = publishHarness('passed')
  try {
    none.script("hwfarmLease(type: 'mps2-an385', context: 'manual', results: 'out/*.xml') { lease -> sh 'true' }").run()
    assert false : 'a body without results passed'
  } catch (StepFailed e) {
    assert e.message.startsWith("hwfarm: no file matches 'out/*.xml'")
  }
  try {
    none.script("hwfarmLease(type: 'mps2-an385', context: 'manual', results: 'out/*.xml') { lease -> sh 'exit 3' }").run()
    assert false
  } catch (StepFailed e) {
    assert e.message == 'script returned exit code 3'
  }
  assert none.callsOf('echo')*.args*.toString().contains(
    "hwfarm: the body's results were not published: hwfarm: no file matches 'out/*.xml': the test harness wrote no results, which is not a pass")
  assert publishes(none) == []
}

// The same with the real `hwfarmctl results publish`.
test('hwfarmPublish publishes pytest JUnit XML with the real hwfarmctl: passed, test failures UNSTABLE, a cut file refused') {
  Closure suite = { int failures -> """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="${failures}" skipped="0" tests="2" time="0.01">
<testcase classname="tests.test_board" name="test_boot" time="0.001"/>
<testcase classname="tests.test_board" name="test_uart" time="0.002">${failures ? '<failure message="assert 1 == 2">E   assert 1 == 2</failure>' : ''}</testcase>
</testsuite></testsuites>
""" }
  PipelineHarness h = harness()
  h.env.putAll([PASSING: suite(0), FAILING: suite(1)])
  Map r = h.script('''
    hwfarmLease(type: 'mps2-an385', context: 'manual') { lease ->
      writeFile(file: 'pass/r.xml', text: env.PASSING)
      writeFile(file: 'fail/r.xml', text: env.FAILING)
      writeFile(file: 'cut/r.xml', text: env.FAILING.take(120))
      Map results = [passed: hwfarmPublish(junit: 'pass/*.xml', artifacts: 'pass/**', name: 'pytest'),
                     failed: hwfarmPublish(junit: 'fail/*.xml', name: 'pytest')]
      try { hwfarmPublish(junit: 'cut/r.xml') ; results.cut = 'published' }
      catch (StepFailed e) { results.cut = e.message }
      return results
    }
  ''').run()
  assert r.passed.state == 'passed' && r.passed.id.startsWith('run-')
  assert r.failed.state == 'failed' && r.failed.failure == 'test'
  assert r.cut.startsWith('hwfarm: hwfarmctl results publish failed (exit ')
  assert h.currentBuild.result == 'UNSTABLE'
  assert h.callsOf('unstable')*.args == ["hwfarm: test failures: run ${r.failed.id}: failed".toString()]
}

test('the example Jenkinsfiles compile') {
  PipelineHarness h = harness()
  ['Jenkinsfile.pr', 'Jenkinsfile.nightly'].each { h.compile(new File(libraryDir, it)) }
  // and a Jenkinsfile with a syntax error does not
  File broken = new File(tmp, 'Jenkinsfile.broken')
  broken.text = new File(libraryDir, 'Jenkinsfile.pr').text.replaceFirst(/\}\s*$/, '')
  try { h.compile(broken); assert false : 'a broken Jenkinsfile compiled' }
  catch (org.codehaus.groovy.control.MultipleCompilationErrorsException e) {}
}

daemon.destroy()
daemon.waitFor()
tmp.deleteDir()
println failed ? "${failed} test(s) FAILED" : 'all tests passed'
System.exit(failed ? 1 : 0)
