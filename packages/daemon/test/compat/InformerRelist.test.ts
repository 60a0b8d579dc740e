/**
 * A `makeInformer` recovers from a real 410 by re-listing. The 410 is forced the way it happens
 * to kube-apiserver clients: the server restarts (same data dir and port), its new watch cache
 * starts at the store's current revision, and the informer resumes its watch from the older
 * resourceVersion it last saw. The server must answer with one `ERROR` event carrying a 410
 * Status and end the stream; client-node's ListWatch then clears its resourceVersion, lists
 * again and is back in sync with the changes made while it was away.
 *
 * One server per file, restarted once in the middle of the test.
 */
import { ADD, CONNECT, DELETE, ERROR, makeInformer, UPDATE, type V1ConfigMap } from "@kubernetes/client-node"
import { isDeepStrictEqual } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually } from "../fixtures/FleetProcess.js"
import { startCluster, type Cluster } from "./Cluster.js"

const ns = "compat-relist"
const configMap = (name: string, v: string): V1ConfigMap => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: { v } })
const state = (items: ReadonlyArray<V1ConfigMap>) => Object.fromEntries(items.map((o) => [o.metadata!.name!, `${o.metadata!.resourceVersion}:${o.data?.["v"]}`]))

describe("client-node informer after a 410", () => {
  let c: Cluster

  beforeAll(async () => {
    c = await startCluster()
    await c.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } } })
  })

  afterAll(async () => {
    await c?.stop()
  })

  it("a watch from a resourceVersion older than the watch cache gets one 410 ERROR event, and the informer re-lists", async () => {
    for (let i = 0; i < 10; i++) await c.core.createNamespacedConfigMap({ namespace: ns, body: configMap(`cm-${i}`, "0") })

    let lists = 0
    const informer = makeInformer(c.kubeconfig, `/api/v1/namespaces/${ns}/configmaps`, () => {
      lists++
      return c.core.listNamespacedConfigMap({ namespace: ns })
    })
    const seen = { add: 0, update: 0, delete: [] as Array<string>, connect: 0 }
    const errors: Array<unknown> = []
    let stopped = false
    informer.on(ADD, () => seen.add++)
    informer.on(UPDATE, () => seen.update++)
    informer.on(DELETE, (o) => seen.delete.push(o.metadata!.name!))
    informer.on(CONNECT, () => seen.connect++)
    // client-node's documented pattern: an informer stops on an error; the application restarts it.
    informer.on(ERROR, (err) => {
      errors.push(err)
      setTimeout(() => {
        if (!stopped) void informer.start()
      }, 100)
    })
    await informer.start()
    try {
      // client-node's default patch type is a JSON patch.
      const patched = await c.core.patchNamespacedConfigMap({ namespace: ns, name: "cm-0", body: [{ op: "replace", path: "/data/v", value: "1" }] })
      await eventually(() => informer.get("cm-0", ns)?.data?.["v"] === "1" || undefined, 5_000, "the informer to see the update")
      // The informer resumes its watch from the last event it saw: this update.
      const before = patched.metadata!.resourceVersion!
      expect(lists).toBe(1)

      // A write elsewhere moves the store past the informer's resourceVersion; then the restart.
      await c.core.createNamespace({ body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "compat-relist-other" } } })
      await c.restart()

      // What the informer's resumed watch is answered, seen raw: one ERROR with a 410 Status, then the end.
      const raw = await c.rawWatch(`/api/v1/namespaces/${ns}/configmaps?watch=true&resourceVersion=${before}`)
      expect(raw.status).toBe(200)
      await eventually(() => raw.ended() || undefined, 5_000, "the server to end the too-old watch")
      expect(raw.events).toHaveLength(1)
      expect(raw.events[0]?.type).toBe("ERROR")
      expect(raw.events[0]?.object).toMatchObject({ kind: "Status", apiVersion: "v1", status: "Failure", reason: "Expired", code: 410 })
      expect(raw.events[0]?.object.message).toMatch(new RegExp(`^too old resource version: ${before} \\(\\d+\\)$`))

      // Changes while the informer is away (it retries every 100 ms until the server is back).
      await c.core.deleteNamespacedConfigMap({ namespace: ns, name: "cm-9" })
      await c.core.createNamespacedConfigMap({ namespace: ns, body: configMap("after-restart", "0") })
      // The informer re-lists (a second list) and ends in sync, with the deletion reported once.
      const server = await eventually(async () => {
        const list = await c.core.listNamespacedConfigMap({ namespace: ns })
        return lists >= 2 && isDeepStrictEqual(state(informer.list(ns)), state(list.items)) ? list : undefined
      }, 15_000, "the informer to re-list and catch up")
      expect(lists).toBe(2)
      expect(Object.keys(state(server.items)).sort()).toEqual([...Array.from({ length: 9 }, (_, i) => `cm-${i}`), "after-restart"].sort())
      expect(seen.delete).toEqual(["cm-9"])
      expect(informer.get("cm-9", ns)).toBeUndefined()
      expect(informer.get("after-restart", ns)?.data).toEqual({ v: "0" })
      // It keeps following the new server's watch after the re-list.
      await c.core.patchNamespacedConfigMap({ namespace: ns, name: "cm-1", body: [{ op: "replace", path: "/data/v", value: "2" }] })
      await eventually(() => informer.get("cm-1", ns)?.data?.["v"] === "2" || undefined, 5_000, "the informer to follow the new watch")
    } finally {
      stopped = true
      await informer.stop()
    }
  })
})
