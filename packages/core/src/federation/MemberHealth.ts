/**
 * The hub's member health controller (the node lifecycle controller's counterpart, without its
 * eviction): each member renews a Lease `member` in its namespace `fleet-member-<name>`. When the
 * lease has not moved for the grace period (default 40 s), the member's Ready condition becomes
 * Unknown (`MemberStatusUnknown`) and it gets the taint `federation.fleet.koder.dev/unreachable`
 * with effect NoSchedule: new placements avoid it, and nothing it runs is touched. A member
 * that reports itself not Ready gets `…/not-ready:NoSchedule`. When the lease moves again, and
 * the member reports Ready, the taint goes and Ready comes back. Never an eviction, never a
 * deletion: a heartbeat missed by a partitioned hub must not empty the fleet (Karmada #5150).
 */
import { Clock, Effect } from "effect"
import * as Federation from "../model/Federation.js"
import * as FleetMetrics from "../observability/FleetMetrics.js"
import * as MetricRegistry from "../observability/MetricRegistry.js"
import { asArray, asObject, asString, type JsonObject } from "../object/Json.js"
import { nameOf, resourceVersionOf, rfc3339, timeMs } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import type * as Controller from "../controllers/Controller.js"

/** The heartbeat Lease's name in a member's namespace. */
export const LeaseName = "member"

/** Options. */
export interface Options {
  /** How long a lease may stand still before the member is Unknown (default 40 s). */
  readonly gracePeriodMs?: number
}

interface Taint {
  readonly key: string
  readonly value?: string
  readonly effect: string
  readonly timeAdded?: string
}

/** What to write (pure): the new Ready condition and taints, or nothing; when to look again. */
export interface Decision {
  readonly ready: Federation.Condition | undefined
  readonly taints: ReadonlyArray<Taint> | undefined
  readonly requeueAfterMs: number | undefined
}

const conditionOf = (mc: JsonObject, type: string): Federation.Condition | undefined =>
  asArray(asObject(mc["status"])["conditions"])
    .map((c) => asObject(c) as unknown as Federation.Condition)
    .find((c) => c.type === type)


/** The decision for one member from its lease (undefined: none yet) at `nowMs` (pure). */
export const decide = (mc: JsonObject, lease: JsonObject | undefined, nowMs: number, options: Options = {}): Decision => {
  const grace = options.gracePeriodMs ?? 40_000
  const renewed = lease === undefined ? undefined : timeMs(asObject(lease["spec"])["renewTime"])
  const ready = conditionOf(mc, "Ready")
  const joined = conditionOf(mc, "Joined")?.status === "True" || renewed !== undefined
  // A member that never sent a heartbeat is given the grace period from its creation.
  const since = renewed ?? timeMs(asObject(mc["metadata"])["creationTimestamp"]) ?? nowMs
  const stale = nowMs - since >= grace
  const taints = asArray(asObject(mc["spec"])["taints"]).map((t) => asObject(t) as unknown as Taint)
  const others = taints.filter((t) => t.key !== Federation.UnreachableTaint && t.key !== Federation.NotReadyTaint)
  let wantReady: Federation.Condition | undefined
  let wantTaint: Taint | undefined
  if (stale && joined) {
    wantReady = { type: "Ready", status: "Unknown", reason: "MemberStatusUnknown", message: `the member's heartbeat has not been renewed for ${Math.round((nowMs - since) / 1000)} s` }
    wantTaint = { key: Federation.UnreachableTaint, effect: "NoSchedule" }
  } else if (!stale && ready !== undefined && ready.status === "False") {
    wantTaint = { key: Federation.NotReadyTaint, effect: "NoSchedule" }
  }
  const current = taints.find((t) => t.key === Federation.UnreachableTaint || t.key === Federation.NotReadyTaint)
  const nextTaints =
    wantTaint === undefined
      ? current === undefined
        ? undefined
        : others
      : current?.key === wantTaint.key
        ? undefined
        : [...others, { ...wantTaint, timeAdded: rfc3339(nowMs) }]
  const readyChange =
    wantReady !== undefined && (ready?.status !== wantReady.status || ready.reason !== wantReady.reason)
      ? { ...wantReady, lastTransitionTime: ready?.status === wantReady.status ? ready.lastTransitionTime ?? rfc3339(nowMs) : rfc3339(nowMs) }
      : undefined
  return { ready: readyChange, taints: nextTaints, requeueAfterMs: stale ? undefined : Math.max(1000, since + grace - nowMs + 50) }
}

/** The controller: one key per member. */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  // Each member's last report, for the status-age gauge computed at every scrape.
  const lastReport = new Map<string, number>()
  let collecting = false
  const collect = (registry: MetricRegistry.Registry) => {
    if (collecting) return
    collecting = true
    FleetMetrics.federation(registry).statusAge.collect((add) => {
      const now = Date.now()
      for (const [member, at] of lastReport) add([member], Math.max(0, (now - at) / 1000))
    })
  }
  return {
  name: "member-health",
  primary: ResourceRefs.MemberCluster,
  watches: [
    {
      ref: ResourceRefs.Lease,
      keys: (c) => {
        const m = asObject(c.object["metadata"])
        const member = Federation.memberOfNamespace(asString(m["namespace"]))
        return member !== undefined && m["name"] === LeaseName ? [member] : []
      }
    }
  ],
  resync: { everyMs: 5_000, keys: (informers) => informers.for(ResourceRefs.MemberCluster).list().map(nameOf) },
  reconcile: (name, ctx) =>
    Effect.gen(function* () {
      collect(yield* MetricRegistry.MetricRegistry)
      const mc = ctx.informers.for(ResourceRefs.MemberCluster).get(undefined, name)
      if (mc === undefined) {
        lastReport.delete(name)
        return
      }
      const reported = Date.parse(asString(asObject(mc["status"])["lastHeartbeatTime"]))
      if (Number.isFinite(reported)) lastReport.set(name, reported)
      const lease = ctx.informers.for(ResourceRefs.Lease).get(Federation.memberNamespace(name), LeaseName)
      const now = yield* Clock.currentTimeMillis
      const d = decide(mc, lease, now, options)
      if (d.taints !== undefined) {
        yield* ctx.client.patch(ResourceRefs.MemberCluster, undefined, name, "merge", { metadata: { resourceVersion: resourceVersionOf(mc) }, spec: { taints: d.taints } })
        const added = d.taints.find((t) => t.key === Federation.UnreachableTaint)
        if (added !== undefined) yield* ctx.events.record(mc, "Warning", "MemberUnreachable", "the member's heartbeat stopped: tainted NoSchedule (nothing it runs is moved)")
        else yield* ctx.events.record(mc, "Normal", "MemberReachable", "the member's heartbeat is back: taint removed")
      }
      if (d.ready !== undefined) {
        const conditions = asArray(asObject(mc["status"])["conditions"]).map(asObject).filter((c) => c["type"] !== "Ready")
        yield* ctx.client.patch(ResourceRefs.MemberCluster, undefined, name, "merge", { status: { conditions: [...conditions, d.ready] } }, "status")
      }
      return d.requeueAfterMs === undefined ? undefined : { requeueAfterMs: d.requeueAfterMs }
    })
  }
}
