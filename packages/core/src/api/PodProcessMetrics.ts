/**
 * `GET /api/v1/namespaces/{ns}/pods/{name}/processmetrics[?container=NAME]`: what runs inside a
 * pod's containers, read from its node now — process and thread counts, the pids its cgroup holds,
 * resident memory, storage I/O, processes by command and by state. It answers the operator's "what
 * is this pod doing" without `exec` (no shell, no consent needed beyond `get` on
 * `pods/processmetrics`). Command lines are left out: they may carry secrets; commands are the
 * kernel's 15-character `comm`.
 */
import { Effect, Either } from "effect"
import * as Status from "../model/Status.js"
import { asArray, asObject } from "../object/Json.js"
import type { SubresourceHandler } from "./ApiServer.js"
import * as ApiError from "./ApiError.js"
import { json } from "./Http.js"
import type * as NodeAccess from "./NodeAccess.js"
import * as Objects from "./Objects.js"
import { chooseContainer, nodeOf, readPod } from "./PodLog.js"

/** One container's figures. */
export interface ContainerProcessMetrics {
  readonly name: string
  readonly processes: number
  readonly threads: number
  /** Tasks in the container's cgroup (what `pids.max` limits), when sampled. */
  readonly pids?: number
  readonly rssBytes: number
  readonly io: { readonly readBytes: number; readonly writeBytes: number }
  /** Processes by `comm`, the most first. */
  readonly byCommand: ReadonlyArray<{ readonly command: string; readonly count: number; readonly rssBytes: number }>
  /** Processes by state letter (`R`, `S`, `D`, ...). */
  readonly byState: Readonly<Record<string, number>>
  /** Why there are no figures (a container not running). */
  readonly message?: string
}

/** The answer. */
export interface PodProcessMetrics {
  readonly kind: "PodProcessMetrics"
  readonly apiVersion: "fleet.koder.dev/v1"
  readonly metadata: { readonly name: string; readonly namespace: string }
  readonly timestamp: string
  readonly containers: ReadonlyArray<ContainerProcessMetrics>
}

/** One container's figures from what its node read (pure). */
export const summarize = (name: string, read: NodeAccess.ContainerProcesses): ContainerProcessMetrics => {
  const byCommand = new Map<string, { count: number; rssBytes: number }>()
  const byState: Record<string, number> = {}
  let threads = 0
  let rssBytes = 0
  let readBytes = 0
  let writeBytes = 0
  for (const p of read.processes) {
    const c = byCommand.get(p.command) ?? { count: 0, rssBytes: 0 }
    c.count++
    c.rssBytes += p.rssBytes
    byCommand.set(p.command, c)
    byState[p.state] = (byState[p.state] ?? 0) + 1
    threads += p.threads ?? 1
    rssBytes += p.rssBytes
    readBytes += p.readBytes ?? 0
    writeBytes += p.writeBytes ?? 0
  }
  return {
    name,
    processes: read.processes.length,
    threads,
    ...(read.stats === undefined ? {} : { pids: read.stats.pids }),
    rssBytes,
    io: { readBytes, writeBytes },
    byCommand: [...byCommand.entries()]
      .map(([command, c]) => ({ command, ...c }))
      .sort((a, b) => b.count - a.count || b.rssBytes - a.rssBytes || a.command.localeCompare(b.command)),
    byState
  }
}

const empty = (name: string, message: string): ContainerProcessMetrics => ({
  name,
  processes: 0,
  threads: 0,
  rssBytes: 0,
  io: { readBytes: 0, writeBytes: 0 },
  byCommand: [],
  byState: {},
  message
})

/** The `pods/processmetrics` subresource, reaching nodes through `access()`. */
export const handler = (access: () => NodeAccess.NodeAccess, now: () => Date = () => new Date()): SubresourceHandler => ({
  group: "",
  plural: "pods",
  subresource: "processmetrics",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      if (request.method.toUpperCase() !== "GET")
        return yield* Effect.fail(ApiError.of(Status.methodNotSupported({ group: "", resource: "pods/processmetrics" }, request.method.toLowerCase())))
      const namespace = route.namespace ?? ""
      const name = route.name ?? ""
      const pod = yield* readPod(context, namespace, name)
      const requested = request.query.get("container") ?? ""
      const names =
        requested === ""
          ? asArray(asObject(pod["spec"])["containers"]).map((c) => String(asObject(c)["name"] ?? ""))
          : [yield* Either.match(chooseContainer(pod, requested), { onLeft: (e) => Effect.fail(e), onRight: (c) => Effect.succeed(c) })]
      const node = yield* nodeOf(pod, names[0] ?? "")
      const uid = String(Objects.meta(pod)["uid"] ?? "")
      const containers = yield* Effect.forEach(
        names,
        (container) =>
          access()
            .processes({ node, namespace, pod: name, uid, container })
            .pipe(
              Effect.map((read) => summarize(container, read)),
              // A container that is not running has no processes: said per container, not a failure of the pod.
              Effect.catchIf(
                (e) => e.status.code === 400,
                (e) => Effect.succeed(empty(container, e.status.message ?? "not running"))
              )
            ),
        { concurrency: 4 }
      )
      const body: PodProcessMetrics = { kind: "PodProcessMetrics", apiVersion: "fleet.koder.dev/v1", metadata: { name, namespace }, timestamp: now().toISOString(), containers }
      return json(200, body)
    })
})
