/**
 * OIDC through a real `koder-fleet server` against a local identity provider the test starts:
 * HTTPS with a certificate from its own CA (passed as `--oidc-ca-file`), discovery and JWKS.
 * Valid ID tokens authenticate; wrong audience, issuer, expiry and signature answer 401; after
 * the provider rotates its key, new tokens authenticate and tokens of the retired key do not.
 */
import { Effect } from "effect"
import * as jose from "jose"
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { createServer, type Server } from "node:https"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fetchTrusting } from "../../src/security/Authentication.js"
import * as Tls from "../../src/Tls.js"
import { client, credentials, eventually, start, type FleetProcess } from "../fixtures/FleetProcess.js"

interface Key {
  readonly kid: string
  readonly privateKey: jose.CryptoKey
  readonly jwk: jose.JWK
}

const makeKey = async (kid: string): Promise<Key> => {
  const { privateKey, publicKey } = await jose.generateKeyPair("ES256")
  return { kid, privateKey, jwk: { ...(await jose.exportJWK(publicKey)), kid, alg: "ES256", use: "sig" } }
}

describe("OIDC over HTTPS", () => {
  let dir: string
  let idp: Server
  let issuer: string
  let served: Array<Key> = []
  let fleet: FleetProcess
  let http: ReturnType<typeof client>

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-oidc-"))
    // The provider's certificate, from a CA of its own that only --oidc-ca-file tells Fleet about.
    const tls = await Effect.runPromise(Tls.ensure({ dataDir: join(dir, "idp") }))
    idp = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
      res.setHeader("content-type", "application/json")
      if (req.url === "/.well-known/openid-configuration") res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }))
      else if (req.url === "/jwks") res.end(JSON.stringify({ keys: served.map((k) => k.jwk) }))
      else {
        res.statusCode = 404
        res.end("{}")
      }
    })
    await new Promise<void>((resolve) => idp.listen(0, "127.0.0.1", resolve))
    issuer = `https://127.0.0.1:${(idp.address() as AddressInfo).port}`
    served = [await makeKey("k1")]
    fleet = await start([
      "--data-dir", join(dir, "fleet"),
      "--listen", "127.0.0.1:0",
      "--oidc-issuer-url", issuer,
      "--oidc-client-id", "fleet",
      "--oidc-username-claim", "email",
      "--oidc-groups-claim", "groups",
      "--oidc-groups-prefix", "koder:",
      "--oidc-ca-file", Tls.files(join(dir, "idp")).caCert
    ])
    http = client(fleet.port, credentials(fleet.kubeconfig).ca)
  }, 60_000)

  afterAll(async () => {
    http?.close()
    if (fleet?.child.exitCode === null) fleet.child.kill("SIGKILL")
    await new Promise<void>((resolve) => (idp ? idp.close(() => resolve()) : resolve()))
    await rm(dir, { recursive: true, force: true })
  })

  const sign = (key: Key, options: { iss?: string; aud?: string; expIn?: number } = {}) => {
    const now = Math.floor(Date.now() / 1000)
    return new jose.SignJWT({ sub: "u-42", email: "ana@koder.dev", email_verified: true, groups: ["dev"] })
      .setProtectedHeader({ alg: "ES256", kid: key.kid })
      .setIssuer(options.iss ?? issuer)
      .setAudience(options.aud ?? "fleet")
      .setIssuedAt(now)
      .setExpirationTime(now + (options.expIn ?? 300))
      .sign(key.privateKey)
  }
  const status = async (token: string) => (await http.send("GET", "/api/v1/namespaces", { token })).status

  it("announces the provider and authenticates its tokens", async () => {
    expect(fleet.stdout()).toContain(`accepting OIDC tokens from ${issuer}`)
    const token = await sign(served[0]!)
    expect([200, 403]).toContain(await status(token))
    const review = await http.send("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {
      token,
      body: JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" })
    })
    if (review.status === 201) {
      expect((review.json() as any).status.userInfo).toMatchObject({ username: "ana@koder.dev", groups: expect.arrayContaining(["koder:dev", "system:authenticated"]) })
    } else expect(review.status).not.toBe(401)
  })

  it("reaches the provider only through --oidc-ca-file's trust", async () => {
    const discovery = `${issuer}/.well-known/openid-configuration`
    const trusted = await fetchTrusting(await readFile(Tls.files(join(dir, "idp")).caCert, "utf8"))(discovery, { method: "GET" })
    expect(((await trusted.json()) as any).issuer).toBe(issuer)
    await expect(fetchTrusting(undefined)(discovery, { method: "GET" })).rejects.toThrow()
  })

  it("refuses wrong audience, wrong issuer, expired and badly signed tokens with 401", async () => {
    const k = served[0]!
    const stranger = { ...(await makeKey("k1")) }
    expect(await status(await sign(k, { aud: "other-client" }))).toBe(401)
    expect(await status(await sign(k, { iss: "https://elsewhere.example" }))).toBe(401)
    expect(await status(await sign(k, { expIn: -30 }))).toBe(401)
    expect(await status(await sign(stranger))).toBe(401)
  })

  it("follows key rotation: new keys verify once refetched, the retired key no longer does", async () => {
    const old = served[0]!
    const oldToken = await sign(old)
    expect(await status(oldToken)).not.toBe(401)
    const next = await makeKey("k2")
    served = [next]
    // The JWKS is refetched for an unknown key id at most every few seconds: poll with a deadline.
    await eventually(async () => ((await status(await sign(next))) !== 401 ? true : undefined), 20_000, "the rotated key to be accepted")
    expect(await status(oldToken)).toBe(401)
  }, 30_000)
})
