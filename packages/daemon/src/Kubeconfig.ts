/**
 * The kubeconfig the server writes for its bootstrap administrator: a standard `kind: Config`
 * that kubectl, client-go and `@kubernetes/client-node` read unchanged. Fleet owns three named
 * entries (cluster `fleet`, user `fleet-admin`, context `fleet`); updating a file keeps
 * everything else the operator added to it, comments included.
 */
import { Document, isMap, isSeq, parse, parseDocument } from "yaml"

/** The names of the entries Fleet writes. */
export const names = { cluster: "fleet", user: "fleet-admin", context: "fleet" } as const

/** What the kubeconfig says about the cluster and its administrator. */
export interface Params {
  /** `https://host:port`. */
  readonly server: string
  /** The CA to trust (PEM); omitted when the server uses a certificate clients already trust. */
  readonly caPem: string | undefined
  readonly token: string
}

const clusterEntry = (p: Params) => ({
  name: names.cluster,
  cluster: { server: p.server, ...(p.caPem === undefined ? {} : { "certificate-authority-data": Buffer.from(p.caPem).toString("base64") }) }
})

/** A fresh kubeconfig with one cluster, user and context, the context current. */
export const render = (p: Params): string =>
  new Document({
    apiVersion: "v1",
    kind: "Config",
    clusters: [clusterEntry(p)],
    users: [{ name: names.user, user: { token: p.token } }],
    contexts: [{ name: names.context, context: { cluster: names.cluster, user: names.user } }],
    "current-context": names.context,
    preferences: {}
  }).toString()

const entry = (doc: unknown, list: string, name: string): Record<string, unknown> | undefined => {
  if (typeof doc !== "object" || doc === null) return undefined
  const items = (doc as Record<string, unknown>)[list]
  if (!Array.isArray(items)) return undefined
  return items.find((i): i is Record<string, unknown> => typeof i === "object" && i !== null && (i as { name?: unknown }).name === names[name as keyof typeof names])
}

/** The token of Fleet's `fleet-admin` user, if the text is a kubeconfig that has one. */
export const tokenOf = (text: string): string | undefined => {
  try {
    const user = entry(parse(text), "users", "user")?.["user"]
    const token = typeof user === "object" && user !== null ? (user as { token?: unknown }).token : undefined
    return typeof token === "string" ? token : undefined
  } catch {
    return undefined
  }
}

/** The `fleet` cluster's server URL and CA (PEM), if present. */
export const clusterOf = (text: string): { server: string | undefined; caPem: string | undefined } | undefined => {
  try {
    const cluster = entry(parse(text), "clusters", "cluster")?.["cluster"] as Record<string, unknown> | undefined
    if (cluster === undefined) return undefined
    const server = typeof cluster["server"] === "string" ? cluster["server"] : undefined
    const data = cluster["certificate-authority-data"]
    return { server, caPem: typeof data === "string" ? Buffer.from(data, "base64").toString("utf8") : undefined }
  } catch {
    return undefined
  }
}

/**
 * Point the `fleet` cluster of an existing kubeconfig at `server` with `caPem`, keeping the rest
 * of the file. Answers `undefined` when the text has no such cluster.
 */
export const update = (text: string, cluster: Omit<Params, "token">): string | undefined => {
  const doc = parseDocument(text)
  const clusters = doc.get("clusters")
  if (!isSeq(clusters)) return undefined
  const index = clusters.items.findIndex((item) => isMap(item) && item.get("name") === names.cluster)
  if (index < 0) return undefined
  doc.setIn(["clusters", index, "cluster", "server"], cluster.server)
  if (cluster.caPem === undefined) doc.deleteIn(["clusters", index, "cluster", "certificate-authority-data"])
  else doc.setIn(["clusters", index, "cluster", "certificate-authority-data"], Buffer.from(cluster.caPem).toString("base64"))
  return doc.toString()
}
