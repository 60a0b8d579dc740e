/**
 * Limits are enforced or refused, never ignored without a word (issue 29): `koder-fleet dev` whose
 * box has no cgroup controllers (`--cgroups none`: what an unprivileged box has, the same path)
 * fails a pod with a memory limit (`UnenforceableLimits`, a Warning Event, no process started) and
 * its Node says `LimitsEnforced=False`; with `--allow-unenforced-limits` the pod runs, with a
 * Warning Event saying its limits are not enforced.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

type Json = Record<string, any>

const flags = ["--listen", "127.0.0.1:0", "--ingress-listen", "off", "--ingress-tls-listen", "off", "--metrics-listen", "off", "--dns-listen", "off", "--nodeport-address", "off", "--node-name", "limitsnode", "--cgroups", "none"]

const hog = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "hog" },
  spec: {
    terminationGracePeriodSeconds: 1,
    containers: [{ name: "app", image: "busybox", command: ["sh", "-c", "while :; do sleep 1; done"], resources: { limits: { memory: "64Mi" } } }]
  }
}

describe("limits a node cannot enforce", () => {
  let dir: string | undefined
  let dev: FleetProcess | undefined
  let http: ReturnType<typeof client> | undefined

  const run = async (extra: ReadonlyArray<string>) => {
    dir = await mkdtemp(join(tmpdir(), "fleet-limits-"))
    dev = await start([...flags, ...extra], "dev", { FLEET_DATA_DIR: dir })
    const creds = credentials(dev.kubeconfig)
    const h = client(dev.port, creds.ca)
    http = h
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await h.send(method, path, { token: creds.token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
      return { status: r.status, json: () => r.json() as Json, text: r.text }
    }
    const event = (reason: string) =>
      eventually(
        async () => ((await api("GET", "/api/v1/namespaces/default/events")).json()["items"] as Array<Json>).find((e) => e["involvedObject"]["name"] === "hog" && e["reason"] === reason),
        60_000,
        `a ${reason} event`
      )
    const condition = () =>
      eventually(
        async () => ((await api("GET", "/api/v1/nodes/limitsnode")).json()["status"]?.["conditions"] as Array<Json> | undefined)?.find((c) => c["type"] === "LimitsEnforced"),
        60_000,
        "the LimitsEnforced condition"
      )
    return { api, event, condition, stdout: () => dev!.stdout() }
  }

  afterEach(async () => {
    http?.close()
    if (dev !== undefined && dev.child.exitCode === null) {
      dev.child.kill("SIGINT")
      await Promise.race([dev.exited, new Promise((r) => setTimeout(r, 60_000))])
      if (dev.child.exitCode === null) dev.child.kill("SIGKILL")
    }
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
    dev = undefined
    dir = undefined
  }, 90_000)

  it("fails a pod with a memory limit: UnenforceableLimits, a Warning Event, LimitsEnforced=False", async () => {
    const { api, event, condition, stdout } = await run([])
    // dev says so when it starts.
    expect(stdout()).toContain("the box cannot enforce cpu and memory limits (no cgroups: not root, or --cgroups none); pods with limits are refused")
    const created = await api("POST", "/api/v1/namespaces/default/pods", hog)
    expect(created.status, created.text).toBe(201)
    const failed = await eventually(
      async () => {
        const p = (await api("GET", "/api/v1/namespaces/default/pods/hog")).json()
        return p["status"]?.["phase"] === "Failed" ? p : undefined
      },
      90_000,
      "the pod to fail"
    )
    expect(failed["status"]["reason"]).toBe("UnenforceableLimits")
    expect(failed["status"]["message"]).toContain("cannot enforce the pod's memory limits")
    expect(failed["status"]["containerStatuses"]?.some((c: Json) => c["state"]?.["running"] !== undefined) ?? false).toBe(false)
    expect((await event("UnenforceableLimits"))["type"]).toBe("Warning")
    expect(await condition()).toMatchObject({ status: "False", reason: "UnenforceableLimits" })
  }, 180_000)

  it("runs it with --allow-unenforced-limits, saying so in a Warning Event and on the Node", async () => {
    const { api, event, condition, stdout } = await run(["--allow-unenforced-limits"])
    expect(stdout()).toContain("pods with limits run unenforced, each with a Warning Event")
    expect((await api("POST", "/api/v1/namespaces/default/pods", hog)).status).toBe(201)
    await eventually(async () => (await api("GET", "/api/v1/namespaces/default/pods/hog")).json()["status"]?.["phase"] === "Running" || undefined, 90_000, "the pod to run")
    const e = await event("LimitsNotEnforced")
    expect(e["type"]).toBe("Warning")
    expect(e["message"]).toContain("does not enforce this pod's memory limits")
    expect(await condition()).toMatchObject({ status: "False", reason: "LimitsNotEnforced" })
  }, 180_000)
})
