// The workload, storage, disruption and networking kinds through the API server's request handler
// (no HTTP) over a memory store: create, discovery, the status and scale subresources, tables.
import { ApiServer, Authn, Store } from "@koder/fleet-core"
import { Effect, Exit, Scope } from "effect"
import { afterEach, describe, expect, it } from "vitest"

type Response = { status: number; headers: Record<string, string>; body: any }

const scopes: Array<Scope.CloseableScope> = []
afterEach(async () => {
  for (const s of scopes.splice(0)) await Effect.runPromise(Scope.close(s, Exit.void))
})

const start = async () => {
  const scope = await Effect.runPromise(Scope.make())
  scopes.push(scope)
  const server = await Effect.runPromise(
    Scope.extend(ApiServer.make({ store: Store.makeMemory(), authenticate: () => Effect.succeed(Authn.bootstrapAdmin), waitForRevision: "1 second" }), scope)
  )
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> => {
    const [p, q] = path.split("?")
    const bytes = body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(body))
    const response = await Effect.runPromise(
      server.handle({ method, path: p!, query: new URLSearchParams(q ?? ""), headers: { "content-type": "application/json", ...headers }, body: bytes, client: "test" })
    )
    if (response._tag === "Stream") throw new Error("unexpected stream")
    return { status: response.status, headers: response.headers as Record<string, string>, body: response.body }
  }
  await call("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "default" } })
  return { call }
}

const template = (labels: Record<string, string>, restartPolicy?: string) => ({
  metadata: { labels },
  spec: { ...(restartPolicy ? { restartPolicy } : {}), containers: [{ name: "main", image: "busybox:1.36", command: ["sleep", "1"] }] }
})

const objects = {
  statefulset: {
    path: "/apis/apps/v1/namespaces/default/statefulsets",
    body: {
      apiVersion: "apps/v1",
      kind: "StatefulSet",
      metadata: { name: "web" },
      spec: {
        replicas: 2,
        serviceName: "web",
        selector: { matchLabels: { app: "web" } },
        template: template({ app: "web" }),
        volumeClaimTemplates: [{ metadata: { name: "www" }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } }]
      }
    }
  },
  daemonset: {
    path: "/apis/apps/v1/namespaces/default/daemonsets",
    body: { apiVersion: "apps/v1", kind: "DaemonSet", metadata: { name: "agent" }, spec: { selector: { matchLabels: { app: "agent" } }, template: template({ app: "agent" }) } }
  },
  controllerrevision: {
    path: "/apis/apps/v1/namespaces/default/controllerrevisions",
    body: { apiVersion: "apps/v1", kind: "ControllerRevision", metadata: { name: "web-7c9f" }, data: { spec: { template: { $patch: "replace" } } }, revision: 1 }
  },
  job: {
    path: "/apis/batch/v1/namespaces/default/jobs",
    body: { apiVersion: "batch/v1", kind: "Job", metadata: { name: "pi" }, spec: { template: template({ app: "pi" }, "Never") } }
  },
  cronjob: {
    path: "/apis/batch/v1/namespaces/default/cronjobs",
    body: {
      apiVersion: "batch/v1",
      kind: "CronJob",
      metadata: { name: "nightly" },
      spec: { schedule: "0 3 * * *", timeZone: "Europe/Paris", jobTemplate: { spec: { template: template({ app: "nightly" }, "OnFailure") } } }
    }
  },
  persistentvolumeclaim: {
    path: "/api/v1/namespaces/default/persistentvolumeclaims",
    body: { apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: { name: "data" }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "5Gi" } } } }
  },
  persistentvolume: {
    path: "/api/v1/persistentvolumes",
    body: { apiVersion: "v1", kind: "PersistentVolume", metadata: { name: "pv-1" }, spec: { capacity: { storage: "10Gi" }, accessModes: ["ReadWriteOnce"], hostPath: { path: "/srv/pv-1" } } }
  },
  endpointslice: {
    path: "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
    body: {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name: "web-x1", labels: { "kubernetes.io/service-name": "web" } },
      addressType: "IPv4",
      endpoints: [{ addresses: ["10.244.0.5"], conditions: { ready: true } }],
      ports: [{ name: "http", port: 80 }]
    }
  },
  poddisruptionbudget: {
    path: "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
    body: { apiVersion: "policy/v1", kind: "PodDisruptionBudget", metadata: { name: "web" }, spec: { minAvailable: 1, selector: { matchLabels: { app: "web" } } } }
  },
  ipaddress: {
    path: "/apis/networking.k8s.io/v1/ipaddresses",
    body: { apiVersion: "networking.k8s.io/v1", kind: "IPAddress", metadata: { name: "10.96.0.10" }, spec: { parentRef: { group: "", resource: "services", namespace: "default", name: "web" } } }
  }
} as const

describe("creating each new kind through the API", () => {
  it.each(Object.entries(objects))("%s", async (_, { path, body }) => {
    const { call } = await start()
    const created = await call("POST", path, body)
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    expect(created.body).toMatchObject({ apiVersion: body.apiVersion, kind: body.kind, metadata: { name: body.metadata.name } })
    const got = await call("GET", `${path}/${body.metadata.name}`)
    expect(got.body).toEqual(created.body)
    const list = await call("GET", path)
    expect(list.body.kind).toBe(`${body.kind}List`)
    expect(list.body.items.map((i: any) => i.metadata.name)).toEqual([body.metadata.name])
  })

  it("answers an invalid object with 422 and kube-apiserver's message", async () => {
    const { call } = await start()
    const r = await call("POST", objects.job.path, { ...objects.job.body, spec: { template: template({}, "Always") } })
    expect(r.status).toBe(422)
    expect(r.body.message).toBe('Job.batch "pi" is invalid: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"')
    const cron = await call("POST", objects.cronjob.path, { ...objects.cronjob.body, spec: { ...objects.cronjob.body.spec, timeZone: "Mars/Olympus" } })
    expect(cron.status).toBe(422)
    expect(cron.body.details.causes).toEqual([{ reason: "FieldValueInvalid", field: "spec.timeZone", message: 'Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus' }])
  })

  it("keeps one IPAddress object per address: a second claim on an IP is AlreadyExists", async () => {
    const { call } = await start()
    expect((await call("POST", objects.ipaddress.path, objects.ipaddress.body)).status).toBe(201)
    const again = await call("POST", objects.ipaddress.path, { ...objects.ipaddress.body, spec: { parentRef: { resource: "services", namespace: "default", name: "other" } } })
    expect(again.status).toBe(409)
    expect(again.body.reason).toBe("AlreadyExists")
  })
})

describe("Job selector generation", () => {
  it("selects the server-assigned uid and labels the pod template", async () => {
    const { call } = await start()
    const job = (await call("POST", objects.job.path, objects.job.body)).body
    const uid = job.metadata.uid
    expect(uid).toMatch(/^[0-9a-f-]{36}$/)
    expect(job.spec.selector).toEqual({ matchLabels: { "batch.kubernetes.io/controller-uid": uid } })
    expect(job.spec.template.metadata.labels).toEqual({
      app: "pi",
      "batch.kubernetes.io/controller-uid": uid,
      "batch.kubernetes.io/job-name": "pi",
      "controller-uid": uid,
      "job-name": "pi"
    })
    expect(job.spec).toMatchObject({ completions: 1, parallelism: 1, backoffLimit: 6, completionMode: "NonIndexed", suspend: false, manualSelector: false })
    expect(job.metadata.labels).toMatchObject({ app: "pi" })
  })

  it("survives a round trip: updating the stored Job keeps its selector, and the selector stays immutable", async () => {
    const { call } = await start()
    const job = (await call("POST", objects.job.path, objects.job.body)).body
    const suspended = await call("PUT", `${objects.job.path}/pi`, { ...job, spec: { ...job.spec, suspend: true } })
    expect(suspended.status, JSON.stringify(suspended.body)).toBe(200)
    expect(suspended.body.metadata.generation).toBe(2)
    const moved = await call("PUT", `${objects.job.path}/pi`, { ...suspended.body, spec: { ...suspended.body.spec, selector: { matchLabels: { app: "pi" } } } })
    expect(moved.status).toBe(422)
    expect(moved.body.message).toContain("spec.selector: Invalid value: ")
  })
})

describe("subresources", () => {
  it("serves StatefulSet /status: status changes there, and main-resource updates keep it", async () => {
    const { call } = await start()
    const sts = (await call("POST", objects.statefulset.path, objects.statefulset.body)).body
    expect(sts.status).toEqual({ replicas: 0, availableReplicas: 0 })
    const status = { observedGeneration: 1, replicas: 2, readyReplicas: 1, currentReplicas: 2, updatedReplicas: 2, availableReplicas: 1, currentRevision: "web-1", updateRevision: "web-1" }
    const updated = await call("PUT", `${objects.statefulset.path}/web/status`, { ...sts, spec: { ...sts.spec, replicas: 9 }, status })
    expect(updated.status).toBe(200)
    expect(updated.body.status).toEqual(status)
    expect(updated.body.spec.replicas).toBe(2)
    const relabelled = await call("PUT", `${objects.statefulset.path}/web`, { ...updated.body, metadata: { ...updated.body.metadata, labels: { x: "y" } }, status: {} })
    expect(relabelled.body.status).toEqual(status)
  })

  it("serves StatefulSet /scale", async () => {
    const { call } = await start()
    await call("POST", objects.statefulset.path, objects.statefulset.body)
    const scale = await call("GET", `${objects.statefulset.path}/web/scale`)
    expect(scale.body).toMatchObject({ kind: "Scale", apiVersion: "autoscaling/v1", spec: { replicas: 2 }, status: { replicas: 0, selector: "app=web" } })
    const put = await call("PUT", `${objects.statefulset.path}/web/scale`, { ...scale.body, spec: { replicas: 5 } })
    expect(put.body.spec.replicas).toBe(5)
    const patched = await call("PATCH", `${objects.statefulset.path}/web/scale`, { spec: { replicas: 3 } }, { "content-type": "application/merge-patch+json" })
    expect(patched.body.spec.replicas).toBe(3)
    const sts = (await call("GET", `${objects.statefulset.path}/web`)).body
    expect(sts.spec.replicas).toBe(3)
    expect(sts.metadata.generation).toBe(3)
  })

  it("refuses StatefulSet updates outside the mutable fields", async () => {
    const { call } = await start()
    const sts = (await call("POST", objects.statefulset.path, objects.statefulset.body)).body
    const r = await call("PUT", `${objects.statefulset.path}/web`, { ...sts, spec: { ...sts.spec, serviceName: "other" } })
    expect(r.status).toBe(422)
    expect(r.body.message).toContain("spec: Forbidden: updates to statefulset spec for fields other than")
  })

  it.each([
    ["/apis/batch/v1/namespaces/default/jobs/pi", objects.job, { active: 1, startTime: "2024-05-01T10:00:00Z", ready: 0 }],
    ["/apis/batch/v1/namespaces/default/cronjobs/nightly", objects.cronjob, { lastScheduleTime: "2024-05-01T03:00:00Z" }],
    ["/api/v1/namespaces/default/persistentvolumeclaims/data", objects.persistentvolumeclaim, { phase: "Bound", capacity: { storage: "5Gi" }, accessModes: ["ReadWriteOnce"] }],
    ["/api/v1/persistentvolumes/pv-1", objects.persistentvolume, { phase: "Available" }],
    ["/apis/policy/v1/namespaces/default/poddisruptionbudgets/web", objects.poddisruptionbudget, { disruptionsAllowed: 1, currentHealthy: 2, desiredHealthy: 1, expectedPods: 2 }],
    ["/apis/apps/v1/namespaces/default/daemonsets/agent", objects.daemonset, { currentNumberScheduled: 1, numberMisscheduled: 0, desiredNumberScheduled: 1, numberReady: 1 }]
  ])("serves %s/status", async (path, { path: collection, body }, status) => {
    const { call } = await start()
    const created = (await call("POST", collection, body)).body
    const r = await call("PATCH", `${path}/status`, { status }, { "content-type": "application/merge-patch+json" })
    expect(r.status, JSON.stringify(r.body)).toBe(200)
    expect(r.body.status).toMatchObject(status)
    expect(r.body.spec).toEqual(created.spec)
  })
})

describe("discovery", () => {
  it("lists the new groups and resources with their subresources, short names and categories", async () => {
    const { call } = await start()
    const groups = (await call("GET", "/apis")).body.groups.map((g: any) => g.name)
    expect(groups).toEqual(expect.arrayContaining(["apps", "batch", "policy", "discovery.k8s.io", "networking.k8s.io"]))
    const resources = async (gv: string) => {
      const list = (await call("GET", gv === "v1" ? "/api/v1" : `/apis/${gv}`)).body
      return new Map<string, any>(list.resources.map((r: any) => [r.name, r]))
    }
    const apps = await resources("apps/v1")
    expect(apps.get("statefulsets")).toMatchObject({ kind: "StatefulSet", namespaced: true, shortNames: ["sts"], categories: ["all"] })
    expect(apps.get("statefulsets/status")).toMatchObject({ kind: "StatefulSet", verbs: ["get", "patch", "update"] })
    expect(apps.get("statefulsets/scale")).toMatchObject({ group: "autoscaling", kind: "Scale" })
    expect(apps.get("daemonsets")).toMatchObject({ shortNames: ["ds"], categories: ["all"] })
    expect(apps.has("daemonsets/status")).toBe(true)
    expect(apps.has("daemonsets/scale")).toBe(false)
    expect(apps.get("controllerrevisions")).toMatchObject({ kind: "ControllerRevision" })
    expect(apps.get("controllerrevisions")).not.toHaveProperty("shortNames")
    const batch = await resources("batch/v1")
    expect(batch.get("jobs")).toMatchObject({ kind: "Job", categories: ["all"] })
    expect(batch.get("jobs")).not.toHaveProperty("shortNames")
    expect(batch.get("cronjobs")).toMatchObject({ shortNames: ["cj"], categories: ["all"] })
    expect(batch.has("jobs/status") && batch.has("cronjobs/status")).toBe(true)
    const core = await resources("v1")
    expect(core.get("persistentvolumeclaims")).toMatchObject({ namespaced: true, shortNames: ["pvc"] })
    expect(core.get("persistentvolumes")).toMatchObject({ namespaced: false, shortNames: ["pv"] })
    expect(core.has("persistentvolumeclaims/status") && core.has("persistentvolumes/status")).toBe(true)
    expect((await resources("discovery.k8s.io/v1")).get("endpointslices")).toMatchObject({ kind: "EndpointSlice", namespaced: true })
    const policy = await resources("policy/v1")
    expect(policy.get("poddisruptionbudgets")).toMatchObject({ shortNames: ["pdb"] })
    expect(policy.has("poddisruptionbudgets/status")).toBe(true)
    expect(policy.has("evictions")).toBe(false)
    expect((await resources("networking.k8s.io/v1")).get("ipaddresses")).toMatchObject({ namespaced: false })
  })
})

describe("tables", () => {
  const table = async (call: Awaited<ReturnType<typeof start>>["call"], path: string, n = 99) => {
    const t = (await call("GET", path, undefined, { accept: "application/json;as=Table;v=v1;g=meta.k8s.io" })).body
    return { columns: t.columnDefinitions.map((c: any) => c.name), cells: t.rows[0].cells.slice(0, n) }
  }

  it("print like kubectl get", async () => {
    const { call } = await start()
    for (const { path, body } of Object.values(objects)) await call("POST", path, body)
    expect(await table(call, objects.statefulset.path, 2)).toMatchObject({ columns: ["Name", "Ready", "Age", "Containers", "Images"], cells: ["web", "0/2"] })
    expect(await table(call, objects.job.path, 4)).toMatchObject({
      columns: ["Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"],
      cells: ["pi", "Running", "0/1", ""]
    })
    expect(await table(call, objects.cronjob.path, 6)).toMatchObject({
      columns: ["Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images", "Selector"],
      cells: ["nightly", "0 3 * * *", "Europe/Paris", "False", 0, "<none>"]
    })
    expect(await table(call, objects.poddisruptionbudget.path, 4)).toMatchObject({
      columns: ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"],
      cells: ["web", "1", "N/A", 0]
    })
    expect(await table(call, objects.persistentvolumeclaim.path, 7)).toMatchObject({
      columns: ["Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age", "VolumeMode"],
      cells: ["data", "Pending", "", "", "", "", "<unset>"]
    })
    expect(await table(call, objects.persistentvolume.path, 6)).toMatchObject({ cells: ["pv-1", "10Gi", "RWO", "Retain", "Pending", ""] })
    expect(await table(call, objects.daemonset.path, 7)).toMatchObject({
      columns: ["Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers", "Images", "Selector"],
      cells: ["agent", 0, 0, 0, 0, 0, "<none>"]
    })
    expect(await table(call, objects.endpointslice.path, 4)).toMatchObject({ columns: ["Name", "AddressType", "Ports", "Endpoints", "Age"], cells: ["web-x1", "IPv4", "80", "10.244.0.5"] })
    expect(await table(call, objects.ipaddress.path, 2)).toMatchObject({ columns: ["Name", "ParentRef", "Age"], cells: ["10.96.0.10", "services/default/web"] })
    expect(await table(call, objects.controllerrevision.path, 3)).toMatchObject({ columns: ["Name", "Controller", "Revision", "Age"], cells: ["web-7c9f", "<none>", 1] })
  })

  it("shows a finished Job's status and duration", async () => {
    const { call } = await start()
    await call("POST", objects.job.path, objects.job.body)
    const status = {
      startTime: "2024-05-01T10:00:00Z",
      completionTime: "2024-05-01T10:03:25Z",
      succeeded: 1,
      conditions: [{ type: "Complete", status: "True" }]
    }
    await call("PATCH", `${objects.job.path}/pi/status`, { status }, { "content-type": "application/merge-patch+json" })
    expect((await table(call, objects.job.path)).cells.slice(0, 4)).toEqual(["pi", "Complete", "1/1", "3m25s"])
  })
})
