/**
 * The containers of the memory runtime: the container table's calls (create with its duplicate
 * check, start, stop, signal, exec, remove, list, inspect, NetworkPolicy), each recorded for
 * `Control.calls`; the process lifecycle is `memoryProcess.ts`, logs and stats are beside it.
 */
import { Clock, Deferred, Effect, PubSub } from "effect"
import * as Runtime from "../Runtime.js"
import { type Line, type Node, entryOf, iso, notRunning, record } from "./memoryNode.js"
import { logs } from "./memoryLogs.js"
import * as Process from "./memoryProcess.js"
import { signalName } from "./memorySignals.js"
import { processes, stats } from "./memoryStats.js"
import { attach, execStream } from "./memoryStreams.js"

/** The existing container with this spec's (sandbox, name, attempt), if any. */
const sameAttempt = (node: Node, spec: Runtime.ContainerSpec): Runtime.Container | undefined => {
  for (const e of node.entries.values()) {
    const s = e.container.spec
    if (s.sandboxId === spec.sandboxId && s.name === spec.name && s.attempt === spec.attempt) return e.container
  }
  return undefined
}

/** `Containers.create`: a new row in the table, programmed by the node's behavior function. */
const create = (
  node: Node,
  spec: Runtime.ContainerSpec
): Effect.Effect<string, Runtime.NotFound | Runtime.AlreadyExists | Runtime.Invalid> =>
  Effect.gen(function* () {
    if (!node.sandboxes.has(spec.sandboxId))
      return yield* new Runtime.NotFound({
        kind: "sandbox",
        id: spec.sandboxId,
        message: `sandbox ${spec.sandboxId} not found`
      })
    if (spec.command.length === 0 && spec.image === undefined)
      return yield* new Runtime.Invalid({ message: "command: required without an image" })
    const existing = sameAttempt(node, spec)
    if (existing !== undefined)
      return yield* new Runtime.AlreadyExists({
        kind: "container",
        id: existing.id,
        message: `container ${spec.name} attempt ${spec.attempt} already exists as ${existing.id}`
      })
    const now = yield* Clock.currentTimeMillis
    const id = `c-${node.nextId++}`
    node.entries.set(id, {
      container: { id, spec, status: { state: "created" }, createdAt: iso(now) },
      behavior: node.behaviorOf(spec),
      lines: [],
      feed: yield* PubSub.unbounded<Line | null>(),
      exited: yield* Deferred.make<void>(),
      pid: node.nextPid++
    })
    record(node, "container.create", id, `${spec.name}#${spec.attempt}`)
    return id
  })

/** `Containers.start`: only a created container starts. */
const start = (node: Node, id: string): Effect.Effect<void, Runtime.NotFound | Runtime.Invalid> =>
  Effect.gen(function* () {
    const e = yield* entryOf(node, id)
    if (e.container.status.state !== "created")
      return yield* new Runtime.Invalid({ message: `container ${id} is ${e.container.status.state}, not created` })
    record(node, "container.start", id)
    yield* Process.start(node, e)
  })

/** `Containers.stop`: idempotent; returns the final status. */
const stop = (
  node: Node,
  id: string,
  gracePeriodMs: number
): Effect.Effect<Runtime.ContainerStatus, Runtime.NotFound> =>
  Effect.gen(function* () {
    const e = yield* entryOf(node, id)
    record(node, "container.stop", id, String(gracePeriodMs))
    yield* Process.stop(node, e, gracePeriodMs)
    return e.container.status
  })

/** `Containers.signal`: a known signal to a running container. */
const signal = (node: Node, id: string, requested: string): Effect.Effect<void, Runtime.NotFound | Runtime.Invalid> =>
  Effect.gen(function* () {
    const e = yield* entryOf(node, id)
    const name = signalName(requested)
    if (name === undefined) return yield* new Runtime.Invalid({ message: `unknown signal ${requested}` })
    if (e.container.status.state !== "running") return yield* notRunning(id)
    record(node, "container.signal", id, name)
    yield* Process.deliver(node, e, name)
  })

/** `Containers.exec`: the behavior's answer (exit 0, no output by default) in a running container. */
const exec = (
  node: Node,
  id: string,
  request: Runtime.ExecRequest
): Effect.Effect<Runtime.ExecResult, Runtime.NotFound | Runtime.Invalid> =>
  Effect.gen(function* () {
    const e = yield* entryOf(node, id)
    if (e.container.status.state !== "running") return yield* notRunning(id)
    record(node, "container.exec", id, request.command.join(" "))
    return e.behavior.exec?.(request, e.container) ?? { exitCode: 0, stdout: "", stderr: "", timedOut: false }
  })

/** `Containers.remove`: kill and drop the row; a missing container is fine. */
const remove = (node: Node, id: string): Effect.Effect<void> =>
  Effect.gen(function* () {
    const e = node.entries.get(id)
    if (e === undefined) return
    record(node, "container.remove", id)
    yield* Process.kill(e)
    node.entries.delete(id)
  })

/** `Containers.applyNetworkPolicy`: remembered per sandbox, only with `capabilities.networkPolicy`. */
const applyNetworkPolicy = (
  node: Node,
  id: string,
  rules: Runtime.NetworkPolicyRules
): Effect.Effect<Runtime.NetworkPolicyApplied, Runtime.NotFound | Runtime.Unsupported> =>
  Effect.gen(function* () {
    const e = yield* entryOf(node, id)
    if (!node.info.capabilities.networkPolicy)
      return yield* new Runtime.Unsupported({ message: `runtime ${node.info.name} does not enforce NetworkPolicy` })
    record(node, "container.networkPolicy", id)
    node.policies.set(e.container.spec.sandboxId, rules)
    return { rules: rules.ingress.allow.length + rules.egress.allow.length }
  })

/** The `Runtime.Containers` of a node. */
export const containers = (node: Node): Runtime.Containers => ({
  create: (spec) => create(node, spec),
  start: (id) => start(node, id),
  stop: (id, { gracePeriodMs }) => stop(node, id, gracePeriodMs),
  signal: (id, name) => signal(node, id, name),
  exec: (id, request) => exec(node, id, request),
  execStream: (id, request) => execStream(node, id, request),
  attach: (id) => attach(node, id),
  remove: (id) => remove(node, id),
  list: (filter) =>
    Effect.sync(() =>
      [...node.entries.values()].map((e) => e.container).filter((c) => Runtime.matchesContainer(c, filter))
    ),
  inspect: (id) => Effect.map(entryOf(node, id), (e) => e.container),
  logs: (id, opts) => logs(node, id, opts),
  stats: (id) => stats(node, id),
  processes: (id) => processes(node, id),
  applyNetworkPolicy: (id, rules) => applyNetworkPolicy(node, id, rules)
})
