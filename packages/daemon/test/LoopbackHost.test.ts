/**
 * The README's walk on a host whose only interface is loopback (a sandbox, an offline laptop, a
 * CI container): `koder-fleet dev` with its default flags in a network namespace of its own that
 * has nothing but `lo`, then `kfleet apply -f examples/hello`, `rollout status` and `curl
 * http://hello.localhost:8080/`, each run inside that namespace. Pods' addresses are 127.0.0.1
 * there: the EndpointSlices must carry them, as the Endpoints do, or the ingress has no backend.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually } from "./fixtures/FleetProcess.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const main = join(root, "packages/daemon/src/main.ts")
const kfleet = join(root, "packages/cli/bin/kfleet.mjs")

let dir: string
let dev: ChildProcess
let out = ""

/** Run a command inside dev's network namespace; its exit code and output. */
const inside = (argv: ReadonlyArray<string>, ms = 60_000) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn("nsenter", ["-t", String(dev.pid), "-n", "--", ...argv], { env: { ...process.env, KUBECONFIG: join(dir, "data", "kubeconfig") }, cwd: root })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), ms)
    child.once("error", reject)
    child.once("close", (code) => {
      clearTimeout(timer)
      resolve({ code: code ?? -1, stdout, stderr })
    })
  })

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "fleet-loopback-"))
  // The namespace's own loopback, brought up; the dev process is its first (and only) user.
  dev = spawn("unshare", ["--net", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, process.execPath, "--conditions=@koder/source", "--import", "tsx", main, "dev", "--data-dir", join(dir, "data"), "--shutdown-grace", "2s"], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  dev.stdout!.on("data", (d: Buffer) => (out += d.toString()))
  dev.stderr!.on("data", (d: Buffer) => (out += d.toString()))
  await eventually(() => (/koder-fleet dev: node \S+ runs pods/.test(out) || undefined), 60_000, `dev to be ready:\n${out}`)
}, 90_000)

afterAll(async () => {
  if (dev && dev.exitCode === null) {
    const exited = new Promise((r) => dev.once("exit", r))
    dev.kill("SIGTERM")
    await exited
  }
  rmSync(dir, { recursive: true, force: true })
})

describe("the README's walk on a loopback-only host", () => {
  it("only loopback is there", async () => {
    const links = await inside(["ip", "-o", "link"])
    expect(links.stdout.trim().split("\n").map((l) => l.split(":")[1]!.trim())).toEqual(["lo"])
  })

  it("apply, rollout status, then the ingress answers from the pods; the EndpointSlices carry them", async () => {
    const applied = await inside([process.execPath, kfleet, "apply", "-f", "examples/hello"])
    expect(applied.code, applied.stderr).toBe(0)
    const rolled = await inside([process.execPath, kfleet, "rollout", "status", "deployment/hello"], 90_000)
    expect(rolled.code, rolled.stderr).toBe(0)
    const answer = await eventually(
      async () => {
        const r = await inside(["curl", "-s", "-m", "5", "http://hello.localhost:8080/"])
        return r.stdout.startsWith("hello from Koder Fleet") ? r.stdout : undefined
      },
      30_000,
      "the ingress to answer from a pod"
    )
    expect(answer).toMatch(/pod hello-/)
    const slices = await inside(["kubectl", "get", "endpointslices", "-l", "kubernetes.io/service-name=hello", "-o", "jsonpath={.items[*].endpoints[*].addresses[0]}"])
    expect(slices.stdout.trim().split(/\s+/)).toEqual(["127.0.0.1", "127.0.0.1"])
  }, 150_000)
})
