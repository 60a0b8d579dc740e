/**
 * The server role's flags.
 */
import { Duration, Either } from "effect"
import { homedir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import * as Server from "../src/Server.js"

const ok = (args: Array<string>, env: Record<string, string> = {}) => {
  const r = Server.parseFlags(args, env)
  if (Either.isLeft(r)) throw new Error(r.left.message)
  return r.right
}
const error = (args: Array<string>, env: Record<string, string> = {}) => {
  const r = Server.parseFlags(args, env)
  return Either.isLeft(r) ? r.left.message : undefined
}

describe("Server flags", () => {
  it("has the documented defaults", () => {
    const c = ok([])
    expect(c.dataDir).toBe(join(homedir(), ".koder-fleet"))
    expect(c.store).toEqual({ _tag: "sqlite", filename: join(homedir(), ".koder-fleet", "state.db") })
    expect(c.listen).toEqual({ host: "0.0.0.0", port: 9300 })
    expect(c.region).toBe("local")
    expect(c.limits.maxInFlight).toBe(100)
    expect(c.limits.maxWatches).toBe(250)
    expect(c.limits.watchBudgetPerUser).toBe(64 * 1024 * 1024)
    expect(Duration.toMillis(Duration.decode(c.limits.firstRequestTimeout))).toBe(10_000)
    expect(c.limits.maxConnectionsPerAddress).toBe(4096)
    expect(c.workloadSeats).toBe(2)
    expect(c.disabledControllers).toEqual([])
    expect(ok([], { FLEET_DATA_DIR: "/var/lib/fleet" }).dataDir).toBe("/var/lib/fleet")
  })

  it("parses every flag", () => {
    const c = ok([
      "--data-dir", "/d", "--store", "postgres", "--pg-url", "postgres://u@h/db", "--pg-schema", "f2",
      "--listen", "[::1]:0", "--region", "eu-west", "--tls-san", "a.example,10.0.0.1", "--tls-san", "b.example",
      "--tls-cert", "/c.pem", "--tls-key", "/k.pem", "--tls-ca", "/ca.pem",
      "--max-requests-inflight", "5", "--max-watches-inflight", "7", "--request-timeout", "1500ms", "--workload-seats", "6",
      "--disable-controllers", "cronjob,scheduler", "--disable-controllers", "event-ttl"
    ])
    expect(c.disabledControllers).toEqual(["cronjob", "scheduler", "event-ttl"])
    expect(c.store).toEqual({ _tag: "postgres", url: "postgres://u@h/db", schema: "f2" })
    expect(c.listen).toEqual({ host: "::1", port: 0 })
    expect(c.region).toBe("eu-west")
    expect(c.tls).toEqual({ sans: ["a.example", "10.0.0.1", "b.example"], cert: "/c.pem", key: "/k.pem", ca: "/ca.pem" })
    expect(c.limits.maxInFlight).toBe(5)
    expect(c.limits.maxWatches).toBe(7)
    expect(Duration.toMillis(c.limits.requestTimeout)).toBe(1500)
    expect(c.workloadSeats).toBe(6)
    expect(ok(["--workload-seats", "0"]).workloadSeats).toBe(0)
    const bounds = ok(["--watch-budget-per-user", "8Mi", "--first-request-timeout", "2s", "--max-connections-per-ip", "0"]).limits
    expect(bounds.watchBudgetPerUser).toBe(8 * 1024 * 1024)
    expect(Duration.toMillis(Duration.decode(bounds.firstRequestTimeout))).toBe(2000)
    expect(bounds.maxConnectionsPerAddress).toBe(0)
    expect(ok(["--watch-budget-per-user", "0"]).limits.watchBudgetPerUser).toBe(0)
    expect(ok(["--watch-budget-per-user", "1Gi"]).limits.watchBudgetPerUser).toBe(1024 ** 3)
  })

  it("accepts the usual listen forms", () => {
    expect(ok(["--listen", ":8443"]).listen).toEqual({ host: "0.0.0.0", port: 8443 })
    expect(ok(["--listen", "8443"]).listen).toEqual({ host: "0.0.0.0", port: 8443 })
    expect(ok(["--listen", "localhost:1"]).listen).toEqual({ host: "localhost", port: 1 })
  })

  it("explains what is wrong", () => {
    expect(error(["--store", "etcd"])).toContain("expected sqlite or postgres")
    expect(error(["--store", "postgres"])).toContain("--pg-url")
    expect(error(["--store", "postgres"], { FLEET_PG_URL: "postgres://x" })).toBeUndefined()
    expect(error(["--listen", "nowhere"])).toContain("HOST:PORT")
    expect(error(["--listen", "1.2.3.4:70000"])).toContain("HOST:PORT")
    expect(error(["--tls-cert", "/c"])).toContain("go together")
    expect(error(["--request-timeout", "soon"])).toContain("duration")
    expect(error(["--max-requests-inflight", "0"])).toContain("positive integer")
    expect(error(["--workload-seats=-1"])).toBe('--workload-seats "-1": expected a whole number (0: no limit)')
    expect(error(["--workload-seats", "two"])).toContain("--workload-seats")
    expect(error(["--region", "Bad Region"])).toContain("label value")
    expect(error(["--watch-budget-per-user", "64MB"])).toBe('--watch-budget-per-user "64MB": expected a size in bytes such as 67108864, 64Mi or 1Gi')
    expect(error(["--first-request-timeout", "never"])).toContain("--first-request-timeout")
    expect(error(["--max-connections-per-ip", "-3"])).toContain("--max-connections-per-ip")
    expect(error(["--frobnicate"])).toContain("frobnicate")
    expect(error(["--disable-controllers", "cronjob,kube-proxy"])).toContain('unknown controller "kube-proxy"')
    expect(error(["--disable-controllers", "*"])).toBeUndefined()
    expect(error(["--service-cluster-ip-range", "10.96.0.0/33"])).toContain("--service-cluster-ip-range")
    expect(error(["--service-cluster-ip-range", "10.43.0.0/16"])).toBeUndefined()
  })

  it("advertises loopback when listening everywhere", () => {
    expect(Server.advertisedHost("0.0.0.0")).toBe("127.0.0.1")
    expect(Server.advertisedHost("::")).toBe("::1")
    expect(Server.advertisedHost("10.1.1.1")).toBe("10.1.1.1")
  })
})
