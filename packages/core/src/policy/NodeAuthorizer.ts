/**
 * The Node authorizer (kube-apiserver's `--authorization-mode Node`): a node identity
 * (`system:node:<name>`, group `system:nodes`) reads a Secret, ConfigMap, PersistentVolumeClaim
 * or ServiceAccount, and creates a ServiceAccount token, only when a pod bound to it
 * (`spec.nodeName`) refers to that object; a PersistentVolume only when it is bound to such a
 * claim, or (get and patch) when the local-path provisioner made it on that node. Everything else about nodes is left to RBAC (`system:node`) and NodeRestriction.
 *
 *   store.list+watch pods ─▶ PodRefs per pod ─┐
 *   store.list+watch PVCs ─▶ claim → volume ──┴▶ Graph (node → kind/ns/name, counted)
 *   request ─▶ decide(graph, attributes) ─▶ Allow | NoOpinion(reason) ─▶ RBAC decides the rest
 *
 * A decision is a few map lookups. The index follows the store, so it can lag a pod the agent
 * already sees: a miss on a namespaced object re-checks that namespace's pods in the store
 * before answering, so a freshly bound pod's agent is never refused its own Secret.
 */
import { Chunk, Duration, Effect, type Scope, Stream } from "effect"
import type * as Authz from "../api/Authz.js"
import { nodeNameOf } from "../api/authn/NodeCredentials.js"
import type * as Pod from "../model/Pod.js"
import * as Storage from "../model/Storage.js"
import { asObject, isJsonObject, type JsonObject } from "../object/Json.js"
import * as Keys from "../store/Keys.js"
import type { StoreService } from "../store/Store.js"

/** The kinds of object a node reaches only through its pods. */
export type Kind = "secret" | "configmap" | "pvc" | "serviceaccount"

/** What one pod bound to a node refers to. */
export interface PodRefs {
  readonly node: string
  readonly namespace: string
  readonly name: string
  readonly uid: string
  readonly objects: ReadonlyArray<readonly [Kind, string]>
}

/** The objects a pod refers to (kube's graph populator): volumes, env, envFrom, image pull secrets, its ServiceAccount. */
export const referencesOf = (pod: Pod.Pod): PodRefs | undefined => {
  const node = pod.spec?.nodeName
  if (node === undefined || node === "") return undefined
  const out = new Set<string>()
  const add = (kind: Kind, name: string | undefined) => {
    if (name !== undefined && name !== "") out.add(`${kind}\0${name}`)
  }
  // The agent mints the token of `default` when a pod names none, so that is the pod's account.
  add("serviceaccount", pod.spec.serviceAccountName || "default")
  for (const s of pod.spec.imagePullSecrets ?? []) add("secret", s.name)
  for (const c of [...(pod.spec.initContainers ?? []), ...(pod.spec.containers ?? [])]) {
    for (const from of c.envFrom ?? []) {
      add("configmap", from.configMapRef?.name)
      add("secret", from.secretRef?.name)
    }
    for (const v of c.env ?? []) {
      add("configmap", v.valueFrom?.configMapKeyRef?.name)
      add("secret", v.valueFrom?.secretKeyRef?.name)
    }
  }
  for (const v of pod.spec.volumes ?? []) {
    add("configmap", v.configMap?.name)
    add("secret", v.secret?.secretName)
    add("pvc", v.persistentVolumeClaim?.claimName)
    for (const s of v.projected?.sources ?? []) {
      add("configmap", s.configMap?.name)
      add("secret", s.secret?.name)
    }
  }
  return {
    node,
    namespace: pod.metadata?.namespace ?? "",
    name: pod.metadata?.name ?? "",
    uid: pod.metadata?.uid ?? "",
    objects: [...out].map((e) => {
      const [kind, name] = e.split("\0") as [Kind, string]
      return [kind, name] as const
    })
  }
}

/** What a decision reads: which node reaches which object. */
export interface GraphView {
  /** Whether a pod bound to `node` refers to `kind` `namespace/name`. */
  readonly reaches: (node: string, kind: Kind, namespace: string, name: string) => boolean
  /** Whether a claim `node` reaches is bound to the PersistentVolume `name`. */
  readonly reachesVolume: (node: string, name: string) => boolean
}

/** The graph as kept by the index: pods' references counted per node, and claims' volumes. */
export interface Graph extends GraphView {
  readonly putPod: (key: string, refs: PodRefs | undefined) => void
  readonly putClaim: (key: string, namespace: string, name: string, volumeName: string | undefined) => void
  readonly clearPods: () => void
  readonly clearClaims: () => void
  /** How many pods and claims are tracked (for tests and metrics). */
  readonly size: () => { readonly pods: number; readonly claims: number }
}

const edge = (node: string, kind: Kind | "pv", namespace: string, name: string) => `${node}\0${kind}\0${namespace}\0${name}`

/** An empty graph. Plain maps: `putPod` is O(references), a lookup O(1). */
export const makeGraph = (): Graph => {
  const pods = new Map<string, PodRefs>()
  const edges = new Map<string, number>()
  // claim "ns\0name" → volume name, and volume name → claims bound to it.
  const claimVolume = new Map<string, string>()
  const volumeClaims = new Map<string, Set<string>>()
  const count = (key: string, by: number) => {
    const n = (edges.get(key) ?? 0) + by
    if (n <= 0) edges.delete(key)
    else edges.set(key, n)
  }
  const apply = (refs: PodRefs, by: number) => {
    for (const [kind, name] of refs.objects) count(edge(refs.node, kind, refs.namespace, name), by)
  }
  return {
    putPod: (key, refs) => {
      const before = pods.get(key)
      if (before !== undefined) apply(before, -1)
      if (refs === undefined) pods.delete(key)
      else {
        pods.set(key, refs)
        apply(refs, 1)
      }
    },
    putClaim: (key, namespace, name, volumeName) => {
      const before = claimVolume.get(key)
      if (before !== undefined) {
        const set = volumeClaims.get(before)
        set?.delete(`${namespace}\0${name}`)
        if (set?.size === 0) volumeClaims.delete(before)
        claimVolume.delete(key)
      }
      if (volumeName !== undefined && volumeName !== "") {
        claimVolume.set(key, volumeName)
        let set = volumeClaims.get(volumeName)
        if (set === undefined) volumeClaims.set(volumeName, (set = new Set()))
        set.add(`${namespace}\0${name}`)
      }
    },
    clearPods: () => {
      pods.clear()
      edges.clear()
    },
    clearClaims: () => {
      claimVolume.clear()
      volumeClaims.clear()
    },
    size: () => ({ pods: pods.size, claims: claimVolume.size }),
    reaches: (node, kind, namespace, name) => edges.has(edge(node, kind, namespace, name)),
    reachesVolume: (node, name) => {
      for (const claim of volumeClaims.get(name) ?? []) {
        const [namespace, claimName] = claim.split("\0") as [string, string]
        if (edges.has(edge(node, "pvc", namespace, claimName))) return true
      }
      return false
    }
  }
}

/** A verdict: allowed, or no opinion (RBAC decides) with the reason a denial will carry. */
export type Verdict = { readonly _tag: "Allow" } | { readonly _tag: "NoOpinion"; readonly reason: string }

const allow: Verdict = { _tag: "Allow" }
const noOpinion = (reason: string): Verdict => ({ _tag: "NoOpinion", reason })
const related = (graph: GraphView, node: string, kind: Kind, a: Authz.Attributes): Verdict => {
  if (a.name === "") return noOpinion("No Object name found")
  return graph.reaches(node, kind, a.namespace, a.name) ? allow : noOpinion(`no relationship found between node '${node}' and this object`)
}

/** The decision for one request (pure), with kube-apiserver's reasons; `undefined` for requests not a node's or not about these kinds. */
export const decide = (graph: GraphView, a: Authz.Attributes): Verdict | undefined => {
  const node = nodeNameOf(a.user)
  if (node === undefined || !a.resourceRequest || a.apiGroup !== "") return undefined
  switch (a.resource) {
    case "secrets":
    case "configmaps": {
      // Kubernetes also lets a node list/watch one object by name; Fleet's routes carry no name
      // for lists, so a node reads these objects one GET at a time.
      if (a.verb !== "get" && a.verb !== "list" && a.verb !== "watch") return noOpinion("can only read resources of this type")
      if (a.subresource !== "") return noOpinion("cannot read subresource")
      if (a.namespace === "") return noOpinion("can only read namespaced object of this type")
      return related(graph, node, a.resource === "secrets" ? "secret" : "configmap", a)
    }
    case "persistentvolumeclaims": {
      if (a.verb !== "get") return noOpinion("can only get individual resources of this type")
      if (a.subresource !== "") return noOpinion("cannot get subresource")
      return related(graph, node, "pvc", a)
    }
    case "persistentvolumes": {
      // Beyond Kubernetes: a node also gets and patches the local-path volumes made on it (the
      // `confirm` step reads the volume), to remove their directories and then their finalizer.
      if (a.verb !== "get" && a.verb !== "patch" && a.verb !== "update") return noOpinion("can only get individual resources of this type")
      if (a.subresource !== "") return noOpinion("cannot get subresource")
      if (a.name === "") return noOpinion("No Object name found")
      return a.verb === "get" && graph.reachesVolume(node, a.name) ? allow : noOpinion(`no relationship found between node '${node}' and this object`)
    }
    case "serviceaccounts": {
      // Kubernetes 1.33 lets nodes get the ServiceAccounts of their pods too (image credential providers).
      if (a.verb === "get" && a.subresource === "") return related(graph, node, "serviceaccount", a)
      if (a.verb !== "create" || a.name === "") return noOpinion("can only create tokens for individual service accounts")
      if (a.subresource !== "token") return noOpinion("can only create token subresource of serviceaccount")
      return related(graph, node, "serviceaccount", a)
    }
    default:
      return undefined
  }
}

/** Node authorizer first, then `next` (RBAC), as kube-apiserver's `--authorization-mode Node,RBAC`. */
export const chain = (node: Authz.Authorizer, next: Authz.Authorizer): Authz.Authorizer => (a) =>
  Effect.flatMap(node(a), (first) =>
    first.allowed
      ? Effect.succeed(first)
      : Effect.map(next(a), (second) => (second.allowed || first.reason === "" ? second : { allowed: false, reason: second.reason === "" ? first.reason : `${first.reason}, ${second.reason}` }))
  )

/** A running index. */
export interface NodeAuthorizer {
  /** Allows what the graph relates; otherwise not allowed, with the reason (never a final denial on its own: chain it). */
  readonly authorize: Authz.Authorizer
  readonly graph: GraphView & Pick<Graph, "size">
}

const podsPrefix = Keys.prefix("", "pods")
const claimsPrefix = Keys.prefix("", "persistentvolumeclaims")

const parse = (value: string): JsonObject | undefined => {
  try {
    const o = JSON.parse(value) as unknown
    return isJsonObject(o) ? o : undefined
  } catch {
    return undefined
  }
}
const podRefs = (value: string): PodRefs | undefined => {
  const o = parse(value)
  return o === undefined || typeof o["spec"] !== "object" || o["spec"] === null ? undefined : referencesOf(o as unknown as Pod.Pod)
}
const claimOf = (key: string, value: string | undefined) => {
  const [namespace = "", name = ""] = key.slice(claimsPrefix.length).split("/")
  const claim = value === undefined ? undefined : parse(value)
  const volumeName = claim === undefined ? undefined : asObject(claim["spec"])["volumeName"]
  return { namespace, name, volumeName: typeof volumeName === "string" ? volumeName : undefined }
}

const backoff = (attempt: number) => Duration.millis(Math.min(5_000, 50 * 2 ** Math.min(attempt, 10)))

/** Start the index over pods and claims; it follows the store until the scope closes. Never fails. */
export const make = (store: StoreService): Effect.Effect<NodeAuthorizer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const graph = makeGraph()
    const applyPod = (key: string, value: string | undefined) => graph.putPod(key, value === undefined ? undefined : podRefs(value))
    const applyClaim = (key: string, value: string | undefined) => {
      const c = claimOf(key, value)
      graph.putClaim(key, c.namespace, c.name, c.volumeName)
    }

    // One list, then a watch from its revision, per prefix (as RbacIndex); Compacted re-lists.
    const follow = (prefix: string, apply: (key: string, value: string | undefined) => void, forget: () => void) =>
      Effect.gen(function* () {
        let applied = 0
        const listAll = Effect.gen(function* () {
          const items: Array<{ key: string; value: string }> = []
          const first = yield* store.list(prefix, { limit: 1000 })
          items.push(...first.items)
          let token = first.continue
          while (token !== undefined) {
            const next = yield* store.list(prefix, { limit: 1000, continue: token })
            items.push(...next.items)
            token = next.continue
          }
          forget()
          for (const kv of items) apply(kv.key, kv.value)
          applied = first.revision
        })
        const relist = (attempt: number): Effect.Effect<void> => listAll.pipe(Effect.catchAll(() => Effect.zipRight(Effect.sleep(backoff(attempt)), relist(attempt + 1))))
        const watch = (attempt: number): Effect.Effect<void> =>
          Effect.suspend(() => {
            let progressed = false
            return store.watch(prefix, applied).pipe(
              Stream.runForEachChunk((chunk) =>
                Effect.sync(() => {
                  progressed = true
                  for (const ev of Chunk.toReadonlyArray(chunk)) {
                    apply(ev.key, ev.type === "DELETED" ? undefined : ev.value)
                    applied = ev.revision
                  }
                })
              ),
              Effect.matchEffect({
                onSuccess: () => Effect.zipRight(Effect.sleep(backoff(progressed ? 0 : attempt)), watch(progressed ? 0 : attempt + 1)),
                onFailure: (error) =>
                  error._tag === "Compacted"
                    ? Effect.zipRight(relist(0), watch(0))
                    : Effect.zipRight(Effect.sleep(backoff(progressed ? 0 : attempt + 1)), watch(progressed ? 0 : attempt + 1))
              })
            )
          })
        // The first list is awaited so a starting server does not refuse its nodes.
        const loaded = yield* listAll.pipe(Effect.retry({ times: 3 }), Effect.isSuccess)
        yield* Effect.forkScoped(Effect.zipRight(loaded ? Effect.void : relist(0), watch(0)))
      })

    yield* follow(podsPrefix, applyPod, graph.clearPods)
    yield* follow(claimsPrefix, applyClaim, graph.clearClaims)

    // A local-path volume made on this node (its provisioner's annotations say so).
    const pinnedVolume = (name: string, node: string): Effect.Effect<boolean> =>
      store.get(Keys.object({ group: "", resource: "persistentvolumes", name })).pipe(
        Effect.map((kv) => {
          const a = asObject(asObject(parse(kv.value)?.["metadata"])["annotations"])
          return a[Storage.SelectedNodeAnnotation] === node && a[Storage.ProvisionedByAnnotation] === Storage.LocalPathProvisioner
        }),
        Effect.orElseSucceed(() => false)
      )

    // A miss may be the index lagging a pod bound a moment ago: ask the store for that namespace's pods.
    const confirm = (a: Authz.Attributes, node: string): Effect.Effect<boolean> => {
      if (a.resource === "persistentvolumes") return pinnedVolume(a.name, node)
      const kind: Kind | undefined =
        a.resource === "secrets" ? "secret" : a.resource === "configmaps" ? "configmap" : a.resource === "persistentvolumeclaims" ? "pvc" : a.resource === "serviceaccounts" ? "serviceaccount" : undefined
      if (kind === undefined || a.namespace === "" || a.name === "") return Effect.succeed(false)
      return store.list(Keys.prefix("", "pods", a.namespace)).pipe(
        Effect.map((page) =>
          page.items.some((kv) => {
            const refs = podRefs(kv.value)
            return refs !== undefined && refs.node === node && refs.objects.some(([k, n]) => k === kind && n === a.name)
          })
        ),
        Effect.orElseSucceed(() => false)
      )
    }

    const authorize: Authz.Authorizer = (a) =>
      Effect.suspend(() => {
        const verdict = decide(graph, a)
        if (verdict === undefined) return Effect.succeed({ allowed: false, reason: "" })
        if (verdict._tag === "Allow") return Effect.succeed({ allowed: true, reason: "" })
        const node = nodeNameOf(a.user)
        // Only a refused relationship is worth a second look; a wrong verb stays wrong.
        if (node === undefined || !verdict.reason.startsWith("no relationship")) return Effect.succeed({ allowed: false, reason: verdict.reason })
        return Effect.map(confirm(a, node), (ok) => (ok ? { allowed: true, reason: "" } : { allowed: false, reason: verdict.reason }))
      })

    return { authorize, graph }
  })
