/** `koder-fleet hub`'s flags (pure): its defaults, the grace period, the auto-approve rule; `--hub` and its companions. */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as CoLocatedHub from "../../src/federation/CoLocatedHub.js"
import * as HubRole from "../../src/federation/HubRole.js"

const env = { FLEET_HUB_DATA_DIR: "/var/lib/hub" }

describe("koder-fleet hub flags", () => {
  it("listens on 9400 with its own data dir, no DNS and no ingress, unless told", () => {
    const c = Either.getOrThrow(HubRole.parse([], env))
    expect(c.listen).toEqual({ host: "0.0.0.0", port: 9400 })
    expect(c.dataDir).toBe("/var/lib/hub")
    expect(c.dns.listen).toBeUndefined()
    expect(c.ingress.http).toBeUndefined()
    expect(c.hub?.gracePeriodMs).toBe(40_000)
    expect(Either.getOrThrow(HubRole.parse(["--listen", "127.0.0.1:9500"], env)).listen).toEqual({ host: "127.0.0.1", port: 9500 })
  })

  it.each([
    ["40s", 40_000],
    ["2m", 120_000],
    ["--member-grace-period=90s", 90_000]
  ])("--member-grace-period %s", (value, ms) => {
    const args = value.startsWith("--") ? [value] : ["--member-grace-period", value]
    expect(Either.getOrThrow(HubRole.parse(args, env)).hub?.gracePeriodMs).toBe(ms)
  })

  it.each(["5s", "10s", "soon", ""])("--member-grace-period %j is refused: not longer than a heartbeat", (value) => {
    const r = HubRole.parse(["--member-grace-period", value], env)
    expect(Either.isLeft(r) ? r.left.message : "").toContain("expected a duration longer than a member's 10 s heartbeat")
  })

  it("--auto-approve-members matches whole names only; a bad pattern is refused", () => {
    const rule = Either.getOrThrow(HubRole.parse(["--auto-approve-members", "lab-\\d+"], env)).hub?.autoApprove
    expect(["lab-1", "lab-12", "xlab-1", "lab-1x", "lab-"].map((n) => rule?.test(n))).toEqual([true, true, false, false, false])
    const bad = HubRole.parse(["--auto-approve-members", "("], env)
    expect(Either.isLeft(bad) ? bad.left.message : "").toMatch(/^--auto-approve-members "\(":/)
  })
})

describe("--hub (co-located)", () => {
  it.each([
    [["--hub"], { listen: "127.0.0.1:9400" }, []],
    [["--hub", "--hub-listen", "0.0.0.0:9500", "--listen", "x"], { listen: "0.0.0.0:9500" }, ["--listen", "x"]],
    [["--hub-listen=127.0.0.1:0", "--hub"], { listen: "127.0.0.1:0" }, []],
    [["--listen", "x"], undefined, ["--listen", "x"]]
  ])("%j", (argv, settings, rest) => {
    const args = [...argv]
    expect(Either.getOrThrow(CoLocatedHub.take(args, "127.0.0.1:9400"))).toEqual(settings)
    expect(args).toEqual(rest)
  })

  it("refuses --hub-listen alone, and --hub with --join-hub", () => {
    const alone = CoLocatedHub.take(["--hub-listen", "127.0.0.1:1"], "d")
    expect(Either.isLeft(alone) ? alone.left.message : "").toBe("--hub-listen needs --hub")
    const both = CoLocatedHub.take(["--hub", "--join-hub=https://h:9400"], "d")
    expect(Either.isLeft(both) ? both.left.message : "").toContain("--hub and --join-hub")
  })
})
