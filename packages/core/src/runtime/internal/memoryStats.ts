/** What the memory runtime shows of a running container's resources: stats samples and its process list. */
import { Clock, Effect } from "effect"
import type * as Runtime from "../Runtime.js"
import { type Node, entryOf, iso, notRunning } from "./memoryNode.js"

/** `Containers.stats`: the behavior's sample (zeros by default) of a running container. */
export const stats = (node: Node, id: string): Effect.Effect<Runtime.Stats, Runtime.NotFound | Runtime.Invalid> =>
  Effect.gen(function* () {
    const e = yield* entryOf(node, id)
    if (e.container.status.state !== "running") return yield* notRunning(id)
    const now = yield* Clock.currentTimeMillis
    const sample = e.behavior.stats?.(e.container) ?? {
      cpu: { usageCoreNanoSeconds: 0, usageNanoCores: 0 },
      memory: { workingSetBytes: 0, rssBytes: 0 }
    }
    return { timestamp: iso(now), ...sample, pids: 1 }
  })

/** `Containers.processes`: the one simulated process while it runs, none after. */
export const processes = (node: Node, id: string): Effect.Effect<ReadonlyArray<Runtime.Process>, Runtime.NotFound> =>
  Effect.map(entryOf(node, id), (e) =>
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
  )
