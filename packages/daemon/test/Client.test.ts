// core's typed client against a real `koder-fleet server` over HTTPS (undici trusting the
// generated CA): CRUD, patches, paged lists, Status errors, and a watch that survives the server
// ending connections and a 410 without losing or repeating a state.
import { Client } from "@koder/fleet-core"
import { Chunk, Effect, Either, Fiber, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, fetch as undiciFetch } from "undici"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Fleet from "./fixtures/FleetProcess.js"

let server: Fleet.FleetProcess
let dir: string
let client: Client.Client

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "fleet-client-"))
  server = await Fleet.start(["--data-dir", dir, "--listen", "127.0.0.1:0"])
  const { server: url, ca, token } = Fleet.credentials(server.kubeconfig)
  const dispatcher = new Agent({ connect: { ca } })
  client = Client.make({ server: url, token, fetch: ((input: string, init?: RequestInit) => undiciFetch(input, { ...(init as object), dispatcher })) as unknown as typeof fetch })
})

afterAll(async () => {
  server?.child.kill("SIGTERM")
  await server?.exited
  rmSync(dir, { recursive: true, force: true })
})

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const cm = { apiVersion: "v1", kind: "ConfigMap" } as const
const configMap = (namespace: string, name: string, data: Record<string, string> = { k: "v" }) => ({ ...cm, metadata: { name, namespace }, data })
const names = (items: ReadonlyArray<Record<string, any>>) => items.map((o) => o.metadata.name)

describe("typed client against koder-fleet server", () => {
  it("creates, reads, updates, patches and deletes, and maps errors to Status", async () => {
    await run(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "crud" } }))
    const created = await run(client.create(configMap("crud", "c1")))
    expect(created["data"]).toEqual({ k: "v" })
    const got = await run(client.get(cm, "crud", "c1"))
    expect(got).toEqual(created)
    const updated = await run(client.update({ ...got, data: { k: "2" } }))
    expect(updated["data"]).toEqual({ k: "2" })
    const stale = await run(Effect.either(client.update({ ...got, data: { k: "3" } })))
    expect(Either.isLeft(stale) && stale.left.status).toMatchObject({ code: 409, reason: "Conflict" })
    const merged = await run(client.patch(cm, "crud", "c1", "merge", { data: { extra: "x" } }))
    expect(merged["data"]).toEqual({ k: "2", extra: "x" })
    const jsonPatched = await run(client.patch(cm, "crud", "c1", "json", [{ op: "remove", path: "/data/extra" }]))
    expect(jsonPatched["data"]).toEqual({ k: "2" })
    const deleted = await run(client.delete(cm, "crud", "c1"))
    expect(deleted).toMatchObject({ kind: "Status", status: "Success" })
    const missing = await run(Effect.either(client.get(cm, "crud", "c1")))
    expect(Either.isLeft(missing) && missing.left.status).toMatchObject({ code: 404, reason: "NotFound", message: 'configmaps "c1" not found' })
  })

  it("lists every page of a large collection", async () => {
    await run(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "paged" } }))
    await run(Effect.forEach(Array.from({ length: 25 }, (_, i) => `c${String(i).padStart(2, "0")}`), (n) => client.create(configMap("paged", n)), { concurrency: 8 }))
    const page = await run(client.list(cm, { namespace: "paged", limit: 10 }))
    expect((page["items"] as Array<unknown>).length).toBe(10)
    const all = await run(client.listAll(cm, { namespace: "paged", limit: 10 }))
    // Every namespace also holds the cluster CA's kube-root-ca.crt, as in Kubernetes.
    expect(names(all.items).filter((n) => n !== "kube-root-ca.crt")).toEqual(Array.from({ length: 25 }, (_, i) => `c${String(i).padStart(2, "0")}`))
  })

  it("keeps a watch going across server-ended connections without losing or repeating a change", async () => {
    await run(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "watched" } }))
    const watch = Effect.runFork(Stream.runCollect(Stream.take(Stream.filter(client.watch(cm, { namespace: "watched", timeoutSeconds: 1 }), (e) => (e.object["metadata"] as { name?: string } | undefined)?.name !== "kube-root-ca.crt"), 12)))
    for (let i = 0; i < 6; i++) {
      await run(client.create(configMap("watched", `w${i}`)))
      await run(client.patch(cm, "watched", `w${i}`, "merge", { data: { k: `${i}` } }))
      // Spread the writes over several server-side connection lifetimes.
      await new Promise((r) => setTimeout(r, 350))
    }
    const events = Chunk.toReadonlyArray(await run(Fiber.join(watch)))
    expect(events.map((e) => `${e.type} ${e.object["metadata"] && (e.object["metadata"] as { name: string }).name}`).filter((e) => !e.endsWith(" kube-root-ca.crt"))).toEqual(
      Array.from({ length: 6 }, (_, i) => [`ADDED w${i}`, `MODIFIED w${i}`]).flat()
    )
  })

  it("re-lists after a 410 and emits what it missed", async () => {
    // Secrets have no watch cache yet, so its window starts after these writes: revision 1 is gone.
    await run(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "gone" } }))
    const secret = { apiVersion: "v1", kind: "Secret" } as const
    for (const n of ["s1", "s2"]) await run(client.create({ ...secret, metadata: { name: n, namespace: "gone" }, stringData: { a: "b" } }))
    const raw = await run(Effect.either(Stream.runCollect(Stream.take(client.watchOnce(secret, { namespace: "gone", resourceVersion: "1" }), 1))))
    expect(Either.isLeft(raw) && raw.left.status.code).toBe(410)
    const watch = Effect.runFork(Stream.runCollect(Stream.take(client.watch(secret, { namespace: "gone", resourceVersion: "1" }), 3)))
    await run(client.create({ ...secret, metadata: { name: "s3", namespace: "gone" }, stringData: { a: "b" } }))
    const events = Chunk.toReadonlyArray(await run(Fiber.join(watch)))
    expect(events.map((e) => `${e.type} ${(e.object["metadata"] as { name: string }).name}`)).toEqual(["ADDED s1", "ADDED s2", "ADDED s3"])
  })
})
