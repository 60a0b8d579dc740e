/**
 * TLS material: generation, the SANs the certificate carries, reuse, and renewal.
 */
import { Effect } from "effect"
import { X509Certificate } from "node:crypto"
import { readFileSync, statSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import * as Tls from "../src/Tls.js"

const day = 24 * 60 * 60 * 1000

describe("Tls", () => {
  let dir: string
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-tls-"))
  })
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it("generates a CA and a server certificate with the local names and the extra SANs", async () => {
    const m = await Effect.runPromise(Tls.ensure({ dataDir: dir, extraSans: ["10.0.0.7", "fleet.example.com", "2001:db8::1"] }))
    expect(m.source).toBe("generated")
    const cert = new X509Certificate(m.cert)
    const ca = new X509Certificate(m.ca!)
    const san = cert.subjectAltName ?? ""
    for (const name of ["DNS:localhost", "IP Address:127.0.0.1", "IP Address:0:0:0:0:0:0:0:1", `DNS:${hostname().toLowerCase()}`, "IP Address:10.0.0.7", "DNS:fleet.example.com", "IP Address:2001:DB8:0:0:0:0:0:1"]) {
      expect(san).toContain(name)
    }
    expect(ca.ca).toBe(true)
    expect(cert.ca).toBe(false)
    expect(cert.checkIssued(ca)).toBe(true)
    expect(cert.verify(ca.publicKey)).toBe(true)
    expect(cert.checkHost("localhost")).toBe("localhost")
    expect(cert.checkIP("127.0.0.1")).toBe("127.0.0.1")
    const lifetime = (c: X509Certificate) => (new Date(c.validTo).getTime() - Date.now()) / day
    expect(lifetime(ca)).toBeGreaterThan(3640)
    expect(lifetime(cert)).toBeGreaterThan(360)
    expect(lifetime(cert)).toBeLessThan(366)
    const f = Tls.files(dir)
    expect(statSync(f.caKey).mode & 0o777).toBe(0o600)
    expect(statSync(f.serverKey).mode & 0o777).toBe(0o600)
    expect(readFileSync(f.serverCert, "utf8")).toBe(m.cert)
  })

  it("reuses the material when nothing changed", async () => {
    const first = await Effect.runPromise(Tls.ensure({ dataDir: dir, extraSans: ["10.0.0.7"] }))
    const again = await Effect.runPromise(Tls.ensure({ dataDir: dir, extraSans: ["10.0.0.7"] }))
    expect(again.source).toBe("reused")
    expect(again.cert).toBe(first.cert)
    expect(again.key).toBe(first.key)
    expect(again.ca).toBe(first.ca)
  })

  it("renews only the server certificate when the SANs change or it nears expiry", async () => {
    const first = await Effect.runPromise(Tls.ensure({ dataDir: dir }))
    const wider = await Effect.runPromise(Tls.ensure({ dataDir: dir, extraSans: ["node-1.internal"] }))
    expect(wider.source).toBe("renewed")
    expect(wider.ca).toBe(first.ca)
    expect(Tls.sansOf(wider.cert)).toContain("node-1.internal")
    // 340 days on, the certificate expires within 30 days.
    const later = await Effect.runPromise(Tls.ensure({ dataDir: dir, extraSans: ["node-1.internal"], now: () => new Date(Date.now() + 340 * day) }))
    expect(later.source).toBe("renewed")
    expect(later.ca).toBe(first.ca)
    expect(later.cert).not.toBe(wider.cert)
  })

  it("uses given files instead, and refuses a key that does not match", async () => {
    const generated = await Effect.runPromise(Tls.ensure({ dataDir: join(dir, "a") }))
    const f = Tls.files(join(dir, "a"))
    const given = await Effect.runPromise(Tls.ensure({ dataDir: join(dir, "b"), certFile: f.serverCert, keyFile: f.serverKey, caFile: f.caCert }))
    expect(given).toEqual({ cert: generated.cert, key: generated.key, ca: generated.ca, source: "given" })
    const mismatch = await Effect.runPromiseExit(Tls.ensure({ dataDir: join(dir, "b"), certFile: f.serverCert, keyFile: f.caKey }))
    expect(mismatch._tag).toBe("Failure")
    const half = await Effect.runPromiseExit(Tls.ensure({ dataDir: join(dir, "b"), certFile: f.serverCert }))
    expect(half._tag).toBe("Failure")
  })

  it("spells SANs canonically", () => {
    expect(Tls.canonicalSan("0:0:0:0:0:0:0:1")).toBe("::1")
    expect(Tls.canonicalSan(" Fleet.Example.COM ")).toBe("fleet.example.com")
    expect(Tls.wantedSans(["localhost", "::1", "10.0.0.1"]).filter((s) => s === "localhost" || s === "::1")).toEqual(["localhost", "::1"])
  })
})
