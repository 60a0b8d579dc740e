/**
 * What a node reports to `metrics.k8s.io`: each running container's CPU rate and memory working
 * set, grouped by pod (the agent's labels say which pod and container a runtime container is),
 * from the runtime's stats. The node's own figure is the sum of its pods' — what Fleet's
 * workloads use of the host, not the whole host as metrics-server reports it.
 */
import { Effect } from "effect"
import type { NodeReport, PodSample } from "../api/MetricsSource.js"
import * as Runtime from "../runtime/Runtime.js"

/** One running container and its latest sample. */
export interface Sample {
  readonly container: Runtime.Container
  readonly stats: Runtime.Stats
}

/** The report for `samples` (pure): containers without the agent's pod labels are left out. */
export const fromSamples = (samples: ReadonlyArray<Sample>, windowMs: number, timestampMs?: number): NodeReport => {
  const pods = new Map<string, { namespace: string; name: string; containers: Array<PodSample["containers"][number]> }>()
  let cpu = 0
  let memory = 0
  for (const { container, stats } of samples) {
    const labels = container.spec.labels ?? {}
    const namespace = labels[Runtime.Labels.podNamespace]
    const name = labels[Runtime.Labels.podName]
    if (namespace === undefined || name === undefined) continue
    const key = `${namespace}/${name}`
    let pod = pods.get(key)
    if (pod === undefined) pods.set(key, (pod = { namespace, name, containers: [] }))
    const usage = { usageNanoCores: stats.cpu.usageNanoCores, workingSetBytes: stats.memory.workingSetBytes }
    pod.containers.push({ name: labels[Runtime.Labels.containerName] ?? container.spec.name, usage })
    cpu += usage.usageNanoCores
    memory += usage.workingSetBytes
  }
  return {
    ...(timestampMs === undefined ? {} : { timestampMs }),
    windowMs,
    node: { usageNanoCores: cpu, workingSetBytes: memory },
    pods: [...pods.values()]
  }
}

/** Sample every running container of `runtime` now; a container that cannot be sampled is skipped. */
export const report = (runtime: Runtime.RuntimeService, windowMs: number): Effect.Effect<NodeReport, Runtime.Unavailable> =>
  Effect.gen(function* () {
    const running = yield* runtime.containers.list({ state: "running" })
    const samples = yield* Effect.forEach(
      running,
      (container) => Effect.option(Effect.map(runtime.containers.stats(container.id), (stats): Sample => ({ container, stats }))),
      { concurrency: 8 }
    )
    return fromSamples(
      samples.flatMap((s) => (s._tag === "Some" ? [s.value] : [])),
      windowMs
    )
  })
