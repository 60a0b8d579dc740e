// OIDC against a local identity provider the test starts (discovery + JWKS over node:http):
// valid tokens map to prefixed users and groups; wrong audience, issuer, expiry, nbf and
// signature are refused; after key rotation new tokens verify once jose refetches the JWKS and
// tokens signed with the retired key no longer do.
import { Oidc } from "@koder/fleet-core"
import { Effect, Option } from "effect"
import * as jose from "jose"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

interface Key {
  readonly kid: string
  readonly privateKey: jose.CryptoKey
  readonly jwk: jose.JWK
}

const makeKey = async (kid: string): Promise<Key> => {
  const { privateKey, publicKey } = await jose.generateKeyPair("RS256")
  return { kid, privateKey, jwk: { ...(await jose.exportJWK(publicKey)), kid, alg: "RS256", use: "sig" } }
}

let server: Server
let issuer = ""
let served: Array<Key> = []
let jwksFetches = 0

beforeAll(async () => {
  server = createServer((req, res) => {
    res.setHeader("content-type", "application/json")
    if (req.url === "/.well-known/openid-configuration") res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/keys` }))
    else if (req.url === "/keys") {
      jwksFetches++
      res.end(JSON.stringify({ keys: served.map((k) => k.jwk) }))
    } else {
      res.statusCode = 404
      res.end("{}")
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

const sign = (key: Key, claims: jose.JWTPayload, options: { iss?: string; aud?: string; expIn?: number; nbfIn?: number } = {}) => {
  const now = Math.floor(Date.now() / 1000)
  return new jose.SignJWT(claims)
    .setProtectedHeader({ alg: "RS256", kid: key.kid })
    .setIssuer(options.iss ?? issuer)
    .setAudience(options.aud ?? "fleet")
    .setIssuedAt(now)
    .setNotBefore(now + (options.nbfIn ?? 0))
    .setExpirationTime(now + (options.expIn ?? 300))
    .sign(key.privateKey)
}

const auth = (a: ReturnType<typeof Oidc.authenticator>, token: string) => Effect.runPromise(a({ authorization: `Bearer ${token}` }))

describe("OIDC", () => {
  it("accepts the provider's tokens and maps username and groups claims with prefixes", async () => {
    const k1 = await makeKey("k1")
    served = [k1]
    const a = Oidc.authenticator({ issuerUrl: issuer, clientId: "fleet", usernameClaim: "email", groupsClaim: "roles", groupsPrefix: "koder:" })
    const user = await auth(a, await sign(k1, { sub: "u-1", email: "ana@koder.dev", email_verified: true, roles: ["dev", "ops"] }))
    expect(Option.getOrThrow(user)).toEqual({ name: "ana@koder.dev", uid: "u-1", groups: ["koder:dev", "koder:ops", "system:authenticated"] })
    // The default prefix for a non-email claim is "<issuer>#"; "-" means none.
    const bySub = Oidc.authenticator({ issuerUrl: issuer, clientId: "fleet" })
    expect(Option.getOrThrow(await auth(bySub, await sign(k1, { sub: "u-1", groups: "solo" })))).toEqual({ name: `${issuer}#u-1`, uid: "u-1", groups: ["solo", "system:authenticated"] })
    const bare = Oidc.authenticator({ issuerUrl: issuer, clientId: "fleet", usernamePrefix: "-" })
    expect(Option.getOrThrow(await auth(bare, await sign(k1, { sub: "u-1" }))).name).toBe("u-1")
    // An unverified email is no identity.
    expect(Option.isNone(await auth(a, await sign(k1, { sub: "u-1", email: "ana@koder.dev", email_verified: false })))).toBe(true)
  })

  it("refuses wrong audience, other issuers, expired, not-yet-valid and badly signed tokens", async () => {
    const k1 = await makeKey("k1")
    const stranger = await makeKey("k1")
    served = [k1]
    const a = Oidc.authenticator({ issuerUrl: issuer, clientId: "fleet" })
    expect(Option.isSome(await auth(a, await sign(k1, { sub: "x" })))).toBe(true)
    for (const token of [
      await sign(k1, { sub: "x" }, { aud: "someone-else" }),
      await sign(k1, { sub: "x" }, { iss: "https://evil.example" }),
      await sign(k1, { sub: "x" }, { expIn: -10 }),
      await sign(k1, { sub: "x" }, { nbfIn: 600 }),
      await sign(stranger, { sub: "x" }),
      "garbage"
    ]) {
      expect(Option.isNone(await auth(a, token))).toBe(true)
    }
    // No username claim: no user.
    expect(Option.isNone(await auth(a, await sign(k1, {})))).toBe(true)
  })

  it("follows key rotation: new keys verify after a refetch, retired keys stop verifying", async () => {
    const k1 = await makeKey("k1")
    const k2 = await makeKey("k2")
    served = [k1]
    const a = Oidc.authenticator({ issuerUrl: issuer, clientId: "fleet", jwksCooldownMs: 0 })
    const old = await sign(k1, { sub: "x" })
    expect(Option.isSome(await auth(a, old))).toBe(true)
    const before = jwksFetches
    expect(Option.isSome(await auth(a, old))).toBe(true)
    expect(jwksFetches).toBe(before) // cached
    served = [k2]
    expect(Option.isSome(await auth(a, await sign(k2, { sub: "x" })))).toBe(true)
    expect(jwksFetches).toBeGreaterThan(before)
    expect(Option.isNone(await auth(a, old))).toBe(true)
  })

  it("starts without the provider and recovers when it appears", async () => {
    const k1 = await makeKey("k1")
    served = [k1]
    const a = Oidc.authenticator({ issuerUrl: issuer, clientId: "fleet", fetch: () => Promise.reject(new Error("down")) })
    expect(Option.isNone(await auth(a, await sign(k1, { sub: "x" })))).toBe(true)
    let up = false
    const b = Oidc.authenticator({ issuerUrl: issuer, clientId: "fleet", fetch: (url, init) => (up ? fetch(url, init) : Promise.reject(new Error("down"))) })
    expect(Option.isNone(await auth(b, await sign(k1, { sub: "x" })))).toBe(true)
    up = true
    expect(Option.isSome(await auth(b, await sign(k1, { sub: "x" })))).toBe(true)
  })
})
