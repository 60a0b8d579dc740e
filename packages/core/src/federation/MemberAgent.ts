/**
 * A member's side of the hub (karmada-agent's role). In Pull mode the member's server runs it and
 * dials the hub with the member's identity, so it works from behind NAT; in Push mode the hub runs
 * it with a client of the member's API (PushMembers in the daemon), so both modes behave alike.
 *
 *   heartbeat   every 10 s: renew Lease `member` in fleet-member-<name> on the hub, after the
 *               member's API answered (in Push mode the hub runs this agent: a cut link stops it)
 *   status      local Nodes and Pods (informers) ─▶ MemberStatus.summarize ─▶ MemberCluster status,
 *               at most every `statusDebounceMs` after a change, and with every heartbeat
 *   works       Works in fleet-member-<name> (an informer on the hub) ─▶ each manifest
 *               server-side applied locally (WorkApply) ─▶ per-manifest Applied/Available back on
 *               the Work's status, refreshed every `statusRefreshMs`; what leaves a Work, or a
 *               deleted Work's objects, deleted locally (only objects carrying that Work's label)
 *
 * The hub's resourceVersion and generation fence a Work: a generation older than one already
 * applied is ignored. The hub being away stops none of this from running what is applied: writes
 * to it are retried at the next tick, the informer resumes by itself, and applies are idempotent,
 * so a reconnect makes no duplicates.
 */
import { Clock, Duration, Effect, Schedule, type Scope } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import * as Informer from "../informer/Informer.js"
import * as FleetMetrics from "../observability/FleetMetrics.js"
import * as MetricRegistry from "../observability/MetricRegistry.js"
import * as Federation from "../model/Federation.js"
import { asArray, asObject, asString, type JsonObject } from "../object/Json.js"
import { generationOf, labelsOf, metadataOf, nameOf, resourceVersionOf, rfc3339 } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as MemberHealth from "./MemberHealth.js"
import * as MemberStatus from "./MemberStatus.js"
import * as WorkApply from "./WorkApply.js"

/** How the agent is set up. */
export interface Options {
  readonly member: string
  readonly region: string
  /** The hub, as this member. */
  readonly hub: Client.Client
  /** This member's own API (the loopback client of its controllers). */
  readonly local: Client.Client
  readonly fleetVersion: string
  readonly heartbeatMs?: number
  readonly statusDebounceMs?: number
  readonly statusRefreshMs?: number
  readonly onError?: (message: string) => void
}

const isoMicro = (ms: number) => new Date(ms).toISOString().replace("Z", "000Z")
const notFound = (e: ApiError.ApiError) => e.status.code === 404

const refOf = (id: WorkApply.Identity): Client.ResourceRef => ({ apiVersion: WorkApply.apiVersionOf(id), kind: id.kind })

/** Renew (or create) the member's heartbeat Lease, once its own API has answered (the link works both ways). */
const heartbeat = (options: Options) =>
  Effect.gen(function* () {
    yield* options.local.list(ResourceRefs.Namespace, { limit: 1 })
    const namespace = Federation.memberNamespace(options.member)
    const now = isoMicro(yield* Clock.currentTimeMillis)
    const got = yield* Effect.either(options.hub.get(ResourceRefs.Lease, namespace, MemberHealth.LeaseName))
    if (got._tag === "Left") {
      if (!notFound(got.left)) return yield* Effect.fail(got.left)
      yield* options.hub.create({
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: MemberHealth.LeaseName, namespace },
        spec: { holderIdentity: options.member, leaseDurationSeconds: 40, renewTime: now, acquireTime: now }
      })
      return
    }
    yield* options.hub.update({ ...got.right, spec: { ...asObject(got.right["spec"]), holderIdentity: options.member, renewTime: now } })
  })

/** Write the member's status from its nodes and pods. */
const reportStatus = (options: Options, informers: Informer.Informers) =>
  Effect.gen(function* () {
    const summary = MemberStatus.summarize(informers.for(ResourceRefs.Node).list(), informers.for(ResourceRefs.Pod).list())
    const mc = yield* options.hub.get(ResourceRefs.MemberCluster, undefined, options.member)
    const now = rfc3339(yield* Clock.currentTimeMillis)
    const conditions = asArray(asObject(mc["status"])["conditions"]).map(asObject)
    const ready = summary.readyNodeCount > 0
    const before = conditions.find((c) => c["type"] === "Ready")
    const readyCondition = {
      type: "Ready",
      status: ready ? "True" : "False",
      reason: ready ? "MemberReady" : "NoReadyNodes",
      message: ready ? `${summary.readyNodeCount}/${summary.nodeCount} nodes ready` : "the member has no Ready node",
      lastTransitionTime: before?.["status"] === (ready ? "True" : "False") ? asString(before["lastTransitionTime"]) || now : now
    }
    yield* options.hub.patch(
      ResourceRefs.MemberCluster,
      undefined,
      options.member,
      "merge",
      {
        status: {
          conditions: [...conditions.filter((c) => c["type"] !== "Ready"), readyCondition],
          fleetVersion: options.fleetVersion,
          nodeCount: summary.nodeCount,
          readyNodeCount: summary.readyNodeCount,
          resources: summary.resources,
          nodeModels: summary.nodeModels,
          lastHeartbeatTime: now
        }
      },
      "status"
    )
  })

/** What the agent remembers of a Work: the newest generation applied and the objects it made. */
interface Applied {
  generation: number
  objects: ReadonlyArray<WorkApply.Identity>
}

/** Apply one Work and report on it. */
const syncWork = (options: Options, work: JsonObject, applied: Map<string, Applied>, apply: boolean) =>
  Effect.gen(function* () {
    const name = nameOf(work)
    const generation = generationOf(work)
    const known = applied.get(name)
    // The fence: never act on an older copy of a Work than one already applied.
    if (known !== undefined && generation < known.generation) return
    const manifests = asArray(asObject(asObject(work["spec"])["workload"])["manifests"]).map(asObject)
    const ids = manifests.map(WorkApply.identify)
    const previous = known?.objects ?? asArray(asObject(work["status"])["manifestConditions"]).map((c) => asObject(asObject(c)["resourceMeta"]) as unknown as WorkApply.Identity)
    const results: Array<{ readonly id: WorkApply.Identity; readonly error?: string; readonly live?: JsonObject }> = []
    for (const [i, m] of manifests.entries()) {
      const id = ids[i]!
      if (apply) {
        const r = yield* Effect.either(options.local.apply(WorkApply.stamp(m, { name, generation }, { name: options.member, region: options.region }), WorkApply.FieldManager, true))
        results.push(r._tag === "Left" ? { id, error: r.left.status.message ?? `HTTP ${r.left.status.code}` } : { id, live: r.right })
      } else {
        const r = yield* Effect.either(options.local.get(refOf(id), id.namespace, id.name))
        results.push(r._tag === "Left" ? { id, error: notFound(r.left) ? "not found on the member" : r.left.status.message ?? "unreadable" } : { id, live: r.right })
      }
    }
    if (apply) {
      for (const gone of previous.filter((p) => !ids.some((id) => WorkApply.sameObject(id, p)))) yield* deleteOwned(options, name, gone)
      applied.set(name, { generation, objects: ids })
    }
    const now = rfc3339(yield* Clock.currentTimeMillis)
    const manifestConditions = results.map((r) => {
      const a = r.live === undefined ? undefined : WorkApply.availability(r.live)
      return {
        resourceMeta: r.id,
        conditions: [
          r.error === undefined
            ? { type: "Applied", status: "True", reason: "AppliedManifestComplete", message: "", lastTransitionTime: now }
            : { type: "Applied", status: "False", reason: "AppliedManifestFailed", message: r.error, lastTransitionTime: now },
          a === undefined
            ? { type: "Available", status: "Unknown", reason: "NotApplied", message: "", lastTransitionTime: now }
            : { type: "Available", status: a.available ? "True" : "False", reason: a.reason, message: a.message, lastTransitionTime: now }
        ],
        ...(r.live === undefined ? {} : { statusFeedback: WorkApply.feedback(r.live) })
      }
    })
    const all = (type: string) => manifestConditions.every((m) => m.conditions.some((c) => c.type === type && c.status === "True"))
    const status = {
      observedGeneration: generation,
      manifestConditions,
      conditions: [
        { type: "Applied", status: all("Applied") ? "True" : "False", reason: all("Applied") ? "AppliedWorkComplete" : "AppliedWorkFailed", message: "", lastTransitionTime: now, observedGeneration: generation },
        { type: "Available", status: all("Available") ? "True" : "False", reason: all("Available") ? "ResourcesAvailable" : "ResourcesNotAvailable", message: "", lastTransitionTime: now, observedGeneration: generation }
      ]
    }
    // Only a change is written (times aside), so a quiet fleet costs the hub nothing.
    const strip = (s: unknown) => JSON.stringify(s, (k, v: unknown) => (k === "lastTransitionTime" ? undefined : v))
    if (strip(status) === strip(asObject(work["status"]))) return
    yield* options.hub.patch(ResourceRefs.Work, Federation.memberNamespace(options.member), name, "merge", { metadata: { resourceVersion: resourceVersionOf(work) }, status }, "status").pipe(
      Effect.catchIf(
        (e) => e.status.code === 409 || e.status.code === 404,
        () => Effect.void
      )
    )
  })

/** Delete a member object only when this Work made it. */
const deleteOwned = (options: Options, work: string, id: WorkApply.Identity) =>
  Effect.gen(function* () {
    const live = yield* Effect.either(options.local.get(refOf(id), id.namespace, id.name))
    if (live._tag === "Left" || labelsOf(live.right)[WorkApply.WorkLabel] !== work) return
    yield* Effect.ignore(options.local.delete(refOf(id), id.namespace, id.name, { propagationPolicy: "Background", preconditions: { uid: asString(metadataOf(live.right)["uid"]) } }))
  })

/** How often a member renews its heartbeat Lease (and reports its status at the latest). */
export const defaultHeartbeatMs = 10_000

/** Run the agent in the current scope. */
export const run = (options: Options): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const onError = options.onError ?? ((m: string) => console.error(`member agent: ${m}`))
    const report = (what: string) => (e: { readonly status?: { readonly message?: string } } | unknown) =>
      Effect.sync(() => onError(`${what}: ${(e as { status?: { message?: string } }).status?.message ?? String(e)}`))
    const local = yield* Informer.makeShared(options.local)
    local.for(ResourceRefs.Node)
    local.for(ResourceRefs.Pod)
    const works = yield* Informer.make(options.hub, ResourceRefs.Work, { namespace: Federation.memberNamespace(options.member) })
    const applied = new Map<string, Applied>()
    const lock = yield* Effect.makeSemaphore(1)
    const serial = lock.withPermits(1)

    // Heartbeat and status: together every heartbeat, and soon after a local change.
    const beat = Effect.all([heartbeat(options).pipe(Effect.catchAll(report("heartbeat"))), reportStatus(options, local).pipe(Effect.catchAll(report("status")))], { discard: true })
    yield* Effect.forkScoped(Effect.repeat(beat, Schedule.spaced(Duration.millis(options.heartbeatMs ?? defaultHeartbeatMs))))
    // Staleness, measured where both ends are on one clock: the first change not yet reported → its report acknowledged.
    const sync = FleetMetrics.federation(yield* MetricRegistry.MetricRegistry).statusSync.labels(options.member)
    let dirtySince: number | undefined
    for (const i of [local.for(ResourceRefs.Node), local.for(ResourceRefs.Pod)]) {
      const off = i.subscribe(() => (dirtySince ??= performance.now()))
      yield* Effect.addFinalizer(() => Effect.sync(off))
    }
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.suspend(() => {
          const since = dirtySince
          if (since === undefined) return Effect.void
          dirtySince = undefined
          return reportStatus(options, local).pipe(
            Effect.tap(() => Effect.sync(() => sync.observe((performance.now() - since) / 1000))),
            Effect.catchAll((e) => Effect.zipRight(Effect.sync(() => (dirtySince ??= since)), report("status")(e)))
          )
        }),
        Schedule.spaced(Duration.millis(options.statusDebounceMs ?? 300))
      )
    )

    // Works: applied on every change of theirs; their objects' status refreshed on a timer.
    const pending = new Set<string>()
    const unsubscribe = works.subscribe((c) => {
      if (c.type === "DELETED") {
        const name = nameOf(c.object)
        const orphan = asObject(asObject(asObject(c.object["spec"])["deleteOption"]))["propagationPolicy"] === "Orphan"
        const made = applied.get(name)?.objects ?? []
        applied.delete(name)
        if (!orphan) Effect.runFork(serial(Effect.forEach(made, (id) => deleteOwned(options, name, id), { discard: true })))
        return
      }
      pending.add(nameOf(c.object))
    })
    yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.suspend(() => {
          const names = [...pending]
          pending.clear()
          return serial(
            Effect.forEach(
              names,
              (n) => {
                const w = works.get(Federation.memberNamespace(options.member), n)
                return w === undefined ? Effect.void : syncWork(options, w, applied, (applied.get(n)?.generation ?? -1) !== generationOf(w)).pipe(Effect.catchAll(report(`work ${n}`)))
              },
              { discard: true }
            )
          )
        }),
        Schedule.spaced(Duration.millis(100))
      )
    )
    yield* Effect.forkScoped(
      Effect.repeat(
        // Suspended: the Works are listed afresh on every round.
        Effect.suspend(() =>
          serial(
            Effect.forEach(
              works.list(),
              (w) => syncWork(options, w, applied, !applied.has(nameOf(w))).pipe(Effect.catchAll(report(`work ${nameOf(w)}`))),
              { discard: true }
            )
          )
        ),
        Schedule.spaced(Duration.millis(options.statusRefreshMs ?? 2_000))
      )
    )
  })
