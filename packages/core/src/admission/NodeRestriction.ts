/**
 * NodeRestriction admission: a node identity (`system:node:<name>` in group `system:nodes`) may
 * modify only its own Node, its own Lease in `kube-node-lease`, the status of pods bound to it,
 * and delete pods bound to it. Creating pods (mirror pods included: Fleet has no static pods) and
 * writing any other pod field are refused; node labels under `node-restriction.kubernetes.io/`
 * are reserved for administrators, and a node may not change its own taints once registered (it
 * could lift a NoSchedule/NoExecute taint and draw workloads to itself). Evictions and
 * A node's update of a PersistentVolume (the local-path volumes made on it, which the Node
 * authorizer lets it patch) may change only the finalizers. Evictions and
 * TokenRequests by a node are checked where they are served (`Eviction.ts`,
 * `ServiceAccountTokens.ts`), as they skip admission. Other resources are left to RBAC. Refusals
 * are 403 with kube-apiserver's messages.
 */
import type * as Admission from "../api/Admission.js"
import { plugin as restriction } from "./internal/restriction.js"
import type { UserInfo } from "../api/Http.js"
import { asObject, jsonEqual } from "../object/Json.js"
import { labels } from "./internal/json.js"

/** The plugin's name. */
export const name = "NodeRestriction"

/** The namespace of node heartbeat leases. */
export const leaseNamespace = "kube-node-lease"

const nodePrefix = "system:node:"

/** The node a user acts as, if it is a node identity. */
export const nodeOf = (user: UserInfo): string | undefined =>
  user.groups.includes("system:nodes") && user.name.startsWith(nodePrefix) && user.name.length > nodePrefix.length ? user.name.slice(nodePrefix.length) : undefined

const restrictedLabel = (key: string) => {
  const prefix = key.includes("/") ? key.slice(0, key.indexOf("/")) : ""
  return prefix === "node-restriction.kubernetes.io" || prefix.endsWith(".node-restriction.kubernetes.io")
}

const changedRestrictedLabels = (request: Pick<Admission.Request, "object" | "oldObject">) => {
  const now = labels(request.object)
  const before = request.oldObject === undefined ? {} : labels(request.oldObject)
  return [...new Set([...Object.keys(now), ...Object.keys(before)])].filter((k) => restrictedLabel(k) && now[k] !== before[k]).sort()
}

const nodeNameOf = (pod: unknown) => asObject(asObject(pod)["spec"])["nodeName"]
const taintsOf = (node: unknown) => asObject(asObject(node)["spec"])["taints"] ?? []

/** The decision for one request (pure): `undefined` to allow, else the refusal's detail. */
export const decide = (request: Pick<Admission.Request, "operation" | "user" | "resource" | "subresource" | "namespace" | "name" | "object" | "oldObject">): string | undefined => {
  const node = nodeOf(request.user)
  if (node === undefined) return undefined
  const r = request.resource
  if (r.group === "" && r.plural === "nodes") {
    if (request.name !== node) return `node "${node}" is not allowed to modify node "${request.name}"`
    if (request.operation !== "DELETE") {
      const restricted = changedRestrictedLabels(request)
      if (restricted.length > 0) return `is not allowed to modify labels: ${restricted.join(", ")}`
    }
    if (request.operation === "UPDATE" && request.oldObject !== undefined && !jsonEqual(taintsOf(request.object), taintsOf(request.oldObject))) {
      return `node "${node}" is not allowed to modify taints`
    }
    return undefined
  }
  if (r.group === "" && r.plural === "pods") {
    switch (request.operation) {
      case "CREATE":
        return `pod does not have "kubernetes.io/config.mirror" annotation, node "${node}" can only create mirror pods`
      case "UPDATE":
        if (request.subresource !== "status") return `node "${node}" can only update pod status`
        if (nodeNameOf(request.oldObject ?? request.object) !== node) return `node "${node}" can only update pod status for pods with spec.nodeName set to itself`
        return undefined
      case "DELETE":
        if (nodeNameOf(request.oldObject ?? request.object) !== node) return `node "${node}" can only delete pods with spec.nodeName set to itself`
        return undefined
    }
  }
  if (r.group === "" && r.plural === "persistentvolumes" && request.operation === "UPDATE" && request.oldObject !== undefined) {
    // The node's agent removes its local-path finalizer once the directory is gone: nothing else.
    const rest = (o: unknown) => {
      const m = { ...asObject(asObject(o)["metadata"]) }
      for (const k of ["finalizers", "resourceVersion", "managedFields", "generation"]) delete m[k]
      return { ...asObject(o), metadata: m }
    }
    if (!jsonEqual(rest(request.object), rest(request.oldObject))) return `node "${node}" can only remove finalizers of persistentvolumes`
    return undefined
  }
  if (r.group === "coordination.k8s.io" && r.plural === "leases") {
    if (request.namespace !== leaseNamespace) return `can only access leases in the "${leaseNamespace}" namespace`
    if (request.name !== node) return "can only access node lease with the same name as the requesting node"
  }
  return undefined
}

/** The plugin: refuses in the mutating phase already (before webhooks see the request), and again when validating (DELETE only validates). */
export const make = (): Admission.Plugin => restriction(name, decide)
