// ServiceAccount tokens through the API handler: TokenRequest issues a jose-signed JWT with
// Kubernetes' claims; the authenticator checks signature, issuer, audience, expiry, and that the
// ServiceAccount still exists with the same uid (deleting it revokes its tokens at once).
import { ApiServer, Authn, NamespaceServiceAccount, ServiceAccountTokens, Store } from "@koder/fleet-core"
import { Effect, Option, type Scope } from "effect"
import * as jose from "jose"
import { describe, expect, it } from "vitest"

const admin = "admin-token"

const call = (server: ApiServer.ApiServer, method: string, path: string, token: string | undefined, body?: unknown) =>
  Effect.runPromise(
    server.handle({
      method,
      path,
      query: new URLSearchParams(),
      headers: { "content-type": "application/json", ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
      body: body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(body)),
      client: "test"
    })
  ).then((r) => ({ status: r.status, body: (r._tag === "Json" ? r.body : undefined) as any }))

const setup = (options: { apiAudiences?: ReadonlyArray<string> } = {}): Effect.Effect<
  { server: ApiServer.ApiServer; config: ServiceAccountTokens.Config; store: Store.StoreService },
  ServiceAccountTokens.InvalidKey,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const store = Store.makeMemory()
    const key = yield* ServiceAccountTokens.keyFromPem(yield* ServiceAccountTokens.generateKeyPem)
    const config: ServiceAccountTokens.Config = { key, issuer: ServiceAccountTokens.defaultIssuer, ...(options.apiAudiences ? { apiAudiences: options.apiAudiences } : {}) }
    const hash = yield* Authn.hashToken(admin)
    const server = yield* ApiServer.make({
      store,
      authenticate: Authn.chain([Authn.staticToken(hash, Authn.bootstrapAdmin), ServiceAccountTokens.authenticator(config, store)]),
      subresources: [ServiceAccountTokens.tokenRequest(config)],
      admission: [NamespaceServiceAccount.plugin(store)]
    })
    return { server, config, store }
  })

const run = <A>(f: Effect.Effect<A, unknown, Scope.Scope>) => Effect.runPromise(Effect.scoped(f) as Effect.Effect<A>)
const p = <A>(promise: () => Promise<A>) => Effect.promise(promise)

const tokenRequest = (spec: Record<string, unknown> = {}) => ({ apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec })
const tokenPath = "/api/v1/namespaces/team/serviceaccounts/builder/token"

const prepare = (server: ApiServer.ApiServer) =>
  p(async () => {
    expect((await call(server, "POST", "/api/v1/namespaces", admin, { apiVersion: "v1", kind: "Namespace", metadata: { name: "team" } })).status).toBe(201)
    const sa = await call(server, "POST", "/api/v1/namespaces/team/serviceaccounts", admin, { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "builder" } })
    expect(sa.status).toBe(201)
    return sa.body
  })

describe("ServiceAccount tokens", () => {
  it("issues a TokenRequest with Kubernetes' bound-token claims, and the token authenticates", () =>
    run(
      Effect.gen(function* () {
        const { server, config } = yield* setup()
        const sa = yield* prepare(server)
        const issued = yield* p(() => call(server, "POST", tokenPath, admin, tokenRequest({ expirationSeconds: 1200 })))
        expect(issued.status).toBe(201)
        expect(issued.body).toMatchObject({ kind: "TokenRequest", apiVersion: "authentication.k8s.io/v1", spec: { audiences: [config.issuer], expirationSeconds: 1200 } })
        const token = issued.body.status.token as string
        const claims = jose.decodeJwt(token)
        expect(claims).toMatchObject({
          iss: "https://kubernetes.default.svc",
          sub: "system:serviceaccount:team:builder",
          aud: ["https://kubernetes.default.svc"],
          "kubernetes.io": { namespace: "team", serviceaccount: { name: "builder", uid: sa.metadata.uid } }
        })
        expect(claims.exp! - claims.iat!).toBe(1200)
        expect(Date.parse(issued.body.status.expirationTimestamp) / 1000).toBe(claims.exp)
        expect(jose.decodeProtectedHeader(token)).toMatchObject({ alg: "ES256", kid: config.key.kid })

        // Through the server: the token is a user (everything authenticated is allowed here).
        const got = yield* p(() => call(server, "GET", "/api/v1/namespaces/team/serviceaccounts/builder", token))
        expect(got.status).toBe(200)
      })
    ))

  it("maps the token to the ServiceAccount's user, uid and groups", () =>
    run(
      Effect.gen(function* () {
        const { server, config, store } = yield* setup()
        const sa = yield* prepare(server)
        const token = (yield* p(() => call(server, "POST", tokenPath, admin, tokenRequest()))).body.status.token
        const user = yield* ServiceAccountTokens.authenticator(config, store)({ authorization: `Bearer ${token}` })
        expect(Option.getOrThrow(user)).toEqual({
          name: "system:serviceaccount:team:builder",
          uid: sa.metadata.uid,
          groups: ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]
        })
      })
    ))

  it("defaults expirationSeconds to 3600, caps long requests, and refuses less than 10 minutes", () =>
    run(
      Effect.gen(function* () {
        const { server } = yield* setup()
        yield* prepare(server)
        const plain = yield* p(() => call(server, "POST", tokenPath, admin, tokenRequest()))
        expect(plain.body.spec.expirationSeconds).toBe(3600)
        const long = yield* p(() => call(server, "POST", tokenPath, admin, tokenRequest({ expirationSeconds: 10 * 365 * 86400 })))
        expect(long.body.spec.expirationSeconds).toBe(ServiceAccountTokens.defaultMaxExpirationSeconds)
        const short = yield* p(() => call(server, "POST", tokenPath, admin, tokenRequest({ expirationSeconds: 60 })))
        expect(short.status).toBe(422)
        expect(short.body.message).toContain("may not specify a duration less than 10 minutes")
        const missing = yield* p(() => call(server, "POST", "/api/v1/namespaces/team/serviceaccounts/ghost/token", admin, tokenRequest()))
        expect(missing.status).toBe(404)
        const get = yield* p(() => call(server, "GET", tokenPath, admin))
        expect(get.status).toBe(405)
      })
    ))

  it("rejects a token once its ServiceAccount is deleted, and after it is recreated with a new uid", () =>
    run(
      Effect.gen(function* () {
        const { server } = yield* setup()
        yield* prepare(server)
        const token = (yield* p(() => call(server, "POST", tokenPath, admin, tokenRequest()))).body.status.token
        expect((yield* p(() => call(server, "GET", "/api/v1/namespaces/team/configmaps", token))).status).toBe(200)
        expect((yield* p(() => call(server, "DELETE", "/api/v1/namespaces/team/serviceaccounts/builder", admin))).status).toBe(200)
        expect((yield* p(() => call(server, "GET", "/api/v1/namespaces/team/configmaps", token))).status).toBe(401)
        yield* p(() => call(server, "POST", "/api/v1/namespaces/team/serviceaccounts", admin, { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "builder" } }))
        expect((yield* p(() => call(server, "GET", "/api/v1/namespaces/team/configmaps", token))).status).toBe(401)
      })
    ))

  it("binds a token to a pod: it names the pod, and dies with it; a wrong uid, account or kind is refused", () =>
    run(
      Effect.gen(function* () {
        const { server } = yield* setup()
        yield* prepare(server)
        const podOf = (name: string, serviceAccountName: string) => ({ apiVersion: "v1", kind: "Pod", metadata: { name }, spec: { serviceAccountName, containers: [{ name: "c", image: "busybox" }] } })
        const web = (yield* p(() => call(server, "POST", "/api/v1/namespaces/team/pods", admin, podOf("web", "builder")))).body
        expect(web.metadata.uid).toBeTypeOf("string")
        yield* p(() => call(server, "POST", "/api/v1/namespaces/team/pods", admin, podOf("other", "default")))
        const bind = (ref: Record<string, unknown>) => p(() => call(server, "POST", tokenPath, admin, tokenRequest({ boundObjectRef: ref })))

        const issued = yield* bind({ apiVersion: "v1", kind: "Pod", name: "web" })
        expect(issued.status).toBe(201)
        expect(issued.body.spec.boundObjectRef).toEqual({ kind: "Pod", apiVersion: "v1", name: "web", uid: web.metadata.uid })
        expect(jose.decodeJwt(issued.body.status.token)).toMatchObject({ "kubernetes.io": { pod: { name: "web", uid: web.metadata.uid } } })

        expect((yield* bind({ kind: "Pod", name: "web", uid: "not-its-uid" })).status).toBe(409)
        const otherAccount = yield* bind({ kind: "Pod", name: "other" })
        expect(otherAccount.status).toBe(400)
        expect(otherAccount.body.message).toContain("different serviceaccount name")
        expect((yield* bind({ kind: "Pod", name: "ghost" })).status).toBe(404)
        const secret = yield* bind({ kind: "Secret", name: "web" })
        expect(secret.status).toBe(422)
        expect(secret.body.message).toContain("spec.boundObjectRef.kind")

        const token = issued.body.status.token as string
        expect((yield* p(() => call(server, "GET", "/api/v1/namespaces/team/configmaps", token))).status).toBe(200)
        expect((yield* p(() => call(server, "DELETE", "/api/v1/namespaces/team/pods/web", admin))).status).toBe(200)
        expect((yield* p(() => call(server, "GET", "/api/v1/namespaces/team/configmaps", token))).status).toBe(401)
        // Recreated under the same name, it is another pod: the token stays dead.
        yield* p(() => call(server, "POST", "/api/v1/namespaces/team/pods", admin, podOf("web", "builder")))
        expect((yield* p(() => call(server, "GET", "/api/v1/namespaces/team/configmaps", token))).status).toBe(401)
      })
    ))

  it("rejects wrong audience, wrong issuer, expired, not-yet-valid and foreign-key tokens", () =>
    run(
      Effect.gen(function* () {
        const { server, config, store } = yield* setup({ apiAudiences: ["https://fleet.example"] })
        const sa = yield* prepare(server)
        const auth = ServiceAccountTokens.authenticator(config, store)
        const subject = { namespace: "team", name: "builder", uid: sa.metadata.uid as string }
        const now = Date.now()
        const check = (token: string) => Effect.map(auth({ authorization: `Bearer ${token}` }), Option.isSome)
        const good = yield* ServiceAccountTokens.sign(config, subject, ["https://fleet.example"], 600, now)
        expect(yield* check(good.token)).toBe(true)
        // A TokenRequest without audiences gets the API audiences.
        const requested = yield* p(() => call(server, "POST", tokenPath, admin, tokenRequest()))
        expect(requested.body.spec.audiences).toEqual(["https://fleet.example"])
        expect(yield* check((yield* ServiceAccountTokens.sign(config, subject, ["vault"], 600, now)).token)).toBe(false)
        expect(yield* check((yield* ServiceAccountTokens.sign({ ...config, issuer: "https://evil" }, subject, ["https://fleet.example"], 600, now)).token)).toBe(false)
        expect(yield* check((yield* ServiceAccountTokens.sign(config, subject, ["https://fleet.example"], 600, now - 3600_000)).token)).toBe(false)
        expect(yield* check((yield* ServiceAccountTokens.sign(config, subject, ["https://fleet.example"], 600, now + 3600_000)).token)).toBe(false)
        const otherKey = yield* ServiceAccountTokens.keyFromPem(yield* ServiceAccountTokens.generateKeyPem)
        expect(yield* check((yield* ServiceAccountTokens.sign({ ...config, key: { ...otherKey, kid: config.key.kid } }, subject, ["https://fleet.example"], 600, now)).token)).toBe(false)
        expect(yield* check((yield* ServiceAccountTokens.sign(config, { ...subject, uid: "another-uid" }, ["https://fleet.example"], 600, now)).token)).toBe(false)
        const tampered = good.token.split(".")
        tampered[1] = jose.base64url.encode(JSON.stringify({ ...jose.decodeJwt(good.token), sub: "system:serviceaccount:team:admin" }))
        expect(yield* check(tampered.join("."))).toBe(false)
        expect(yield* check("not-a-jwt")).toBe(false)
      })
    ))

  it("reads RSA keys as RS256 and refuses anything else", () =>
    run(
      Effect.gen(function* () {
        const { privateKey } = yield* p(() => jose.generateKeyPair("RS256", { extractable: true }))
        const key = yield* ServiceAccountTokens.keyFromPem(yield* p(() => jose.exportPKCS8(privateKey)))
        expect(key.alg).toBe("RS256")
        const bad = yield* Effect.either(ServiceAccountTokens.keyFromPem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
        expect(bad._tag).toBe("Left")
      })
    ))
})
