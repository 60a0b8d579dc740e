/**
 * What the ingress proxy tells the API: the IngressClass `fleet` (created at start when the
 * cluster has none of that name; the default class unless another class already is), and the
 * `status.loadBalancer.ingress` of every Ingress it serves — the address and ports it listens on,
 * which is what `kubectl get ingress` shows under ADDRESS. An Ingress it stops serving (its class
 * changed) loses the entry again. An Ingress that claims a host another namespace owns
 * (`IngressHosts`) gets a Warning Event `HostConflict` naming the owner, and no address when it
 * serves nothing at all; an Ingress that still serves some of its hosts keeps its address (the
 * Event says which hosts it does not get). The status writer is a level-triggered reconciler on core's
 * controller runner, so conflicts and API hiccups are retried with backoff.
 */
import { type ApiError, type Client, type Controller, Informer, Ingress, IngressHosts, IngressRoutes } from "@koder/fleet-core"
import { Effect } from "effect"

/** The Ingress resource. */
export const IngressRef: Client.ResourceRef = { apiVersion: "networking.k8s.io/v1", kind: "Ingress" }

/** The IngressClass resource. */
export const IngressClassRef: Client.ResourceRef = { apiVersion: "networking.k8s.io/v1", kind: "IngressClass" }

const obj = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {})
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

/** Create the IngressClass `fleet` unless the cluster has it (idempotent; several servers may race). */
export const ensureClass = (client: Client.Client): Effect.Effect<void, ApiError.ApiError> =>
  Effect.gen(function* () {
    const list = yield* client.list(IngressClassRef)
    const classes = arr(list["items"]).map(obj)
    if (classes.some((c) => obj(c["metadata"])["name"] === Ingress.FleetClass)) return
    yield* client
      .create(IngressRoutes.fleetIngressClass(!classes.some(IngressRoutes.isDefaultClass)))
      .pipe(Effect.catchIf((e) => e.status.code === 409, () => Effect.void), Effect.asVoid)
  })

/** Where the proxy is reachable, as Ingress status shows it. */
export interface Address {
  readonly ip: string
  readonly ports: ReadonlyArray<number>
}

/** The Event reason on an Ingress that claims a host another namespace owns. */
export const HostConflict = "HostConflict"

/** How often every Ingress is looked at again (the host policy ConfigMap is not a watched input). */
const resyncMs = 5000

/** The reconciler writing `status.loadBalancer` of served Ingresses; `policy` is the admin's host policy as last read. */
export const reconciler = (address: Address, policy: () => IngressHosts.Policy = () => []): Controller.Reconciler => {
  const allKeys = (informers: Informer.Informers) => informers.for(IngressRef).list().map(Informer.keyOf)
  // What was reported, per Ingress uid: an Event is recorded when the conflict first shows or changes.
  const reported = new Map<string, string>()
  // The ownership decision, recomputed only after an Ingress, class or policy change (not per key).
  let decided: { readonly policy: IngressHosts.Policy; readonly ownership: IngressHosts.Ownership } | undefined
  const ownershipOf = (informers: Informer.Informers): IngressHosts.Ownership => {
    const current = policy()
    if (decided === undefined || decided.policy !== current) {
      const classes = informers.for(IngressClassRef).list()
      decided = { policy: current, ownership: IngressHosts.decide(informers.for(IngressRef).list().filter((i) => IngressRoutes.isServed(i, classes)), current) }
    }
    return decided.ownership
  }
  /** What of an Ingress decides ownership: its claims, its class, whether it is being deleted. */
  const claimShape = (o: Record<string, unknown> | undefined) =>
    o === undefined ? "" : JSON.stringify([IngressHosts.claimsOf(o), obj(o["spec"])["ingressClassName"], obj(obj(o["metadata"])["annotations"])[Ingress.LegacyClassAnnotation], obj(o["metadata"])["deletionTimestamp"] !== undefined])
  /**
   * The Ingresses whose standing a change of `changed` can alter: the ones that lost something
   * (they may win now) and the ones claiming a host overlapping its claims (they may lose now).
   */
  const affected = (change: Informer.Change, informers: Informer.Informers): ReadonlyArray<string> => {
    if (change.type === "MODIFIED" && claimShape(change.object) === claimShape(change.old)) return []
    const before = decided?.ownership
    decided = undefined
    const hosts = [...IngressHosts.claimsOf(change.object), ...(change.old === undefined ? [] : IngressHosts.claimsOf(change.old))]
    const keys = new Set(before === undefined ? [] : before.lost.keys())
    for (const i of informers.for(IngressRef).list()) if (IngressHosts.claimsOf(i).some((h) => hosts.some((c) => IngressHosts.overlaps(h, c)))) keys.add(Informer.keyOf(i))
    return [...keys]
  }
  return {
    name: "ingress-status",
    primary: IngressRef,
    watches: [
      // A class change (a new default, a class deleted) can change which Ingresses are served.
      {
        ref: IngressClassRef,
        keys: (_change, informers) => {
          decided = undefined
          return allKeys(informers)
        }
      },
      // One Ingress's claims decide the others' (a deleted owner frees its host for the next).
      { ref: IngressRef, keys: affected }
    ],
    resync: { everyMs: resyncMs, keys: allKeys },
    workers: 1,
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const { namespace, name } = Informer.splitKey(key)
        const ingress = ctx.informers.for(IngressRef).get(namespace, name)
        if (ingress === undefined) return
        const classes = ctx.informers.for(IngressClassRef).list()
        const isServed = IngressRoutes.isServed(ingress, classes)
        const ownership = ownershipOf(ctx.informers)
        const losses = isServed ? ownership.losses.filter((l) => l.ingress === key) : []
        const uid = String(obj(ingress["metadata"])["uid"] ?? key)
        const message = losses.map(IngressHosts.describeLoss).join("; ")
        if (message === "") reported.delete(uid)
        else if (reported.get(uid) !== message) {
          // Deleted Ingresses' entries are not tracked: forget them all now and then.
          if (reported.size >= 4096) reported.clear()
          reported.set(uid, message)
          const servedHosts = IngressHosts.claimsOf(ingress).length - losses.length
          yield* ctx.events.record(ingress, "Warning", HostConflict, `${message}; ${servedHosts === 0 ? "this Ingress serves nothing" : "this Ingress serves its other hosts only"}`)
        }
        // Serving nothing (every claim lost) is not being served: no address.
        const served = isServed && (losses.length === 0 || losses.length < IngressHosts.claimsOf(ingress).length)
        const status = obj(ingress["status"])
        const current = obj(status["loadBalancer"])
        let wanted: Record<string, unknown>
        if (served) wanted = obj(IngressRoutes.loadBalancerStatus(address.ip, address.ports)["loadBalancer"])
        else if (arr(current["ingress"]).some((i) => obj(i)["ip"] === address.ip || obj(i)["hostname"] === address.ip)) wanted = {}
        else return
        // Both sides are built the same way (ip/hostname, then ports), so their JSON compares.
        if (JSON.stringify(current) === JSON.stringify(wanted)) return
        yield* ctx.client.update({ ...ingress, status: { ...status, loadBalancer: wanted } }, "status")
      })
  }
}
