/**
 * No request content takes the server down or poisons its store (issue 29), through a real
 * `koder-fleet server` over HTTPS with its SQLite store: the doubling JSON Patch is refused with
 * the process's memory barely moving, `/scale` refuses numbers wider than int32 and the object
 * stays usable, huge `limit`s are not 5xx, YAML bombs are 400 and oversized objects 422 / 413.
 */
import { readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { client, credentials, start, type FleetProcess } from "../fixtures/FleetProcess.js"

/** A /proc/<pid>/status field in MiB (VmRSS: resident now; VmHWM: the most it has ever been). */
const memoryMiB = (pid: number, field: "VmRSS" | "VmHWM"): number => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith(`${field}:`))
  return Number(/(\d+) kB/.exec(line ?? "")?.[1] ?? Number.NaN) / 1024
}

// How much the doubling patches may raise the server's peak resident memory. Unbounded, the
// first one takes it to V8's heap limit (issue 29: 327 MB to an abort); bounded, each costs at
// most the 3 MiB copy limit plus the response.
const memoryBoundMiB = 200

describe("request content bounds over HTTPS", () => {
  let dir: string
  let server: FleetProcess
  let token: string
  let http: ReturnType<typeof client>
  const ns = "bounds"

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-bounds-"))
    server = await start(["--data-dir", dir, "--listen", "127.0.0.1:0"])
    const creds = credentials(server.kubeconfig)
    token = creds.token
    http = client(server.port, creds.ca)
    // Privileged, so Pod Security admission (whatever the server's default) leaves these pods to the size checks.
    const labels = { "pod-security.kubernetes.io/enforce": "privileged" }
    const created = await send("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels } })
    expect(created.status).toBe(201)
  }, 120_000)

  afterAll(async () => {
    http?.close()
    if (server?.child.exitCode === null) {
      server.child.kill("SIGTERM")
      await server.exited
    }
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  const send = (method: string, path: string, body?: unknown, contentType = "application/json") =>
    http.send(method, path, {
      token,
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body), headers: { "content-type": contentType } })
    })

  /** The server still runs and answers an ordinary request. */
  const stillServing = async () => {
    expect(server.child.exitCode).toBeNull()
    expect((await send("GET", `/api/v1/namespaces/${ns}`)).status).toBe(200)
  }

  it("refuses the doubling JSON Patch with 422, its memory staying within a bound, and keeps serving", async () => {
    const pid = server.child.pid!
    const annotations = { a: "x".repeat(100) }
    expect((await send("POST", `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: "doubling", annotations } })).status).toBe(201)
    const before = memoryMiB(pid, "VmRSS")
    // 40 copies of the map into itself under new keys: 2^40 times its size, unbounded.
    const patch = Array.from({ length: 40 }, (_, i) => ({ op: "copy", from: "/metadata/annotations", path: `/metadata/annotations/k${i}` }))
    for (let i = 0; i < 5; i++) {
      const r = await send("PATCH", `/api/v1/namespaces/${ns}/configmaps/doubling`, patch, "application/json-patch+json")
      expect(r.status).toBe(422)
      expect(r.json()).toMatchObject({ kind: "Status", reason: "Invalid" })
      expect(r.text).toMatch(/the accumulated size increase of copy is \d+, exceeding the limit 3145728/)
    }
    const peak = memoryMiB(pid, "VmHWM")
    console.log(`doubling JSON Patch ×5: VmRSS before ${before.toFixed(0)} MiB, VmHWM after ${peak.toFixed(0)} MiB (bound: +${memoryBoundMiB} MiB)`)
    expect(peak).toBeLessThan(before + memoryBoundMiB)
    await stillServing()
    const got = await send("GET", `/api/v1/namespaces/${ns}/configmaps/doubling`)
    expect((got.json()["metadata"] as Record<string, unknown>)["annotations"]).toEqual(annotations)
  })

  it("refuses /scale replicas of 2147483648 and 1e300 with 422; the Deployment still decodes and updates", async () => {
    const deployment = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "scaled" },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "scaled" } },
        template: { metadata: { labels: { app: "scaled" } }, spec: { containers: [{ name: "c", image: "nginx:1.27" }] } }
      }
    }
    const path = `/apis/apps/v1/namespaces/${ns}/deployments/scaled`
    expect((await send("POST", `/apis/apps/v1/namespaces/${ns}/deployments`, deployment)).status).toBe(201)
    for (const replicas of ["2147483648", "1e300"]) {
      const put = await send("PUT", `${path}/scale`, `{"spec":{"replicas":${replicas}}}`)
      expect(put.status, `PUT ${replicas}`).toBe(422)
      expect(put.json()["message"]).toMatch(/^Scale\.autoscaling "scaled" is invalid: spec\.replicas: Invalid value: .*: must be between -2147483648 and 2147483647, inclusive$/)
      const patched = await send("PATCH", `${path}/scale`, `{"spec":{"replicas":${replicas}}}`, "application/merge-patch+json")
      expect(patched.status, `PATCH ${replicas}`).toBe(422)
    }
    const got = await send("GET", path)
    const replicas = (got.json()["spec"] as Record<string, unknown>)["replicas"]
    expect(replicas).toBe(1)
    // Other updates still work: the stored object is one the API accepts back.
    // The deployment controller may write the status between the GET and the PUT (409, as for any
    // stale resourceVersion): read again and retry, as a client's RetryOnConflict does.
    let put = await send("PUT", path, got.json())
    for (let i = 0; put.status === 409 && i < 5; i++) put = await send("PUT", path, (await send("GET", path)).json())
    expect(put.status).toBe(200)
    const merged = await send("PATCH", path, { spec: { replicas: 3 } }, "application/merge-patch+json")
    expect(merged.status).toBe(200)
    expect((merged.json()["spec"] as Record<string, unknown>)["replicas"]).toBe(3)
  })

  it.each<[string, number]>([
    ["limit=99999999999999999999", 200],
    ["limit=9223372036854775808", 200],
    ["limit=9223372036854775807&resourceVersion=1&resourceVersionMatch=Exact", 200],
    ["resourceVersion=99999999999999999999", 400],
    ["limit=-5", 400]
  ])("answers a list with ?%s with %i, never a 5xx, from the SQLite store", async (query, code) => {
    const r = await send("GET", `/api/v1/namespaces/${ns}/configmaps?${query}`)
    expect(r.status).toBe(code)
    expect(r.json()["kind"]).toBe(code === 200 ? "ConfigMapList" : "Status")
  })

  it("answers a YAML alias bomb with 400", async () => {
    const bomb = [
      'a: &a ["x","x","x","x","x","x","x","x","x"]',
      ...["b", "c", "d", "e", "f", "g", "h"].map((name, i) => `${name}: &${name} [${Array(9).fill(`*${"abcdefg"[i]}`).join(",")}]`),
      "metadata: {name: bomb}"
    ].join("\n")
    const r = await send("POST", `/api/v1/namespaces/${ns}/configmaps`, bomb, "application/yaml")
    expect(r.status).toBe(400)
    expect(r.json()).toMatchObject({ kind: "Status", reason: "BadRequest" })
    expect(r.json()["message"]).toMatch(/^error converting YAML to JSON: Excessive alias count/)
    await stillServing()
  })

  it("answers a 2.9 MiB YAML body of 1.5 million tiny nodes with 400, its memory staying within a bound", async () => {
    // Parsed, this took the yaml library 1.3 GB and tens of seconds; refused after a lexer pass.
    const pid = server.child.pid!
    const before = memoryMiB(pid, "VmRSS")
    const body = `metadata: {name: nodes}\ndata: [${"1,".repeat(1_500_000)}]`
    const r = await send("POST", `/api/v1/namespaces/${ns}/configmaps`, body, "application/yaml")
    expect(r.status).toBe(400)
    expect(r.json()["message"]).toBe("the YAML body has more than 100000 tokens")
    const peak = memoryMiB(pid, "VmHWM")
    console.log(`YAML of 1.5 million nodes: VmRSS before ${before.toFixed(0)} MiB, VmHWM after ${peak.toFixed(0)} MiB (bound: +${memoryBoundMiB} MiB)`)
    expect(peak).toBeLessThan(before + memoryBoundMiB)
    await stillServing()
  })

  it("answers a body nested 100,000 levels deep with 400", async () => {
    const r = await send("POST", `/api/v1/namespaces/${ns}/configmaps`, `${"[".repeat(100_000)}${"]".repeat(100_000)}`)
    expect(r.status).toBe(400)
    expect(r.json()["message"]).toBe("the request body nests deeper than 500 levels")
  })

  it("refuses a ConfigMap with 1.1 MiB of data with 422", async () => {
    const r = await send("POST", `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: "big" }, data: { k: "x".repeat(1.1 * 1024 * 1024) } })
    expect(r.status).toBe(422)
    expect(r.json()["message"]).toBe('ConfigMap "big" is invalid: data: Too long: must have at most 1048576 bytes')
    expect((await send("GET", `/api/v1/namespaces/${ns}/configmaps/big`)).status).toBe(404)
  })

  it("refuses a 2 MiB object with 413, and a patch growing one past the limit too", async () => {
    const pod = { metadata: { name: "huge" }, spec: { containers: [{ name: "c", image: "nginx:1.27", args: ["x".repeat(2 * 1024 * 1024)] }] } }
    const created = await send("POST", `/api/v1/namespaces/${ns}/pods`, pod)
    expect(created.status, created.text.slice(0, 300)).toBe(413)
    expect(created.json()).toMatchObject({ kind: "Status", reason: "RequestEntityTooLarge", code: 413 })
    const small = { metadata: { name: "grown" }, spec: { containers: [{ name: "c", image: "nginx:1.27", args: ["x".repeat(1.2 * 1024 * 1024)] }] } }
    expect((await send("POST", `/api/v1/namespaces/${ns}/pods`, small)).status).toBe(201)
    const grown = await send("PATCH", `/api/v1/namespaces/${ns}/pods/grown`, { metadata: { annotations: { a: "y".repeat(200 * 1024), b: "z".repeat(200 * 1024) } } }, "application/merge-patch+json")
    expect(grown.status, grown.text.slice(0, 300)).toBe(413)
    expect(grown.json()["message"]).toMatch(/^Request entity too large: the patched object is larger than the limit of 1572864 bytes$/)
    await stillServing()
  })
})
