/**
 * The state of one simulated node, as plain tables every part of the memory runtime reads and
 * writes: sandboxes, the container table (each container with its log and exit signal), images,
 * the NetworkPolicy rules given, and the calls received. The Effects over it live beside it
 * (`memoryProcess.ts`, `memorySandboxes.ts`, `memoryContainers.ts`, ...).
 */
import { Effect, FiberSet } from "effect"
import type { Deferred, PubSub, Scope } from "effect"
import type { Behavior, Call, Options, RegistryImage } from "../MemoryRuntime.js"
import * as Runtime from "../Runtime.js"

/** One line of a container's log. */
export interface Line {
  readonly seq: number
  readonly at: number
  readonly stream: "stdout" | "stderr"
  readonly line: string
}

/** One row of the container table: the container as reported, and what drives it. */
export interface Entry {
  container: Runtime.Container
  readonly behavior: Behavior
  readonly lines: Array<Line>
  /** Publishes new lines, and `null` once the container exited (ends follow streams). */
  readonly feed: PubSub.PubSub<Line | null>
  readonly exited: Deferred.Deferred<void>
  readonly pid: number
}

/** The simulated node: its tables, counters, and the fibers of its timers. */
export interface Node {
  /** Timers (programmed exits, shutdowns); they stop when the runtime's scope closes. */
  readonly fibers: FiberSet.FiberSet
  readonly info: Runtime.Info
  readonly sandboxes: Map<string, Runtime.Sandbox>
  readonly entries: Map<string, Entry>
  readonly images: Map<string, Runtime.Image>
  /** The simulated registry `images.pull` fetches from. */
  readonly registry: Map<string, RegistryImage>
  /** The NetworkPolicy rules last given, by sandbox id. */
  readonly policies: Map<string, Runtime.NetworkPolicyRules>
  readonly calls: Array<Call>
  behaviorOf: (spec: Runtime.ContainerSpec) => Behavior
  /** Shared by sandbox and container ids (`sb-1`, `c-2`, ...). */
  nextId: number
  nextPid: number
}

/** An empty node in the current scope, with the info `defaults` overridden by the options. */
export const makeNode = (options: Options, defaults: Runtime.Info): Effect.Effect<Node, never, Scope.Scope> =>
  Effect.map(FiberSet.make(), (fibers) => ({
    fibers,
    info: { ...defaults, ...options.info },
    sandboxes: new Map(),
    entries: new Map(),
    images: new Map(),
    registry: new Map(Object.entries(options.registry ?? {})),
    policies: new Map(),
    calls: [],
    behaviorOf: options.behavior ?? (() => ({})),
    nextId: 1,
    nextPid: 1000
  }))

/** Remember one mutating call for `Control.calls`. */
export const record = (node: Node, op: Call["op"], id: string, detail?: string): void =>
  void node.calls.push(detail === undefined ? { op, id } : { op, id, detail })

/** The container's row, or `RuntimeNotFound`. */
export const entryOf = (node: Node, id: string): Effect.Effect<Entry, Runtime.NotFound> =>
  Effect.suspend(() => {
    const e = node.entries.get(id)
    return e
      ? Effect.succeed(e)
      : Effect.fail(new Runtime.NotFound({ kind: "container", id, message: `container ${id} not found` }))
  })

/** The Invalid error of a call that needs a running container. */
export const notRunning = (id: string): Runtime.Invalid =>
  new Runtime.Invalid({ message: `container ${id} is not running` })

/** A time on the Effect clock as the runtime reports it (RFC 3339 with milliseconds). */
export const iso = (ms: number): string => new Date(ms).toISOString()
