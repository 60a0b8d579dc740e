// Versioned schema migrations: stores opening together on a fresh schema take turns (no race),
// and a schema from a newer Fleet or from another program is refused with a clear message.
import { Effect, Either } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { PgAdmin, PgStore } from "../src/index.js"
import { adminQuery, randomName, testUrl } from "./pgTest.js"

const schemas: Array<string> = []
const fresh = () => {
  const s = randomName("fleet_test_mig")
  schemas.push(s)
  return s
}

afterAll(async () => {
  for (const s of schemas) await adminQuery(`DROP SCHEMA IF EXISTS ${s} CASCADE`)
})

const open = (schema: string) =>
  Effect.runPromise(Effect.scoped(Effect.either(Effect.flatMap(PgStore.make({ url: testUrl, schema, applicationName: "fleet-test-mig" }), (s) => s.currentRevision))))

describe("PostgreSQL store schema", () => {
  it("migrates a fresh schema once when several stores open it at the same time", async () => {
    const schema = fresh()
    const results = await Promise.all(Array.from({ length: 4 }, () => open(schema)))
    for (const r of results) expect(r).toEqual(Either.right(0))
    const meta = await adminQuery(`SELECT name, value FROM ${schema}.meta ORDER BY name`)
    expect(meta.rows).toEqual([
      { name: "format", value: "koder-fleet-store" },
      { name: "schema_version", value: "1" }
    ])
  })

  it("refuses a schema written by a newer Koder Fleet, saying so", async () => {
    const schema = fresh()
    await Effect.runPromise(PgAdmin.migrate({ url: testUrl, schema }))
    await adminQuery(`UPDATE ${schema}.meta SET value = '99' WHERE name = 'schema_version'`)
    const result = await open(schema)
    expect(result).toMatchObject({ _tag: "Left", left: { _tag: "SchemaTooNew", schemaVersion: 99, supportedVersion: 1 } })
    expect(Either.isLeft(result) && result.left.message).toMatch(/has store schema version 99.*supports up to version 1.*upgrade Koder Fleet/)
  })

  it("refuses a schema that holds another program's tables", async () => {
    const schema = fresh()
    await adminQuery(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.accounts (id int)`)
    const result = await open(schema)
    expect(result).toMatchObject({ _tag: "Left", left: { _tag: "ForeignSchema" } })
    expect(Either.isLeft(result) && result.left.message).toMatch(/is not a Koder Fleet store.*accounts/)
    // Untouched.
    expect((await adminQuery(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1`, [schema])).rows[0].n).toBe(1)
  })

  it("rejects unusable configuration before connecting", async () => {
    expect(await open("Robert'); DROP TABLE students;--")).toMatchObject({ _tag: "Left", left: { _tag: "InvalidConfig" } })
  })
})
