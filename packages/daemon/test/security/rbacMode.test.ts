/**
 * `--authorization-mode`: RBAC by default (bootstrap policy written, default deny, masters allowed,
 * the review endpoints served) and AlwaysAllow for development (everyone allowed, nothing written).
 */
import { Registry, Store } from "@koder/fleet-core"
import { Effect, Schedule } from "effect"
import { describe, expect, it } from "vitest"
import * as Authorization from "../../src/security/Authorization.js"

const context = (flags: Record<string, string>) => ({
  dataDir: "/nonexistent",
  store: Store.makeMemory(),
  registry: Registry.make(),
  bootstrapTokenHash: "sha256:00",
  address: "127.0.0.1:0",
  flags
})

const attributes = (groups: Array<string>) => ({
  user: { name: "someone", uid: "u", groups },
  verb: "list",
  resourceRequest: true,
  apiGroup: "",
  apiVersion: "v1",
  resource: "secrets",
  subresource: "",
  namespace: "default",
  name: "",
  path: "/api/v1/namespaces/default/secrets"
})

describe("authorization mode", () => {
  it("defaults to RBAC: writes the bootstrap policy, denies by default, allows system:masters", async () => {
    const ctx = context({})
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const part = yield* Authorization.make(ctx)
          expect((yield* part.authorize!(attributes(["system:authenticated"]))).allowed).toBe(false)
          expect((yield* part.authorize!(attributes(["system:masters"]))).allowed).toBe(true)
          expect(part.admission?.map((p) => p.name)).toEqual(["RBACEscalation"])
          yield* ctx.store.get("/registry/rbac.authorization.k8s.io/clusterroles/cluster-admin")
          yield* ctx.store.get("/registry/rbac.authorization.k8s.io/clusterrolebindings/system:node")
          expect(ctx.registry.byResource("authorization.k8s.io", "v1", "selfsubjectaccessreviews")).toBeDefined()
          expect(ctx.registry.byResource("fleet.koder.dev", "v1", "accessiblenamespaces")).toBeDefined()
          // Aggregated rules are written back in the background; once they are, a second start changes nothing.
          yield* ctx.store.get("/registry/rbac.authorization.k8s.io/clusterroles/view").pipe(
            Effect.filterOrFail((kv) => (JSON.parse(kv.value) as { rules: Array<unknown> }).rules.length > 0),
            Effect.retry(Schedule.spaced("10 millis").pipe(Schedule.upTo("5 seconds")))
          )
          yield* ctx.store.get("/registry/rbac.authorization.k8s.io/clusterroles/fleet:customer").pipe(
            Effect.filterOrFail((kv) => (JSON.parse(kv.value) as { rules: Array<unknown> }).rules.length > 0),
            Effect.retry(Schedule.spaced("10 millis").pipe(Schedule.upTo("5 seconds")))
          )
          const revision = yield* ctx.store.currentRevision
          yield* Authorization.make(ctx)
          expect(yield* ctx.store.currentRevision).toBe(revision)
        })
      )
    )
  })

  it("AlwaysAllow allows everyone and writes nothing", async () => {
    const ctx = context({ "authorization-mode": "AlwaysAllow" })
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const part = yield* Authorization.make(ctx)
          expect((yield* part.authorize!(attributes([]))).allowed).toBe(true)
          expect(yield* ctx.store.currentRevision).toBe(0)
          expect(part.banner?.[0]).toContain("AlwaysAllow")
        })
      )
    )
  })
})
