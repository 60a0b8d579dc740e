/**
 * How the API server reaches the processes of a pod on its node, for `pods/log`, `pods/exec`
 * and `pods/signal`. The server never talks to a runtime by itself: it resolves the pod and the
 * container, checks consent and admission, then asks the pod's node through this port.
 *
 * Two implementations: `fromRuntime` answers from a Runtime (kbox) directly — the single-host
 * `koder-fleet dev`, where the server shares a host and a box with its only agent — and the
 * daemon's proxy to a remote agent's endpoint. `routed` picks one per node.
 *
 * Containers are found by the labels the agent puts on them (`Runtime.Labels`): the pod's uid and
 * the container's name; the highest restart attempt is the current run, the one before it the
 * `previous` one, as the kubelet keeps one terminated container per container name.
 */
import { Chunk, Effect, Stream } from "effect"
import * as Status from "../model/Status.js"
import * as Runtime from "../runtime/Runtime.js"
import type * as StreamSession from "../runtime/StreamSession.js"
import * as ApiError from "./ApiError.js"
import type { ByteConnection } from "./Http.js"

/** One container of one pod on one node. */
export interface Target {
  readonly node: string
  readonly namespace: string
  readonly pod: string
  readonly uid: string
  readonly container: string
  /** The pod's IP (`status.podIP`), where a forwarded port is dialled. */
  readonly podIP?: string | undefined
}

/** `pods/log` options, as Kubernetes' PodLogOptions. */
export interface LogOptions {
  readonly follow: boolean
  readonly previous: boolean
  readonly timestamps: boolean
  readonly tailLines?: number | undefined
  readonly sinceSeconds?: number | undefined
  /** Stop after this many bytes. */
  readonly limitBytes?: number | undefined
}

/** A command to run in a container. */
export interface ExecOptions {
  readonly command: ReadonlyArray<string>
  readonly stdin?: string | undefined
  readonly timeoutSeconds?: number | undefined
}

/** What a command did. */
export interface ExecResult {
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
  readonly timedOut: boolean
}

/** The port. Failures are Statuses the API answers as they are. */
export interface NodeAccess {
  readonly logs: (target: Target, options: LogOptions) => Effect.Effect<Stream.Stream<Uint8Array>, ApiError.ApiError>
  readonly exec: (target: Target, options: ExecOptions) => Effect.Effect<ExecResult, ApiError.ApiError>
  readonly signal: (target: Target, signal: string) => Effect.Effect<void, ApiError.ApiError>
  /** A command with live streams (`kubectl exec`). */
  readonly execStream: (target: Target, request: StreamSession.ExecStreamRequest) => Effect.Effect<StreamSession.StreamSession, ApiError.ApiError>
  /** The container's main process (`kubectl attach`). */
  readonly attach: (target: Target, request: StreamSession.AttachRequest) => Effect.Effect<StreamSession.StreamSession, ApiError.ApiError>
  /** A connection to `port` of the pod, dialled from its node (`kubectl port-forward`). */
  readonly portForward: (target: Target, port: number) => Effect.Effect<ByteConnection, ApiError.ApiError>
  /** The processes of a running container and its resource sample (`pods/processmetrics`). */
  readonly processes: (target: Target) => Effect.Effect<ContainerProcesses, ApiError.ApiError>
}

/** A running container's processes, as its node read them. */
export interface ContainerProcesses {
  readonly processes: ReadonlyArray<Runtime.Process>
  /** Its cgroup's sample, when the runtime could take one. */
  readonly stats?: Runtime.Stats
}

/** How a node dials a port of one of its pods (the daemon's TCP; core has no sockets). */
export type Dial = (host: string, port: number) => Effect.Effect<ByteConnection, ApiError.ApiError>

/** No node is reachable (an API-only server): every call answers 503 saying so. */
export const none: NodeAccess = {
  logs: (t) => Effect.fail(unreachable(t.node, "this server has no connection to nodes")),
  exec: (t) => Effect.fail(unreachable(t.node, "this server has no connection to nodes")),
  signal: (t) => Effect.fail(unreachable(t.node, "this server has no connection to nodes")),
  execStream: (t) => Effect.fail(unreachable(t.node, "this server has no connection to nodes")),
  attach: (t) => Effect.fail(unreachable(t.node, "this server has no connection to nodes")),
  portForward: (t) => Effect.fail(unreachable(t.node, "this server has no connection to nodes")),
  processes: (t) => Effect.fail(unreachable(t.node, "this server has no connection to nodes"))
}

/** 503 naming the node. */
export const unreachable = (node: string, why: string): ApiError.ApiError =>
  ApiError.of(Status.serviceUnavailable(`cannot reach node ${JSON.stringify(node)}: ${why}`))

/** Per node: `local` for the nodes it names, `remote` for the rest. */
export const routed = (local: ReadonlyMap<string, NodeAccess>, remote: NodeAccess = none): NodeAccess => {
  const pick = (t: Target) => local.get(t.node) ?? remote
  return {
    logs: (t, o) => pick(t).logs(t, o),
    exec: (t, o) => pick(t).exec(t, o),
    signal: (t, s) => pick(t).signal(t, s),
    execStream: (t, r) => pick(t).execStream(t, r),
    attach: (t, r) => pick(t).attach(t, r),
    portForward: (t, p) => pick(t).portForward(t, p),
    processes: (t) => pick(t).processes(t)
  }
}

const attemptOf = (c: Runtime.Container): number => c.spec.attempt

/**
 * The current run and the previous one of a pod's container, from the containers the runtime
 * holds for that pod (pure).
 */
export const runsOf = (containers: ReadonlyArray<Runtime.Container>, uid: string, name: string): { readonly current?: Runtime.Container; readonly previous?: Runtime.Container } => {
  const mine = containers
    .filter((c) => c.spec.labels?.[Runtime.Labels.podUid] === uid && (c.spec.labels?.[Runtime.Labels.containerName] ?? c.spec.name) === name)
    .sort((a, b) => attemptOf(b) - attemptOf(a))
  return { ...(mine[0] === undefined ? {} : { current: mine[0] }), ...(mine[1] === undefined ? {} : { previous: mine[1] }) }
}

const badRequest = (message: string) => ApiError.of(Status.badRequest(message))

const fromRuntimeError = (node: string) => (e: Runtime.RuntimeError): ApiError.ApiError => {
  switch (e._tag) {
    case "RuntimeNotFound":
      return ApiError.of(Status.notFound({ group: "", resource: "containers" }, e.id))
    case "RuntimeInvalid":
    case "RuntimeUnsupported":
      return badRequest(e.message)
    default:
      return unreachable(node, e.message)
  }
}

const encoder = new TextEncoder()

/** Lines as the API sends them: `<RFC 3339 time> <line>` with timestamps, else the line. */
const render = (timestamps: boolean) => (chunk: Runtime.LogChunk): Uint8Array =>
  encoder.encode(timestamps && chunk.timestamp !== undefined ? `${chunk.timestamp} ${chunk.line}` : chunk.line)

/** Stop a byte stream after `limit` bytes (the last chunk cut short). */
const limitBytes = (stream: Stream.Stream<Uint8Array>, limit: number | undefined): Stream.Stream<Uint8Array> =>
  limit === undefined
    ? stream
    : stream.pipe(
        Stream.mapAccum(0, (sent, bytes) => {
          const room = Math.max(0, limit - sent)
          return [sent + bytes.length, bytes.length <= room ? bytes : bytes.subarray(0, room)] as const
        }),
        Stream.takeUntil((bytes) => bytes.length === 0),
        Stream.filter((bytes) => bytes.length > 0)
      )

/**
 * Answers for the node `node` from `runtime` (the box the node's agent runs its pods in); ports
 * are forwarded with `dial` (none: port-forward answers 503).
 */
export const fromRuntime = (runtime: Runtime.RuntimeService, node: string, dial?: Dial): NodeAccess => {
  const resolve = (t: Target, previous: boolean) =>
    Effect.gen(function* () {
      const containers = yield* runtime.containers.list({ labels: { [Runtime.Labels.podUid]: t.uid } }).pipe(Effect.mapError(fromRuntimeError(node)))
      const runs = runsOf(containers, t.uid, t.container)
      if (previous) {
        if (runs.previous === undefined) return yield* Effect.fail(badRequest(`previous terminated container ${JSON.stringify(t.container)} in pod ${JSON.stringify(t.pod)} not found`))
        return runs.previous
      }
      if (runs.current === undefined) return yield* Effect.fail(badRequest(`container ${JSON.stringify(t.container)} in pod ${JSON.stringify(t.pod)} is waiting to start: ContainerCreating`))
      return runs.current
    })
  const running = (t: Target) =>
    Effect.flatMap(resolve(t, false), (c) =>
      c.status.state === "running"
        ? Effect.succeed(c)
        : Effect.fail(badRequest(`container ${JSON.stringify(t.container)} in pod ${JSON.stringify(t.pod)} is not running`))
    )
  return {
    logs: (t, o) =>
      Effect.map(resolve(t, o.previous), (c) =>
        limitBytes(
          runtime.containers
            .logs(c.id, {
              follow: o.follow && !o.previous,
              timestamps: o.timestamps,
              ...(o.tailLines === undefined ? {} : { tailLines: o.tailLines }),
              ...(o.sinceSeconds === undefined ? {} : { sinceSeconds: o.sinceSeconds })
            })
            .pipe(
              Stream.map(render(o.timestamps)),
              // A stream that breaks (the box went away) ends the response rather than failing it
              // half-way: the client has had a 200 and its lines.
              Stream.catchAll(() => Stream.empty)
            ),
          o.limitBytes
        )
      ),
    exec: (t, o) =>
      Effect.flatMap(running(t), (c) =>
        runtime.containers
          .exec(c.id, {
            command: o.command,
            ...(o.stdin === undefined ? {} : { stdin: o.stdin }),
            ...(o.timeoutSeconds === undefined ? {} : { timeoutMs: o.timeoutSeconds * 1000 })
          })
          .pipe(Effect.mapError(fromRuntimeError(node)))
      ),
    signal: (t, s) => Effect.flatMap(running(t), (c) => runtime.containers.signal(c.id, s).pipe(Effect.mapError(fromRuntimeError(node)))),
    execStream: (t, r) => Effect.flatMap(running(t), (c) => runtime.containers.execStream(c.id, r).pipe(Effect.mapError(fromRuntimeError(node)))),
    attach: (t, r) => Effect.flatMap(running(t), (c) => runtime.containers.attach(c.id, r).pipe(Effect.mapError(fromRuntimeError(node)))),
    portForward: (t, port) => {
      if (dial === undefined) return Effect.fail(unreachable(node, "this node does not forward ports"))
      if (t.podIP === undefined || t.podIP === "") return Effect.fail(badRequest(`pod ${JSON.stringify(t.pod)} has no IP yet`))
      return dial(t.podIP, port)
    },
    processes: (t) =>
      Effect.flatMap(running(t), (c) =>
        Effect.all([runtime.containers.processes(c.id), Effect.option(runtime.containers.stats(c.id))]).pipe(
          Effect.map(([processes, stats]): ContainerProcesses => ({ processes, ...(stats._tag === "Some" ? { stats: stats.value } : {}) })),
          Effect.mapError(fromRuntimeError(node))
        )
      )
  }
}

/** Every byte of a log stream as text (tests, small logs). */
export const collect = (stream: Stream.Stream<Uint8Array>): Effect.Effect<string> =>
  Effect.map(Stream.runCollect(stream), (chunks) => {
    const decoder = new TextDecoder()
    return Chunk.toReadonlyArray(chunks).map((c) => decoder.decode(c, { stream: true })).join("") + decoder.decode()
  })
