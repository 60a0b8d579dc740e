/**
 * An in-memory Runtime for the agent's unit tests: containers are simulated, not run, but go
 * through the same lifecycle a real runtime shows (created → running → exited, stop signal then
 * SIGKILL after the grace period, exec answers, logs with follow), on the Effect `Clock`, so
 * `TestClock` drives time. What each container does is programmed per spec by a `Behavior`
 * function the test gives; `Control` lets the test act from "outside the node" (a crash, an
 * OOM kill, output) and read what the agent asked for.
 */
import { Clock, Context, Deferred, Effect, FiberSet, Layer, PubSub, Stream } from "effect"
import * as Runtime from "./Runtime.js"

/** What one simulated container does. Every field is optional: the default runs until stopped. */
export interface Behavior {
  /** Exit by itself this long after start; absent: run until stopped or killed. */
  readonly exitAfterMs?: number
  /** Exit code of that exit (default 0). */
  readonly exitCode?: number
  /** Reason of that exit (default from the code: `Completed` or `Error`). */
  readonly reason?: Runtime.ExitReason
  /** Fail to start: `start` succeeds but the container exits at once with `StartError`. */
  readonly startError?: string
  /** Lines written at start (to stdout unless given as chunks). */
  readonly output?: ReadonlyArray<string | { readonly stream: "stdout" | "stderr"; readonly line: string }>
  /** Ignore SIGTERM/SIGINT (and the stop signal): only SIGKILL at the end of a grace period ends it. */
  readonly ignoreStopSignal?: boolean
  /** Time the process takes to exit after the stop signal (default 0). */
  readonly shutdownMs?: number
  /** Exit code when the stop signal ends it (default 128 + the signal number, e.g. 143). */
  readonly stopExitCode?: number
  /** Answer of an exec (default exit 0, no output). */
  readonly exec?: (request: Runtime.ExecRequest, container: Runtime.Container) => Runtime.ExecResult
  /** Stats of the running container (default zeros). */
  readonly stats?: (container: Runtime.Container) => Pick<Runtime.Stats, "cpu" | "memory">
}

/** One call the runtime received, for tests to assert on (e.g. no duplicate create). */
export interface Call {
  readonly op:
    | "sandbox.create"
    | "sandbox.remove"
    | "container.create"
    | "container.start"
    | "container.stop"
    | "container.signal"
    | "container.exec"
    | "container.remove"
    | "container.networkPolicy"
  readonly id: string
  readonly detail?: string
}

/** Options of the memory runtime. */
export interface Options {
  /** Programs each container from its spec (called at create). */
  readonly behavior?: (spec: Runtime.ContainerSpec) => Behavior
  /** Overrides of the reported info (capabilities). */
  readonly info?: Partial<Runtime.Info>
}

/** The test's hands on the simulated node. */
export interface ControlService {
  /** Make a running container exit now, as a crash or an outside kill would. */
  readonly exit: (
    id: string,
    exitCode: number,
    options?: { readonly reason?: Runtime.ExitReason; readonly signal?: string }
  ) => Effect.Effect<void, Runtime.NotFound>
  /** Append a line of output to a container's log. */
  readonly write: (id: string, line: string, stream?: "stdout" | "stderr") => Effect.Effect<void, Runtime.NotFound>
  /** Replace the behavior function for containers created from now on. */
  readonly setBehavior: (behavior: (spec: Runtime.ContainerSpec) => Behavior) => Effect.Effect<void>
  /** Every mutating call so far, in order. */
  readonly calls: Effect.Effect<ReadonlyArray<Call>>
  /** The NetworkPolicy rules each sandbox was last given (only with `capabilities.networkPolicy`). */
  readonly networkPolicies: Effect.Effect<ReadonlyMap<string, Runtime.NetworkPolicyRules>>
}

/** Test control of a `MemoryRuntime`. */
export class Control extends Context.Tag("@koder/fleet-core/MemoryRuntime/Control")<Control, ControlService>() {}

/** What the memory runtime reports by default: a plain process runtime without isolation. */
export const defaultInfo: Runtime.Info = {
  name: "memory",
  version: "0.1.0",
  driver: "memory",
  capabilities: {
    isolation: "none",
    namespaces: [],
    cgroups: "none",
    limits: { cpu: false, memory: false, pids: false },
    bindMounts: false,
    runAsUser: false,
    podNetwork: false,
    checkpoint: false,
    networkPolicy: false,
    drivers: ["memory"]
  }
}

const signalNumbers: Readonly<Record<string, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGUSR2: 12,
  SIGTERM: 15
}

/** Normalise `"TERM"`, `"SIGTERM"` or `"15"` to `SIGTERM`; `undefined` for unknown names. */
export const signalName = (signal: string): string | undefined => {
  if (/^\d+$/.test(signal)) {
    const n = Number(signal)
    return Object.keys(signalNumbers).find((k) => signalNumbers[k] === n)
  }
  const name = signal.toUpperCase().startsWith("SIG") ? signal.toUpperCase() : `SIG${signal.toUpperCase()}`
  return name in signalNumbers ? name : undefined
}

interface Line {
  readonly seq: number
  readonly at: number
  readonly stream: "stdout" | "stderr"
  readonly line: string
}

interface Entry {
  container: Runtime.Container
  readonly behavior: Behavior
  readonly lines: Array<Line>
  /** Publishes new lines, and `null` once the container exited (ends follow streams). */
  readonly feed: PubSub.PubSub<Line | null>
  readonly exited: Deferred.Deferred<void>
  readonly pid: number
}

const iso = (ms: number) => new Date(ms).toISOString()

/** Build a memory runtime in the current scope (its timers stop when the scope closes). */
export const make = (options: Options = {}) =>
  Effect.gen(function* () {
    const fibers = yield* FiberSet.make()
    const sandboxes = new Map<string, Runtime.Sandbox>()
    const entries = new Map<string, Entry>()
    const images = new Map<string, Runtime.Image>()
    const policies = new Map<string, Runtime.NetworkPolicyRules>()
    const calls: Array<Call> = []
    let behaviorOf = options.behavior ?? (() => ({}))
    let nextId = 1
    let nextPid = 1000
    const info: Runtime.Info = { ...defaultInfo, ...options.info }

    const record = (op: Call["op"], id: string, detail?: string) =>
      calls.push(detail === undefined ? { op, id } : { op, id, detail })

    const entryOf = (id: string) =>
      Effect.suspend(() => {
        const e = entries.get(id)
        return e
          ? Effect.succeed(e)
          : Effect.fail(new Runtime.NotFound({ kind: "container", id, message: `container ${id} not found` }))
      })

    const write = (e: Entry, stream: "stdout" | "stderr", text: string) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        const line: Line = { seq: e.lines.length, at, stream, line: text.endsWith("\n") ? text : `${text}\n` }
        e.lines.push(line)
        yield* PubSub.publish(e.feed, line)
      })

    /** The one place a running (or created) container becomes exited. */
    const finish = (
      e: Entry,
      exitCode: number,
      extra: { readonly reason?: Runtime.ExitReason; readonly signal?: string; readonly message?: string } = {}
    ) =>
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

    const kill = (e: Entry) => finish(e, 137, { signal: "SIGKILL" })

    /** Deliver a terminating signal as the behavior says; SIGKILL always ends the container. */
    const deliver = (e: Entry, signal: string) =>
      Effect.gen(function* () {
        if (e.container.status.state !== "running") return
        if (signal === "SIGKILL") return yield* kill(e)
        const stopSignal = signalName(e.container.spec.stopSignal ?? "SIGTERM") ?? "SIGTERM"
        const terminating = signal === "SIGTERM" || signal === "SIGINT" || signal === stopSignal
        if (!terminating || e.behavior.ignoreStopSignal === true) return
        const code = e.behavior.stopExitCode ?? 128 + (signalNumbers[signal] ?? 15)
        const end = finish(e, code, code >= 128 ? { signal } : {})
        const shutdown = e.behavior.shutdownMs ?? 0
        if (shutdown <= 0) yield* end
        else yield* FiberSet.run(fibers, Effect.delay(end, shutdown))
      })

    const sandboxesApi: Runtime.Sandboxes = {
      create: (spec) =>
        Effect.gen(function* () {
          for (const s of sandboxes.values())
            if (s.spec.podUid === spec.podUid)
              return yield* new Runtime.AlreadyExists({
                kind: "sandbox",
                id: s.id,
                message: `pod ${spec.podUid} already has sandbox ${s.id}`
              })
          const now = yield* Clock.currentTimeMillis
          const sandbox: Runtime.Sandbox = { id: `sb-${nextId++}`, spec, state: "ready", createdAt: iso(now) }
          sandboxes.set(sandbox.id, sandbox)
          record("sandbox.create", sandbox.id, spec.podUid)
          return sandbox
        }),
      get: (id) =>
        Effect.suspend(() => {
          const s = sandboxes.get(id)
          return s
            ? Effect.succeed(s)
            : Effect.fail(new Runtime.NotFound({ kind: "sandbox", id, message: `sandbox ${id} not found` }))
        }),
      list: (filter) => Effect.sync(() => [...sandboxes.values()].filter((s) => Runtime.matchesSandbox(s, filter))),
      remove: (id) =>
        Effect.gen(function* () {
          if (!sandboxes.has(id)) return
          record("sandbox.remove", id)
          for (const e of [...entries.values()])
            if (e.container.spec.sandboxId === id) {
              yield* kill(e)
              entries.delete(e.container.id)
            }
          sandboxes.delete(id)
          policies.delete(id)
        })
    }

    const containersApi: Runtime.Containers = {
      create: (spec) =>
        Effect.gen(function* () {
          if (!sandboxes.has(spec.sandboxId))
            return yield* new Runtime.NotFound({
              kind: "sandbox",
              id: spec.sandboxId,
              message: `sandbox ${spec.sandboxId} not found`
            })
          if (spec.command.length === 0 && spec.image === undefined)
            return yield* new Runtime.Invalid({ message: "command: required without an image" })
          for (const e of entries.values()) {
            const s = e.container.spec
            if (s.sandboxId === spec.sandboxId && s.name === spec.name && s.attempt === spec.attempt)
              return yield* new Runtime.AlreadyExists({
                kind: "container",
                id: e.container.id,
                message: `container ${spec.name} attempt ${spec.attempt} already exists as ${e.container.id}`
              })
          }
          const now = yield* Clock.currentTimeMillis
          const id = `c-${nextId++}`
          entries.set(id, {
            container: { id, spec, status: { state: "created" }, createdAt: iso(now) },
            behavior: behaviorOf(spec),
            lines: [],
            feed: yield* PubSub.unbounded<Line | null>(),
            exited: yield* Deferred.make<void>(),
            pid: nextPid++
          })
          record("container.create", id, `${spec.name}#${spec.attempt}`)
          return id
        }),
      start: (id) =>
        Effect.gen(function* () {
          const e = yield* entryOf(id)
          if (e.container.status.state !== "created")
            return yield* new Runtime.Invalid({ message: `container ${id} is ${e.container.status.state}, not created` })
          record("container.start", id)
          const now = yield* Clock.currentTimeMillis
          e.container = { ...e.container, status: { state: "running", pid: e.pid, startedAt: iso(now) } }
          const b = e.behavior
          if (b.startError !== undefined)
            return yield* finish(e, 128, { reason: "StartError", message: b.startError })
          for (const o of b.output ?? []) {
            if (typeof o === "string") yield* write(e, "stdout", o)
            else yield* write(e, o.stream, o.line)
          }
          if (b.exitAfterMs !== undefined) {
            const code = b.exitCode ?? 0
            const end = finish(e, code, b.reason === undefined ? {} : { reason: b.reason })
            yield* FiberSet.run(fibers, Effect.delay(end, b.exitAfterMs))
          }
        }),
      stop: (id, { gracePeriodMs }) =>
        Effect.gen(function* () {
          const e = yield* entryOf(id)
          record("container.stop", id, String(gracePeriodMs))
          const state = e.container.status.state
          // A created container never ran: stopping it just closes its life, like the CRI.
          if (state === "created") yield* finish(e, 0, { reason: "Completed" })
          if (state === "running") {
            if (gracePeriodMs <= 0) yield* kill(e)
            else {
              yield* deliver(e, signalName(e.container.spec.stopSignal ?? "SIGTERM") ?? "SIGTERM")
              const exited = yield* Deferred.await(e.exited).pipe(Effect.timeout(gracePeriodMs), Effect.option)
              if (exited._tag === "None") yield* kill(e)
            }
          }
          return e.container.status
        }),
      signal: (id, signal) =>
        Effect.gen(function* () {
          const e = yield* entryOf(id)
          const name = signalName(signal)
          if (name === undefined) return yield* new Runtime.Invalid({ message: `unknown signal ${signal}` })
          if (e.container.status.state !== "running")
            return yield* new Runtime.Invalid({ message: `container ${id} is not running` })
          record("container.signal", id, name)
          yield* deliver(e, name)
        }),
      exec: (id, request) =>
        Effect.gen(function* () {
          const e = yield* entryOf(id)
          if (e.container.status.state !== "running")
            return yield* new Runtime.Invalid({ message: `container ${id} is not running` })
          record("container.exec", id, request.command.join(" "))
          return e.behavior.exec?.(request, e.container) ?? { exitCode: 0, stdout: "", stderr: "", timedOut: false }
        }),
      remove: (id) =>
        Effect.gen(function* () {
          const e = entries.get(id)
          if (e === undefined) return
          record("container.remove", id)
          yield* kill(e)
          entries.delete(id)
        }),
      list: (filter) =>
        Effect.sync(() => [...entries.values()].map((e) => e.container).filter((c) => Runtime.matchesContainer(c, filter))),
      inspect: (id) => Effect.map(entryOf(id), (e) => e.container),
      logs: (id, opts = {}) =>
        Stream.unwrapScoped(
          Effect.gen(function* () {
            const e = yield* entryOf(id)
            // Subscribe before the snapshot so no line falls between them; `seq` drops repeats.
            const sub = yield* PubSub.subscribe(e.feed)
            const snapshot = e.lines.slice()
            const now = yield* Clock.currentTimeMillis
            const since = opts.sinceSeconds === undefined ? -Infinity : now - opts.sinceSeconds * 1000
            let head = snapshot.filter((l) => l.at >= since)
            if (opts.tailLines !== undefined) head = opts.tailLines <= 0 ? [] : head.slice(-opts.tailLines)
            const toChunk = (l: Line): Runtime.LogChunk =>
              opts.timestamps === true
                ? { stream: l.stream, line: l.line, timestamp: iso(l.at) }
                : { stream: l.stream, line: l.line }
            const first = Stream.fromIterable(head.map(toChunk))
            if (opts.follow !== true || e.container.status.state === "exited") return first
            const live = Stream.fromQueue(sub).pipe(
              Stream.takeWhile((l): l is Line => l !== null),
              Stream.filter((l) => l.seq >= snapshot.length),
              Stream.map(toChunk)
            )
            return Stream.concat(first, live)
          })
        ),
      stats: (id) =>
        Effect.gen(function* () {
          const e = yield* entryOf(id)
          if (e.container.status.state !== "running")
            return yield* new Runtime.Invalid({ message: `container ${id} is not running` })
          const now = yield* Clock.currentTimeMillis
          const sample = e.behavior.stats?.(e.container) ?? {
            cpu: { usageCoreNanoSeconds: 0, usageNanoCores: 0 },
            memory: { workingSetBytes: 0, rssBytes: 0 }
          }
          return { timestamp: iso(now), ...sample, pids: 1 }
        }),
      processes: (id) =>
        Effect.map(entryOf(id), (e) =>
          e.container.status.state === "running"
            ? [
                {
                  pid: e.pid,
                  ppid: 1,
                  command: e.container.spec.command[0] ?? "",
                  args: [...e.container.spec.command, ...(e.container.spec.args ?? [])],
                  rssBytes: 0,
                  state: "S"
                }
              ]
            : []
        ),
      applyNetworkPolicy: (id, rules) =>
        Effect.gen(function* () {
          const e = yield* entryOf(id)
          if (!info.capabilities.networkPolicy)
            return yield* new Runtime.Unsupported({ message: `runtime ${info.name} does not enforce NetworkPolicy` })
          record("container.networkPolicy", id)
          policies.set(e.container.spec.sandboxId, rules)
          return { rules: rules.ingress.allow.length + rules.egress.allow.length }
        })
    }

    const imagesApi: Runtime.Images = {
      import: (request) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          // A stand-in digest: stable per path, shaped like the real one.
          let h = 0
          for (const ch of request.path) h = (Math.imul(h, 31) + ch.charCodeAt(0)) | 0
          const digest = `sha256:${(h >>> 0).toString(16).padStart(64, "0")}`
          const prev = images.get(digest)
          const names = [...new Set([...(prev?.names ?? []), request.name])]
          const image: Runtime.Image = { names, digest, sizeBytes: 0, importedAt: prev?.importedAt ?? iso(now) }
          for (const [d, i] of images)
            if (d !== digest && i.names.includes(request.name))
              images.set(d, { ...i, names: i.names.filter((n) => n !== request.name) })
          images.set(digest, image)
          return image
        }),
      list: Effect.sync(() => [...images.values()])
    }

    const runtime: Runtime.RuntimeService = {
      info: Effect.succeed(info),
      sandboxes: sandboxesApi,
      containers: containersApi,
      images: imagesApi
    }

    const control: ControlService = {
      exit: (id, exitCode, opts = {}) =>
        Effect.flatMap(entryOf(id), (e) => {
          const signal = opts.signal ?? (exitCode === 137 ? "SIGKILL" : undefined)
          return finish(e, exitCode, {
            ...(opts.reason === undefined ? {} : { reason: opts.reason }),
            ...(signal === undefined ? {} : { signal })
          })
        }),
      write: (id, line, stream = "stdout") => Effect.flatMap(entryOf(id), (e) => write(e, stream, line)),
      setBehavior: (behavior) => Effect.sync(() => void (behaviorOf = behavior)),
      calls: Effect.sync(() => calls.slice()),
      networkPolicies: Effect.sync(() => new Map(policies))
    }

    return { runtime, control }
  })

/** The Runtime port and its `Control`, fresh per build of the layer. */
export const layer = (options: Options = {}): Layer.Layer<Runtime.Runtime | Control> =>
  Layer.scopedContext(
    Effect.map(make(options), ({ control, runtime }) =>
      Context.make(Runtime.Runtime, runtime).pipe(Context.add(Control, control))
    )
  )
