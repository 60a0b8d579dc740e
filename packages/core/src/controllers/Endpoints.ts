/**
 * The Endpoints controller: for every Service with a selector, an `Endpoints` object of the same
 * name listing the pods behind it, following kube-controller-manager's endpoint controller. Pods
 * with an IP that are not finished count; ready ones go to `addresses`, unready ones to
 * `notReadyAddresses` (all to `addresses` with `publishNotReadyAddresses`); pods being deleted are
 * left out (unless `publishNotReadyAddresses`). Each service port is resolved per pod from its
 * `targetPort` (a number, or a named container port of the same protocol; a pod without that name
 * does not serve that port), and addresses are packed into subsets by the set of ports they
 * serve (upstream's RepackSubsets). The object carries the Service's labels,
 * `endpointslice.kubernetes.io/skip-mirror: "true"` (the slice mirroring controller must not copy
 * it back), `service.kubernetes.io/headless` for Services without a cluster IP, the
 * `endpoints.kubernetes.io/last-change-trigger-time` annotation, and is truncated to 1000
 * addresses with `endpoints.kubernetes.io/over-capacity: truncated` as upstream does. Services
 * without a selector, and ExternalName Services, are left alone; when a Service goes, so does its
 * Endpoints object.
 *
 * Departures: subsets, addresses and ports are ordered by value (IP, name) where upstream orders
 * by a hash — same content, different order; the trigger time is derived from the objects (the
 * newest creation or readiness transition among the Service and its pods, or the time of the
 * write when the change left no timestamp, such as a pod that went away) instead of upstream's
 * in-memory tracker of informer events.
 *
 * The helpers both endpoint controllers share (which pods a Service selects, which count, a pod's
 * port for a service port, the key mapper from pod changes to Services) live here and are used by
 * `EndpointSlice.ts`.
 */
import { Clock, Effect } from "effect"
import { jsonEqual } from "../object/Json.js"
import type * as Client from "../client/Client.js"
import { RegionLabel } from "../model/Meta.js"
import type * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import * as Pods from "../object/Pods.js"
import { type JsonObject, asArray, asObject, asString, stableJson } from "../object/Json.js"
import { isTerminating, metadataOf, rfc3339, timeMs } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"


/** The Service resource. */
export const ServiceRef: Client.ResourceRef = { apiVersion: "v1", kind: "Service" }

/** The Endpoints resource. */
export const EndpointsRef: Client.ResourceRef = { apiVersion: "v1", kind: "Endpoints" }


/** The label telling the EndpointSlice mirroring controller not to mirror an Endpoints object. */
export const SkipMirrorLabel = "endpointslice.kubernetes.io/skip-mirror"

/** The label on the endpoints of a Service without a cluster IP. */
export const HeadlessLabel = "service.kubernetes.io/headless"

/** When the change an endpoints object reflects happened (RFC 3339). */
export const LastChangeTriggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

/** Set to `truncated` when an Endpoints object would hold more than `maxCapacity` addresses. */
export const OverCapacityAnnotation = "endpoints.kubernetes.io/over-capacity"

/** The most addresses an Endpoints object holds. */
export const maxCapacity = 1000

const strings = (v: unknown): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, x] of Object.entries(asObject(v))) if (typeof x === "string") out[k] = x
  return out
}

// ---- shared by both endpoint controllers --------------------------------------------------

/** The Service's selector, or undefined when it has none (an empty map is none, as Go stores it). */
export const selectorOf = (service: JsonObject): Record<string, string> | undefined => {
  const s = strings(asObject(service["spec"])["selector"])
  return Object.keys(s).length === 0 ? undefined : s
}

/** Whether the Service's selector selects the pod (equality on every key, as `labels.SelectorFromSet`). */
export const selects = (service: JsonObject, pod: JsonObject): boolean => {
  const selector = selectorOf(service)
  if (selector === undefined || asString(metadataOf(pod)["namespace"]) !== asString(metadataOf(service)["namespace"])) return false
  const labels = strings(metadataOf(pod)["labels"])
  return Object.entries(selector).every(([k, v]) => labels[k] === v)
}

/** Whether the endpoint controllers manage this Service: it has a selector and is not ExternalName. */
export const managed = (service: JsonObject): boolean => selectorOf(service) !== undefined && asObject(service["spec"])["type"] !== "ExternalName"

/** Whether the Service has a cluster IP (not headless, not ExternalName). */
export const isServiceIPSet = (service: JsonObject): boolean => {
  const ip = asString(asObject(service["spec"])["clusterIP"])
  return ip !== "" && ip !== "None"
}

/** The pod's IPs (`status.podIPs`, else `status.podIP`). */
export const podIPs = (pod: JsonObject): ReadonlyArray<string> => {
  const status = asObject(pod["status"])
  const ips = asArray(status["podIPs"]).map((p) => asString(asObject(p)["ip"])).filter((ip) => ip !== "")
  return ips.length > 0 ? ips : asString(status["podIP"]) === "" ? [] : [asString(status["podIP"])]
}

/** Whether an address is IPv6 (the one distinction endpoint families need). */
export const isIPv6 = (ip: string): boolean => ip.includes(":")

/**
 * Whether a pod belongs in endpoints at all (upstream's ShouldPodBeInEndpoints): it has an IP and
 * has not finished; a pod being deleted only with `includeTerminating`.
 */
export const shouldPodBeInEndpoints = (pod: JsonObject, includeTerminating: boolean): boolean => {
  const phase = Pods.phase(pod)
  if (phase === "Succeeded" || phase === "Failed") return false
  if (podIPs(pod).length === 0) return false
  return includeTerminating || !isTerminating(pod)
}

/**
 * The pod port a service port reaches (upstream's FindPort): a numeric `targetPort` as is; a named
 * one is the container port of that name and protocol (sidecar init containers included), or
 * undefined when the pod has none.
 */
export const findPort = (pod: JsonObject, servicePort: Record<string, unknown>): number | undefined => {
  const protocol = asString(servicePort["protocol"]) || "TCP"
  const port = containerPortOf(pod, servicePort, protocol)
  return port === undefined ? undefined : (hostPortOf(pod, port, protocol) ?? port)
}

/**
 * Fleet's host-network mode: the agent gave container port `port` a host port of its own
 * (`status.hostPorts`), and that is where the pod answers.
 */
const hostPortOf = (pod: JsonObject, port: number, protocol: string): number | undefined => {
  for (const h of asArray(asObject(pod["status"])["hostPorts"])) {
    const m = asObject(h)
    if (m["containerPort"] === port && (asString(m["protocol"]) || "TCP") === protocol && typeof m["hostPort"] === "number") return m["hostPort"]
  }
  return undefined
}

const containerPortOf = (pod: JsonObject, servicePort: Record<string, unknown>, protocol: string): number | undefined => {
  const target = servicePort["targetPort"] ?? servicePort["port"]
  if (typeof target === "number") return target
  if (typeof target !== "string") return undefined
  if (/^\d+$/.test(target)) return Number(target)
  const spec = asObject(pod["spec"])
  const containers = [...asArray(spec["containers"]), ...asArray(spec["initContainers"]).filter((c) => asObject(c)["restartPolicy"] === "Always")]
  for (const c of containers) {
    for (const p of asArray(asObject(c)["ports"])) {
      const port = asObject(p)
      if (port["name"] === target && (asString(port["protocol"]) || "TCP") === protocol && typeof port["containerPort"] === "number") return port["containerPort"]
    }
  }
  return undefined
}

/** Whether the endpoint of a pod gets the pod's hostname (the pod names the Service as its subdomain). */
export const shouldSetHostname = (pod: JsonObject, service: JsonObject): boolean => {
  const spec = asObject(pod["spec"])
  return asString(spec["hostname"]) !== "" && asString(spec["subdomain"]) === asString(metadataOf(service)["name"]) && asString(metadataOf(pod)["namespace"]) === asString(metadataOf(service)["namespace"])
}

/** The pods a Service selects, from the pod informer. */
export const podsOf = (service: JsonObject, informers: Informer.Informers): ReadonlyArray<JsonObject> =>
  informers
    .for(ResourceRefs.Pod)
    .list(asString(metadataOf(service)["namespace"]))
    .filter((p) => selects(service, p))

// What of a pod endpoints depend on; other changes (most status updates) queue nothing.
const endpointView = (pod: JsonObject): string => {
  const spec = asObject(pod["spec"])
  return stableJson({
    labels: metadataOf(pod)["labels"],
    uid: metadataOf(pod)["uid"],
    ips: podIPs(pod),
    ready: Pods.isReady(pod),
    readySince: Pods.condition(pod, "Ready")?.["lastTransitionTime"],
    terminating: isTerminating(pod),
    phase: Pods.phase(pod),
    nodeName: spec["nodeName"],
    hostname: spec["hostname"],
    subdomain: spec["subdomain"],
    ports: [...asArray(spec["containers"]), ...asArray(spec["initContainers"])].map((c) => asObject(c)["ports"]),
    hostPorts: asObject(pod["status"])["hostPorts"]
  })
}

/** Key mapper: a pod change queues the Services (old and new labels) that select the pod. */
export const servicesOfPod: Controller.KeyMapper = (change, informers) => {
  const services = informers.for(ServiceRef)
  const namespace = asString(metadataOf(change.object)["namespace"])
  // Most pod changes are in namespaces without Services: no need to compare what endpoints see.
  if (services.list(namespace).length === 0 && (change.old === undefined || asString(metadataOf(change.old)["namespace"]) === namespace)) return []
  if (change.type === "MODIFIED" && change.old !== undefined && endpointView(change.old) === endpointView(change.object)) return []
  const keys = new Set<string>()
  for (const pod of [change.object, change.old]) {
    if (pod === undefined) continue
    for (const svc of services.list(asString(metadataOf(pod)["namespace"]))) if (selects(svc, pod)) keys.add(Informer.keyOf(svc))
  }
  return [...keys]
}

/**
 * The trigger time to record (ms): the newest creation or readiness change among the Service and
 * its pods, or `now` when that is not newer than what the object already records (the change left
 * no timestamp of its own, as a pod that went away).
 */
export const triggerTime = (service: JsonObject, pods: ReadonlyArray<JsonObject>, previous: unknown, now: number): number => {
  // API times are RFC 3339 at second precision, so the newest one is the greatest string: one parse, not one per pod.
  let latest = asString(metadataOf(service)["creationTimestamp"])
  for (const p of pods) {
    const created = asString(metadataOf(p)["creationTimestamp"])
    if (created > latest) latest = created
    const ready = asString(Pods.condition(p, "Ready")?.["lastTransitionTime"])
    if (ready > latest) latest = ready
  }
  const newest = timeMs(latest) ?? 0
  const before = timeMs(previous)
  return before !== undefined && newest <= before ? now : newest
}

/** Labels of an object derived from a Service: its labels, the headless marker, and `extra`. */
export const derivedLabels = (service: JsonObject, reserved: ReadonlyArray<string>, extra: Record<string, string>): Record<string, string> => {
  const labels: Record<string, string> = {}
  for (const [k, v] of Object.entries(strings(metadataOf(service)["labels"]))) if (!reserved.includes(k) && k !== HeadlessLabel) labels[k] = v
  if (!isServiceIPSet(service)) labels[HeadlessLabel] = ""
  return { ...labels, ...extra }
}

/** Label maps equal, ignoring the region label the API server stamps on every new object. */
export const sameLabels = (a: Record<string, string>, b: Record<string, string>): boolean => {
  const { [RegionLabel]: _a, ...x } = a
  const { [RegionLabel]: _b, ...y } = b
  return jsonEqual(x, y)
}

// ---- the Endpoints decision ---------------------------------------------------------------

/** An address as an Endpoints subset lists it. */
export interface Address {
  readonly ip: string
  readonly nodeName?: string
  readonly hostname?: string
  readonly targetRef: { readonly kind: "Pod"; readonly namespace: string; readonly name: string; readonly uid: string }
}

/** A port as an Endpoints subset lists it. */
export interface Port {
  readonly name?: string
  readonly port: number
  readonly protocol: string
  readonly appProtocol?: string
}

/** Addresses sharing a set of ports. */
export interface Subset {
  readonly addresses?: ReadonlyArray<Address>
  readonly notReadyAddresses?: ReadonlyArray<Address>
  readonly ports?: ReadonlyArray<Port>
}

// The family endpoints of this Service use: its cluster IP's, else its first ipFamily, else the pod's.
const addressFor = (service: JsonObject, pod: JsonObject): Address | undefined => {
  const spec = asObject(service["spec"])
  const ips = podIPs(pod)
  const families = asArray(spec["ipFamilies"]).map(asString)
  const wantV6 = isServiceIPSet(service) ? isIPv6(asString(spec["clusterIP"])) : families.length > 0 ? families[0] === "IPv6" : isIPv6(ips[0] ?? "")
  const ip = ips.find((x) => isIPv6(x) === wantV6)
  if (ip === undefined) return undefined
  const m = metadataOf(pod)
  const podSpec = asObject(pod["spec"])
  return {
    ip,
    ...(asString(podSpec["nodeName"]) === "" ? {} : { nodeName: asString(podSpec["nodeName"]) }),
    ...(shouldSetHostname(pod, service) ? { hostname: asString(podSpec["hostname"]) } : {}),
    targetRef: { kind: "Pod", namespace: asString(m["namespace"]), name: asString(m["name"]), uid: asString(m["uid"]) }
  }
}

const portKey = (p: Port) => `${p.name ?? ""}/${p.port}/${p.protocol}/${p.appProtocol ?? ""}`
const addressKey = (a: Address) => `${a.ip}/${a.targetRef.uid}`
const byAddress = (a: Address, b: Address) => (a.ip === b.ip ? a.targetRef.uid.localeCompare(b.targetRef.uid) : compareIPs(a.ip, b.ip))
const byPort = (a: Port, b: Port) => (a.name ?? "").localeCompare(b.name ?? "") || a.port - b.port || a.protocol.localeCompare(b.protocol)

// Numeric order for IPv4 (10.0.0.9 before 10.0.0.10); text order otherwise.
const compareIPs = (a: string, b: string): number => {
  if (!isIPv6(a) && !isIPv6(b)) {
    const x = a.split(".").map(Number)
    const y = b.split(".").map(Number)
    for (let i = 0; i < 4; i++) if (x[i] !== y[i]) return (x[i] ?? 0) - (y[i] ?? 0)
    return 0
  }
  return a.localeCompare(b)
}

/**
 * Subsets for a Service's pods (pure; upstream's per-pod subsets then RepackSubsets): each address
 * serves the ports its pod resolves, addresses serving the same port set share a subset. A Service
 * without ports lists addresses only when headless.
 */
export const subsetsFor = (service: JsonObject, pods: ReadonlyArray<JsonObject>): ReadonlyArray<Subset> => {
  const spec = asObject(service["spec"])
  const tolerateUnready = spec["publishNotReadyAddresses"] === true
  const servicePorts = asArray(spec["ports"]).map(asObject)
  // port key → the addresses serving it (with readiness); -1 stands for "no ports".
  const served = new Map<string, { port: Port | undefined; addresses: Map<string, { address: Address; ready: boolean }> }>()
  const add = (port: Port | undefined, address: Address, ready: boolean) => {
    const key = port === undefined ? "-1" : portKey(port)
    let entry = served.get(key)
    if (entry === undefined) served.set(key, (entry = { port, addresses: new Map() }))
    entry.addresses.set(addressKey(address), { address, ready })
  }
  for (const pod of pods) {
    if (!shouldPodBeInEndpoints(pod, tolerateUnready)) continue
    const address = addressFor(service, pod)
    if (address === undefined) continue
    const ready = tolerateUnready || Pods.isReady(pod)
    if (servicePorts.length === 0) {
      if (asString(spec["clusterIP"]) === "None") add(undefined, address, ready)
      continue
    }
    for (const sp of servicePorts) {
      const n = findPort(pod, sp)
      if (n === undefined) continue
      const port: Port = {
        ...(asString(sp["name"]) === "" ? {} : { name: asString(sp["name"]) }),
        port: n,
        protocol: asString(sp["protocol"]) || "TCP",
        ...(asString(sp["appProtocol"]) === "" ? {} : { appProtocol: asString(sp["appProtocol"]) })
      }
      add(port, address, ready)
    }
  }
  // Ports whose address sets are equal form one subset.
  const groups = new Map<string, { ports: Array<Port>; addresses: ReadonlyArray<{ address: Address; ready: boolean }> }>()
  for (const { port, addresses } of served.values()) {
    const entries = [...addresses.values()].sort((a, b) => byAddress(a.address, b.address))
    const key = entries.map((e) => `${addressKey(e.address)}/${e.ready}`).join(",")
    let group = groups.get(key)
    if (group === undefined) groups.set(key, (group = { ports: [], addresses: entries }))
    if (port !== undefined) group.ports.push(port)
  }
  const subsets = [...groups.values()].map((g): Subset => {
    const ready = g.addresses.filter((e) => e.ready).map((e) => e.address)
    const notReady = g.addresses.filter((e) => !e.ready).map((e) => e.address)
    return {
      ...(ready.length > 0 ? { addresses: ready } : {}),
      ...(notReady.length > 0 ? { notReadyAddresses: notReady } : {}),
      ...(g.ports.length > 0 ? { ports: [...g.ports].sort(byPort) } : {})
    }
  })
  const first = (s: Subset) => (s.addresses ?? s.notReadyAddresses ?? [])[0]
  return subsets.sort((a, b) => {
    const pa = (a.ports ?? []).map(portKey).join(",")
    const pb = (b.ports ?? []).map(portKey).join(",")
    if (pa !== pb) return pa.localeCompare(pb)
    const x = first(a)
    const y = first(b)
    return x === undefined || y === undefined ? 0 : byAddress(x, y)
  })
}

/**
 * At most `maxCapacity` addresses (upstream's truncateEndpoints): ready addresses first, each
 * subset keeping its share of the room; answers whether anything was cut.
 */
export const truncate = (subsets: ReadonlyArray<Subset>, capacity = maxCapacity): { readonly subsets: ReadonlyArray<Subset>; readonly truncated: boolean } => {
  let totalReady = 0
  let totalNotReady = 0
  for (const s of subsets) {
    totalReady += (s.addresses ?? []).length
    totalNotReady += (s.notReadyAddresses ?? []).length
  }
  if (totalReady + totalNotReady <= capacity) return { subsets, truncated: false }
  const truncateReady = totalReady > capacity
  const max = truncateReady ? capacity : capacity - totalReady
  const total = truncateReady ? totalReady : totalNotReady
  let room = max
  const out = subsets.map((s): Subset => {
    const inSubset = (truncateReady ? s.addresses : s.notReadyAddresses) ?? []
    const take = Math.min(Math.ceil((inSubset.length / total) * max), room)
    const kept = inSubset.slice(0, take)
    room -= kept.length
    const { addresses: _a, notReadyAddresses: _n, ...rest } = s
    return truncateReady
      ? { ...(kept.length > 0 ? { addresses: kept } : {}), ...rest }
      : { ...(s.addresses !== undefined ? { addresses: s.addresses } : {}), ...(kept.length > 0 ? { notReadyAddresses: kept } : {}), ...rest }
  })
  return { subsets: out, truncated: true }
}

/** What to do about one Service's Endpoints object. */
export type Action =
  | { readonly _tag: "None" }
  | { readonly _tag: "Create"; readonly endpoints: JsonObject }
  | { readonly _tag: "Update"; readonly endpoints: JsonObject }
  | { readonly _tag: "Delete" }

/**
 * The Endpoints object a Service should have (pure): none when the Service is gone (delete what
 * is left), nothing to do for Services without a selector or of type ExternalName, else the
 * object built from the pods, written only when its subsets, labels or capacity mark changed.
 */
export const decide = (service: JsonObject | undefined, pods: ReadonlyArray<JsonObject>, current: JsonObject | undefined, now: number): Action => {
  if (service === undefined) return current === undefined ? { _tag: "None" } : { _tag: "Delete" }
  if (!managed(service)) return { _tag: "None" }
  const { subsets, truncated } = truncate(subsetsFor(service, pods))
  const labels = derivedLabels(service, [], { [SkipMirrorLabel]: "true" })
  const currentMeta = current === undefined ? {} : metadataOf(current)
  const currentAnnotations = strings(currentMeta["annotations"])
  const unchanged =
    current !== undefined &&
    jsonEqual(asArray(current["subsets"]), subsets) &&
    sameLabels(strings(currentMeta["labels"]), labels) &&
    (currentAnnotations[OverCapacityAnnotation] === "truncated") === truncated
  if (unchanged) return { _tag: "None" }
  const { [OverCapacityAnnotation]: _over, [LastChangeTriggerTimeAnnotation]: previous, ...otherAnnotations } = currentAnnotations
  const annotations = {
    ...otherAnnotations,
    [LastChangeTriggerTimeAnnotation]: rfc3339(triggerTime(service, pods, previous, now)),
    ...(truncated ? { [OverCapacityAnnotation]: "truncated" } : {})
  }
  const m = metadataOf(service)
  const region = strings(currentMeta["labels"])[RegionLabel]
  const endpoints: JsonObject = {
    apiVersion: "v1",
    kind: "Endpoints",
    metadata: {
      ...currentMeta,
      name: m["name"],
      namespace: m["namespace"],
      labels: region === undefined ? labels : { ...labels, [RegionLabel]: region },
      annotations
    },
    subsets
  }
  return current === undefined ? { _tag: "Create", endpoints } : { _tag: "Update", endpoints }
}

/** The Endpoints reconciler. */
export const reconciler = (options: { readonly workers?: number } = {}): Controller.Reconciler => ({
  name: "endpoints",
  primary: ServiceRef,
  watches: [
    { ref: ResourceRefs.Pod, keys: servicesOfPod },
    // An Endpoints object changed or deleted by someone else is put back.
    { ref: EndpointsRef, keys: (change) => [Informer.keyOf(change.object)] }
  ],
  ...(options.workers === undefined ? {} : { workers: options.workers }),
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const { namespace, name } = Informer.splitKey(key)
      const service = ctx.informers.for(ServiceRef).get(namespace, name)
      const current = ctx.informers.for(EndpointsRef).get(namespace, name)
      const pods = service === undefined ? [] : podsOf(service, ctx.informers)
      const action = decide(service, pods, current, yield* Clock.currentTimeMillis)
      switch (action._tag) {
        case "None":
          return
        case "Delete":
          yield* ctx.client.delete(EndpointsRef, namespace, name).pipe(Effect.catchIf((e) => e.status.reason === "NotFound", () => Effect.void))
          return
        case "Create":
          // A namespace being deleted refuses new objects; its Services are going away too.
          yield* ctx.client.create(action.endpoints).pipe(Effect.catchIf((e) => e.status.reason === "Forbidden" && /being terminated/.test(e.status.message ?? ""), () => Effect.void))
          return
        case "Update":
          yield* ctx.client.update(action.endpoints)
          return
      }
    })
})
