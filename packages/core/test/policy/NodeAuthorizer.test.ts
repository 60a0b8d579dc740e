import { it as effectIt } from "@effect/vitest"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type * as Authz from "../../src/api/Authz.js"
import type { UserInfo } from "../../src/api/Http.js"
import type * as Pod from "../../src/model/Pod.js"
import * as BootstrapPolicy from "../../src/policy/BootstrapPolicy.js"
import * as NodeAuthorizer from "../../src/policy/NodeAuthorizer.js"
import * as Store from "../../src/store/Store.js"
import * as Keys from "../../src/store/Keys.js"

const nodeUser = (name: string): UserInfo => ({ name: `system:node:${name}`, uid: name, groups: ["system:nodes", "system:authenticated"] })
const n1 = nodeUser("n1")

const attrs = (verb: string, resource: string, namespace: string, name: string, extra: Partial<Authz.Attributes> = {}): Authz.Attributes => ({
  user: n1,
  verb,
  resourceRequest: true,
  apiGroup: "",
  apiVersion: "v1",
  resource,
  subresource: "",
  namespace,
  name,
  path: "/",
  ...extra
})

const pod = (namespace: string, name: string, nodeName: string | undefined, spec: Partial<Pod.Pod["spec"]> = {}): Pod.Pod =>
  ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { namespace, name, uid: `uid-${name}` },
    spec: { containers: [{ name: "c", image: "i" }], ...(nodeName === undefined ? {} : { nodeName }), ...spec }
  }) as unknown as Pod.Pod

// One pod on n1 referring to objects every way a pod can; one on n2; one unscheduled.
const web = pod("shop", "web", "n1", {
  serviceAccountName: "web-sa",
  imagePullSecrets: [{ name: "pull" }],
  initContainers: [{ name: "init", image: "i", env: [{ name: "A", valueFrom: { secretKeyRef: { name: "init-secret", key: "k" } } }] }],
  containers: [
    {
      name: "c",
      image: "i",
      envFrom: [{ configMapRef: { name: "env-cm" } }, { secretRef: { name: "env-secret" } }],
      env: [{ name: "B", valueFrom: { configMapKeyRef: { name: "key-cm", key: "k" } } }]
    }
  ],
  volumes: [
    { name: "a", secret: { secretName: "vol-secret" } },
    { name: "b", configMap: { name: "vol-cm" } },
    { name: "c", persistentVolumeClaim: { claimName: "data" } },
    { name: "d", projected: { sources: [{ secret: { name: "proj-secret" } }, { configMap: { name: "proj-cm" } }, { serviceAccountToken: { path: "t" } }] } }
  ]
} as unknown as Partial<Pod.Pod["spec"]>)
const other = pod("shop", "other", "n2", { volumes: [{ name: "a", secret: { secretName: "n2-secret" } }] } as unknown as Partial<Pod.Pod["spec"]>)
const pending = pod("shop", "pending", undefined, { volumes: [{ name: "a", secret: { secretName: "pending-secret" } }] } as unknown as Partial<Pod.Pod["spec"]>)

const graphWith = (pods: ReadonlyArray<Pod.Pod>) => {
  const graph = NodeAuthorizer.makeGraph()
  for (const p of pods) graph.putPod(`${p.metadata.namespace}/${p.metadata.name}`, NodeAuthorizer.referencesOf(p))
  graph.putClaim("shop/data", "shop", "data", "pv-data")
  graph.putClaim("shop/else", "shop", "else", "pv-else")
  return graph
}

const noRelation = { _tag: "NoOpinion", reason: "no relationship found between node 'n1' and this object" }
const allow = { _tag: "Allow" }

describe("NodeAuthorizer.decide", () => {
  const graph = graphWith([web, other, pending])
  const cases: ReadonlyArray<[string, Authz.Attributes, unknown]> = [
    ["a Secret in a volume", attrs("get", "secrets", "shop", "vol-secret"), allow],
    ["a Secret in a projected volume", attrs("get", "secrets", "shop", "proj-secret"), allow],
    ["a Secret in envFrom", attrs("get", "secrets", "shop", "env-secret"), allow],
    ["a Secret key of an init container", attrs("get", "secrets", "shop", "init-secret"), allow],
    ["an image pull Secret", attrs("get", "secrets", "shop", "pull"), allow],
    ["a ConfigMap in a volume, envFrom, a key ref, a projection", attrs("get", "configmaps", "shop", "vol-cm"), allow],
    ["a ConfigMap key ref", attrs("get", "configmaps", "shop", "key-cm"), allow],
    ["a projected ConfigMap", attrs("get", "configmaps", "shop", "proj-cm"), allow],
    ["a ConfigMap in envFrom", attrs("get", "configmaps", "shop", "env-cm"), allow],
    ["an unrelated Secret", attrs("get", "secrets", "shop", "db-password"), noRelation],
    ["the same name in another namespace", attrs("get", "secrets", "other-ns", "vol-secret"), noRelation],
    ["another node's pod's Secret", attrs("get", "secrets", "shop", "n2-secret"), noRelation],
    ["an unscheduled pod's Secret", attrs("get", "secrets", "shop", "pending-secret"), noRelation],
    ["a Secret under the ConfigMap's name", attrs("get", "secrets", "shop", "vol-cm"), noRelation],
    ["list Secrets", attrs("list", "secrets", "shop", ""), { _tag: "NoOpinion", reason: "No Object name found" }],
    ["watch ConfigMaps everywhere", attrs("watch", "configmaps", "", ""), { _tag: "NoOpinion", reason: "can only read namespaced object of this type" }],
    ["update a related Secret", attrs("update", "secrets", "shop", "vol-secret"), { _tag: "NoOpinion", reason: "can only read resources of this type" }],
    ["a related claim", attrs("get", "persistentvolumeclaims", "shop", "data"), allow],
    ["an unrelated claim", attrs("get", "persistentvolumeclaims", "shop", "else"), noRelation],
    ["list claims", attrs("list", "persistentvolumeclaims", "shop", ""), { _tag: "NoOpinion", reason: "can only get individual resources of this type" }],
    ["the volume of a related claim", attrs("get", "persistentvolumes", "", "pv-data"), allow],
    ["the volume of an unrelated claim", attrs("get", "persistentvolumes", "", "pv-else"), noRelation],
    ["patching a volume is for its node to confirm (local-path)", attrs("patch", "persistentvolumes", "", "pv-data"), noRelation],
    ["deleting a volume", attrs("delete", "persistentvolumes", "", "pv-data"), { _tag: "NoOpinion", reason: "can only get individual resources of this type" }],
    ["a token for the pod's ServiceAccount", attrs("create", "serviceaccounts", "shop", "web-sa", { subresource: "token" }), allow],
    ["the pod's ServiceAccount", attrs("get", "serviceaccounts", "shop", "web-sa"), allow],
    ["a token for a kube-system ServiceAccount", attrs("create", "serviceaccounts", "kube-system", "admin", { subresource: "token" }), noRelation],
    ["a token for default where no pod of n1 uses it", attrs("create", "serviceaccounts", "shop", "default", { subresource: "token" }), noRelation],
    ["creating a ServiceAccount", attrs("create", "serviceaccounts", "shop", ""), { _tag: "NoOpinion", reason: "can only create tokens for individual service accounts" }],
    ["pods are RBAC's", attrs("get", "pods", "shop", "web"), undefined],
    ["other groups are RBAC's", attrs("get", "secrets", "shop", "x", { apiGroup: "example.com" }), undefined],
    ["a user who is not a node", attrs("get", "secrets", "shop", "db-password", { user: { name: "system:node:n1", uid: "", groups: ["system:authenticated"] } }), undefined]
  ]
  it.each(cases)("%s", (_, a, expected) => {
    expect(NodeAuthorizer.decide(graph, a)).toEqual(expected)
  })

  it("forgets a pod's references when it is deleted or moves, and counts shared ones", () => {
    const g = graphWith([web, pod("shop", "twin", "n1", { volumes: [{ name: "a", secret: { secretName: "vol-secret" } }] } as unknown as Partial<Pod.Pod["spec"]>)])
    const get = attrs("get", "secrets", "shop", "vol-secret")
    g.putPod("shop/web", undefined)
    expect(NodeAuthorizer.decide(g, get)).toEqual(allow) // the twin still refers to it
    g.putPod("shop/twin", NodeAuthorizer.referencesOf(pod("shop", "twin", "n2", { volumes: [{ name: "a", secret: { secretName: "vol-secret" } }] } as unknown as Partial<Pod.Pod["spec"]>)))
    expect(NodeAuthorizer.decide(g, get)).toEqual(noRelation)
    expect(NodeAuthorizer.decide(g, attrs("get", "persistentvolumes", "", "pv-data"))).toEqual(noRelation)
  })

  it("follows a claim's volume as it is bound and rebound", () => {
    const g = graphWith([web])
    g.putClaim("shop/data", "shop", "data", "pv-new")
    expect(NodeAuthorizer.decide(g, attrs("get", "persistentvolumes", "", "pv-data"))).toEqual(noRelation)
    expect(NodeAuthorizer.decide(g, attrs("get", "persistentvolumes", "", "pv-new"))).toEqual(allow)
  })
})

describe("NodeAuthorizer.chain", () => {
  const deny = (reason: string): Authz.Authorizer => () => Effect.succeed({ allowed: false, reason })
  const allowAll: Authz.Authorizer = () => Effect.succeed({ allowed: true, reason: "" })
  const a = attrs("get", "secrets", "shop", "x")
  effectIt.effect("the node authorizer's allow wins; otherwise RBAC decides, and a denial carries the node's reason", () =>
    Effect.gen(function* () {
      expect(yield* NodeAuthorizer.chain(allowAll, deny("rbac"))(a)).toEqual({ allowed: true, reason: "" })
      expect(yield* NodeAuthorizer.chain(deny("no relationship"), allowAll)(a)).toEqual({ allowed: true, reason: "" })
      expect(yield* NodeAuthorizer.chain(deny("no relationship"), deny(""))(a)).toEqual({ allowed: false, reason: "no relationship" })
      expect(yield* NodeAuthorizer.chain(deny(""), deny("rbac"))(a)).toEqual({ allowed: false, reason: "rbac" })
    })
  )
})

describe("NodeAuthorizer.make", () => {
  const put = (store: Store.StoreService, p: Pod.Pod) => Effect.orDie(store.create(Keys.object({ group: "", resource: "pods", namespace: p.metadata.namespace, name: p.metadata.name! }), JSON.stringify(p)))
  effectIt.scopedLive("follows pods in the store, and a pod the index has not seen yet is found in the store", () =>
    Effect.gen(function* () {
      const store = yield* Store.Store
      yield* put(store, web)
      const index = yield* NodeAuthorizer.make(store)
      expect(yield* index.authorize(attrs("get", "secrets", "shop", "vol-secret"))).toEqual({ allowed: true, reason: "" })
      // Written and asked at once: whether the watch has delivered it yet or not, the answer is yes.
      yield* put(store, pod("shop", "late", "n1", { volumes: [{ name: "a", secret: { secretName: "late-secret" } }] } as unknown as Partial<Pod.Pod["spec"]>))
      expect(yield* index.authorize(attrs("get", "secrets", "shop", "late-secret"))).toEqual({ allowed: true, reason: "" })
      expect(yield* index.authorize(attrs("get", "secrets", "shop", "db-password"))).toEqual({ allowed: false, reason: "no relationship found between node 'n1' and this object" })
      yield* Effect.orDie(store.delete(Keys.object({ group: "", resource: "pods", namespace: "shop", name: "web" })))
      for (let i = 0; i < 200 && index.graph.reaches("n1", "secret", "shop", "vol-secret"); i++) yield* Effect.sleep("10 millis")
      expect(yield* index.authorize(attrs("get", "secrets", "shop", "vol-secret"))).toEqual({ allowed: false, reason: "no relationship found between node 'n1' and this object" })
    }).pipe(Effect.provide(Store.layerMemory))
  )
})

describe("NodeAuthorizer.make and local-path volumes", () => {
  effectIt.scopedLive("lets a node get and patch the local-path volumes made on it, and no others", () =>
    Effect.gen(function* () {
      const store = yield* Store.Store
      const pv = (name: string, node: string, provisioner = "fleet.koder.dev/local-path") =>
        Effect.orDie(
          store.create(
            Keys.object({ group: "", resource: "persistentvolumes", name }),
            JSON.stringify({ apiVersion: "v1", kind: "PersistentVolume", metadata: { name, annotations: { "volume.kubernetes.io/selected-node": node, "pv.kubernetes.io/provisioned-by": provisioner } }, spec: {} })
          )
        )
      yield* pv("pvc-mine", "n1")
      yield* pv("pvc-theirs", "n2")
      yield* pv("pvc-other", "n1", "example.com/p")
      const index = yield* NodeAuthorizer.make(store)
      const yes = { allowed: true, reason: "" }
      const no = { allowed: false, reason: "no relationship found between node 'n1' and this object" }
      expect(yield* index.authorize(attrs("get", "persistentvolumes", "", "pvc-mine"))).toEqual(yes)
      expect(yield* index.authorize(attrs("patch", "persistentvolumes", "", "pvc-mine"))).toEqual(yes)
      expect(yield* index.authorize(attrs("patch", "persistentvolumes", "", "pvc-theirs"))).toEqual(no)
      expect(yield* index.authorize(attrs("get", "persistentvolumes", "", "pvc-other"))).toEqual(no)
      expect(yield* index.authorize(attrs("get", "persistentvolumes", "", "pvc-missing"))).toEqual(no)
    }).pipe(Effect.provide(Store.layerMemory))
  )
})

describe("BootstrapPolicy.reconcile and the node role", () => {
  const builtIn = BootstrapPolicy.clusterRoles.find((r) => (r["metadata"] as { name: string }).name === "system:node")!
  const stored = (extra: ReadonlyArray<unknown>) => ({ ...builtIn, rules: [...(builtIn["rules"] as ReadonlyArray<unknown>), ...extra] })
  it("no longer grants nodes Secrets, ConfigMaps, claims, volumes or tokens", () => {
    const rules = JSON.stringify(builtIn["rules"])
    for (const r of ["secrets", "configmaps", "persistentvolumeclaims", "persistentvolumes", "serviceaccounts/token"]) expect(rules).not.toContain(`"${r}"`)
  })
  it("removes the retired rules from a role stored by an older server, and keeps an administrator's own", () => {
    const old = stored([
      { verbs: ["get"], apiGroups: [""], resources: ["secrets", "configmaps", "persistentvolumeclaims", "persistentvolumes"] },
      { verbs: ["create"], apiGroups: [""], resources: ["serviceaccounts/token"] },
      { verbs: ["get"], apiGroups: [""], resources: ["secrets"], resourceNames: ["node-ca"] }
    ])
    const next = BootstrapPolicy.reconcile(old, builtIn)!
    expect(next["rules"]).toEqual([...(builtIn["rules"] as ReadonlyArray<unknown>), { verbs: ["get"], apiGroups: [""], resources: ["secrets"], resourceNames: ["node-ca"] }])
  })
})
