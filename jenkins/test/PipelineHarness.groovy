import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.CopyOnWriteArrayList
import org.codehaus.groovy.control.CompilerConfiguration
import org.codehaus.groovy.control.customizers.ImportCustomizer

// A stand-in for the Jenkins pipeline steps the hwfarm library calls, so its
// vars/ run in plain Groovy: `sh` REALLY runs its script (sh -e, in the
// workspace, in its own session so an abort can signal its whole process
// group as Jenkins does), files are real files, `parallel` branches are
// threads, `dir` changes the directory of the steps in its body (and
// `deleteDir` removes it). Every step call is recorded in `calls` ([step:, args:, ...]);
// `currentBuild.result` moves as Jenkins moves it (UNSTABLE, ABORTED).
// publishChecks and githubNotify exist only when `plugins` names them.
class PipelineHarness {
  final File workspace
  final File library
  final Map env = new ConcurrentHashMap()
  final Map currentBuild = new ConcurrentHashMap([result: 'SUCCESS'])
  final List calls = new CopyOnWriteArrayList()
  final List<String> log = new CopyOnWriteArrayList()
  Set<String> plugins = [] as Set
  // Called with each line of a step's output as it is read (before the step ends).
  Closure onLine = null
  private final List<Process> running = new CopyOnWriteArrayList()
  private final ThreadLocal<List<String>> scoped = ThreadLocal.withInitial { [] }
  private final ThreadLocal<File> cwd = new ThreadLocal<File>()
  private volatile boolean aborted = false
  private final GroovyShell shell

  PipelineHarness(File library, File workspace) {
    this.library = library
    this.workspace = workspace
    CompilerConfiguration cc = new CompilerConfiguration()
    // As Jenkins' CPS shell does for vars/ and Jenkinsfiles.
    cc.addCompilationCustomizers(new ImportCustomizer().addImports('com.cloudbees.groovy.cps.NonCPS'))
    GroovyClassLoader loader = new GroovyClassLoader(getClass().classLoader, cc)
    loader.addClasspath(new File(library, 'src').path)
    shell = new GroovyShell(loader, new Binding(), cc)
  }

  // `text` as a pipeline script: the steps, the library's global variables
  // (vars/) and `extra` (test hooks, by name) callable from it.
  Script script(String text, Map<String, Closure> extra = [:]) {
    Script s = shell.parse(text)
    s.binding = binding()
    extra.each { String name, Closure c -> s.binding.setVariable(name, c) }
    return s
  }

  // Compiles a Jenkinsfile without running it; throws on a syntax error.
  void compile(File jenkinsfile) { shell.parse(jenkinsfile) }

  private Binding binding() {
    Binding b = new Binding()
    b.setVariable('env', env)
    b.setVariable('currentBuild', currentBuild)
    steps().each { String name, Closure c -> b.setVariable(name, c) }
    new File(library, 'vars').eachFileMatch(~/.*\.groovy/) { File f ->
      String name = f.name - '.groovy'
      b.setVariable(name, { Object[] a ->
        Script var = shell.parse(f)
        var.binding = b
        var.invokeMethod('call', a)
      })
    }
    return b
  }

  private Map<String, Closure> steps() {
    Map<String, Closure> s = [
      sh: { Object a -> sh(a instanceof Map ? a : [script: a]) },
      echo: { Object m -> record('echo', m); say(m) },
      error: { Object m -> record('error', "${m}"); throw new StepFailed("${m}") },
      unstable: { Object m -> record('unstable', "${m}"); worsen('UNSTABLE'); say("WARNING: ${m}") },
      junit: { Map a -> record('junit', a) },
      archiveArtifacts: { Map a -> record('archiveArtifacts', a) },
      pwd: { Map a = [:] -> a.tmp ? mkdirs(new File(workspace.path + '@tmp')).path : here().path },
      dir: { Object p, Closure body -> inDir(file("${p}"), body) },
      deleteDir: { -> record('deleteDir', here().path); here().deleteDir(); null },
      writeFile: { Map a -> File f = file("${a.file}"); mkdirs(f.parentFile); f.text = a.text; null },
      readFile: { Object a -> file("${a instanceof Map ? a.file : a}").text },
      fileExists: { Object p -> file("${p}").exists() },
      libraryResource: { Object p -> new File(library, "resources/${p}").text },
      withEnv: { List vars, Closure body -> withEnv(vars, body) },
      parallel: { Map branches -> parallel(branches) },
      waitUntil: { Object[] a -> waitUntil(a[-1] as Closure) },
    ]
    if ('publishChecks' in plugins) s.publishChecks = { Map a -> record('publishChecks', a) }
    if ('githubNotify' in plugins) s.githubNotify = { Map a -> record('githubNotify', a) }
    return s
  }

  // Jenkins' abort: the build is ABORTED, every running `sh` gets SIGTERM
  // (its whole process group), and steps that wait throw.
  void abort() {
    aborted = true
    currentBuild.result = 'ABORTED'
    running.each { Process p -> ['kill', '-TERM', '--', "-${p.pid()}"].execute().waitFor() }
  }

  List callsOf(String step) { calls.findAll { it.step == step } }

  private void record(String step, Object args) { calls << [step: step, args: args] }
  private void say(Object m) {
    log << String.valueOf(m)
    if (onLine) onLine(String.valueOf(m))
    println "  | ${m}"
  }
  private static File mkdirs(File d) { d.mkdirs(); d }
  private File here() { cwd.get() ?: workspace }
  private File file(String p) { p.startsWith('/') ? new File(p) : new File(here(), p) }

  private void worsen(String result) {
    List order = ['SUCCESS', 'UNSTABLE', 'FAILURE', 'NOT_BUILT', 'ABORTED']
    synchronized (currentBuild) {
      if (order.indexOf(result) > order.indexOf(currentBuild.result)) currentBuild.result = result
    }
  }

  private Object sh(Map a) {
    if (aborted) throw new PipelineInterrupted()
    Map call = [step: 'sh', args: a, script: a.script]
    calls << call
    ProcessBuilder pb = new ProcessBuilder('setsid', 'sh', '-ec', a.script as String).directory(mkdirs(here()))
    Map<String, String> e = pb.environment()
    env.each { k, v -> if (v != null) e.put(k as String, v as String) }
    scoped.get().each { String kv -> int i = kv.indexOf('='); e.put(kv.substring(0, i), kv.substring(i + 1)) }
    pb.redirectErrorStream(true)
    Process p = pb.start()
    running << p
    StringBuilder out = new StringBuilder()
    p.inputStream.eachLine { String line -> out.append(line).append('\n'); if (!a.returnStdout) say(line) }
    int code = p.waitFor()
    running.remove(p)
    call.status = code
    if (aborted) throw new PipelineInterrupted()
    if (a.returnStatus) return code
    if (code != 0) throw new StepFailed("script returned exit code ${code}")
    return a.returnStdout ? out.toString() : null
  }

  private Object withEnv(List vars, Closure body) {
    List<String> saved = scoped.get()
    scoped.set(saved + (vars as List<String>))
    try { return body() } finally { scoped.set(saved) }
  }

  // As Jenkins' dir: the directory is made when a step needs it.
  private Object inDir(File d, Closure body) {
    File saved = cwd.get()
    cwd.set(d)
    try { return body() } finally { cwd.set(saved) }
  }

  // Each branch on its own thread with the caller's withEnv and dir; the first
  // branch error is rethrown once all have ended (failFast: false).
  private Object parallel(Map branches) {
    List<String> inherited = scoped.get()
    File inheritedDir = cwd.get()
    List<Throwable> errors = new CopyOnWriteArrayList()
    List<Thread> threads = branches.findAll { k, v -> k != 'failFast' }.collect { name, Closure body ->
      Thread.start("branch ${name}") {
        scoped.set(inherited)
        cwd.set(inheritedDir)
        try { body() } catch (Throwable t) { errors << t }
      }
    }
    threads*.join()
    if (errors) throw errors[0]
    return null
  }

  private Object waitUntil(Closure condition) {
    while (!condition()) {
      if (aborted) throw new PipelineInterrupted()
      Thread.sleep(50)
    }
    return null
  }
}
