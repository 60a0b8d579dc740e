/**
 * `koder-fleet dev` whose stdout and stderr readers went away (`koder-fleet dev | head`, a closed
 * pipe): it keeps serving and running pods, and Ctrl-C still stops every workload it started. A
 * write to a closed pipe used to crash the process (an unhandled EPIPE), skipping the shutdown,
 * and every pod's processes outlived it.
 */
import { readdirSync, readFileSync, existsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { client, credentials, eventually, start, type FleetProcess } from "./fixtures/FleetProcess.js"

/** The host pid of a process whose command line is exactly `argv`. */
const pidOf = (argv: ReadonlyArray<string>): number | undefined => {
  const wanted = argv.join("\0") + "\0"
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "latin1") === wanted) return Number(entry)
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return undefined
}

describe("koder-fleet dev with its output pipes closed", () => {
  let dir: string | undefined
  let dev: FleetProcess | undefined
  let workload: number | undefined

  afterAll(async () => {
    if (dev?.child.exitCode === null) dev.child.kill("SIGKILL")
    if (workload !== undefined && existsSync(`/proc/${workload}`)) process.kill(workload, "SIGKILL")
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  it("keeps running pods, and Ctrl-C still stops them", async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-dev-pipe-"))
    dev = await start(["--listen", "127.0.0.1:0", "--node-name", "pipenode"], "dev", { FLEET_DATA_DIR: dir })
    const { token, ca } = credentials(dev.kubeconfig)
    const http = client(dev.port, ca)
    // Nobody reads dev's output from here on: its next write to either pipe fails with EPIPE.
    dev.child.stdout!.destroy()
    dev.child.stderr!.destroy()
    const argv = ["sleep", String(40_000 + Math.floor(Math.random() * 10_000))]
    const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "quiet" }, spec: { containers: [{ name: "s", image: "busybox", command: argv }] } }
    try {
      expect((await http.send("POST", "/api/v1/namespaces/default/pods", { token, body: JSON.stringify(pod) })).status).toBe(201)
      await eventually(
        async () => {
          const r = await http.send("GET", "/api/v1/namespaces/default/pods/quiet", { token })
          return (r.json() as { status?: { phase?: string } }).status?.phase === "Running" ? true : undefined
        },
        60_000,
        "the pod to run"
      )
      workload = await eventually(() => pidOf(argv), 10_000, "the workload's process")
    } finally {
      http.close()
    }
    expect(dev.child.exitCode).toBeNull()
    dev.child.kill("SIGINT")
    expect(await dev.exited).toBe(0)
    await eventually(() => (existsSync(`/proc/${workload}`) ? undefined : true), 10_000, "the workload to be gone")
  }, 90_000)
})
