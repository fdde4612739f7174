// What PipelineHarness's `error` and a failing `sh` throw (Jenkins'
// hudson.AbortException).
class StepFailed extends RuntimeException {
  StepFailed(String message) { super(message) }
}
