import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Usage from "../../src/agent/Usage.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import * as Runtime from "../../src/runtime/Runtime.js"

const container = (id: string, labels: Record<string, string>): Runtime.Container => ({
  id,
  spec: { sandboxId: "s", name: labels[Runtime.Labels.containerName] ?? "c", attempt: 0, command: ["x"], labels },
  status: { state: "running" },
  createdAt: "2026-01-01T00:00:00Z"
})
const stats = (nanoCores: number, bytes: number): Runtime.Stats => ({
  timestamp: "2026-01-01T00:00:00Z",
  cpu: { usageCoreNanoSeconds: 0, usageNanoCores: nanoCores },
  memory: { workingSetBytes: bytes, rssBytes: bytes },
  pids: 1
})
const pod = (ns: string, name: string, c: string) => ({ [Runtime.Labels.podNamespace]: ns, [Runtime.Labels.podName]: name, [Runtime.Labels.containerName]: c })

describe("AgentUsage.fromSamples", () => {
  it("groups containers by pod, sums the node, and leaves out containers that are no pod's", () => {
    const report = Usage.fromSamples(
      [
        { container: container("1", pod("default", "web", "app")), stats: stats(250_000_000, 100) },
        { container: container("2", pod("default", "web", "sidecar")), stats: stats(50_000_000, 20) },
        { container: container("3", pod("other", "db", "db")), stats: stats(1_000_000_000, 500) },
        { container: container("4", {}), stats: stats(9, 9) }
      ],
      15_000
    )
    expect(report.windowMs).toBe(15_000)
    expect(report.node).toEqual({ usageNanoCores: 1_300_000_000, workingSetBytes: 620 })
    expect(report.pods).toEqual([
      { namespace: "default", name: "web", containers: [{ name: "app", usage: { usageNanoCores: 250_000_000, workingSetBytes: 100 } }, { name: "sidecar", usage: { usageNanoCores: 50_000_000, workingSetBytes: 20 } }] },
      { namespace: "other", name: "db", containers: [{ name: "db", usage: { usageNanoCores: 1_000_000_000, workingSetBytes: 500 } }] }
    ])
  })

  it.scoped("samples the running containers of a runtime", () =>
    Effect.gen(function* () {
      const { runtime } = yield* MemoryRuntime.make({ behavior: () => ({ stats: () => ({ cpu: { usageCoreNanoSeconds: 1, usageNanoCores: 7 }, memory: { workingSetBytes: 3, rssBytes: 3 } }) }) })
      const sandbox = yield* runtime.sandboxes.create({ podUid: "u", name: "web", namespace: "default", network: "host" })
      const id = yield* runtime.containers.create({ sandboxId: sandbox.id, name: "app", attempt: 0, command: ["x"], labels: pod("default", "web", "app") })
      yield* runtime.containers.start(id)
      const report = yield* Usage.report(runtime, 10_000)
      expect(report.pods).toEqual([{ namespace: "default", name: "web", containers: [{ name: "app", usage: { usageNanoCores: 7, workingSetBytes: 3 } }] }])
    })
  )
})
