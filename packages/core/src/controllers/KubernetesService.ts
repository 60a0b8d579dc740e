/**
 * The `kubernetes` Service in `default`, as kube-apiserver's own endpoint reconciler keeps it: a
 * ClusterIP Service (the first address of the Service range, port 443 `https`), with no selector,
 * and an Endpoints and an EndpointSlice of the same name pointing at the API server's advertised
 * address and port. In-cluster clients find the API through it (`kubernetes.default.svc`, and in
 * isolated network mode the ClusterIP itself); every container also gets the address in
 * `KUBERNETES_SERVICE_HOST`/`PORT` from its node (agent/InClusterEnv.ts).
 *
 * Pure `desired(options)` builds the three objects; the reconciler (key `default/kubernetes`,
 * queued at start and whenever one of them changes) creates what is missing and puts back what a
 * user changed. Without an advertised endpoint it does nothing (a library user's control plane
 * that serves no network API).
 */
import { Effect } from "effect"
import * as IpRange from "../network/IpRange.js"
import { asArray, asObject, jsonEqual, type JsonObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import type * as Controller from "./Controller.js"

/** The Service's namespace and name. */
export const namespace = "default"
export const name = "kubernetes"

/** Where the API server is advertised. */
export interface Options {
  /** The address clients in pods dial (an IP), and the API's port; absent: the controller is idle. */
  readonly endpoint?: { readonly address: string; readonly port: number }
  /** The Service range (`--service-cluster-ip-range`; default kube's 10.96.0.0/12). */
  readonly serviceRange?: string
}

/** The three objects it keeps: Service, Endpoints, EndpointSlice. */
export interface Desired {
  readonly service: JsonObject
  readonly endpoints: JsonObject
  readonly slice: JsonObject
}

const labels = { component: "apiserver", provider: "kubernetes" }

/** The Service's ClusterIP: the first address of the range (never handed out dynamically). */
export const clusterIPOf = (serviceRange = "10.96.0.0/12"): string | undefined => {
  const range = IpRange.parse(serviceRange)
  return range._tag === "Right" ? IpRange.addressAt(range.right, 1n) : undefined
}

/** The names (and the ClusterIP) in-cluster clients reach the API by: SANs its certificate needs. */
export const sans = (serviceRange?: string): ReadonlyArray<string> => {
  const ip = clusterIPOf(serviceRange)
  return [name, `${name}.${namespace}`, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`, ...(ip === undefined ? [] : [ip])]
}

/** The objects for an advertised endpoint (pure); the ClusterIP is the range's first address. */
export const desired = (endpoint: { readonly address: string; readonly port: number }, serviceRange = "10.96.0.0/12"): Desired => {
  const clusterIP = clusterIPOf(serviceRange)
  const family = IpRange.familyOf(endpoint.address) ?? "IPv4"
  return {
    service: {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name, namespace, labels },
      spec: {
        type: "ClusterIP",
        ...(clusterIP === undefined ? {} : { clusterIP }),
        ports: [{ name: "https", port: 443, protocol: "TCP", targetPort: endpoint.port }],
        sessionAffinity: "None"
      }
    },
    endpoints: {
      apiVersion: "v1",
      kind: "Endpoints",
      metadata: { name, namespace, labels: { "endpointslice.kubernetes.io/skip-mirror": "true" } },
      subsets: [{ addresses: [{ ip: endpoint.address }], ports: [{ name: "https", port: endpoint.port, protocol: "TCP" }] }]
    },
    slice: {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name, namespace, labels: { "kubernetes.io/service-name": name } },
      addressType: family,
      endpoints: [{ addresses: [endpoint.address], conditions: { ready: true } }],
      ports: [{ name: "https", port: endpoint.port, protocol: "TCP" }]
    }
  }
}

/** Whether the live object already says what `want` says (the fields the controller owns). */
export const matches = (live: JsonObject, want: JsonObject): boolean => {
  const liveLabels = asObject(metadataOf(live)["labels"])
  const wantLabels = asObject(metadataOf(want)["labels"])
  if (!Object.entries(wantLabels).every(([k, v]) => liveLabels[k] === v)) return false
  switch (want["kind"]) {
    case "Service": {
      const spec = asObject(live["spec"])
      const wantSpec = asObject(want["spec"])
      // A ClusterIP is immutable: a Service that holds another one is kept (the ports still are ours).
      return jsonEqual(asArray(spec["ports"]).map((p) => ({ ...asObject(p) })), wantSpec["ports"]) && spec["type"] === "ClusterIP"
    }
    case "Endpoints":
      return jsonEqual(live["subsets"], want["subsets"])
    default:
      return jsonEqual(live["endpoints"], want["endpoints"]) && jsonEqual(live["ports"], want["ports"]) && live["addressType"] === want["addressType"]
  }
}

const key = `${namespace}/${name}`

/** The reconciler (`kubernetes-service`). */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const ours = (change: { readonly object: JsonObject }) => {
    const m = metadataOf(change.object)
    return m["namespace"] === namespace && m["name"] === name ? [key] : []
  }
  return {
    name: "kubernetes-service",
    // Every Service change queues its key; all but this one's return at once.
    primary: ResourceRefs.Service,
    watches: [
      { ref: ResourceRefs.Endpoints, keys: ours },
      { ref: ResourceRefs.EndpointSlice, keys: ours }
    ],
    resync: { everyMs: 60_000, keys: () => (options.endpoint === undefined ? [] : [key]) },
    reconcile: (k, ctx) =>
      Effect.gen(function* () {
        if (k !== key || options.endpoint === undefined) return
        const want = desired(options.endpoint, options.serviceRange)
        const refs = [
          [ResourceRefs.Service, want.service],
          [ResourceRefs.Endpoints, want.endpoints],
          [ResourceRefs.EndpointSlice, want.slice]
        ] as const
        for (const [ref, object] of refs) {
          const live = ctx.informers.for(ref).get(namespace, name)
          if (live === undefined) {
            yield* ctx.client.create(object).pipe(Effect.catchIf((e) => e.status.code === 409, () => Effect.void))
          } else if (!matches(live, object)) {
            const merged: JsonObject =
              ref === ResourceRefs.Service
                ? { ...live, metadata: { ...metadataOf(live), labels: { ...asObject(metadataOf(live)["labels"]), ...labels } }, spec: { ...asObject(live["spec"]), type: "ClusterIP", ports: asObject(want.service["spec"])["ports"] } }
                : { ...live, ...object, metadata: { ...metadataOf(live), labels: { ...asObject(metadataOf(live)["labels"]), ...asObject(metadataOf(object)["labels"]) } } }
            yield* ctx.client.update(merged).pipe(Effect.catchIf((e) => e.status.code === 409 || e.status.code === 404, () => Effect.void))
          }
        }
      })
  }
}
