import org.hwfarm.Hwfarm

// hwfarmStatus(name: 'hw/cortexm-zephyr', state: 'pending'|'success'|'failure'|'error',
//              description: '...', url: '...')
//
// An advisory commit status: publishChecks (checks-api plugin) when
// installed, else githubNotify, else a message that it was skipped.
// Whether it blocks a merge is the repository's branch protection's call
// (jenkins/README.md): leave it out of the required checks. hwfarmRun posts
// these itself when given status:. Returns the step used, or 'none'.
def call(Map args = [:]) {
  if (!args.name || !(args.state in ['pending', 'success', 'failure', 'error']))
    error('hwfarmStatus: give name: and state: pending, success, failure or error')
  return Hwfarm.status(this, args.name, args.state, args.description ?: '',
                       args.url ?: (env.BUILD_URL ?: null))
}
