/**
 * The agent's side of isolated network mode: it watches Services, EndpointSlices and Nodes
 * (informers over the node's own credentials) and keeps the host in step — the Services' nftables
 * table (ServiceRules.ts: ClusterIP DNAT, masquerade, the pods' DNS) and the routes to other
 * nodes' pod CIDRs (HostRoutes.ts). Changes are coalesced (a burst of endpoint updates is one
 * sync), and everything is re-checked every `resyncMs` so rules or routes removed behind its back
 * come back. The rules stay in place when the agent stops: pods keep their Services while it
 * restarts, and the next agent replaces the table.
 *
 *   informers (Service, EndpointSlice, Node) ─▶ wake ─▶ debounce ─▶ ServiceRulesTable.apply ─▶ HostRoutes.sync
 */
import { type Client, Informer, NodeRoutes, PodCidr, ServiceRules as Rules } from "@koder/fleet-core"
import { Duration, Effect, Either, Queue, type Scope } from "effect"
import * as HostRoutes from "./HostRoutes.js"
import { ServiceRulesTable } from "./ServiceRules.js"

const ServiceRef: Client.ResourceRef = { apiVersion: "v1", kind: "Service" }
const SliceRef: Client.ResourceRef = { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice" }
const NodeRef: Client.ResourceRef = { apiVersion: "v1", kind: "Node" }

/** How to run the sync. */
export interface Options {
  readonly client: Client.Client
  readonly nodeName: string
  /** The pods' bridge (default `fleet0`). */
  readonly bridge?: string
  /** Where the pods' DNS (gateway:53) is sent; absent: no DNS rule. */
  readonly dns?: { readonly address: string; readonly port: number }
  /** The nftables table (default `fleet`). */
  readonly table?: string
  /** Full re-check interval (default 30 s). */
  readonly resyncMs?: number
  /** Told of each sync's failure (default: stderr). */
  readonly onError?: (message: string) => void
}

/** What the sync has done, for tests and logs. */
export interface Stats {
  readonly syncs: number
  /** Times nft ran (the ruleset had changed). */
  readonly applied: number
  readonly failures: number
  readonly lastError: string | undefined
  /** Duration of the last sync that applied something, ms. */
  readonly lastApplyMs: number | undefined
}

/** A running sync. */
export interface Running {
  readonly stats: () => Stats
  /** Sync now and wait for it (tests). */
  readonly syncNow: Effect.Effect<void>
}

/** Start the sync in the current scope; the first sync has happened when it returns. */
export const run = (options: Options): Effect.Effect<Running, never, Scope.Scope> =>
  Effect.gen(function* () {
    const informers = yield* Informer.makeShared(options.client)
    const services = informers.for(ServiceRef)
    const slices = informers.for(SliceRef)
    const nodes = informers.for(NodeRef)
    yield* Effect.all([services.synced, slices.synced, nodes.synced], { discard: true })
    const table = new ServiceRulesTable(options.table)
    const bridge = options.bridge ?? "fleet0"
    const onError = options.onError ?? ((m: string) => console.error(`koder-fleet agent: network sync: ${m}`))
    let stats: Stats = { syncs: 0, applied: 0, failures: 0, lastError: undefined, lastApplyMs: undefined }

    const syncOnce = Effect.tryPromise(async () => {
      const started = performance.now()
      const all = nodes.list()
      const me = nodes.get(undefined, options.nodeName)
      const podCidr = me === undefined ? undefined : NodeRoutes.podCidrsOf(me)[0]
      const gateway = podCidr === undefined ? undefined : Either.getOrUndefined(PodCidr.block(podCidr))?.gateway
      const applied = await table.apply({
        services: Rules.fromCluster(services.list(), slices.list()),
        podCidr,
        clusterCidrs: NodeRoutes.allPodCidrs(all),
        bridge,
        ...(options.dns === undefined || gateway === undefined ? {} : { dns: { gateway, target: options.dns } })
      })
      const routes = await HostRoutes.sync(NodeRoutes.routes(all, options.nodeName))
      const changed = applied || routes.added + routes.removed > 0
      stats = {
        ...stats,
        syncs: stats.syncs + 1,
        applied: stats.applied + (applied ? 1 : 0),
        lastApplyMs: changed ? performance.now() - started : stats.lastApplyMs
      }
    }).pipe(
      Effect.catchAll((e) =>
        Effect.sync(() => {
          const message = e.error instanceof Error ? e.error.message : String(e.error)
          stats = { ...stats, syncs: stats.syncs + 1, failures: stats.failures + 1, lastError: message }
          onError(message)
        })
      )
    )

    // One sync at a time; a change during a sync wakes the next one (sliding queue of one).
    const wake = yield* Queue.sliding<void>(1)
    const poke = () => void Queue.unsafeOffer(wake, undefined)
    for (const i of [services, slices, nodes]) {
      const unsubscribe = i.subscribe(poke)
      yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))
    }
    const lock = yield* Effect.makeSemaphore(1)
    const guarded = lock.withPermits(1)(syncOnce)
    yield* guarded
    const resync = Duration.millis(options.resyncMs ?? 30_000)
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.gen(function* () {
          yield* Effect.race(Queue.take(wake), Effect.sleep(resync))
          // Coalesce a burst (a rollout touches many slices at once).
          yield* Effect.sleep(Duration.millis(15))
          yield* Queue.takeAll(wake)
          yield* guarded
        })
      )
    )
    return { stats: () => stats, syncNow: guarded }
  })
