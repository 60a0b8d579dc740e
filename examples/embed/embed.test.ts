/**
 * The embedding example run as what it is: a separate program (a child process) serving Fleet's
 * API over real HTTP from its own SQLite file, with its own CRD and reconciler. The test talks to
 * it as any client would, then restarts it and finds its state.
 */
import { describe, expect, it } from "@effect/vitest"
import { Client } from "@koder/fleet-core"
import { TestCluster } from "@koder/fleet-core/testing"
import { Effect, Stream } from "effect"
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Website from "./Website.js"

const main = fileURLToPath(new URL("./main.ts", import.meta.url))
const adminToken = "admin-token-for-the-test"
const viewerToken = "viewer-token-for-the-test"
const ConfigMapRef = { apiVersion: "v1", kind: "ConfigMap" } as const

// Every child started, killed at the end even when an assertion fails midway.
const children: Array<ChildProcess> = []

/** Start the program; resolves with its URL once it prints its listening line. */
const start = (data: string): Promise<{ readonly child: ChildProcess; readonly url: string; readonly output: () => string }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--conditions=@koder/source", "--import", "tsx", main, "--data", data], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, EMBED_ADMIN_TOKEN: adminToken, EMBED_VIEWER_TOKEN: viewerToken }
    })
    children.push(child)
    let output = ""
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      const m = /embed: listening on (http:\/\/\S+)/.exec(output)
      if (m) resolve({ child, url: m[1]!, output: () => output })
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.once("exit", (code) => reject(new Error(`embed exited with ${code} before listening:\n${output}`)))
  })

/** SIGTERM, and the exit code. */
const stop = (child: ChildProcess): Promise<number | null> =>
  new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode)
    child.once("exit", (code) => resolve(code))
    child.kill("SIGTERM")
  })

const website = (name: string, title: string, body: string) => ({ apiVersion: "sites.example.com/v1", kind: "Website", metadata: { name, namespace: "default" }, spec: { title, body } })
const meta = (o: Client.JsonObject) => o["metadata"] as { readonly name: string }

describe("examples/embed: Fleet embedded in a separate program", () => {
  it.live(
    "serves its own CRD over HTTP, reconciles it, enforces RBAC, and keeps its state across a restart",
    () =>
      Effect.gen(function* () {
        const dir = mkdtempSync(join(tmpdir(), "fleet-embed-"))
        const data = join(dir, "sites.db")
        try {
          const first = yield* Effect.promise(() => start(data))
          const admin = Client.make({ server: first.url, token: adminToken })
          const viewer = Client.make({ server: first.url, token: viewerToken })

          // Discovery serves the program's own resource next to the built-in ones.
          const discovery = (yield* Effect.promise(() => fetch(`${first.url}/apis/sites.example.com/v1`, { headers: { authorization: `Bearer ${adminToken}` } }).then((r) => r.json()))) as {
            readonly resources: ReadonlyArray<{ readonly name: string }>
          }
          expect(discovery.resources.map((r) => r.name)).toContain("websites")

          // A watch over the real HTTP port sees the Website arrive.
          const watched = yield* Effect.fork(Stream.runHead(Stream.filter(admin.watch(Website.WebsiteRef, { namespace: "default" }), (e) => meta(e.object).name === "hello")))
          yield* admin.create(website("hello", "Hello <embedders>", "Fleet runs inside this process."))
          const page = yield* TestCluster.eventually(
            Effect.map(admin.get(ConfigMapRef, "default", "hello-site"), (cm) => (cm["data"] as Record<string, string>)["index.html"]!)
          )
          expect(page).toContain("<h1>Hello &#60;embedders&#62;</h1>")
          const published = yield* TestCluster.eventually(
            Effect.flatMap(admin.get(Website.WebsiteRef, "default", "hello"), (w) => ((w["status"] as { phase?: string } | undefined)?.phase === "Published" ? Effect.succeed(w) : Effect.fail(new Error("not published"))))
          )
          expect(published["status"]).toMatchObject({ configMap: "hello-site", observedGeneration: 1 })
          const seen = yield* Effect.fromFiber(watched)
          expect(seen._tag).toBe("Some")

          // The CRD's schema is enforced by the API pipeline: a Website needs a title.
          const invalid = yield* Effect.flip(admin.create({ ...website("bad", "", "x"), spec: { body: "no title" } }))
          expect(invalid.status.code).toBe(422)
          // RBAC: the viewer (bound to the built-in `view` role) reads but does not write.
          expect(meta(yield* viewer.get(ConfigMapRef, "default", "hello-site")).name).toBe("hello-site")
          const denied = yield* Effect.flip(viewer.create(website("mine", "Mine", "")))
          expect(denied.status.code).toBe(403)

          expect(yield* Effect.promise(() => stop(first.child))).toBe(0)

          // Same SQLite file, new process: the state is there and the controllers carry on.
          const second = yield* Effect.promise(() => start(data))
          const again = Client.make({ server: second.url, token: adminToken })
          expect(meta(yield* again.get(Website.WebsiteRef, "default", "hello")).name).toBe("hello")
          yield* again.patch(Website.WebsiteRef, "default", "hello", "merge", { spec: { body: "Edited after a restart." } })
          yield* TestCluster.eventually(
            Effect.flatMap(again.get(ConfigMapRef, "default", "hello-site"), (cm) =>
              (cm["data"] as Record<string, string>)["index.html"]!.includes("Edited after a restart.") ? Effect.void : Effect.fail(new Error("not republished"))
            )
          )
          // Deleting the Website deletes its ConfigMap (the built-in garbage collector follows the ownerReference).
          yield* again.delete(Website.WebsiteRef, "default", "hello")
          yield* TestCluster.eventually(Effect.flip(again.get(ConfigMapRef, "default", "hello-site")))
          expect(yield* Effect.promise(() => stop(second.child))).toBe(0)
        } finally {
          for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
          rmSync(dir, { recursive: true, force: true })
        }
      }),
    120_000
  )
})
