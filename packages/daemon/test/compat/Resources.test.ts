/**
 * `@kubernetes/client-node` 1.4 against a real `koder-fleet server`: CoreV1Api and AppsV1Api
 * create / read / list / replace / patch (JSON, merge, strategic) / delete of namespaces,
 * configmaps, secrets, pods and deployments; the Status bodies of 404, 409 and 422; lists paged
 * with `limit` and `_continue` (one consistent snapshot across pages), label selectors
 * (equality and set-based) and field selectors, in a namespace and across namespaces.
 */
import { PatchStrategy, type V1ConfigMap, type V1Deployment, type V1Pod } from "@kubernetes/client-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { failure, patchAs, startCluster, type Cluster } from "./Cluster.js"

const ns = "compat-crud"

const pod = (name: string): V1Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, labels: { app: name } },
  spec: {
    containers: [
      { name: "app", image: "nginx:1.27", env: [{ name: "MODE", value: "a" }] },
      { name: "sidecar", image: "busybox:1.36", command: ["sleep", "3600"] }
    ]
  }
})

const deployment = (name: string): V1Deployment => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name },
  spec: {
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: {
        containers: [
          { name: "app", image: "nginx:1.27", ports: [{ containerPort: 80, name: "http" }], env: [{ name: "MODE", value: "a" }] },
          { name: "sidecar", image: "busybox:1.36" }
        ]
      }
    }
  }
})

const listNs = "compat-lists"
const otherNs = "compat-lists-other"
const names = Array.from({ length: 25 }, (_, i) => `item-${String(i).padStart(2, "0")}`)
const tier = (i: number) => ["a", "b", "c"][i % 3]!

describe("client-node CoreV1Api / AppsV1Api", () => {
  let c: Cluster

  beforeAll(async () => {
    c = await startCluster()
    await c.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } } })
  })

  afterAll(async () => {
    await c?.stop()
  })

  it("creates objects whose body omits apiVersion and kind, as client-node users write them", async () => {
    // kube-apiserver defaults a missing apiVersion/kind from the URL; client-node sends the body as given.
    const created = await c.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: "no-kind" }, data: { a: "1" } } })
    expect(created.kind).toBe("ConfigMap")
    expect(created.apiVersion).toBe("v1")
    expect(created.data).toEqual({ a: "1" })
  })

  it("replaces objects whose body omits apiVersion and kind", async () => {
    const created = await c.core.createNamespacedConfigMap({ namespace: ns, body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "no-kind-put" }, data: { a: "1" } } })
    const replaced = await c.core.replaceNamespacedConfigMap({ namespace: ns, name: "no-kind-put", body: { metadata: created.metadata!, data: { a: "2" } } })
    expect(replaced.kind).toBe("ConfigMap")
    expect(replaced.data).toEqual({ a: "2" })
  })

  it("namespaces: create, read, list, replace, patch (json, merge, strategic), delete", async () => {
    const created = await c.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "compat-ns", labels: { team: "a" } } } })
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/)
    expect(created.metadata?.resourceVersion).toMatch(/^\d+$/)
    expect(created.metadata?.creationTimestamp).toBeInstanceOf(Date)
    expect(created.status?.phase).toBe("Active")
    expect(created.spec?.finalizers).toEqual(["kubernetes"])

    const read = await c.core.readNamespace({ name: "compat-ns" })
    expect(read.metadata?.uid).toBe(created.metadata?.uid)

    const list = await c.core.listNamespace()
    expect(list.kind).toBe("NamespaceList")
    expect(list.items.map((n) => n.metadata?.name)).toEqual(expect.arrayContaining(["compat-ns", ns]))

    const replaced = await c.core.replaceNamespace({ name: "compat-ns", body: { ...read, metadata: { ...read.metadata, labels: { team: "b" } } } })
    expect(replaced.metadata?.labels?.["team"]).toBe("b")
    expect(Number(replaced.metadata?.resourceVersion)).toBeGreaterThan(Number(read.metadata?.resourceVersion))

    const json = await c.core.patchNamespace({ name: "compat-ns", body: [{ op: "add", path: "/metadata/labels/json", value: "yes" }] }, patchAs(PatchStrategy.JsonPatch))
    expect(json.metadata?.labels).toMatchObject({ team: "b", json: "yes" })
    const merge = await c.core.patchNamespace({ name: "compat-ns", body: { metadata: { labels: { json: null, merge: "yes" } } } }, patchAs(PatchStrategy.MergePatch))
    expect(merge.metadata?.labels).toMatchObject({ team: "b", merge: "yes" })
    expect(merge.metadata?.labels?.["json"]).toBeUndefined()
    const strategic = await c.core.patchNamespace({ name: "compat-ns", body: { metadata: { annotations: { smp: "yes" } } } }, patchAs(PatchStrategy.StrategicMergePatch))
    expect(strategic.metadata?.annotations).toMatchObject({ smp: "yes" })
    expect(strategic.metadata?.labels).toMatchObject({ team: "b", merge: "yes" })

    // Without a namespace controller the namespace stays Terminating (docs/api-compatibility.md).
    await c.core.deleteNamespace({ name: "compat-ns" })
    const terminating = await c.core.readNamespace({ name: "compat-ns" })
    expect(terminating.metadata?.deletionTimestamp).toBeInstanceOf(Date)
    expect(terminating.status?.phase).toBe("Terminating")
    const refused = await failure(c.core.createNamespacedConfigMap({ namespace: "compat-ns", body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "late" } } }))
    expect(refused.code).toBe(403)
    expect(refused.status).toMatchObject({ kind: "Status", status: "Failure", reason: "Forbidden", code: 403 })
    expect(refused.status.message).toContain("because it is being terminated")
  })

  it("configmaps: create, read, list, replace, patch (json, merge, strategic), delete", async () => {
    const body: V1ConfigMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm", labels: { app: "x" } }, data: { a: "1", b: "2" } }
    const created = await c.core.createNamespacedConfigMap({ namespace: ns, body })
    expect(created.metadata).toMatchObject({ name: "cm", namespace: ns, labels: { app: "x" } })
    expect(created.data).toEqual({ a: "1", b: "2" })

    const read = await c.core.readNamespacedConfigMap({ namespace: ns, name: "cm" })
    expect(read.metadata?.resourceVersion).toBe(created.metadata?.resourceVersion)
    const list = await c.core.listNamespacedConfigMap({ namespace: ns })
    expect(list.kind).toBe("ConfigMapList")
    expect(list.metadata?.resourceVersion).toMatch(/^\d+$/)
    expect(list.items.find((i) => i.metadata?.name === "cm")?.data).toEqual({ a: "1", b: "2" })

    const replaced = await c.core.replaceNamespacedConfigMap({ namespace: ns, name: "cm", body: { ...read, data: { a: "10" } } })
    expect(replaced.data).toEqual({ a: "10" })

    const json = await c.core.patchNamespacedConfigMap(
      { namespace: ns, name: "cm", body: [{ op: "test", path: "/data/a", value: "10" }, { op: "add", path: "/data/j", value: "json" }] },
      patchAs(PatchStrategy.JsonPatch)
    )
    expect(json.data).toEqual({ a: "10", j: "json" })
    const merge = await c.core.patchNamespacedConfigMap({ namespace: ns, name: "cm", body: { data: { a: null, m: "merge" } } }, patchAs(PatchStrategy.MergePatch))
    expect(merge.data).toEqual({ j: "json", m: "merge" })
    const strategic = await c.core.patchNamespacedConfigMap({ namespace: ns, name: "cm", body: { data: { s: "smp" } } }, patchAs(PatchStrategy.StrategicMergePatch))
    expect(strategic.data).toEqual({ j: "json", m: "merge", s: "smp" })

    // A JSON patch whose test fails changes nothing and is refused (kube-apiserver: 422).
    const failed = await failure(
      c.core.patchNamespacedConfigMap({ namespace: ns, name: "cm", body: [{ op: "test", path: "/data/j", value: "other" }, { op: "remove", path: "/data/j" }] }, patchAs(PatchStrategy.JsonPatch))
    )
    expect(failed.code).toBe(422)
    expect(failed.status).toMatchObject({ kind: "Status", status: "Failure", reason: "Invalid", code: 422 })
    expect((await c.core.readNamespacedConfigMap({ namespace: ns, name: "cm" })).data).toEqual({ j: "json", m: "merge", s: "smp" })

    const deleted = await c.core.deleteNamespacedConfigMap({ namespace: ns, name: "cm" })
    expect(deleted).toMatchObject({ status: "Success", details: { name: "cm", kind: "configmaps", uid: created.metadata?.uid } })
    const gone = await failure(c.core.readNamespacedConfigMap({ namespace: ns, name: "cm" }))
    expect(gone.code).toBe(404)
  })

  it("secrets: stringData is folded into base64 data; replace, patch and delete", async () => {
    const created = await c.core.createNamespacedSecret({
      namespace: ns,
      body: { apiVersion: "v1", kind: "Secret", metadata: { name: "s" }, type: "Opaque", stringData: { user: "admin" }, data: { pass: Buffer.from("pw").toString("base64") } }
    })
    expect(created.data).toEqual({ user: Buffer.from("admin").toString("base64"), pass: Buffer.from("pw").toString("base64") })
    expect(created.stringData).toBeUndefined()
    expect(created.type).toBe("Opaque")

    const read = await c.core.readNamespacedSecret({ namespace: ns, name: "s" })
    const replaced = await c.core.replaceNamespacedSecret({ namespace: ns, name: "s", body: { ...read, data: { ...read.data, extra: Buffer.from("e").toString("base64") } } })
    expect(Object.keys(replaced.data ?? {}).sort()).toEqual(["extra", "pass", "user"])

    const json = await c.core.patchNamespacedSecret({ namespace: ns, name: "s", body: [{ op: "remove", path: "/data/extra" }] }, patchAs(PatchStrategy.JsonPatch))
    expect(Object.keys(json.data ?? {}).sort()).toEqual(["pass", "user"])
    const merge = await c.core.patchNamespacedSecret({ namespace: ns, name: "s", body: { metadata: { labels: { rotated: "true" } } } }, patchAs(PatchStrategy.MergePatch))
    expect(merge.metadata?.labels).toMatchObject({ rotated: "true" })
    const strategic = await c.core.patchNamespacedSecret({ namespace: ns, name: "s", body: { stringData: { pass: "new" } } }, patchAs(PatchStrategy.StrategicMergePatch))
    expect(strategic.data?.["pass"]).toBe(Buffer.from("new").toString("base64"))

    const list = await c.core.listNamespacedSecret({ namespace: ns })
    expect(list.items.map((s) => s.metadata?.name)).toContain("s")

    const deleted = await c.core.deleteNamespacedSecret({ namespace: ns, name: "s" })
    expect(deleted).toMatchObject({ status: "Success", details: { name: "s", kind: "secrets" } })
    expect((await failure(c.core.readNamespacedSecret({ namespace: ns, name: "s" }))).code).toBe(404)
  })

  it("pods: defaults, replace, strategic merge of containers by name, json and merge patches, delete", async () => {
    const created = await c.core.createNamespacedPod({ namespace: ns, body: pod("web") })
    expect(created.spec).toMatchObject({ restartPolicy: "Always", dnsPolicy: "ClusterFirst", terminationGracePeriodSeconds: 30 })
    expect(created.spec?.containers[0]?.imagePullPolicy).toBe("IfNotPresent")
    expect(created.status?.phase).toBe("Pending")

    const read = await c.core.readNamespacedPod({ namespace: ns, name: "web" })
    const replaced = await c.core.replaceNamespacedPod({
      namespace: ns,
      name: "web",
      body: { ...read, spec: { ...read.spec!, containers: read.spec!.containers.map((k) => (k.name === "app" ? { ...k, image: "nginx:1.28" } : k)) } }
    })
    expect(replaced.spec?.containers.map((k) => k.image)).toEqual(["nginx:1.28", "busybox:1.36"])

    // Strategic merge: containers merge on `name`, so the sidecar and the app's env stay.
    const strategic = await c.core.patchNamespacedPod(
      { namespace: ns, name: "web", body: { spec: { containers: [{ name: "app", image: "nginx:1.29" }] } } },
      patchAs(PatchStrategy.StrategicMergePatch)
    )
    expect(strategic.spec?.containers.map((k) => [k.name, k.image])).toEqual([
      ["app", "nginx:1.29"],
      ["sidecar", "busybox:1.36"]
    ])
    expect(strategic.spec?.containers[0]?.env).toEqual([{ name: "MODE", value: "a" }])

    const json = await c.core.patchNamespacedPod({ namespace: ns, name: "web", body: [{ op: "replace", path: "/spec/containers/1/image", value: "busybox:1.37" }] }, patchAs(PatchStrategy.JsonPatch))
    expect(json.spec?.containers[1]?.image).toBe("busybox:1.37")
    const merge = await c.core.patchNamespacedPod({ namespace: ns, name: "web", body: { metadata: { labels: { tier: "front" } } } }, patchAs(PatchStrategy.MergePatch))
    expect(merge.metadata?.labels).toEqual({ app: "web", tier: "front", "fleet.koder.dev/region": "local" })

    // An immutable pod field: 422 naming the field.
    const immutable = await failure(
      c.core.patchNamespacedPod({ namespace: ns, name: "web", body: { spec: { restartPolicy: "Never" } } }, patchAs(PatchStrategy.MergePatch))
    )
    expect(immutable.code).toBe(422)
    expect(immutable.status).toMatchObject({ kind: "Status", reason: "Invalid", code: 422, details: { name: "web", kind: "Pod" } })
    expect(immutable.status.message).toMatch(/^Pod "web" is invalid: spec: Forbidden: pod updates may not change fields other than/)

    const list = await c.core.listNamespacedPod({ namespace: ns })
    expect(list.kind).toBe("PodList")
    expect(list.items.map((p) => p.metadata?.name)).toContain("web")

    // A pod not bound to a node is deleted at once; the deleted pod is returned.
    const deleted = await c.core.deleteNamespacedPod({ namespace: ns, name: "web" })
    expect(deleted.kind).toBe("Pod")
    expect(deleted.metadata?.name).toBe("web")
    expect((await failure(c.core.readNamespacedPod({ namespace: ns, name: "web" }))).code).toBe(404)
  })

  it("deployments: defaults, generation, replace, strategic merge on containers/env/ports, scale, delete", async () => {
    const created = await c.apps.createNamespacedDeployment({ namespace: ns, body: deployment("api") })
    expect(created.metadata?.generation).toBe(1)
    expect(created.spec).toMatchObject({
      replicas: 1,
      revisionHistoryLimit: 10,
      progressDeadlineSeconds: 600,
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: "25%", maxUnavailable: "25%" } }
    })
    expect(created.spec?.template.spec?.restartPolicy).toBe("Always")

    const read = await c.apps.readNamespacedDeployment({ namespace: ns, name: "api" })
    const replaced = await c.apps.replaceNamespacedDeployment({ namespace: ns, name: "api", body: { ...read, spec: { ...read.spec!, replicas: 3 } } })
    expect(replaced.spec?.replicas).toBe(3)
    expect(replaced.metadata?.generation).toBe(2)

    const strategic = await c.apps.patchNamespacedDeployment(
      {
        namespace: ns,
        name: "api",
        body: {
          spec: {
            template: {
              spec: {
                containers: [{ name: "app", image: "nginx:1.29", env: [{ name: "MODE", value: "b" }], ports: [{ containerPort: 9090, name: "metrics" }] }]
              }
            }
          }
        }
      },
      patchAs(PatchStrategy.StrategicMergePatch)
    )
    const containers = strategic.spec?.template.spec?.containers ?? []
    expect(containers.map((k) => [k.name, k.image])).toEqual([
      ["app", "nginx:1.29"],
      ["sidecar", "busybox:1.36"]
    ])
    expect(containers[0]?.env).toEqual([{ name: "MODE", value: "b" }])
    expect(containers[0]?.ports?.map((p) => p.containerPort).sort()).toEqual([80, 9090])
    expect(strategic.metadata?.generation).toBe(3)

    const merge = await c.apps.patchNamespacedDeployment({ namespace: ns, name: "api", body: { metadata: { labels: { team: "x" } } } }, patchAs(PatchStrategy.MergePatch))
    expect(merge.metadata?.labels).toMatchObject({ team: "x" })
    expect(merge.metadata?.generation).toBe(3)
    const json = await c.apps.patchNamespacedDeployment({ namespace: ns, name: "api", body: [{ op: "replace", path: "/spec/replicas", value: 5 }] }, patchAs(PatchStrategy.JsonPatch))
    expect(json.spec?.replicas).toBe(5)

    const scale = await c.apps.readNamespacedDeploymentScale({ namespace: ns, name: "api" })
    expect(scale).toMatchObject({ kind: "Scale", apiVersion: "autoscaling/v1", spec: { replicas: 5 } })
    const rescaled = await c.apps.replaceNamespacedDeploymentScale({ namespace: ns, name: "api", body: { ...scale, spec: { replicas: 2 } } })
    expect(rescaled.spec?.replicas).toBe(2)
    expect((await c.apps.readNamespacedDeployment({ namespace: ns, name: "api" })).spec?.replicas).toBe(2)

    const list = await c.apps.listNamespacedDeployment({ namespace: ns })
    expect(list.kind).toBe("DeploymentList")
    expect(list.items.map((d) => d.metadata?.name)).toEqual(["api"])
    const everywhere = await c.apps.listDeploymentForAllNamespaces()
    expect(everywhere.items.map((d) => `${d.metadata?.namespace}/${d.metadata?.name}`)).toContain(`${ns}/api`)

    const deleted = await c.apps.deleteNamespacedDeployment({ namespace: ns, name: "api" })
    expect(deleted).toMatchObject({ status: "Success", details: { name: "api", group: "apps", kind: "deployments" } })
    expect((await failure(c.apps.readNamespacedDeployment({ namespace: ns, name: "api" }))).code).toBe(404)
  })

  it("has the default namespace every Kubernetes cluster has", async () => {
    // kube-apiserver creates `default` (and kube-system, kube-public); client-node examples use it.
    const ns = await c.core.readNamespace({ name: "default" })
    expect(ns.status?.phase).toBe("Active")
  })

  it("serves 16-64 KiB writes one after another over one keep-alive connection (as kubectl and client-go send them)", async () => {
    // client-node opens a connection per call; Go clients and the Fleet client keep them alive.
    const results: Array<number | string> = []
    for (let i = 0; i < 24; i++) {
      const body = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `keep-alive-${i}` }, data: { payload: "x".repeat((16 << i % 3) * 1024) } }
      results.push(await c.send("POST", `/api/v1/namespaces/${ns}/configmaps`, body).then((r) => r.status, (e: NodeJS.ErrnoException) => e.code ?? String(e)))
    }
    expect(results).toEqual(Array.from({ length: 24 }, () => 201))
  })

  it("a replace with a stale resourceVersion throws 409 with a Conflict Status", async () => {
    const created = await c.core.createNamespacedConfigMap({ namespace: ns, body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cas" }, data: { v: "1" } } })
    await c.core.replaceNamespacedConfigMap({ namespace: ns, name: "cas", body: { ...created, data: { v: "2" } } })
    const stale = await failure(c.core.replaceNamespacedConfigMap({ namespace: ns, name: "cas", body: { ...created, data: { v: "3" } } }))
    expect(stale.code).toBe(409)
    expect(stale.status).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: `Operation cannot be fulfilled on configmaps "cas": the object has been modified; please apply your changes to the latest version and try again`,
      reason: "Conflict",
      details: { name: "cas", kind: "configmaps" },
      code: 409
    })
    expect((await c.core.readNamespacedConfigMap({ namespace: ns, name: "cas" })).data).toEqual({ v: "2" })

    // The same for a deployment (group in the details), and for a create of an existing name.
    const d = await c.apps.createNamespacedDeployment({ namespace: ns, body: deployment("cas") })
    await c.apps.patchNamespacedDeployment({ namespace: ns, name: "cas", body: { spec: { replicas: 2 } } }, patchAs(PatchStrategy.MergePatch))
    const staleDeployment = await failure(c.apps.replaceNamespacedDeployment({ namespace: ns, name: "cas", body: { ...d, spec: { ...d.spec!, replicas: 4 } } }))
    expect(staleDeployment.code).toBe(409)
    expect(staleDeployment.status).toMatchObject({ reason: "Conflict", details: { name: "cas", group: "apps", kind: "deployments" } })
    expect(staleDeployment.status.message).toBe(`Operation cannot be fulfilled on deployments.apps "cas": the object has been modified; please apply your changes to the latest version and try again`)
    const exists = await failure(c.apps.createNamespacedDeployment({ namespace: ns, body: deployment("cas") }))
    expect(exists.code).toBe(409)
    expect(exists.status).toMatchObject({ reason: "AlreadyExists", message: `deployments.apps "cas" already exists`, details: { name: "cas", group: "apps", kind: "deployments" } })
  })

  it("a missing object throws 404 with a NotFound Status", async () => {
    const missing = await failure(c.core.readNamespacedConfigMap({ namespace: ns, name: "nope" }))
    expect(missing.code).toBe(404)
    expect(missing.status).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: `configmaps "nope" not found`,
      reason: "NotFound",
      details: { name: "nope", kind: "configmaps" },
      code: 404
    })
    const deployment = await failure(c.apps.deleteNamespacedDeployment({ namespace: ns, name: "nope" }))
    expect(deployment.code).toBe(404)
    expect(deployment.status).toMatchObject({ reason: "NotFound", message: `deployments.apps "nope" not found`, details: { name: "nope", group: "apps", kind: "deployments" } })
    const patch = await failure(c.core.patchNamespacedPod({ namespace: ns, name: "nope", body: { metadata: { labels: { a: "b" } } } }, patchAs(PatchStrategy.MergePatch)))
    expect(patch.code).toBe(404)
    expect(patch.status).toMatchObject({ reason: "NotFound", message: `pods "nope" not found` })
    const namespace = await failure(c.core.createNamespacedConfigMap({ namespace: "no-such-ns", body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } } }))
    expect(namespace.code).toBe(404)
    expect(namespace.status).toMatchObject({ reason: "NotFound", message: `namespaces "no-such-ns" not found`, details: { name: "no-such-ns", kind: "namespaces" } })
  })

  it("an invalid pod throws 422 with an Invalid Status naming every bad field", async () => {
    const bad: V1Pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "bad" },
      spec: { containers: [{ name: "app" }, { name: "Bad_Name", image: "x" }] }
    }
    const invalid = await failure(c.core.createNamespacedPod({ namespace: ns, body: bad }))
    expect(invalid.code).toBe(422)
    expect(invalid.status).toMatchObject({ kind: "Status", apiVersion: "v1", status: "Failure", reason: "Invalid", code: 422, details: { name: "bad", kind: "Pod" } })
    expect(invalid.status.message).toMatch(/^Pod "bad" is invalid: /)
    expect(invalid.status.message).toContain("spec.containers[0].image: Required value")
    expect(invalid.status.message).toContain("spec.containers[1].name")
    const fields = (invalid.status.details?.causes ?? []).map((k) => k.field)
    expect(fields).toEqual(expect.arrayContaining(["spec.containers[0].image", "spec.containers[1].name"]))
    expect(invalid.status.details?.causes?.find((k) => k.field === "spec.containers[0].image")?.reason).toBe("FieldValueRequired")
    expect((await failure(c.core.readNamespacedPod({ namespace: ns, name: "bad" }))).code).toBe(404)

    const badName = await failure(c.core.createNamespacedConfigMap({ namespace: ns, body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "Not_Valid" } } }))
    expect(badName.code).toBe(422)
    expect(badName.status).toMatchObject({ reason: "Invalid", details: { name: "Not_Valid", kind: "ConfigMap", causes: [{ field: "metadata.name" }] } })
  })

  describe("lists", () => {
    const ns = listNs
    const other = otherNs

    beforeAll(async () => {
      for (const name of [ns, other]) await c.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name } } })
      await Promise.all(
        names.map((name, i) =>
          c.core.createNamespacedConfigMap({
            namespace: ns,
            body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, labels: { tier: tier(i), ...(i % 2 === 0 ? { env: "prod" } : {}) } }, data: { i: String(i) } }
          })
        )
      )
      await c.core.createNamespacedConfigMap({ namespace: other, body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "item-00", labels: { tier: "a" } } } })
    })

    const namesOf = (list: { items: Array<{ metadata?: { name?: string } }> }) => list.items.map((i) => i.metadata?.name)

    it("pages with limit and _continue through one consistent snapshot", async () => {
      const first = await c.core.listNamespacedConfigMap({ namespace: ns, limit: 10 })
      expect(namesOf(first)).toEqual(names.slice(0, 10))
      expect(first.metadata?._continue).toBeTruthy()
      expect(first.metadata?.remainingItemCount).toBe(15)
      const rv = first.metadata?.resourceVersion
      expect(rv).toMatch(/^\d+$/)

      // Changes after the first page are not part of the paged list (it is pinned to one revision).
      await c.core.createNamespacedConfigMap({ namespace: ns, body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "item-99" } } })
      await c.core.deleteNamespacedConfigMap({ namespace: ns, name: "item-15" })

      const second = await c.core.listNamespacedConfigMap({ namespace: ns, limit: 10, _continue: first.metadata!._continue! })
      expect(namesOf(second)).toEqual(names.slice(10, 20))
      expect(second.metadata?.resourceVersion).toBe(rv)
      expect(second.metadata?.remainingItemCount).toBe(5)
      const third = await c.core.listNamespacedConfigMap({ namespace: ns, limit: 10, _continue: second.metadata!._continue! })
      expect(namesOf(third)).toEqual(names.slice(20))
      expect(third.metadata?._continue ?? "").toBe("")
      expect(third.metadata?.remainingItemCount).toBeUndefined()

      const now = await c.core.listNamespacedConfigMap({ namespace: ns })
      expect(namesOf(now)).toEqual([...names.filter((n) => n !== "item-15"), "item-99"])
      expect(Number(now.metadata?.resourceVersion)).toBeGreaterThan(Number(rv))
      await c.core.deleteNamespacedConfigMap({ namespace: ns, name: "item-99" })
      await c.core.createNamespacedConfigMap({
        namespace: ns,
        body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "item-15", labels: { tier: tier(15) } }, data: { i: "15" } }
      })
    })

    it("pages a label-selected list without losing or repeating items", async () => {
      const seen: Array<string | undefined> = []
      let token: string | undefined
      let pages = 0
      do {
        const page = await c.core.listNamespacedConfigMap({ namespace: ns, labelSelector: "tier=b", limit: 3, ...(token ? { _continue: token } : {}) })
        expect(page.items.length).toBeLessThanOrEqual(3)
        seen.push(...namesOf(page))
        token = page.metadata?._continue || undefined
        pages++
      } while (token !== undefined && pages < 20)
      expect(seen).toEqual(names.filter((_, i) => tier(i) === "b"))
      expect(pages).toBeGreaterThanOrEqual(3)
    })

    it("rejects a malformed continue token with 400", async () => {
      const bad = await failure(c.core.listNamespacedConfigMap({ namespace: ns, limit: 10, _continue: "not-a-token" }))
      expect(bad.code).toBe(400)
      expect(bad.status).toMatchObject({ kind: "Status", status: "Failure", reason: "BadRequest", code: 400 })
    })

    it("selects by label, equality and set-based", async () => {
      const select = async (labelSelector: string) => namesOf(await c.core.listNamespacedConfigMap({ namespace: ns, labelSelector }))
      const where = (f: (i: number) => boolean) => names.filter((_, i) => f(i))
      expect(await select("tier=a")).toEqual(where((i) => tier(i) === "a"))
      expect(await select("tier==a")).toEqual(where((i) => tier(i) === "a"))
      expect(await select("tier!=a")).toEqual(where((i) => tier(i) !== "a"))
      expect(await select("tier in (a,b)")).toEqual(where((i) => tier(i) !== "c"))
      expect(await select("tier notin (a,b)")).toEqual(where((i) => tier(i) === "c"))
      expect(await select("env")).toEqual(where((i) => i % 2 === 0 && i !== 15))
      expect(await select("!env")).toEqual(where((i) => i % 2 === 1 || i === 15))
      expect(await select("tier=a,env=prod")).toEqual(where((i) => tier(i) === "a" && i % 2 === 0))
      expect(await select("tier=z")).toEqual([])

      const everywhere = await c.core.listConfigMapForAllNamespaces({ labelSelector: "tier=a" })
      expect(everywhere.items.filter((i) => i.metadata?.name === "item-00").map((i) => i.metadata?.namespace).sort()).toEqual([ns, other])

      const bad = await failure(c.core.listNamespacedConfigMap({ namespace: ns, labelSelector: "tier in (a" }))
      expect(bad.code).toBe(400)
      expect(bad.status).toMatchObject({ kind: "Status", reason: "BadRequest", code: 400 })
    })

    it("selects by field: metadata.name, metadata.namespace, spec.nodeName, status.phase", async () => {
      expect(namesOf(await c.core.listNamespacedConfigMap({ namespace: ns, fieldSelector: "metadata.name=item-03" }))).toEqual(["item-03"])
      expect(namesOf(await c.core.listNamespacedConfigMap({ namespace: ns, fieldSelector: "metadata.name!=item-03" }))).toEqual(names.filter((n) => n !== "item-03"))
      const inOther = await c.core.listConfigMapForAllNamespaces({ fieldSelector: `metadata.namespace=${other}` })
      expect(inOther.items.map((i) => `${i.metadata?.namespace}/${i.metadata?.name}`)).toEqual([`${other}/item-00`])
      const both = await c.core.listNamespacedConfigMap({ namespace: ns, fieldSelector: "metadata.name=item-00", labelSelector: "tier=a" })
      expect(namesOf(both)).toEqual(["item-00"])

      const container = [{ name: "app", image: "nginx:1.27" }]
      await c.core.createNamespacedPod({ namespace: ns, body: { apiVersion: "v1", kind: "Pod", metadata: { name: "bound" }, spec: { nodeName: "node-1", containers: container } } })
      await c.core.createNamespacedPod({ namespace: ns, body: { apiVersion: "v1", kind: "Pod", metadata: { name: "pending" }, spec: { containers: container } } })
      expect(namesOf(await c.core.listNamespacedPod({ namespace: ns, fieldSelector: "spec.nodeName=node-1" }))).toEqual(["bound"])
      expect(namesOf(await c.core.listNamespacedPod({ namespace: ns, fieldSelector: "spec.nodeName=" }))).toEqual(["pending"])
      expect(namesOf(await c.core.listNamespacedPod({ namespace: ns, fieldSelector: "status.phase=Pending,spec.nodeName!=node-1" }))).toEqual(["pending"])
      expect(namesOf(await c.core.listNamespacedPod({ namespace: ns, fieldSelector: "status.phase=Running" }))).toEqual([])

      const bad = await failure(c.core.listNamespacedConfigMap({ namespace: ns, fieldSelector: "spec.nodeName=node-1" }))
      expect(bad.code).toBe(400)
      expect(bad.status).toMatchObject({ kind: "Status", reason: "BadRequest", code: 400 })
      expect(bad.status.message).toContain(`field label not supported: spec.nodeName`)
    })
  })
})
