/** The Runtime contract against the memory runtime, which plays the contract's workloads from their label. */
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import type * as Runtime from "../../src/runtime/Runtime.js"
import { RuntimeContract } from "../../src/testing/index.js"

/** What each contract workload does, simulated. */
const behavior = (spec: Runtime.ContainerSpec): MemoryRuntime.Behavior => {
  const exec = (request: Runtime.ExecRequest) =>
    request.command.join(" ") === RuntimeContract.execCommand.join(" ")
      ? { exitCode: 4, stdout: "hi\n", stderr: "", timedOut: false }
      : request.command.join(" ") === RuntimeContract.stdinCommand.join(" ")
        ? { exitCode: 5, stdout: request.stdin ?? "", stderr: "err\n", timedOut: false }
        : { exitCode: 127, stdout: "", stderr: "not simulated\n", timedOut: false }
  switch (spec.labels?.[RuntimeContract.workloadLabel]) {
    case "exit3":
      return { output: ["out", { stream: "stderr", line: "err" }], exitAfterMs: 20, exitCode: 3, exec }
    case "server":
      return { output: ["ready"], stopExitCode: 0, exec }
    case "stubborn":
      return { output: ["ready"], ignoreStopSignal: true, exec }
    case "missing":
      return { startError: `exec: ${RuntimeContract.missingCommand}: not found` }
    default:
      return { exec }
  }
}

RuntimeContract.suite("memory", MemoryRuntime.layer({ behavior }))
