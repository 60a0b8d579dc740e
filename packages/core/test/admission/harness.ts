// An in-process API server with an admission chain, and a tiny client for it.
import { Effect, type Scope } from "effect"
import type * as Admission from "../../src/api/Admission.js"
import * as ApiServer from "../../src/api/ApiServer.js"
import * as Authn from "../../src/api/Authn.js"
import type { UserInfo } from "../../src/api/Http.js"
import { makeMemory, type StoreService } from "../../src/store/Store.js"

export type { Admission }

/** Users by bearer token: `admin`, `node:<name>` (a node identity), anything else (a plain user). */
export const userOf = (token: string): UserInfo =>
  token.startsWith("node:")
    ? { name: `system:node:${token.slice(5)}`, uid: token, groups: ["system:nodes", "system:authenticated"] }
    : { name: token, uid: token, groups: token === "admin" ? ["system:masters", "system:authenticated"] : ["system:authenticated"] }

export interface Harness {
  readonly store: StoreService
  readonly server: ApiServer.ApiServer
  readonly call: (method: string, path: string, body?: unknown, token?: string, contentType?: string) => Promise<{ status: number; body: any }>
}

export const start = (
  plugins: (store: StoreService) => Effect.Effect<ReadonlyArray<Admission.Plugin>, never, Scope.Scope>,
  store: StoreService = makeMemory()
): Effect.Effect<Harness, never, Scope.Scope> =>
  Effect.gen(function* () {
    const admission = yield* plugins(store)
    const server = yield* ApiServer.make({
      store,
      authenticate: (headers) => Effect.succeed(userOf(Authn.bearer(headers) ?? "anonymous")),
      admission
    })
    const call = (method: string, path: string, body?: unknown, token = "admin", contentType = "application/json") => {
      const [p, q] = path.split("?")
      return Effect.runPromise(
        server.handle({
          method,
          path: p!,
          query: new URLSearchParams(q ?? ""),
          headers: { "content-type": contentType, authorization: `Bearer ${token}` },
          body: body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(body)),
          client: token
        })
      ).then((r) => (r._tag === "Json" ? { status: r.status, body: r.body as any } : { status: r.status, body: undefined }))
    }
    return { store, server, call }
  })

export const namespace = (name: string, labels: Record<string, string> = {}) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name, labels } })

export const pod = (name: string, resources?: { requests?: Record<string, string>; limits?: Record<string, string> }, extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name },
  spec: { containers: [{ name: "app", image: "nginx:1.27", ...(resources ? { resources } : {}) }], ...extra }
})

/** Poll `check` until it passes or `ms` elapse (then its last failure is thrown). */
export const eventually = async (check: () => Promise<void> | void, ms = 5000): Promise<void> => {
  const deadline = Date.now() + ms
  for (;;) {
    try {
      await check()
      return
    } catch (e) {
      if (Date.now() > deadline) throw e
      await new Promise((r) => setTimeout(r, 20))
    }
  }
}
