// Tenant isolation with row-level security: two tenants' stores share one schema; a raw
// connection as tenant A's login role, running hand-written SQL (including setting the tenant
// GUC to B itself), reads none of B's rows and cannot insert, update or delete any of them.
import { Chunk, Effect, Stream } from "effect"
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import { PgAdmin, PgStore } from "../src/index.js"
import { adminQuery, randomName, testUrl, urlAs } from "./pgTest.js"

const schema = randomName("fleet_test_rls")
const tenantA = randomName("ta")
const tenantB = randomName("tb")
const loginA = randomName("fleet_test_login_a")
const loginB = randomName("fleet_test_login_b")

afterAll(async () => {
  const roles = [loginA, loginB, PgAdmin.tenantRole(tenantA), PgAdmin.tenantRole(tenantB)]
  await adminQuery("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY($1)", [roles])
  await adminQuery(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  for (const role of roles) await adminQuery(`DROP ROLE IF EXISTS ${role}`)
})

/** The SQLSTATE a statement fails with, or "ok" with its row count. */
const attempt = async (client: pg.Client, sql: string): Promise<string> => {
  try {
    const r = await client.query(sql)
    return `ok ${r.rowCount}`
  } catch (e) {
    return (e as { code?: string }).code ?? String(e)
  }
}

describe("PostgreSQL store tenancy (row-level security)", () => {
  it("keeps each tenant's rows, revisions and watches to itself, even against hand-written SQL", async () => {
    for (const login of [loginA, loginB]) await adminQuery(`CREATE ROLE ${login} LOGIN`)
    await Effect.runPromise(PgAdmin.createTenantRole({ url: testUrl, schema, tenant: tenantA, grantTo: loginA }))
    await Effect.runPromise(PgAdmin.createTenantRole({ url: testUrl, schema, tenant: tenantB, grantTo: loginB }))

    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const a = yield* PgStore.make({ url: urlAs(loginA), schema, tenant: tenantA, applicationName: "fleet-test-rls" })
          const b = yield* PgStore.make({ url: urlAs(loginB), schema, tenant: tenantB, applicationName: "fleet-test-rls" })
          for (let i = 0; i < 5; i++) yield* a.create(`k/${i}`, `a${i}`)
          for (let i = 0; i < 3; i++) yield* b.create(`k/${i}`, `b${i}`)
          yield* b.update("k/0", "b0'", 1)

          // Each tenant has its own dense revision sequence and sees only its own keys.
          expect(yield* a.currentRevision).toBe(5)
          expect(yield* b.currentRevision).toBe(4)
          expect((yield* a.list("k/")).items.map((i) => i.value)).toEqual(["a0", "a1", "a2", "a3", "a4"])
          expect((yield* b.list("k/")).items.map((i) => i.value)).toEqual(["b0'", "b1", "b2"])
          expect((yield* a.get("k/0")).value).toBe("a0")
          const watched = yield* Stream.runCollect(Stream.take(a.watch("", 0), 5))
          expect(Chunk.toReadonlyArray(watched).map((e) => `${e.revision} ${e.value}`)).toEqual(["1 a0", "2 a1", "3 a2", "4 a3", "5 a4"])

          // A raw connection as tenant A's login role.
          const raw = new pg.Client({ connectionString: urlAs(loginA), application_name: "fleet-test-rls-raw" })
          raw.on("error", () => {})
          yield* Effect.promise(() => raw.connect())
          try {
            const q = (sql: string) => Effect.promise(() => attempt(raw, sql))
            const count = (sql: string) => Effect.promise(async () => Number((await raw.query(sql)).rows[0].n))
            // Claiming to be B gains nothing without B's role.
            yield* q(`SET fleet.tenant = '${tenantB}'`)
            expect(yield* count(`SELECT count(*) AS n FROM ${schema}.kv`)).toBe(0)
            expect(yield* count(`SELECT count(*) AS n FROM ${schema}.tenants`)).toBe(0)
            expect(yield* q(`UPDATE ${schema}.kv SET value = 'pwned'`)).toBe("ok 0")
            expect(yield* q(`DELETE FROM ${schema}.kv`)).toBe("ok 0")
            expect(yield* q(`UPDATE ${schema}.tenants SET revision = 999`)).toBe("ok 0")
            expect(
              yield* q(`INSERT INTO ${schema}.kv VALUES ('${tenantB}', 100, 'k/evil', 'x', 100, 0, 1, now())`)
            ).toBe("42501")
            // As itself, A sees its own rows only and cannot move or write rows into B.
            yield* q(`SELECT set_config('fleet.tenant', '${tenantA}', false)`)
            expect(yield* count(`SELECT count(*) AS n FROM ${schema}.kv`)).toBe(5)
            expect(yield* count(`SELECT count(*) AS n FROM ${schema}.kv WHERE tenant = '${tenantB}'`)).toBe(0)
            expect(yield* q(`UPDATE ${schema}.kv SET tenant = '${tenantB}'`)).toBe("42501")
            expect(
              yield* q(`INSERT INTO ${schema}.kv VALUES ('${tenantB}', 100, 'k/evil', 'x', 100, 0, 1, now())`)
            ).toBe("42501")
            expect(yield* q(`DELETE FROM ${schema}.kv WHERE tenant = '${tenantB}'`)).toBe("ok 0")
            // The untenanted rows are the schema owner's, not a tenant's.
            yield* q(`SET fleet.tenant = ''`)
            expect(yield* count(`SELECT count(*) AS n FROM ${schema}.tenants`)).toBe(0)
            // Nor can A take B's role or switch the policies off.
            expect(yield* q(`SET ROLE ${PgAdmin.tenantRole(tenantB)}`)).toBe("42501")
            expect(yield* q(`ALTER TABLE ${schema}.kv DISABLE ROW LEVEL SECURITY`)).toBe("42501")
            expect(yield* q(`DROP POLICY tenant_rows ON ${schema}.kv`)).toBe("42501")
          } finally {
            yield* Effect.promise(() => raw.end())
          }

          // B is untouched and goes on densely.
          expect((yield* b.list("k/")).items.map((i) => i.value)).toEqual(["b0'", "b1", "b2"])
          expect((yield* b.create("k/3", "b3")).modRevision).toBe(5)
          // A store of a tenant its role is not a member of sees and writes nothing.
          const intruder = yield* Effect.either(
            PgStore.make({ url: urlAs(loginA), schema, tenant: tenantB, applicationName: "fleet-test-rls" })
          )
          expect(intruder).toMatchObject({ _tag: "Left", left: { _tag: "AccessDenied" } })
        })
      )
    )
  }, 30_000)
})
