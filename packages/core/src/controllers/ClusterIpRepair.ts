/**
 * The ClusterIP repair controller: keeps Services' cluster IPs and `networking.k8s.io/v1`
 * IPAddress objects one-to-one, following kube-apiserver's ipallocator repair controller
 * (RepairIPAddress) for the MultiCIDRServiceAllocator design. Two loops share one queue: keys
 * with a slash are Services (`namespace/name`), keys without are IPAddresses (named by the IP).
 *
 *   Service loop:   each cluster IP ─▶ not an IP / outside every range: Warning event
 *                                   ─▶ no IPAddress: event, create it
 *                                   ─▶ IPAddress of something else: recreate it for this Service,
 *                                      unless another live Service holds that IP (event: duplicate)
 *   IPAddress loop: managed by the allocator ─▶ parent not a Service: delete
 *                                           ─▶ parent Service gone: delete once older than the
 *                                              grace period (a create may still be in flight)
 *                                           ─▶ parent Service without this IP: delete
 *
 * The allocator (`admission/ClusterIpAllocator.ts`) already releases an address in the same
 * transaction as the Service's delete; this controller catches what that cannot: a Service whose
 * final removal skipped admission (finalizers), a write refused after its addresses were taken,
 * objects edited or deleted by hand. An IPAddress change also queues the Service it names (so a
 * deleted address is put back at once), and everything is checked again every `resyncMs`
 * (upstream's repair interval). Before acting it re-reads the objects from the API, since the
 * Service and IPAddress informers are separate watches and one may lag the other.
 * Departure: no ServiceCIDR objects; the ranges are the allocator's `--service-cluster-ip-range`.
 */
import { Clock, Effect, Either, Option } from "effect"
import * as ClusterIpAllocator from "../admission/ClusterIpAllocator.js"
import type * as Client from "../client/Client.js"
import * as IpRange from "../network/IpRange.js"
import type * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import { type JsonObject, asObject, asString, stableJson } from "../object/Json.js"
import { metadataOf, timeMs } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"


/** The IPAddress resource. */
export const IPAddressRef: Client.ResourceRef = { apiVersion: "networking.k8s.io/v1", kind: "IPAddress", plural: "ipaddresses", namespaced: false }


/** How long an IPAddress without its Service is left alone (kube-apiserver's request timeout, 60 s). */
export const defaultLeakGraceMs = 60_000


/** An event to record about an object. */
export interface Event {
  readonly type: "Normal" | "Warning"
  readonly reason: string
  readonly message: string
}

/** What the Service loop does. */
export type ServiceAction =
  | { readonly _tag: "Create"; readonly ipAddress: JsonObject; readonly event: Event }
  | { readonly _tag: "Recreate"; readonly ipAddress: JsonObject; readonly event: Event }
  | { readonly _tag: "Event"; readonly event: Event }

/** What the IPAddress loop does. */
export type IPAddressAction =
  | { readonly _tag: "None" }
  | { readonly _tag: "Delete"; readonly event: Event }
  | { readonly _tag: "Requeue"; readonly afterMs: number }

const parentOf = (ip: JsonObject) => asObject(asObject(ip["spec"])["parentRef"])
const managedHere = (ip: JsonObject) => asString(asObject(metadataOf(ip)["labels"])[ClusterIpAllocator.managedByLabel]) === ClusterIpAllocator.controllerName
const labelsRight = (ip: JsonObject, name: string) =>
  managedHere(ip) && asString(asObject(metadataOf(ip)["labels"])[ClusterIpAllocator.familyLabel]) === (IpRange.familyOf(name) ?? "")

/**
 * The Service loop (pure): for each of the Service's cluster IPs, the repair it needs, given the
 * IPAddress objects and Services by name and the configured ranges.
 */
export const decideService = (
  service: JsonObject | undefined,
  ipAddress: (name: string) => JsonObject | undefined,
  serviceNamed: (namespace: string, name: string) => JsonObject | undefined,
  ranges: ReadonlyArray<IpRange.IpRange>
): ReadonlyArray<ServiceAction> => {
  if (service === undefined) return []
  const m = metadataOf(service)
  const target = { namespace: asString(m["namespace"]), name: asString(m["name"]) }
  const out: Array<ServiceAction> = []
  for (const raw of ClusterIpAllocator.addressesOf(service)) {
    const ip = IpRange.canonical(raw)
    if (ip === undefined) {
      out.push({ _tag: "Event", event: { type: "Warning", reason: "ClusterIPNotValid", message: `Cluster IP ${raw} is not a valid IP; please recreate Service` } })
      continue
    }
    const family = IpRange.familyOf(ip)!
    if (!ranges.some((r) => IpRange.contains(r, ip))) {
      out.push({
        _tag: "Event",
        event: { type: "Warning", reason: "ClusterIPOutOfRange", message: `Cluster IP [${family}]: ${ip} is not within any configured Service CIDR; please recreate service` }
      })
      continue
    }
    const held = ipAddress(ip)
    const fresh = ClusterIpAllocator.ipAddressFor(ip, target)
    if (held === undefined) {
      out.push({ _tag: "Create", ipAddress: fresh, event: { type: "Warning", reason: "ClusterIPNotAllocated", message: `Cluster IP [${family}]: ${ip} is not allocated; repairing` } })
      continue
    }
    const parent = parentOf(held)
    const wrongRef = {
      _tag: "Recreate" as const,
      ipAddress: fresh,
      event: { type: "Warning" as const, reason: "ClusterIPNotAllocated", message: `the ClusterIP [${family}]: ${ip} for Service ${target.namespace}/${target.name} has a wrong reference; repairing` }
    }
    if (asString(parent["group"]) !== "" || parent["resource"] !== "services") {
      out.push(wrongRef)
      continue
    }
    if (!ClusterIpAllocator.heldBy(held, target)) {
      const other = serviceNamed(asString(parent["namespace"]), asString(parent["name"]))
      if (other === undefined) out.push(wrongRef)
      else if (ClusterIpAllocator.addressesOf(other).some((x) => IpRange.canonical(x) === ip)) {
        out.push({ _tag: "Event", event: { type: "Warning", reason: "ClusterIPAlreadyAllocated", message: `Cluster IP [${family}]:${ip} was assigned to multiple services; please recreate service` } })
      }
      // Else the other Service no longer has it: the IPAddress loop deletes it, then this loop creates it.
      continue
    }
    if (!labelsRight(held, ip)) out.push({ ...wrongRef, event: { ...wrongRef.event, message: `the ClusterIP [${family}]: ${ip} for Service ${target.namespace}/${target.name} has wrong labels; repairing` } })
  }
  return out
}

/**
 * The IPAddress loop (pure): an address this allocator manages must belong to a live Service that
 * has it; a Service not found is given `graceMs` from the address's creation, since the address is
 * taken before the Service is written.
 */
export const decideIPAddress = (ipAddress: JsonObject | undefined, parent: JsonObject | undefined, now: number, graceMs: number): IPAddressAction => {
  if (ipAddress === undefined || !managedHere(ipAddress)) return { _tag: "None" }
  const name = asString(metadataOf(ipAddress)["name"])
  const ref = parentOf(ipAddress)
  if (asString(ref["group"]) !== "" || ref["resource"] !== "services") {
    return {
      _tag: "Delete",
      event: { type: "Warning", reason: "IPAddressNotAllocated", message: `IPAddress ${name} appears to have been modified, not referencing a Service ${stableJson(ref)}: cleaning up` }
    }
  }
  const svc = `${asString(ref["namespace"])}/${asString(ref["name"])}`
  if (parent === undefined) {
    const age = now - (timeMs(metadataOf(ipAddress)["creationTimestamp"]) ?? now)
    if (age < graceMs) return { _tag: "Requeue", afterMs: graceMs - age }
    return { _tag: "Delete", event: { type: "Warning", reason: "IPAddressNotAllocated", message: `IPAddress: ${name} for Service ${svc} appears to have leaked: cleaning up` } }
  }
  if (ClusterIpAllocator.addressesOf(parent).some((ip) => IpRange.canonical(ip) === name)) return { _tag: "None" }
  return { _tag: "Delete", event: { type: "Warning", reason: "IPAddressWrongReference", message: `IPAddress: ${name} for Service ${svc} has a wrong reference; cleaning up` } }
}

/** What one key is: a Service (`namespace/name`) or an IPAddress (its name). */
export const decide = (
  key: string,
  view: {
    readonly service: (namespace: string, name: string) => JsonObject | undefined
    readonly ipAddress: (name: string) => JsonObject | undefined
    readonly ranges: ReadonlyArray<IpRange.IpRange>
    readonly now: number
    readonly graceMs: number
  }
): { readonly _tag: "Service"; readonly actions: ReadonlyArray<ServiceAction> } | { readonly _tag: "IPAddress"; readonly action: IPAddressAction } => {
  const { namespace, name } = Informer.splitKey(key)
  if (namespace !== undefined) return { _tag: "Service", actions: decideService(view.service(namespace, name), view.ipAddress, view.service, view.ranges) }
  const ip = view.ipAddress(name)
  const ref = ip === undefined ? {} : parentOf(ip)
  const parent = ip === undefined ? undefined : view.service(asString(ref["namespace"]), asString(ref["name"]))
  return { _tag: "IPAddress", action: decideIPAddress(ip, parent, view.now, view.graceMs) }
}

/** Key mapper: a Service change queues the Service and every address it has or had. */
const serviceAndAddresses: Controller.KeyMapper = (change) => {
  const keys = new Set<string>([Informer.keyOf(change.object)])
  for (const s of [change.object, change.old]) {
    if (s === undefined) continue
    for (const ip of ClusterIpAllocator.addressesOf(s)) keys.add(IpRange.canonical(ip) ?? ip)
  }
  return [...keys]
}

/** Key mapper: an IPAddress change queues it and the Service it names (so a deleted one is put back). */
const addressAndParent: Controller.KeyMapper = (change) => {
  const keys = new Set<string>([Informer.keyOf(change.object)])
  for (const ip of [change.object, change.old]) {
    if (ip === undefined) continue
    const ref = parentOf(ip)
    if (asString(ref["group"]) === "" && ref["resource"] === "services" && asString(ref["namespace"]) !== "") keys.add(`${asString(ref["namespace"])}/${asString(ref["name"])}`)
  }
  return [...keys]
}

/** How the controller is configured. */
export interface Options {
  /** `--service-cluster-ip-range` (default `10.96.0.0/12`). */
  readonly range?: string
  /** How long an address whose Service is not found is kept (default 60 s). */
  readonly leakGraceMs?: number
  /** How often every Service and address is checked again regardless of changes (default 3 min, as upstream's repair interval). */
  readonly resyncMs?: number
}

const isNotFound = (e: { readonly status: { readonly reason?: string } }) => e.status.reason === "NotFound"

/** The repair reconciler. */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const parsed = ClusterIpAllocator.parseRanges(options.range ?? ClusterIpAllocator.defaultRange)
  const ranges = Either.isRight(parsed) ? parsed.right.all : []
  const graceMs = options.leakGraceMs ?? defaultLeakGraceMs
  return {
    name: "clusterip-repair",
    primary: IPAddressRef,
    reactToPrimary: false,
    watches: [
      { ref: IPAddressRef, keys: addressAndParent },
      { ref: ResourceRefs.Service, keys: serviceAndAddresses }
    ],
    resync: {
      everyMs: options.resyncMs ?? 180_000,
      keys: (informers) => [...informers.for(ResourceRefs.Service).list(), ...informers.for(IPAddressRef).list()].map(Informer.keyOf)
    },
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const services = ctx.informers.for(ResourceRefs.Service)
        const addresses = ctx.informers.for(IPAddressRef)
        const now = yield* Clock.currentTimeMillis
        const cached = decide(key, { service: (ns, n) => services.get(ns, n), ipAddress: (n) => addresses.get(undefined, n), ranges, now, graceMs })
        const quiet = cached._tag === "Service" ? cached.actions.length === 0 : cached.action._tag !== "Delete"
        if (quiet) return cached._tag === "IPAddress" && cached.action._tag === "Requeue" ? { requeueAfterMs: cached.action.afterMs } : undefined

        // Confirm with the API before changing anything: the two informers may disagree for a moment.
        const live = new Map<string, JsonObject | undefined>()
        const read = (ref: Client.ResourceRef, ns: string | undefined, n: string) =>
          ctx.client.get(ref, ns, n).pipe(
            Effect.map(Option.some),
            Effect.catchIf(isNotFound, () => Effect.succeed(Option.none<JsonObject>())),
            Effect.tap((o) => Effect.sync(() => live.set(`${ref.kind}/${ns ?? ""}/${n}`, Option.getOrUndefined(o))))
          )
        const { namespace, name } = Informer.splitKey(key)
        if (namespace !== undefined) {
          const svc = Option.getOrUndefined(yield* read(ResourceRefs.Service, namespace, name))
          for (const ip of svc === undefined ? [] : ClusterIpAllocator.addressesOf(svc)) {
            const canonical = IpRange.canonical(ip)
            if (canonical === undefined) continue
            const held = Option.getOrUndefined(yield* read(IPAddressRef, undefined, canonical))
            const ref = held === undefined ? {} : parentOf(held)
            if (held !== undefined && asString(ref["namespace"]) !== "") yield* read(ResourceRefs.Service, asString(ref["namespace"]), asString(ref["name"]))
          }
        } else {
          const held = Option.getOrUndefined(yield* read(IPAddressRef, undefined, name))
          const ref = held === undefined ? {} : parentOf(held)
          if (held !== undefined) yield* read(ResourceRefs.Service, asString(ref["namespace"]), asString(ref["name"]))
        }
        const fromLive = decide(key, {
          service: (ns, n) => live.get(`Service/${ns}/${n}`),
          ipAddress: (n) => live.get(`IPAddress//${n}`),
          ranges,
          now,
          graceMs
        })
        if (fromLive._tag === "IPAddress") {
          const action = fromLive.action
          if (action._tag === "Requeue") return { requeueAfterMs: action.afterMs }
          if (action._tag !== "Delete") return
          const held = live.get(`IPAddress//${name}`)!
          yield* ctx.events.record(held, action.event.type, action.event.reason, action.event.message)
          // Only the object we judged: a fresh allocation of the same address is not touched.
          yield* ctx.client
            .delete(IPAddressRef, undefined, name, { preconditions: { uid: metadataOf(held)["uid"], resourceVersion: metadataOf(held)["resourceVersion"] } })
            .pipe(Effect.catchIf(isNotFound, () => Effect.void))
          return
        }
        const svc = live.get(`Service/${namespace ?? ""}/${name}`)
        if (svc === undefined) return
        for (const action of fromLive.actions) {
          yield* ctx.events.record(svc, action.event.type, action.event.reason, action.event.message)
          if (action._tag === "Event") continue
          const ipName = asString(metadataOf(action.ipAddress)["name"])
          if (action._tag === "Recreate") {
            const held = live.get(`IPAddress//${ipName}`)
            const pre = held === undefined ? undefined : { uid: metadataOf(held)["uid"], resourceVersion: metadataOf(held)["resourceVersion"] }
            yield* ctx.client.delete(IPAddressRef, undefined, ipName, pre === undefined ? {} : { preconditions: pre }).pipe(Effect.catchIf(isNotFound, () => Effect.void))
          }
          yield* ctx.client.create(action.ipAddress)
        }
      })
  }
}
