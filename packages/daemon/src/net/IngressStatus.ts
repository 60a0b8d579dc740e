/**
 * What the ingress proxy tells the API: the IngressClass `fleet` (created at start when the
 * cluster has none of that name; the default class unless another class already is), and the
 * `status.loadBalancer.ingress` of every Ingress it serves — the address and ports it listens on,
 * which is what `kubectl get ingress` shows under ADDRESS. An Ingress it stops serving (its class
 * changed) loses the entry again. The status writer is a level-triggered reconciler on core's
 * controller runner, so conflicts and API hiccups are retried with backoff.
 */
import { type ApiError, type Client, type Controller, Informer, Ingress, IngressRoutes } from "@koder/fleet-core"
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

/** The reconciler writing `status.loadBalancer` of served Ingresses. */
export const reconciler = (address: Address): Controller.Reconciler => ({
  name: "ingress-status",
  primary: IngressRef,
  // A class change (a new default, a class deleted) can change which Ingresses are served.
  watches: [{ ref: IngressClassRef, keys: (_change, informers) => informers.for(IngressRef).list().map(Informer.keyOf) }],
  workers: 1,
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const { namespace, name } = Informer.splitKey(key)
      const ingress = ctx.informers.for(IngressRef).get(namespace, name)
      if (ingress === undefined) return
      const served = IngressRoutes.isServed(ingress, ctx.informers.for(IngressClassRef).list())
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
})
