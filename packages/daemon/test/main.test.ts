import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"

const run = promisify(execFile)
const main = fileURLToPath(new URL("../src/main.ts", import.meta.url))
const koderFleet = (...args: Array<string>) =>
  run(process.execPath, ["--conditions=@koder/source", "--import", "tsx", main, ...args]).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => e
  )

describe("koder-fleet", () => {
  it("prints its version", async () => {
    const r = await koderFleet("version")
    expect(r.code).toBe(0)
    expect(r.stdout.trim()).toBe("koder-fleet 0.1.0")
  })

  it("lists the roles in its usage", async () => {
    const r = await koderFleet("--help")
    for (const role of ["dev", "server", "agent", "box", "hub"]) expect(r.stdout).toContain(`  ${role}`)
  })

  it("rejects an unknown role with exit code 2 and the usage", async () => {
    const r = await koderFleet("frobnicate")
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('unknown role "frobnicate"')
  })

  it("documents the hub's flags and refuses a grace period shorter than a heartbeat", async () => {
    const help = await koderFleet("hub", "--help")
    expect(help.code).toBe(0)
    for (const flag of ["--listen", "0.0.0.0:9400", "--data-dir", "--member-grace-period"]) expect(help.stdout).toContain(flag)
    const bad = await koderFleet("hub", "--member-grace-period", "5s")
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("longer than a member's 10 s heartbeat")
    expect(help.stdout).toContain("--auto-approve-members")
    const pattern = await koderFleet("hub", "--auto-approve-members", "lab-(")
    expect(pattern.code).toBe(2)
    expect(pattern.stderr).toContain('--auto-approve-members "lab-("')
    const server = await koderFleet("server", "--help")
    for (const flag of ["--join-hub", "--hub-token", "--hub-ca-hash", "--member-name"]) expect(server.stdout).toContain(flag)
  })

  it("documents the dev, agent and box flags", async () => {
    for (const [role, flags] of [
      ["dev", ["--data-dir", "--listen", "--node-name", "--reserved"]],
      ["agent", ["--server", "--join-token", "--ca-hash", "--box-socket"]],
      ["box", ["--socket", "--data-dir", "--driver"]]
    ] as const) {
      const help = await koderFleet(role, "--help")
      expect(help.code, role).toBe(0)
      for (const flag of flags) expect(help.stdout, `${role} ${flag}`).toContain(flag)
    }
  })

  it("documents the server's flags and rejects unknown ones with exit code 2", async () => {
    const help = await koderFleet("server", "--help")
    expect(help.code).toBe(0)
    for (const flag of ["--data-dir", "--store", "--pg-url", "--listen", "--region", "--tls-san", "--tls-cert", "--tls-key"]) expect(help.stdout).toContain(flag)
    const bad = await koderFleet("server", "--listen", "nowhere")
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("expected HOST:PORT")
  })
})
