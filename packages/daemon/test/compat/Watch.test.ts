/**
 * `@kubernetes/client-node` 1.4 watches against a real `koder-fleet server`: the `Watch` class
 * sees ADDED / MODIFIED / DELETED (with selectors), and `makeInformer` stays in sync across
 * 1,000 changes. The informer's recovery from a 410 is in `InformerRelist.test.ts`.
 */
import { ADD, DELETE, ERROR, makeInformer, PatchStrategy, UPDATE, Watch, type V1ConfigMap } from "@kubernetes/client-node"
import { isDeepStrictEqual } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually } from "../fixtures/FleetProcess.js"
import { patchAs, startCluster, type Cluster } from "./Cluster.js"

const configMap = (name: string, data: Record<string, string> = {}, labels: Record<string, string> = {}): V1ConfigMap => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, labels },
  data
})

/** Run `tasks` with at most `width` in flight. */
const pool = async (width: number, tasks: ReadonlyArray<() => Promise<unknown>>) => {
  let next = 0
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < tasks.length) await tasks[next++]!()
    })
  )
}

describe("client-node Watch and informer", () => {
  let c: Cluster

  beforeAll(async () => {
    c = await startCluster()
    for (const name of ["compat-watch", "compat-informer"]) {
      await c.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name } } })
    }
  })

  afterAll(async () => {
    await c?.stop()
  })

  it("Watch sees ADDED, MODIFIED and DELETED for a configmap", async () => {
    const ns = "compat-watch"
    await c.core.createNamespacedConfigMap({ namespace: ns, body: configMap("before") })
    const list = await c.core.listNamespacedConfigMap({ namespace: ns })
    const events: Array<{ type: string; name: string; rv: string; data: unknown }> = []
    let done: unknown = "open"
    const controller = await new Watch(c.kubeconfig).watch(
      `/api/v1/namespaces/${ns}/configmaps`,
      { resourceVersion: list.metadata!.resourceVersion! },
      (type, object: V1ConfigMap) => events.push({ type, name: object.metadata!.name!, rv: object.metadata!.resourceVersion!, data: object.data }),
      (err) => (done = err)
    )
    const created = await c.core.createNamespacedConfigMap({ namespace: ns, body: configMap("w", { v: "1" }) })
    const patched = await c.core.patchNamespacedConfigMap({ namespace: ns, name: "w", body: { data: { v: "2" } } }, patchAs(PatchStrategy.MergePatch))
    await c.core.deleteNamespacedConfigMap({ namespace: ns, name: "w" })
    await eventually(() => events.some((e) => e.type === "DELETED") || undefined, 5_000, "the DELETED event")
    expect(events.map((e) => [e.type, e.name])).toEqual([
      ["ADDED", "w"],
      ["MODIFIED", "w"],
      ["DELETED", "w"]
    ])
    expect(events[0]).toMatchObject({ rv: created.metadata?.resourceVersion, data: { v: "1" } })
    expect(events[1]).toMatchObject({ rv: patched.metadata?.resourceVersion, data: { v: "2" } })
    expect(Number(events[2]!.rv)).toBeGreaterThan(Number(patched.metadata?.resourceVersion))
    expect(events[2]!.data).toEqual({ v: "2" })
    expect(done).toBe("open")
    controller.abort()
  })

  it("Watch without a resourceVersion starts with the current objects, filtered by selectors", async () => {
    const ns = "compat-watch"
    await c.core.createNamespacedConfigMap({ namespace: ns, body: configMap("sel-a", {}, { pick: "yes" }) })
    await c.core.createNamespacedConfigMap({ namespace: ns, body: configMap("sel-b", {}, { pick: "no" }) })
    const events: Array<[string, string]> = []
    const controller = await new Watch(c.kubeconfig).watch(
      `/api/v1/namespaces/${ns}/configmaps`,
      { labelSelector: "pick=yes" },
      (type, object: V1ConfigMap) => events.push([type, object.metadata!.name!]),
      () => {}
    )
    await eventually(() => events.length > 0 || undefined, 5_000, "the initial ADDED")
    // Relabelling moves an object into or out of the selection: ADDED / DELETED for this watcher.
    await c.core.patchNamespacedConfigMap({ namespace: ns, name: "sel-b", body: { metadata: { labels: { pick: "yes" } } } }, patchAs(PatchStrategy.MergePatch))
    await c.core.patchNamespacedConfigMap({ namespace: ns, name: "sel-a", body: { metadata: { labels: { pick: "no" } } } }, patchAs(PatchStrategy.MergePatch))
    await eventually(() => events.length >= 3 || undefined, 5_000, "the selector transitions")
    expect(events).toEqual([
      ["ADDED", "sel-a"],
      ["ADDED", "sel-b"],
      ["DELETED", "sel-a"]
    ])
    controller.abort()
  })

  it("makeInformer stays in sync across 1,000 creates, updates and deletes", async () => {
    const ns = "compat-informer"
    await Promise.all(Array.from({ length: 20 }, (_, i) => c.core.createNamespacedConfigMap({ namespace: ns, body: configMap(`pre-${i}`, { i: String(i) }) })))
    const informer = makeInformer(c.kubeconfig, `/api/v1/namespaces/${ns}/configmaps`, () => c.core.listNamespacedConfigMap({ namespace: ns }))
    const counts = { add: 0, update: 0, delete: 0 }
    const errors: Array<unknown> = []
    informer.on(ADD, () => counts.add++)
    informer.on(UPDATE, () => counts.update++)
    informer.on(DELETE, () => counts.delete++)
    informer.on(ERROR, (err) => errors.push(err))
    await informer.start()
    try {
      expect(informer.list(ns)).toHaveLength(20)

      // 400 chains, 25 at a time: create, update, and delete every other one (400 + 400 + 200).
      // The writes go over one keep-alive connection (client-node makes a TLS handshake per call).
      let changes = 0
      const write = async (method: string, path: string, body: unknown, status: number, contentType?: string) => {
        const r = await c.send(method, `/api/v1/namespaces/${ns}/configmaps${path}`, body, contentType)
        expect(r.status, r.text).toBe(status)
        changes++
      }
      await pool(
        25,
        Array.from({ length: 400 }, (_, i) => async () => {
          const name = `cm-${i}`
          await write("POST", "", configMap(name, { v: "0" }), 201)
          await write("PATCH", `/${name}`, { data: { v: "1" } }, 200, PatchStrategy.MergePatch)
          if (i % 2 === 0) await write("DELETE", `/${name}`, undefined, 200)
        })
      )
      expect(changes).toBe(1_000)

      const server = await c.core.listNamespacedConfigMap({ namespace: ns })
      const state = (items: ReadonlyArray<V1ConfigMap>) =>
        Object.fromEntries(items.map((o) => [o.metadata!.name!, `${o.metadata!.resourceVersion}:${JSON.stringify(o.data)}`]))
      expect(server.items).toHaveLength(220)
      await eventually(() => isDeepStrictEqual(state(informer.list(ns)), state(server.items)) || undefined, 10_000, "the informer to catch up")
      expect(state(informer.list(ns))).toEqual(state(server.items))
      // Every change arrived exactly once, over one watch.
      expect(counts).toEqual({ add: 420, update: 400, delete: 200 })
      expect(errors).toEqual([])
    } finally {
      await informer.stop()
    }
  })
})
