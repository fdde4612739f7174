// What PipelineHarness's steps throw once the build is aborted (Jenkins'
// FlowInterruptedException).
class PipelineInterrupted extends RuntimeException {
  PipelineInterrupted() { super('the build was aborted') }
}
