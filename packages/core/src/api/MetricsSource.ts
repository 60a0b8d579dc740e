/**
 * The MetricsSource port: where the API server's `metrics.k8s.io` resources (api/Metrics.ts) find
 * recent resource usage. Node agents push what their box measured (`record`, one report per node
 * and scrape: the node's own use and each of its pods' containers), the API reads the newest
 * samples back (`nodes`, `pods`). It plays metrics-server's part without a separate process: the
 * samples live in memory, newest per node, and a node whose last report is older than
 * `staleAfterMs` disappears from the answers (as metrics-server drops what its last scrape missed).
 *
 * Units are the runtime's (`Runtime.Stats`): CPU as a rate in nano-cores averaged over the
 * report's window, memory as the working set in bytes.
 */
import { Clock, Context, Effect, Layer } from "effect"

/** What a node, a pod or a container used. */
export interface Usage {
  /** CPU, in nano-cores (10⁹ = one core), averaged over the sample's window. */
  readonly usageNanoCores: number
  /** Memory working set, in bytes, at the sample's time. */
  readonly workingSetBytes: number
}

/** One container's use. */
export interface ContainerSample {
  readonly name: string
  readonly usage: Usage
}

/** One pod's use, per container. */
export interface PodSample {
  readonly namespace: string
  readonly name: string
  readonly containers: ReadonlyArray<ContainerSample>
}

/** What one node reports at one scrape. */
export interface NodeReport {
  /** When it was measured (ms since the epoch); default: when recorded. */
  readonly timestampMs?: number
  /** How long the CPU rates were averaged over, in ms (metrics-server's `window`). */
  readonly windowMs: number
  /** The node's own use (the whole host, or what the agent's cgroup tree holds). */
  readonly node: Usage
  /** Every pod the node runs that was measured, each with all its containers. */
  readonly pods: ReadonlyArray<PodSample>
}

/** A node's newest sample. */
export interface NodePoint {
  readonly name: string
  readonly timestampMs: number
  readonly windowMs: number
  readonly usage: Usage
}

/** A pod's newest sample, with the node that reported it. */
export interface PodPoint extends PodSample {
  readonly node: string
  readonly timestampMs: number
  readonly windowMs: number
}

/** The service. */
export interface MetricsSourceService {
  /** Replace what `nodeName` reported before with `report` (pods it no longer lists are gone). */
  readonly record: (nodeName: string, report: NodeReport) => Effect.Effect<void>
  /** Drop everything `nodeName` reported (the node left). */
  readonly forget: (nodeName: string) => Effect.Effect<void>
  /** Every node with a fresh sample, by name. */
  readonly nodes: Effect.Effect<ReadonlyArray<NodePoint>>
  /** Every pod with a fresh sample, in `namespace` or in all namespaces, by namespace and name. */
  readonly pods: (namespace?: string) => Effect.Effect<ReadonlyArray<PodPoint>>
}

/** The port. */
export class MetricsSource extends Context.Tag("@koder/fleet-core/MetricsSource")<MetricsSource, MetricsSourceService>() {}

/** Options of the memory implementation. */
export interface Options {
  /** A node's report older than this is ignored (default 60 s: four missed 15 s scrapes). */
  readonly staleAfterMs?: number
}

interface Entry {
  readonly node: NodePoint
  readonly pods: ReadonlyArray<PodPoint>
}

const byName = (a: { readonly name: string }, b: { readonly name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
const byNamespaceName = (a: PodPoint, b: PodPoint) => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : byName(a, b))

/**
 * The in-memory source: the newest report per node, read with the Effect clock (so tests can
 * move time with `TestClock`). Reads cost O(nodes + pods) and allocate only the answer.
 */
export const makeMemory = (options: Options = {}): MetricsSourceService => {
  const staleAfterMs = options.staleAfterMs ?? 60_000
  const reports = new Map<string, Entry>()
  const fresh = (now: number) => [...reports.values()].filter((e) => now - e.node.timestampMs <= staleAfterMs)
  return {
    record: (nodeName, report) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const timestampMs = report.timestampMs ?? now
        const windowMs = report.windowMs
        reports.set(nodeName, {
          node: { name: nodeName, timestampMs, windowMs, usage: report.node },
          pods: report.pods.map((p) => ({ namespace: p.namespace, name: p.name, containers: p.containers, node: nodeName, timestampMs, windowMs }))
        })
      }),
    forget: (nodeName) => Effect.sync(() => void reports.delete(nodeName)),
    nodes: Effect.map(Clock.currentTimeMillis, (now) => fresh(now).map((e) => e.node).sort(byName)),
    pods: (namespace) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        // A pod that moved may briefly be in two nodes' reports: the newer sample wins.
        const newest = new Map<string, PodPoint>()
        for (const e of fresh(now)) {
          for (const p of e.pods) {
            if (namespace !== undefined && p.namespace !== namespace) continue
            const key = `${p.namespace}/${p.name}`
            const seen = newest.get(key)
            if (seen === undefined || seen.timestampMs < p.timestampMs) newest.set(key, p)
          }
        }
        return [...newest.values()].sort(byNamespaceName)
      })
  }
}

/** The in-memory source as a Layer. */
export const layerMemory = (options: Options = {}): Layer.Layer<MetricsSource> => Layer.sync(MetricsSource, () => makeMemory(options))
