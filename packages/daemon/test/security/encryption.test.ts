/**
 * Secrets at rest and the audit log, end to end: a real server writes Secrets; the raw SQLite
 * file and the raw PostgreSQL rows hold no plaintext; a KMS-wrapped key fails closed; the audit
 * log records mutating requests without their bodies and rotates.
 */
import { randomBytes, createCipheriv, createDecipheriv } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { createServer, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import * as Encryption from "../../src/security/Encryption.js"
import { client, credentials, start, type FleetProcess } from "../fixtures/FleetProcess.js"

const pgUrl = process.env["FLEET_TEST_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"
const plaintext = "correct-horse-battery-staple-4711"
const base64 = Buffer.from(plaintext).toString("base64")
const dirs: Array<string> = []

afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true })
})

const tempDir = async () => {
  const d = await mkdtemp(join(tmpdir(), "fleet-enc-"))
  dirs.push(d)
  return d
}

/** Start a server, create a namespace and a Secret, read it back, stop the server. */
const writeSecret = async (args: ReadonlyArray<string>) => {
  const server = await start(["--listen", "127.0.0.1:0", ...args])
  const creds = credentials(server.kubeconfig)
  const http = client(server.port, creds.ca)
  try {
    const ns = await http.send("POST", "/api/v1/namespaces", { token: creds.token, body: JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: "vault" } }) })
    expect([201, 409]).toContain(ns.status)
    const created = await http.send("POST", "/api/v1/namespaces/vault/secrets", {
      token: creds.token,
      body: JSON.stringify({ apiVersion: "v1", kind: "Secret", metadata: { name: "db" }, stringData: { password: plaintext } })
    })
    expect(created.status).toBe(201)
    const read = await http.send("GET", "/api/v1/namespaces/vault/secrets/db", { token: creds.token })
    expect((read.json()["data"] as Record<string, string>)["password"]).toBe(base64)
    return { server, creds }
  } finally {
    http.close()
    server.child.kill("SIGTERM")
    expect(await server.exited).toBe(0)
  }
}

const stop = async (server: FleetProcess) => {
  server.child.kill("SIGTERM")
  await server.exited
}

describe("AES-256-GCM envelopes", () => {
  const k1: Encryption.Key = { name: "k1", secret: randomBytes(32) }
  const k2: Encryption.Key = { name: "k2", secret: randomBytes(32) }
  const secrets = { group: "", plural: "secrets" }

  it("seals Secrets only, with a fresh nonce each time, and opens them again", () => {
    const t = Encryption.transformer([k1])
    const a = t.toStore(secrets, plaintext)
    const b = t.toStore(secrets, plaintext)
    expect(a).toMatch(/^fleet:enc:aesgcm:v1:k1:/)
    expect(a).not.toBe(b)
    expect(a).not.toContain(plaintext)
    expect(t.fromStore(secrets, a)).toBe(plaintext)
    expect(t.toStore({ group: "", plural: "configmaps" }, plaintext)).toBe(plaintext)
  })

  it("rotates: the first key seals, older keys still open, unknown keys and tampering fail", () => {
    const sealedOld = Encryption.seal(k1, plaintext)
    const rotated = Encryption.transformer([k2, k1])
    expect(rotated.fromStore(secrets, sealedOld)).toBe(plaintext)
    expect(rotated.toStore(secrets, plaintext)).toMatch(/^fleet:enc:aesgcm:v1:k2:/)
    expect(() => Encryption.open([k2], sealedOld)).toThrow(/key "k1", which is not configured/)
    const raw = Buffer.from(sealedOld.split(":").at(-1)!, "base64")
    raw[20] = raw[20]! ^ 1
    expect(() => Encryption.open([k1], `fleet:enc:aesgcm:v1:k1:${raw.toString("base64")}`)).toThrow()
  })

  it("reads key files strictly", () => {
    expect(Encryption.parseKeys(`# comment\nnew:${randomBytes(32).toString("base64")}\nold:${randomBytes(32).toString("base64")}\n`, "f").map((k) => k.name)).toEqual(["new", "old"])
    expect(() => Encryption.parseKeys("k:c2hvcnQ=", "f")).toThrow(/f:1: expected "name:base64" with a 32-byte key/)
    expect(() => Encryption.parseKeys("", "f")).toThrow(/no keys/)
  })
})

describe("Secrets at rest", () => {
  it("leaves no plaintext in the SQLite files", async () => {
    const dir = await tempDir()
    await writeSecret(["--data-dir", dir])
    const files = readdirSync(dir).filter((f) => f.startsWith("state.db"))
    expect(files.length).toBeGreaterThan(0)
    const bytes = Buffer.concat(files.map((f) => readFileSync(join(dir, f))))
    expect(bytes.includes("fleet:enc:aesgcm:v1:")).toBe(true)
    expect(bytes.includes(plaintext)).toBe(false)
    expect(bytes.includes(base64)).toBe(false)
    expect(readFileSync(join(dir, "encryption-keys"), "utf8")).toMatch(/^key1:/m)
  }, 60_000)

  it("leaves no plaintext in the PostgreSQL rows", async () => {
    const dir = await tempDir()
    const schema = `fleet_enc_${process.pid}_${Date.now() % 100000}`
    const db = new pg.Client({ connectionString: pgUrl })
    await db.connect()
    try {
      await writeSecret(["--data-dir", dir, "--store", "postgres", "--pg-url", pgUrl, "--pg-schema", schema])
      const rows = (await db.query<{ key: string; value: string | null }>(`SELECT key, value FROM "${schema}".kv WHERE key LIKE '/registry/secrets/%'`)).rows
      expect(rows.length).toBeGreaterThan(0)
      for (const row of rows) {
        expect(row.value).toMatch(/^fleet:enc:aesgcm:v1:/)
        expect(row.value).not.toContain(plaintext)
        expect(row.value).not.toContain(base64)
      }
    } finally {
      await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      await db.end()
    }
  }, 60_000)

  it("unwraps its data key from a KMS at boot and refuses to start without it", async () => {
    // A KMS speaking the documented protocol, wrapping with its own AES-256-GCM key.
    const master = randomBytes(32)
    const kms: Server = createServer((req, res) => {
      let body = ""
      req.on("data", (d: Buffer) => (body += d.toString()))
      req.on("end", () => {
        const input = JSON.parse(body) as { plaintext?: string; ciphertext?: string }
        if (req.url === "/v1/encrypt") {
          const nonce = randomBytes(12)
          const c = createCipheriv("aes-256-gcm", master, nonce)
          const out = Buffer.concat([nonce, c.update(Buffer.from(input.plaintext!, "base64")), c.final(), c.getAuthTag()])
          res.end(JSON.stringify({ ciphertext: out.toString("base64") }))
        } else {
          const raw = Buffer.from(input.ciphertext!, "base64")
          const d = createDecipheriv("aes-256-gcm", master, raw.subarray(0, 12))
          d.setAuthTag(raw.subarray(raw.length - 16))
          res.end(JSON.stringify({ plaintext: Buffer.concat([d.update(raw.subarray(12, raw.length - 16)), d.final()]).toString("base64") }))
        }
      })
    })
    await new Promise<void>((r) => kms.listen(0, "127.0.0.1", r))
    const url = `http://127.0.0.1:${(kms.address() as { port: number }).port}`
    const dir = await tempDir()
    try {
      await writeSecret(["--data-dir", dir, "--kms-url", url])
      expect(readFileSync(join(dir, "encryption-key.wrapped"), "utf8").trim().length).toBeGreaterThan(40)
      // A restart unwraps the same key: the Secret written before is readable.
      const again = await start(["--data-dir", dir, "--listen", "127.0.0.1:0", "--kms-url", url])
      const creds = credentials(again.kubeconfig)
      const http = client(again.port, creds.ca)
      const read = await http.send("GET", "/api/v1/namespaces/vault/secrets/db", { token: creds.token })
      http.close()
      await stop(again)
      expect((read.json()["data"] as Record<string, string>)["password"]).toBe(base64)
    } finally {
      await new Promise((r) => kms.close(r))
    }
    // The KMS is gone: fail closed.
    await expect(start(["--data-dir", dir, "--listen", "127.0.0.1:0", "--kms-url", url])).rejects.toThrow(/encryption at rest/)
  }, 90_000)
})

describe("audit log", () => {
  it("records every mutating request without bodies, and rotates", async () => {
    const dir = await tempDir()
    const server = await start(["--data-dir", dir, "--listen", "127.0.0.1:0", "--audit-log-max-bytes", "2000", "--audit-log-max-backups", "2"])
    const creds = credentials(server.kubeconfig)
    const http = client(server.port, creds.ca)
    try {
      await http.send("POST", "/api/v1/namespaces", { token: creds.token, body: JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: "audited" } }) })
      await http.send("GET", "/api/v1/namespaces/audited", { token: creds.token })
      for (let i = 0; i < 20; i++) {
        await http.send("POST", "/api/v1/namespaces/audited/secrets", {
          token: creds.token,
          body: JSON.stringify({ apiVersion: "v1", kind: "Secret", metadata: { name: `s${i}` }, stringData: { password: plaintext } })
        })
      }
      await http.send("DELETE", "/api/v1/namespaces/audited/secrets/s0", { token: creds.token })
    } finally {
      http.close()
      await stop(server)
    }
    const files = readdirSync(dir).filter((f) => f.startsWith("audit.log")).sort()
    expect(files).toEqual(["audit.log", "audit.log.1", "audit.log.2"])
    const lines = files.flatMap((f) => readFileSync(join(dir, f), "utf8").split("\n").filter((l) => l !== "")).map((l) => JSON.parse(l))
    const last = JSON.parse(readFileSync(join(dir, "audit.log"), "utf8").trim().split("\n").at(-1)!)
    expect(last).toMatchObject({ user: "fleet:bootstrap-admin", verb: "delete", resource: "secrets", namespace: "audited", name: "s0", code: 200 })
    expect(typeof last.latencyMs).toBe("number")
    expect(lines.every((l) => l.verb !== "get")).toBe(true)
    for (const f of files) {
      const text = readFileSync(join(dir, f), "utf8")
      expect(text).not.toContain(plaintext)
      expect(text).not.toContain(base64)
      expect(text.length).toBeLessThanOrEqual(2000 + 400)
    }
  }, 60_000)
})
