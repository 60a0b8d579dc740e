/**
 * The EndpointSlice controller: the backends of every Service with a selector as
 * `discovery.k8s.io/v1` EndpointSlices, following kube-controller-manager's endpointslice
 * controller and its reconciler. Slices are named `<service>-<random>`, labelled
 * `kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by:
 * endpointslice-controller.k8s.io` (plus the Service's labels and the headless marker), controlled
 * by the Service (ownerReference), one address type each (IPv4 / IPv6, from the Service's
 * `ipFamilies`), one port set each, at most `maxEndpointsPerSlice` (default 100) endpoints each.
 * Every pod with an IP that has not finished is an endpoint: `serving` is its readiness,
 * `terminating` whether it is being deleted, `ready` is serving and not terminating (always true
 * with `publishNotReadyAddresses`), with its node, zone (the node's `topology.kubernetes.io/zone`)
 * and hostname (when the pod names the Service as its subdomain).
 *
 * Churn is kept low as upstream's reconciler does, per address type and port set:
 *   1. each existing slice keeps the endpoints still wanted (changed ones rewritten in place) and
 *      drops the rest; a slice that changed is to be updated, one left empty is to be deleted;
 *   2. new endpoints first fill the slices being updated anyway, up to the limit;
 *   3. what remains goes, in full slices, to new slices, and a last partial batch into the
 *      unchanged slice closest to full that can take it whole, else into a new slice;
 *   4. a slice to create and one to delete of the same address type become one update of the
 *      latter, so replacing a slice costs one write;
 *   5. a Service with no endpoints at all keeps one empty placeholder slice per address type.
 * Writes go creates, then updates, then deletes; a Service being deleted gets no new slices.
 * Slices of another Service of the same name (an older uid) and of address types the Service no
 * longer has are deleted.
 *
 * Departures: when the Service is gone its slices are deleted here (upstream leaves that to the
 * garbage collector through the ownerReference; doing it here is immediate and works without the
 * collector); endpoints are taken in name order where upstream takes them in map order; the
 * trigger-time annotation is derived from objects as in `Endpoints.ts`; topology hints are not
 * computed. Services without a selector (their slices are mirrored from Endpoints upstream) and
 * ExternalName Services are left alone.
 */
import { Clock, Effect } from "effect"
import { jsonEqual } from "../object/Json.js"
import type * as Client from "../client/Client.js"
import { RegionLabel } from "../model/Meta.js"
import type * as Controller from "./Controller.js"
import * as Endpoints from "./Endpoints.js"
import * as Informer from "../informer/Informer.js"
import * as Pods from "../object/Pods.js"
import { type JsonObject, asArray, asObject, asString } from "../object/Json.js"
import { isControlledBy, isTerminating, labelsOf, metadataOf, ownerReference, rfc3339 } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"


/** The EndpointSlice resource. */
export const EndpointSliceRef: Client.ResourceRef = { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice" }


/** The label naming a slice's Service. */
export const ServiceNameLabel = "kubernetes.io/service-name"

/** The label naming the controller that manages a slice. */
export const ManagedByLabel = "endpointslice.kubernetes.io/managed-by"

/** This controller's `managed-by` value. */
export const ControllerName = "endpointslice-controller.k8s.io"

/** kube-controller-manager's default `--max-endpoints-per-slice`. */
export const defaultMaxEndpointsPerSlice = 100

const ZoneLabel = "topology.kubernetes.io/zone"

/** The address types slices carry. */
export type AddressType = "IPv4" | "IPv6"

/**
 * The address types of a Service's slices (upstream's getAddressTypesForService): its
 * `ipFamilies`; else its cluster IP's family; else (headless without families) both.
 */
export const addressTypesFor = (service: JsonObject): ReadonlyArray<AddressType> => {
  const spec = asObject(service["spec"])
  const families = asArray(spec["ipFamilies"]).filter((f): f is AddressType => f === "IPv4" || f === "IPv6")
  if (families.length > 0) return [...new Set(families)]
  if (Endpoints.isServiceIPSet(service)) return [Endpoints.isIPv6(asString(spec["clusterIP"])) ? "IPv6" : "IPv4"]
  return ["IPv4", "IPv6"]
}

/** A slice port. */
export interface EndpointPort {
  readonly name: string
  readonly port: number
  readonly protocol: string
  readonly appProtocol?: string
}

/** The ports a pod serves for the Service (unresolvable named ports are left out). */
export const portsFor = (service: JsonObject, pod: JsonObject): ReadonlyArray<EndpointPort> =>
  asArray(asObject(service["spec"])["ports"]).flatMap((p) => {
    const sp = asObject(p)
    const port = Endpoints.findPort(pod, sp)
    if (port === undefined) return []
    return [{ name: asString(sp["name"]), port, protocol: asString(sp["protocol"]) || "TCP", ...(asString(sp["appProtocol"]) === "" ? {} : { appProtocol: asString(sp["appProtocol"]) }) }]
  })

/** The key of a port set (order-free, as upstream's PortMapKey). */
export const portSetKey = (ports: ReadonlyArray<unknown>): string =>
  ports
    .map((p) => {
      const o = asObject(p)
      return JSON.stringify([asString(o["name"]), o["port"] ?? null, asString(o["protocol"]) || "TCP", asString(o["appProtocol"])])
    })
    .sort()
    .join(",")

/** The endpoint of a pod in a slice of `addressType`, or undefined when the pod has no such address. */
export const endpointFor = (pod: JsonObject, node: JsonObject | undefined, service: JsonObject, addressType: AddressType): JsonObject | undefined => {
  const addresses = Endpoints.podIPs(pod).filter((ip) => Endpoints.isIPv6(ip) === (addressType === "IPv6"))
  if (addresses.length === 0) return undefined
  const serving = Pods.isReady(pod)
  const terminating = isTerminating(pod)
  // Compatibility: `ready` is never true for a terminating pod unless unready pods are published.
  const ready = asObject(service["spec"])["publishNotReadyAddresses"] === true || (serving && !terminating)
  const m = metadataOf(pod)
  const spec = asObject(pod["spec"])
  const zone = node === undefined ? "" : asString(labelsOf(node)[ZoneLabel])
  return {
    addresses: addresses.slice(0, 1),
    conditions: { ready, serving, terminating },
    ...(Endpoints.shouldSetHostname(pod, service) ? { hostname: asString(spec["hostname"]) } : {}),
    targetRef: { kind: "Pod", namespace: asString(m["namespace"]), name: asString(m["name"]), uid: asString(m["uid"]) },
    ...(asString(spec["nodeName"]) === "" ? {} : { nodeName: asString(spec["nodeName"]) }),
    ...(zone === "" ? {} : { zone })
  }
}

// Informer objects are replaced on change, never mutated, so the endpoint of one version of a
// pod is computed once per Service context (a reconcile looks at every pod of the Service).
const endpointCache = new WeakMap<JsonObject, Map<string, JsonObject | undefined>>()
const cachedEndpoint = (pod: JsonObject, node: JsonObject | undefined, service: JsonObject, addressType: AddressType): JsonObject | undefined => {
  const m = metadataOf(service)
  const zone = node === undefined ? "" : asString(labelsOf(node)[ZoneLabel])
  const context = `${addressType}|${String(asObject(service["spec"])["publishNotReadyAddresses"] === true)}|${asString(m["namespace"])}/${asString(m["name"])}|${zone}`
  let byContext = endpointCache.get(pod)
  if (byContext === undefined) endpointCache.set(pod, (byContext = new Map()))
  if (!byContext.has(context)) byContext.set(context, endpointFor(pod, node, service, addressType))
  return byContext.get(context)
}

// The stored endpoint last found equal to a wanted one (both objects are stable between changes).
const equalTo = new WeakMap<JsonObject, JsonObject>()
const sameEndpoint = (want: JsonObject, stored: JsonObject): boolean => {
  if (equalTo.get(stored) === want) return true
  const same = jsonEqual(want, stored)
  if (same) equalTo.set(stored, want)
  return same
}

const namedTargetPorts = (service: JsonObject): boolean =>
  asArray(asObject(service["spec"])["ports"]).some((p) => {
    const t = asObject(p)["targetPort"]
    return typeof t === "string" && !/^\d+$/.test(t)
  })

// An endpoint's identity across rewrites: the pod (by uid) and its address.
const endpointId = (e: unknown): string => {
  const ep = asObject(e)
  return `${asString(asObject(ep["targetRef"])["uid"])}/${asString(asArray(ep["addresses"])[0])}`
}
const endpointName = (e: unknown) => asString(asObject(asObject(e)["targetRef"])["name"])

/** The labels a slice of this Service carries. */
export const sliceLabels = (service: JsonObject): Record<string, string> =>
  Endpoints.derivedLabels(service, [ServiceNameLabel, ManagedByLabel], { [ServiceNameLabel]: asString(metadataOf(service)["name"]), [ManagedByLabel]: ControllerName })

/** Whether a slice is controlled by this Service (this uid). */
export const ownedBy = (slice: JsonObject, service: JsonObject): boolean => isControlledBy(slice, asString(metadataOf(service)["uid"]))

/** What one reconcile of a Service's slices does. */
export interface Plan {
  readonly create: ReadonlyArray<JsonObject>
  /** Full slices to write over the stored ones (resourceVersion kept for compare-and-swap). */
  readonly update: ReadonlyArray<JsonObject>
  readonly delete: ReadonlyArray<JsonObject>
  /** Pods left out because their node is not known yet; the Service should be looked at again. */
  readonly skipped: number
}

/** What `decide` looks at. */
export interface Input {
  /** The Service, or undefined when it is gone. */
  readonly service: JsonObject | undefined
  /** The pods it selects. */
  readonly pods: ReadonlyArray<JsonObject>
  /** Nodes by name (for zones); a pod on an unknown node is skipped, as upstream does. */
  readonly node: (name: string) => JsonObject | undefined
  /** The slices this controller manages for the Service's name. */
  readonly slices: ReadonlyArray<JsonObject>
  readonly maxEndpointsPerSlice: number
  readonly now: number
}

const emptyPlan: Plan = { create: [], update: [], delete: [], skipped: 0 }

const newSlice = (service: JsonObject, addressType: AddressType, ports: ReadonlyArray<EndpointPort>, labels: Record<string, string>): JsonObject => {
  const m = metadataOf(service)
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { generateName: `${asString(m["name"])}-`, namespace: m["namespace"], labels, ownerReferences: [ownerReference(service)] },
    addressType,
    endpoints: [],
    ports: [...ports]
  }
}

// The slice with new content; the region label the API server stamped on it is kept.
const withEndpoints = (slice: JsonObject, endpoints: ReadonlyArray<JsonObject>, ports: ReadonlyArray<EndpointPort>, labels: Record<string, string>): JsonObject => {
  const region = labelsOf(slice)[RegionLabel]
  return { ...slice, metadata: { ...metadataOf(slice), labels: region === undefined ? labels : { ...labels, [RegionLabel]: region } }, endpoints: [...endpoints], ports: [...ports] }
}

const endpointsOf = (slice: JsonObject): ReadonlyArray<JsonObject> => asArray(slice["endpoints"]).map(asObject)

/**
 * The slice that is closest to full once `n` endpoints are added and still within `max`
 * (upstream's getSliceToFill), or undefined.
 */
export const sliceToFill = (slices: ReadonlyArray<JsonObject>, n: number, max: number): JsonObject | undefined => {
  let best: JsonObject | undefined
  for (const s of slices) {
    const size = endpointsOf(s).length
    if (size + n <= max && (best === undefined || size > endpointsOf(best).length)) best = s
  }
  return best
}

interface Changes {
  readonly create: Array<JsonObject>
  readonly update: Array<JsonObject>
  readonly delete: Array<JsonObject>
}

// Steps 1–3 of the header for one address type and port set.
const reconcilePortSet = (
  service: JsonObject,
  addressType: AddressType,
  ports: ReadonlyArray<EndpointPort>,
  existing: ReadonlyArray<JsonObject>,
  desired: ReadonlyArray<JsonObject>,
  labels: Record<string, string>,
  max: number,
  out: Changes
) => {
  const wanted = new Map(desired.map((e) => [endpointId(e), e]))
  const updating: Array<{ base: JsonObject; endpoints: Array<JsonObject> }> = []
  const unchanged: Array<JsonObject> = []
  for (const slice of existing) {
    let changed = !Endpoints.sameLabels(labelsOf(slice), labels) || !jsonEqual(asArray(slice["ports"]), ports)
    const kept: Array<JsonObject> = []
    for (const e of endpointsOf(slice)) {
      const want = wanted.get(endpointId(e))
      if (want === undefined) {
        changed = true
        continue
      }
      if (!sameEndpoint(want, e)) changed = true
      kept.push(want)
      wanted.delete(endpointId(e))
    }
    if (!changed) unchanged.push(slice)
    else if (kept.length === 0) out.delete.push(slice)
    else updating.push({ base: slice, endpoints: kept })
  }
  // Endpoints in name order, so a given set of pods always packs the same way.
  const remaining = [...wanted.values()].sort((a, b) => endpointName(a).localeCompare(endpointName(b)) || endpointId(a).localeCompare(endpointId(b)))
  for (const u of updating) while (u.endpoints.length < max && remaining.length > 0) u.endpoints.push(remaining.shift()!)
  while (remaining.length > 0) {
    const fill = remaining.length < max ? sliceToFill(unchanged, remaining.length, max) : undefined
    const target = fill === undefined ? { base: newSlice(service, addressType, ports, labels), endpoints: [] as Array<JsonObject> } : { base: fill, endpoints: [...endpointsOf(fill)] }
    if (fill !== undefined) unchanged.splice(unchanged.indexOf(fill), 1)
    while (target.endpoints.length < max && remaining.length > 0) target.endpoints.push(remaining.shift()!)
    if (fill === undefined) out.create.push(withEndpoints(target.base, target.endpoints, ports, labels))
    else updating.push(target)
  }
  for (const u of updating) out.update.push(withEndpoints(u.base, u.endpoints, ports, labels))
}

// An existing slice that is exactly the placeholder this Service would get.
const isPlaceholder = (slice: JsonObject, service: JsonObject, addressType: AddressType) =>
  slice["addressType"] === addressType &&
  endpointsOf(slice).length === 0 &&
  asArray(slice["ports"]).length === 0 &&
  ownedBy(slice, service) &&
  Endpoints.sameLabels(labelsOf(slice), sliceLabels(service))

/**
 * The slice writes a Service needs (pure), by upstream's reconciler algorithm (see the header):
 * per address type, group wanted endpoints by port set, reconcile each group against the slices
 * that have that port set, keep a placeholder for a Service without endpoints, then turn
 * create+delete pairs into updates.
 */
export const decide = (input: Input): Plan => {
  const { service, slices } = input
  if (service === undefined) return { ...emptyPlan, delete: slices }
  if (!Endpoints.managed(service)) return emptyPlan
  const max = Math.max(1, Math.min(input.maxEndpointsPerSlice, 1000))
  const labels = sliceLabels(service)
  const types = addressTypesFor(service)
  const out: Changes = { create: [], update: [], delete: [] }
  let skipped = 0
  for (const s of slices) if (!types.includes(s["addressType"] as AddressType)) out.delete.push(s)
  for (const addressType of types) {
    const existing = slices.filter((s) => s["addressType"] === addressType)
    const deletesBefore = out.delete.length
    const createsBefore = out.create.length
    const byPorts = new Map<string, Array<JsonObject>>()
    for (const s of existing) {
      if (!ownedBy(s, service)) {
        out.delete.push(s)
        continue
      }
      const key = portSetKey(asArray(s["ports"]))
      byPorts.set(key, [...(byPorts.get(key) ?? []), s])
    }
    const desired = new Map<string, { ports: ReadonlyArray<EndpointPort>; endpoints: Array<JsonObject> }>()
    // Numeric target ports resolve the same for every pod: computed once.
    const fixed = namedTargetPorts(service) ? undefined : { ports: portsFor(service, {}), key: "" }
    if (fixed !== undefined) fixed.key = portSetKey(fixed.ports)
    for (const pod of input.pods) {
      if (!Endpoints.shouldPodBeInEndpoints(pod, true)) continue
      const ports = fixed?.ports ?? portsFor(service, pod)
      const key = fixed?.key ?? portSetKey(ports)
      let group = desired.get(key)
      if (group === undefined) desired.set(key, (group = { ports, endpoints: [] }))
      const nodeName = asString(asObject(pod["spec"])["nodeName"])
      const node = nodeName === "" ? undefined : input.node(nodeName)
      if (nodeName !== "" && node === undefined) {
        skipped++
        continue
      }
      const endpoint = cachedEndpoint(pod, node, service, addressType)
      if (endpoint !== undefined) group.endpoints.push(endpoint)
    }
    for (const [key, group] of desired) {
      reconcilePortSet(service, addressType, group.ports, byPorts.get(key) ?? [], group.endpoints, labels, max, out)
      byPorts.delete(key)
    }
    for (const rest of byPorts.values()) out.delete.push(...rest)
    // A Service without endpoints keeps one placeholder slice, so readers can tell "no backends"
    // from "not processed yet".
    const deletedHere = out.delete.slice(deletesBefore)
    if (existing.length === deletedHere.length && out.create.length === createsBefore) {
      if (deletedHere.length === 1 && isPlaceholder(deletedHere[0]!, service, addressType)) out.delete.splice(deletesBefore, 1)
      else out.create.push(newSlice(service, addressType, [], labels))
    }
  }
  // A create and a delete of the same address type become one update of the deleted slice.
  for (let i = 0; i < out.delete.length && out.create.length > 0; ) {
    const gone = out.delete[i]!
    const made = out.create[out.create.length - 1]!
    if (gone["addressType"] === made["addressType"] && ownedBy(gone, service)) {
      out.create.pop()
      out.update.push({ ...made, metadata: { ...metadataOf(gone), labels: metadataOf(made)["labels"] } })
      out.delete.splice(i, 1)
    } else i++
  }
  const trigger = rfc3339(Endpoints.triggerTime(service, input.pods, newestTrigger(slices), input.now))
  const stamp = (s: JsonObject): JsonObject => ({
    ...s,
    metadata: { ...metadataOf(s), annotations: { ...(asObject(metadataOf(s)["annotations"]) as Record<string, string>), [Endpoints.LastChangeTriggerTimeAnnotation]: trigger } }
  })
  return {
    create: isTerminating(service) ? [] : out.create.map(stamp),
    update: out.update.map(stamp),
    delete: out.delete,
    skipped
  }
}

const newestTrigger = (slices: ReadonlyArray<JsonObject>): string | undefined => {
  let newest: string | undefined
  for (const s of slices) {
    const t = asString(asObject(metadataOf(s)["annotations"])[Endpoints.LastChangeTriggerTimeAnnotation])
    if (t !== "" && (newest === undefined || t > newest)) newest = t
  }
  return newest
}

/** The slices this controller manages for a Service name, from the informer. */
export const slicesOf = (informers: Informer.Informers, namespace: string | undefined, name: string): ReadonlyArray<JsonObject> =>
  informers
    .for(EndpointSliceRef)
    .list(namespace)
    .filter((s) => labelsOf(s)[ServiceNameLabel] === name && labelsOf(s)[ManagedByLabel] === ControllerName)

/** Key mapper: a slice change queues its Service (by the service-name label) when this controller manages it. */
const serviceOfSlice: Controller.KeyMapper = (change) => {
  const keys = new Set<string>()
  for (const s of [change.object, change.old]) {
    if (s === undefined) continue
    const labels = labelsOf(s)
    const service = labels[ServiceNameLabel]
    if (service !== undefined && labels[ManagedByLabel] === ControllerName) keys.add(`${asString(metadataOf(s)["namespace"])}/${service}`)
  }
  return [...keys]
}

/** How the controller is configured. */
export interface Options {
  /** Endpoints per slice at most (default 100, at most 1000). */
  readonly maxEndpointsPerSlice?: number
  readonly workers?: number
}

/** The EndpointSlice reconciler. */
export const reconciler = (options: Options = {}): Controller.Reconciler => ({
  name: "endpointslice",
  primary: Endpoints.ServiceRef,
  watches: [
    { ref: ResourceRefs.Pod, keys: Endpoints.servicesOfPod },
    { ref: EndpointSliceRef, keys: serviceOfSlice }
  ],
  reads: [ResourceRefs.Node],
  ...(options.workers === undefined ? {} : { workers: options.workers }),
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const { namespace, name } = Informer.splitKey(key)
      const service = ctx.informers.for(Endpoints.ServiceRef).get(namespace, name)
      const nodes = ctx.informers.for(ResourceRefs.Node)
      const plan = decide({
        service,
        pods: service === undefined ? [] : Endpoints.podsOf(service, ctx.informers),
        node: (n) => nodes.get(undefined, n),
        slices: slicesOf(ctx.informers, namespace, name),
        maxEndpointsPerSlice: options.maxEndpointsPerSlice ?? defaultMaxEndpointsPerSlice,
        now: yield* Clock.currentTimeMillis
      })
      // Creates first, so that a replaced endpoint is never missing from every slice.
      for (const s of plan.create) {
        yield* ctx.client.create(s).pipe(Effect.catchIf((e) => e.status.reason === "Forbidden" && /being terminated/.test(e.status.message ?? ""), () => Effect.void))
      }
      for (const s of plan.update) yield* ctx.client.update(s)
      for (const s of plan.delete) {
        yield* ctx.client.delete(EndpointSliceRef, namespace, asString(metadataOf(s)["name"])).pipe(Effect.catchIf((e) => e.status.reason === "NotFound", () => Effect.void))
      }
      // Pods on nodes not seen yet: look again shortly (upstream retries with backoff).
      return plan.skipped > 0 ? { requeueAfterMs: 1000 } : undefined
    })
})
