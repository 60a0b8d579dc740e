import { asObject } from "../object/Json.js"
/**
 * A pod's resolver configuration in isolated network mode, as the kubelet writes it: with
 * `dnsPolicy: ClusterFirst` (the default) the node's cluster DNS — the pod's gateway, whose port
 * 53 the node sends to its DNS server — with Kubernetes' search path and `ndots:5`, so
 * `web`, `web.shop` and `web.shop.svc` all resolve; `Default` keeps the host's resolv.conf;
 * `None` takes only the pod's `dnsConfig`, which the other policies add to.
 *
 *   pod (namespace, dnsPolicy, dnsConfig) + nameserver ─▶ { nameservers, searches, options } | undefined
 */
type JsonObject = Readonly<Record<string, unknown>>

const strings = (v: unknown): ReadonlyArray<string> => (Array.isArray(v) ? v.filter((s): s is string => typeof s === "string" && s !== "") : [])

/** The cluster's DNS domain. */
export const clusterDomain = "cluster.local"

/** A resolver configuration (the Runtime's `SandboxSpec.dns`). */
export interface Config {
  readonly nameservers: ReadonlyArray<string>
  readonly searches: ReadonlyArray<string>
  readonly options: ReadonlyArray<string>
}

/** The resolver of `pod` given the node's cluster DNS address; undefined: the host's (`Default`). */
export const config = (pod: JsonObject, nameserver: string): Config | undefined => {
  const spec = asObject(pod["spec"])
  const policy = typeof spec["dnsPolicy"] === "string" ? spec["dnsPolicy"] : "ClusterFirst"
  if (policy === "Default") return undefined
  const extra = asObject(spec["dnsConfig"])
  const extraOptions = (Array.isArray(extra["options"]) ? extra["options"] : []).map(asObject).flatMap((o) =>
    typeof o["name"] !== "string" ? [] : [typeof o["value"] === "string" ? `${o["name"]}:${o["value"]}` : o["name"]]
  )
  if (policy === "None") return { nameservers: strings(extra["nameservers"]), searches: strings(extra["searches"]), options: extraOptions }
  const namespace = typeof asObject(pod["metadata"])["namespace"] === "string" ? (asObject(pod["metadata"])["namespace"] as string) : "default"
  // A pod's own option replaces the default of the same name (ndots:2 over ndots:5).
  const names = new Set(extraOptions.map((o) => o.split(":")[0]))
  return {
    nameservers: [nameserver, ...strings(extra["nameservers"])],
    searches: [`${namespace}.svc.${clusterDomain}`, `svc.${clusterDomain}`, clusterDomain, ...strings(extra["searches"])],
    options: [...(names.has("ndots") ? [] : ["ndots:5"]), ...extraOptions]
  }
}
