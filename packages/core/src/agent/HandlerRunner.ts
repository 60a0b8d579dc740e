/**
 * Runs a container's handler (a probe, or a postStart/preStop hook): `exec` in the container,
 * `httpGet` and `tcpSocket` (and `grpc`, as a TCP check) through the Prober at the pod's IP and
 * resolved port, or `sleep`. Never fails: a handler that cannot run is a failure outcome.
 */
import { Duration, Effect } from "effect"
import type * as Pod from "../model/Pod.js"
import type * as Runtime from "../runtime/Runtime.js"
import * as HostPorts from "./HostPorts.js"
import type * as Prober from "./Prober.js"

/** A probe or lifecycle handler. */
export type Handler = typeof Pod.LifecycleHandler.Type & { readonly grpc?: { readonly port: number } }

/** Where a pod's handlers reach it: its IP and the host ports its containers got. */
export interface Target {
  readonly host: string
  readonly hostPorts: ReadonlyArray<HostPorts.Assignment>
}

const success: Prober.Outcome = { result: "success", message: "" }
const failure = (message: string): Prober.Outcome => ({ result: "failure", message })

/** Run `handler` of container `containerName` (runtime id `containerId`) within `timeoutMs`. */
export const run = (
  runtime: Runtime.RuntimeService,
  prober: Prober.ProberService,
  pod: Pod.Pod,
  target: Target,
  containerName: string,
  containerId: string,
  handler: Handler,
  timeoutMs: number
): Effect.Effect<Prober.Outcome> =>
  Effect.gen(function* () {
    const port = (p: number | string) => HostPorts.resolve(pod, target.hostPorts, containerName, p)
    if (handler.exec !== undefined) {
      const r = yield* Effect.either(runtime.containers.exec(containerId, { command: handler.exec.command ?? [], timeoutMs }))
      if (r._tag === "Left") return failure(r.left.message)
      if (r.right.timedOut) return failure(`command timed out after ${timeoutMs} ms`)
      return r.right.exitCode === 0 ? success : failure(`command exited with ${r.right.exitCode}: ${(r.right.stdout + r.right.stderr).slice(0, 200)}`)
    }
    if (handler.httpGet !== undefined) {
      const p = port(handler.httpGet.port)
      if (p === undefined) return failure(`unknown port ${String(handler.httpGet.port)}`)
      return yield* prober.probe(
        { _tag: "HttpGet", scheme: handler.httpGet.scheme ?? "HTTP", host: handler.httpGet.host ?? target.host, port: p, path: handler.httpGet.path ?? "/", headers: handler.httpGet.httpHeaders ?? [] },
        timeoutMs
      )
    }
    if (handler.tcpSocket !== undefined || handler.grpc !== undefined) {
      const p = handler.tcpSocket !== undefined ? port(handler.tcpSocket.port) : port(handler.grpc!.port)
      if (p === undefined) return failure("unknown port")
      return yield* prober.probe({ _tag: "TcpSocket", host: handler.tcpSocket?.host ?? target.host, port: p }, timeoutMs)
    }
    if (handler.sleep !== undefined) {
      yield* Effect.sleep(Duration.millis(Math.min(timeoutMs, handler.sleep.seconds * 1000)))
      return success
    }
    return failure("missing probe handler")
  })
