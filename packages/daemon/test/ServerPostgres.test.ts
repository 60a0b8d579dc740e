/**
 * `koder-fleet server --store postgres`: state kept in PostgreSQL outlives the process. Runs when
 * a database is reachable at FLEET_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres),
 * in a schema of its own that it drops afterwards.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import { client, credentials, start } from "./fixtures/FleetProcess.js"

const url = process.env["FLEET_TEST_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"
// PostgreSQL is part of the test environment (.ci/run starts it): no silent skip when it is down.
describe("koder-fleet server --store postgres", () => {
  const schema = `fleet_daemon_test_${process.pid}_${Date.now() % 100000}`
  let dir: string | undefined

  afterAll(async () => {
    const db = new pg.Client({ connectionString: url })
    await db.connect()
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await db.end()
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  it("keeps objects across restarts", async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-server-pg-"))
    const args = ["--data-dir", dir, "--listen", "127.0.0.1:0", "--store", "postgres", "--pg-url", url, "--pg-schema", schema]
    const first = await start(args)
    const creds = credentials(first.kubeconfig)
    const http = client(first.port, creds.ca)
    const created = await http.send("POST", "/api/v1/namespaces", {
      token: creds.token,
      body: JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: "kept" } })
    })
    expect(created.status).toBe(201)
    http.close()
    first.child.kill("SIGTERM")
    expect(await first.exited).toBe(0)

    const second = await start(args)
    const http2 = client(second.port, credentials(second.kubeconfig).ca)
    try {
      const r = await http2.send("GET", "/api/v1/namespaces/kept", { token: creds.token })
      expect(r.status).toBe(200)
      expect(r.json()).toMatchObject({ kind: "Namespace", metadata: { name: "kept" } })
    } finally {
      http2.close()
      second.child.kill("SIGTERM")
      expect(await second.exited).toBe(0)
    }
  })
})
