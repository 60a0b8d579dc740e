/**
 * The life of one simulated process: what its behavior does at start (output, a programmed exit
 * or a start error), how it takes a signal and a stop with a grace period, and the one place it
 * becomes exited. Timers run in the node's FiberSet, on the Effect `Clock`.
 */
import { Clock, Deferred, Effect, FiberSet, PubSub } from "effect"
import * as Runtime from "../Runtime.js"
import { type Entry, type Line, type Node, iso } from "./memoryNode.js"
import { signalNumbers, stopSignalOf } from "./memorySignals.js"

/** How a container's exit is described beyond its code. */
export interface ExitDetail {
  readonly reason?: Runtime.ExitReason
  readonly signal?: string
  readonly message?: string
}

/** Append a line to the container's log and publish it to followers. */
export const write = (e: Entry, stream: "stdout" | "stderr", text: string): Effect.Effect<void> =>
  Effect.gen(function* () {
    const at = yield* Clock.currentTimeMillis
    const line: Line = { seq: e.lines.length, at, stream, line: text.endsWith("\n") ? text : `${text}\n` }
    e.lines.push(line)
    yield* PubSub.publish(e.feed, line)
  })

/** The one place a running (or created) container becomes exited. */
export const finish = (e: Entry, exitCode: number, extra: ExitDetail = {}): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (e.container.status.state === "exited") return
    const now = yield* Clock.currentTimeMillis
    const { pid: _pid, ...rest } = e.container.status
    e.container = {
      ...e.container,
      status: {
        ...rest,
        state: "exited",
        exitCode,
        reason: extra.reason ?? Runtime.reasonOfExit(exitCode),
        finishedAt: iso(now),
        ...(extra.signal === undefined ? {} : { signal: extra.signal }),
        ...(extra.message === undefined ? {} : { message: extra.message })
      }
    }
    yield* PubSub.publish(e.feed, null)
    yield* Deferred.succeed(e.exited, undefined)
  })

/** End the container with SIGKILL (exit 137). */
export const kill = (e: Entry): Effect.Effect<void> => finish(e, 137, { signal: "SIGKILL" })

/** Deliver a terminating signal as the behavior says; SIGKILL always ends the container. */
export const deliver = (node: Node, e: Entry, signal: string): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (e.container.status.state !== "running") return
    if (signal === "SIGKILL") return yield* kill(e)
    const terminating = signal === "SIGTERM" || signal === "SIGINT" || signal === stopSignalOf(e.container.spec)
    if (!terminating || e.behavior.ignoreStopSignal === true) return
    const code = e.behavior.stopExitCode ?? 128 + (signalNumbers[signal] ?? 15)
    const end = finish(e, code, code >= 128 ? { signal } : {})
    const shutdown = e.behavior.shutdownMs ?? 0
    if (shutdown <= 0) yield* end
    else yield* FiberSet.run(node.fibers, Effect.delay(end, shutdown))
  })

/** Run a created container: mark it running, then do what its behavior programs at start. */
export const start = (node: Node, e: Entry): Effect.Effect<void> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    e.container = { ...e.container, status: { state: "running", pid: e.pid, startedAt: iso(now) } }
    const b = e.behavior
    if (b.startError !== undefined) return yield* finish(e, 128, { reason: "StartError", message: b.startError })
    for (const o of b.output ?? []) {
      if (typeof o === "string") yield* write(e, "stdout", o)
      else yield* write(e, o.stream, o.line)
    }
    if (b.exitAfterMs !== undefined) {
      const code = b.exitCode ?? 0
      const end = finish(e, code, b.reason === undefined ? {} : { reason: b.reason })
      yield* FiberSet.run(node.fibers, Effect.delay(end, b.exitAfterMs))
    }
  })

/** Stop a container: the stop signal, then SIGKILL when the grace period ends (at once if 0). */
export const stop = (node: Node, e: Entry, gracePeriodMs: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    const state = e.container.status.state
    // A created container never ran: stopping it just closes its life, like the CRI.
    if (state === "created") yield* finish(e, 0, { reason: "Completed" })
    if (state !== "running") return
    if (gracePeriodMs <= 0) return yield* kill(e)
    yield* deliver(node, e, stopSignalOf(e.container.spec))
    const exited = yield* Deferred.await(e.exited).pipe(Effect.timeout(gracePeriodMs), Effect.option)
    if (exited._tag === "None") yield* kill(e)
  })
