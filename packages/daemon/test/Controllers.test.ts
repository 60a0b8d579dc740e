// The controllers and the scheduler running inside a real `koder-fleet server` (SQLite store),
// driven over HTTPS with the typed client: a Deployment becomes a ReplicaSet and pods, the
// scheduler reports why they cannot be placed (no nodes have joined), and deleting a namespace
// deletes its contents and then the namespace itself.
import { Client, Pods } from "@koder/fleet-core"
import { Effect, Either } from "effect"
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
  dir = mkdtempSync(join(tmpdir(), "fleet-controllers-"))
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
const items = (list: Record<string, unknown>) => (list["items"] as Array<Client.JsonObject>) ?? []

describe("controllers in koder-fleet server", () => {
  it("turns a Deployment into a ReplicaSet and pods, and says why they are unschedulable", async () => {
    await run(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "shop" } }))
    await run(
      client.create({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "web", namespace: "shop" },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: "web" } },
          template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "web", image: "nginx:1.27" }] } }
        }
      })
    )
    const rs = await Fleet.eventually(async () => {
      const list = items(await run(client.list({ apiVersion: "apps/v1", kind: "ReplicaSet" }, { namespace: "shop" })))
      return list.length === 1 ? list[0] : undefined
    }, 30_000, "a ReplicaSet")
    expect((rs["metadata"] as Record<string, any>)["labels"]["pod-template-hash"]).toMatch(/^[a-z0-9]+$/)
    const pods = await Fleet.eventually(async () => {
      const list = items(await run(client.list({ apiVersion: "v1", kind: "Pod" }, { namespace: "shop" })))
      return list.length === 2 && list.every((p) => Pods.condition(p, "PodScheduled")?.["reason"] === "Unschedulable") ? list : undefined
    }, 30_000, "two unschedulable pods")
    expect(Pods.condition(pods[0]!, "PodScheduled")?.["message"]).toBe("no nodes available to schedule pods")
    const deployment = await Fleet.eventually(async () => {
      const d = await run(client.get({ apiVersion: "apps/v1", kind: "Deployment" }, "shop", "web"))
      const status = (d["status"] ?? {}) as Record<string, unknown>
      return status["replicas"] === 2 ? d : undefined
    }, 30_000, "deployment status")
    expect(((deployment["status"] as Record<string, unknown>)["conditions"] as Array<Record<string, unknown>>).find((c) => c["type"] === "Available")?.["status"]).toBe("False")
  })

  it("deletes a namespace's contents, then the namespace", async () => {
    await run(client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "scratch" } }))
    await run(client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", namespace: "scratch" }, data: { k: "v" } }))
    await run(client.delete({ apiVersion: "v1", kind: "Namespace" }, undefined, "scratch"))
    await Fleet.eventually(async () => {
      const got = await run(Effect.either(client.get({ apiVersion: "v1", kind: "Namespace" }, undefined, "scratch")))
      return Either.isLeft(got) && got.left.status.code === 404 ? true : undefined
    }, 30_000, "the namespace to go")
  })
})
